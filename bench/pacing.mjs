#!/usr/bin/env node
// Rate Limiter and Semaphore side by side on one redis-server, in one run:
//   - limiter decisions per second: flowguard `rateLimit` vs rate-limiter-flexible's
//     RateLimiterRedis `consume` (over ioredis), one at a time and 64 in flight, a rate so high
//     that every decision allows (both libraries then do their full write);
//   - semaphore acquire + release pairs per second: flowguard `acquirePermit` / `releasePermit`
//     vs redis-semaphore's Semaphore (over ioredis), 1000 permits (never full), one at a time and
//     64 in flight; beside it ioredis running flowguard's own scripts, and ioredis running the
//     floor (the least pair that keeps flowguard's guarantees, SEM_FLOOR below).
// "Redis CPU µs per call": the server's CPU time per decision or pair (/proc/<pid>/schedstat of
// the server, so only when it runs on this machine), less swayed by a loaded machine than rates.
// BENCH_CASES (a regular expression): only the cases whose name matches it.
// Rounds alternate between the libraries (A, B, A, B, …); medians of BENCH_ROUNDS (default 5).
// Needs the release build (`npm run build`) and `npm install` in bench/. Starts its own
// redis-server unless REDIS_URL is set. Prints a table; writes nothing.
import { createRequire } from 'node:module'
import { randomBytes } from 'node:crypto'
import { statSync, readdirSync, readFileSync } from 'node:fs'
import { loadavg, cpus } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { benchRedis } from './redis-server.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..')
const addon = readdirSync(root).find((f) => f.endsWith('.node'))
if (!addon || statSync(join(root, addon)).size > 16 * 2 ** 20) throw new Error('needs the release build at the repository root: npm run build')
const require = createRequire(import.meta.url)
const { Flowguard } = require(join(root, 'index.js'))
const { default: Redis } = await import('ioredis')
const { RateLimiterRedis } = await import('rate-limiter-flexible')
const { Semaphore } = await import('redis-semaphore')
const ROUNDS = Number(process.env.BENCH_ROUNDS || 5)

const redis = await benchRedis('pacing')
const url = redis.url
const uniq = (s) => `${s}:${randomBytes(6).toString('hex')}`
// Per second, and Redis's CPU µs per call when it can be read (see redisCpu).
async function loop(n, par, fn) {
  let next = 0
  const c0 = redisCpu()
  const t0 = process.hrtime.bigint()
  await Promise.all(Array.from({ length: par }, async () => { for (let i = next++; i < n; i = next++) await fn(i) }))
  return { rate: n / (Number(process.hrtime.bigint() - t0) / 1e9), cpu: (redisCpu() - c0) / 1000 / n }
}

const fg = await Flowguard.open({ url, prefix: 'bench:' })
const io = new Redis(url, { enableOfflineQueue: true })
await io.ping()

// flowguard's own semaphore scripts, run by ioredis: splits the cost of the scripts (fences, holder
// labels, Redis's clock) from the cost of the binding.
const lua = (f) => readFileSync(join(root, 'crates/core/src/backend/redis/lua', f), 'utf8')
const semAcquire = lua('semaphore_common.lua') + lua('fence_swap.lua') + lua('semaphore_acquire.lua')
const semRelease = lua('semaphore_release.lua')
const [acqSha, relSha] = [await io.script('LOAD', semAcquire), await io.script('LOAD', semRelease)]
const FENCE_KEEP_MS = 30 * 24 * 3600 * 1000
// The floor: the least an acquire + release pair does for flowguard's guarantees (a lease on the
// Redis clock, ended holders dropped, the live ones counted, a fence above the clock in µs and
// above the last one, kept in a counter that outlives the leases, the holder's fence in a key of
// its own expiring with its lease, the holders' key expiring with its longest lease): one script
// of 7 commands without its checks (foreign keys, labels, per-key limits), and a release of two
// plain commands pipelined (ZREM, DEL: not atomic, no script).
const SEM_FLOOR = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[2]) then return 0 end
local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
local f = string.format('%d', fence)
local last = redis.call('SET', KEYS[2], f, 'KEEPTTL', 'GET')
if not last then
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
elseif tonumber(last) >= fence then
  fence = tonumber(last) + 1
  f = string.format('%d', fence)
  redis.call('SET', KEYS[2], f, 'KEEPTTL')
