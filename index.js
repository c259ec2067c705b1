'use strict'
// The package entry: the generated napi-rs binding (binding.js) plus what only JavaScript can do:
// run a caller's function under a lock, with an AbortSignal that fires when the lock is lost;
// turn JavaScript values into JSON for Job State and back; run a function once per idempotency key.

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

function invalid(message) {
  const e = new TypeError(message)
  e.code = 'ERR_INVALID_ARGUMENT'
  return e
}

/**
 * JSON text of a JSON-serializable value. Refuses (ERR_INVALID_ARGUMENT) what JSON.stringify
 * would drop or mangle silently: undefined, functions, symbols, NaN and ±Infinity, at any depth;
 * and what it throws on: BigInt and cycles. Objects with toJSON (such as Date) are accepted.
 */
function toJson(value, field) {
  const where = (key) => (key === '' ? field : `${field} (at key ${JSON.stringify(key)})`)
  let json
  try {
    json = JSON.stringify(value, function (key, v) {
      const t = typeof v
      if (t === 'undefined' || t === 'function' || t === 'symbol') {
        throw invalid(`${where(key)} is ${t === 'undefined' ? 'undefined' : 'a ' + t}, which is not JSON`)
      }
      if (t === 'number' && !Number.isFinite(v)) throw invalid(`${where(key)} is ${v}, which is not JSON`)
      return v
    })
  } catch (err) {
    if (err && err.code === 'ERR_INVALID_ARGUMENT') throw err
    // BigInt ("Do not know how to serialize a BigInt") and cycles ("Converting circular structure").
    throw invalid(`${field} is not JSON-serializable: ${err && err.message}`)
  }
  return json
}

const parse = (entry) => (entry.found ? JSON.parse(entry.json) : undefined)

/** The value of `key` (undefined when absent or expired). */
Flowguard.prototype.getState = async function getState(key) {
  const [entry] = await this.getStateJson([key])
  return parse(entry)
}

/** The values of `keys`, in one round trip (undefined for each absent one). */
Flowguard.prototype.getStates = async function getStates(keys) {
  return (await this.getStateJson(keys)).map(parse)
}

/** Writes a JSON-serializable value; resolves to { written, value, expiresAt }. */
Flowguard.prototype.setState = async function setState(key, value, options) {
  const r = await this.setStateJson(key, toJson(value, 'value'), options)
  return { written: r.written, value: r.written ? value : JSON.parse(r.json), expiresAt: r.expiresAt }
}

// Item Tracker single calls. The native `_claim` / `_complete` / `_fail` return the result as a
// compact JSON array (no keys), as the value itself when the call is done at once (the embedded
// store) or as a Promise of it (Redis); the objects are built here. Through napi, that is several
// times cheaper than an object with its keys (BENCHMARKS.md, emb-single).

/** An ItemState from `[status, attempts, lastError, createdAt, updatedAt, leaseExpiresAt, finishedAt, expiresAt, timeline]`. */
function itemState(id, t) {
  const item = { id, status: t[0], attempts: t[1] }
  if (t[2] !== null) item.lastError = t[2]
  if (t[3] !== null) item.createdAt = t[3]
  if (t[4] !== null) item.updatedAt = t[4]
  if (t[5] !== null) item.leaseExpiresAt = t[5]
  if (t[6] !== null) item.finishedAt = t[6]
  if (t[7] !== null) item.expiresAt = t[7]
  const tl = t[8]
  const timeline = new Array(tl.length)
  for (let i = 0; i < tl.length; i++) {
    const e = tl[i]
    timeline[i] = e[3] === null ? { at: e[0], status: e[1], attempt: e[2] } : { at: e[0], status: e[1], attempt: e[2], error: e[3] }
  }
  item.timeline = timeline
  return item
}

/** A ClaimResult from `[claimed, owner, reason, item]`. */
function claimResult(id, t) {
  const r = { id, claimed: t[0] }
  if (t[1] !== null) r.owner = t[1]
  if (t[2] !== null) r.reason = t[2]
  r.item = itemState(id, t[3])
  return r
}

/** Settles a compact native result: a value now, or a Promise of one; a throw becomes a rejection. */
function compact(call, build, id) {
  let r
  try {
    r = call()
  } catch (err) {
    return Promise.reject(err)
  }
  if (typeof r === 'string') return Promise.resolve(build(id, JSON.parse(r)))
  return r.then((text) => build(id, JSON.parse(text)))
}

// The embedded store's claims skip text altogether: `_claimNow` writes the numbers of the result
// into this array (10, then 3 per timeline entry: at most 70) and returns the owner token or null;
// only an item with error texts comes back as the compact JSON array. One array per thread is
// enough: the call is synchronous and read at once.
const numbers = new Float64Array(70)
const STATUS = ['none', 'in_progress', 'abandoned', 'completed', 'failed']
const embedded = new WeakMap()

