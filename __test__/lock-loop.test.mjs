// The lock's event-loop connection (src/event_loop_connection/): lock calls from JavaScript go
// over a socket polled by the JavaScript thread's own loop once it is up (redis-rs before that).
// Each case runs a redis-server of its own: the loop connection is used (a second client appears),
// with AUTH, a database number and a Unix socket; a flushed script cache; a command timeout (and
// the late reply that follows it lands on no other call); a restart; a process that used it from
// a worker and the main thread exits by itself. Under Bun and Deno (scripts/test.mjs runs this
// file with them too) the same calls work and no loop connection ever appears: only Node itself
// has the libuv the connection needs.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import net from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Flowguard, sleep } from './backends.mjs'
import { haveRedis, freePort, startRedis, stopRedis } from './redis-server.mjs'
import { startProxy } from './proxy.mjs'

/** Whether this runtime is Node itself (the loop connection is used only there). */
const underNode = !process.versions.bun && !process.versions.deno
const skip = (!haveRedis && 'redis-server not installed') || (process.platform === 'win32' && 'Unix only')
const cli = (args) => spawnSync('redis-cli', args, { encoding: 'utf8' }).stdout.trim()
/** Clients whose last command ran a script: the redis-rs connection (the first lock calls use it)
 * and, once up, the loop connection. */
const scriptClients = (args) => cli([...args, 'CLIENT', 'LIST']).split('\n').filter((l) => / cmd=eval/.test(l)).length

/** Lock calls until the loop connection is up (a second client runs scripts, besides `others` of
 * stores still open), at most ~3 s: whether it came up. */
async function warm(fg, args, others = 0) {
  for (let i = 0; i < 150; i++) {
    const l = await fg.acquireLock('warm')
    assert.ok(l.acquired)
    assert.deepEqual(await fg.releaseLock('warm', l.owner), { released: true })
    if (scriptClients(args) >= others + 2) return true
    await sleep(20)
  }
  return false
}

async function basics(fg) {
  const a = await fg.acquireLock('b', { label: 'run:1', timeoutMs: 5000 })
  assert.ok(a.acquired)
  const busy = await fg.acquireLock('b')
  assert.equal(busy.acquired, false)
  assert.equal(busy.fence, a.fence)
  assert.equal(busy.holder, 'run:1')
  assert.ok(busy.remainingMs > 4000 && busy.remainingMs <= 5000)
  assert.equal((await fg.getLock('b')).holder, 'run:1')
  assert.deepEqual(await fg.releaseLock('b', busy.owner ?? '0'.repeat(32)), { released: false, reason: 'not_owner' })
  assert.equal((await fg.extendLock('b', a.owner, { timeoutMs: 9000 })).extended, true)
  assert.deepEqual(await fg.releaseLock('b', a.owner), { released: true })
  const info = await fg.getLock('b')
  assert.equal(info.locked, false)
  assert.equal(info.fence, a.fence)
}

