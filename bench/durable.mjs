#!/usr/bin/env node
// The durable embedded store (a file) beside the in-memory one, and Redis when REDIS_URL is set:
// single claims awaited one at a time, claimBatch of 10,000, lock pairs (acquire + release),
// enqueue one id at a time, read batches of 100 + ack, at both durability levels; then the file
// size under a steady claim/complete workload whose records expire (it must level off).
//
//   npm run build && nice -n 10 node bench/durable.mjs
//
// Prints the figures (medians of BENCH_ROUNDS rounds, default 3) with the CPU time per call (per
// id for claimBatch and read+ack); nothing is written.
import { createRequire } from 'node:module'
import { mkdtempSync, rmSync, statSync, existsSync } from 'node:fs'
import { tmpdir, loadavg, cpus } from 'node:os'
import { join } from 'node:path'

const require = createRequire(import.meta.url)
const { Flowguard } = require('../index.js')
const ROUNDS = Number(process.env.BENCH_ROUNDS || 3)
const dir = mkdtempSync(join(tmpdir(), 'fg-durable-bench-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
let seq = 0

// Calls per second, and the process's CPU time (user + system, all threads) per call in µs:
// steadier than the rate on a shared machine.
async function rate(n, fn) {
  const t = process.hrtime.bigint()
  const cpu = process.cpuUsage()
  await fn()
  const used = process.cpuUsage(cpu)
  return { rate: n / (Number(process.hrtime.bigint() - t) / 1e9), cpu: (used.user + used.system) / n }
}

async function median(fn) {
  const xs = []
  for (let r = 0; r < ROUNDS; r++) xs.push(await fn(r))
  const mid = (k) => xs.map((x) => x[k]).sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  return { rate: mid('rate'), cpu: mid('cpu') }
}

const fmt = (x) => Math.round(x).toLocaleString('en-US')

async function measure(name, open, sizes) {
  const fg = await open()
  const single = await median((r) => rate(sizes.single, async () => {
    for (let i = 0; i < sizes.single; i++) if (!(await fg.claim(`s${r}`, `i${i}`)).claimed) throw new Error('claim failed')
  }))
  const ids = Array.from({ length: 10_000 }, (_, i) => `b${i}`)
  const batch = await median((r) => rate(ids.length, async () => {
    if ((await fg.claimBatch(`b${r}`, ids)).claimed !== ids.length) throw new Error('batch failed')
  }))
  const locks = await median(() => rate(sizes.locks, async () => {
    for (let i = 0; i < sizes.locks; i++) {
      const l = await fg.acquireLock('bench-lock')
      if (!l.acquired) throw new Error('lock busy')
      await fg.releaseLock('bench-lock', l.owner)
    }
  }))
  const enqueue = await median((r) => rate(sizes.queue, async () => {
    for (let i = 0; i < sizes.queue; i++) await fg.enqueue(`q${r}`, `id${i}`)
  }))
  const readAck = await median((r) => rate(sizes.queue, async () => {
    for (;;) {
      const b = await fg.readBatch(`q${r}`, { limit: 100 })
      if (!b.ids.length) break
      await fg.ack(`q${r}`, b.owner, b.ids)
    }
  }))
  const cell = (m, width, unit) => `${fmt(m.rate).padStart(width)}${unit} (${m.cpu.toFixed(2)} µs CPU)`
  console.log(
    `${name.padEnd(34)} single claims ${cell(single, 9, '/s')} | claimBatch ${cell(batch, 10, '/s')} | lock pairs ${cell(locks, 8, '/s')} | enqueue ${cell(enqueue, 8, '/s')} | read+ack ${cell(readAck, 8, ' ids/s')}`,
  )
}

const durable = (durability) => () => Flowguard.open({ path: join(dir, `s${seq++}.db`), durability })
console.log(`# ${cpus().length} cores, load average ${loadavg().map((x) => x.toFixed(1)).join(' ')} at start; medians of ${ROUNDS} rounds`)
await measure('in-memory embedded', () => Flowguard.open({ prefix: `bench${seq++}:` }), { single: 50_000, locks: 20_000, queue: 20_000 })
await measure('durable (default: survives kill -9)', durable('process'), { single: 10_000, locks: 5_000, queue: 5_000 })
await measure("durable durability 'fsync'", durable('fsync'), { single: 500, locks: 250, queue: 250 })
if (process.env.REDIS_URL) {
  await measure('redis', () => Flowguard.open({ url: process.env.REDIS_URL, prefix: `bench${seq++}:${Date.now()}:` }), { single: 5_000, locks: 2_500, queue: 2_500 })
}

// File size under a steady workload: every item claimed and completed, records kept 1 s. Expired
// rows go a slice per write, so the file must level off instead of growing with the item count.
const path = join(dir, 'steady.db')
const fg = await Flowguard.open({ path, retentionMs: 1000 })
const size = () => ['', '-wal'].reduce((s, x) => s + (existsSync(path + x) ? statSync(path + x).size : 0), 0)
const sizes = []
const t0 = Date.now()
for (let i = 1; i <= 60_000; i++) {
  const c = await fg.claim('steady', `i${i}`, { timeoutMs: 1000 })
  await fg.complete('steady', `i${i}`, { owner: c.owner })
  if (i % 10_000 === 0) sizes.push(`${i / 1000}k items: ${Math.round(size() / 1024)} KiB (${Math.round((Date.now() - t0) / 1000)} s)`)
}
console.log(`steady claim+complete, records kept 1 s: ${sizes.join(', ')}`)
