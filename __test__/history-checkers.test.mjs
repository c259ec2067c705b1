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
import { checkLimiter } from './history/check-limiter.mjs'
import { checkRegister } from './history/check-register.mjs'
import { checkOnce } from './history/check-once.mjs'
import { checkLockset } from './history/check-lockset.mjs'
import { linearizable } from './history/linearizable.mjs'
import { fencedRegister } from './history/fenced-register.mjs'
import { faultProxy } from './history/fault-proxy.mjs'
import net from 'node:net'
import { readFileSync } from 'node:fs'

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

// The necessary conditions of check-counter.mjs, without the linearizability search's verdict
// (which every one of these bad histories also gets: tested below).
const LIN = 'counter history not linearizable'
const necessary = (anomalies) => {
  assert.ok(anomalies.length === 0 || anomalies[0].kind === LIN, 'a bad counter history is not linearizable')
  return kinds(anomalies).filter((k) => k !== LIN)
}

test('counter: unique values in real-time order, the final value bounded by the unknown ones', () => {
  assert.deepEqual(checkCounter(ops('counter', [incr(2, 0, 10), incr(1, 1, 5), incr(3, 20, 21), incr(0, 30, 0, 'info'), final(4)])), [])
  assert.deepEqual(checkCounter(ops('counter', [incr(1, 0, 10), incr(2, 20, 21), final(2)])), [])
  assert.deepEqual(necessary(checkCounter(ops('counter', [incr(1, 0, 10), incr(1, 20, 21), final(2)]))), ['two increments returned the same value', 'increment not above one that completed before it'])
  assert.deepEqual(necessary(checkCounter(ops('counter', [incr(2, 0, 10), incr(1, 20, 21), final(2)]))), ['increment not above one that completed before it'])
  assert.deepEqual(necessary(checkCounter(ops('counter', [incr(1, 0, 10), incr(2, 20, 21), final(1)]))), ['final value outside [ok increments, ok + unknown increments]', 'an increment returned a value outside [1, final]'])
  const high = checkCounter(ops('counter', [incr(1, 0, 10), incr(2, 20, 21), incr(0, 30, 0, 'info'), final(4)]))
  assert.deepEqual(high.filter((a) => a.kind !== LIN).map((a) => [a.kind, a.detail]), [['final value outside [ok increments, ok + unknown increments]', '4 outside [2, 3]']])
})

test('counter: linearizable, where the necessary conditions are not enough', () => {
  // Values 1 and 3, and the only unknown increment invoked after 3 was returned: 2 came from nowhere.
  const gap = checkCounter(ops('counter', [incr(1, 0, 10), incr(3, 20, 21), incr(0, 30, 0, 'info'), final(3)]))
  assert.deepEqual(kinds(gap), [LIN])
  // The same with the unknown increment invoked before 3 was returned: it took effect in between.
  assert.deepEqual(checkCounter(ops('counter', [incr(1, 0, 10), incr(0, 15, 0, 'info'), incr(3, 20, 21), final(3)])), [])
  // A read that goes back.
  const back = ops('counter', [incr(1, 0, 10), incr(2, 20, 21), ['r', 'read', {}, 'ok', { value: 1 }, 30, 31], final(2)])
  assert.deepEqual(kinds(checkCounter(back)), [LIN])
  // Many unknown increments (interchangeable): decided at once, not by trying their subsets.
  const many = [incr(1, 0, 1)]
  for (let i = 0; i < 300; i++) many.push(incr(0, 2 + i, 0, 'info'))
  many.push(incr(150, 400, 401))
  assert.deepEqual(checkCounter(ops('counter', [...many, final(300)])), [])
  // A read of 140 after 150 was returned.
  assert.deepEqual(kinds(checkCounter(ops('counter', [...many, ['r', 'read', {}, 'ok', { value: 140 }, 500, 501], final(300)]))), [LIN])
})

test('linearizable: gives up after its budget rather than running on', () => {
  const h = ops('counter', Array.from({ length: 10 }, (_, i) => incr(i + 1, i * 10, i * 10 + 5)))
  const model = { init: 0, step: (s) => ({ ok: true, state: s + 1 }) }
  assert.equal(linearizable(h, model, { budget: 3 }).linearizable, undefined)
  assert.equal(linearizable(h, model, { budget: 100 }).linearizable, true)
})

const w = (key, value, start, end, type = 'ok') => ['w', 'write', { key, value }, type, {}, start, end]
const r = (key, value, start, end) => ['r', 'read', { key }, 'ok', { value }, start, end]

