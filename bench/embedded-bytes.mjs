#!/usr/bin/env node
// RSS per completed Item Tracker item on the in-memory (embedded) store (issue 24), beside a
// JavaScript `Map` holding the same facts (id -> { status, attempts, finishedAt, error }).
// Each contender runs in a fresh Node process of its own (so they share no heap): it measures
// process.memoryUsage() after a GC, writes N items (default 100,000) of one group in chunks of
// 1,000, measures again after a GC, and prints the differences divided by N.
//   flowguard   claimBatch + setItems(completed, with the owner token), default options
//   js Map      map.set(id, { status: 'completed', attempts: 1, finishedAt: Date.now(), error: null })
//
//   node bench/embedded-bytes.mjs [dir]   # dir: another built checkout (its index.js), for "before"
//
//   calls only  the same calls with keepMs 1: every record is forgotten again (purged by the
//               next calls), so this is what the calls themselves leave in RSS: V8 keeps the heap
//               it grew for their arguments and results, and the allocator what it grew for
//               theirs. flowguard - calls only = what the store keeps per item.
//
// Every contender pauses BENCH_PAUSE_MS (default 2) after each chunk (the "calls only" run at
// least 2 ms: its records must expire; the others take the same pause, so the rows differ only
// in what they keep; BENCH_PAUSE_MS=0 is the script's earlier method, which paused only "calls
// only"): without the pause, the flowguard row measured 90-105 B per item more RSS, on main as
// on later builds (BENCHMARKS.md, "In-memory store").
//
// Allocation sizes do not depend on a debug or release build of the addon. Prints one line per
// contender; nothing is written.
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const self = fileURLToPath(import.meta.url)
const N = Number(process.env.BENCH_ITEMS || 100_000)
const CHUNK = 1_000
const PAUSE_MS = Number(process.env.BENCH_PAUSE_MS ?? 2)
const pause = (ms = PAUSE_MS) => (ms > 0 ? new Promise((r) => setTimeout(r, ms)) : Promise.resolve())
const ids = (at) => Array.from({ length: Math.min(CHUNK, N - at) }, (_, i) => `order-${String(at + i).padStart(7, '0')}`)

async function usage() {
  for (let i = 0; i < 3; i++) {
    globalThis.gc()
    await new Promise((r) => setImmediate(r))
  }
  return process.memoryUsage()
}

/** Claims and completes N items of one group; `keepMs` 1 for records forgotten at once. */
async function tracker(dir, keepMs) {
  const { Flowguard } = createRequire(join(dir, 'index.js'))(join(dir, 'index.js'))
  const fg = await Flowguard.open()
  const complete = async (group, batch) => {
    const c = await fg.claimBatch(group, batch)
    if (c.claimed !== batch.length) throw new Error('claim failed')
    const done = await fg.setItems(group, batch.map((id) => ({ id, status: 'completed', owner: c.owner, keepMs })))
    if (!done.every((r) => r.ok)) throw new Error('complete failed')
  }
  // Warm-up on another group (code paths, allocator arenas).
  await complete('warm-up', ids(0).slice(0, 10))
  const before = await usage()
  for (let at = 0; at < N; at += CHUNK) {
    await complete('weekly-sync', ids(at))
    await pause(keepMs === 1 ? Math.max(2, PAUSE_MS) : PAUSE_MS)
  }
  const after = await usage()
  const [item] = await fg.getItems('weekly-sync', ['order-0000000'])
  const want = keepMs === 1 ? 'none' : 'completed'
  if (item.status !== want) throw new Error(`read back ${JSON.stringify(item)}`)
  return { before, after, keep: fg }
}

const contenders = {
  flowguard: (dir) => tracker(dir),
  'calls only': (dir) => tracker(dir, 1),
  async map() {
    const map = new Map()
    const before = await usage()
    for (let at = 0; at < N; at += CHUNK) {
      for (const id of ids(at)) map.set(id, { status: 'completed', attempts: 1, finishedAt: Date.now(), error: null })
      await pause()
    }
    const after = await usage()
    return { before, after, keep: map }
  },
}

if (process.argv[2] === '--child') {
  const { before, after, keep } = await contenders[process.argv[3]](process.argv[4])
  const per = (k) => (after[k] - before[k]) / N
  process.stdout.write(JSON.stringify({ rss: per('rss'), heapUsed: per('heapUsed'), kept: !!keep }))
} else {
  const dir = resolve(process.argv[2] ?? join(import.meta.dirname, '..'))
  console.log(`# ${dir}, ${N} items`)
  const rows = {}
  for (const name of Object.keys(contenders)) {
    const r = spawnSync(process.execPath, ['--expose-gc', self, '--child', name, dir], { encoding: 'utf8' })
    if (r.status !== 0) throw new Error(`${name}: ${r.stderr}`)
    rows[name] = JSON.parse(r.stdout)
  }
  for (const [name, r] of Object.entries(rows)) {
    const ratio = (r.rss / rows.map.rss).toFixed(2)
    console.log(
      `${name.padEnd(11)} RSS ${r.rss.toFixed(0).padStart(5)} B per item (${ratio}x the Map), live JS heap ${r.heapUsed.toFixed(0)} B`,
    )
  }
  const kept = rows.flowguard.rss - rows['calls only'].rss
  console.log(`kept by the store (flowguard - calls only): ${kept.toFixed(0)} B per item`)
}