function claimFromNumbers(id, owner) {
  const o = numbers
  const item = { id, status: STATUS[o[2]], attempts: o[3] }
  if (o[4] === o[4]) item.createdAt = o[4]
  if (o[5] === o[5]) item.updatedAt = o[5]
  if (o[6] === o[6]) item.leaseExpiresAt = o[6]
  if (o[7] === o[7]) item.finishedAt = o[7]
  if (o[8] === o[8]) item.expiresAt = o[8]
  const n = o[9]
  const timeline = new Array(n)
  for (let k = 0, b = 10; k < n; k++, b += 3) timeline[k] = { at: o[b], status: STATUS[o[b + 1]], attempt: o[b + 2] }
  item.timeline = timeline
  const r = { id, claimed: o[0] === 1 }
  if (owner !== null) r.owner = owner
  if (o[1] !== 0) r.reason = STATUS[o[1]]
  r.item = item
  return r
}

/** Atomically claims an item for `timeoutMs` (see index.d.ts). */
Flowguard.prototype.claim = function claim(group, id, options) {
  let emb = embedded.get(this)
  if (emb === undefined) embedded.set(this, (emb = this.backend === 'embedded'))
  if (!emb) return compact(() => this._claim(group, id, options), claimResult, id)
  let r
  try {
    r = this._claimNow(numbers, group, id, options)
  } catch (err) {
    return Promise.reject(err)
  }
  if (r !== null && r.charCodeAt(0) === 91 /* [ */) return Promise.resolve(claimResult(id, JSON.parse(r)))
  return Promise.resolve(claimFromNumbers(id, r))
}

/** Marks an item completed and ends its lease (see index.d.ts). */
Flowguard.prototype.complete = function complete(group, id, options) {
  return compact(() => this._complete(group, id, options), itemState, id)
}

/** Marks an item failed with a reason and ends its lease (see index.d.ts). */
Flowguard.prototype.fail = function fail(group, id, reason, options) {
  return compact(() => this._fail(group, id, reason, options), itemState, id)
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

function onceTimeout(key, waitMs) {
  const e = new Error(
    `idempotency key ${JSON.stringify(key)} is still being worked on by another caller after waiting ${waitMs} ms`,
  )
  e.code = 'ERR_TIMEOUT'
  return e
}

/**
 * Runs `fn()` once per idempotency key. The first caller runs it and its result is stored for
 * `ttlMs` (default 24 h); concurrent callers wait (up to `waitMs`, default `leaseMs`) and later
 * callers get the stored result without running `fn`. When `fn` throws (or its result is not
 * JSON-serializable), the key is freed so a retry can run, and the error is passed on.
 * Resolves to { value, ran }.
 */
Flowguard.prototype.once = async function once(key, fn, options) {
  if (typeof fn !== 'function') {
    throw invalid(`fn must be a function, got ${fn === null ? 'null' : typeof fn}`)
  }
  const opts = options || {}
  const leaseMs = opts.leaseMs != null ? opts.leaseMs : 600000
  const waitMs = opts.waitMs != null ? opts.waitMs : leaseMs
  if (typeof waitMs !== 'number' || !(waitMs >= 0)) throw invalid(`waitMs must be a number >= 0, got ${waitMs}`)
  // Checked before fn runs: a bad ttlMs found only when storing the result would waste the run.
  const ttlOk = (v) => typeof v === 'number' && v > 0 && v <= 365 * 24 * 3600 * 1000
  if (opts.ttlMs != null && !ttlOk(opts.ttlMs)) {
    throw invalid(`ttlMs must be a number of milliseconds from 1 to 365 days, got ${opts.ttlMs}`)
  }
  const started = Date.now()
  for (let attempt = 0; ; attempt++) {
    const claim = await this.claimKey(key, { leaseMs })
    if (claim.status === 'done') return { value: JSON.parse(claim.json).v, ran: false }
    if (claim.status === 'claimed') {
      let json
      try {
        // An envelope keeps an undefined result (stored as {}) apart from null.
        const result = await fn()
        json = result === undefined ? '{}' : `{"v":${toJson(result, 'result')}}`
        await this.completeKey(key, claim.owner, json, { ttlMs: opts.ttlMs })
      } catch (err) {
        // fn threw, its result cannot be stored (not JSON, over 1 MiB), or the lease ran out
        // (ERR_NOT_OWNER: releasing is then refused and changes nothing).
        try {
          await this.releaseKey(key, claim.owner)
        } catch (_) {
          // The pending marker ends with its lease; the first error matters more.
        }
        throw err
      }
      // Callers that get the stored result see it through JSON too, so the first caller does.
      return { value: JSON.parse(json).v, ran: true }
    }
    const left = waitMs - (Date.now() - started)
    if (left <= 0) throw onceTimeout(key, waitMs)
    // Backoff with jitter, 5 ms doubling to 250 ms, never past the other caller's lease or our wait.
    const cap = Math.min(250, 5 * 2 ** Math.min(attempt, 6))
    const pause = cap / 2 + (Math.random() * cap) / 2
    await sleep(Math.max(1, Math.min(pause, left, claim.remainingMs + 1)))
  }
}

module.exports = binding
