// Redis restart under load: 32 loops of claims, completions, lock acquire/release and reads are in
// flight when redis-server is killed; they fail fast with ERR_BACKEND_UNAVAILABLE (no hang: every
// call settles; no crash; no unhandled rejection; no other code), and succeed again within 2 s of
// Redis being back (the requirement of issue 5; the time seen is printed). Three restarts.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Flowguard, sleep } from './backends.mjs'
import { haveRedis, freePort, startRedis, stopRedis } from './redis-server.mjs'

const LONG = process.env.FLOWGUARD_LONG === '1'
const RESTARTS = LONG ? 10 : 3
const LOOPS = 32

test(`Redis restarted ${RESTARTS}× under ${LOOPS} loops of calls in flight`, { skip: !haveRedis && 'redis-server not installed', timeout: 120_000 }, async () => {
  const unhandled = []
  const onUnhandled = (e) => unhandled.push(e)
  process.on('unhandledRejection', onUnhandled)
  const port = await freePort()
  let redis = await startRedis(port)
  const fg = await Flowguard.open({ url: `redis://127.0.0.1:${port}`, prefix: 'restart-load:', connectTimeoutMs: 500, commandTimeoutMs: 2000 })
  const codes = new Map()
  let started = 0
  let settled = 0
  let ok = 0
  let slowestFailureMs = 0
  let stop = false
  const call = async (p) => {
    started++
    const t0 = Date.now()
    try {
      await p()
      ok++
      return true
    } catch (e) {
      codes.set(e.code, (codes.get(e.code) || 0) + 1)
      if (e.code !== 'ERR_BACKEND_UNAVAILABLE') console.log(`# unexpected: ${e.code} ${e.message}`)
      slowestFailureMs = Math.max(slowestFailureMs, Date.now() - t0)
      return false
    } finally {
      settled++
    }
  }
  const loops = Array.from({ length: LOOPS }, async (_, w) => {
    let i = 0
    while (!stop) {
      i++
      const id = `w${w}-${i}`
      switch (i % 4) {
        case 0: {
          let owner
          if (await call(async () => { owner = (await fg.claim('g', id, { timeoutMs: 60000 })).owner })) await call(() => fg.complete('g', id, { owner }))
          break
        }
        case 1: {
          let l
          if (await call(async () => { l = await fg.acquireLock(`lock-${w}`, { timeoutMs: 60000 }) }) && l.acquired) await call(() => fg.releaseLock(`lock-${w}`, l.owner))
          break
        }
        case 2:
          await call(() => fg.claimMany('batch', [`${id}-a`, `${id}-b`, `${id}-c`]))
          break
        default:
          await call(() => fg.getItem('g', id))
      }
      // While Redis is down failures come back at once: pace the loops a little.
      await sleep(1)
    }
  })
  const recoveries = []
  try {
    await sleep(300)
    for (let k = 0; k < RESTARTS; k++) {
      const okBefore = ok
      await stopRedis(redis)
      const errorsBefore = codes.get('ERR_BACKEND_UNAVAILABLE') || 0
      await sleep(500)
      assert.ok((codes.get('ERR_BACKEND_UNAVAILABLE') || 0) > errorsBefore, 'calls fail while Redis is down')
      redis = await startRedis(port)
      const back = Date.now()
      // The first success after Redis is back, by a fresh probe (the loops keep going too).
      let recovered = null
      while (Date.now() - back < 5000) {
        if (await fg.getLock('probe').then(() => true, () => false)) {
          recovered = Date.now() - back
          break
        }
        await sleep(10)
      }
      assert.ok(recovered !== null, 'calls succeed again after Redis is back')
      recoveries.push(recovered)
      const okAtRecovery = ok
      await sleep(300)
      assert.ok(ok > okAtRecovery && ok > okBefore, 'the loops succeed again')
    }
  } finally {
    stop = true
    await Promise.all(loops)
    process.off('unhandledRejection', onUnhandled)
    await stopRedis(redis).catch(() => {})
  }
  assert.equal(settled, started, 'every call settled (none hangs)')
  assert.deepEqual([...codes.keys()].filter((c) => c !== 'ERR_BACKEND_UNAVAILABLE'), [], 'only ERR_BACKEND_UNAVAILABLE while Redis is down')
  assert.deepEqual(unhandled, [])
  assert.ok(Math.max(...recoveries) < 2000, `success within 2 s of Redis being back (saw ${recoveries.join(', ')} ms)`)
  console.log(`# restart under load: ${started} calls, ${ok} ok, ${codes.get('ERR_BACKEND_UNAVAILABLE') || 0} ERR_BACKEND_UNAVAILABLE (slowest failure ${slowestFailureMs} ms), back after ${recoveries.join(', ')} ms`)
})
