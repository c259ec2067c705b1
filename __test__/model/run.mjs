// The model test's runner: runs a generated sequence step by step on several sides (a backend
// through a shell: the Node API on the embedded store in memory and in a file, Redis, a Redis
// Cluster, PostgreSQL; flowguard-server over HTTP on those but the Cluster), compares the normalised results, shrinks a
// failing sequence and prints it as code.
import { setTimeout as sleep } from 'node:timers/promises'
import { performance } from 'node:perf_hooks'
import { Flowguard, durablePath, freshPrefix } from '../backends.mjs'
import { BOGUS_TOKEN, CATALOG, RETENTION, SHORT_RETENTION } from './generate.mjs'
import { Side, canon, same } from './normalise.mjs'
import { openServer } from './http.mjs'

/** The documented error codes (README, Errors; docs/server.md for the server's own); ERR_INTERNAL is documented as a bug. */
const CODES = new Set([
  'ERR_INVALID_ARGUMENT', 'ERR_BACKEND_UNAVAILABLE', 'ERR_BACKEND_AUTH', 'ERR_BACKEND', 'ERR_TIMEOUT', 'ERR_NOT_OWNER', 'ERR_LOCK_LOST',
  'ERR_INVALID_JSON', 'ERR_PAYLOAD_TOO_LARGE', 'ERR_UNSUPPORTED', 'ERR_STORAGE',
])

/**
 * The sides of a run, in the order their results are compared and printed: `names` among
 * `embedded`, `durable`, `redis` (`where.url`), `cluster` (`where.cluster`: seed URLs),
 * `postgres` (`where.postgres`: a PostgreSQL URL), each through the Node API, and
 * `server:embedded`, `server:durable`, `server:redis`, `server:postgres`: a flowguard-server of
 * its own on that backend, over HTTP. The first is the reference.
 */
export function plan(names, where = {}) {
  return { names, where }
}

/** Which shell a side goes through: its results' error messages are compared within a shell only. */
const shellOf = (name) => (name.startsWith('server:') ? 'http' : 'node')

async function openSide(name, { url, cluster, postgres }) {
  const prefix = freshPrefix('model')
  if (shellOf(name) === 'http') {
    const backend = name.slice('server:'.length)
    const args = ['--prefix', prefix, '--retention-ms', String(RETENTION)]
    if (backend === 'durable') args.push('--path', durablePath(prefix))
    if (backend === 'redis') args.push('--redis-url', url)
    if (backend === 'postgres') args.push('--postgres-url', postgres)
    const s = new Side(name, await openServer(args))
    s.clients = {}
    return s
  }
  const where = { redis: { url }, cluster: { cluster }, postgres: { postgres }, durable: { path: durablePath(prefix) } }[name] ?? {}
  const s = new Side(name, await Flowguard.open({ ...where, prefix, retentionMs: RETENTION }))
  s.clients = { shortRetention: await Flowguard.open({ ...where, prefix, retentionMs: SHORT_RETENTION }) }
  return s
}

async function openSides({ names, where }) {
  const sides = []
  try {
    for (const name of names) sides.push(await openSide(name, where))
  } catch (e) {
    await closeSides(sides)
    throw e
  }
  return sides
}

async function closeSides(sides) {
  for (const s of sides) await s.fg.stop?.()
}

/** The kind of fencing tokens an operation's result shows (a lock and a semaphore of one name count apart). */
const PERMIT_OPS = new Set(['acquirePermit', 'releasePermit', 'forceReleasePermit', 'extendPermit', 'getSemaphore', 'listSemaphores'])

/** What once()'s function throws: passed on as it is, so it has no code of flowguard's. */
class FnFailed extends Error {
  constructor() {
    super('fn failed')
  }
}

/** The arguments of a step as one backend gets them. */
function resolve(v, side, abs) {
  if (Array.isArray(v)) return v.map((x) => resolve(x, side, abs))
  if (v && typeof v === 'object') {
    if ('$tok' in v) return side.tokensByStep.get(v.$tok)?.[v.i] ?? BOGUS_TOKEN
    if ('$fence' in v) return fenceOf(side, v.$fence, v.d, v.kind)
    if ('$abs' in v) return abs
    if ('$undefined' in v) return undefined
    if ('$nan' in v) return NaN
    if ('$fn' in v) {
      if (v.$fn === 'throw') return () => { throw new FnFailed() }
      if (v.$fn === 'nan') return () => NaN
      return () => v.v
    }
    const out = {}
    for (const [k, x] of Object.entries(v)) out[k] = resolve(x, side, abs)
    return out
  }
  return v
}

/**
 * The last fencing token `side` showed for lock `name` (of `kind` 'permit': semaphore `name`), plus `d`. Fences count from 1 in memory
 * and in the file, from the clock on Redis: one before the first fence a side showed is 0 (no
 * grant) on one and a past grant's on another, so d = -1 then becomes 2 (one no grant has yet).
 * None shown (never granted): 1 + d, which no grant has on any backend.
 */
