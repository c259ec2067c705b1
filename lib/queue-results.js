'use strict'
// Dedup Queue results. The native `_enqueue`, `_readBatch`, `_ack` and `_release` return numbers
// (a Float64Array, per id: its outcome's code, shard, due time) instead of an object per id, as the
// value itself when the call is done at once (the embedded store) or as a Promise of it; the
// objects are built here, with the ids the caller gave. Through napi an object costs a call per
// key, a JavaScript object literal almost nothing (BENCHMARKS.md, "Queue results built in
// JavaScript").

const ENQUEUED = ['added', 'duplicate', 'debounced', 'claimed', 'dead']

/** The ids a call was given: one id or a copy of the array (the caller may change theirs while the call runs). */
function given(ids) {
  return typeof ids === 'string' ? [ids] : Array.prototype.slice.call(ids)
}

/** Calls `native[method](...args)` and settles it as a Promise of `build(result, ids)`; a throw becomes a rejection. */
function call(native, method, args, ids, build) {
  let r
  let list
  try {
    r = native[method](...args)
    list = ids === undefined ? undefined : given(ids)
  } catch (err) {
    return Promise.reject(err)
  }
  if (typeof r.then === 'function') return r.then((v) => build(v, list))
  return Promise.resolve(build(r, list))
}

/** A QueueEnqueueResult from per id: code, shard, due time. */
function enqueueResult(n, ids) {
  const items = new Array(ids.length)
  let added = 0
  let duplicates = 0
  let debounced = 0
  let claimed = 0
  let dead = 0
  for (let i = 0, b = 0; i < ids.length; i++, b += 3) {
    const code = n[b]
    if (code === 0) added++
    else if (code === 1) duplicates++
    else if (code === 2) debounced++
    else if (code === 3) claimed++
    else dead++
    items[i] = { id: ids[i], shard: n[b + 1], outcome: ENQUEUED[code], dueAt: n[b + 2] }
  }
  return { added, duplicates, debounced, claimed, dead, items }
}

/** A QueueBatch from `[owner, visibleUntil, ids, numbers (per id: shard, due time), failedShards or null]`. */
function batchResult(c) {
  const ids = c[2]
  const n = c[3]
  const items = new Array(ids.length)
  for (let i = 0, b = 0; i < ids.length; i++, b += 2) items[i] = { id: ids[i], shard: n[b], dueAt: n[b + 1] }
  const r = { owner: c[0], visibleUntil: c[1], ids, items }
  if (c[4] != null) r.failedShards = c[4]
  return r
}

// Per code: [ok, requeued, reason].
const SETTLED = [
  [true, false, undefined],
  [true, true, undefined],
  [false, false, 'not_claimed'],
  [false, false, 'not_owner'],
  [false, false, 'expired'],
]

/** A QueueSettleResult from per id: code, shard, due time (NaN: not waiting again). */
function settleResult(n, ids) {
  const items = new Array(ids.length)
  let done = 0
  for (let i = 0, b = 0; i < ids.length; i++, b += 3) {
    const [ok, requeued, reason] = SETTLED[n[b]]
    const item = { id: ids[i], shard: n[b + 1], ok, requeued }
    if (ok) done++
    else item.reason = reason
    const due = n[b + 2]
    if (due === due) item.dueAt = due
    items[i] = item
  }
  return { done, refused: ids.length - done, items }
}

function enqueue(native, queue, ids, options) {
  return call(native, '_enqueue', [queue, ids, options], ids, enqueueResult)
}

function readBatch(native, queue, options) {
  return call(native, '_readBatch', [queue, options], undefined, batchResult)
}

function ack(native, queue, owner, ids, options) {
  return call(native, '_ack', [queue, owner, ids, options], ids, settleResult)
}

function release(native, queue, owner, ids, options) {
  return call(native, '_release', [queue, owner, ids, options], ids, settleResult)
}

module.exports = { enqueue, readBatch, ack, release }