test('lock calls use the loop connection: plain, with AUTH and a database, on a Unix socket; a flushed script cache', { skip, timeout: 60_000 }, async () => {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'fg-loop-'))
  const sock = join(dir, 'r.sock')
  const redis = await startRedis(port, ['--requirepass', 'pw-loop', '--unixsocket', sock, '--unixsocketperm', '700'])
  const args = ['-p', String(port), '-a', 'pw-loop', '--no-auth-warning']
  try {
    let others = 0
    // Both stores stay referenced to the end: a store collected as garbage closes its connections,
    // and the count of script clients below includes the first store's.
    const stores = []
    for (const url of [`redis://:pw-loop@127.0.0.1:${port}/3`, `redis+unix://${sock}?pass=pw-loop&db=4`]) {
      const fg = await Flowguard.open({ url, prefix: 'loop:' })
      stores.push(fg)
      const loop = await warm(fg, args, others)
      others += loop ? 2 : 1
      assert.equal(loop, underNode, `a loop connection appears under Node only (${url.replace('pw-loop', '***')})`)
      await basics(fg)
      // Redis forgets its scripts: the next call loads it again (EVAL) and works.
      assert.equal(cli([...args, 'SCRIPT', 'FLUSH']), 'OK')
      await basics(fg)
    }
    // Only the loop connection answers NOSCRIPT with EVAL (redis-rs loads the script instead).
    if (underNode) assert.match(cli([...args, 'INFO', 'commandstats']), /cmdstat_eval:calls=[1-9]/)
    else assert.doesNotMatch(cli([...args, 'INFO', 'commandstats']), /cmdstat_eval:/)
    assert.ok(Number(cli([...args, '-n', '3', 'DBSIZE'])) > 0, 'keys in database 3')
    assert.ok(Number(cli([...args, '-n', '4', 'DBSIZE'])) > 0, 'keys in database 4')
    assert.equal(cli([...args, '-n', '0', 'DBSIZE']), '0', 'nothing in database 0')
    for (const fg of stores) await fg.close()
  } finally {
    await stopRedis(redis)
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a lock call Redis does not answer in time fails with ERR_TIMEOUT; the late reply reaches no other call', { skip, timeout: 60_000 }, async () => {
  const port = await freePort()
  const redis = await startRedis(port)
  const args = ['-p', String(port)]
  try {
    const fg = await Flowguard.open({ url: `redis://127.0.0.1:${port}`, prefix: 'loop-timeout:', commandTimeoutMs: 200 })
    assert.equal(await warm(fg, args), underNode)
    const held = await fg.acquireLock('held', { label: 'keeper' })
    assert.equal(cli([...args, 'CLIENT', 'PAUSE', '700', 'ALL']), 'OK')
    const t0 = Date.now()
    const e = await fg.acquireLock('late').then(() => null, (err) => err)
    assert.ok(e, 'the call must fail')
    assert.equal(e.code, 'ERR_TIMEOUT', e.message)
    assert.match(e.message, /200 ms/)
    assert.ok(Date.now() - t0 < 650, `failed after ${Date.now() - t0} ms`)
    await sleep(700)
    // The late acquire ran when the pause ended; its reply was dropped, not given to these calls.
    const info = await fg.getLock('held')
    assert.equal(info.locked, true)
    assert.equal(info.holder, 'keeper')
    assert.equal(info.fence, held.fence)
    assert.equal((await fg.getLock('late')).locked, true)
    const other = await fg.acquireLock('other')
    assert.ok(other.acquired)
    // Its own reply: the fence its acquisition put in its counter.
    assert.equal(String(other.fence), cli([...args, 'GET', 'loop-timeout:{l:other}:fence']))
  } finally {
    await stopRedis(redis)
  }
})

test('a loop connection that went silent is retired after a few timeouts: lock calls work again over new connections', { skip, timeout: 60_000 }, async () => {
  const port = await freePort()
  const redis = await startRedis(port)
  const proxy = await startProxy(port)
  try {
    const fg = await Flowguard.open({ url: `redis://127.0.0.1:${proxy.port}`, prefix: 'loop-silent:', commandTimeoutMs: 200 })
    assert.equal(await warm(fg, ['-p', String(port)]), underNode)
    // Every connection open now (the shared one and the loop one) stops carrying bytes, without
    // an error; connections made later work.
    proxy.blackholeOpen()
    const codes = []
    let ok = false
    for (let i = 0; i < 40 && !ok; i++) {
      try {
        await fg.getLock('x')
        ok = true
      } catch (e) {
        codes.push(e.code)
      }
    }
    assert.ok(ok, `lock calls never recovered: ${codes.join(', ')}`)
    // Each connection is given up after 3 timeouts in a row (the loop one, then the shared one
    // its calls fall back to while the loop one reconnects).
    assert.ok(codes.length <= 8, `${codes.length} failed calls before recovery: ${codes.join(', ')}`)
    assert.ok(codes.every((c) => c === 'ERR_TIMEOUT' || c === 'ERR_BACKEND_UNAVAILABLE'), codes.join(', '))
    const l = await fg.acquireLock('after')
    assert.ok(l.acquired)
  } finally {
    await proxy.close()
    await stopRedis(redis)
  }
})