test('register: concurrent writes read in either order, unknown writes may or may not land: valid', () => {
  const h = ops('register', [
    r('K', null, 0, 1),
    w('K', 'a', 2, 10), w('K', 'b', 3, 12),
    r('K', 'a', 11, 13), // b was linearized before a
    r('K', 'a', 14, 15),
    w('K', 'c', 20, 0, 'info'), // unknown: read later, so it landed
    r('K', 'c', 30, 31),
    w('K', 'd', 40, 0, 'info'), // unknown and never read: may never have landed
    r('K', 'c', 50, 51),
    ['r', 'read', { key: 'K' }, 'info', undefined, 52, 0],
    w('J', 'x', 0, 1), r('J', 'x', 2, 3), // another key
  ])
  assert.deepEqual(checkRegister(h), [])
})

test('register: a stale read, a read of a value never written, a value read before its write', () => {
  const stale = ops('register', [w('K', 'a', 0, 1), w('K', 'b', 2, 3), r('K', 'a', 4, 5)])
  assert.deepEqual(kinds(checkRegister(stale)), ['register history not linearizable'])
  assert.deepEqual(kinds(checkRegister(ops('register', [w('K', 'a', 0, 1), r('K', 'z', 4, 5)]))), ['register history not linearizable'])
  assert.deepEqual(kinds(checkRegister(ops('register', [r('K', 'a', 0, 1), w('K', 'a', 2, 3)]))), ['register history not linearizable'])
  // Going back: a, then b, then a again by another reader.
  const flip = ops('register', [w('K', 'a', 0, 1), w('K', 'b', 2, 20), r('K', 'b', 5, 6), r('K', 'a', 7, 8)])
  assert.deepEqual(kinds(checkRegister(flip)), ['register history not linearizable'])
})

const take = (start, end, allowed = true) => ['c', 'take', { name: 'RL', limit: 5, periodMs: 500, burst: 2 }, allowed ? 'ok' : 'fail', { allowed }, start, end]

test('limiter: burst + limit - 1 in a window of the period is valid, one more is caught', () => {
  // 2 at once, then one every 100 ms: 6 in [0, 500), the 7th at 500.
  const paced = [take(0, 1), take(0, 1), take(100, 101), take(200, 201), take(300, 301), take(400, 401), take(500, 501), take(410, 411, false)]
  assert.deepEqual(checkLimiter(ops('limiter', paced)), [])
  // A 7th within the window (and surely so: 450 ms < 500 - margin 30 ms).
  const over = ops('limiter', [...paced.slice(0, 6), take(440, 441)])
  assert.deepEqual(kinds(checkLimiter(over)), ['more takes allowed in one window than burst + limit - 1'])
  // A 7th that may have been decided by the backend past the window: not flagged (clock margin).
  assert.deepEqual(checkLimiter(ops('limiter', [...paced.slice(0, 6), take(440, 480)])), [])
  // Refused and unknown takes are not counted.
  assert.deepEqual(checkLimiter(ops('limiter', [...paced.slice(0, 6), take(440, 441, false), ['c', 'take', take()[2], 'info', undefined, 442, 0]])), [])
})

const call = (key, value, ran, start, end, type = 'ok') => ['c', 'call', { key, leaseMs: T }, type, type === 'ok' ? { value, ran } : undefined, start, end]
const run = (key, token, since, start, end, type = 'ok') => ['c', 'run', { key, since, leaseMs: T }, type, type === 'ok' ? { token } : undefined, start, end]

test('once: one run, every caller gets its result; a run again after a lease ran out: valid', () => {
  const h = ops('once', [
    call('k', 't1', true, 0, 30), run('k', 't1', 0, 2, 28),
    call('k', 't1', false, 5, 35), // waited for it
    call('k', 't1', false, 40, 41),
    // j: the first run's caller paused past its lease (its result not stored: info), a second run.
    call('j', undefined, undefined, 0, 0, 'info'), run('j', 'u1', 0, 1, 300),
    call('j', 'u2', true, 120, 140), run('j', 'u2', 120, 122, 138),
    call('j', 'u2', false, 150, 151),
  ])
  assert.deepEqual(checkOnce(h), [])
})

test('once: fn run twice within a lease, run again after its result was stored, callers told different results', () => {
  const twice = ops('once', [call('k', 't1', true, 0, 30), run('k', 't1', 0, 2, 28), call('k', 't2', true, 5, 40), run('k', 't2', 5, 10, 38)])
  assert.deepEqual(kinds(checkOnce(twice)), ['fn ran twice within a lease', 'callers of one key got different results'])
  const again = ops('once', [call('k', 't1', true, 0, 30), run('k', 't1', 0, 2, 28), call('k', 't1', true, 200, 230), run('k', 't1', 200, 202, 228)])
  assert.deepEqual(kinds(checkOnce(again)), ['fn ran again after its result was stored'])
  const forged = ops('once', [call('k', 't1', true, 0, 30), run('k', 't1', 0, 2, 28), call('k', 'zz', false, 40, 41)])
  assert.deepEqual(kinds(checkOnce(forged)), ['a caller got a result no run of fn returned'])
})

