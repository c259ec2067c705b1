// The checkers of __test__/history/ on hand-written histories: each rule accepts a valid history
// and reports the anomaly it is about (docs/histories.md). Times in ms; leases of 100 ms, whose
// clock margin (clock-margin.mjs) is 22 ms.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { checkLock } from './history/check-lock.mjs'
import { checkSemaphore } from './history/check-semaphore.mjs'
import { checkQueue } from './history/check-queue.mjs'
import { checkTracker } from './history/check-tracker.mjs'
import { checkCounter } from './history/check-counter.mjs'

/** An operation: [process, f, value, type, result, start, end] (end Infinity for info). */
const ops = (p, rows) => rows.map(([process, f, value, type, result, start, end]) => ({ process, p, f, value, type, result, start, end: type === 'info' ? Infinity : end }))
const kinds = (anomalies) => anomalies.map((a) => a.kind)

const T = 100
const acq = (name) => ({ name, timeoutMs: T })
const grant = (owner, fence) => ({ acquired: true, owner, fence })

test('lock: sequential grants, released, and a refused stale release are valid', () => {
  const h = ops('lock', [
    ['a', 'acquire', acq('L'), 'ok', grant('o1', 1), 0, 2],
    ['b', 'acquire', acq('L'), 'fail', { acquired: false, fence: 1 }, 10, 12],
    ['a', 'release', { name: 'L', owner: 'o1' }, 'ok', { released: true }, 50, 51],
    ['b', 'acquire', acq('L'), 'ok', grant('o2', 2), 60, 61],
    ['a', 'release', { name: 'L', owner: 'o1' }, 'fail', { released: false }, 70, 71],
    // An unknown acquire changes nothing the checker relies on.
    ['c', 'acquire', acq('L'), 'info', undefined, 80, 0],
  ])
  assert.deepEqual(checkLock(h), [])
})

test('lock: two live grants, a grant after the lease ran out is fine; within the margin is not flagged', () => {
  const overlap = ops('lock', [
    ['a', 'acquire', acq('L'), 'ok', grant('o1', 1), 0, 2],
    ['b', 'acquire', acq('L'), 'ok', grant('o2', 2), 40, 41],
  ])
  assert.deepEqual(kinds(checkLock(overlap)), ['more than 1 live grant(s) at once'])
  const expired = ops('lock', [
    ['a', 'acquire', acq('L'), 'ok', grant('o1', 1), 0, 2],
    // o1's lease surely lasts until 0 + 100 - 22 = 78; a grant completing at 80 may be right.
    ['b', 'acquire', acq('L'), 'ok', grant('o2', 2), 75, 80],
  ])
  assert.deepEqual(checkLock(expired), [])
})

test('lock: an extend keeps the lease, a release cuts it', () => {
  const extended = ops('lock', [
    ['a', 'acquire', acq('L'), 'ok', grant('o1', 1), 0, 2],
    ['a', 'extend', { name: 'L', owner: 'o1', timeoutMs: T }, 'ok', { extended: true }, 50, 51],
    ['b', 'acquire', acq('L'), 'ok', grant('o2', 2), 90, 95],
  ])
  assert.deepEqual(kinds(checkLock(extended)), ['more than 1 live grant(s) at once'])
  const releasing = ops('lock', [
    ['a', 'acquire', acq('L'), 'ok', grant('o1', 1), 0, 2],
    ['a', 'release', { name: 'L', owner: 'o1' }, 'info', undefined, 30, 0],
    ['b', 'acquire', acq('L'), 'ok', grant('o2', 2), 35, 40],
  ])
  assert.deepEqual(checkLock(releasing), [])
})

