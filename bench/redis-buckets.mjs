#!/usr/bin/env node
// What issue 24's Redis memory target (at most 120 bytes per completed Item Tracker item) costs in
// Redis time, on the Redis at hand: the least a claim + complete must do in four layouts, each
// measured for memory per completed item and for Redis's own time per claim + complete.
//   lean     flowguard's layout: one hash of records, an in-progress and a completed sorted set
//            (claim: HGET, HSET, ZADD; complete: HGET, HSET, ZREM, ZADD), as bench/redis-floor.mjs;
//   records  the records in hashes of about PER ids each (by the id's FNV-1a hash), so Redis keeps
//            each as a listpack; the indexes as in lean;
//   buckets  as records, and the completed index in sorted sets of at most LEAF ids (listpacks
//            too) under a root ordered by (expiry, id), each leaf's size counted and a full leaf
//            split in two: one level of what listItems' exact counts and ordered pages need;
//   tail     as buckets, the last leaf and its bound read from the counts' hash, so a completion
//            expiring after every other one skips the root's lookup;
//   done     in-progress records as lean (one hash, so a claimBatch of new ids is unchanged); a
//            completion moves the record into a hash of about PER ids and indexes it as tail; a
//            claim looks in both hashes.
// These are prototypes of the layouts' hot paths, not flowguard's scripts: no timeline, attempts
// bookkeeping, clean-up or key expiry on the write path (every key gets a TTL before memory is
// read, as a group's keys have one), and buckets never grow (a real layout would split them one at
// a time as the group grows). So they are lower bounds of what each layout costs.
//
//   (cd bench && npm install) && node bench/redis-buckets.mjs
//
// BENCH_ITEMS (default 50,000) items per run, 100 in flight; then BENCH_SERIAL (default 3,000)
// items of another group claimed and completed one call at a time (each awaited, as bench/ab.mjs's
// "claim + complete, one at a time" row). BENCH_ROUNDS (default 3) rounds of every case,
// interleaved; medians. BENCH_SHAPES: the PER/LEAF pairs (default 100/120,32/40,16/20);
// BENCH_LAYOUTS: which layouts beside lean (default records,buckets,tail,done).
// Starts its own redis-server unless REDIS_URL is set (then it must be a throwaway server: the
// benchmark runs FLUSHALL and CONFIG RESETSTAT).
import { createRequire } from 'node:module'
import { benchRedis } from './redis-server.mjs'

const require = createRequire(import.meta.url)
const IORedis = require('ioredis')
const N = Number(process.env.BENCH_ITEMS || 50_000)
const ROUNDS = Number(process.env.BENCH_ROUNDS || 3)
const SHAPES = (process.env.BENCH_SHAPES || '100/120,32/40,16/20').split(',').map((s) => s.split('/').map(Number))
const IN_FLIGHT = 100
const SERIAL = Number(process.env.BENCH_SERIAL || 3_000)
const LAYOUTS = (process.env.BENCH_LAYOUTS || 'records,buckets,tail,done').split(',')

// KEYS[1]: the group's key prefix. ARGV: id, owner (16 bytes), bucket count, leaf size, the id's
// 32-bit FNV-1a hash (computed by the caller, as flowguard's Rust side would: no Lua loop per byte).
const head = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, g = ARGV[1], KEYS[1]
local REC = '<c1I4I6I6I6'
`
// The record: status, attempts, created, updated, expiry (and the lease end while in progress),
// the owner and no error: flowguard's 42-byte completed record (tracker_head.lua).
const claimWith = (records, done) => head + `
local rk = ${records}
if redis.call('HGET', rk, id) then return 0 end
${done ? `if redis.call('HGET', ${done}, id) then return 0 end` : ''}
redis.call('HSET', rk, id, struct.pack(REC .. 'I6', 'p', 1, now, now, now + 90000, now + 30000) .. 'h' .. ARGV[2] .. '-' .. string.char(0))
redis.call('ZADD', g .. ':ip', now + 30000, id)
return 1`
const completeWith = (records, index, done) => head + `
local rk = ${records}
local raw = redis.call('HGET', rk, id)
if not raw then return -1 end
local _, a, c = struct.unpack(REC, raw)
if string.sub(raw, 31, 46) ~= ARGV[2] then return -2 end
local x = now + 86400000
${done ? `redis.call('HDEL', rk, id)
rk = ${done}` : ''}
redis.call('HSET', rk, id, struct.pack(REC, 'c', a, c, now, x) .. string.sub(raw, 30))
redis.call('ZREM', g .. ':ip', id)
${index}
return 1`
const ONE_HASH = `g .. ':r'`
const BUCKET = `g .. ':b:' .. (tonumber(ARGV[5]) % tonumber(ARGV[3]))`
const ONE_INDEX = `redis.call('ZADD', g .. ':c', x, id)`
// The leaf whose lower bound is the greatest at most (x, id): root members are the bound's
// 8-byte big-endian expiry, the id, '|' and the leaf's number, all scored 0 (ordered as bytes).
const leaves = (tail) => `
local root, key = g .. ':root', struct.pack('>I8', x) .. id
local found, t = false, false
${tail ? `t = redis.call('HMGET', g .. ':n', 't', 'tk')
if t[1] and t[2] < key then found = {'|' .. t[1]} end` : ''}
if not found then found = redis.call('ZREVRANGEBYLEX', root, '[' .. key .. '|', '-', 'LIMIT', 0, 1) end
local leaf
if found[1] then
  leaf = string.match(found[1], '|(%d+)$')