/** The fenced register's log as the harness puts it into the history. */
const applied = (reg) => reg.log.map((v) => ({ process: 'register', p: 'lockset', f: 'applied', value: v, type: 'ok', start: Infinity, end: Infinity }))

test('lock-set: the fenced register refuses a stale holder, and the checker finds a lost update', () => {
  // A (fence 1) reads 0 and pauses; its lease runs out; B (fence 2) reads 0 and writes 1; A comes back.
  const reg = fencedRegister()
  assert.deepEqual(reg.handle({ f: 'read', fence: 1 }), { ok: true, value: 0 })
  assert.deepEqual(reg.handle({ f: 'read', fence: 2 }), { ok: true, value: 0 })
  // A's write before B's: refused too (B's read raised the fence), so B's update is not lost either.
  assert.equal(reg.handle({ f: 'write', fence: 1, value: 1 }).ok, false)
  assert.equal(reg.handle({ f: 'write', fence: 2, value: 1 }).ok, true)
  assert.equal(reg.handle({ f: 'write', fence: 1, value: 1 }).ok, false)
  assert.equal(reg.handle({ f: 'read', fence: 1 }).ok, false)
  assert.deepEqual(checkLockset(applied(reg)), [])
  // Without the check (the planted bug) A's write lands: the update 0 -> 1 is made twice.
  const bug = fencedRegister()
  bug.handle({ f: 'read', fence: 1 })
  bug.handle({ f: 'read', fence: 2 })
  bug.handle({ f: 'write', fence: 2, value: 1 })
  bug.handle({ f: 'write', fence: 1, value: 1, checked: false })
  assert.deepEqual(kinds(checkLockset(applied(bug))), ['lost update: a write not one above the value it replaced', 'a write applied with a lower fence than an earlier one'])
  // A write a client saw ok that the register does not have.
  const h = [...applied(reg), ...ops('lockset', [['a', 'write', { fence: 7, value: 9 }, 'ok', { ok: true }, 0, 1]])]
  assert.deepEqual(kinds(checkLockset(h)), ['a write seen ok is not in the register'])
})

test('fault proxy: latency keeps the order, a black hole holds until healed, a reset closes connections', async () => {
  const echo = net.createServer((s) => { s.on('error', () => {}); s.pipe(s) })
  await new Promise((resolve) => echo.listen(0, '127.0.0.1', resolve))
  const proxy = await faultProxy(echo.address().port)
  const c = net.connect(proxy.port, '127.0.0.1')
  let got = ''
  c.on('data', (d) => (got += d))
  const closed = new Promise((resolve) => c.on('error', (e) => resolve(e.code)).on('close', () => resolve('close')))
  await new Promise((resolve) => c.on('connect', resolve))
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
  try {
    proxy.latency(100)
    c.write('a')
    await sleep(20)
    proxy.heal()
    c.write('b') // sent without delay, but after a
    await sleep(40)
    assert.equal(got, '')
    await sleep(200)
    assert.equal(got, 'ab')
    proxy.blackHole()
    c.write('c')
    await sleep(150)
    assert.equal(got, 'ab')
    proxy.heal()
    await sleep(50)
    assert.equal(got, 'abc')
    proxy.reset()
    assert.ok(['ECONNRESET', 'close'].includes(await closed))
  } finally {
    await proxy.close()
    await new Promise((resolve) => echo.close(resolve))
  }
})

// A history kept from a run (docs/histories.md, What holds where: appendfsync everysec): the lock
// `L0`'s operations, times in ms from the run's start, across kill -9s and restarts of a
// redis-server with `appendfsync everysec` that lost the fence counter's last INCRs: the restarted
// server handed tokens …306, …311 and …312 out again. The checker must go on finding it.
test('lock: a kept history where a restart lost the fence counter\'s last INCRs: tokens handed out again', () => {
  const h = JSON.parse(readFileSync(new URL('./history/regressions/everysec-fence-repeat.json', import.meta.url), 'utf8'), (k, v) => (v === 'Infinity' ? Infinity : v))
  const found = checkLock(h).filter((a) => a.kind === 'fencing token handed out twice')
  assert.deepEqual(found.map((a) => a.ops[1].result.fence % 1000).sort(), [306, 311, 312])
})
