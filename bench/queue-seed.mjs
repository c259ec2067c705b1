#!/usr/bin/env node
// Dedup Queue on Redis against the seed's own hand-written commands (Seed 003's webhook pattern),
// side by side in one run against one redis-server, each case's rounds interleaved with its
// baseline's:
//   enqueue 1      one id per `enqueue`, awaited one at a time   vs ioredis `ZADD key NX now id`
//   duplicate 1    the same, every id already waiting            vs the same ZADD NX (a no-op)
//   enqueue 100    batches of 100 ids                            vs one variadic `ZADD key NX …`
//   read 100 + ack `readBatch` of 100 and `ack` of them           vs `ZRANGEBYSCORE … LIMIT 0 100`
//                                                                   + `ZREM` of them
//   enqueue 1 vs floor   as enqueue 1                             vs ioredis running the least an
//                        atomic enqueue needs beside the seed's ZADD NX (one script: the shard's
//                        count, not claimed now, ZADD NX): the floor of any one-script enqueue
//   enqueue 100 vs floor as enqueue 100                         vs ioredis running the least an
//                        atomic batch enqueue needs beside the variadic ZADD NX (one script: the
//                        shard's count, which ids are claimed now (ZMSCORE), ZADD NX of the rest)
//   read 100 + ack vs floor  as read 100 + ack                   vs ioredis running the least a
//                        leased read with an owner-checked ack needs (read: TIME, ZRANGEBYSCORE,
//                        ZREM, ZADD of the deadlines, HSET of the owner; ack: TIME, HMGET of the owners,
//                        ZMSCORE of the deadlines (an expired claim is no longer the caller's),
//                        ZREM, HDEL of the ids the caller owns)
//   For the two floor cases and "enqueue 1 vs floor" a third side runs the seed's own commands in
//   the same round, and "floor ÷ seed" shows how far below the seed's speed the floor itself is.
//   read 100 + ack vs BullMQ  as read 100 + ack                   vs a BullMQ Worker (concurrency 100,
//                        jobs added beforehand with their id as jobId, removeOnComplete) running an
//                        empty processor until every job completed
// Reports ids/s, the ratio flowguard / ioredis, and Redis's own time per id (INFO commandstats:
// the usec of EVALSHA and EVAL for flowguard, of every command for ioredis) and commands per call.
//
//   npm run build && (cd bench && npm install) && node bench/queue-seed.mjs [dir]
//
// `dir`: a built flowguard package (a directory with index.js and the addon) to measure instead of
// this checkout, e.g. a build from before a change.
//
// "Redis CPU µs/id": the server's CPU time per id (/proc/<pid>/schedstat, only for a server on this
// machine), less swayed by a loaded machine than the rates. BENCH_CASES (a regular expression):
// only the cases whose name matches it.
//
// BENCH_ROUNDS (default 5) rounds of BENCH_IDS (default 5,000) ids per case; medians. Starts its
// own redis-server unless REDIS_URL is set (then it must be a throwaway server: the benchmark
// runs CONFIG RESETSTAT).
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { readFileSync } from 'node:fs'
import { benchRedis } from './redis-server.mjs'

const require = createRequire(import.meta.url)
const IORedis = require('ioredis')
const { Queue, Worker } = require('bullmq')
const dir = resolve(process.argv[2] ?? join(import.meta.dirname, '..'))
const { Flowguard } = require(join(dir, 'index.js'))

const ROUNDS = Number(process.env.BENCH_ROUNDS || 5)
const N = Number(process.env.BENCH_IDS || 5000)
const BATCH = 100

const server = await benchRedis('queue-seed')
const r = new IORedis(server.url)
const fg = await Flowguard.open({ url: server.url, prefix: `qs:${Date.now()}:` })
const version = (await r.info('server')).match(/redis_version:(\S+)/)[1]

/** Redis's time (µs) and calls since the last RESETSTAT: scripts alone when any ran. */
async function stats() {
  const text = await r.info('commandstats')
  const rows = [...text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)]
    .map((m) => ({ cmd: m[1], calls: Number(m[2]), usec: Number(m[3]) }))
    .filter((x) => x.cmd !== 'info' && !x.cmd.startsWith('config'))
  const scripts = rows.filter((x) => x.cmd === 'evalsha' || x.cmd === 'eval')
  const top = scripts.length ? scripts : rows
  const sum = (xs, f) => xs.reduce((s, x) => s + x[f], 0)
  return { usec: sum(top, 'usec'), calls: sum(top, 'calls'), all: sum(rows, 'calls') }
}

