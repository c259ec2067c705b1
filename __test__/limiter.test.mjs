// Rate Limiter (GCRA) on every backend: decisions, reservations with slot times, bad input,
// and (Redis) one key per limiter that expires when idle.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { backends, rejection, sleep } from './backends.mjs'
import { connect } from './resp.mjs'

for (const b of backends()) {
  describe(`Rate Limiter on ${b.name}`, () => {
    test('2 per second with burst 1: one now, the next after 500 ms', async () => {
      const fg = await b.open()
      const a = await fg.rateLimit('api', { limit: 2 })
      assert.equal(a.allowed, true)
      assert.deepEqual(a.slotsMs, [0])
      const c = await fg.rateLimit('api', { limit: 2 })
      assert.equal(c.allowed, false)
      assert.equal(c.remaining, 0)
      assert.ok(c.retryAfterMs > 400 && c.retryAfterMs <= 500, `retryAfterMs ${c.retryAfterMs}`)
      assert.deepEqual(c.slotsMs, [])
      await sleep(c.retryAfterMs + 5)
      assert.equal((await fg.rateLimit('api', { limit: 2 })).allowed, true)
      // Another name is another limiter.
      assert.equal((await fg.rateLimit('other', { limit: 2 })).allowed, true)
    })

    test('burst: that many at once, then one per interval; remaining counts down', async () => {
      const fg = await b.open()
      const opts = { limit: 10, periodMs: 1000, burst: 3 }
      const r = []
      for (let i = 0; i < 4; i++) r.push(await fg.rateLimit('b', opts))
      assert.deepEqual(r.map((x) => x.allowed), [true, true, true, false])
      assert.deepEqual(r.slice(0, 3).map((x) => x.remaining), [2, 1, 0])
      assert.ok(r[3].retryAfterMs <= 100)
      assert.ok(r[2].resetAfterMs > 250 && r[2].resetAfterMs <= 300, `resetAfterMs ${r[2].resetAfterMs}`)
      // A cost above burst is never allowed at once: refused as a bad argument, naming it.
      const e = await rejection(fg.rateLimit('b', { ...opts, cost: 4 }))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
      assert.match(e.message, /cost/)
    })

    test('maxWaitMs reserves: each token gets its slot, later callers queue behind, too far is refused', async () => {
      const fg = await b.open()
      const o = { limit: 4, periodMs: 1000, maxWaitMs: 2000 }
      const a = await fg.rateLimit('r', { ...o, cost: 5 })
      assert.equal(a.allowed, true)
      const expect = [0, 250, 500, 750, 1000]
      a.slotsMs.forEach((s, i) => assert.ok(Math.abs(s - expect[i]) < 20, `slot ${i}: ${s}`))
      assert.equal(a.waitMs, a.slotsMs[4])
      const c = await fg.rateLimit('r', { ...o, cost: 2 })
      assert.equal(c.allowed, true)
      assert.ok(c.slotsMs[0] > 1200 && c.slotsMs[1] <= 1500, `${c.slotsMs}`)
      // Tokens not due within maxWaitMs: refused, nothing taken.
      const d = await fg.rateLimit('r', { ...o, cost: 4 })
      assert.equal(d.allowed, false)
      assert.ok(d.retryAfterMs > 2000)
      const e = await fg.rateLimit('r', { ...o, cost: 1 })
      assert.equal(e.allowed, true)
      assert.ok(e.slotsMs[0] > 1450 && e.slotsMs[0] <= 1750, `${e.slotsMs}`)
    })

    test('waitRateLimit resolves when the token is due, in order', async () => {
      const fg = await b.open()
      const o = { limit: 10, periodMs: 1000, maxWaitMs: 1000 }
      const t0 = performance.now()
      const done = []
      await Promise.all([0, 1, 2, 3].map(async (i) => {
        const r = await fg.waitRateLimit('w', o)
        assert.equal(r.allowed, true)
        done.push(performance.now() - t0)
      }))
      done.sort((x, y) => x - y)
      // Four tokens at 10/s: the last is due 300 ms after the first.
      assert.ok(done[3] - done[0] >= 280, `${done}`)
      const far = await fg.waitRateLimit('w', { ...o, maxWaitMs: 0, cost: 1 })
      assert.equal(far.allowed, false)
    })

    test('bad options are refused, naming the field', async () => {
      const fg = await b.open()
      for (const [opts, field] of [
        [{ limit: 0 }, 'limit'],
        [{ limit: 1.5 }, 'limit'],
        [{ limit: 2, periodMs: 0 }, 'periodMs'],
        [{ limit: 2, burst: 0 }, 'burst'],
        [{ limit: 2, maxWaitMs: -1 }, 'maxWaitMs'],
        [{ limit: 2, cost: 'x' }, 'cost'],
        [{ limit: 2, other: 1 }, 'other'],
        [{}, 'limit'],
      ]) {
        const e = await rejection(fg.rateLimit('x', opts))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', JSON.stringify(opts))
        assert.match(e.message, new RegExp(field), `${JSON.stringify(opts)}: ${e.message}`)
      }
      assert.equal((await rejection(fg.rateLimit('', { limit: 1 }))).code, 'ERR_INVALID_ARGUMENT')
    })

    test('pauseRateLimit: another client of the store is refused until the pause ends, never shortened', async () => {
      const fg = await b.open()
      const other = await b.open({ prefix: fg.prefix })
      const o = { limit: 100, periodMs: 1000, burst: 5 }
      assert.equal((await other.rateLimit('up', o)).allowed, true)
      const p = await fg.pauseRateLimit('up', { retryAfter: 30 })
      assert.equal(p.active, true)
      assert.ok(p.pauseMs > 29000 && p.pauseMs <= 30000, `pauseMs ${p.pauseMs}`)
      const end = p.pausedUntil
      const r = await other.rateLimit('up', o)
      assert.equal(r.allowed, false)
      assert.equal(r.remaining, 0)
      assert.ok(Math.abs(r.decidedAt + r.retryAfterMs - end) < 0.01, `${r.decidedAt} + ${r.retryAfterMs} vs ${end}`)
      assert.equal((await other.getRateLimit('up')).pausedUntil, end)
      // A shorter pause (seconds as a string, or untilMs) leaves the longer one.
      assert.equal((await other.pauseRateLimit('up', { retryAfter: '2' })).pausedUntil, end)
      assert.equal((await other.pauseRateLimit('up', { untilMs: Date.now() + 1000 })).pausedUntil, end)
      // waitRateLimit: refused at once when the pause outlasts maxWaitMs.
      const t0 = performance.now()
      const w = await other.waitRateLimit('up', { ...o, maxWaitMs: 1000 })
      assert.equal(w.allowed, false)
      assert.ok(performance.now() - t0 < 1000, 'it did not wait')
      assert.ok(Math.abs(w.decidedAt + w.retryAfterMs - end) < 0.01)
      await other.close()
    })

    test('pauseRateLimit: retryAfter as an HTTP-date; a date in the past pauses nothing; waitRateLimit waits for the end', async () => {
      const fg = await b.open()
      const other = await b.open({ prefix: fg.prefix })
      const date = new Date(Date.now() + 90_000).toUTCString()
      const p = await fg.pauseRateLimit('d', { retryAfter: date })
      assert.equal(p.pausedUntil, Math.floor(Date.parse(date)))
      assert.equal((await other.rateLimit('d', { limit: 10 })).allowed, false)
      const past = await fg.pauseRateLimit('fresh', { retryAfter: 'Sun, 06 Nov 1994 08:49:37 GMT' })
      assert.equal(past.pausedUntil, undefined)
      assert.equal((await other.rateLimit('fresh', { limit: 10 })).allowed, true)
      // A short pause: waitRateLimit resolves allowed once it has ended.
      const s = await fg.pauseRateLimit('short', { untilMs: Date.now() + 300 })
      const w = await other.waitRateLimit('short', { limit: 10, maxWaitMs: 5000 })
      assert.equal(w.allowed, true)
      assert.ok(Date.now() >= Math.floor(s.pausedUntil), `resolved at ${Date.now()}, pause end ${s.pausedUntil}`)
      await other.close()
    })

    test('pauseRateLimit: bad input is refused naming the field and the value', async () => {
      const fg = await b.open()
      for (const [opts, field, value] of [
        [{ retryAfter: 'soon' }, 'retryAfter', 'soon'],
        [{ retryAfter: -1 }, 'retryAfter', '-1'],
        [{ retryAfter: 1.5 }, 'retryAfter', '1.5'],
        [{ retryAfter: '31536001' }, 'retryAfter', '31536001'],
        [{ untilMs: Date.now() + 366 * 86_400_000 }, 'untilMs', '365 days'],
        [{ untilMs: 1.5 }, 'untilMs', '1.5'],
        [{ untilMs: 1, retryAfter: 1 }, 'retryAfter', 'both'],
        [{}, 'retryAfter', 'required'],
      ]) {
        const e = await rejection(fg.pauseRateLimit('x', opts))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', JSON.stringify(opts))
        assert.equal(e.field?.replace(/^options\./, ''), field, `${JSON.stringify(opts)}: ${e.message}`)
        assert.ok(e.message.includes(value), `${JSON.stringify(opts)}: ${e.message}`)
      }
      assert.equal((await fg.getRateLimit('x')).pausedUntil, undefined, 'nothing was paused')
    })

    if (b.name === 'redis') {
      test('one key per limiter, in the name\'s hash slot, expiring when the limiter is full again', async () => {
        const fg = await b.open()
        const r = await connect(process.env.REDIS_URL)
        try {
          await fg.rateLimit('idle', { limit: 5, periodMs: 1000, cost: 3, burst: 3 })
          const keys = await r.scanAll(`${fg.prefix}*`)
          assert.deepEqual(keys, [`${fg.prefix}{rl:idle}`])
          const pttl = await r.call('PTTL', keys[0])
          // Set to the time until the limiter is full again (600 ms); read up to 300 ms later on a loaded machine.
          assert.ok(pttl > 300 && pttl <= 600, `PTTL ${pttl}`)
          await sleep(650)
          assert.deepEqual(await r.scanAll(`${fg.prefix}*`), [])
          await r.call('SET', `${fg.prefix}{rl:bad}`, 'not a number')
          const e = await rejection(fg.rateLimit('bad', { limit: 1 }))
          assert.equal(e.code, 'ERR_BACKEND')
          assert.match(e.message, /flowguard did not write/)
        } finally {
          r.close()
        }
      })
    }
  })
}
