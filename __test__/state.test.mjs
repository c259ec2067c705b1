// Job State: values, counters and idempotency, on every available backend.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { backends, sleep, rejection } from './backends.mjs'

const MiB = 1024 * 1024

for (const b of backends()) {
  describe(`state on ${b.name}`, () => {
    test('get, set and delete JSON values', async () => {
      const fg = await b.open()
      assert.equal(await fg.getState('missing'), undefined)
      const values = {
        obj: { a: 1, nested: { list: [1, 'two', null, true] }, 'ü🚀': 'x' },
        arr: [1, 2, 3],
        str: 'hello',
        num: 12.5,
        yes: true,
        nil: null,
        date: new Date(0),
      }
      for (const [k, v] of Object.entries(values)) {
        const r = await fg.setState(k, v)
        assert.equal(r.written, true)
        assert.equal(r.expiresAt, undefined)
      }
      for (const [k, v] of Object.entries(values)) {
        assert.deepEqual(await fg.getState(k), JSON.parse(JSON.stringify(v)), k)
      }
      assert.deepEqual(await fg.getStates(['nil', 'missing', 'num']), [null, undefined, 12.5])
      assert.equal(await fg.deleteState('obj'), true)
      assert.equal(await fg.deleteState('obj'), false)
      assert.equal(await fg.getState('obj'), undefined)
    })

    test('a TTL expires a value; a later set without one keeps it', async () => {
      const fg = await b.open()
      const before = Date.now()
      const r = await fg.setState('k', { v: 1 }, { ttlMs: 1000 })
      assert.ok(r.expiresAt >= before + 1000 - 50 && r.expiresAt <= Date.now() + 1000 + 50, `expiresAt ${r.expiresAt}`)
      const [entry] = await fg.getStateJson(['k'])
      assert.equal(entry.found, true)
      assert.equal(entry.expiresAt, r.expiresAt)
      await sleep(1300)
      assert.equal(await fg.getState('k'), undefined)
      await fg.setState('p', 1, { ttlMs: 1000 })
      const kept = await fg.setState('p', 2)
      assert.equal(kept.expiresAt, undefined)
      await sleep(1300)
      assert.equal(await fg.getState('p'), 2)
    })

    test('an absolute expiry expires a value at that time; a past one is refused', async () => {
      const fg = await b.open()
      const at = Date.now() + 800
      const r = await fg.setState('k', 'v', { expiresAt: at })
      assert.equal(r.expiresAt, at)
      await sleep(1100)
      assert.equal(await fg.getState('k'), undefined)
      await fg.setState('k', 'kept')
      const e = await rejection(fg.setState('k', 'new', { expiresAt: Date.now() - 1000 }))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
      assert.match(e.message, /expiresAt/)
      assert.equal(await fg.getState('k'), 'kept')
      const both = await rejection(fg.setState('k', 'new', { expiresAt: Date.now() + 5000, ttlMs: 5000 }))
      assert.equal(both.code, 'ERR_INVALID_ARGUMENT')
      assert.equal(await fg.getState('k'), 'kept')
    })

    test('a conditional set writes only when the key is absent', async () => {
      const fg = await b.open()
      const first = await fg.setState('k', { owner: 'a' }, { ifAbsent: true })
      assert.deepEqual([first.written, first.value], [true, { owner: 'a' }])
      const second = await fg.setState('k', { owner: 'b' }, { ifAbsent: true, ttlMs: 5000 })
      assert.equal(second.written, false)
      assert.deepEqual(second.value, { owner: 'a' })
      assert.equal(second.expiresAt, undefined)
      assert.deepEqual(await fg.getState('k'), { owner: 'a' })
      const racers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => fg.setState('race', i, { ifAbsent: true })),
      )
      assert.equal(racers.filter((r) => r.written).length, 1)
      const winner = racers.find((r) => r.written).value
      for (const r of racers) assert.equal(r.value, winner)
    })

    test('50 concurrent increments sum exactly', async () => {
      const fg = await b.open()
      const other = await b.open({ prefix: fg.prefix })
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => (i % 2 ? other : fg).increment('hits')),
      )
      assert.deepEqual([...results].sort((x, y) => x - y), Array.from({ length: 50 }, (_, i) => i + 1))
      assert.equal(await fg.getState('hits'), 50)
      assert.equal(await fg.increment('hits', -60), -10)
      assert.equal(await fg.increment('hits', 15), 5)
      const sums = await Promise.all(Array.from({ length: 50 }, () => fg.increment('by3', 3)))
      assert.equal(Math.max(...sums), 150)
      assert.equal(await fg.getState('by3'), 150)
    })

    test('an increment TTL applies to a new counter and is kept by later increments', async () => {
      const fg = await b.open()
      assert.equal(await fg.increment('win', 1, { ttlMs: 1000 }), 1)
      const [e1] = await fg.getStateJson(['win'])
      assert.equal(typeof e1.expiresAt, 'number')
      assert.equal(await fg.increment('win', 1, { ttlMs: 60000 }), 2)
      const [e2] = await fg.getStateJson(['win'])
      assert.ok(Math.abs(e2.expiresAt - e1.expiresAt) < 50, 'the window was not extended')
      await sleep(1300)
      assert.equal(await fg.getState('win'), undefined)
      assert.equal(await fg.increment('win'), 1)
      assert.equal((await fg.getStateJson(['win']))[0].expiresAt, undefined)
    })

    test('increments that cannot apply are coded errors and change nothing', async () => {
      const fg = await b.open()
      await fg.setState('obj', { a: 1 })
      await fg.setState('frac', 1.5)
      for (const k of ['obj', 'frac']) {
        const e = await rejection(fg.increment(k))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
      }
      assert.deepEqual(await fg.getState('obj'), { a: 1 })
      await fg.increment('big', Number.MAX_SAFE_INTEGER)
      const over = await rejection(fg.increment('big', 1))
      assert.equal(over.code, 'ERR_INVALID_ARGUMENT')
      assert.equal(await fg.getState('big'), Number.MAX_SAFE_INTEGER)
      for (const by of [1.5, NaN, Infinity, 2 ** 60, '1']) {
        const e = await rejection(fg.increment('c', by))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', `by ${by}`)
      }
      assert.equal(await fg.getState('c'), undefined)
    })

    test('non-JSON and oversized values are coded errors and nothing is written', async () => {
      const fg = await b.open()
      const cycle = { a: 1 }
      cycle.self = cycle
      const bad = {
        undefined: undefined,
        function: () => 1,
        symbol: Symbol('s'),
        bigint: 10n,
        nan: NaN,
        infinity: Infinity,
        cycle,
        nestedFunction: { a: { b: [1, () => 2] } },
        nestedUndefined: { a: undefined },
        nestedBigint: [1, 2n],
        oversized: 'x'.repeat(MiB),
      }
      for (const [name, v] of Object.entries(bad)) {
        const e = await rejection(fg.setState(name, v))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', name)
        assert.match(e.message, /value/, name)
        assert.equal(await fg.getState(name), undefined, `${name} was not written`)
      }
      // Exactly at the limit is fine: a JSON string of 1 MiB including its quotes.
      assert.equal((await fg.setState('fits', 'x'.repeat(MiB - 2))).written, true)
      assert.equal((await fg.getState('fits')).length, MiB - 2)
      for (const json of ['{bad', '', 'undefined', '1 2']) {
        const e = await rejection(fg.setStateJson('raw', json))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', json)
      }
      assert.equal(await fg.getState('raw'), undefined)
      for (const key of ['', 'k'.repeat(1025), 5]) {
        assert.equal((await rejection(fg.setState(key, 1))).code, 'ERR_INVALID_ARGUMENT')
      }
      assert.equal((await rejection(fg.setState('t', 1, { ttlMs: 0 }))).code, 'ERR_INVALID_ARGUMENT')
      assert.equal(await fg.getState('t'), undefined)
    })

    test('50 concurrent idempotent calls run the function once', async () => {
      const fg = await b.open()
      const other = await b.open({ prefix: fg.prefix })
      let runs = 0
      const fn = async () => {
        runs++
        await sleep(100)
        return { order: 'A-1', total: 42 }
      }
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => (i % 2 ? other : fg).once('order:A-1', fn)),
      )
      assert.equal(runs, 1)
      assert.equal(results.filter((r) => r.ran).length, 1)
      for (const r of results) assert.deepEqual(r.value, { order: 'A-1', total: 42 })
      const later = await fg.once('order:A-1', fn)
      assert.deepEqual(later, { value: { order: 'A-1', total: 42 }, ran: false })
      assert.equal(runs, 1)
    })

    test('a throwing function frees the key so a retry runs', async () => {
      const fg = await b.open()
      const boom = new Error('payment API down')
      const e = await rejection(fg.once('pay:1', async () => { throw boom }))
      assert.equal(e, boom)
      const retry = await fg.once('pay:1', () => 'paid')
      assert.deepEqual(retry, { value: 'paid', ran: true })
      // Concurrent callers: the first run throws, one waiting caller then runs it again.
      let calls = 0
      const flaky = async () => {
        calls++
        await sleep(50)
        if (calls === 1) throw new Error('first attempt fails')
        return calls
      }
      const settled = await Promise.allSettled(Array.from({ length: 10 }, () => fg.once('pay:2', flaky)))
      assert.equal(settled.filter((s) => s.status === 'rejected').length, 1)
      assert.equal(calls, 2)
      for (const s of settled.filter((x) => x.status === 'fulfilled')) assert.equal(s.value.value, 2)
    })

    test('idempotent results: undefined kept, TTL honoured, non-JSON results free the key', async () => {
      const fg = await b.open()
      assert.deepEqual(await fg.once('u', () => undefined), { value: undefined, ran: true })
      assert.deepEqual(await fg.once('u', () => 'other'), { value: undefined, ran: false })
      await fg.once('short', () => 1, { ttlMs: 500 })
      await sleep(800)
      assert.deepEqual(await fg.once('short', () => 2), { value: 2, ran: true })
      const e = await rejection(fg.once('fnres', () => () => 1))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
      assert.deepEqual(await fg.once('fnres', () => 'fine'), { value: 'fine', ran: true })
      const big = await rejection(fg.once('bigres', () => 'x'.repeat(MiB)))
      assert.equal(big.code, 'ERR_INVALID_ARGUMENT')
      assert.deepEqual(await fg.once('bigres', () => 'small'), { value: 'small', ran: true })
      assert.equal((await rejection(fg.once('k', 'not a function'))).code, 'ERR_INVALID_ARGUMENT')
      let ran = false
      const badTtl = await rejection(fg.once('k', () => { ran = true }, { ttlMs: -1 }))
      assert.equal(badTtl.code, 'ERR_INVALID_ARGUMENT')
      assert.equal(ran, false)
    })

    test('a waiting caller gives up after waitMs; a stale runner cannot store its result', async () => {
      const fg = await b.open()
      const claim = await fg.claimKey('job', { leaseMs: 300 })
      assert.equal(claim.status, 'claimed')
      const waited = await rejection(fg.once('job', () => 'second', { waitMs: 100 }))
      assert.equal(waited.code, 'ERR_TIMEOUT')
      // The first runner's lease runs out; another caller takes the key and runs.
      await sleep(400)
      assert.deepEqual(await fg.once('job', () => 'second'), { value: 'second', ran: true })
      const stale = await rejection(fg.completeKey('job', claim.owner, '"first"'))
      assert.equal(stale.code, 'ERR_NOT_OWNER')
      assert.equal(await fg.releaseKey('job', claim.owner), false)
      assert.deepEqual(await fg.once('job', () => 'third'), { value: 'second', ran: false })
    })
  })
}
