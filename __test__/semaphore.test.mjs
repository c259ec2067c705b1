// Semaphore on every backend: N permits with leases, owner tokens, fencing tokens, waiting.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { backends, rejection, sleep } from './backends.mjs'
import { connect } from './resp.mjs'

/** Redis (a server or a Cluster) and PostgreSQL give fences of at least their clock in µs; the
 * in-process stores count 1, 2, 3… */
const clockFences = (b) => b.name === 'redis' || b.name === 'cluster' || b.name === 'postgres'

/** The next grant's fence after `prev`: one more in memory and in the file; above it on Redis and PostgreSQL. */
function nextFence(b, fence, prev) {
  if (clockFences(b)) assert.ok(fence > prev, `fence ${fence} after ${prev}`)
  else assert.equal(fence, prev + 1)
}

for (const b of backends()) {
  describe(`Semaphore on ${b.name}`, () => {
    test('30 concurrent acquires of 3 permits: exactly 3 win, with distinct increasing fences', async () => {
      const fg = await b.open()
      const r = await Promise.all(Array.from({ length: 30 }, (_, i) => fg.acquirePermit('api', { permits: 3, label: `run-${i}` })))
      const won = r.filter((x) => x.acquired)
      assert.equal(won.length, 3)
      // Consecutive (1, 2, 3 in memory and in the file); on Redis and PostgreSQL increasing, each at
      // least the backend's clock in µs (so a failover that lost the counter's last writes cannot
      // repeat one).
      const fences = won.map((x) => x.fence).sort((a, b) => a - b)
      if (clockFences(b)) assert.ok(fences[0] < fences[1] && fences[1] < fences[2], String(fences))
      else assert.deepEqual(fences, [fences[0], fences[0] + 1, fences[0] + 2])
      if (b.name === 'embedded' || b.name === 'durable') assert.equal(fences[0], 1)
      for (const x of r.filter((x) => !x.acquired)) {
        assert.equal(x.holders, 3)
        assert.equal(x.owner, undefined)
        assert.ok(x.remainingMs > 590000)
      }
      const info = await fg.getSemaphore('api')
      assert.equal(info.holders.length, 3)
      assert.equal(info.fence, fences[2])
      assert.ok(info.holders.every((h) => /^run-\d+$/.test(h.label)))
    })

    test('release and extend by the owner only; a released permit is taken again', async () => {
      const fg = await b.open()
      const a = await fg.acquirePermit('s', { permits: 1 })
      assert.equal((await fg.acquirePermit('s', { permits: 1 })).acquired, false)
      const stranger = '0'.repeat(32)
      assert.deepEqual(await fg.releasePermit('s', stranger), { released: false, reason: 'not_held' })
      assert.deepEqual(await fg.extendPermit('s', stranger), { extended: false, remainingMs: 0, reason: 'not_held' })
      assert.deepEqual(await fg.extendPermit('s', a.owner, { timeoutMs: 5000 }), { extended: true, remainingMs: 5000 })
      assert.deepEqual(await fg.releasePermit('s', a.owner), { released: true })
      assert.deepEqual(await fg.releasePermit('s', a.owner), { released: false, reason: 'not_held' })
      const c = await fg.acquirePermit('s', { permits: 1 })
      assert.equal(c.acquired, true)
      nextFence(b, c.fence, a.fence)
      assert.equal((await rejection(fg.releasePermit('s', 'nope'))).code, 'ERR_INVALID_ARGUMENT')
    })

    test('a dead holder\'s permit ends with its lease; its owner can no longer release or extend it', async () => {
      const fg = await b.open()
      // A lease long enough to be live still at the third call on a loaded machine.
      const a = await fg.acquirePermit('lease', { permits: 2, timeoutMs: 1000 })
      const c = await fg.acquirePermit('lease', { permits: 2, timeoutMs: 60000 })
      assert.equal((await fg.acquirePermit('lease', { permits: 2 })).acquired, false)
      await sleep(1150)
      const d = await fg.acquirePermit('lease', { permits: 2 })
      assert.equal(d.acquired, true)
      assert.equal(d.holders, 2)
      assert.equal((await fg.releasePermit('lease', a.owner)).released, false)
      assert.equal((await fg.extendPermit('lease', a.owner)).extended, false)
      assert.equal((await fg.getSemaphore('lease')).holders.length, 2)
      assert.equal((await fg.releasePermit('lease', c.owner)).released, true)
    })

    test('waitMs: waits for a permit to come free, and gives up after the bound', async () => {
      const fg = await b.open()
      const a = await fg.acquirePermit('w', { permits: 1 })
      setTimeout(() => fg.releasePermit('w', a.owner), 150)
      const t0 = Date.now()
      const c = await fg.acquirePermit('w', { permits: 1, waitMs: 3000 })
      assert.equal(c.acquired, true)
      assert.ok(c.attempts > 1 && c.waitedMs >= 100, JSON.stringify(c))
      const d = await fg.acquirePermit('w', { permits: 1, waitMs: 200 })
      assert.equal(d.acquired, false)
      assert.ok(Date.now() - t0 < 2500)
      assert.ok(d.waitedMs >= 190 && d.waitedMs < 1000, JSON.stringify(d))
    })

    test('bad options are refused, naming the field', async () => {
      const fg = await b.open()
      for (const [opts, field] of [[{ permits: 0 }, 'permits'], [{ permits: 1001 }, 'permits'], [{}, 'permits'], [{ permits: 2, timeoutMs: 0 }, 'timeoutMs'], [{ permits: 2, x: 1 }, 'x']]) {
        const e = await rejection(fg.acquirePermit('x', opts))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', JSON.stringify(opts))
        assert.match(e.message, new RegExp(field), e.message)
      }
    })

    test('withPermit: runs, extends while running, releases after, also on throw; all held is a result', async () => {
      const fg = await b.open()
      const r = await fg.withPermit('wp', async (signal, permit) => {
        // Longer than the 1 s lease: only extension keeps it (a lease long enough that a loaded
        // machine's event-loop stalls do not outlast its margin).
        await sleep(1500)
        assert.equal(signal.aborted, false)
        const info = await fg.getSemaphore('wp')
        assert.deepEqual(info.holders.map((h) => [h.fence, h.label]), [[permit.fence, 'run-1']])
        return permit.fence
      }, { permits: 2, timeoutMs: 1000, label: 'run-1' })
      assert.equal(r.acquired, true)
      assert.equal(r.released, true)
      assert.equal(r.value, r.permit.fence)
      assert.equal((await fg.getSemaphore('wp')).holders.length, 0)

      await assert.rejects(fg.withPermit('wp', async () => { throw new Error('boom') }, { permits: 2 }), /boom/)
      assert.equal((await fg.getSemaphore('wp')).holders.length, 0)

      const held = await Promise.all([fg.acquirePermit('wp', { permits: 2 }), fg.acquirePermit('wp', { permits: 2 })])
      let ran = false
      const busy = await fg.withPermit('wp', async () => { ran = true }, { permits: 2 })
      assert.equal(busy.acquired, false)
      assert.equal(busy.permit.holders, 2)
      assert.equal(ran, false)
      for (const h of held) await fg.releasePermit('wp', h.owner)
    })

    test('withPermit: the signal aborts with ERR_PERMIT_LOST when the permit is lost', async () => {
      const fg = await b.open()
      // A lease long enough that the refused extend (sent at its first third) is answered before
      // the "may be lost" deadline (at four fifths) on a loaded machine: with 90 ms, a PostgreSQL
      // extend slower than 42 ms (CI, 2 busy cores) ended it as "may be lost" instead.
      const r = await fg.withPermit('wp-lost', async (signal, permit) => {
        // Someone frees the permit (as an expiry would): the next extend is refused.
        await fg.releasePermit('wp-lost', permit.owner)
        if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
        return [signal.reason.code, signal.reason.message]
      }, { permits: 1, timeoutMs: 900 })
      assert.equal(r.value[0], 'ERR_PERMIT_LOST')
      assert.match(r.value[1], /^permit of semaphore "wp-lost" was lost/)
      assert.equal(r.released, false)
    })

    test('a label holding the separator of the stored form reads back whole; the last fence outlives every lease', async () => {
      const fg = await b.open()
      const label = 'run:7:{a}:'
      const a = await fg.acquirePermit('sep', { permits: 2, timeoutMs: 150, label })
      const c = await fg.acquirePermit('sep', { permits: 2, timeoutMs: 150, label: ':' })
      assert.deepEqual((await fg.getSemaphore('sep')).holders.map((h) => [h.fence, h.label]).sort(), [[a.fence, label], [c.fence, ':']])
      await sleep(250)
      // Every lease has ended: no holder, and the last fencing token issued is still known.
      const info = await fg.getSemaphore('sep')
      assert.deepEqual([info.holders, info.fence], [[], c.fence])
      assert.equal((await fg.releasePermit('sep', a.owner)).released, false)
      nextFence(b, (await fg.acquirePermit('sep', { permits: 2 })).fence, c.fence)
    })

    test('perKey and permits in one step: a full key is refused while the total has room, a full total refuses every key', async () => {
      const fg = await b.open()
      const opts = (key) => ({ permits: 3, key, perKey: 2, label: `job-${key}` })
      const a1 = await fg.acquirePermit('pk', opts('cust:A'))
      const a2 = await fg.acquirePermit('pk', opts('cust:A'))
      assert.deepEqual([a1.acquired, a1.holders, a1.keyHolders], [true, 1, 1])
      assert.deepEqual([a2.acquired, a2.holders, a2.keyHolders], [true, 2, 2])
      nextFence(b, a2.fence, a1.fence)
      // The key is full: refused though one of the 3 is free; it waits for the key's first lease.
      const a3 = await fg.acquirePermit('pk', opts('cust:A'))
      assert.deepEqual([a3.acquired, a3.holders, a3.keyHolders, a3.owner, a3.fence], [false, 2, 2, undefined, a2.fence])
      assert.ok(a3.remainingMs > 590000, JSON.stringify(a3))
      const b1 = await fg.acquirePermit('pk', opts('cust:B'))
      assert.deepEqual([b1.acquired, b1.holders, b1.keyHolders], [true, 3, 1])
      // The total is full: a key with no holder and a permit without a key are refused.
      const c1 = await fg.acquirePermit('pk', opts('cust:C'))
      assert.deepEqual([c1.acquired, c1.holders, c1.keyHolders], [false, 3, 0])
      const none = await fg.acquirePermit('pk', { permits: 3 })
      assert.deepEqual([none.acquired, none.holders, none.keyHolders], [false, 3, 0])
      const info = await fg.getSemaphore('pk')
      assert.deepEqual(info.keys, { 'cust:A': 2, 'cust:B': 1 })
      assert.deepEqual(info.holders.map((h) => [h.fence, h.key, h.label]).sort((x, y) => x[0] - y[0]),
        [[a1.fence, 'cust:A', 'job-cust:A'], [a2.fence, 'cust:A', 'job-cust:A'], [b1.fence, 'cust:B', 'job-cust:B']])
      // A release of the key's permit frees both the key and the total.
      assert.deepEqual(await fg.releasePermit('pk', a1.owner), { released: true })
      const a4 = await fg.acquirePermit('pk', opts('cust:A'))
      assert.deepEqual([a4.acquired, a4.holders, a4.keyHolders], [true, 3, 2])
      nextFence(b, a4.fence, b1.fence)
    })

    test('perKey: a permit without a key counts toward the total only; keys are told apart byte for byte', async () => {
      const fg = await b.open()
      const k = 'a:b:{x}:'
      const free = await fg.acquirePermit('pk2', { permits: 4, label: 'k3:a:b' })
      const x = await fg.acquirePermit('pk2', { permits: 4, key: k, perKey: 1, label: ':' })
      assert.deepEqual([free.keyHolders, x.acquired, x.keyHolders], [0, true, 1])
      // A key whose text begins like another's is another key.
      const y = await fg.acquirePermit('pk2', { permits: 4, key: 'a:b', perKey: 1 })
      const z = await fg.acquirePermit('pk2', { permits: 4, key: 'é', perKey: 1 })
      assert.deepEqual([y.acquired, y.keyHolders, z.acquired, z.keyHolders], [true, 1, true, 1])
      assert.equal((await fg.acquirePermit('pk2', { permits: 5, key: k, perKey: 1 })).acquired, false)
      const info = await fg.getSemaphore('pk2')
      assert.deepEqual(info.keys, { [k]: 1, 'a:b': 1, 'é': 1 })
      const byFence = Object.fromEntries(info.holders.map((h) => [h.fence, [h.key, h.label]]))
      assert.deepEqual(byFence[free.fence], [undefined, 'k3:a:b'])
      assert.deepEqual(byFence[x.fence], [k, ':'])
      assert.deepEqual(byFence[y.fence], ['a:b', undefined])
    })

    test('perKey: two acquirers race for the last slot of a key at once; exactly one wins, every round', async () => {
      const fg = await b.open()
      // A second client on the same store (same prefix, same file).
      const other = await b.open({ prefix: fg.prefix })
      for (let round = 0; round < 20; round++) {
        const name = `race-${round}`
        const held = await fg.acquirePermit(name, { permits: 10, key: 'K', perKey: 2 })
        assert.equal(held.acquired, true)
        // The barrier: both calls are made only once both racers are ready, in the same turn.
        let open
        const barrier = new Promise((r) => { open = r })
        const racer = (client) => barrier.then(() => client.acquirePermit(name, { permits: 10, key: 'K', perKey: 2 }))
        const both = Promise.all([racer(fg), racer(other)])
        open()
        const r = await both
        assert.equal(r.filter((x) => x.acquired).length, 1, JSON.stringify(r))
        assert.deepEqual(r.map((x) => x.keyHolders).sort(), [2, 2])
        assert.deepEqual((await fg.getSemaphore(name)).keys, { K: 2 })
      }
    })

    test('perKey waitMs: a waiter on a full key takes the permit its key frees; a lease that ends frees it too', async () => {
      const fg = await b.open()
      const a = await fg.acquirePermit('pkw', { permits: 5, key: 'A', perKey: 1 })
      const other = await fg.acquirePermit('pkw', { permits: 5, key: 'B', perKey: 1, timeoutMs: 1000 })
      setTimeout(() => fg.releasePermit('pkw', a.owner), 150)
      const w = await fg.acquirePermit('pkw', { permits: 5, key: 'A', perKey: 1, waitMs: 3000 })
      assert.ok(w.acquired && w.attempts > 1 && w.waitedMs >= 100, JSON.stringify(w))
      // Key B is full until its holder's lease ends (it never releases).
      assert.equal((await fg.acquirePermit('pkw', { permits: 5, key: 'B', perKey: 1 })).acquired, false)
      await sleep(1150)
      const b2 = await fg.acquirePermit('pkw', { permits: 5, key: 'B', perKey: 1 })
      assert.deepEqual([b2.acquired, b2.keyHolders], [true, 1])
      assert.equal((await fg.releasePermit('pkw', other.owner)).released, false)
      assert.deepEqual((await fg.extendPermit('pkw', b2.owner, { timeoutMs: 5000 })).extended, true)
      assert.equal((await fg.acquirePermit('pkw', { permits: 5, key: 'B', perKey: 1 })).acquired, false, 'an extended permit still counts')
    })

    test('perKey: bad key options are refused, naming the field', async () => {
      const fg = await b.open()
      for (const [opts, field] of [[{ permits: 2, key: 'a' }, 'perKey'], [{ permits: 2, perKey: 1 }, 'key'], [{ permits: 2, key: 'a', perKey: 0 }, 'perKey'],
        [{ permits: 2, key: 'a', perKey: 1001 }, 'perKey'], [{ permits: 2, key: 'a', perKey: 1.5 }, 'perKey'], [{ permits: 2, key: '', perKey: 1 }, 'key']]) {
        const e = await rejection(fg.acquirePermit('x', opts))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', JSON.stringify(opts))
        assert.match(e.message, new RegExp(field), e.message)
      }
    })

    test('forceReleasePermit frees the permit with that fence only; its holder is refused after it', async () => {
      const fg = await b.open()
      const a = await fg.acquirePermit('stuck', { permits: 2, key: 'K', perKey: 1, label: 'crashed run' })
      const c = await fg.acquirePermit('stuck', { permits: 2 })
      assert.equal((await fg.acquirePermit('stuck', { permits: 2, key: 'K', perKey: 1 })).acquired, false)
      assert.deepEqual(await fg.forceReleasePermit('stuck', c.fence + a.fence), { released: false, reason: 'not_held' })
      assert.deepEqual(await fg.forceReleasePermit('stuck', a.fence), { released: true })
      assert.deepEqual((await fg.getSemaphore('stuck')).holders.map((h) => h.fence), [c.fence])
      assert.deepEqual(await fg.releasePermit('stuck', a.owner), { released: false, reason: 'not_held' })
      assert.equal((await fg.extendPermit('stuck', a.owner)).reason, 'not_held')
      assert.deepEqual(await fg.forceReleasePermit('stuck', a.fence), { released: false, reason: 'not_held' }, 'already released')
      // The key's place is free again.
      const d = await fg.acquirePermit('stuck', { permits: 2, key: 'K', perKey: 1 })
      assert.ok(d.acquired && d.fence > c.fence)
      assert.deepEqual(await fg.releasePermit('stuck', c.owner), { released: true })
      for (const [fence, msg] of [[0, /fence/], [1.5, /fence must be a whole number/], [-1, /fence/], ['7', /fence/]]) {
        await assert.rejects(fg.forceReleasePermit('stuck', fence), (e) => e.code === 'ERR_INVALID_ARGUMENT' && msg.test(e.message), String(fence))
      }
    })

    if (b.name === 'redis') {
      test('keys share the name\'s hash slot and expire with the longest lease', async () => {
        const fg = await b.open()
        const r = await connect(process.env.REDIS_URL)
        try {
          const first = await fg.acquirePermit('k', { permits: 2, timeoutMs: 200 })
          const keys = (await r.scanAll(`${fg.prefix}*`)).sort()
          assert.deepEqual(keys, ['fence', 'h', `p:${first.owner}`].map((p) => `${fg.prefix}{sem:k}:${p}`))
          await sleep(300)
          assert.deepEqual(await r.scanAll(`${fg.prefix}*`), [`${fg.prefix}{sem:k}:fence`])
          nextFence(b, (await fg.acquirePermit('k', { permits: 2 })).fence, first.fence)
          // A permit with a key writes no key of its own: its key is in its permit's value.
          const keyed = await fg.acquirePermit('k2', { permits: 2, key: 'cust', perKey: 1, timeoutMs: 200 })
          assert.deepEqual((await r.scanAll(`${fg.prefix}{sem:k2}*`)).sort(), ['fence', 'h', `p:${keyed.owner}`].map((p) => `${fg.prefix}{sem:k2}:${p}`))
        } finally {
          r.close()
        }
      })
    }
  })
}
