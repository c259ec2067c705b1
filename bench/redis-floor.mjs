#!/usr/bin/env node
// The floor of Redis's own time for one Item Tracker claim + complete, on the Redis at hand: the
// fewest commands any script needs that keeps a record, an index by status and Redis's clock.
// Compares, in INFO commandstats µs per pair (EVALSHA or FCALL, their inner calls included):
//   empty   two scripts that only `return 1` (the cost of running a script at all);
//   lean    claim: TIME, HGET (the record), HSET, ZADD (in progress); complete: TIME, HGET, an
//           owner check, HSET, ZREM (in progress), ZADD (completed) — no attempts bookkeeping,
//           no timeline, no retention, no clean-up;
//   banded  as lean, with one index whose score bands stand for the status (no ZREM);
//   minimal as banded, with a claim that only creates a record (HSETNX instead of HGET + HSET):
//           the fewest commands a claim + complete can be.
// flowguard's scripts do more than `lean` (attempts, timeline, bounded clean-up, key expiry):
// `node bench/tracker-cost.mjs` measures them beside ioredis.
//
//   (cd bench && npm install) && node bench/redis-floor.mjs
//
// BENCH_ROUNDS (default 5) rounds of BENCH_ITEMS (default 10,000) pairs per case; medians.
// Starts its own redis-server unless REDIS_URL is set (then it must be a throwaway server: the
// benchmark runs FLUSHALL and CONFIG RESETSTAT).
import { createRequire } from 'node:module'
import { benchRedis } from './redis-server.mjs'

const require = createRequire(import.meta.url)
const IORedis = require('ioredis')
const ROUNDS = Number(process.env.BENCH_ROUNDS || 5)
const N = Number(process.env.BENCH_ITEMS || 10_000)

const claim = `local t = redis.call('TIME'); local now = t[1]*1000 + math.floor(t[2]/1000)
local raw = redis.call('HGET', KEYS[4], ARGV[1])
local rec = '1|' .. ARGV[2] .. '|' .. now
redis.call('HSET', KEYS[4], ARGV[1], rec)
redis.call('ZADD', KEYS[1], now + 30000, ARGV[1])
return {now, rec}`
const complete = `local t = redis.call('TIME'); local now = t[1]*1000 + math.floor(t[2]/1000)
local raw = redis.call('HGET', KEYS[4], ARGV[1])
local a, o = string.match(raw, '^(%d+)|([^|]*)|')
if o ~= ARGV[2] then return {-1} end
local rec = 'd|' .. a .. '|' .. now
redis.call('HSET', KEYS[4], ARGV[1], rec)
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], now + 2592000000, ARGV[1])
return {now, rec}`
const banded = complete
  .replace(`redis.call('ZREM', KEYS[1], ARGV[1])\n`, '')
  .replace('KEYS[2], now + 2592000000', 'KEYS[1], 4e13 + now + 2592000000')
const claimNew = `local t = redis.call('TIME'); local now = t[1]*1000 + math.floor(t[2]/1000)
local rec = '1|' .. ARGV[2] .. '|' .. now
if redis.call('HSETNX', KEYS[4], ARGV[1], rec) == 0 then return {-1} end
redis.call('ZADD', KEYS[1], now + 30000, ARGV[1])
return {now, rec}`
const cases = {
  empty: ['return 1', 'return 1'],
  lean: [claim, complete],
  banded: [claim, banded],
  minimal: [claimNew, banded],
}

const server = await benchRedis('floor')
const r = new IORedis(server.url)
const version = (await r.info('server')).match(/redis_version:(\S+)/)[1]
const shas = {}
let lib = '#!lua name=fgfloor\n'
for (const [name, [a, b]] of Object.entries(cases)) {
  shas[name] = [await r.script('load', a), await r.script('load', b)]
  for (const [fn, body] of [[`${name}_a`, a], [`${name}_b`, b]]) {
    lib += `redis.register_function('${fn}', function(KEYS, ARGV)\n${body}\nend)\n`
  }
}
await r.call('FUNCTION', 'LOAD', 'REPLACE', lib)
const usec = async (cmd) => {
  const m = (await r.info('commandstats')).match(new RegExp(`cmdstat_${cmd}:calls=\\d+,usec=(\\d+)`))
  return m ? Number(m[1]) : 0
}
const keys = ['{g}:ip', '{g}:c', '{g}:f', '{g}:r']
const results = {}
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, [a, b]] of Object.entries(shas)) {
    for (const mode of ['evalsha', 'fcall']) {
      await r.flushall()
      await r.config('resetstat')
      for (let i = 0; i < N; i++) {
        const id = `item${i}`
        if (mode === 'evalsha') {
          await r.evalsha(a, 4, ...keys, id, 'owner')
          await r.evalsha(b, 4, ...keys, id, 'owner')
        } else {
          await r.call('FCALL', `${name}_a`, 4, ...keys, id, 'owner')
          await r.call('FCALL', `${name}_b`, 4, ...keys, id, 'owner')
        }
      }
      ;(results[`${name} by ${mode.toUpperCase()}`] ??= []).push((await usec(mode)) / N)
    }
  }
}
console.log(`# Redis ${version}; ${ROUNDS} rounds of ${N} pairs; INFO commandstats µs per claim + complete`)
for (const [k, xs] of Object.entries(results)) {
  xs.sort((x, y) => x - y)
  console.log(`${k.padEnd(18)} median ${xs[Math.floor(xs.length / 2)].toFixed(2)} µs  (${xs.map((x) => x.toFixed(2)).join(' ')})`)
}
await r.call('FUNCTION', 'DELETE', 'fgfloor')
r.disconnect()
server.stop()
