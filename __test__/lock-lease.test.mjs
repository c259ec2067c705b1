// withLock keeps its lease only through successful extends (issue 13.1): with its connection
// black-holed, the function's signal aborts (ERR_LOCK_LOST) before another worker, on a direct
// connection, can take the lock, although the extends hang rather than fail.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { backends, Flowguard, freshPrefix, sleep } from './backends.mjs'
import { startProxy } from './proxy.mjs'

const url = process.env.REDIS_URL

test('withLock over a black-holed connection: signal aborts before another worker acquires', { skip: !url && 'needs REDIS_URL', timeout: 30_000 }, async () => {
  const proxy = await startProxy(Number(new URL(url).port))
  const prefix = freshPrefix('lease')
  // The command timeout is longer than the lease: a hanging extend must not postpone the abort.
  const viaProxy = await Flowguard.open({ url: `redis://127.0.0.1:${proxy.port}`, prefix, commandTimeoutMs: 1500 })
  const direct = await Flowguard.open({ url, prefix })
  const leaseMs = 900
  try {
    const t0 = performance.now()
    let abortedAt = null
    let otherAt = null
    const r = await viaProxy.withLock('job', async (signal) => {
      signal.addEventListener('abort', () => { abortedAt = performance.now() - t0 }, { once: true })
      // Two extends go through first, then the connection goes silent.
      await sleep(leaseMs)
      assert.equal(signal.aborted, false, 'extends that succeed keep the lease')
      proxy.blackhole(true)
      for (;;) {
        const other = await direct.acquireLock('job', { timeoutMs: 60_000 })
        if (other.acquired) {
          otherAt = performance.now() - t0
          assert.ok(signal.aborted, `the other worker acquired at ${otherAt.toFixed(0)} ms while the signal had not aborted`)
          await direct.releaseLock('job', other.owner)
          break
        }
        assert.ok(performance.now() - t0 < 10_000, 'the lease ends within its timeout')
        await sleep(5)
      }
      return signal.reason
    }, { timeoutMs: leaseMs })
    assert.equal(r.acquired, true)
    assert.equal(r.value.code, 'ERR_LOCK_LOST', r.value.message)
    assert.match(r.value.message, /could not be extended/)
    assert.ok(abortedAt < otherAt, `aborted at ${abortedAt} ms, other acquired at ${otherAt} ms`)
    console.log(`# signal aborted at ${abortedAt.toFixed(0)} ms, other worker acquired at ${otherAt.toFixed(0)} ms`)
  } finally {
    await proxy.close()
  }
})

test('withLock: extends that fail fast do not keep the lease either', { skip: !url && 'needs REDIS_URL', timeout: 30_000 }, async () => {
  const proxy = await startProxy(Number(new URL(url).port))
  const prefix = freshPrefix('lease')
  const viaProxy = await Flowguard.open({ url: `redis://127.0.0.1:${proxy.port}`, prefix, connectTimeoutMs: 200, commandTimeoutMs: 200 })
  const direct = await Flowguard.open({ url, prefix })
  const leaseMs = 1200
  try {
    const r = await viaProxy.withLock('job', async (signal) => {
      // Every extend times out after 200 ms and is retried: the failures come back while the
      // lease still runs, and none of them may count as an extend.
      proxy.blackhole(true)
      for (;;) {
        const other = await direct.acquireLock('job', { timeoutMs: 60_000 })
        if (other.acquired) {
          assert.ok(signal.aborted, 'the signal aborted before another worker acquired')
          await direct.releaseLock('job', other.owner)
          return signal.reason
        }
        await sleep(5)
      }
    }, { timeoutMs: leaseMs })
    assert.equal(r.value.code, 'ERR_LOCK_LOST')
    assert.equal(r.value.cause?.code, 'ERR_TIMEOUT', r.value.message)
  } finally {
    await proxy.close()
  }
})

for (const b of backends()) {
  test(`withLock with a lease longer than setTimeout can wait (100 days) on ${b.name}: no early abort`, async () => {
    const fg = await b.open()
    const r = await fg.withLock('long', async (signal) => {
      await sleep(100)
      return signal.aborted
    }, { timeoutMs: 100 * 86400e3 })
    assert.equal(r.value, false)
    assert.equal(r.released, true)
  })
}

for (const b of backends()) {
  test(`withLock that waited for the lock keeps it (lease measured from a known send time) on ${b.name}`, async () => {
    const fg = await b.open()
    const held = await fg.acquireLock('waited', { timeoutMs: 60_000 })
    setTimeout(() => fg.releaseLock('waited', held.owner), 150)
    const r = await fg.withLock('waited', async (signal, lock) => {
      assert.ok(lock.attempts > 1, `attempts ${lock.attempts}`)
      await sleep(600) // two leases: only the extends keep it
      assert.equal((await fg.getLock('waited')).locked, true)
      return signal.aborted
    }, { timeoutMs: 300, waitMs: 5000 })
    assert.equal(r.acquired, true)
    assert.equal(r.value, false)
    assert.equal(r.released, true)
  })
}
