#!/usr/bin/env node
// listItems on PostgreSQL in a big group: the time of a page.
//
//   node bench/postgres-list.mjs [dir]
//
// `dir`: the build to load (its index.js; default this checkout). Loads LIST_ITEMS ids (default
// 200,000) into one group by claimBatch of 10,000 (lease 1 h), completes half of them and fails
// LIST_FAILED (default 10,000) of the rest with setItems in calls of 10,000, then times
// listItems: the first page (limit 100) for filter all and for each status, and a page of 100 at
// offset LIST_ITEMS / 2 (filter all), LIST_RUNS calls each (default 5), one after another.
// Reports the median, min and max per case in ms, and the counts seen. Beside them, the floor
// of any list that returns exact counts: `SELECT count(*)` of the group's rows by node-postgres
// on the same table (PostgreSQL's own settings, parallel workers allowed), the least a count of
// the group costs the database.
//
// After the load, LIST_SETTLE: `vacuum` (default) runs `VACUUM ANALYZE` of the items table, what
// autovacuum does within its naptime (a minute by default) after so many rows changed: the
// completions' and failures' old row versions gone, the statistics of the table as it is;
// `analyze` runs `ANALYZE` only (the old versions still in the heap, as in the minute before
// autovacuum comes); `none` measures at once, with the statistics the load left.
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
const ITEMS = Number(process.env.LIST_ITEMS || 200_000)
const FAILED = Number(process.env.LIST_FAILED || 10_000)
const RUNS = Number(process.env.LIST_RUNS || 5)
const CHUNK = 10_000

const cluster = process.env.FLOWGUARD_TEST_POSTGRES_URL ? null : await startPostgres()
const url = process.env.FLOWGUARD_TEST_POSTGRES_URL ?? cluster.url
const schema = `fglist_${randomBytes(3).toString('hex')}`
// A command timeout long enough for the slow build to answer at all.
const fg = await Flowguard.open({ postgres: { url, schema }, commandTimeoutMs: 60_000 })
const group = 'big'
const id = (i) => `item-${String(i).padStart(8, '0')}`

try {
  const t0 = performance.now()
  for (let start = 0; start < ITEMS; start += CHUNK) {
    const ids = Array.from({ length: Math.min(CHUNK, ITEMS - start) }, (_, k) => id(start + k))
    const b = await fg.claimBatch(group, ids, { timeoutMs: 3_600_000 })
    // Complete the first half of each chunk; fail some of the rest.
    const half = Math.floor(ids.length / 2)
    const failN = Math.min(ids.length - half, Math.round((FAILED * ids.length) / ITEMS))
    const reqs = [
      ...ids.slice(0, half).map((i) => ({ id: i, status: 'completed', owner: b.owner })),
      ...ids.slice(half, half + failN).map((i) => ({ id: i, status: 'failed', owner: b.owner, error: 'boom' })),
    ]
    await fg.setItems(group, reqs)
  }
  console.log(`loaded ${ITEMS} items in ${((performance.now() - t0) / 1000).toFixed(1)} s (load ${loadavg()[0].toFixed(2)})`)
  const settle = process.env.LIST_SETTLE ?? 'vacuum'
  const settleSql = { vacuum: 'VACUUM ANALYZE', analyze: 'ANALYZE', none: null }[settle]
  if (settleSql === undefined) throw new Error(`LIST_SETTLE: vacuum, analyze or none, not ${settle}`)
  if (settleSql) {
    const db = new pg.Client({ connectionString: url })
    await db.connect()
    try {
      await db.query(`${settleSql} ${schema}.items`)
    } finally {
      await db.end()
    }
  }
  console.log(`settled: LIST_SETTLE=${settle}`)
  {
    const db = new pg.Client({ connectionString: url })
    await db.connect()
    try {
      const { rows } = await db.query(
        `SELECT pg_relation_size(c.oid) AS heap, pg_indexes_size(c.oid) AS indexes FROM pg_class c
          JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'items'`,
        [schema],
      )
      const mib = (b) => (Number(b) / 1048576).toFixed(1)
      console.log(`items table ${mib(rows[0].heap)} MiB, its indexes ${mib(rows[0].indexes)} MiB`)
    } finally {
      await db.end()
    }
  }

  const cases = [
    ['all, first page', { limit: 100 }],
    ['in_progress, first page', { status: 'in_progress', limit: 100 }],
    ['abandoned, first page', { status: 'abandoned', limit: 100 }],
    ['completed, first page', { status: 'completed', limit: 100 }],
    ['failed, first page', { status: 'failed', limit: 100 }],
    ['dead, first page', { status: 'dead', limit: 100 }],
    [`all, offset ${ITEMS / 2}`, { offset: ITEMS / 2, limit: 100 }],
  ]
  const rows = []
  for (const [label, opts] of cases) {
    const ms = []
    let last
    for (let r = 0; r < RUNS; r++) {
      const t = performance.now()
      last = await fg.listItems(group, opts)
      ms.push(performance.now() - t)
    }
    ms.sort((a, b) => a - b)
    rows.push({
      case: label,
      median: ms[Math.floor(ms.length / 2)].toFixed(1),
      min: ms[0].toFixed(1),
      max: ms[ms.length - 1].toFixed(1),
      items: last.items.length,
      next: last.nextOffset ?? '-',
    })
    if (label.startsWith('all, first')) console.log('counts', JSON.stringify(last.counts))
  }
  // The floor: a count of the group's rows (kept or not), nothing else.
  const db = new pg.Client({ connectionString: url })
  await db.connect()
  try {
    const ms = []
    for (let r = 0; r < RUNS; r++) {
      const t = performance.now()
      await db.query(`SELECT count(*) FROM ${schema}.items WHERE grp = $1`, [Buffer.from(group)])
      ms.push(performance.now() - t)
    }
    ms.sort((a, b) => a - b)
    const median = ms[Math.floor(ms.length / 2)].toFixed(1)
    rows.push({ case: 'floor: count(*) of the group', median, min: ms[0].toFixed(1), max: ms[ms.length - 1].toFixed(1), items: '-', next: '-' })
  } finally {
    await db.end()
  }
  console.table(rows)
  console.log(`load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`)
} finally {
  await fg.close()
  if (cluster) await cluster.stop()
}
