// Redis stopped and started again under a live client: calls fail fast with a code while it is
// down (no hang, no crash, no unhandled rejection) and succeed again soon after it is back.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { Flowguard, sleep } from './backends.mjs'
import { haveRedis, freePort, startRedis, stopRedis } from './redis-server.mjs'

test('Redis restart under a live client', { skip: !haveRedis && 'redis-server not installed' }, async () => {
  const unhandled = []
  const onUnhandled = (e) => unhandled.push(e)
  process.on('unhandledRejection', onUnhandled)
  const port = await freePort()
  let redis = await startRedis(port)
  try {
    const fg = await Flowguard.open({ url: `redis://127.0.0.1:${port}`, prefix: 'restart:', connectTimeoutMs: 500, commandTimeoutMs: 1000 })
    assert.ok((await fg.claim('g', 'before')).claimed)

    await stopRedis(redis)
    for (let i = 0; i < 5; i++) {
      const t0 = Date.now()
      const e = await fg.claim('g', `down-${i}`).then(() => null, (err) => err)
      const took = Date.now() - t0
      assert.ok(e, 'a call while Redis is down must fail')
      assert.equal(e.code, 'ERR_BACKEND_UNAVAILABLE', e.message)
      assert.ok(took < 1500, `failed after ${took} ms`)
    }
    // Locks fail the same way.
    assert.equal((await fg.acquireLock('l').catch((e) => e)).code, 'ERR_BACKEND_UNAVAILABLE')

    redis = await startRedis(port)
    const back = Date.now()
    let ok = null
    while (Date.now() - back < 2000) {
      ok = await fg.claim('g', 'after').catch(() => null)
      if (ok) break
      await sleep(50)
    }
    assert.ok(ok && ok.claimed, 'calls succeed again within 2 s of Redis being back')
    // A client opened before the restart keeps working for every call after.
    assert.ok((await fg.acquireLock('l')).acquired)
    assert.deepEqual(unhandled, [])
  } finally {
    process.off('unhandledRejection', onUnhandled)
    await stopRedis(redis).catch(() => {})
  }
})

test('a command Redis does not answer in time fails with ERR_TIMEOUT, and the client recovers', { skip: !haveRedis && 'redis-server not installed' }, async () => {
  const port = await freePort()
  const redis = await startRedis(port)
  try {
    const fg = await Flowguard.open({ url: `redis://127.0.0.1:${port}`, prefix: 'timeout:', commandTimeoutMs: 200 })
    assert.ok((await fg.claim('g', 'a')).claimed)
    // CLIENT PAUSE holds every client's commands for 1 s.
    const pause = spawnSync('redis-cli', ['-p', String(port), 'CLIENT', 'PAUSE', '1000', 'ALL'], { encoding: 'utf8' })
    assert.equal(pause.stdout.trim(), 'OK')
    const t0 = Date.now()
    const e = await fg.claim('g', 'b').then(() => null, (err) => err)
    const took = Date.now() - t0
    assert.ok(e, 'the call must fail')
    assert.equal(e.code, 'ERR_TIMEOUT', e.message)
    assert.match(e.message, /200 ms/)
    assert.ok(took < 900, `failed after ${took} ms`)
    await sleep(1100)
    let ok = null
    for (let i = 0; i < 40 && !ok; i++) {
      ok = await fg.getItem('g', 'a').catch(() => null)
      if (!ok) await sleep(50)
    }
    assert.ok(ok, 'the client works again once Redis answers')
    assert.equal(ok.status, 'in_progress')
  } finally {
    await stopRedis(redis)
  }
})
