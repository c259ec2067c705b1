#!/usr/bin/env node
// Scale benchmark (issue 12): many entries expiring at once, on the embedded store and on Redis.
//
//   node bench/scale.mjs            1,000,000 tracked items and 1,000,000 queue claims per backend
//   node bench/scale.mjs --long     2,500,000 of each
//   BENCH_SCALE_N=20000 node bench/scale.mjs   any size (a smoke run)
//   node --expose-gc bench/scale.mjs   the setup's garbage collected before each measured phase
//
// For each backend and pattern: N entries are written so that they all expire at the same
// moment (tracker: completed records whose keepMs ends together, one item left in progress so the
// group's keys stay; queue: claims whose visibility timeout ends together). After that moment,
// ordinary calls run until the clean-up is done (Redis: the records hash / claimed set is back to
// its one live entry, counted with HLEN / ZCARD; embedded: N / 1000 calls and then some). It
// reports the slowest call seen by the caller, the slowest Redis command of that phase (SLOWLOG,
// threshold 1 ms), the event-loop lag (perf_hooks, max), and memory: Redis used_memory and the
// keys under the run's prefix (SCAN) before the writes and after the clean-up; the process RSS
// for the embedded store (glibc may keep freed pages, so RSS is an upper bound). Bounds (issue 12):
// no Redis call over ~50 ms, no embedded call blocking the event loop over ~20 ms.
// Starts its own redis-server on a free loopback port unless REDIS_URL is set. Prints a Markdown
// block for BENCHMARKS.md; writes nothing.
import { createRequire } from 'node:module'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks'
import { benchRedis } from './redis-server.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const { Flowguard } = require(join(here, '..', 'index.js'))
const IORedis = require('ioredis')

const N = Number(process.env.BENCH_SCALE_N || (process.argv.includes('--long') ? 2_500_000 : 1_000_000))
const CHUNK = 10_000
const SLICE = 1000

const redis = await benchRedis('scale')
const ownRedis = redis.own ? redis : null
const URL_ = redis.url
const io = new IORedis(URL_)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const ids = (from, n) => Array.from({ length: n }, (_, i) => `item-${from + i}`)

async function usedMemory() {
  const m = /used_memory:(\d+)/.exec(await io.info('memory'))
  return Number(m[1])
}
async function keysUnder(prefix) {
  let n = 0
  let cursor = '0'
  do {
    const [next, keys] = await io.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 10000)
    n += keys.length
    cursor = next
  } while (cursor !== '0')
  return n
}
async function keyOf(prefix, suffix) {
  let cursor = '0'
  do {
    const [next, keys] = await io.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 10000)
    const k = keys.find((x) => x.endsWith(suffix))
    if (k) return k
    cursor = next
  } while (cursor !== '0')
  return null
}

/** Runs `call` until `done()` (checked every 50 calls) or `maxCalls`; returns the slowest call
 * (ms), the calls made, and the event-loop lag (max, ms) while it ran. */
async function drain(call, done, maxCalls) {
  // The setup leaves millions of JavaScript objects behind: collect them first (with
  // --expose-gc), so the lag shows what the calls hold the loop for, and report the longest
  // garbage-collection pause seen during the phase beside it.
  globalThis.gc?.()
  let gcMax = 0
  const gcs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcMax = Math.max(gcMax, e.duration)
  })
  gcs.observe({ entryTypes: ['gc'] })
  const lag = monitorEventLoopDelay({ resolution: 1 })
  lag.enable()
  let slowest = 0
  let calls = 0
  const t0 = performance.now()
  while (calls < maxCalls) {
    const s = performance.now()
    await call(calls)
    slowest = Math.max(slowest, performance.now() - s)
    calls++
    if (calls % 50 === 0 && (await done())) break
    // Back to the event loop after every call, so the lag monitor sees how long one call held
    // it (an embedded call settles without I/O: consecutive calls would run in one turn).
    await new Promise((r) => setImmediate(r))
  }
  lag.disable()
  await new Promise((r) => setTimeout(r, 20)) // gc entries are delivered in a later task
  gcs.disconnect()
  return { slowest, calls, seconds: (performance.now() - t0) / 1000, lagMax: lag.max / 1e6, gcMax }
}