test('lock: fencing tokens distinct and increasing in real-time order', () => {
  const twice = ops('lock', [
    ['a', 'acquire', acq('L'), 'ok', grant('o1', 5), 0, 2],
    ['b', 'acquire', acq('L'), 'ok', grant('o2', 5), 300, 301],
  ])
  assert.deepEqual(kinds(checkLock(twice)), ['fencing token handed out twice', "fencing token not above an earlier grant's"])
  const backwards = ops('lock', [
    ['a', 'acquire', acq('L'), 'ok', grant('o1', 5), 0, 2],
    ['b', 'acquire', acq('L'), 'ok', grant('o2', 4), 300, 301],
  ])
  assert.deepEqual(kinds(checkLock(backwards)), ["fencing token not above an earlier grant's"])
  // Other names have their own tokens.
  const names = ops('lock', [
    ['a', 'acquire', acq('L'), 'ok', grant('o1', 5), 0, 2],
    ['b', 'acquire', acq('M'), 'ok', grant('o2', 1), 300, 301],
  ])
  assert.deepEqual(checkLock(names), [])
})

test('lock: stale owners never succeed', () => {
  const late = ops('lock', [
    ['a', 'acquire', acq('L'), 'ok', grant('o1', 1), 0, 2],
    // Surely over after 2 + 100 + 22 = 124.
    ['a', 'release', { name: 'L', owner: 'o1' }, 'ok', { released: true }, 130, 131],
  ])
  assert.deepEqual(kinds(checkLock(late)), ['release ok by an owner whose lease was surely over'])
  const replaced = ops('lock', [
    ['a', 'acquire', acq('L'), 'ok', grant('o1', 1), 0, 2],
    ['b', 'acquire', acq('L'), 'ok', grant('o2', 2), 79, 80],
    ['a', 'extend', { name: 'L', owner: 'o1', timeoutMs: T }, 'ok', { extended: true }, 90, 91],
  ])
  // (The extend ok also claims o1 was live beside o2.)
  assert.deepEqual(kinds(checkLock(replaced)), ['extend ok by an owner after a newer holder was granted', 'more than 1 live grant(s) at once'])
  const forged = ops('lock', [['a', 'release', { name: 'L', owner: 'nobody' }, 'ok', { released: true }, 0, 1]])
  assert.deepEqual(kinds(checkLock(forged)), ['release ok for an owner no grant returned'])
  // After an extend of unknown outcome the lease may have been moved: not judged.
  const unknown = ops('lock', [
    ['a', 'acquire', acq('L'), 'ok', grant('o1', 1), 0, 2],
    ['a', 'extend', { name: 'L', owner: 'o1', timeoutMs: T }, 'info', undefined, 90, 0],
    ['a', 'release', { name: 'L', owner: 'o1' }, 'ok', { released: true }, 150, 151],
  ])
  assert.deepEqual(checkLock(unknown), [])
})

test('semaphore: up to `permits` live grants, one more is an anomaly', () => {
  const s = (owner, fence, start, end) => ['x', 'acquire', { name: 'S', timeoutMs: T, permits: 2 }, 'ok', grant(owner, fence), start, end]
  assert.deepEqual(checkSemaphore(ops('semaphore', [s('o1', 1, 0, 1), s('o2', 2, 2, 3)]), { permits: 2 }), [])
  assert.deepEqual(kinds(checkSemaphore(ops('semaphore', [s('o1', 1, 0, 1), s('o2', 2, 2, 3), s('o3', 3, 4, 5)]), { permits: 2 })), ['more than 2 live grant(s) at once'])
  // A semaphore's release needs no "newer holder" rule: another grant is no sign of staleness.
  const h = ops('semaphore', [s('o1', 1, 0, 1), s('o2', 2, 10, 11), ['x', 'release', { name: 'S', owner: 'o1' }, 'ok', { released: true }, 20, 21]])
  assert.deepEqual(checkSemaphore(h, { permits: 2 }), [])
})

const read = (owner, ids, start, end) => ['r', 'read', { limit: 3, visibilityTimeoutMs: T }, 'ok', { owner, ids }, start, end]
const ack = (owner, ids, start, end, ok = true) => ['r', 'ack', { owner, ids }, 'ok', { items: ids.map((id) => ({ id, ok })) }, start, end]
const enq = (ids, start, end, type = 'ok') => ['p', 'enqueue', { ids }, type, { outcomes: ids.map(() => 'added') }, start, end]
const size = (n, start) => ['final', 'size', {}, 'ok', { waiting: n, claimed: 0, again: 0 }, start, start + 1]