// Redis's own CPU time (ns, kernel included), when the server runs on this machine:
// /proc/<pid>/schedstat counts only time on a CPU, so a loaded machine sways it less than the
// wall-clock rates and INFO commandstats (wall time around each command).
const redisPid = Number((await r.info('server')).match(/process_id:(\d+)/)[1])
const redisCpu = () => { try { return Number(readFileSync(`/proc/${redisPid}/schedstat`, 'utf8').split(' ')[0]) } catch { return NaN } }

/** Runs `fn` once, measured: { rate ids/s, us Redis µs per id, cpu Redis CPU µs per id, calls per call, cmds per call }. */
async function measure(ids, calls, fn) {
  await r.config('RESETSTAT')
  const c0 = redisCpu()
  const t0 = process.hrtime.bigint()
  await fn()
  const s = Number(process.hrtime.bigint() - t0) / 1e9
  const cpu = (redisCpu() - c0) / 1000 / ids
  const st = await stats()
  return { rate: ids / s, us: st.usec / ids, cpu, calls: st.calls / calls, cmds: st.all / calls }
}

const chunks = (xs, n) => Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, i * n + n))
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/** The least an atomic one-id enqueue does beside ZADD NX: the shard count, not claimed now. */
const FLOOR = `if redis.call('GET', KEYS[3]) ~= ARGV[3] then return -1 end
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return 3 end
return redis.call('ZADD', KEYS[1], 'NX', ARGV[1], ARGV[2])`

/** The least an atomic batch enqueue does beside ZADD NX: the shard count, which ids are claimed. */
const FLOOR_BATCH = `if redis.call('GET', KEYS[3]) ~= ARGV[1] then return -1 end
local claimed = redis.call('ZMSCORE', KEYS[2], unpack(ARGV, 3))
local z, n = {}, 0
for i = 3, #ARGV do
  if not claimed[i - 2] then z[n + 1] = ARGV[2]; z[n + 2] = ARGV[i]; n = n + 2 end
end
if n == 0 then return 0 end
return redis.call('ZADD', KEYS[1], 'NX', unpack(z, 1, n))`

/** The least a leased read does: the server's clock, the due ids, moved to the claimed set with
 * their deadline, their owner recorded. ARGV: limit, lease ms, owner. */
const FLOOR_READ = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ARGV[1])
if #ids == 0 then return ids end
local d = now + tonumber(ARGV[2])
local zs, hs = {}, {}
for i, id in ipairs(ids) do
  zs[2 * i - 1] = d; zs[2 * i] = id
  hs[2 * i - 1] = id; hs[2 * i] = ARGV[3]
end
redis.call('ZREM', KEYS[1], unpack(ids))
redis.call('ZADD', KEYS[2], unpack(zs))
redis.call('HSET', KEYS[3], unpack(hs))
return ids`

/** The least an owner-checked ack does: the ids' owners and claim deadlines (an expired claim is
 * not the caller's any more), then the caller's own ids removed. */
const FLOOR_ACK = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owners = redis.call('HMGET', KEYS[2], unpack(ARGV, 2))
local ends = redis.call('ZMSCORE', KEYS[1], unpack(ARGV, 2))
local mine, n = {}, 0
for i = 2, #ARGV do
  if owners[i - 1] == ARGV[1] and ends[i - 1] and tonumber(ends[i - 1]) > now then n = n + 1; mine[n] = ARGV[i] end
end
if n == 0 then return 0 end
redis.call('ZREM', KEYS[1], unpack(mine, 1, n))
redis.call('HDEL', KEYS[2], unpack(mine, 1, n))
return n`

/** The seed's batch: one variadic ZADD NX per chunk of 100. */
async function seedBatch(key, ids) {
  return measure(ids.length, ids.length / BATCH, async () => {
    for (const b of chunks(ids, BATCH)) {
      const now = Date.now()
      await r.zadd(key, 'NX', ...b.flatMap((id) => [now, id]))
    }
  })
}

