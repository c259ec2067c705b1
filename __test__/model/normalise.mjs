// What the model test normalises before it compares the two backends' results, and why. Only
// four things legitimately differ between two correct backends fed the same calls:
//
// 1. Owner tokens are random. Each token becomes `O<n>`, n counting the distinct tokens of one
//    backend in the order its results show them, so "the same token as step 7 returned" still
//    compares. The fixed well-formed token the generator passes (BOGUS_TOKEN) stays `BOGUS`.
// 2. Absolute times come from each backend's clock (Redis: the server's TIME). The runner keeps,
//    per backend and step, the window of Date.now() around the call; the backend read its
//    clock inside it. Every time a step passes is one of a fixed set of durations (OFFSETS)
//    apart from a step's clock, and those durations lie further apart than a run lasts, so a
//    time T becomes `t<step>+<duration>` for the unique step whose window holds T - duration.
//    That keeps which step's clock a time came from and which duration was added, and drops
//    only the sub-step timing. (A step slower than SHORT has a window in which a time can read
//    two ways; it then carries both names, and two times agree when their names share one.)
//    Times given by the test itself (setState's `expiresAt`) are registered as `abs<step>`; such
//    a time that a step's window holds too carries both names (a clock reading that happens to
//    equal a given time, e.g. `Date.now() - 1000` of a later step, is still that step's). A
//    time that matches no window exactly is matched to the nearest one within TOLERANCE ms (a
//    clock read a hair outside the Date.now() window); beyond that it stays raw and the
//    comparison fails.
// 3. Relative times (`remainingMs`: the time left on a lease that another step took) count down
//    with the clock; they become `<=<duration>` for the duration they started from (the
//    smallest span not below them that they are within the run's age of). `waitedMs` (measured
//    time spent in acquireLock) becomes `*`. A rate limiter's (`retryAfterMs`, `resetAfterMs`,
//    `waitMs`, `slotsMs`, `pauseMs`) count down from a multiple of its interval (LIMITER_SPANS) and become
//    `~<span>` the same way.
// 4. A lock's or a semaphore's fencing tokens count from 1 in memory and in the file; on Redis
//    each is at least the Redis clock in microseconds. Each becomes its rank among the tokens
//    the name returned so far (per kind: a lock and a semaphore of one name count apart; 0, never
//    taken, stays 0), so 1, 2, 3… still compare exactly; a semaphore's holders' too.
//
// Everything else (statuses, attempts, fence steps, counts, ids, order, values, error codes and
// messages) is compared exactly. Over several shards, the order of a read's ids among shards
// follows each shard's own clock reading, so those lists are put in shard order (stable,
// keeping each shard's own order) by the runner.
import { OFFSETS, SPANS, LIMITER_SPANS, BOGUS_TOKEN } from './generate.mjs'

const TIME_KEYS = new Set(['createdAt', 'updatedAt', 'leaseExpiresAt', 'finishedAt', 'expiresAt', 'at', 'dueAt', 'visibleUntil', 'decidedAt', 'readAt', 'pausedUntil', 'diedAt'])
const LIMITER_KEYS = new Set(['retryAfterMs', 'resetAfterMs', 'waitMs', 'slotsMs', 'pauseMs'])
const TOKEN = /^[0-9a-f]{32}$/
const TOLERANCE = 25

/** One backend's view of a run: its clock windows and token names. */
export class Side {
  constructor(name, fg) {
    this.name = name
    this.fg = fg
    this.windows = [] // [before, after, pos]: Date.now() around each step's call, in order
    this.literals = new Map() // absolute time given by the test -> name
    this.tokenNames = new Map()
    this.tokensByStep = new Map() // step id -> tokens its result carried, in order
    this.firstFence = new Map() // kind and name -> the first fencing token a result showed for it
    this.fencesSeen = new Map() // kind and name -> the distinct fencing tokens results showed, ascending
    this.lastFence = new Map() // kind and name -> the last fencing token a result showed for it (raw)
    this.listing = false // normalising a catalog listing's result (see `fence`)
    this.space = 'lock' // the kind of fences the result being normalised shows (set per step)
    this.started = Date.now()
  }

  /** Records the clock window of the step at `pos` (steps run in order: the list stays sorted). */
  window(pos, before, after) {
    this.windows.push([before, after, pos])
  }

