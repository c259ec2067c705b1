'use strict'
// Running a caller's function under a lease (a lock, or a permit of a semaphore): the lease is
// extended while the function runs, released afterwards, and the function's AbortSignal fires
// before the lease can have run out when it cannot be kept.
const { performance } = require('node:perf_hooks')
const { coded } = require('./errors.js')
const { functionArg } = require('./options.js')

const DEFAULT_LEASE_MS = 600000
// Monotonic: a step of the wall clock (NTP) must not move our idea of when the lease ends.
const now = () => performance.now()

// setTimeout fires at once for delays past about 24.8 days (with a warning): longer ones wait in steps.
const MAX_TIMER_MS = 2 ** 31 - 1
function after(ms, fn) {
  const handle = { timer: null }
  const step = (left) => {
    handle.timer = left > MAX_TIMER_MS ? setTimeout(step, MAX_TIMER_MS, left - MAX_TIMER_MS) : setTimeout(fn, left)
  }
  step(ms)
  return handle
}
const cancel = (handle) => handle !== null && clearTimeout(handle.timer)

/** The two kinds of lease: how they are taken, kept and given back, and how losing one is told. */
const LOCK = {
  acquire: (native, name, options) => native.acquireLock(name, options),
  extend: (native, name, owner, options) => native.extendLock(name, owner, options),
  release: (native, name, owner) => native.releaseLock(name, owner),
  /** ERR_LOCK_LOST: `why` completes "lock <name> …". */
  lost: (name, why, cause) =>
    coded(Error, 'ERR_LOCK_LOST', `lock ${JSON.stringify(name)} ${why}`, cause === undefined ? undefined : { cause }),
}
const PERMIT = {
  acquire: (native, name, options) => native.acquirePermit(name, options),
  extend: (native, name, owner, options) => native.extendPermit(name, owner, options),
  release: (native, name, owner) => native.releasePermit(name, owner),
  /** ERR_PERMIT_LOST: `why` completes "permit of semaphore <name> …". */
  lost: (name, why, cause) =>
    coded(Error, 'ERR_PERMIT_LOST', `permit of semaphore ${JSON.stringify(name)} ${why}`, cause === undefined ? undefined : { cause }),
}

/**
 * Keeps a held lease of `kind` (LOCK or PERMIT): an extend every `leaseMs / 3`, and `onLost(error)` once the
 * lease is lost or may be lost soon. `leaseEnd` (monotonic ms) is the earliest time the lease
 * can end: only a successful extend moves it, to the time that extend was sent plus `leaseMs`
 * (the backend starts the new lease when it runs the extend, which is after we sent it).
 * `onLost` is called when less than a fifth of the lease may be left without a confirmed
 * extend, so the function has that long to stop before another worker can take the lock. That
 * deadline is a timer of its own: a renewal that hangs (a black-holed connection) cannot
 * postpone it. Returns `stop()`.
 */
function keepLease(kind, native, name, owner, leaseMs, leaseEnd, onLost) {
  const margin = leaseMs / 5
  const every = leaseMs / 3
  // After a failed extend, try again soon while the lease may still be ours.
  const retry = Math.max(1, leaseMs / 20)
  let stopped = false
  let renewTimer = null
  let deadlineTimer = null
  let lastError
  let inFlight = null
  const stop = () => {
    stopped = true
    cancel(renewTimer)
    cancel(deadlineTimer)
  }
  const lost = (why, cause) => {
    if (stopped) return
    stop()
    onLost(kind.lost(name, why, cause))
  }
  // Not unref'd: while the function runs under the lock, the process has work to do.
  const armDeadline = () => {
    cancel(deadlineTimer)
    deadlineTimer = after(Math.max(0, leaseEnd - margin - now()), () => {
      const last = lastError
        ? ` (last error: ${lastError.code || 'error'}: ${lastError.message})`
        : inFlight !== null ? ` (no reply to the extend sent ${Math.round(now() - inFlight)} ms ago)` : ''
      lost(`may be lost: its lease of ${leaseMs} ms could not be extended in time and may end within ${Math.ceil(margin)} ms${last}`, lastError)
    })
  }
  const renewIn = (ms) => {
    renewTimer = after(Math.max(1, ms), renew)
  }
  async function renew() {
    if (stopped) return
    const sent = (inFlight = now())
    let r
    try {
      r = await kind.extend(native, name, owner, { timeoutMs: leaseMs })
    } catch (err) {
      inFlight = null
      lastError = err
      if (!stopped) renewIn(retry)
      return
    }
    inFlight = null
    if (stopped) return
    if (!r.extended) return lost(`was lost while the function ran: it could not be extended (${r.reason})`)
    lastError = undefined
    if (sent + leaseMs > leaseEnd) leaseEnd = sent + leaseMs
    armDeadline()
    renewIn(sent + every - now())
  }
  armDeadline()
  renewIn(leaseEnd - leaseMs + every - now())
  return stop
}

/**
 * Runs `fn(signal, held)` while holding a lease of `kind` on `name`, extending it while `fn`
 * runs and releasing it afterwards, also when `fn` throws. Resolves to `{ acquired: false, held }`
 * when it cannot be had (after `waitMs`, if given), else `{ acquired: true, value, held, released }`.
 */
async function withLease(kind, native, name, fn, options) {
  functionArg(fn)
  const sent = now()
  const held = await kind.acquire(native, name, options)
  if (!held.acquired) return { acquired: false, held }
  // The acquire call has checked the options.
  const leaseMs = options != null && options.timeoutMs != null ? options.timeoutMs : DEFAULT_LEASE_MS
  let leaseEnd = sent + leaseMs
  if (held.attempts > 1) {
    // After waiting, when the successful attempt was sent is not known here: extend once now, so
    // the lease end is measured from a known send time.
    const again = now()
    let r
    try {
      r = await kind.extend(native, name, held.owner, { timeoutMs: leaseMs })
    } catch (err) {
      await kind.release(native, name, held.owner).catch(() => {})
      throw err
    }
    if (!r.extended) throw kind.lost(name, `was lost right after it was acquired: it could not be extended (${r.reason})`)
    leaseEnd = again + leaseMs
  }
  const controller = new AbortController()
  const stop = keepLease(kind, native, name, held.owner, leaseMs, leaseEnd, (e) => controller.abort(e))
  let value
  let released = false
  try {
    value = await fn(controller.signal, held)
  } finally {
    stop()
    try {
      released = (await kind.release(native, name, held.owner)).released
    } catch (_) {
      // The lease ends by itself; the function's own result or error matters more.
    }
  }
  return { acquired: true, value, held, released }
}

/**
 * Runs `fn(signal, lock)` while holding lock `name`: `{ acquired: false, lock }` when the lock is
 * held by someone else (after `waitMs`, if given), else `{ acquired: true, value, lock, released }`.
 * `signal` aborts (reason code ERR_LOCK_LOST) when the lease could not be kept.
 */
async function withLock(native, name, fn, options) {
  const { held, ...r } = await withLease(LOCK, native, name, fn, options)
  return { ...r, lock: held }
}

/**
 * Runs `fn(signal, permit)` while holding a permit of semaphore `name` (`options.permits`
 * required, as for acquirePermit): `{ acquired: false, permit }` when all permits are held (after
 * `waitMs`, if given), else `{ acquired: true, value, permit, released }`. `signal` aborts (reason
 * code ERR_PERMIT_LOST) when the lease could not be kept.
 */
async function withPermit(native, name, fn, options) {
  const { held, ...r } = await withLease(PERMIT, native, name, fn, options)
  return { ...r, permit: held }
}

module.exports = { withLock, withPermit }