else
  -- Below every bound: the first leaf takes it, and its bound is lowered.
  local first = redis.call('ZRANGE', root, 0, 0)
  if first[1] then
    leaf = string.match(first[1], '|(%d+)$')
    redis.call('ZREM', root, first[1])
  else
    leaf = tostring(redis.call('HINCRBY', g .. ':n', '', 1))
    ${tail ? `redis.call('HSET', g .. ':n', 't', leaf, 'tk', key)` : ''}
  end
  redis.call('ZADD', root, 0, key .. '|' .. leaf)
end
local lk = g .. ':l:' .. leaf
redis.call('ZADD', lk, x, id)
local max = tonumber(ARGV[4])
if redis.call('HINCRBY', g .. ':n', leaf, 1) > max then
  local half = math.floor(max / 2)
  local upper = redis.call('ZRANGE', lk, half, -1, 'WITHSCORES')
  local new = tostring(redis.call('HINCRBY', g .. ':n', '', 1))
  local args = {}
  for i = 1, #upper, 2 do args[#args + 1] = upper[i + 1]; args[#args + 1] = upper[i] end
  redis.call('ZADD', g .. ':l:' .. new, unpack(args))
  redis.call('ZREMRANGEBYRANK', lk, half, -1)
  redis.call('HSET', g .. ':n', leaf, half, new, #upper / 2)
  local bound = struct.pack('>I8', tonumber(upper[2])) .. upper[1]
  redis.call('ZADD', root, 0, bound .. '|' .. new)
  ${tail ? `if not t or not t[1] or t[1] == leaf then redis.call('HSET', g .. ':n', 't', new, 'tk', bound) end` : ''}
end`
const layouts = {
  lean: [claimWith(ONE_HASH), completeWith(ONE_HASH, ONE_INDEX)],
  records: [claimWith(BUCKET), completeWith(BUCKET, ONE_INDEX)],
  buckets: [claimWith(BUCKET), completeWith(BUCKET, leaves(false))],
  tail: [claimWith(BUCKET), completeWith(BUCKET, leaves(true))],
  done: [claimWith(ONE_HASH, BUCKET), completeWith(ONE_HASH, leaves(true), BUCKET)],
}

const server = await benchRedis('buckets')
const r = new IORedis(server.url)
const version = (await r.info('server')).match(/redis_version:(\S+)/)[1]
for (const [name, [claim, complete]] of Object.entries(layouts)) {
  r.defineCommand(`${name}Claim`, { numberOfKeys: 1, lua: claim })
  r.defineCommand(`${name}Complete`, { numberOfKeys: 1, lua: complete })
}
const owner = Buffer.alloc(16, 0xa7)
const ids = Array.from({ length: N }, (_, i) => `order-${String(i).padStart(7, '0')}`)
const fnv1a = (s) => {
  let h = 0x811c9dc5
  for (const b of Buffer.from(s)) h = Math.imul(h ^ b, 0x01000193) >>> 0
  return String(h)
}
const hashes = ids.map(fnv1a)
const serialIds = Array.from({ length: SERIAL }, (_, i) => `serial-${String(i).padStart(7, '0')}`)
const serialHashes = serialIds.map(fnv1a)
const scriptUsec = async () => {
  let us = 0
  for (const m of (await r.info('commandstats')).matchAll(/cmdstat_(?:evalsha|eval):calls=\d+,usec=(\d+)/g)) us += Number(m[1])
  return us
}
const usedMemory = async () => Number((await r.info('memory')).match(/used_memory:(\d+)/)[1])

/** One run: N items claimed and completed, IN_FLIGHT calls at a time; then every key gets a TTL. */
async function run(name, per, leaf) {
  await r.flushall()
  await r.config('resetstat')
  const before = await usedMemory()
  const buckets = String(Math.ceil(N / per))
  const g = `{g}`
  const started = process.hrtime.bigint()
  for (const step of ['Claim', 'Complete']) {
    for (let c = 0; c < N; c += IN_FLIGHT) {
      const calls = []
      for (let i = c; i < Math.min(c + IN_FLIGHT, N); i++) calls.push(r[`${name}${step}`](g, ids[i], owner, buckets, String(leaf), hashes[i]))
      for (const x of await Promise.all(calls)) if (x !== 1) throw new Error(`${name} ${step}: ${x}`)
    }
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  const us = await scriptUsec()
  let cursor = '0'
  let keys = 0
  do {
    const [next, found] = await r.scan(cursor, 'COUNT', 1000)
    cursor = next
    const p = r.pipeline()
    for (const k of found) p.pexpire(k, 86_400_000)
    await p.exec()
    keys += found.length
  } while (cursor !== '0')
  const bytes = ((await usedMemory()) - before) / N
  // How Redis encodes the group's keys (all of them for lean, a sample of the buckets' own).
  const encodings = {}
  for (const k of (await r.scan('0', 'COUNT', 200))[1]) {
    const e = await r.object('ENCODING', k)
    encodings[e] = (encodings[e] || 0) + 1
  }
  // One at a time, as bench/ab.mjs's "claim + complete, one at a time" row: each call awaited.
  const serialBuckets = String(Math.ceil(SERIAL / per))
  const serialStarted = process.hrtime.bigint()
  for (let i = 0; i < SERIAL; i++) {
    for (const step of ['Claim', 'Complete']) {
      const x = await r[`${name}${step}`]('{s}', serialIds[i], owner, serialBuckets, String(leaf), serialHashes[i])
      if (x !== 1) throw new Error(`${name} ${step} one at a time: ${x}`)
    }
  }
  const serial = SERIAL / (Number(process.hrtime.bigint() - serialStarted) / 1e9)
  return { bytes, us: us / N, rate: N / seconds, keys, encodings, serial }
}

const cases = [['lean', 0, 0]]
for (const [per, leaf] of SHAPES) for (const name of LAYOUTS) cases.push([name, per, name === 'records' ? 0 : leaf])
const results = new Map(cases.map((c) => [c.join(' '), []]))
for (let round = 0; round < ROUNDS; round++) {
  for (const c of round % 2 ? [...cases].reverse() : cases) results.get(c.join(' ')).push(await run(c[0], c[1] || 100, c[2] || 120))
}
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const lean = results.get('lean 0 0')
const leanUs = med(lean.map((x) => x.us))
const leanRate = med(lean.map((x) => x.rate))
const leanSerial = med(lean.map((x) => x.serial))
console.log(`# Redis ${version}; ${ROUNDS} rounds of ${N} items (claim, then complete, ${IN_FLIGHT} in flight), medians`)
console.log('| layout | bytes / completed item | Redis µs / claim + complete | × lean | pairs / s | × lean | one at a time, pairs / s | × lean | keys | encodings (a sample) |')
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---|')
for (const [[name, per, leaf], xs] of cases.map((c) => [c, results.get(c.join(' '))])) {
  const label = name === 'lean' ? 'lean (one hash, two sorted sets)' : name === 'records' ? `records in hashes of ~${per}` : name === 'buckets' ? `records in hashes of ~${per}, completed in leaves of ≤ ${leaf}` : name === 'tail' ? `the same, the last leaf found without the root` : `in progress as lean; completed records in hashes of ~${per}, in leaves of ≤ ${leaf} (last leaf without the root)`
  const us = med(xs.map((x) => x.us))
  const rate = med(xs.map((x) => x.rate))
  const serial = med(xs.map((x) => x.serial))
  console.log(`| ${label} | ${med(xs.map((x) => x.bytes)).toFixed(1)} | ${us.toFixed(1)} | ${(us / leanUs).toFixed(2)} | ${Math.round(rate)} | ${(rate / leanRate).toFixed(2)} | ${Math.round(serial)} | ${(serial / leanSerial).toFixed(2)} | ${xs[0].keys} | ${Object.entries(xs[0].encodings).map(([e, n]) => `${e} ${n}`).join(', ')} |`)
}
r.disconnect()
server.stop()
