#!/usr/bin/env node
// Item Tracker on Redis, one item at a time: claim + complete per item, Redis's own time per
// pair (INFO commandstats: usec of EVALSHA and FCALL, divided by the items) and items/s, beside
// ioredis doing SET NX PX + an owner-checked script in the same run, against the same server.
//
//   (cd bench && npm install) && node bench/tracker-cost.mjs [label=dir ...]
//
// Each `label=dir` is a built flowguard package (a directory with index.js and the addon), so a
// build before a change and one after it run side by side (default: this checkout, `flowguard`).
// Rounds are interleaved (BENCH_ROUNDS, default 5, BENCH_ITEMS per round, default 3000); the
// figures are medians. Starts its own redis-server unless REDIS_URL is set.
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

const redis = await benchRedis('tracker-cost')
const io = new IORedis(redis.url)
const run = randomBytes(4).toString('hex')
for (const b of builds) {
  const { Flowguard } = require(join(b.dir, 'index.js'))
  b.fg = await Flowguard.open({ url: redis.url, prefix: `tc:${run}:${b.label}:` })
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
    name: 'ioredis SET NX PX + owner-checked script',
    cmds: ['set', 'evalsha'],
    async pair(g, i) {
      const key = `${g}:item-${i}`
      const t = token()
      if ((await io.set(key, t, 'PX', LEASE, 'NX')) !== 'OK') throw new Error('ioredis claim failed')
      if ((await io.evalsha(casSha, 1, key, t, 86400000)) !== 1) throw new Error('ioredis complete failed')
    },
  },
]

const samples = new Map(cases.map((c) => [c.name, { rate: [], us: [] }]))
for (let round = 0; round < ROUNDS; round++) {
  for (const c of cases) {
    const g = `tc:${run}:g${round}:${c.name.length}`
    const before = await usec(c.cmds)
    const t0 = performance.now()
    for (let i = 0; i < N; i++) await c.pair(g, i)
    const s = (performance.now() - t0) / 1000
    const after = await usec(c.cmds)
    samples.get(c.name).rate.push(N / s)
    samples.get(c.name).us.push((after - before) / N)
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
const base = median(samples.get(cases.at(-1).name).rate)
console.log(`claim + complete one item at a time, ${N} items x ${ROUNDS} rounds (medians)`)
console.log('case'.padEnd(44), 'items/s'.padStart(9), 'vs ioredis'.padStart(11), 'Redis us/item'.padStart(14))
for (const c of cases) {
  const s = samples.get(c.name)
  const rate = median(s.rate)
  console.log(c.name.padEnd(44), rate.toFixed(0).padStart(9), `${(rate / base).toFixed(2)}x`.padStart(11), median(s.us).toFixed(1).padStart(14))
}
for (const b of builds) await b.fg.close?.()
io.disconnect()
redis.stop()
