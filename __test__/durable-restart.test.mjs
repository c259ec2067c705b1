// The durable store keeps its state across restarts and crashes of the processes that use it,
// and two processes that share one file never both hold a claim.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Flowguard, durableFolder, freshPrefix, sleep } from './backends.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const LONG = process.env.FLOWGUARD_LONG === '1'
const file = (tag) => join(durableFolder(), `${tag}-${process.hrtime.bigint()}.db`)

/** Runs the durable child with `env`; resolves to { code, signal, out }. */
function child(env, { killAfterMs } = {}) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [join(here, 'fixtures/durable-child.mjs')], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    p.stdout.on('data', (d) => {
      // A child that is killed starts its clock once it has opened the store.
      if (killAfterMs !== undefined && !out) setTimeout(() => p.kill('SIGKILL'), killAfterMs)
      out += d
    })
    p.stderr.on('data', (d) => (err += d))
    p.on('error', reject)
    p.on('exit', (code, signal) => {
      if (code !== 0 && signal !== 'SIGKILL') reject(new Error(`child exited ${code ?? signal}: ${err}`))
      else resolve({ code, signal, out })
    })
  })
}

test('restart: a new process sees the items, lock, queue and state another left in the file', async () => {
  const env = { FG_PATH: file('restart'), FG_PREFIX: freshPrefix('restart'), MODE: 'write' }
  await child(env)
  // This process never opened the file: everything below comes from the file.
  const fg = await Flowguard.open({ path: env.FG_PATH, prefix: env.FG_PREFIX })
  assert.equal(fg.backend, 'durable')
  assert.equal((await fg.getItem('g', 'done')).status, 'completed')
  const broken = await fg.getItem('g', 'broken')
  assert.equal(broken.status, 'failed')
  assert.equal(broken.lastError, 'it broke')
  const held = await fg.claim('g', 'held')
  assert.equal(held.claimed, false, 'the claim of the exited process still holds')
  assert.equal(held.reason, 'in_progress')
  assert.equal((await fg.claim('g', 'broken')).claimed, true, 'a failed item is claimable again')
  const lock = await fg.getLock('nightly')
  assert.deepEqual([lock.locked, lock.fence, lock.holder], [true, 1, 'child'])
  const waiting = await fg.peek('jobs')
  assert.deepEqual(waiting.map((e) => e.id), ['q2', 'q3'], 'the acked id is gone, the others wait')
  assert.deepEqual(await fg.getState('cursor'), { page: 7 })
  assert.equal(await fg.increment('runs', 1), 4)
  // The same through a second run of the child ("n8n execute" twice): completed stays completed.
  await child({ ...env, FG_PREFIX: env.FG_PREFIX + 'again:' })
  const again = await Flowguard.open({ path: env.FG_PATH, prefix: env.FG_PREFIX + 'again:' })
  assert.equal((await again.claim('g', 'done')).reason, 'completed')
})

test('crash: processes SIGKILLed mid-call; every call that resolved survives, leases of the dead run out', { timeout: 120_000 }, async () => {
  const ROUNDS = LONG ? 40 : 8
  const env = { FG_PATH: file('crash'), FG_PREFIX: freshPrefix('crash'), MODE: 'crash', LOG: file('crash-log') }
  writeFileSync(env.LOG, '')
  for (let round = 0; round < ROUNDS; round++) {
    // Killed at a random moment of its loop of calls: often inside a transaction.
    const r = await child({ ...env, ROUND: String(round) }, { killAfterMs: 20 + Math.floor(Math.random() * 300) })
    assert.equal(r.signal, 'SIGKILL')
  }
  const lines = readFileSync(env.LOG, 'utf8').trim().split('\n').filter(Boolean).map((l) => l.split(' '))
  const of = (k) => lines.filter((l) => l[0] === k).map((l) => l[1])
  const claimed = of('C')
  const done = new Set(of('D'))
  const enqueued = of('E')
  const acked = new Set(of('A'))
  const counts = of('S').map(Number)
  const fences = of('L').map(Number)
  assert.ok(claimed.length >= ROUNDS, `the children got work done before the kills (${claimed.length} claims)`)

  const fg = await Flowguard.open({ path: env.FG_PATH, prefix: env.FG_PREFIX })
  const items = await fg.getItems('g', claimed)
  for (const it of items) {
    if (done.has(it.id)) assert.equal(it.status, 'completed', `completed ${it.id} survived`)
    else assert.ok(['in_progress', 'abandoned', 'completed'].includes(it.status) && it.attempts >= 1, `claim of ${it.id} survived: ${it.status}`)
  }
  const counter = await fg.increment('counter', 0)
  const maxLogged = Math.max(0, ...counts)
  assert.ok(counter === maxLogged || counter === maxLogged + 1, `counter ${counter}: every resolved increment (${maxLogged}) kept, at most one more unlogged`)
  assert.ok((await fg.getLock('crash-lock')).fence >= Math.max(0, ...fences), 'fencing tokens kept')

  // After the leases (300 ms) every claim of the dead is claimable: the work is redone.
  await sleep(400)
  const open = claimed.filter((id) => !done.has(id))
  const redo = await fg.claimBatch('g', claimed)
  const redone = claimed.filter((_, i) => redo.results[i] === 'claimed')
  for (const id of open) {
    const st = items.find((i) => i.id === id).status
    if (st !== 'completed') assert.ok(redone.includes(id), `${id} of a dead process is claimable again`)
  }
  for (const id of done) assert.ok(!redone.includes(id), `completed ${id} is not claimed again`)
  // Queue: every id enqueued and not acked is delivered now (claims of the dead ran out), and no
  // acked id comes back.
  // The one exception: ids of the last batch a child read, whose ack may have committed just
  // before the kill, without its log line.
  const lastRead = new Map()
  for (const l of lines) if (l[0] === 'R') lastRead.set(l[1], (l[2] || '').split(',').filter(Boolean))
  const inFlight = new Set([...lastRead.values()].flat())
  const batch = await fg.readBatch('jobs', { limit: 10_000 })
  const delivered = new Set(batch.ids)
  for (const id of enqueued) {
    if (acked.has(id)) assert.ok(!delivered.has(id), `acked ${id} not delivered again`)
    else assert.ok(delivered.has(id) || inFlight.has(id), `enqueued ${id} survived and is delivered`)
  }
  const ackedUnlogged = enqueued.filter((id) => !acked.has(id) && !delivered.has(id)).length
  console.log(`# durable crash: ${ROUNDS} kills, ${claimed.length} claims (${done.size} completed) and ${enqueued.length} enqueues resolved before them, all there; ${redone.length} items redone; ${ackedUnlogged} ids acked by a call the kill cut before its log line`)
})

