#!/usr/bin/env node
// The floor of a failover-safe fencing token on Redis: Redis's own time per lock acquire + release
// (INFO commandstats, EVALSHA with its inner calls), 64 pairs in flight over 64 lock names, for
//   incr       0.1.0's acquire: INCR of the counter + SET NX PX. No clock: a promoted replica that
//              missed the last INCR hands that token out again (the checked histories found it);
//   floor      the fewest commands a grant needs whose token is above every token handed out,
//              even ones a failover lost: TIME (the clock passed them), SET NX PX GET of the lock,
//              SET GET of the counter (the last token, for a clock that went back). Nothing
//              checked, no fix-up: not a lock, the cost of its commands;
//   flowguard  crates/core/src/backend/redis/lua/fence_swap.lua + lock_acquire.lua, as the addon runs them.
// Every case releases with lock_release.lua (GET, owner check, DEL). Each round starts from 64 fence
// counters a second behind the clock (the usual grant: the counter is there and below the clock).
//
//   (cd bench && npm install) && node bench/lock-floor.mjs
//
// BENCH_ROUNDS (default 15) rounds of BENCH_PAIRS (default 20,000) pairs per case, the cases in a
// new random order each round; medians. Starts its own redis-server unless REDIS_URL is set (then
// it must be a throwaway server: the benchmark runs FLUSHALL and CONFIG RESETSTAT).
import { createRequire } from 'node:module'
import { readFileSync } from 'node:fs'
import { benchRedis } from './redis-server.mjs'

const require = createRequire(import.meta.url)
const IORedis = require('ioredis')
const ROUNDS = Number(process.env.BENCH_ROUNDS || 15)
const N = Number(process.env.BENCH_PAIRS || 20_000)
const lua = (f) => readFileSync(new URL(`../crates/core/src/backend/redis/lua/${f}`, import.meta.url), 'utf8')

const incr = `local fence = redis.pcall('INCR', KEYS[2])
if type(fence) ~= 'number' then return {false, 2} end
if fence ~= 1 then
  if redis.call('SET', KEYS[1], ARGV[1] .. string.format('%d', fence) .. ':' .. ARGV[3], 'NX', 'PX', ARGV[2]) then
    return fence
  end
  redis.call('DECR', KEYS[2])
else
  local t = redis.call('TIME')
  fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local f = string.format('%d', fence)
  if redis.call('SET', KEYS[1], ARGV[1] .. f .. ':' .. ARGV[3], 'NX', 'PX', ARGV[2]) then
    redis.call('SET', KEYS[2], f, 'PX', ARGV[4])
    return fence
  end
  redis.call('DEL', KEYS[2])
end
local v = redis.pcall('GET', KEYS[1])
local rest = type(v) == 'string' and string.match(v, '^[^:]+:(%d+:.*)$')
if not rest then return {false, 1} end
return {rest, redis.call('PTTL', KEYS[1])}`
const floor = `local t = redis.call('TIME')
local f = t[1] .. string.format('%06d', t[2])
local v = redis.pcall('SET', KEYS[1], ARGV[1] .. f .. ':' .. ARGV[3], 'NX', 'PX', ARGV[2], 'GET')
if v then return {v, 0} end
redis.pcall('SET', KEYS[2], f, 'GET', 'KEEPTTL')
return f`
const cases = { incr, floor, flowguard: lua('fence_swap.lua') + lua('lock_acquire.lua') }

const server = await benchRedis('lock-floor')
const r = new IORedis(server.url)
const version = (await r.info('server')).match(/redis_version:(\S+)/)[1]
const sha = {}
for (const [name, body] of Object.entries(cases)) sha[name] = await r.script('load', body)
const release = await r.script('load', lua('lock_release.lua'))
const owner = `${'7f'.repeat(16)}:` // a 128-bit owner token and its ':', as the addon sends it
const usec = async () => Number((await r.info('commandstats')).match(/cmdstat_evalsha:calls=\d+,usec=(\d+)/)?.[1] ?? 0)

const results = Object.fromEntries(Object.keys(cases).map((k) => [k, { us: [], rate: [], held: 0 }]))
for (let round = 0; round < ROUNDS; round++) {
  for (const name of Object.keys(cases).sort(() => Math.random() - 0.5)) {
    await r.flushall()
    const [s, u] = await r.time()
    const behind = String(Number(s) * 1e6 + Number(u) - 1e6)
    for (let j = 0; j < 64; j++) await r.set(`fg:{l:n${j}}:fence`, behind, 'PX', 86_400_000)
    await r.config('resetstat')
    let next = 0
    const t0 = process.hrtime.bigint()
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        for (let i = next++; i < N; i = next++) {
          const lock = `fg:{l:n${i % 64}}`
          const got = await r.evalsha(sha[name], 2, lock, `${lock}:fence`, owner, '60000', '', '2592000000')
          if (Array.isArray(got)) results[name].held++
          else await r.evalsha(release, 1, lock, owner)
        }
      }),
    )
    const s2 = Number(process.hrtime.bigint() - t0) / 1e9
    results[name].us.push((await usec()) / N)
    results[name].rate.push(N / s2)
  }
}
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const base = median(results.incr.us)
console.log(`Redis ${version}; ${ROUNDS} rounds of ${N.toLocaleString('en-US')} acquire + release pairs, 64 in flight; medians\n`)
console.log('| acquire | Redis µs per pair | incr ÷ this | pairs/s (ioredis, one process) | held |')
console.log('|---|---:|---:|---:|---:|')
for (const [name, x] of Object.entries(results)) {
  const us = median(x.us)
  console.log(`| ${name} | ${us.toFixed(2)} | ${(base / us).toFixed(2)} | ${Math.round(median(x.rate)).toLocaleString('en-US')} | ${x.held} |`)
}
r.disconnect()
server.stop()
