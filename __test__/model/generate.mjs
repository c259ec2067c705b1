// The model test's operation generator: a seeded, pure function from a seed to a sequence of
// calls. Every argument is fixed when the sequence is generated, except three kinds of
// references resolved when a step runs, per backend: owner tokens ({ $tok: step, i }: the i-th
// token the step's result carried on that backend), a lock's or a semaphore's fencing token
// ({ $fence: name, d, kind }: the last one that backend showed for the lock, or with kind
// 'permit' for the semaphore, plus d), absolute times ({ $abs: ms }: Date.now()
// + ms, fixed once for both backends) and functions for once() ({ $fn }).

/** A small fast PRNG (sfc32) seeded from one 32-bit integer. */
export function rng(seed) {
  let a = 0x9e3779b9, b = 0x243f6a88, c = 0xb7e15162, d = seed >>> 0
  const next = () => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0
    const t = (a + b) | 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) | 0
    c = (c << 21) | (c >>> 11)
    d = (d + 1) | 0
    const r = (t + d) | 0
    c = (c + r) | 0
    return (r >>> 0) / 4294967296
  }
  for (let i = 0; i < 16; i++) next()
  const r = {
    next,
    int: (n) => Math.floor(next() * n),
    chance: (p) => next() < p,
    pick: (xs) => xs[Math.floor(next() * xs.length)],
  }
  return r
}

// Durations. Every duration a step can pass is one of these, so an absolute time in a result
// is always "the backend's clock at some step, plus one of these" (see normalise.mjs). They lie
// far apart (further than any run lasts), so that decomposition is unique. SHORT is the only
// duration meant to run out during a run: every step that passes it is followed at once by a
// wait past it, so whether it ran out never depends on how fast a step was.
export const SHORT = 100
export const WAIT = SHORT + 60
export const RETENTION = 1e9
/** The retention of the second client on each backend, so that records run out during a run. */
export const SHORT_RETENTION = SHORT
/** The wait after a write through that client: its records live up to SHORT + SHORT_RETENTION. */
export const RETENTION_WAIT = SHORT + SHORT_RETENTION + 60
const LEASES = [1e7, 2e7]
const KEEPS = [3e7, 4e7]
const TTLS = [5e7, 6e7]
const DELAYS = [7e7]
/** Caps of a debounce (maxDelayMs): one before the delay (it bites), one after. */
const MAX_DELAYS = [6.5e7, 7.5e7]
const VISIBILITY = [8e7, 9e7]
const ABSOLUTE = 1.1e8
/** The library's defaults that the generator lets apply by omitting the option. */
const DEFAULTS = [600000, 86400000]
const BASE = [0, SHORT, ...LEASES, ...KEEPS, ...TTLS, ...DELAYS, ...MAX_DELAYS, ...VISIBILITY, ABSOLUTE, ...DEFAULTS]
/** Offsets from a step's clock that a time in a result can have (record expiries add the retention). */
export const OFFSETS = [...new Set([...BASE, ...BASE.map((d) => d + RETENTION), ...BASE.map((d) => d + SHORT_RETENTION)])].sort((x, y) => x - y)
/** Durations a relative time (remainingMs) can count down from. */
export const SPANS = [SHORT, ...LEASES, ...TTLS, ...DEFAULTS]

// Rate limiters: each name has a rule (limit per period, burst) whose emission interval
// (period / limit) is at least 2e6 ms, so no token comes back during a run; every duration a
// result can show (retryAfterMs, resetAfterMs, waitMs, slotsMs) then counts down from a
// multiple of an interval (LIMITER_SPANS: multiples of 5e5 ms, further apart than a run lasts),
// and a maxWaitMs lies between two of them, so whether a reservation fits never depends on
// timing. One limiter in four is a short one instead: one token per SHORT, each take followed by
// a wait past it, so it is full again (and its key gone) before the next step.
const PERIODS = [1e7, 2e7]
const LIMITS = [1, 2, 4, 5]
const MAX_WAITS = [7.25e6, 1.625e7]
/** Pauses of a limiter (pauseRateLimit's retryAfter, ms): multiples of every interval (so a
 * slot after a pause is one of LIMITER_SPANS), in OFFSETS (so its end is named), and far longer
 * than a run (so none ends during one). */