end
local e = now + tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], e, ARGV[1])
redis.call('SET', KEYS[3], f, 'PXAT', e - 1)
if n == 0 then redis.call('PEXPIREAT', KEYS[1], e) else redis.call('PEXPIREAT', KEYS[1], e, 'GT') end
return fence`
const floorSha = await io.script('LOAD', SEM_FLOOR)
// Redis's own CPU time (ns, kernel included: replies and reads too), when the server runs on this
// machine: /proc/<pid>/schedstat counts only time on a CPU, so a loaded machine inflates it less
// than INFO commandstats (wall time around each command).
const redisPid = Number((await io.info('server')).match(/process_id:(\d+)/)[1])
const redisCpu = () => { try { return Number(readFileSync(`/proc/${redisPid}/schedstat`, 'utf8').split(' ')[0]) } catch { return NaN } }

const RATE = { limit: 1_000_000, periodMs: 1000, burst: 1_000_000 }
const sizes = [['one at a time', 1, 3000], ['64 in flight', 64, 20000]]
const cases = []
for (const [label, par, n] of sizes) {
  cases.push([`limiter decision, ${label}`, {
    flowguard: async () => { const k = uniq('rl'); return loop(n, par, async () => { const r = await fg.rateLimit(k, RATE); if (!r.allowed) throw new Error('refused') }) },
    'rate-limiter-flexible': async () => {
      const rl = new RateLimiterRedis({ storeClient: io, keyPrefix: uniq('rlf'), points: RATE.limit, duration: 1 })
      return loop(n, par, async () => { await rl.consume('k') })
    },
  }])
  cases.push([`semaphore acquire + release, ${label}`, {
    flowguard: async () => { const k = uniq('sem'); return loop(n, par, async () => { const p = await fg.acquirePermit(k, { permits: 1000, timeoutMs: 10000 }); await fg.releasePermit(k, p.owner) }) },
    'redis-semaphore': async () => {
      const k = uniq('rs')
      return loop(n, par, async () => { const s = new Semaphore(io, k, 1000, { lockTimeout: 10000, acquireTimeout: 10000, refreshInterval: 0 }); await s.acquire(); await s.release() })
    },
  }])
  cases.push([`semaphore acquire + release, ${label}: ioredis running flowguard's scripts`, {
    'ioredis + flowguard scripts': async () => {
      const k = uniq('{semio}')
      return loop(n, par, async () => {
        const owner = randomBytes(16).toString('hex')
        const keys = [`${k}:h`, `${k}:fence`, `${k}:p:${owner}`]
        const got = await io.evalsha(acqSha, 3, ...keys, owner, 1000, 10000, '', FENCE_KEEP_MS)
        if (got[0] !== 1) throw new Error(`not acquired: ${got}`)
        await io.evalsha(relSha, 3, ...keys, owner)
      })
    },
    'redis-semaphore': async () => {
      const k = uniq('rs')
      return loop(n, par, async () => { const s = new Semaphore(io, k, 1000, { lockTimeout: 10000, acquireTimeout: 10000, refreshInterval: 0 }); await s.acquire(); await s.release() })
    },
  }])
  cases.push([`semaphore acquire + release, ${label}: the floor`, {
    'ioredis floor (least pair with the guarantees)': async () => {
      const k = uniq('{semfloor}')
      return loop(n, par, async () => {
        const owner = randomBytes(16).toString('hex')
        const [h, p] = [`${k}:h`, `${k}:p:${owner}`]
        const fence = await io.evalsha(floorSha, 3, h, `${k}:fence`, p, owner, 1000, 10000, FENCE_KEEP_MS)
        if (!fence) throw new Error('not acquired')
        await io.pipeline().zrem(h, owner).del(p).exec()
      })
    },
    'redis-semaphore': async () => {
      const k = uniq('rs')
      return loop(n, par, async () => { const s = new Semaphore(io, k, 1000, { lockTimeout: 10000, acquireTimeout: 10000, refreshInterval: 0 }); await s.acquire(); await s.release() })
    },
  }])
}

const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1]
const only = process.env.BENCH_CASES && new RegExp(process.env.BENCH_CASES)
console.log(`pacing bench: ${ROUNDS} rounds, Node ${process.version}, ${cpus().length} cores, load ${loadavg().map((x) => x.toFixed(1)).join(' ')}, Redis ${url}`)
console.log('| case | flowguard | other | other library | flowguard / other | Redis CPU µs per call, flowguard / other |')
console.log('|---|---:|---:|---|---:|---:|')
for (const [name, libs] of cases) {
  if (only && !only.test(name)) continue
  const [a, b] = Object.keys(libs)
  const res = { [a]: [], [b]: [] }
  await libs[a](); await libs[b]() // warm-up
  for (let r = 0; r < ROUNDS; r++) for (const l of r % 2 ? [b, a] : [a, b]) res[l].push(await libs[l]())
  const fa = median(res[a].map((x) => x.rate))
  const fb = median(res[b].map((x) => x.rate))
  const [ca, cb] = [a, b].map((l) => median(res[l].map((x) => x.cpu)).toFixed(1))
  console.log(`| ${name} | ${Math.round(fa).toLocaleString('en')} /s | ${Math.round(fb).toLocaleString('en')} /s | ${b} | ${(fa / fb).toFixed(2)} | ${ca} / ${cb} |`)
}
io.disconnect()
redis.stop()
process.exit(0)