async function slowlogStart() {
  await io.config('SET', 'slowlog-log-slower-than', '1000')
  await io.config('SET', 'slowlog-max-len', '10000')
  await io.slowlog('RESET')
}
async function slowlogMax() {
  const log = await io.slowlog('GET', 10000)
  let max = 0
  let cmd = ''
  for (const e of log) {
    if (e[2] > max) {
      max = e[2]
      cmd = `${e[3][0]} ${(e[3][1] || '').slice(0, 12)}`
    }
  }
  return { ms: max / 1000, cmd, count: log.length }
}

const rows = []

/** The median time of `n` calls of `fn`, in ms. */
async function timed(n, fn) {
  const t = []
  for (let i = 0; i < n; i++) {
    const s = performance.now()
    await fn()
    t.push(performance.now() - s)
  }
  t.sort((a, b) => a - b)
  return t[n >> 1]
}

async function trackerCase(backend) {
  const prefix = `scale:${backend}:t:${process.pid}:`
  const fg = await Flowguard.open({ url: backend === 'redis' ? URL_ : undefined, prefix })
  const memBefore = backend === 'redis' ? await usedMemory() : process.memoryUsage().rss
  await fg.claim('g', 'live', { timeoutMs: 24 * 3600_000 })
  // Every record expires at `at`: keepMs is counted from each completion.
  const t0 = Date.now()
  const at = t0 + 3_600_000
  for (let i = 0; i < N; i += CHUNK) {
    const chunk = ids(i, Math.min(CHUNK, N - i))
    const b = await fg.claimBatch('g', chunk, { timeoutMs: 3_600_000 })
    const keepMs = Math.max(1, at - Date.now())
    await fg.setItems('g', chunk.map((id) => ({ id, status: 'completed', owner: b.owner, keepMs })))
  }
  const setupS = (Date.now() - t0) / 1000
  // One page from the middle of N + 1 records (issue 12: O(log n + page), not a sort of all).
  const pageMs = await timed(20, () => fg.listItems('g', { offset: Math.floor(N / 2), limit: 20 }))
  // Not waiting an hour: the records are completed again, in chunks, with a keepMs that ends at
  // one moment after this pass (which writes less than the first: only their expiry changes).
  const end = Date.now() + 2000 + setupS * 1000
  for (let i = 0; i < N; i += CHUNK) {
    const chunk = ids(i, Math.min(CHUNK, N - i))
    await fg.setItems('g', chunk.map((id) => ({ id, status: 'completed', keepMs: Math.max(1, end - Date.now()) })))
  }
  const wait = end - Date.now()
  if (wait > 0) await sleep(wait + 5)
  const records = backend === 'redis' ? await keyOf(prefix, ':r') : null
  if (backend === 'redis') await slowlogStart()
  let k = 0
  const r = await drain(
    async (i) => {
      // The calls a workflow makes: list a page, claim and complete one item, read one.
      if (i % 3 === 0) await fg.listItems('g', { limit: 20 })
      else if (i % 3 === 1) {
        const c = await fg.claim('g', `new-${k}`, { timeoutMs: 60_000 })
        await fg.complete('g', `new-${k++}`, { owner: c.owner, keepMs: 1 })
      } else await fg.getItem('g', 'live')
    },
    async () => backend === 'redis' ? (await io.hlen(records)) <= 1 + k : false,
    backend === 'redis' ? 10 * Math.ceil(N / SLICE) + 100 : Math.ceil(N / SLICE) + 100,
  )
  const log = backend === 'redis' ? await slowlogMax() : null
  const counts = (await fg.listItems('g')).counts
  await fg.setItems('g', [{ id: 'live', status: 'completed', keepMs: 1 }])
  await sleep(20)
  await fg.listItems('g')
  const keysLeft = backend === 'redis' ? await keysUnder(prefix) : null
  const memAfter = backend === 'redis' ? await usedMemory() : process.memoryUsage().rss
  rows.push({ backend, pattern: `tracker: ${N.toLocaleString('en-US')} completed records expiring at once`, setupS, pageMs, ...r, log, counts, keysLeft, memBefore, memAfter })
}

