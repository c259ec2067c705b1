'use strict'
// Running a caller's function under a lock: the lease is extended while the function runs and
// the function's AbortSignal fires before the lease can have run out when it cannot be.
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

/** ERR_LOCK_LOST: `why` completes "lock <name> …". */
function lockLost(name, why, cause) {
  return coded(Error, 'ERR_LOCK_LOST', `lock ${JSON.stringify(name)} ${why}`, cause === undefined ? undefined : { cause })
}

/**
 * Keeps the lease of a held lock: an extend every `leaseMs / 3`, and `onLost(error)` once the
 * lock is lost or may be lost soon. `leaseEnd` (monotonic ms) is the earliest time the lease
 * can end: only a successful extend moves it, to the time that extend was sent plus `leaseMs`
 * (the backend starts the new lease when it runs the extend, which is after we sent it).
 * `onLost` is called when less than a fifth of the lease may be left without a confirmed
 * extend, so the function has that long to stop before another worker can take the lock. That
 * deadline is a timer of its own: a renewal that hangs (a black-holed connection) cannot
 * postpone it. Returns `stop()`.
 */
function keepLease(native, name, owner, leaseMs, leaseEnd, onLost) {
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
    onLost(lockLost(name, why, cause))
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
      r = await native.extendLock(name, owner, { timeoutMs: leaseMs })
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
 * Runs `fn(signal, lock)` while holding lock `name`, extending the lease while it runs and
 * releasing it afterwards, also when `fn` throws. Resolves to `{ acquired: false, lock }` when the
 * lock is held by someone else (after `waitMs`, if given), else `{ acquired: true, value, lock,
 * released }`. `signal` aborts (reason code ERR_LOCK_LOST) when the lease could not be kept.
 */
async function withLock(native, name, fn, options) {
  functionArg(fn)
  const sent = now()
  const lock = await native.acquireLock(name, options)
  if (!lock.acquired) return { acquired: false, lock }
  // acquireLock has checked the options.
  const leaseMs = options != null && options.timeoutMs != null ? options.timeoutMs : DEFAULT_LEASE_MS
  let leaseEnd = sent + leaseMs
  if (lock.attempts > 1) {
    // After waiting, when the successful attempt was sent is not known here: extend once now, so
    // the lease end is measured from a known send time.
    const again = now()
    let r
    try {
      r = await native.extendLock(name, lock.owner, { timeoutMs: leaseMs })
    } catch (err) {
      await native.releaseLock(name, lock.owner).catch(() => {})
      throw err
    }
    if (!r.extended) throw lockLost(name, `was lost right after it was acquired: it could not be extended (${r.reason})`)
    leaseEnd = again + leaseMs
  }
  const controller = new AbortController()
  const stop = keepLease(native, name, lock.owner, leaseMs, leaseEnd, (e) => controller.abort(e))
  let value
  let released = false
  try {
    value = await fn(controller.signal, lock)
  } finally {
    stop()
    try {
      released = (await native.releaseLock(name, lock.owner)).released
    } catch (_) {
      // The lease ends by itself; the function's own result or error matters more.
    }
  }
  return { acquired: true, value, lock, released }
}

module.exports = { withLock }
