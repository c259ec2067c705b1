#!/usr/bin/env node
// File bytes per completed Item Tracker item on the durable store (issue 24): N items (default
// 100,000) claimed with claimBatch and completed with their owner token by setItems, in chunks
// of 1,000, with default options; then the client is closed, the log checkpointed into the file
// (sqlite3 CLI: `PRAGMA wal_checkpoint(TRUNCATE)`), and page_count × page_size divided by N.
// Also prints the items table's own bytes (dbstat) where the sqlite3 CLI has it.
//
//   node bench/durable-bytes.mjs [repo]   # repo: another checkout's root (its index.js), for "before"
//
// Prints one line per workload; nothing is written.
import { createRequire } from 'node:module'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { spawnSync } from 'node:child_process'

const root = resolve(process.argv[2] || join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..'))
const require = createRequire(join(root, 'index.js'))
const { Flowguard } = require(join(root, 'index.js'))
const N = Number(process.env.BENCH_ITEMS || 100_000)
const CHUNK = 1_000
const dir = mkdtempSync(join(tmpdir(), 'fg-durable-bytes-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))

function sql(path, query) {
  const r = spawnSync('sqlite3', [path, query], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`sqlite3: ${r.stderr}`)
  return r.stdout.trim()
}

/** Bytes of the file after a checkpoint, and of the items table (dbstat, when available). */
function bytes(path) {
  sql(path, 'PRAGMA wal_checkpoint(TRUNCATE);')
  const [pages, size] = sql(path, 'PRAGMA page_count; PRAGMA page_size;').split('\n').map(Number)
  let items = NaN
  try {
    items = Number(sql(path, "SELECT sum(pgsize) FROM dbstat WHERE name = 'items';"))
  } catch {}
  return { file: pages * size, items }
}

async function run(name, work) {
  const path = join(dir, `${name}.db`)
  const fg = await Flowguard.open({ path })
  for (let at = 0; at < N; at += CHUNK) {
    const ids = Array.from({ length: Math.min(CHUNK, N - at) }, (_, i) => `order-${String(at + i).padStart(7, '0')}`)
    await work(fg, ids)
  }
  await fg.close()
  const b = bytes(path)
  const per = (x) => (Number.isFinite(x) ? (x / N).toFixed(1) : 'n/a')
  console.log(`${name.padEnd(28)} ${N} items: file ${b.file} B = ${per(b.file)} B per item; items table ${per(b.items)} B per item`)
}

console.log(`# ${root}`)
await run('completed (claim, complete)', async (fg, ids) => {
  const c = await fg.claimBatch('weekly-sync', ids)
  if (c.claimed !== ids.length) throw new Error('claim failed')
  const done = await fg.setItems('weekly-sync', ids.map((id) => ({ id, status: 'completed', owner: c.owner })))
  if (!done.every((r) => r.ok)) throw new Error('complete failed')
})
await run('failed once, then completed', async (fg, ids) => {
  let c = await fg.claimBatch('weekly-sync', ids)
  await fg.setItems('weekly-sync', ids.map((id) => ({ id, status: 'failed', owner: c.owner, error: 'HTTP 503' })))
  c = await fg.claimBatch('weekly-sync', ids)
  const done = await fg.setItems('weekly-sync', ids.map((id) => ({ id, status: 'completed', owner: c.owner })))
  if (!done.every((r) => r.ok)) throw new Error('complete failed')
})
