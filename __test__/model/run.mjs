// The model test's runner: runs a generated sequence step by step against the embedded store (in
// memory and durable in a file) and Redis, compares the normalised results, shrinks a failing
// sequence and prints it as code.
import { setTimeout as sleep } from 'node:timers/promises'
import { performance } from 'node:perf_hooks'
import { Flowguard, durablePath, freshPrefix } from '../backends.mjs'
import { BOGUS_TOKEN, RETENTION, SHORT_RETENTION } from './generate.mjs'
import { Side, canon, same } from './normalise.mjs'

/** The documented error codes (README, Errors); ERR_INTERNAL is documented as a bug. */
const CODES = new Set(['ERR_INVALID_ARGUMENT', 'ERR_BACKEND_UNAVAILABLE', 'ERR_BACKEND_AUTH', 'ERR_BACKEND', 'ERR_TIMEOUT', 'ERR_NOT_OWNER', 'ERR_LOCK_LOST'])

/** The backends a sequence runs on, in the order their results are compared and printed. */
const SIDES = ['embedded', 'durable', 'redis']

async function openSides(url) {
  const side = async (name) => {
    const prefix = freshPrefix('model')
    const where = name === 'redis' ? { url } : name === 'durable' ? { path: durablePath(prefix) } : {}
    const s = new Side(name, await Flowguard.open({ ...where, prefix, retentionMs: RETENTION }))
    s.clients = { shortRetention: await Flowguard.open({ ...where, prefix, retentionMs: SHORT_RETENTION }) }
    return s
  }
  const sides = []
  for (const name of SIDES) sides.push(await side(name))
  return sides
}

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
  if (step.op === 'readBatch' && result && Array.isArray(result.items)) {
    const items = byShard(result.items)
    return { ...result, items, ids: items.map((x) => x.id) }
  }
  return result
}

async function runStep(side, step, pos, abs) {
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
  if (!err) return { ok: side.normalise(shardOrder(step, r), step.id) }
  if (err instanceof FnFailed) return { error: 'fn failed (passed on)' }
  return { error: err.code === undefined ? `no code (${err.name})` : err.code, message: String(err.message) }
}

/**
 * Runs `seq`; resolves to null when every backend agrees with the embedded store on every step,
 * else to the failure: { pos, step, results (in the order of SIDES), why }.
 */
export async function execute(seq, url, stats) {
  const sides = await openSides(url)
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
    const results = []
    for (const side of sides) results.push(await runStep(side, step, pos, abs))
    last = performance.now()
    if (stats) {
      const k = `${step.op} ${results[0].error === undefined ? 'ok' : results[0].error}`
      stats.set(k, (stats.get(k) || 0) + 1)
    }
    const bad = results.find((r) => r.error !== undefined && !CODES.has(r.error) && !r.error.startsWith('fn failed'))
    if (bad) return { pos, step, results, why: `an error without a documented code: ${bad.error}` }
    if (!results.every((r) => same(results[0], r))) return { pos, step, results, why: 'the backends disagree', sides }
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
export async function shrink(seq, failure, url, budgetMs) {
  const deadline = Date.now() + budgetMs
  let cur = units(seq.slice(0, failure.pos + 1))
  let best = failure
  for (let chunk = Math.max(1, cur.length >> 1); chunk >= 1; chunk = chunk >> 1) {
    for (let i = 0; i < cur.length && Date.now() < deadline;) {
      const cand = [...cur.slice(0, i), ...cur.slice(i + chunk)]
      const f = cand.length ? await execute(cand.flat(), url) : null
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
  return [
    `${failure.why} at position ${failure.pos} (${failure.step.op}):`,
    `  // on each backend: fg = await Flowguard.open({ url, prefix, retentionMs: ${RETENTION} }),`,
    `  // fgShortRetention = await Flowguard.open({ url, prefix, retentionMs: ${SHORT_RETENTION} }) (same prefix)`,
    ...lines,
    ...SIDES.map((name, i) => `  ${`${name}:`.padEnd(10)}${canon(failure.results[i])}`),
  ].join('\n')
}
