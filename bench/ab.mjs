#!/usr/bin/env node
// Before / after in one run: the flowguard fast paths of two builds of the package, side by side
// in one process against one redis-server, interleaved round by round (A, B, A, B, …), medians.
//
//   node bench/ab.mjs <dir of build A> [<dir of build B, default: this repository>]
//
// A directory is a package root holding index.js and its release .node (e.g. a worktree of the
// commit before a change, built with `npm run build`). Starts its own redis-server unless
// REDIS_URL is set. BENCH_ROUNDS (default 7), BENCH_CASES (a regular expression: only the cases it
// matches). Prints a table with the ratio B / A per case; writes
// nothing. Used to show that a refactoring makes no row slower beyond noise (BENCHMARKS.md).
import { createRequire } from 'node:module'
import { randomBytes } from 'node:crypto'
import { statSync, readdirSync } from 'node:fs'
import { loadavg } from 'node:os'
import { join, dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { benchRedis } from './redis-server.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const [dirA, dirB = join(here, '..')] = process.argv.slice(2).map((d) => resolve(d))
if (!dirA) {
  console.error('usage: node bench/ab.mjs <package dir A> [<package dir B>]')
  process.exit(2)
}
for (const d of [dirA, dirB]) {
  const addon = readdirSync(d).find((f) => f.endsWith('.node'))
  if (!addon) throw new Error(`${d} holds no built .node`)
  if (statSync(join(d, addon)).size > 16 * 2 ** 20) throw new Error(`${d}/${addon} is a debug build: npm run build`)
}
const require = createRequire(import.meta.url)
const A = require(join(dirA, 'index.js')).Flowguard
const B = require(join(dirB, 'index.js')).Flowguard
const ROUNDS = Number(process.env.BENCH_ROUNDS || 7)

const redis = await benchRedis('ab')
const url = redis.url
const uniq = (s) => `${s}:${randomBytes(6).toString('hex')}`
async function loop(n, par, fn) {
  let next = 0
  const t0 = process.hrtime.bigint()
  await Promise.all(
    Array.from({ length: par }, async () => {
      for (let i = next++; i < n; i = next++) await fn(i)
    }),
  )
  return Number(process.hrtime.bigint() - t0) / 1e9
}
const ids = (n, tag) => Array.from({ length: n }, (_, i) => `${tag}-${i}`)

// Each case: (client for Redis, client for the embedded store) -> ops per second of one round.
const cases = {
  'Redis lock pair, one at a time': async (r) => {
    const name = uniq('l')
    return 3000 / (await loop(3000, 1, async () => {
      const l = await r.acquireLock(name, { timeoutMs: 60000 })
      await r.releaseLock(name, l.owner)
    }))
  },
  'Redis lock pair, 64 in flight': async (r) => {
    const base = uniq('l')
    return 20000 / (await loop(20000, 64, async (i) => {
      const l = await r.acquireLock(`${base}:${i % 64}`, { timeoutMs: 60000 })
      if (l.acquired) await r.releaseLock(`${base}:${i % 64}`, l.owner)
    }))
  },
  'Redis claim + complete, one at a time': async (r) => {
    const g = uniq('g')
    return 2000 / (await loop(2000, 1, async (i) => {
      const c = await r.claim(g, `i${i}`)
      await r.complete(g, `i${i}`, { owner: c.owner })
    }))
  },
  'Redis claimBatch of 10,000': async (r) => {
    const list = ids(10000, 'b')
    const g = uniq('g')
    const t0 = process.hrtime.bigint()
    await r.claimBatch(g, list)
    return 10000 / (Number(process.hrtime.bigint() - t0) / 1e9)
  },
  'Redis enqueue of 10,000': async (r) => {
    const q = uniq('q')
    const list = ids(10000, 'e')
    const t0 = process.hrtime.bigint()
    await r.enqueue(q, list)
    return 10000 / (Number(process.hrtime.bigint() - t0) / 1e9)
  },
  'Redis enqueue of 1, awaited': async (r) => {
    const q = uniq('q')
    return 3000 / (await loop(3000, 1, (i) => r.enqueue(q, `e-${i}`)))
  },
  'Redis enqueue of 100, awaited': async (r) => {
    const q = uniq('q')
    const list = ids(10000, 'e')
    return 10000 / (await loop(100, 1, (i) => r.enqueue(q, list.slice(i * 100, i * 100 + 100))))
  },
  'Redis readBatch of 100 + ack': async (r) => {
    const q = uniq('q')
    await r.enqueue(q, [...ids(10000, 'r'), 'zz-last'])
    return 10000 / (await loop(100, 1, async () => {
      const b = await r.readBatch(q, { limit: 100 })
      await r.ack(q, b.owner, b.ids)
    }))
  },
  'Redis getLock, awaited': async (r) => {
    const name = uniq('l')
    return 3000 / (await loop(3000, 1, () => r.getLock(name)))
  },
  'embedded claim, awaited one at a time': async (_, e) => {
    const g = uniq('g')
    return 100000 / (await loop(100000, 1, (i) => e.claim(g, `i${i}`)))
  },
  'embedded claim, 1000 in flight': async (_, e) => {
    const g = uniq('g')
    return 100000 / (await loop(100000, 1000, (i) => e.claim(g, `i${i}`)))
  },
  'embedded lock pair, awaited': async (_, e) => {
    const name = uniq('l')
    return 100000 / (await loop(100000, 1, async () => {
      const l = await e.acquireLock(name)
      await e.releaseLock(name, l.owner)
    }))
  },
  'embedded claimBatch of 10,000': async (_, e) => {
    const list = ids(10000, 'b')
    let n = 0
    const s = await loop(20, 1, () => (n++, e.claimBatch(uniq('g'), list)))
    return (n * 10000) / s
  },
  'embedded claimMany of 10,000': async (_, e) => {
    const list = ids(10000, 'b')
    let n = 0
    const s = await loop(10, 1, () => (n++, e.claimMany(uniq('g'), list)))
    return (n * 10000) / s
  },
  'embedded enqueue of 1, awaited': async (_, e) => {
    const q = uniq('q')
    return 100000 / (await loop(100000, 1, (i) => e.enqueue(q, `e-${i}`)))
  },
  'embedded readBatch of 100 + ack': async (_, e) => {
    const q = uniq('q')
    await e.enqueue(q, [...ids(50000, 'r'), 'zz-last'])
    return 50000 / (await loop(500, 1, async () => {
      const b = await e.readBatch(q, { limit: 100 })
      await e.ack(q, b.owner, b.ids)
    }))
  },
  'embedded getLock, awaited': async (_, e) => {
    const name = uniq('l')
    return 200000 / (await loop(200000, 1, () => e.getLock(name)))
  },
  'sync getter (fg.backend)': async (_, e) => {
    const t0 = process.hrtime.bigint()
    let x = 0
    for (let i = 0; i < 2000000; i++) x += e.backend.length
    if (x === 0) throw new Error('unreachable')
    return 2000000 / (Number(process.hrtime.bigint() - t0) / 1e9)
  },
}

// BENCH_CASES=<regular expression>: only the cases whose name matches it.
if (process.env.BENCH_CASES) {
  const only = new RegExp(process.env.BENCH_CASES)
  for (const name of Object.keys(cases)) if (!only.test(name)) delete cases[name]
}

const builds = []
for (const [tag, F] of [['A', A], ['B', B]]) {
  const prefix = `ab:${tag}:${randomBytes(4).toString('hex')}:`
  builds.push({ tag, redis: await F.open({ url, prefix }), emb: await F.open({ prefix }) })
}
const samples = Object.fromEntries(Object.keys(cases).map((k) => [k, { A: [], B: [] }]))
const loads = [loadavg()[0]]
for (let round = 0; round < ROUNDS; round++) {
  // Alternate which build goes first, so neither always runs on a warmer or cooler machine.
  const order = round % 2 === 0 ? builds : [...builds].reverse()
  for (const [name, fn] of Object.entries(cases)) {
    for (const b of order) samples[name][b.tag].push(await fn(b.redis, b.emb))
  }
  loads.push(loadavg()[0])
  process.stderr.write(`round ${round + 1}/${ROUNDS} done\n`)
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const fmt = (v) => Math.round(v).toLocaleString('en-US')
console.log(`A: ${dirA}\nB: ${dirB}\n${ROUNDS} rounds, medians; 1-minute load average ${loads.map((l) => l.toFixed(2)).join(', ')}\n`)
console.log('| case | A ops/s | B ops/s | B / A | A min – max | B min – max |\n|---|---:|---:|---:|---|---|')
for (const [name, { A: a, B: b }] of Object.entries(samples)) {
  console.log(`| ${name} | ${fmt(median(a))} | ${fmt(median(b))} | ${(median(b) / median(a)).toFixed(2)} | ${fmt(Math.min(...a))} – ${fmt(Math.max(...a))} | ${fmt(Math.min(...b))} – ${fmt(Math.max(...b))} |`)
}
if (redis) {
  redis.stop()
}
process.exit(0)