const PAUSES = [2e7, 4e7]
/** Durations a rate limiter's relative times count down from (0 stays 0). */
export const LIMITER_SPANS = [SHORT, ...new Set(PERIODS.flatMap((p) => LIMITS.flatMap((l) => Array.from({ length: 60 }, (_, k) => ((k + 1) * p) / l))))].sort((x, y) => x - y)

// Names: ordinary and hostile ones that must work (Redis key syntax, hash tags, escapes,
// unicode, NUL, exactly 1 KiB), and ones that must be refused (empty, over 1 KiB, wrong types).
const HOSTILE = [
  'a', 'b', 'job:1', 'a:b:c', ':', '{x}', '{}', '}{', 'x{y}z:w', '%7B', '%', '%%3A', 'ü', 'café', '日本語', '😀', ' ',
  'tab\tsep', 'nul\u0000x', 'x'.repeat(1024), 'é'.repeat(512), '😀'.repeat(256), '\uD800', '\uFFFD',
]
// A lone surrogate has no UTF-8 form: JSON.stringify writes it as the escape "\ud800", which the
// server's JSON parser refuses as a whole body (ERR_INVALID_JSON), where the Node API names the
// field (ERR_INVALID_ARGUMENT). Both refuse it; the server's sequences leave it out.
const HOSTILE_JSON = HOSTILE.filter((x) => x !== '\uD800')
const TOO_LONG = ['', 'x'.repeat(1025), 'é'.repeat(513)]
const WRONG_TYPES = [1, null, undefined, {}, [], true]
export const BOGUS_TOKEN = 'f'.repeat(32)

/** The operations only the HTTP server has (no Node API): the listings of the dashboard. */
export const CATALOG = new Set(['listGroups', 'listLocks', 'listQueues', 'listLimiters', 'listSemaphores'])

const TRACKER = new Set(['claim', 'claimMany', 'claimBatch', 'complete', 'fail', 'setItems', 'unsetItem', 'getItem', 'getItems', 'listItems', 'reviveItems'])
const READS = new Set(['getItem', 'getItems', 'listItems', 'unsetItem'])

/**
 * Generates `steps` operations (plus the waits after SHORT durations) from `seed`. With `http`,
 * for the server's shell: only what JSON can carry, with the same meaning in Node and over HTTP
 * (no NaN, undefined or functions, no numbers as strings, which the server reads as numbers;
 * no once(), which is the Node API's own; no second client with a short retention, which
 * would be a second server), and the catalog's listings.
 */