/** The seed's read + ack: ZRANGEBYSCORE of 100 due ids, ZREM of them. */
async function seedReadAck(key, ids) {
  await r.zadd(key, 'NX', ...ids.flatMap((id) => [0, id]))
  return measure(ids.length, ids.length / BATCH, async () => {
    for (let n = 0; n < ids.length; n += BATCH) {
      const got = await r.zrangebyscore(key, '-inf', Date.now(), 'LIMIT', 0, BATCH)
      await r.zrem(key, ...got)
    }
  })
}

/** flowguard's side of the one-id cases: one `enqueue` per id, awaited. */
async function enqueueOne(q, ids) {
  await fg.enqueue(q, 'warm')
  return measure(ids.length, ids.length, async () => { for (const id of ids) await fg.enqueue(q, id) })
}

/** flowguard's side of the read cases: `readBatch` of 100 and `ack` of them (one id more than read
 * is enqueued, so no ack empties the shard: an emptying ack also asks the record). */
async function readAck(q, ids) {
  await fg.enqueue(q, [...ids, 'zz-last'])
  return measure(ids.length, ids.length / BATCH, async () => {
    for (let n = 0; n < ids.length; n += BATCH) {
      const b = await fg.readBatch(q, { limit: BATCH })
      await fg.ack(q, b.owner, b.ids)
    }
  })
}

const cases = {
  'enqueue 1': {
    flowguard: enqueueOne,
    async ioredis(key, ids) {
      return measure(ids.length, ids.length, async () => { for (const id of ids) await r.zadd(key, 'NX', Date.now(), id) })
    },
  },
  'duplicate 1': {
    async flowguard(q, ids) {
      await fg.enqueue(q, ids)
      return measure(ids.length, ids.length, async () => { for (const id of ids) await fg.enqueue(q, id) })
    },
    async ioredis(key, ids) {
      await r.zadd(key, 'NX', ...ids.flatMap((id) => [Date.now(), id]))
      return measure(ids.length, ids.length, async () => { for (const id of ids) await r.zadd(key, 'NX', Date.now(), id) })
    },
  },
  'enqueue 100': {
    async flowguard(q, ids) {
      await fg.enqueue(q, 'warm')
      return measure(ids.length, ids.length / BATCH, async () => { for (const b of chunks(ids, BATCH)) await fg.enqueue(q, b) })
    },
    ioredis: seedBatch,
  },
  'enqueue 1 vs floor': {
    other: 'ioredis floor script',
    async seed(key, ids) {
      return measure(ids.length, ids.length, async () => { for (const id of ids) await r.zadd(key, 'NX', Date.now(), id) })
    },
    flowguard: enqueueOne,
    async ioredis(key, ids) {
      const k = [`${key}:w`, `${key}:c`, `${key}:n`]
      await r.set(k[2], '1')
      await r.eval(FLOOR, 3, ...k, Date.now(), 'warm', '1')
      const sha = await r.script('LOAD', FLOOR)
      return measure(ids.length, ids.length, async () => { for (const id of ids) await r.evalsha(sha, 3, ...k, Date.now(), id, '1') })
    },
  },
  'read 100 + ack vs BullMQ': {
    other: 'BullMQ Worker',
    flowguard: readAck,
    async ioredis(key, ids) {
      const connection = { host: new URL(server.url).hostname, port: Number(new URL(server.url).port) }
      const name = key.replace(/:/g, '-')
      const queue = new Queue(name, { connection })
      for (const b of chunks(ids, 1000)) {
        await queue.addBulk(b.map((id) => ({ name: 'event', data: { id }, opts: { jobId: id, removeOnComplete: true } })))
      }
      let done = 0
      let finished
      const all = new Promise((resolve) => { finished = resolve })
      const worker = new Worker(name, async () => {}, { connection, concurrency: BATCH, autorun: false })
      worker.on('completed', () => { if (++done === ids.length) finished() })
      const m = await measure(ids.length, ids.length, async () => {
        worker.run()
        await all
      })
      await worker.close()
      await queue.close()
      return m
    },
  },
  'read 100 + ack': {
    flowguard: readAck,
    ioredis: seedReadAck,
  },
  'enqueue 100 vs floor': {
    other: 'ioredis floor script (batch)',
    async flowguard(q, ids) {
      await fg.enqueue(q, 'warm')
      return measure(ids.length, ids.length / BATCH, async () => { for (const b of chunks(ids, BATCH)) await fg.enqueue(q, b) })
    },
    async ioredis(key, ids) {
      const k = [`${key}:w`, `${key}:c`, `${key}:n`]
      await r.set(k[2], '1')
      await r.zadd(k[1], 0, 'someone-else')
      const sha = await r.script('LOAD', FLOOR_BATCH)
      return measure(ids.length, ids.length / BATCH, async () => {
        for (const b of chunks(ids, BATCH)) await r.evalsha(sha, 3, ...k, '1', Date.now(), ...b)
      })
    },
    seed: seedBatch,
  },
  'read 100 + ack vs floor': {
    other: 'ioredis floor scripts (read, ack)',
    flowguard: readAck,
    async ioredis(key, ids) {
      const k = [`${key}:w`, `${key}:c`, `${key}:o`]
      await r.zadd(k[0], 'NX', ...ids.flatMap((id) => [0, id]), 0, 'zz-last')
      // A member longer than 64 bytes in each, kept: the claimed set and the owners' hash are a
      // skiplist and a hash table from the start (flowguard's claim does the same), not listpacks
      // walked whole by each insert and lookup.
      const wide = '~'.repeat(1025)
      await r.zadd(k[1], 0, wide)
      await r.hset(k[2], wide, '')
      const read = await r.script('LOAD', FLOOR_READ)
      const ack = await r.script('LOAD', FLOOR_ACK)
      return measure(ids.length, ids.length / BATCH, async () => {
        for (let n = 0; n < ids.length; n += BATCH) {
          const owner = `owner-${n}`
          const got = await r.evalsha(read, 3, ...k, BATCH, 30000, owner)
          await r.evalsha(ack, 2, k[1], k[2], owner, ...got)
        }
      })
    },
    seed: seedReadAck,
  },
}

