'use strict'
const { toJson } = require('./job-state.js')
const { invalid } = require('./errors.js')
// Item Tracker single calls. The native `_claim` / `_complete` / `_fail` return the result as a
// compact JSON array (no keys), as the value itself when the call is done at once (the embedded
// store) or as a Promise of it (Redis); the objects are built here. Through napi, that is several
// times cheaper than an object with its keys (BENCHMARKS.md, emb-single).

/** An ItemState from `[status, attempts, lastError, createdAt, updatedAt, leaseExpiresAt, finishedAt, expiresAt, timeline, maxAttempts?, note?, resultJson?]`. */
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
  if (t.length > 9) {
    if (t[9] !== null) item.maxAttempts = t[9]
    if (t[10] !== null) item.note = t[10]
    if (t[11] !== null) item.result = JSON.parse(t[11])
  }
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

/** Settles a compact native result (text now, or a Promise of text) as a Promise of `build(id, …)`. */
function settle(r, build, id) {
  if (typeof r === 'string') return Promise.resolve(build(id, JSON.parse(r)))
  return r.then((text) => build(id, JSON.parse(text)))
}

// The embedded store's claims skip text altogether: `_claimNow` writes the numbers of the result
// into this array (10, then 3 per timeline entry: at most 70) and returns the owner token or null;
// only an item with error texts comes back as the compact JSON array. One array per thread is
// enough: the call is synchronous and read at once.
const numbers = new Float64Array(70)
const STATUS = ['none', 'in_progress', 'abandoned', 'completed', 'failed', 'dead', 'revived']

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

/**
 * Claims an item through `native` (see index.d.ts). `embedded`: the native client is an
 * embedded store (in memory or durable), whose claims are done at once into `numbers` (or, on a
 * durable file locked by another process, come as a Promise of the compact JSON array). A throw
 * becomes a rejection.
 */
function claim(native, embedded, group, id, options) {
  let r
  try {
    if (!embedded) return settle(native._claim(group, id, options), claimResult, id)
    r = native._claimNow(numbers, group, id, options)
  } catch (err) {
    return Promise.reject(err)
  }
  if (r !== null && typeof r !== 'string') return r.then((text) => claimResult(id, JSON.parse(text)))
  if (r !== null && r.charCodeAt(0) === 91 /* [ */) return Promise.resolve(claimResult(id, JSON.parse(r)))
  return Promise.resolve(claimFromNumbers(id, r))
}

/**
 * Options with `result` turned into its JSON text (what the native layer stores), for
 * `complete` (`options.result`) and each request of `setItems` (`requests[i].result`).
 */
function withResultJson(options, field) {
  if (options === null || typeof options !== 'object' || options.result === undefined) return options
  return { ...options, result: toJson(options.result, field) }
}

/** Marks an item completed and ends its lease (see index.d.ts). */
function complete(native, group, id, options) {
  try {
    return settle(native._complete(group, id, withResultJson(options, 'options.result')), itemState, id)
  } catch (err) {
    return Promise.reject(err)
  }
}

/** Marks an item failed with a reason and ends its lease (see index.d.ts). */
function fail(native, group, id, reason, options) {
  try {
    if (options !== null && typeof options === 'object' && options.result !== undefined) {
      throw invalid('options.result', 'is for complete, not fail')
    }
    return settle(native._fail(group, id, reason, options), itemState, id)
  } catch (err) {
    return Promise.reject(err)
  }
}

module.exports = { claim, complete, fail, withResultJson }