test('queue: enqueued, read, acked, redelivered after the visibility timeout: valid', () => {
  const h = ops('queue', [
    enq(['a', 'b'], 0, 1),
    read('r1', ['a', 'b'], 2, 3),
    ack('r1', ['a'], 10, 11),
    read('r2', ['b'], 200, 201), // b's lease (r1) ran out
    ack('r1', ['b'], 210, 211, false), // the stale reader is refused
    ack('r2', ['b'], 220, 221),
    size(0, 300),
  ])
  assert.deepEqual(checkQueue(h), [])
})

test('queue: a lost id, a redelivery after an ack, overlapping leases, stale acks', () => {
  assert.deepEqual(kinds(checkQueue(ops('queue', [enq(['a'], 0, 1), read('r1', ['a'], 2, 3), size(0, 300)]))), ['enqueued id never acked (lost)'])
  assert.deepEqual(kinds(checkQueue(ops('queue', [enq(['a'], 0, 1), size(1, 300)]))), ['enqueued id never acked (lost)', 'queue not empty after the drain'])
  // An enqueue of unknown outcome may not have happened: not lost.
  assert.deepEqual(checkQueue(ops('queue', [enq(['a'], 0, 1, 'info'), size(0, 300)])), [])
  const again = [enq(['a'], 0, 1), read('r1', ['a'], 2, 3), ack('r1', ['a'], 10, 11), read('r2', ['a'], 20, 21), ack('r2', ['a'], 30, 31)]
  assert.deepEqual(kinds(checkQueue(ops('queue', again))), ['delivered again after a successful ack'])
  // Unless the id was enqueued again after the acked read began (it was claimed: delivered once more).
  assert.deepEqual(checkQueue(ops('queue', [...again, enq(['a'], 5, 6)])), [])
  const overlapping = [enq(['a'], 0, 1), read('r1', ['a'], 2, 3), read('r2', ['a'], 20, 21), ack('r2', ['a'], 30, 31)]
  assert.deepEqual(kinds(checkQueue(ops('queue', overlapping))), ['two deliveries under overlapping live visibility leases'])
  const stale = [enq(['a'], 0, 1), read('r1', ['a'], 2, 3), read('r2', ['a'], 100, 101), ack('r1', ['a'], 110, 111)]
  assert.deepEqual(kinds(checkQueue(ops('queue', stale))), ['ack ok after another read was given the id'])
  const late = [enq(['a'], 0, 1), read('r1', ['a'], 2, 3), ack('r1', ['a'], 200, 201)]
  assert.deepEqual(kinds(checkQueue(ops('queue', late))), ['ack ok after the visibility lease was surely over'])
  assert.deepEqual(kinds(checkQueue(ops('queue', [enq(['a'], 0, 1), ack('nobody', ['a'], 2, 3)]))), ['ack ok for an owner whose read did not return the id'])
})

const claim = (owner, id, attempts, start, end, reclaimCompleted = false) => ['w', 'claim', { id, timeoutMs: T, reclaimCompleted }, 'ok', { claimed: true, owner, attempts }, start, end]
const complete = (owner, id, start, end, type = 'ok') => ['w', 'complete', { id, owner }, type, {}, start, end]
const get = (id, attempts, start) => ['final', 'get', { id }, 'ok', { status: 'completed', attempts }, start, start + 1]

