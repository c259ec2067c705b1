'use strict'
// The package entry: the generated napi-rs binding (binding.js) plus what only JavaScript can do:
// run a caller's function under a lock, with an AbortSignal that fires when the lock is lost.

const binding = require('./binding.js')
const { Flowguard } = binding

function lockLost(name, why) {
  const e = new Error(`lock ${JSON.stringify(name)} was lost while the function ran: ${why}`)
  e.code = 'ERR_LOCK_LOST'
  return e
}

/**
 * Runs `fn(signal, lock)` while holding lock `name`, extending the lease while it runs and
 * releasing it afterwards, also when `fn` throws. Resolves to `{ acquired: false, lock }` when the
 * lock is held by someone else (after `waitMs`, if given), else `{ acquired: true, value, lock,
 * released }`. `signal` aborts (reason code ERR_LOCK_LOST) if the lease could not be extended.
 */
Flowguard.prototype.withLock = async function withLock(name, fn, options) {
  if (typeof fn !== 'function') {
    const e = new TypeError(`fn must be a function, got ${fn === null ? 'null' : typeof fn}`)
    e.code = 'ERR_INVALID_ARGUMENT'
    throw e
  }
  const lock = await this.acquireLock(name, options)
  if (!lock.acquired) return { acquired: false, lock }
  const timeoutMs = options && options.timeoutMs != null ? options.timeoutMs : 600000
  const controller = new AbortController()
  let timer = null
  let stopped = false
  const renew = async () => {
    if (stopped) return
    try {
      const r = await this.extendLock(name, lock.owner, { timeoutMs })
      if (!r.extended) return controller.abort(lockLost(name, r.reason))
    } catch (err) {
      // Redis unreachable: keep trying while the lease may still be ours.
      if (Date.now() >= leaseEnd) return controller.abort(lockLost(name, err.message))
    }
    if (!stopped) {
      leaseEnd = Date.now() + timeoutMs
      schedule()
    }
  }
  let leaseEnd = Date.now() + timeoutMs
  const schedule = () => {
    // Not unref'd: while fn runs under the lock, the process has work to do.
    timer = setTimeout(renew, Math.max(1, Math.floor(timeoutMs / 3)))
  }
  schedule()
  let value
  try {
    value = await fn(controller.signal, lock)
  } finally {
    stopped = true
    clearTimeout(timer)
    var released = false
    try {
      released = (await this.releaseLock(name, lock.owner)).released
    } catch (_) {
      // The lease ends by itself; the function's own result or error matters more.
    }
  }
  return { acquired: true, value, lock, released }
}

module.exports = binding
