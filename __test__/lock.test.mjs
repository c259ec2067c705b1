import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { backends, sleep } from './backends.mjs'

for (const b of backends()) {
  describe(`Concurrency Lock on ${b.name}`, () => {
    test('50 concurrent sets: exactly one wins; the others see the holder', async () => {
      const fg = await b.open()
      const r = await Promise.all(Array.from({ length: 50 }, (_, i) => fg.acquireLock('wf', { label: `run-${i}` })))
      const won = r.filter((x) => x.acquired)
      assert.equal(won.length, 1)
      for (const x of r.filter((x) => !x.acquired)) {
        assert.equal(x.holder, won[0].holder)
        assert.equal(x.fence, won[0].fence)
        assert.ok(x.remainingMs > 590000 && x.remainingMs <= 600000)
      }
    })

    test('release only by the owner; a wrong or expired token leaves the holder its lock', async () => {
      const fg = await b.open()
      const a = await fg.acquireLock('L', { timeoutMs: 150 })
      await sleep(300)
      const c = await fg.acquireLock('L')
      assert.ok(c.acquired)
      // The first run outlived its lease: its unset must not delete the newer run's lock.
      assert.deepEqual(await fg.releaseLock('L', a.owner), { released: false, reason: 'not_owner' })
      assert.equal((await fg.getLock('L')).locked, true)
      const ext = await fg.extendLock('L', a.owner)
      assert.equal(ext.extended, false)
      assert.equal(ext.reason, 'not_owner')
      assert.deepEqual(await fg.releaseLock('L', c.owner), { released: true })
      assert.deepEqual(await fg.releaseLock('L', c.owner), { released: false, reason: 'not_held' })
    })

    test('forceReleaseLock frees the grant with that fence only; the old holder is refused after it', async () => {
      const fg = await b.open()
      const a = await fg.acquireLock('stuck', { label: 'crashed run' })
      assert.deepEqual(await fg.forceReleaseLock('stuck', a.fence + 1), { released: false, reason: 'not_owner' })
      assert.equal((await fg.getLock('stuck')).locked, true)
      assert.equal((await fg.getLock('stuck')).fence, a.fence, 'the fence an operator sees')
      assert.deepEqual(await fg.forceReleaseLock('stuck', a.fence), { released: true })
      assert.deepEqual(await fg.releaseLock('stuck', a.owner), { released: false, reason: 'not_held' })
      assert.equal((await fg.extendLock('stuck', a.owner)).reason, 'not_held')
      const b2 = await fg.acquireLock('stuck')
      assert.ok(b2.acquired && b2.fence > a.fence)
      assert.deepEqual(await fg.forceReleaseLock('stuck', a.fence), { released: false, reason: 'not_owner' }, 'a grant shown before')
      assert.equal((await fg.getLock('stuck')).locked, true)
      for (const [fence, msg] of [[0, /fence/], [1.5, /fence must be a whole number/], [-1, /fence/], ['7', /fence/]]) {
        await assert.rejects(fg.forceReleaseLock('stuck', fence), (e) => e.code === 'ERR_INVALID_ARGUMENT' && msg.test(e.message), String(fence))
      }
    })

    test('fencing tokens strictly increase across acquisitions, releases and expiries', async () => {
      const fg = await b.open()
      let last = 0
      for (let i = 0; i < 6; i++) {
        const l = await fg.acquireLock('fence', { timeoutMs: 80 })
        assert.ok(l.acquired)
        assert.ok(l.fence > last, `${l.fence} > ${last}`)
        last = l.fence
        if (i % 2) await fg.releaseLock('fence', l.owner)
        else await sleep(150)
      }
      assert.equal((await fg.getLock('fence')).fence, last)
    })

    test('extend keeps the lock past its first lease', async () => {
      const fg = await b.open()
      // A first lease long enough that a loaded machine's stall cannot end it before the
      // extension; then held past its end only by the extension.
      const l = await fg.acquireLock('ext', { timeoutMs: 1000 })
      const e = await fg.extendLock('ext', l.owner, { timeoutMs: 60000 })
      assert.equal(e.extended, true)
      await sleep(1200)
      assert.equal((await fg.getLock('ext')).locked, true)
      await fg.releaseLock('ext', l.owner)
    })

    test('wait: gets the lock when it frees, and never waits longer than asked', async () => {
      const fg = await b.open()
      const a = await fg.acquireLock('wait', { timeoutMs: 60000 })
      const t0 = Date.now()
      const miss = await fg.acquireLock('wait', { waitMs: 150 })
      const took = Date.now() - t0
      assert.equal(miss.acquired, false)
      assert.ok(took >= 140, `waited ${took} ms`)
      // Never a pause past the deadline; the margin is the scheduling delay of a loaded machine.
      assert.ok(miss.waitedMs <= 150 + 250, `waitedMs ${miss.waitedMs}`)
      setTimeout(() => fg.releaseLock('wait', a.owner), 300)
      const hit = await fg.acquireLock('wait', { waitMs: 5000 })
      assert.equal(hit.acquired, true)
      assert.ok(hit.attempts >= 2)
    })

    test('withLock: runs, extends while running, releases after, also on throw', async () => {
      const fg = await b.open()
      const r = await fg.withLock('job', async (signal, lock) => {
        // Longer than the 1 s lease: only extension keeps it. The lease is long enough that a
        // loaded machine's event-loop stalls (suites run in parallel) do not outlast its margin.
        await sleep(1500)
        assert.equal(signal.aborted, false)
        assert.equal((await fg.getLock('job')).locked, true)
        return lock.fence
      }, { timeoutMs: 1000 })
      assert.equal(r.acquired, true)
      assert.equal(r.released, true)
      assert.equal(typeof r.value, 'number')
      assert.equal((await fg.getLock('job')).locked, false)

      await assert.rejects(fg.withLock('job', async () => { throw new Error('boom') }), /boom/)
      assert.equal((await fg.getLock('job')).locked, false)

      const held = await fg.acquireLock('job')
      let ran = false
      const busy = await fg.withLock('job', async () => { ran = true })
      assert.equal(busy.acquired, false)
      assert.equal(ran, false)
      await fg.releaseLock('job', held.owner)
    })

    test('withLock: the signal aborts when the lock is lost', async () => {
      const fg = await b.open()
      const r = await fg.withLock('lost', async (signal, lock) => {
        // Someone force-frees the lock (as an expiry would) and takes it.
        await fg.releaseLock('lost', lock.owner)
        const other = await fg.acquireLock('lost')
        // The extend that finds the lock gone may have run already (a backend slower than the
        // lease's first third): then the signal has fired before this listener is added.
        if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
        await fg.releaseLock('lost', other.owner)
        return signal.reason.code
      }, { timeoutMs: 90 })
      assert.equal(r.value, 'ERR_LOCK_LOST')
    })
  })
}
