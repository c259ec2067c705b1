#!/usr/bin/env node
// The PostgreSQL backend at scale (issue 27): 1M tracked items that all expire within one window,
// with calls timed throughout, and the table's rows and size before, at the peak, after the
// clients' sweep removed the expired records with no writer, and after a writers' purge of what is
// left.
//
//   npm run build && node bench/postgres-scale.mjs [dir]
//
// Phases, one client (pool of 10) plus probes on a second client:
//   load     claimBatch of SCALE_ITEMS ids (default 1,000,000) in calls of 10,000, lease 1 s, kept
//            SCALE_RETENTION_MS after their lease (default 60 s): every record expires in the
//            window [end of load + retention - load time, end of load + retention]
//   wait     until the first record expired
//   sweep    no writer: only the probes that write no item (lock pair, getItem, listItems) run,
//            while the clients' sweeps (docs/postgres.md "Clean-up", every second by default)
//            delete the expired records, until the big group is empty or SCALE_SWEEP_WAIT_MS
//            (default 600,000) passed; SCALE_SWEEP=0 opens both clients with sweepIntervalMs: 0
//            and skips this phase (a build without the sweep: set it, or the phase waits in vain)
//   purge    writers (4 at a time: claim + complete of fresh items of another group; each write
//            removes a bounded slice of expired records, see docs/postgres.md) until the table
//            holds no more rows than the writers' own (nothing to do after a complete sweep)
//   reload   after a plain VACUUM, SCALE_ITEMS ids again (another group, the same calls): whether the
//            space the sweep freed is used again (a plain VACUUM gives back only the empty pages at
//            the file's end; the others are reused by later rows); SCALE_RELOAD=0 skips it
// Probes run through every phase, one after another, each timed: claim + complete of a fresh
// item, acquireLock + releaseLock, getItem of a loaded id, listItems (first page, 100) of the
// writers' group, claimBatch of 100 fresh ids (the two that write items not in the sweep phase:
// their writes purge slices too). Reported per phase and probe: calls, median, p99 and max latency
// in ms; the sweep's time and rows per second; and the items table's live rows, dead rows and size
// (pg_stat_user_tables, pg_total_relation_size) at the start, after the load, after the sweep,
// after the purge and after a plain VACUUM.
//
// Starts a throwaway PostgreSQL (scripts/postgres.mjs; fsync off) unless
// FLOWGUARD_TEST_POSTGRES_URL is set.
import { createRequire } from 'node:module'
import { randomBytes } from 'node:crypto'
import { loadavg } from 'node:os'
import { join, resolve } from 'node:path'
import { startPostgres } from '../scripts/postgres.mjs'

const require = createRequire(import.meta.url)
const pg = require('pg')
const dir = resolve(process.argv[2] ?? join(import.meta.dirname, '..'))
const { Flowguard } = require(join(dir, 'index.js'))
const ITEMS = Number(process.env.SCALE_ITEMS || 1_000_000)
const RETENTION = Number(process.env.SCALE_RETENTION_MS || 60_000)
const CHUNK = 10_000
const SWEEP = process.env.SCALE_SWEEP !== '0'
const SWEEP_WAIT = Number(process.env.SCALE_SWEEP_WAIT_MS || 600_000)
const RELOAD = process.env.SCALE_RELOAD !== '0'

const cluster = process.env.FLOWGUARD_TEST_POSTGRES_URL ? null : await startPostgres()
const url = process.env.FLOWGUARD_TEST_POSTGRES_URL ?? cluster.url
const schema = `fgscale_${randomBytes(3).toString('hex')}`
const noSweep = SWEEP ? {} : { sweepIntervalMs: 0 }
const fg = await Flowguard.open({ postgres: { url, schema, ...noSweep }, retentionMs: RETENTION })
const probe = await Flowguard.open({ postgres: { url, schema, poolSize: 4, ...noSweep }, retentionMs: RETENTION })
const db = new pg.Client({ connectionString: url })
await db.connect()

async function table(label) {
  await db.query('ANALYZE ' + schema + '.items')
  const r = await db.query(
    `SELECT n_live_tup::int8 AS live, n_dead_tup::int8 AS dead, pg_total_relation_size(relid)::int8 AS bytes
     FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'items'`, [schema])
  const rows = (await db.query(`SELECT count(*)::int8 AS n FROM ${schema}.items`)).rows[0].n
  const t = r.rows[0]
  return { label, rows: Number(rows), live: Number(t.live), dead: Number(t.dead), mb: (Number(t.bytes) / 2 ** 20).toFixed(1) }
}

// Probes: each call timed, per phase.
let phase = 'load'
const timings = {}
let stopProbes = false
let seq = 0
function record(kind, ms) {
  const k = `${phase} | ${kind}`;
  (timings[k] ??= []).push(ms)
}
const failures = []
async function timed(kind, fn) {
  const t0 = process.hrtime.bigint()
  try {
    await fn()
  } catch (e) {
    failures.push(`${phase} | ${kind} | ${e.code} after ${(Number(process.hrtime.bigint() - t0) / 1e6).toFixed(0)} ms: ${e.message}`)
    return
  }
  record(kind, Number(process.hrtime.bigint() - t0) / 1e6)
}
async function probes() {
  while (!stopProbes) {
    const id = `p-${seq++}`
    const writes = phase !== 'sweep'
    if (writes) {
      await timed('claim + complete', async () => {
        const c = await probe.claim('probes', id)
        await probe.complete('probes', id, { owner: c.owner })
      })
    }
    await timed('lock pair', async () => {
      const l = await probe.acquireLock('scale-lock')
      await probe.releaseLock('scale-lock', l.owner)
    })
    await timed('getItem', () => probe.getItem('big', `i-${seq % ITEMS}`))
    await timed('listItems 100', () => probe.listItems('writers', { limit: 100 }))
    if (writes) await timed('claimBatch 100', () => probe.claimBatch('probes', Array.from({ length: 100 }, (_, i) => `b-${seq}-${i}`)))
    await new Promise((r) => setTimeout(r, 5))
  }
}