function fenceOf(side, name, d, kind = 'lock') {
  const k = `${kind}:${name}`
  const last = side.lastFence.get(k)
  if (last === undefined) return 1 + Math.max(d, 0)
  return last + (d < 0 && last === side.firstFence.get(k) ? 2 : d)
}

function absOf(args) {
  let found
  const walk = (v) => {
    if (Array.isArray(v)) v.forEach(walk)
    else if (v && typeof v === 'object') {
      if ('$abs' in v) found = v.$abs
      else Object.values(v).forEach(walk)
    }
  }
  walk(args)
  return found
}

// Over several shards the order among shards follows each shard's own clock reading (see
// normalise.mjs): put such lists in shard order, keeping each shard's own order.
function shardOrder(step, result) {
  const o = step.args[1]
  if (!o || typeof o !== 'object' || !(o.shards > 1) || o.shard !== undefined) return result
  const byShard = (xs) => xs.map((x, i) => [x, i]).sort((a, b) => a[0].shard - b[0].shard || a[1] - b[1]).map((p) => p[0])
  if (step.op === 'peek' && Array.isArray(result)) return byShard(result)
  if (step.op === 'deadLetters' && result && Array.isArray(result.items)) return { ...result, items: byShard(result.items) }
  if (step.op === 'readBatch' && result && Array.isArray(result.items)) {
    const items = byShard(result.items)
    return { ...result, items, ids: items.map((x) => x.id) }
  }
  return result
}

async function runStep(side, step, pos, abs) {
  // The catalog is the server's alone: the Node API's sides sit those steps out (they only read).
  if (CATALOG.has(step.op) && shellOf(side.name) !== 'http') return { skip: true }
  const args = resolve(step.args, side, abs)
  if (abs !== undefined) side.literals.set(abs, `abs${pos}`)
  const before = Date.now()
  let r
  let err
  try {
    const fg = step.client ? side.clients[step.client] : side.fg
    r = await fg[step.op](...args)
  } catch (e) {
    err = e || new Error(String(e))
  }
  // The window first: times this step wrote are named after it.
  side.window(pos, before, Date.now())
  side.space = PERMIT_OPS.has(step.op) ? 'permit' : 'lock'
  if (!err) {
    // A catalog listing runs on the servers only: its fences must not become the last one shown.
    side.listing = CATALOG.has(step.op)
    try {
      return { ok: side.normalise(shardOrder(step, r), step.id) }
    } finally {
      side.listing = false
    }
  }
  if (err instanceof FnFailed) return { error: 'fn failed (passed on)' }
  return { error: err.code === undefined ? `no code (${err.name})` : err.code, message: String(err.message) }
}

/**
 * Whether two sides' results of a step agree. Across shells an error is compared by its code
 * only (each shell words its messages; the HTTP ones name body fields).
 */
function agree(a, b, sameShell) {
  if (sameShell || a.error === undefined || b.error === undefined) return same(a, b)
  return a.error === b.error
}

/**
 * Runs `seq` on the sides of `p` (see plan); resolves to null when every side agrees with the
 * first that ran the step, on every step, else to the failure: { pos, step, results (in the
 * order of the sides), names, why }.
 */
export async function execute(seq, p, stats, times) {
  const sides = await openSides(p)
  try {
    return await steps(seq, sides, stats, times)
  } finally {
    await closeSides(sides)
  }
}

async function steps(seq, sides, stats, times) {
  const names = sides.map((s) => s.name)
  let last = performance.now()
  for (let pos = 0; pos < seq.length; pos++) {
    const step = seq[pos]
    if (step.op === 'wait') {
      await sleep(step.args[0])
      continue
    }
    // Each step reads each backend's clock more than 1 ms after the previous step did, so two
    // steps never share a millisecond (which would make ties, and time names, depend on speed).
    // setImmediate, not a timer: a timer's delay grows with the machine's load.
    while (performance.now() < last + 1.05) await new Promise(setImmediate)
    const rel = absOf(step.args)
    const abs = rel === undefined ? undefined : Date.now() + rel
    // The sides at once (each its own store, clock window and names): a step takes as long as
    // its slowest side, not the sum.
    const results = await Promise.all(sides.map(async (side) => {
      const t0 = performance.now()
      const r = await runStep(side, step, pos, abs)
      if (times) times.set(side.name, (times.get(side.name) || 0) + performance.now() - t0)
      return r
    }))
    last = performance.now()
    const ran = results.map((r, i) => [r, i]).filter(([r]) => !r.skip)
    const [ref, refAt] = ran[0]
    if (stats) {
      const refused = ref.ok && (ref.ok.allowed === false || ref.ok.acquired === false || ref.ok.claimed === false)
      const k = `${step.op} ${ref.error !== undefined ? ref.error : refused ? 'refused' : 'ok'}`
      stats.set(k, (stats.get(k) || 0) + 1)
      // How often the dead letters were reached (a listing that found some), so a run shows it.
      if (step.op === 'deadLetters' && ref.ok?.items?.length) stats.set('deadLetters found', (stats.get('deadLetters found') || 0) + 1)
      if (step.op === 'queueSize' && ref.ok?.dead) stats.set('queueSize dead', (stats.get('queueSize dead') || 0) + 1)
      if (step.op === 'requeueDead' && ref.ok?.requeued) stats.set('requeueDead requeued', (stats.get('requeueDead requeued') || 0) + 1)
      if (step.op === 'enqueue' && ref.ok?.dead) stats.set('enqueue dead', (stats.get('enqueue dead') || 0) + 1)
    }
    const bad = results.find((r) => r.error !== undefined && !CODES.has(r.error) && !r.error.startsWith('fn failed'))
    if (bad) return { pos, step, results, names, why: `an error without a documented code: ${bad.error}` }
    if (!ran.every(([r, i]) => agree(ref, r, shellOf(names[i]) === shellOf(names[refAt])))) {
      return { pos, step, results, names, why: 'the backends disagree' }
    }
  }
  return null
}

