#!/usr/bin/env node
// Item Tracker on Redis, one item at a time: claim + complete per item, Redis's own time per
// pair (INFO commandstats: usec of EVALSHA and FCALL, divided by the items) and items/s, beside
// ioredis doing SET NX PX + an owner-checked script in the same run, against the same server.
//
//   (cd bench && npm install) && node bench/tracker-cost.mjs [label=dir ...]
//
// Each `label=dir` is a built flowguard package (a directory with index.js and the addon), so a
// build before a change and one after it run side by side (default: this checkout, `flowguard`).
// Each build runs in a process of its own (two addons in one process do not share its event-loop
// connection fairly), with ioredis beside it; rounds are interleaved (BENCH_ROUNDS, default 5,
// BENCH_ITEMS per round, default 3000) against one redis-server, and the figures are medians.
// Starts its own redis-server unless REDIS_URL is set.
import { createRequire } from 'node:module'
import { randomBytes } from 'node:crypto'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { benchRedis } from './redis-server.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const IORedis = require('ioredis')

const ROUNDS = Number(process.env.BENCH_ROUNDS || 5)
const N = Number(process.env.BENCH_ITEMS || 3000)
const LEASE = 60000
const builds = (process.argv.slice(2).length ? process.argv.slice(2) : [`flowguard=${join(here, '..')}`]).map((a) => {
  const i = a.indexOf('=')
  return { label: a.slice(0, i), dir: resolve(a.slice(i + 1)) }
})

const IOREDIS = 'ioredis SET NX PX + owner-checked script'
const CHILD = process.env.TRACKER_COST_CHILD === '1'
if (!CHILD) {
  // The parent: one redis-server, a child process per build and round, medians at the end.
  const { execFileSync } = await import('node:child_process')
  const redis = await benchRedis('tracker-cost')
  const samples = new Map()
  const add = (name, rate, us) => {
    const s = samples.get(name) ?? { rate: [], us: [], ratio: [] }
    samples.set(name, s)
    s.rate.push(rate)
    s.us.push(us)
    return s
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const b of builds) {
      const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), `${b.label}=${b.dir}`], {
        env: { ...process.env, TRACKER_COST_CHILD: '1', REDIS_URL: redis.url },
        encoding: 'utf8',
      })
      const r = JSON.parse(out.trim().split('\n').at(-1))
      add(b.label, r.flowguard.rate, r.flowguard.us).ratio.push(r.flowguard.rate / r.ioredis.rate)
      add(IOREDIS, r.ioredis.rate, r.ioredis.us).ratio.push(1)
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
  console.log(`claim + complete one item at a time, ${N} items x ${ROUNDS} rounds per build (medians)`)
  console.log('case'.padEnd(44), 'items/s'.padStart(9), 'vs ioredis'.padStart(11), 'Redis us/item'.padStart(14))
  for (const [name, s] of samples) {
    console.log(name.padEnd(44), median(s.rate).toFixed(0).padStart(9), `${median(s.ratio).toFixed(2)}x`.padStart(11), median(s.us).toFixed(1).padStart(14))
  }
  redis.stop()
  process.exit(0)
}

// A child: one build (and ioredis) against the parent's server, one round.
const io = new IORedis(process.env.REDIS_URL)
const run = randomBytes(4).toString('hex')
for (const b of builds) {
  const { Flowguard } = require(join(b.dir, 'index.js'))
  b.fg = await Flowguard.open({ url: process.env.REDIS_URL, prefix: `tc:${run}:${b.label}:` })
}
const CAS_DONE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], 'done', 'PX', ARGV[2]) return 1 else return 0 end`
const casSha = await io.script('LOAD', CAS_DONE)
const token = () => randomBytes(16).toString('hex')

/** Total usec Redis spent in the commands named (INFO commandstats). */
async function usec(names) {
  const text = await io.info('commandstats')
  let total = 0
  for (const line of text.split('\r\n')) {
    const m = /^cmdstat_(\w+):calls=\d+,usec=(\d+)/.exec(line)
    if (m && names.includes(m[1])) total += Number(m[2])
  }
  return total
}

const cases = [
  ...builds.map((b) => ({
    name: b.label,
    cmds: ['evalsha', 'eval', 'fcall'],
    async pair(g, i) {
      const c = await b.fg.claim(g, `item-${i}`, { timeoutMs: LEASE })
      if (!c.claimed) throw new Error(`${b.label} claim failed`)
      await b.fg.complete(g, `item-${i}`, { owner: c.owner })
    },
  })),
  {
    name: IOREDIS,
    cmds: ['set', 'evalsha'],
    async pair(g, i) {
      const key = `${g}:item-${i}`
      const t = token()
      if ((await io.set(key, t, 'PX', LEASE, 'NX')) !== 'OK') throw new Error('ioredis claim failed')
      if ((await io.evalsha(casSha, 1, key, t, 86400000)) !== 1) throw new Error('ioredis complete failed')
    },
  },
]

const result = {}
// Which goes first alternates with the process id, so neither always runs on a warmer server.
const order = process.pid % 2 ? cases : [...cases].reverse()
for (const c of order) {
  const g = `tc:${run}:${c.name.length}`
  for (let i = 0; i < 200; i++) await c.pair(`${g}:warm`, i)
  const before = await usec(c.cmds)
  const t0 = performance.now()
  for (let i = 0; i < N; i++) await c.pair(g, i)
  const s = (performance.now() - t0) / 1000
  const after = await usec(c.cmds)
  result[c === cases.at(-1) ? 'ioredis' : 'flowguard'] = { rate: N / s, us: (after - before) / N }
}
for (const b of builds) await b.fg.close?.()
io.disconnect()
console.log(JSON.stringify(result))
