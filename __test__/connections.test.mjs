// Redis connections: close() and `await using`, connections shared by clients of the same
// settings and closed with the last of them, and clients opened and closed in numbers leaving no
// connections behind (counted by CLIENT LIST on the server).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Flowguard, freshPrefix, rejection, sleep } from './backends.mjs'
import { connect } from './resp.mjs'

const url = process.env.REDIS_URL
const skip = !url && 'REDIS_URL not set'

/** Connections the server has now, other than the counting one. */
async function connections(r) {
  return (await r.call('CLIENT', 'LIST')).trim().split('\n').length - 1
}

/** Waits until the server counts at most `n` connections besides ours (closing takes a moment,
 * longer on a loaded machine: up to 10 s, returning as soon as it is so). */
async function settlesAt(r, n) {
  let c
  for (let i = 0; i < 500; i++) {
    c = await connections(r)
    if (c <= n) return c
    await sleep(20)
  }
  return c
}

test('a closed client refuses calls with ERR_CLOSED; another one of the same settings goes on', { skip }, async () => {
  const prefix = freshPrefix('close')
  const a = await Flowguard.open({ url, prefix })
  const b = await Flowguard.open({ url, prefix })
  assert.equal((await a.claim('g', 'x')).claimed, true)
  await a.close()
  await a.close()
  for (const call of [() => a.claim('g', 'y'), () => a.acquireLock('l'), () => a.enqueue('q', 'i'), () => a.getState('s')]) {
    const e = await rejection(call())
    assert.equal(e.code, 'ERR_CLOSED')
  }
  assert.equal((await b.claim('g', 'y')).claimed, true)
  assert.equal((await b.acquireLock('l')).acquired, true)
  await b.close()
})

test('Symbol.asyncDispose (await using) closes the client', { skip: skip || (typeof Symbol.asyncDispose !== 'symbol' && 'no Symbol.asyncDispose') }, async () => {
  let kept
  {
    const fg = await Flowguard.open({ url, prefix: freshPrefix('dispose') })
    kept = fg
    await fg[Symbol.asyncDispose]()
  }
  assert.equal((await rejection(kept.claim('g', 'x'))).code, 'ERR_CLOSED')
})

test('1,000 clients opened with distinct timeouts and closed leave no connections behind', { skip }, async () => {
  const r = await connect(url)
  // Closed whatever happens: a counting connection left open would keep this file's process
  // alive after a failed assertion, and the run would wait for it forever.
  try {
    await clientsLeaveNoConnections(r)
  } finally {
    r.close()
  }
})

async function clientsLeaveNoConnections(r) {
  const before = await connections(r)
  const prefix = freshPrefix('pool')
  for (let i = 0; i < 1000; i++) {
    const fg = await Flowguard.open({ url, prefix, commandTimeoutMs: 5000 + i })
    await fg.acquireLock(`l${i % 10}`)
    await fg.claim('g', `i${i}`)
    await fg.close()
  }
  const after = await settlesAt(r, before + 2)
  console.log(`# connections: ${before} before 1,000 open/close rounds with distinct commandTimeoutMs, ${after} after`)
  assert.ok(after <= before + 2, `${after - before} connections left behind`)
  // Open clients keep theirs: one shared connection for all clients of the same settings.
  const open = await Promise.all(Array.from({ length: 50 }, () => Flowguard.open({ url, prefix, commandTimeoutMs: 4321 })))
  await Promise.all(open.map((fg, i) => fg.claim('g', `o${i}`)))
  // Clients that raced to connect keep the first connection; the others close (give them time).
  const shared = await settlesAt(r, after + 2)
  assert.ok(shared - after <= 2, `${shared - after} connections for 50 clients of the same settings`)
  await Promise.all(open.map((fg) => fg.close()))
  assert.ok((await settlesAt(r, after)) <= after)
}

test('a process that used a client exits by itself, closed or not', { skip }, () => {
  const index = fileURLToPath(new URL('../index.js', import.meta.url))
  for (const close of [true, false]) {
    const script = `const { Flowguard } = require(${JSON.stringify(index)});
      (async () => {
        const fg = await Flowguard.open({ url: ${JSON.stringify(url)}, prefix: 'test:exit:' })
        await fg.acquireLock('l'); await fg.claim('g', 'x'); await fg.enqueue('q', 'i')
        ${close ? 'await fg.close()' : ''}
      })()`
    const t0 = Date.now()
    const p = spawnSync(process.execPath, ['-e', script], { timeout: 10_000, encoding: 'utf8' })
    assert.equal(p.status, 0, `close ${close}: ${p.stderr} ${p.signal ?? ''}`)
    assert.ok(Date.now() - t0 < 10_000)
  }
})