/** Steps as units: an operation with the wait that follows it. */
function units(seq) {
  const out = []
  for (const s of seq) {
    if (s.op === 'wait' && out.length) out[out.length - 1].push(s)
    else out.push([s])
  }
  return out
}

/**
 * Shrinks a failing sequence: drops chunks of steps (halving the chunk size) while the rest
 * still fails, within `budgetMs`. Resolves to { seq, failure } of the smallest found.
 */
export async function shrink(seq, failure, p, budgetMs) {
  const deadline = Date.now() + budgetMs
  let cur = units(seq.slice(0, failure.pos + 1))
  let best = failure
  for (let chunk = Math.max(1, cur.length >> 1); chunk >= 1; chunk = chunk >> 1) {
    for (let i = 0; i < cur.length && Date.now() < deadline;) {
      const cand = [...cur.slice(0, i), ...cur.slice(i + chunk)]
      const f = cand.length ? await execute(cand.flat(), p) : null
      if (f) {
        cur = units(cand.flat().slice(0, f.pos + 1))
        best = f
      } else {
        i += chunk
      }
    }
    if (Date.now() >= deadline || chunk === 1) break
  }
  return { seq: cur.flat(), failure: best }
}

/** A value as JavaScript source. */
function js(v) {
  if (v === undefined) return 'undefined'
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : String(v)
  if (typeof v === 'string') {
    if (v.length > 40 && [...v].every((c) => c === [...v][0])) return `${JSON.stringify([...v][0])}.repeat(${[...v].length})`
    return JSON.stringify(v)
  }
  if (Array.isArray(v)) return `[${v.map(js).join(', ')}]`
  if (v && typeof v === 'object') {
    if ('$tok' in v) return `owner(step ${v.$tok}, #${v.i})`
    if ('$abs' in v) return `Date.now() + ${v.$abs}`
    if ('$undefined' in v) return 'undefined'
    if ('$nan' in v) return 'NaN'
    if ('$fn' in v) return v.$fn === 'throw' ? "() => { throw new Error('fn failed') }" : v.$fn === 'nan' ? '() => NaN' : `() => (${js(v.v)})`
    return `{ ${Object.entries(v).map(([k, x]) => `${/^\w+$/.test(k) ? k : JSON.stringify(k)}: ${js(x)}`).join(', ')} }`
  }
  return JSON.stringify(v)
}

/** The sequence as code, one call per line, and every backend's result of the failing step. */
export function describe(seq, failure) {
  const lines = seq.map((s, pos) =>
    s.op === 'wait' ? `  /* ${pos} */ await sleep(${s.args[0]})` : `  /* ${pos}, step ${s.id} */ await ${s.client ? 'fgShortRetention' : 'fg'}.${s.op}(${s.args.map(js).join(', ')})`,
  )
  // The failing step and each side's result first, then the sequence that led there: a log cut
  // short keeps what disagreed.
  const at = failure.pos
  return [
    `${failure.why} at position ${at} (${failure.step.op}):`,
    lines[at] ?? '',
    ...failure.names.map((name, i) => `  ${`${name}:`.padEnd(17)}${canon(failure.results[i])}`),
    'the sequence:',
    `  // on each backend: fg = await Flowguard.open({ url, prefix, retentionMs: ${RETENTION} }),`,
    `  // fgShortRetention = await Flowguard.open({ url, prefix, retentionMs: ${SHORT_RETENTION} }) (same prefix);`,
    `  // server:<backend>: the same calls on a flowguard-server of that backend, over HTTP (model/http.mjs)`,
    ...lines,
  ].join('\n')
}