export function generate(seed, steps, { http = false } = {}) {
  const r = rng(seed)
  const pool = (n) => {
    const out = new Set()
    while (out.size < n) out.add(r.chance(0.5) ? r.pick(http ? HOSTILE_JSON : HOSTILE) : r.pick(['g', 'item', 'x', 'y', 'z', 'k', 'q']) + r.int(10))
    return [...out]
  }
  const groups = pool(2)
  const ids = pool(7)
  const locks = pool(3)
  // Each queue's reads mostly cap deliveries alike (dead letters need two counting reads of an id
  // with a release between), one queue's mostly not.
  const queues = pool(3).map((name) => ({ name, shards: r.pick([1, 1, 2, 4]), maxDeliveries: r.pick([undefined, 1, 1, 2]) }))
  const keys = pool(4)
  const idemKeys = pool(3)
  const sems = pool(3).map((name) => ({ name, permits: r.pick([1, 1, 2, 3]), perKey: r.pick([1, 1, 2]) }))
  // The keys of per-key permits: a separator of the stored form, a hash tag, non-ASCII.
  const semKeys = ['a', 'a:1:{x}', 'é']
  const limiters = pool(3).map((name) =>
    r.chance(0.25) ? { name, limit: 1, periodMs: SHORT, short: true } : { name, limit: r.pick(LIMITS), periodMs: r.pick(PERIODS), burst: r.pick([undefined, 1, 2, 3]) },
  )
  // Steps whose results carry owner tokens, per family, for later references.
  const issued = { item: [], lock: [], queue: [], key: [], permit: [] }
  let short = false

  const name = (p) => {
    const x = r.next()
    if (x < 0.02) return r.pick(TOO_LONG)
    if (x < 0.03) return r.pick(WRONG_TYPES)
    return r.pick(p)
  }
  const idList = (max) => {
    if (r.chance(0.02)) return r.pick([[], 'notarray', [1], null])
    const n = 1 + r.int(max)
    return Array.from({ length: n }, () => (r.chance(0.02) ? r.pick(TOO_LONG) : r.pick(ids)))
  }
  // A duration option: mostly long, sometimes omitted (the default), SHORT, or invalid.
  const dur = (set, { zero = false } = {}) => {
    const x = r.next()
    if (x < 0.7) return r.pick(set)
    if (x < 0.82) return undefined
    if (x < 0.86) return (short = true), SHORT
    if (zero && x < 0.9) return 0
    if (x < 0.95) return r.pick(http ? [0, -5, 365 * 86400000 + 1, 'x', true] : [0, -5, NaN, Infinity, 365 * 86400000 + 1, '100', true])
    // A fraction is rounded up (to a duration of the set) by the core's one rule, in both shells.
    return r.pick(set) - 0.5
  }
  const tok = (family) => {
    const x = r.next()
    const list = issued[family]
    if (x < 0.75 && list.length) return { $tok: r.pick(list.slice(-6)), i: r.int(2) }
    if (x < 0.85) {
      const any = Object.values(issued).flat()
      if (any.length) return { $tok: r.pick(any.slice(-10)), i: 0 }
    }
    if (x < 0.94) return BOGUS_TOKEN
    return r.pick(['', 'F'.repeat(32), 'f'.repeat(31), 12, null])
  }
  const opts = (o) => {
    // Drop the undefined options (an omitted option and one set to undefined are both absent).
    const out = {}
    for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v
    return out
  }
  // Claims made so far ([group, id, step]), so complete and fail mostly name an item together
  // with the owner token of a claim of it (the newest one or an older, stale one).
  const claims = []
  const finisher = () => {
    if (claims.length && r.chance(0.85)) {
      const [g, id, step] = r.chance(0.7) ? claims[claims.length - 1] : r.pick(claims.slice(-8))
      return [g, id, { $tok: step, i: 0 }]
    }
    return [name(groups), name(ids), r.chance(0.8) ? tok('item') : undefined]
  }
  const reason = () => (r.chance(0.05) ? 'x'.repeat(4097) : r.pick(['', 'boom', 'timeout: 504', 'ü{x}:y', 'x'.repeat(4096)]))
  const queue = () => {
    const q = r.pick(queues)
    const shards = r.chance(0.03) ? r.pick([1, 2, 3, 4, 8, 0, 1025]) : q.shards
    return { name: r.chance(0.03) ? name([]) : q.name, shards, maxDeliveries: q.maxDeliveries }
  }
  // A page size of a listing (1 to 100; now and then a bad one).
  const pageOpts = () => opts({ limit: r.chance(0.9) ? r.pick([undefined, 1, 2, 100]) : r.pick([0, 101, -1, 1.5, 'x']) })
  const jsonValue = () =>
    r.pick([0, 1, -7, 41, 9007199254740991, -9007199254740991, 1.5, 'text', '', 'ü{}:', true, false, null, [1, 'a'], { a: { b: [null] } }, 'x'.repeat(2000)])

  // A claim's maxAttempts: mostly none (the claims of before), small budgets that fail into dead
  // items, now and then one out of range.
  const maxAttempts = () => (r.chance(0.5) ? undefined : r.chance(0.95) ? r.pick([1, 2, 3]) : r.pick([0, 1001]))
  // A claim's note: mostly none; a colon (the Redis scripts' separator), the longest allowed, one
  // byte too many now and then. A completion's result: any JSON value (far from the 4 KiB bound,
  // where JSON texts of the shells could differ by an escape), now and then one past it.
  const note = () => (r.chance(0.7) ? undefined : r.chance(0.95) ? r.pick(['page 3', '', 'a:b:{c}', 'ü'.repeat(128)]) : 'n'.repeat(257))
  const result = () => (r.chance(0.6) ? undefined : r.chance(0.95) ? jsonValue() : { text: 'x'.repeat(4100) })
  const claimOpts = () => opts({ timeoutMs: dur(LEASES), reclaimCompleted: r.chance(0.3) || undefined, maxAttempts: maxAttempts(), note: note() })
  const ops = {
    claim: () => ['claim', [name(groups), name(ids), claimOpts()], 'item'],
    claimMany: () => ['claimMany', [name(groups), idList(4), claimOpts()], 'item'],
    claimBatch: () => ['claimBatch', [name(groups), idList(5), claimOpts()], 'item'],
    reviveItems: () => ['reviveItems', [name(groups), idList(4), opts({ failed: r.chance(0.3) || undefined, resetAttempts: r.chance(0.3) || undefined })]],
    complete: () => {
      const [g, id, owner] = finisher()
      return ['complete', [g, id, opts({ owner, keepMs: dur(KEEPS), result: result() })]]
    },
    fail: () => {
      const [g, id, owner] = finisher()
      return ['fail', [g, id, reason(), opts({ owner, keepMs: dur(KEEPS) })]]
    },
    setItems: () => {
      const n = r.chance(0.03) ? 0 : 1 + r.int(4)
      // Most batches are valid (one bad request refuses the whole batch).
      const clean = r.chance(0.8)
      const d = (set) => (clean ? (r.chance(0.8) ? r.pick(set) : undefined) : dur(set))
      const reqs = Array.from({ length: n }, () => {
        const status = !clean && r.chance(0.1) ? r.pick(['bogus', '', 7]) : r.pick(['in_progress', 'completed', 'failed', 'none'])
        const mine = status !== 'in_progress' && claims.length && r.chance(0.5) ? r.pick(claims.slice(-4)) : null
        return opts({
          id: mine ? mine[1] : !clean && r.chance(0.1) ? r.pick(TOO_LONG) : r.pick(ids),
          status,
          owner: mine ? { $tok: mine[2], i: 0 } : status !== 'in_progress' && r.chance(0.5) ? tok('item') : undefined,
          error: status === 'failed' && r.chance(0.8) ? (clean ? 'boom' : reason()) : undefined,
          // Also on requests that are not claims: a bad value must be refused there too.
          timeoutMs: status === 'in_progress' || r.chance(0.1) ? d(LEASES) : undefined,
          keepMs: r.chance(0.5) ? d(KEEPS) : undefined,
          reclaimCompleted: r.chance(0.2) || undefined,
          maxAttempts: status === 'in_progress' && r.chance(0.4) ? r.pick([1, 2]) : undefined,
          note: status === 'in_progress' ? note() : undefined,
          result: status === 'completed' ? result() : undefined,
        })
      })
      if (r.chance(0.08)) {
        // A burst on one item: claims and failures past the timeline's 20 entries.
        const id = r.pick(ids)
        for (let k = 0; k < 12; k++) reqs.push({ id, status: 'in_progress', timeoutMs: LEASES[0] }, { id, status: 'failed', error: `try ${k}` })
      }
      return ['setItems', [name(groups), r.chance(0.02) ? 'notarray' : reqs], 'item']
    },
    unsetItem: () => ['unsetItem', [name(groups), name(ids)]],
    getItem: () => ['getItem', [name(groups), name(ids)]],
    getItems: () => ['getItems', [name(groups), idList(4)]],
    listItems: () => {
      const status = r.chance(0.05) ? r.pick(['bogus', 'none', 1]) : r.pick([undefined, 'all', 'in_progress', 'abandoned', 'completed', 'failed', 'dead'])
      const offset = r.chance(0.8) ? undefined : r.pick([0, 1, 2, 5, -1, 1.5])
      const limit = r.chance(0.7) ? undefined : r.pick([1, 2, 3, 10000, 0, 10001])
      return ['listItems', [name(groups), opts({ status, offset, limit })]]
    },
    acquireLock: () => ['acquireLock', [name(locks), opts({ timeoutMs: dur(LEASES), waitMs: r.chance(0.1) ? r.pick(http ? [0, -1] : [0, -1, NaN]) : undefined, label: r.chance(0.5) ? r.pick(['', 'run-1', 'wf:{7}', 'ü', 'x'.repeat(4096), 'x'.repeat(4097), 5]) : undefined })], 'lock'],
    releaseLock: () => ['releaseLock', [name(locks), tok('lock')]],
    forceReleaseLock: () => {
      const n = name(locks)
      // The fence shown last (the holder's, or a newer grant's since), one past it, one before it;
      // now and then 0, which no grant has.
      const fence = typeof n === 'string' && !r.chance(0.05) ? { $fence: n, d: r.pick([0, 0, 0, 1, -1]) } : 0
      return ['forceReleaseLock', [n, fence]]
    },
    extendLock: () => ['extendLock', [name(locks), tok('lock'), opts({ timeoutMs: dur(LEASES) })]],
    getLock: () => ['getLock', [name(locks)]],
    enqueue: () => {
      const q = queue()
      const ids = r.chance(0.3) ? name(ids_) : idList(4)
      const debounce = r.chance(0.3) || undefined
      // A cap mostly with debounce (now and then without: refused).
      const maxDelayMs = r.chance(debounce ? 0.5 : 0.03) ? dur(MAX_DELAYS) : undefined
      return ['enqueue', [q.name, ids, opts({ shards: q.shards, delayMs: r.chance(0.6) ? 0 : dur(DELAYS, { zero: true }), debounce, maxDelayMs })]]
    },
    readBatch: () => {
      const q = queue()
      const one = q.shards > 1 && r.chance(0.5)
      // Over several shards a limit below the number of due ids is split from a random shard
      // on: which ids one read gets then is chance, the same on both backends only by luck. So
      // such reads either address one shard or take everything due.
      const limit = one || q.shards === 1 ? r.pick([undefined, 1, 2, 3, 10000, 0]) : r.pick([undefined, 10000])
      // Dead letters: a cap of deliveries on some reads (now and then a bad one).
      const x = r.next()
      const maxDeliveries = x < 0.75 ? q.maxDeliveries : x < 0.97 ? r.pick([undefined, 1, 2, 3]) : r.pick([0, 1001, 1.5])
      return ['readBatch', [q.name, opts({ shards: q.shards, shard: one ? r.int(q.shards + 1) : undefined, limit, visibilityTimeoutMs: dur(VISIBILITY), maxDeliveries })], 'queue']
    },
    deadLetters: () => {
      const q = queue()
      const one = q.shards > 1 && r.chance(0.5)
      // Over several shards the order among shards follows each shard's clock (see readBatch):
      // such listings take every dead letter, or address one shard, which pages.
      const paged = one || q.shards === 1
      const offset = paged && r.chance(0.4) ? r.pick([0, 1, 2, 100001]) : undefined
      const limit = paged ? r.pick([undefined, 1, 2, 1000, 0]) : r.pick([undefined, 1000])
      return ['deadLetters', [q.name, opts({ shards: q.shards, shard: one ? r.int(q.shards) : undefined, offset, limit })]]
    },
    requeueDead: () => {
      const q = queue()
      return ['requeueDead', [q.name, r.chance(0.3) ? name(ids_) : idList(4), opts({ shards: q.shards })]]
    },
    ack: () => {
      const q = queue()
      return ['ack', [q.name, tok('queue'), r.chance(0.3) ? name(ids_) : idList(4), opts({ shards: q.shards })]]
    },
    release: () => {
      const q = queue()
      return ['release', [q.name, tok('queue'), r.chance(0.3) ? name(ids_) : idList(4), opts({ shards: q.shards, delayMs: r.chance(0.5) ? 0 : dur(DELAYS, { zero: true }) })]]
    },
    peek: () => {
      const q = queue()
      const one = q.shards > 1 && r.chance(0.5)
      const limit = one || q.shards === 1 ? r.pick([undefined, 1, 2, 10000, 0]) : r.pick([undefined, 10000])
      return ['peek', [q.name, opts({ shards: q.shards, shard: one ? r.int(q.shards) : undefined, limit })]]
    },
    queueSize: () => {
      const q = queue()
      return ['queueSize', [q.name, opts({ shards: q.shards, shard: q.shards > 1 && r.chance(0.3) ? r.int(q.shards) : undefined })]]
    },
    setState: () => {
      const x = r.next()
      const expiry = x < 0.4 ? { ttlMs: dur(TTLS) } : x < 0.55 ? { expiresAt: r.chance(0.9) ? { $abs: ABSOLUTE } : { $abs: -1000 } } : {}
      const value = r.chance(0.04) && !http ? r.pick([{ $undefined: true }, { $nan: true }]) : jsonValue()
      return ['setState', [name(keys), value, opts({ ...expiry, ifAbsent: r.chance(0.3) || undefined })]]
    },
    getStateJson: () => ['getStateJson', [r.chance(0.05) ? 'k' : Array.from({ length: 1 + r.int(3) }, () => name(keys))]],
    getState: () => ['getState', [name(keys)]],
    deleteState: () => ['deleteState', [name(keys)]],
    increment: () => ['increment', [name(keys), r.chance(0.3) ? undefined : r.chance(0.85) ? r.pick([1, -1, 5, 0, 9007199254740991, -9007199254740991]) : r.pick(http ? [1.5, 'x'] : [1.5, NaN, '2']), opts({ ttlMs: r.chance(0.5) ? dur(TTLS) : undefined })]],
    claimKey: () => ['claimKey', [name(idemKeys), opts({ leaseMs: dur(LEASES) })], 'key'],
    completeKey: () => ['completeKey', [name(idemKeys), tok('key'), r.pick(http ? ['{"v":1}', '{}', '"x"'] : ['{"v":1}', '{}', '"x"', 'not json']), opts({ ttlMs: dur(TTLS) })]],
    releaseKey: () => ['releaseKey', [name(idemKeys), tok('key')]],
    once: () => {
      const fn = r.chance(0.2) ? { $fn: 'throw' } : r.chance(0.05) ? { $fn: 'nan' } : { $fn: 'value', v: jsonValue() }
      // waitMs 0: a pending key is a timeout at once, never a wait that depends on the clock.
      return ['once', [name(idemKeys), fn, opts({ ttlMs: dur(TTLS), leaseMs: dur(LEASES), waitMs: r.chance(0.95) ? 0 : -1 })], 'key']
    },
    // Semaphores: each name has its number of permits (now and then another, or a bad one).
    acquirePermit: () => {
      const s = r.pick(sems)
      const permits = r.chance(0.9) ? s.permits : r.pick([1, 2, 4, 0, 1000, 1001, 1.5, -1, undefined, 'x'])
      const label = r.chance(0.4) ? r.pick(['', 'run-1', 'wf:{7}', 'ü', 'x'.repeat(4096), 'x'.repeat(4097), 5]) : undefined
      // waitMs 0 (or a bad one): a full semaphore is a result at once, never a wait on the clock.
      const waitMs = r.chance(0.1) ? r.pick([0, -1]) : undefined
      // Half with a key and its per-key limit (now and then another limit, or a bad pair).
      let key, perKey
      if (r.chance(0.5)) {
        key = r.chance(0.95) ? r.pick(semKeys) : r.pick(['', undefined, 5])
        perKey = r.chance(0.9) ? s.perKey : r.pick([3, 0, 1001, 1.5, undefined, 'x'])
      }
      return ['acquirePermit', [r.chance(0.03) ? name([]) : s.name, opts({ permits, key, perKey, timeoutMs: dur(LEASES), waitMs, label })], 'permit']
    },
    forceReleasePermit: () => {
      const n = name(sems.map((s) => s.name))
      // The fence shown last (a holder's, or the last issued), which only that permit has; now
      // and then 0, which none has. Not one past or before it: in memory that is another
      // grant's, on Redis none's.
      const fence = typeof n === 'string' && !r.chance(0.05) ? { $fence: n, d: 0, kind: 'permit' } : 0
      return ['forceReleasePermit', [n, fence]]
    },
    releasePermit: () => ['releasePermit', [name(sems.map((s) => s.name)), tok('permit')]],
    extendPermit: () => ['extendPermit', [name(sems.map((s) => s.name)), tok('permit'), opts({ timeoutMs: dur(LEASES) })]],
    getSemaphore: () => ['getSemaphore', [name(sems.map((s) => s.name))]],
    // Rate limiters: no waitRateLimit with a maxWaitMs (it would wait for a reservation).
    rateLimit: () => {
      const l = r.pick(limiters)
      if (l.short) {
        short = true
        return [r.chance(0.2) ? 'waitRateLimit' : 'rateLimit', [l.name, { limit: 1, periodMs: SHORT }]]
      }
      const bad = r.chance(0.08)
      const o = opts({
        limit: bad && r.chance(0.3) ? r.pick([0, 1000001, 1.5, -1, undefined, 'x']) : l.limit,
        periodMs: bad && r.chance(0.3) ? r.pick([0, -5, 1.5, 'x']) : l.periodMs,
        burst: bad && r.chance(0.3) ? r.pick([0, -1, 1.5, 1000001]) : l.burst,
        cost: r.chance(0.4) ? undefined : bad ? r.pick([0, -1, 1.5, 5, 1000001]) : r.pick([1, 1, 2, 3]),
        maxWaitMs: r.chance(0.5) ? undefined : bad ? r.pick([-1, http ? -5 : 1.5, 365 * 86400000 + 1]) : r.pick([0, ...MAX_WAITS]),
      })
      const wait = !('maxWaitMs' in o && o.maxWaitMs !== 0) && r.chance(0.2)
      return [wait ? 'waitRateLimit' : 'rateLimit', [r.chance(0.03) ? name([]) : l.name, o]]
    },
    // An upstream's 429: delta-seconds from PAUSES (a number or a string), a date in the past or
    // untilMs in the past (nothing paused), and bad values. Short limiters are never paused.
    pauseRateLimit: () => {
      const long = limiters.filter((x) => !x.short)
      const l = long.length ? r.pick(long) : { name: 'paused' }
      const secs = r.pick(PAUSES) / 1000
      const o = r.chance(0.9)
        ? r.pick([{ retryAfter: secs }, { retryAfter: String(secs) }, { retryAfter: secs }, { retryAfter: 'Sun, 06 Nov 1994 08:49:37 GMT' }, { untilMs: r.pick([0, 1]) }])
        : r.pick([{ retryAfter: 'soon' }, { retryAfter: -1 }, { retryAfter: 1.5 }, { retryAfter: '31536001' }, {}, { untilMs: 1, retryAfter: 1 }])
      return ['pauseRateLimit', [r.chance(0.03) ? name([]) : l.name, o]]
    },
    // The catalog (over HTTP only): a whole listing, page by page (see model/http.mjs).
    listGroups: () => ['listGroups', [pageOpts()]],
    listLocks: () => ['listLocks', [pageOpts()]],
    listQueues: () => ['listQueues', [pageOpts()]],
    listLimiters: () => ['listLimiters', [pageOpts()]],
    listSemaphores: () => ['listSemaphores', [pageOpts()]],
  }
  const ids_ = ids
  // How often each operation comes up (writes more than reads, so state builds up).
  const weights = {
    claim: 6, claimMany: 3, claimBatch: 3, complete: 5, fail: 4, setItems: 4, unsetItem: 2, getItem: 2, getItems: 2, listItems: 3, reviveItems: 2,
    acquireLock: 5, releaseLock: 3, forceReleaseLock: 1, extendLock: 3, getLock: 2,
    enqueue: 6, readBatch: 5, ack: 4, release: 3, peek: 2, queueSize: 2, deadLetters: 2, requeueDead: 2,
    setState: 4, getStateJson: 2, getState: 1, deleteState: 1, increment: 3,
    claimKey: 3, completeKey: 2, releaseKey: 2, once: 3,
    acquirePermit: 5, releasePermit: 3, forceReleasePermit: 1, extendPermit: 2, getSemaphore: 2, rateLimit: 4, pauseRateLimit: 1,
  }
  if (http) {
    delete weights.once
    Object.assign(weights, { listGroups: 1, listLocks: 1, listQueues: 1, listLimiters: 1, listSemaphores: 1 })
  }
  const table = Object.entries(weights).flatMap(([k, w]) => Array(w).fill(k))

  const out = []
  for (let s = 0; s < steps; s++) {
    short = false
    const [op, args, family] = ops[r.pick(table)]()
    const id = out.length
    const step = { id, op, args }
    // Now and then an Item Tracker call goes through the client with the short retention: what
    // it writes is forgotten (records expire, purges run) shortly after, so a wait follows.
    if (TRACKER.has(op) && !http && r.chance(0.06)) {
      step.client = 'shortRetention'
      if (!READS.has(op)) short = true
    }
    out.push(step)
    if (family) issued[family].push(id)
    if (op === 'claim') claims.push([args[0], args[1], id])
    if (op === 'claimBatch' && Array.isArray(args[1]) && args[1].length) claims.push([args[0], args[1][r.int(args[1].length)], id])
    if (short) out.push({ id: out.length, op: 'wait', args: [step.client ? RETENTION_WAIT : WAIT] })
  }
  return out
}