console.log(`flowguard at ${dir}, Redis ${version}, ${ROUNDS} rounds of ${N} ids per case, medians`)
console.log('case                     | flowguard ids/s | other ids/s | ratio | Redis µs/id fg | other | Redis CPU µs/id fg | other | scripts/call | cmds/call fg | other | other is')
const only = process.env.BENCH_CASES && new RegExp(process.env.BENCH_CASES)
for (const [name, c] of Object.entries(cases)) {
  if (only && !only.test(name)) continue
  const out = { flowguard: [], ioredis: [], seed: [] }
  for (let round = 0; round < ROUNDS; round++) {
    const ids = Array.from({ length: N }, (_, i) => `product-${round}-${i}`)
    const tag = `${name.replace(/\W+/g, '-')}-${round}`
    out.flowguard.push(await c.flowguard(`q-${tag}`, ids))
    out.ioredis.push(await c.ioredis(`seed:${tag}`, ids))
    if (c.seed) out.seed.push(await c.seed(`plain:${tag}`, ids))
  }
  const m = (side, f) => median(out[side].map((x) => x[f]))
  const row = [
    name.padEnd(24),
    m('flowguard', 'rate').toFixed(0).padStart(15),
    m('ioredis', 'rate').toFixed(0).padStart(11),
    (m('flowguard', 'rate') / m('ioredis', 'rate')).toFixed(2).padStart(5),
    m('flowguard', 'us').toFixed(2).padStart(14),
    m('ioredis', 'us').toFixed(2).padStart(5),
    m('flowguard', 'cpu').toFixed(2).padStart(18),
    m('ioredis', 'cpu').toFixed(2).padStart(5),
    m('flowguard', 'calls').toFixed(2).padStart(12),
    m('flowguard', 'cmds').toFixed(1).padStart(12),
    m('ioredis', 'cmds').toFixed(1).padStart(5),
    c.other ?? 'ioredis, the seed\'s commands',
  ]
  console.log(row.join(' | '))
  if (c.seed) {
    const floorOverSeed = m('ioredis', 'rate') / m('seed', 'rate')
    console.log(`${'  floor ÷ seed'.padEnd(24)} | ${m('ioredis', 'rate').toFixed(0).padStart(15)} | ${m('seed', 'rate').toFixed(0).padStart(11)} | ${floorOverSeed.toFixed(2).padStart(5)} | Redis µs/id floor ${m('ioredis', 'us').toFixed(2)}, seed ${m('seed', 'us').toFixed(2)}; Redis CPU µs/id floor ${m('ioredis', 'cpu').toFixed(2)}, seed ${m('seed', 'cpu').toFixed(2)}`)
  }
}
await fg.close()
r.disconnect()
server.stop()