test('Redis restarted: lock calls fail with ERR_BACKEND_UNAVAILABLE, then work again, and the loop connection comes back', { skip, timeout: 60_000 }, async () => {
  const port = await freePort()
  let redis = await startRedis(port)
  const args = ['-p', String(port)]
  try {
    const fg = await Flowguard.open({ url: `redis://127.0.0.1:${port}`, prefix: 'loop-restart:', connectTimeoutMs: 500, commandTimeoutMs: 2000 })
    assert.equal(await warm(fg, args), underNode)
    const inFlight = Array.from({ length: 20 }, (_, i) => fg.acquireLock(`f${i}`).then(() => 'ok', (e) => e.code))
    await stopRedis(redis)
    const codes = new Set(await Promise.all(inFlight))
    for (const c of codes) assert.ok(c === 'ok' || c === 'ERR_BACKEND_UNAVAILABLE', c)
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now()
      assert.equal((await fg.acquireLock('down').catch((e) => e)).code, 'ERR_BACKEND_UNAVAILABLE')
      assert.ok(Date.now() - t0 < 1500)
    }
    redis = await startRedis(port)
    const back = Date.now()
    let ok = null
    while (!ok && Date.now() - back < 2000) {
      ok = await fg.acquireLock('up').catch(() => null)
      if (!ok) await sleep(50)
    }
    assert.ok(ok?.acquired, 'works again within 2 s')
    assert.equal(await warm(fg, args), underNode, 'the loop connection is back')
    await basics(fg)
  } finally {
    await stopRedis(redis)
  }
})

test('a process that used the loop connection from a worker and the main thread exits by itself', { skip, timeout: 60_000 }, async () => {
  const port = await freePort()
  const redis = await startRedis(port)
  try {
    const index = JSON.stringify(fileURLToPath(new URL('../index.js', import.meta.url)))
    const body = `
      const { Flowguard } = require(${index})
      const go = async () => {
        const fg = await Flowguard.open({ url: 'redis://127.0.0.1:${port}', prefix: 'loop-exit:' })
        let n = 0
        for (let i = 0; i < 300; i++) {
          const name = 'l' + Math.random()
          const l = await fg.acquireLock(name)
          if (l.acquired && (await fg.releaseLock(name, l.owner)).released) n++
          if (i % 50 === 0) await new Promise((r) => setTimeout(r, 10))
        }
        return n
      }`
    const prog = `
      const { Worker } = require('node:worker_threads')
      ${body}
      const w = new Worker(${JSON.stringify(body + '\ngo().then((n) => require("node:worker_threads").parentPort.postMessage(n))')}, { eval: true })
      w.once('message', (n) => console.log('worker', n))
      go().then((n) => console.log('main', n))
    `
    const r = spawnSync(process.execPath, ['-e', prog], { encoding: 'utf8', timeout: 30_000 })
    assert.equal(r.status, 0, r.stderr)
    assert.match(r.stdout, /main 300/)
    assert.match(r.stdout, /worker 300/)
  } finally {
    await stopRedis(redis)
  }
})

test('a reply with a hostile length drops the loop connection cleanly: that call fails, the next ones work', { skip: skip || (!underNode && 'the loop connection runs under Node only'), timeout: 60_000 }, async () => {
  const port = await freePort()
  const redis = await startRedis(port)
  // A proxy in front of Redis; on request, the next reply to the newest client (the loop
  // connection, opened after the redis-rs one) is replaced by a bulk string of 2^63-1 bytes.
  const conns = []
  let poison = false
  const proxy = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1')
    const me = { client }
    conns.push(me)
    client.on('data', (d) => upstream.write(d))
    upstream.on('data', (d) => {
      if (poison && conns[conns.length - 1] === me) {
        poison = false
        client.write('$9223372036854775807\r\n')
      } else client.write(d)
    })
    const end = () => { client.destroy(); upstream.destroy() }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
  })
  await new Promise((r) => proxy.listen(0, '127.0.0.1', r))
  try {
    const fg = await Flowguard.open({ url: `redis://127.0.0.1:${proxy.address().port}`, prefix: 'loop-hostile:', commandTimeoutMs: 2000 })
    assert.ok(await warm(fg, ['-p', String(port)]))
    assert.equal(conns.length, 2)
    poison = true
    const t0 = Date.now()
    const e = await fg.acquireLock('x').then(() => null, (err) => err)
    assert.equal(e?.code, 'ERR_BACKEND_UNAVAILABLE', e?.message)
    assert.ok(Date.now() - t0 < 1000, `failed after ${Date.now() - t0} ms, not at once`)
    // The next calls work (over redis-rs, then over a new loop connection).
    await basics(fg)
    assert.ok(await warm(fg, ['-p', String(port)]), 'a new loop connection comes up')
    assert.ok(conns.length >= 3)
    await basics(fg)
  } finally {
    proxy.close()
    for (const c of conns) c.client.destroy()
    await stopRedis(redis)
  }
})