async function queueCase(backend) {
  const prefix = `scale:${backend}:q:${process.pid}:`
  const fg = await Flowguard.open({ url: backend === 'redis' ? URL_ : undefined, prefix })
  const memBefore = backend === 'redis' ? await usedMemory() : process.memoryUsage().rss
  const t0 = Date.now()
  for (let i = 0; i < N; i += CHUNK) await fg.enqueue('q', ids(i, Math.min(CHUNK, N - i)))
  const sizeMs = await timed(20, () => fg.queueSize('q'))
  // Every claim's visibility ends at `at`, after the claiming pass (given twice the enqueue time).
  const at = Date.now() + 2000 + 2 * (Date.now() - t0)
  let claimed = 0
  while (claimed < N) {
    const b = await fg.readBatch('q', { limit: CHUNK, visibilityTimeoutMs: Math.max(1, at - Date.now()) })
    if (b.items.length === 0) break
    claimed += b.items.length
  }
  const setupS = (Date.now() - t0) / 1000
  const wait = at - Date.now()
  if (wait > 0) await sleep(wait + 5)
  const claimedKey = backend === 'redis' ? await keyOf(prefix, ':c') : null
  if (backend === 'redis') await slowlogStart()
  const r = await drain(
    async (i) => {
      if (i % 2 === 0) await fg.queueSize('q')
      else await fg.enqueue('q', [`new-${i}`])
    },
    async () => backend === 'redis' ? (await io.zcard(claimedKey)) === 0 : false,
    Math.ceil(N / SLICE) + 100,
  )
  const log = backend === 'redis' ? await slowlogMax() : null
  const size = await fg.queueSize('q')
  // Give everything back: claim and ack all.
  while (true) {
    const b = await fg.readBatch('q', { limit: CHUNK })
    if (b.items.length === 0) break
    await fg.ack('q', b.owner, b.items.map((x) => x.id))
  }
  const keysLeft = backend === 'redis' ? await keysUnder(prefix) : null
  const memAfter = backend === 'redis' ? await usedMemory() : process.memoryUsage().rss
  rows.push({ backend, pattern: `queue: ${N.toLocaleString('en-US')} claims expiring at once`, setupS, sizeMs, ...r, log, counts: size, claimedN: claimed, keysLeft, memBefore, memAfter })
}

try {
  for (const backend of ['embedded', 'redis']) {
    await trackerCase(backend)
    await queueCase(backend)
  }
} finally {
  io.disconnect()
  ownRedis?.stop()
}

const ms = (v) => (v >= 10 ? v.toFixed(0) : v.toFixed(1))
const lines = []
lines.push(`Scale (bench/scale.mjs${N === 2_500_000 ? ' --long' : ''}, N = ${N.toLocaleString('en-US')}): clean-up after N entries expire at once. Bounds: Redis call ≤ ~50 ms, embedded call ≤ ~20 ms of event-loop lag.`)
lines.push('')
lines.push('| backend | pattern | calls until cleaned | slowest call (caller) ms | slowest Redis command ms | event-loop lag max ms | longest GC pause ms | memory before → after | keys left (SCAN) |')
lines.push('|---|---|---:|---:|---:|---:|---:|---|---:|')
for (const r of rows) {
  const mem = r.backend === 'redis'
    ? `used_memory ${(r.memBefore / 2 ** 20).toFixed(1)} → ${(r.memAfter / 2 ** 20).toFixed(1)} MiB`
    : `RSS ${(r.memBefore / 2 ** 20).toFixed(0)} → ${(r.memAfter / 2 ** 20).toFixed(0)} MiB`
  const slow = r.log ? `${ms(r.log.ms)}${r.log.count ? ` (${r.log.cmd.trim()})` : ' (none ≥ 1 ms)'}` : '–'
  lines.push(`| ${r.backend} | ${r.pattern} | ${r.calls} | ${ms(r.slowest)} | ${slow} | ${ms(r.lagMax)} | ${ms(r.gcMax)} | ${mem} | ${r.keysLeft ?? '–'} |`)
}
lines.push('')
lines.push('Reads at that size, before the expiry (median of 20 calls): ' + rows.map((r) => r.pageMs != null
  ? `${r.backend} listItems page of 20 at offset N/2 ${r.pageMs.toFixed(2)} ms`
  : `${r.backend} queueSize ${r.sizeMs.toFixed(2)} ms`).join('; ') + '.')
console.log(lines.join('\n'))
console.log('\n' + JSON.stringify(rows.map((r) => ({ ...r, log: r.log })), null, 1))
process.exit(0)