/**
 * Runs one durable child per env of `envs` on one file, started together once all have opened it;
 * resolves to what each printed after 'ready'.
 */
async function race(envs) {
  const procs = envs.map((env) => spawn(process.execPath, [join(here, 'fixtures/durable-child.mjs')], { env, stdio: ['pipe', 'pipe', 'inherit'] }))
  const outs = procs.map((p, i) => {
    const { MODE } = envs[i]
    let out = ''
    p.stdout.on('data', (d) => (out += d))
    const exited = new Promise((r) => p.on('exit', (code) => r(code)))
    // A child that exits before it is ready fails the test (instead of leaving the other waiting).
    const ready = new Promise((r, j) => {
      p.stdout.on('data', () => out.startsWith('ready\n') && r())
      exited.then((code) => j(new Error(`${MODE} child exited ${code} before it opened the file`)))
    })
    const done = exited.then((code) => (code === 0 ? out.slice('ready\n'.length) : Promise.reject(new Error(`${MODE} child exited ${code}`))))
    return { ready, done }
  })
  try {
    // All have opened the file: start them at once, so their calls race.
    await Promise.all(outs.map((o) => o.ready))
  } catch (e) {
    for (const p of procs) p.kill('SIGKILL')
    throw e
  }
  for (const p of procs) p.stdin.write('go\n')
  return Promise.all(outs.map((o) => o.done))
}

test('two processes hammering one file: no id is claimed by both', { timeout: 120_000 }, async () => {
  const IDS = LONG ? 5000 : 1000
  const env = { ...process.env, FG_PATH: file('hammer'), FG_PREFIX: freshPrefix('hammer'), MODE: 'hammer', IDS: String(IDS) }
  const [mineA, mineB] = (await race([env, env])).map((o) => JSON.parse(o))
  const both = mineA.filter((id) => new Set(mineB).has(id))
  assert.deepEqual(both, [], 'ids claimed by both processes')
  assert.equal(mineA.length + mineB.length, IDS, 'every id claimed once')
  console.log(`# durable hammer: ${IDS} ids, ${mineA.length} + ${mineB.length} claims, 0 double claims`)
})

// Fairness: a process writing back to back (batch claims, each a long transaction, or single
// claims) must not keep another's writes waiting until ERR_TIMEOUT (the busy timeout, 5 s).
test('two processes writing back to back on one file both make steady progress', { timeout: 60_000 }, async () => {
  const RUN_MS = LONG ? 10_000 : 2_000
  const base = { ...process.env, FG_PATH: file('steady'), FG_PREFIX: freshPrefix('steady'), MODE: 'steady', RUN_MS: String(RUN_MS) }
  const outs = (await race([{ ...base, KIND: 'batch' }, { ...base, KIND: 'single' }])).map((o) => JSON.parse(o))
  for (const [kind, o] of [['batch', outs[0]], ['single', outs[1]]]) {
    assert.deepEqual(o.errors, [], `${kind} claims failed`)
    assert.ok(o.calls >= 5, `the ${kind} process made progress (${o.calls} calls)`)
    // Half the busy timeout: a process that got the file's lock only by luck would wait seconds.
    assert.ok(o.maxGapMs < 2_500, `the ${kind} process never waited long for the other (longest ${o.maxGapMs} ms)`)
  }
  console.log(`# durable fairness: ${RUN_MS} ms, batch process ${outs[0].calls} calls of 2,000 (longest wait ${outs[0].maxGapMs} ms), single process ${outs[1].calls} claims (longest wait ${outs[1].maxGapMs} ms)`)
})