  /** The step position whose window holds `x`, or -1 (the windows are disjoint and in order). */
  windowOf(x) {
    const w = this.windows
    let lo = 0
    let hi = w.length - 1
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      if (x < w[mid][0]) hi = mid - 1
      else if (x > w[mid][1]) lo = mid + 1
      else return w[mid][2]
    }
    return -1
  }

  /**
   * The name of absolute time `t`: { $t: [names] }. Usually one name; more when it is a time the
   * test gave (`abs<step>`) that a window holds too, or when a slow step's
   * window is wide enough that `t` reads as more than one step-plus-duration (a window longer
   * than SHORT); two names agree when their lists share one.
   */
  time(t) {
    const lit = this.literals.get(t)
    const names = lit ? [lit] : []
    for (const d of OFFSETS) {
      const pos = this.windowOf(t - d)
      if (pos >= 0) names.push(`t${pos}+${d}`)
    }
    if (names.length) return { $t: names }
    let best = null
    for (const d of OFFSETS) {
      for (const [before, after, pos] of this.windows) {
        const x = t - d
        const dist = x < before ? before - x : x - after
        if (dist <= TOLERANCE && (!best || dist < best.dist)) best = { dist, name: `t${pos}+${d}` }
      }
    }
    return { $t: [best ? best.name : `?${t}`] }
  }

  relative(ms, spans = SPANS, mark = '<=') {
    if (ms === 0) return 0
    const age = Date.now() - this.started + 1000
    const span = spans.filter((s) => s >= ms && s - age <= ms).sort((a, b) => a - b)[0]
    return span === undefined ? `?${ms}ms` : `${mark}${span}`
  }

  /** The rank of fence `f` of `name`; `record`: it is also the last fence shown (for `$fence` refs). */
  fence(name, f, record = true) {
    if (f === 0) return 0
    const k = `${this.space}:${name}`
    if (record) {
      if (!this.firstFence.has(k)) this.firstFence.set(k, f)
      this.lastFence.set(k, f)
    }
    // Its rank among the tokens seen for the name: grants follow one another by 1 in memory and
    // in the file, by the clock on Redis; every grant's token is seen (its acquire's result).
    const seen = this.fencesSeen.get(k) ?? []
    this.fencesSeen.set(k, seen)
    let at = seen.findIndex((x) => x >= f)
    if (at === -1) at = seen.push(f) - 1
    else if (seen[at] !== f) seen.splice(at, 0, f)
    return at + 1
  }

  token(t, step) {
    if (t === BOGUS_TOKEN) return 'BOGUS'
    if (!this.tokenNames.has(t)) this.tokenNames.set(t, `O${this.tokenNames.size}`)
    if (step !== undefined) {
      const list = this.tokensByStep.get(step) || []
      if (!list.includes(t)) list.push(t)
      this.tokensByStep.set(step, list)
    }
    return this.tokenNames.get(t)
  }

  /** The normalised copy of a result of step `step`. */
  normalise(v, step, key) {
    if (v === undefined) return '$undefined'
    if (v === null || typeof v === 'boolean' || typeof v === 'string' && key !== 'owner') return v
    if (typeof v === 'string') return TOKEN.test(v) ? this.token(v, step) : v
    if (typeof v === 'number') {
      if (Number.isNaN(v)) return '$NaN'
      // A rate limiter's decidedAt has a fraction (the clock's microseconds): its millisecond
      // lies within the step's window of Date.now() readings.
      if (TIME_KEYS.has(key) && v > 1e12) return this.time(Math.floor(v))
      if (key === 'remainingMs') return this.relative(v)
      if (LIMITER_KEYS.has(key)) return this.relative(v, LIMITER_SPANS, '~')
      if (key === 'waitedMs') return '*'
      return v
    }
    if (Array.isArray(v)) return v.map((x) => this.normalise(x, step, key === 'ids' ? 'id' : key === 'slotsMs' ? key : undefined))
    if (typeof v === 'object') {
      const out = {}
      for (const k of Object.keys(v)) out[k] = this.normalise(v[k], step, k)
      // A catalog listing runs on the servers only (run.mjs): the fences it shows are ranked but
      // not taken as the last one shown, which the Node sides never saw.
      const record = !this.listing
      if (typeof v.name === 'string' && typeof v.fence === 'number') out.fence = this.fence(v.name, v.fence, record)
      if (typeof v.name === 'string' && Array.isArray(v.holders)) {
        out.holders = v.holders.map((h, i) => ({ ...out.holders[i], fence: this.fence(v.name, h.fence, record) }))
      }
      return out
    }
    return `$${typeof v}`
  }
}

/** Whether two normalised values agree: equal, times when their names share one. */
export function same(a, b) {
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    if (a.$t || b.$t) return !!(a.$t && b.$t) && a.$t.some((n) => b.$t.includes(n))
    if (Array.isArray(a) !== Array.isArray(b)) return false
    const ka = Object.keys(a)
    const kb = Object.keys(b)
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && same(a[k], b[k]))
  }
  return a === b
}

/** Stable text of a normalised value: keys sorted, a time as its names. */
export function canon(v) {
  if (Array.isArray(v)) return `[${v.map(canon).join(',')}]`
  if (v && typeof v === 'object' && v.$t) return JSON.stringify(v.$t.join('|'))
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(',')}}`
  }
  return JSON.stringify(v)
}