const stats = [await table('start')]
const loads = [loadavg()[0]]
const running = probes()

// Load: ITEMS ids into `group` by claimBatch of CHUNK.
async function load(group, prefix) {
  for (let n = 0; n < ITEMS; n += CHUNK) {
    const ids = Array.from({ length: Math.min(CHUNK, ITEMS - n) }, (_, i) => `${prefix}-${n + i}`)
    let r
    await timed('load claimBatch 10,000', async () => { r = await fg.claimBatch(group, ids, { timeoutMs: 1000 }) })
    if (r && r.claimed !== ids.length) throw new Error(`claimed ${r.claimed} of ${ids.length}`)
  }
}
const t0 = Date.now()
await load('big', 'i')
const loadMs = Date.now() - t0
loads.push(loadavg()[0])
stats.push(await table('after load'))

// Wait until the first records expired (lease 1 s + retention after the first chunk).
phase = 'wait'
const firstExpiry = t0 + 1000 + RETENTION
while (Date.now() < firstExpiry + 1000) await new Promise((r) => setTimeout(r, 200))

const bigRows = async () =>
  Number((await db.query(`SELECT count(*)::int8 AS n FROM ${schema}.items WHERE grp = $1`, [Buffer.from('big')])).rows[0].n)

// Sweep: no writer, until the big group is empty (or the wait ran out).
let big = await bigRows()
let sweepMs = 0
let sweptAfterLast = 0
const bigAtSweep = big
if (SWEEP) {
  phase = 'sweep'
  const ts = Date.now()
  while (big > 0 && Date.now() - ts < SWEEP_WAIT) {
    await new Promise((r) => setTimeout(r, 250))
    big = await bigRows()
  }
  sweepMs = Date.now() - ts
  // The last records expired a lease and the retention after the end of the load.
  sweptAfterLast = Date.now() - (t0 + loadMs + 1000 + RETENTION)
  loads.push(loadavg()[0])
  stats.push(await table('after sweep'))
}

// Purge: writers until only the writers' and probes' own rows are left of the big group.
phase = 'purge'
const tp = Date.now()
let writes = 0
async function writer(w) {
  let i = 0
  while (big > 0) {
    const id = `w-${w}-${i++}`
    await timed('writer claim + complete', async () => {
      const c = await fg.claim('writers', id)
      await fg.complete('writers', id, { owner: c.owner })
    })
    writes += 2
  }
}
const watcher = (async () => {
  while (big > 0) {
    await new Promise((r) => setTimeout(r, 1000))
    big = await bigRows()
  }
})()
await Promise.all([watcher, writer(0), writer(1), writer(2), writer(3)])
const purgeMs = Date.now() - tp
loads.push(loadavg()[0])
stats.push(await table('after purge'))
await db.query(`VACUUM ${schema}.items`)
stats.push(await table('after VACUUM'))
let reloadMs = 0
if (RELOAD) {
  phase = 'reload'
  const tr = Date.now()
  await load('big2', 'j')
  reloadMs = Date.now() - tr
  loads.push(loadavg()[0])
  stats.push(await table('after a second load'))
}
stopProbes = true
await running

const q = (xs, p) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))]
console.log(`flowguard at ${dir}; PostgreSQL ${(await db.query('SHOW server_version')).rows[0].server_version}; ` +
  `${ITEMS} items, retention ${RETENTION} ms; load ${loadMs} ms (${Math.round(ITEMS / (loadMs / 1000))} ids/s), ` +
  (SWEEP ? `sweep (no writer) ${sweepMs} ms for ${bigAtSweep - big} of ${bigAtSweep} records ` +
    `(${Math.round((bigAtSweep - big) / Math.max(sweepMs, 1) * 1000)} rows/s), done ${sweptAfterLast} ms after the last expired` +
    `${big > 0 ? `, ${big} left` : ''}; ` : 'no sweep; ') +
  `purge ${purgeMs} ms with ${writes} writes; ` +
  (RELOAD ? `second load ${reloadMs} ms (${Math.round(ITEMS / (reloadMs / 1000))} ids/s); ` : '') +
  `1-minute load ${loads.map((l) => l.toFixed(1)).join(', ')}`)
console.log('\n| phase | probe | calls | median ms | p99 ms | max ms |\n|---|---|---:|---:|---:|---:|')
for (const [k, xs] of Object.entries(timings)) {
  xs.sort((a, b) => a - b)
  console.log(`| ${k} | ${xs.length} | ${q(xs, 0.5).toFixed(1)} | ${q(xs, 0.99).toFixed(1)} | ${xs[xs.length - 1].toFixed(1)} |`)
}
console.log(failures.length ? `\nFailed calls (${failures.length}):\n${failures.slice(0, 20).join('\n')}` : '\nNo call failed.')
console.log('\n| items table | rows | live (stats) | dead (stats) | MiB |\n|---|---:|---:|---:|---:|')
for (const t of stats) console.log(`| ${t.label} | ${t.rows} | ${t.live} | ${t.dead} | ${t.mb} |`)

await db.end()
await probe.close()
await fg.close()
cluster?.stop()
