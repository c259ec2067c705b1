// once() never runs fn twice because storing its result failed (issue 13.2): Redis is shut down
// (saving its data, as a restart with persistence does) between fn and the store. The call
// fails with ERR_RESULT_NOT_STORED carrying fn's result; the key stays pending, so a retry
// after the restart waits instead of running fn again, until the key's lease has ended.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Flowguard, rejection, sleep } from './backends.mjs'
import { haveRedis, freePort, startRedis, stopRedis } from './redis-server.mjs'
import { startProxy } from './proxy.mjs'

test('Redis restarted between fn and the store: ERR_RESULT_NOT_STORED, the key stays pending', { skip: !haveRedis && 'redis-server not installed', timeout: 60_000 }, async () => {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'flowguard-once-'))
  let redis = await startRedis(port, ['--dir', dir])
  try {
    const fg = await Flowguard.open({ url: `redis://127.0.0.1:${port}`, prefix: 'once-store:', connectTimeoutMs: 300, commandTimeoutMs: 1000 })
    let runs = 0
    const leaseMs = 4000
    const t0 = Date.now()
    const e = await rejection(fg.once('pay:1', () => {
      runs++
      // SHUTDOWN SAVE writes the pending marker to disk: the restart below brings it back.
      const r = spawnSync('redis-cli', ['-p', String(port), 'shutdown', 'save'], { encoding: 'utf8' })
      assert.equal(r.status, 0, r.stderr)
      return { paid: 42 }
    }, { leaseMs }))
    assert.equal(runs, 1)
    assert.equal(e.code, 'ERR_RESULT_NOT_STORED', e.message)
    assert.deepEqual(e.value, { paid: 42 })
    assert.ok(['ERR_BACKEND_UNAVAILABLE', 'ERR_TIMEOUT'].includes(e.cause?.code), `cause ${e.cause?.code}`)
    assert.match(e.message, /fn ran/)
    assert.match(e.message, /not stored/)
    assert.match(e.message, /stays claimed/)
    assert.ok(e.leaseExpiresAt > t0 && e.leaseExpiresAt <= Date.now() + leaseMs, `leaseExpiresAt ${e.leaseExpiresAt}`)
    await stopRedis(redis)
    redis = await startRedis(port, ['--dir', dir])

    // Within the lease, a retry waits and does not run fn.
    let retried = 0
    const waited = await rejection(fg.once('pay:1', () => { retried++; return 'again' }, { leaseMs, waitMs: 200 }))
    assert.equal(waited.code, 'ERR_TIMEOUT', waited.message)
    assert.equal(retried, 0)
    assert.equal((await fg.claimKey('pay:1')).status, 'pending')
    // After the lease, as the message says, a retry runs fn again.
    await sleep(Math.max(0, e.leaseExpiresAt - Date.now()) + 100)
    assert.deepEqual(await fg.once('pay:1', () => { retried++; return 'again' }), { value: 'again', ran: true })
    assert.equal(retried, 1)
  } finally {
    await stopRedis(redis)
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a store that hangs (black-holed connection) does not free the key either', { skip: !process.env.REDIS_URL && 'needs REDIS_URL', timeout: 30_000 }, async () => {
  const proxy = await startProxy(Number(new URL(process.env.REDIS_URL).port))
  try {
    const prefix = `once-hang:${Date.now()}:`
    const fg = await Flowguard.open({ url: `redis://127.0.0.1:${proxy.port}`, prefix, commandTimeoutMs: 300 })
    const direct = await Flowguard.open({ url: process.env.REDIS_URL, prefix })
    let runs = 0
    const e = await rejection(fg.once('pay:2', () => {
      runs++
      proxy.blackhole(true)
      return 'paid'
    }, { leaseMs: 60_000 }))
    assert.equal(runs, 1)
    assert.equal(e.code, 'ERR_RESULT_NOT_STORED', e.message)
    assert.equal(e.cause?.code, 'ERR_TIMEOUT')
    assert.equal(e.value, 'paid')
    const claim = await direct.claimKey('pay:2')
    assert.equal(claim.status, 'pending', 'the key was not released')
    assert.ok(claim.remainingMs > 50_000)
  } finally {
    await proxy.close()
  }
})

test('fn that throws, or a result that cannot be stored, still frees the key', { skip: !process.env.REDIS_URL && 'needs REDIS_URL' }, async () => {
  const fg = await Flowguard.open({ url: process.env.REDIS_URL, prefix: `once-free:${Date.now()}:` })
  const boom = new Error('declined')
  assert.equal(await rejection(fg.once('a', () => { throw boom })), boom)
  assert.equal((await rejection(fg.once('b', () => 10n))).code, 'ERR_INVALID_ARGUMENT')
  assert.equal((await rejection(fg.once('c', () => 'é'.repeat(600_000)))).code, 'ERR_INVALID_ARGUMENT')
  for (const k of ['a', 'b', 'c']) assert.deepEqual(await fg.once(k, () => k), { value: k, ran: true })
})