test('tracker: claimed, abandoned, claimed again, completed; reclaimed on purpose: valid', () => {
  const h = ops('tracker', [
    claim('o1', 'i', 1, 0, 1),
    claim('o2', 'i', 2, 150, 151), // o1's lease ran out
    ['w', 'complete', { id: 'i', owner: 'o1' }, 'fail', undefined, 160, 161], // stale: refused
    complete('o2', 'i', 170, 171),
    ['w', 'claim', { id: 'i', timeoutMs: T, reclaimCompleted: false }, 'fail', { claimed: false, reason: 'completed' }, 180, 181],
    claim('o3', 'i', 3, 190, 191, true),
    ['w', 'claim', { id: 'i', timeoutMs: T, reclaimCompleted: false }, 'info', undefined, 400, 0],
    get('i', 3, 500),
  ])
  assert.deepEqual(checkTracker(h), [])
  // The unknown claim may have counted: 4 is as valid as 3, 5 is not.
  assert.deepEqual(checkTracker(h.slice(0, -1).concat(ops('tracker', [get('i', 4, 500)]))), [])
  const five = checkTracker(h.slice(0, -1).concat(ops('tracker', [get('i', 5, 500)])))
  assert.deepEqual(five.map((a) => [a.kind, a.detail]), [['final attempts outside [ok claims, ok + unknown claims]', '5 outside [3, 4]']])
})

test('tracker: two live claims, a completed item claimed again, attempts, a stale owner', () => {
  assert.deepEqual(kinds(checkTracker(ops('tracker', [claim('o1', 'i', 1, 0, 1), claim('o2', 'i', 2, 20, 21)]))), ['two live claims at once'])
  assert.deepEqual(kinds(checkTracker(ops('tracker', [claim('o1', 'i', 1, 0, 1), complete('o1', 'i', 10, 11), claim('o2', 'i', 2, 20, 21)]))), ['completed item claimed again'])
  // Unless a reclaimCompleted claim came in between (then abandoned: claimable again).
  assert.deepEqual(checkTracker(ops('tracker', [claim('o1', 'i', 1, 0, 1), complete('o1', 'i', 10, 11), claim('o2', 'i', 2, 20, 21, true), claim('o3', 'i', 3, 200, 201)])), [])
  assert.deepEqual(kinds(checkTracker(ops('tracker', [claim('o1', 'i', 2, 0, 1), claim('o2', 'i', 2, 200, 201)]))), ['two claims with the same attempts', 'attempts not increasing in real-time order'])
  assert.deepEqual(kinds(checkTracker(ops('tracker', [claim('o1', 'i', 1, 0, 1), claim('o2', 'i', 2, 150, 151), complete('o1', 'i', 160, 161)]))), ['complete ok by a stale owner (a newer claim was granted)'])
  assert.deepEqual(kinds(checkTracker(ops('tracker', [complete('nobody', 'i', 0, 1)]))), ['complete ok for an owner no claim returned'])
})

const incr = (value, start, end, type = 'ok') => ['c', 'incr', {}, type, type === 'ok' ? { value } : undefined, start, end]
const final = (value) => ['final', 'read', {}, 'ok', { value }, 1000, 1001]

test('counter: unique values in real-time order, the final value bounded by the unknown ones', () => {
  assert.deepEqual(checkCounter(ops('counter', [incr(2, 0, 10), incr(1, 1, 5), incr(3, 20, 21), incr(0, 30, 0, 'info'), final(4)])), [])
  assert.deepEqual(checkCounter(ops('counter', [incr(1, 0, 10), incr(2, 20, 21), final(2)])), [])
  assert.deepEqual(kinds(checkCounter(ops('counter', [incr(1, 0, 10), incr(1, 20, 21), final(2)]))), ['two increments returned the same value', 'increment not above one that completed before it'])
  assert.deepEqual(kinds(checkCounter(ops('counter', [incr(2, 0, 10), incr(1, 20, 21), final(2)]))), ['increment not above one that completed before it'])
  assert.deepEqual(kinds(checkCounter(ops('counter', [incr(1, 0, 10), incr(2, 20, 21), final(1)]))), ['final value outside [ok increments, ok + unknown increments]', 'an increment returned a value outside [1, final]'])
  const high = checkCounter(ops('counter', [incr(1, 0, 10), incr(2, 20, 21), incr(0, 30, 0, 'info'), final(4)]))
  assert.deepEqual(high.map((a) => [a.kind, a.detail]), [['final value outside [ok increments, ok + unknown increments]', '4 outside [2, 3]']])
})
