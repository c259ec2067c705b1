#!/usr/bin/env node
// flowguard benchmarks, side by side with what users would write instead (ioredis, node-redis).
//
//   (cd bench && npm install) && node bench/run.mjs
//
// Starts its own throwaway redis-server on a free loopback port unless REDIS_URL is set (a shared
// server skews the memory figures). Every pair runs in the same process against the same server,
// interleaved round by round; the figures are medians of BENCH_ROUNDS rounds (default 5).
// Writes the results block of BENCHMARKS.md (between the markers; the hand-written analysis
// around it is kept) and bench/results/last-run.json (every sample; ignored by git). BENCH_QUICK=1 runs tiny sizes (a smoke test whose
// figures mean nothing); BENCH_NO_WRITE=1 prints without writing files. BENCH_ONLY=lock,napi runs
// only the cases whose group starts with one of the comma-separated words (and never writes files).
import { createRequire } from 'node:module'
import { execSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, totalmem, release, platform } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { benchRedis } from './redis-server.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..')
const require = createRequire(import.meta.url)
const { Flowguard } = require('../index.js')
const IORedis = require('ioredis')
const { createClient } = require('redis')

// `npm test` leaves a debug build of the addon in place; benchmark the release build only.
{
  const { statSync } = await import('node:fs')
  const addon = join(root, 'flowguard.linux-x64-gnu.node')
  if (existsSync(addon) && statSync(addon).size > 16 * 2 ** 20 && process.env.BENCH_ALLOW_DEBUG !== '1') {
    console.error(`${addon} is ${(statSync(addon).size / 2 ** 20).toFixed(0)} MiB: a debug build (npm test makes one). Run \`npm run build\` first (or set BENCH_ALLOW_DEBUG=1).`)
    process.exit(2)
  }
}
const ROUNDS = Number(process.env.BENCH_ROUNDS || 5)
const QUICK = process.env.BENCH_QUICK === '1'
const ONLY = (process.env.BENCH_ONLY || '').split(',').map((w) => w.trim()).filter(Boolean)
const WRITE = process.env.BENCH_NO_WRITE !== '1' && ONLY.length === 0
const size = (full, quick) => (QUICK ? quick : full)

const N_LOCK_SERIAL = size(3000, 100)
const N_LOCK_PAR = size(20000, 640)
const PAR = 64
const N_TRACK_SERIAL = size(2000, 100)
const N_BATCH = size(10000, 500)
const N_EMB_SINGLE = size(100000, 2000)
const N_EMB_BATCH_CALLS = size(20, 2)
const N_NAPI_SYNC = size(2000000, 10000)
const N_NAPI_EMB = size(200000, 2000)
const N_NAPI_REDIS = size(3000, 100)
const N_MEM = size(50000, 2000)

// ---------------------------------------------------------------------------------------------
// Redis

const redis = await benchRedis('bench')
const ownRedis = redis.own ? redis : null
const URL_ = redis.url
const run = randomBytes(4).toString('hex')

// ---------------------------------------------------------------------------------------------
// Helpers

const now = () => performance.now()
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const token = () => randomBytes(16).toString('hex')
let seq = 0
const uniq = (tag) => `${tag}-${run}-${++seq}`

/** Runs `fn()` `n` times, `par` at a time; resolves to seconds taken. */
async function loop(n, par, fn) {
  let next = 0
  const t0 = now()
  await Promise.all(Array.from({ length: par }, async (_, w) => {
    while (true) {
      const i = next++
      if (i >= n) return
      await fn(i, w)
    }
  }))
  return (now() - t0) / 1000
}

async function info(client, section) {
  const text = await client.info(section)
  const out = {}
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':')
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1)
  }
  return out
}

async function evalshaUsec(client) {
  const s = await info(client, 'commandstats')
  const parse = (v) => (v ? Number(/usec=(\d+)/.exec(v)[1]) : 0)
  const calls = (v) => (v ? Number(/calls=(\d+)/.exec(v)[1]) : 0)
  return { usec: parse(s.cmdstat_evalsha), calls: calls(s.cmdstat_evalsha) }
}

// ---------------------------------------------------------------------------------------------
// Clients

const fg = await Flowguard.open({ url: URL_, prefix: `bench:${run}:` })
const emb = await Flowguard.open({ prefix: `bench:${run}:` })
const io = new IORedis(URL_, { lazyConnect: false })
const nr = createClient({ url: URL_ })
nr.on('error', () => {})
await nr.connect()

const CAD = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`
const CAS_DONE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], 'done', 'PX', ARGV[2]) return 1 else return 0 end`
const cadSha = await io.script('LOAD', CAD)
const casSha = await io.script('LOAD', CAS_DONE)

const LEASE = 60000
// The lock's fence counter lifetime past the lease (crates/core/src/lock.rs FENCE_KEEP_MS).
const FENCE_KEEP_MS = 30 * 86_400_000
const K = (s) => `hand:${run}:${s}`

// ---------------------------------------------------------------------------------------------
// Cases: each returns { ops, seconds, extra? } for one round.

const cases = []
function bench(group, name, unit, fn) {
  if (ONLY.length && !ONLY.some((w) => group.startsWith(w))) return
  cases.push({ group, name, unit, fn, samples: [], extras: [], cpu: [], redisCpu: [], redisCmd: [] })
}

// Lock acquire + release, one at a time.
bench('lock-serial', 'flowguard', 'pairs/s', async () => {
  const name = uniq('ls')
  const s = await loop(N_LOCK_SERIAL, 1, async () => {
    const l = await fg.acquireLock(name, { timeoutMs: LEASE })
    if (!l.acquired) throw new Error('flowguard lock not acquired')
    const r = await fg.releaseLock(name, l.owner)
    if (!r.released) throw new Error('flowguard lock not released')
  })
  return { ops: N_LOCK_SERIAL, seconds: s }
})
bench('lock-serial', 'ioredis', 'pairs/s', async () => {
  const key = K(uniq('ls'))
  const s = await loop(N_LOCK_SERIAL, 1, async () => {
    const t = token()
    if ((await io.set(key, t, 'PX', LEASE, 'NX')) !== 'OK') throw new Error('ioredis lock not acquired')
    if ((await io.evalsha(cadSha, 1, key, t)) !== 1) throw new Error('ioredis lock not released')
  })
  return { ops: N_LOCK_SERIAL, seconds: s }
})
bench('lock-serial', 'node-redis', 'pairs/s', async () => {
  const key = K(uniq('ls'))
  const s = await loop(N_LOCK_SERIAL, 1, async () => {
    const t = token()
    if ((await nr.set(key, t, { expiration: { type: 'PX', value: LEASE }, condition: 'NX' })) !== 'OK') throw new Error('node-redis lock not acquired')
    if ((await nr.evalSha(cadSha, { keys: [key], arguments: [t] })) !== 1) throw new Error('node-redis lock not released')
  })
  return { ops: N_LOCK_SERIAL, seconds: s }
})

// Breakdown row: ioredis running flowguard's own lock scripts (the same Redis work as flowguard,
// without the napi binding and the Rust client), to separate script cost from binding cost.
const acqSrc = ['fence_swap.lua', 'lock_acquire.lua'].map((f) => readFileSync(join(root, 'crates/core/src/backend/redis/lua', f), 'utf8')).join('')
const relSrc = readFileSync(join(root, 'crates/core/src/backend/redis/lua/lock_release.lua'), 'utf8')
const acqSha = await io.script('LOAD', acqSrc)
const relSha = await io.script('LOAD', relSrc)
bench('lock-serial', "ioredis running flowguard's scripts", 'pairs/s', async () => {
  const key = K(uniq('ls'))
  const s = await loop(N_LOCK_SERIAL, 1, async () => {
    const t = token()
    const a = await io.evalsha(acqSha, 2, key, `${key}:fence`, `${t}:`, LEASE, '', FENCE_KEEP_MS)
    if (typeof a !== 'number') throw new Error('ioredis (flowguard script) lock not acquired')
    if ((await io.evalsha(relSha, 1, key, `${t}:`)) !== 1) throw new Error('ioredis (flowguard script) lock not released')
  })
  return { ops: N_LOCK_SERIAL, seconds: s }
})

// Lock acquire + release, 64 in flight (64 workers, each on its own lock).
bench('lock-64', 'flowguard', 'pairs/s', async () => {
  const base = uniq('lp')
  const s = await loop(N_LOCK_PAR, PAR, async (_, w) => {
    const name = `${base}-${w}`
    const l = await fg.acquireLock(name, { timeoutMs: LEASE })
    if (!l.acquired) throw new Error('flowguard lock not acquired')
    if (!(await fg.releaseLock(name, l.owner)).released) throw new Error('flowguard lock not released')
  })
  return { ops: N_LOCK_PAR, seconds: s }
})
bench('lock-64', 'ioredis', 'pairs/s', async () => {
  const base = K(uniq('lp'))
  const s = await loop(N_LOCK_PAR, PAR, async (_, w) => {
    const key = `${base}-${w}`
    const t = token()
    if ((await io.set(key, t, 'PX', LEASE, 'NX')) !== 'OK') throw new Error('ioredis lock not acquired')
    if ((await io.evalsha(cadSha, 1, key, t)) !== 1) throw new Error('ioredis lock not released')
  })
  return { ops: N_LOCK_PAR, seconds: s }
})
bench('lock-64', 'node-redis', 'pairs/s', async () => {
  const base = K(uniq('lp'))
  const s = await loop(N_LOCK_PAR, PAR, async (_, w) => {
    const key = `${base}-${w}`
    const t = token()
    if ((await nr.set(key, t, { expiration: { type: 'PX', value: LEASE }, condition: 'NX' })) !== 'OK') throw new Error('node-redis lock not acquired')
    if ((await nr.evalSha(cadSha, { keys: [key], arguments: [t] })) !== 1) throw new Error('node-redis lock not released')
  })
  return { ops: N_LOCK_PAR, seconds: s }
})

bench('lock-64', "ioredis running flowguard's scripts", 'pairs/s', async () => {
  const base = K(uniq('lp'))
  const s = await loop(N_LOCK_PAR, PAR, async (_, w) => {
    const key = `${base}-${w}`
    const t = token()
    const a = await io.evalsha(acqSha, 2, key, `${key}:fence`, `${t}:`, LEASE, '', FENCE_KEEP_MS)
    if (typeof a !== 'number') throw new Error('ioredis (flowguard script) lock not acquired')
    if ((await io.evalsha(relSha, 1, key, `${t}:`)) !== 1) throw new Error('ioredis (flowguard script) lock not released')
  })
  return { ops: N_LOCK_PAR, seconds: s }
})

// Tracker: claim + complete per item, one item at a time.
bench('track-serial', 'flowguard', 'items/s', async () => {
  const g = uniq('ts')
  const s = await loop(N_TRACK_SERIAL, 1, async (i) => {
    const c = await fg.claim(g, `item-${i}`, { timeoutMs: LEASE })
    if (!c.claimed) throw new Error('flowguard claim failed')
    await fg.complete(g, `item-${i}`, { owner: c.owner })
  })
  return { ops: N_TRACK_SERIAL, seconds: s }
})
bench('track-serial', 'ioredis', 'items/s', async () => {
  // SET NX PX to claim, then a compare-and-set script to mark it done only for its owner.
  const g = K(uniq('ts'))
  const s = await loop(N_TRACK_SERIAL, 1, async (i) => {
    const key = `${g}:item-${i}`
    const t = token()
    if ((await io.set(key, t, 'PX', LEASE, 'NX')) !== 'OK') throw new Error('ioredis claim failed')
    if ((await io.evalsha(casSha, 1, key, t, 86400000)) !== 1) throw new Error('ioredis complete failed')
  })
  return { ops: N_TRACK_SERIAL, seconds: s }
})

// Tracker: claim 10,000 ids of one group in one call vs per-item loops.
const batchIds = Array.from({ length: N_BATCH }, (_, i) => `project-${i}`)
// claimMany returns every item's state; claimBatch a compact result (how many were claimed).
const claimedOf = { claimMany: (r) => r.filter((x) => x.claimed).length, claimBatch: (r) => r.claimed }
for (const method of ['claimMany', 'claimBatch']) {
  bench('track-batch', `flowguard ${method}`, 'items/s', async () => {
    const g = uniq('tb')
    const before = await evalshaUsec(io)
    const t0 = now()
    const r = await fg[method](g, batchIds, { timeoutMs: LEASE })
    const s = (now() - t0) / 1000
    const after = await evalshaUsec(io)
    if (claimedOf[method](r) !== N_BATCH) throw new Error(`flowguard ${method} failed`)
    return { ops: N_BATCH, seconds: s, extra: { redisScriptMs: (after.usec - before.usec) / 1000, totalMs: s * 1000 } }
  })
}
bench('track-batch', 'ioredis loop SET NX PX', 'items/s', async () => {
  const g = K(uniq('tb'))
  const s = await loop(N_BATCH, 1, async (i) => {
    if ((await io.set(`${g}:${batchIds[i]}`, token(), 'PX', LEASE, 'NX')) !== 'OK') throw new Error('ioredis claim failed')
  })
  return { ops: N_BATCH, seconds: s }
})
bench('track-batch', 'ioredis loop GET then SET', 'items/s', async () => {
  const g = K(uniq('tb'))
  const s = await loop(N_BATCH, 1, async (i) => {
    const key = `${g}:${batchIds[i]}`
    if ((await io.get(key)) === null) await io.set(key, token(), 'PX', LEASE)
  })
  return { ops: N_BATCH, seconds: s }
})
bench('track-batch', 'ioredis pipeline SET NX PX', 'items/s', async () => {
  const g = K(uniq('tb'))
  const t0 = now()
  const p = io.pipeline()
  for (const id of batchIds) p.set(`${g}:${id}`, token(), 'PX', LEASE, 'NX')
  const r = await p.exec()
  const s = (now() - t0) / 1000
  if (!r.every(([e, v]) => !e && v === 'OK')) throw new Error('ioredis pipeline claim failed')
  return { ops: N_BATCH, seconds: s }
})

// Dedup Queue: enqueue 10,000 ids of which half are already waiting, vs a ZADD NX loop and a
// pipelined ZADD NX (the waiting set as a sorted set scored by due time, as users write it).
const HAS_QUEUE = typeof fg.enqueue === 'function'
const qIds = Array.from({ length: N_BATCH }, (_, i) => `product-${i}`)
const qOld = qIds.filter((_, i) => i % 2 === 0)
if (HAS_QUEUE) {
  bench('queue-enqueue', 'flowguard enqueue (one call)', 'ids/s', async () => {
    const q = uniq('q')
    await fg.enqueue(q, qOld)
    const t0 = now()
    const r = await fg.enqueue(q, qIds)
    const s = (now() - t0) / 1000
    if (r.added !== N_BATCH / 2 || r.duplicates !== N_BATCH / 2) throw new Error(`flowguard enqueue: ${r.added} added, ${r.duplicates} duplicates`)
    return { ops: N_BATCH, seconds: s }
  })
  bench('queue-enqueue', 'ioredis loop ZADD NX', 'ids/s', async () => {
    const q = K(uniq('q'))
    const p = io.pipeline()
    for (const id of qOld) p.zadd(q, 'NX', Date.now(), id)
    await p.exec()
    let added = 0
    const s = await loop(N_BATCH, 1, async (i) => { added += await io.zadd(q, 'NX', Date.now(), qIds[i]) })
    if (added !== N_BATCH / 2) throw new Error(`ioredis ZADD NX loop added ${added}`)
    return { ops: N_BATCH, seconds: s }
  })
  bench('queue-enqueue', 'ioredis pipeline ZADD NX', 'ids/s', async () => {
    const q = K(uniq('q'))
    const p0 = io.pipeline()
    for (const id of qOld) p0.zadd(q, 'NX', Date.now(), id)
    await p0.exec()
    const t0 = now()
    const p = io.pipeline()
    const at = Date.now()
    for (const id of qIds) p.zadd(q, 'NX', at, id)
    const r = await p.exec()
    const s = (now() - t0) / 1000
    if (r.reduce((a, [, v]) => a + v, 0) !== N_BATCH / 2) throw new Error('ioredis ZADD NX pipeline miscounted')
    return { ops: N_BATCH, seconds: s }
  })
}

// Embedded backend.
bench('emb-single', 'claim awaited one at a time', 'calls/s', async () => {
  const g = uniq('es')
  const s = await loop(N_EMB_SINGLE, 1, async (i) => {
    if (!(await emb.claim(g, `i${i}`)).claimed) throw new Error('embedded claim failed')
  })
  return { ops: N_EMB_SINGLE, seconds: s }
})
bench('emb-single', 'claim, 1000 in flight', 'calls/s', async () => {
  const g = uniq('es')
  const s = await loop(N_EMB_SINGLE, 1000, async (i) => {
    if (!(await emb.claim(g, `i${i}`)).claimed) throw new Error('embedded claim failed')
  })
  return { ops: N_EMB_SINGLE, seconds: s }
})
bench('emb-single', 'lock acquire + release awaited', 'pairs/s', async () => {
  const name = uniq('el')
  const n = N_EMB_SINGLE / 2
  const s = await loop(n, 1, async () => {
    const l = await emb.acquireLock(name)
    await emb.releaseLock(name, l.owner)
  })
  return { ops: n, seconds: s }
})
for (const method of ['claimMany', 'claimBatch']) {
  bench('emb-batch', `${method} of 10,000`, 'claims/s', async () => {
    const g = uniq('eb')
    const t0 = now()
    for (let c = 0; c < N_EMB_BATCH_CALLS; c++) {
      const r = await emb[method](`${g}-${c}`, batchIds)
      if (claimedOf[method](r) !== N_BATCH) throw new Error(`embedded ${method} failed`)
    }
    return { ops: N_EMB_BATCH_CALLS * N_BATCH, seconds: (now() - t0) / 1000 }
  })
}

// The cost of one napi call.
bench('napi', 'sync getter (fg.backend)', 'calls/s', async () => {
  let x = 0
  const t0 = now()
  for (let i = 0; i < N_NAPI_SYNC; i++) x += emb.backend.length
  if (x === 0) throw new Error('unreachable')
  return { ops: N_NAPI_SYNC, seconds: (now() - t0) / 1000 }
})
bench('napi', 'async embedded getLock, awaited', 'calls/s', async () => {
  const name = uniq('nl')
  const s = await loop(N_NAPI_EMB, 1, () => emb.getLock(name))
  return { ops: N_NAPI_EMB, seconds: s }
})
bench('napi', 'async Redis getLock, awaited', 'calls/s', async () => {
  const name = uniq('nl')
  const s = await loop(N_NAPI_REDIS, 1, () => fg.getLock(name))
  return { ops: N_NAPI_REDIS, seconds: s }
})
const inspectSrc = readFileSync(join(root, 'crates/core/src/backend/redis/lua/lock_inspect.lua'), 'utf8')
const inspectSha = await io.script('LOAD', inspectSrc)
bench('napi', 'ioredis EVALSHA of the same script, awaited', 'calls/s', async () => {
  const name = K(uniq('nl'))
  const s = await loop(N_NAPI_REDIS, 1, () => io.evalsha(inspectSha, 2, name, `${name}:fence`))
  return { ops: N_NAPI_REDIS, seconds: s }
})
bench('napi', 'ioredis PING, awaited', 'calls/s', async () => {
  const s = await loop(N_NAPI_REDIS, 1, () => io.ping())
  return { ops: N_NAPI_REDIS, seconds: s }
})

// ---------------------------------------------------------------------------------------------
// Memory per tracked item (Redis INFO memory before and after), once.

async function usedMemory() {
  await io.memory('PURGE').catch(() => {})
  return Number((await info(io, 'memory')).used_memory)
}

async function memory() {
  const ids = Array.from({ length: N_MEM }, (_, i) => `project-${i}`)
  const out = {}
  const g = uniq('mem')
  const m0 = await usedMemory()
  const owners = []
  for (let i = 0; i < N_MEM; i += 10000) {
    for (const c of await fg.claimMany(g, ids.slice(i, i + 10000))) owners.push(c.owner)
  }
  const m1 = await usedMemory()
  for (let i = 0; i < N_MEM; i += 10000) {
    await fg.setItems(g, ids.slice(i, i + 10000).map((id, j) => ({ id, status: 'completed', owner: owners[i + j] })))
  }
  const m2 = await usedMemory()
  out['flowguard item, in progress (record in the group hash + index entry)'] = (m1 - m0) / N_MEM
  out['flowguard item, completed (record with 2-entry timeline in the group hash + index entry)'] = (m2 - m0) / N_MEM
  const hg = K(uniq('mem'))
  const m3 = await usedMemory()
  for (let i = 0; i < N_MEM; i += 10000) {
    const p = io.pipeline()
    for (const id of ids.slice(i, i + 10000)) p.set(`${hg}:${id}`, token(), 'PX', LEASE, 'NX')
    await p.exec()
  }
  const m4 = await usedMemory()
  out['hand-rolled SET NX PX key (owner token only, no status/attempts/timeline)'] = (m4 - m3) / N_MEM
  if (HAS_QUEUE) {
    const q = uniq('memq')
    const m5 = await usedMemory()
    for (let i = 0; i < N_MEM; i += 10000) await fg.enqueue(q, ids.slice(i, i + 10000))
    const m6 = await usedMemory()
    out['flowguard queued id (waiting set entry, 1 shard)'] = (m6 - m5) / N_MEM
    const hq = K(uniq('memq'))
    const m7 = await usedMemory()
    for (let i = 0; i < N_MEM; i += 10000) {
      const p = io.pipeline()
      for (const id of ids.slice(i, i + 10000)) p.zadd(hq, 'NX', Date.now(), id)
      await p.exec()
    }
    const m8 = await usedMemory()
    out['hand-rolled ZADD NX entry'] = (m8 - m7) / N_MEM
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Run

function machine(redisVersion) {
  const c = cpus()
  const pkg = (p) => JSON.parse(readFileSync(join(here, 'node_modules', p, 'package.json'), 'utf8')).version
  let rustc = ''
  try { rustc = execSync('rustc --version', { encoding: 'utf8' }).trim() } catch {}
  return {
    cpu: `${c.length} × ${c[0]?.model?.trim()}`,
    memory: `${(totalmem() / 2 ** 30).toFixed(1)} GiB`,
    os: `${platform()} ${release()}`,
    node: process.version,
    redis: redisVersion,
    rustc,
    ioredis: pkg('ioredis'),
    'node-redis': pkg('redis'),
    flowguard: JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version,
    git: (() => { try { return execSync('git rev-parse --short HEAD', { cwd: root, encoding: 'utf8' }).trim() } catch { return '' } })(),
  }
}

const load = [loadavg()[0]]
const redisVersion = (await info(io, 'server')).redis_version
const mach = machine(redisVersion)
console.log(`flowguard bench: ${ROUNDS} rounds against ${ownRedis ? 'a throwaway redis-server' : 'REDIS_URL'}${QUICK ? ' (QUICK: sizes too small to mean anything)' : ''}`)
console.log(JSON.stringify(mach))

// Warm-up: every case once at a small share, not counted.
for (const c of cases) await c.fn()
async function redisCpuSeconds() {
  const c = await info(io, 'cpu')
  return Number(c.used_cpu_user) + Number(c.used_cpu_sys)
}
/** Microseconds redis-server spent executing commands (INFO commandstats, all but INFO). */
async function redisCommandUsec() {
  const s = await info(io, 'commandstats')
  let usec = 0
  for (const [k, v] of Object.entries(s)) if (k !== 'cmdstat_info') usec += Number(/usec=(\d+)/.exec(v)?.[1] || 0)
  return usec
}
for (let r = 0; r < ROUNDS; r++) {
  for (const c of cases) {
    const rc0 = await redisCpuSeconds()
    const ru0 = await redisCommandUsec()
    const c0 = process.cpuUsage()
    const x = await c.fn()
    const cu = process.cpuUsage(c0)
    const ru1 = await redisCommandUsec()
    const rc1 = await redisCpuSeconds()
    c.samples.push(x.ops / x.seconds)
    // CPU per operation: this Node process (all its threads: JS, tokio, GC), and redis-server
    // (from INFO cpu; includes the two INFO calls, a few µs, spread over the case's operations).
    c.cpu.push((cu.user + cu.system) / x.ops)
    c.redisCpu.push(((rc1 - rc0) * 1e6) / x.ops)
    c.redisCmd.push((ru1 - ru0) / x.ops)
    if (x.extra) c.extras.push(x.extra)
  }
  load.push(loadavg()[0])
  console.log(`round ${r + 1}/${ROUNDS} done (load ${loadavg()[0].toFixed(2)})`)
}
const mem = ONLY.length ? {} : await memory()

const med = {}
for (const c of cases) med[`${c.group}/${c.name}`] = median(c.samples)
const ratio = (a, b) => med[a] / med[b]

const targets = [
  ['lock pair one at a time ≥ 1.0× ioredis', ratio('lock-serial/flowguard', 'lock-serial/ioredis'), 1.0, '×'],
  ['lock pair one at a time vs node-redis (no target)', ratio('lock-serial/flowguard', 'lock-serial/node-redis'), null, '×'],
  ['lock pair 64 in flight ≥ 1.5× ioredis', ratio('lock-64/flowguard', 'lock-64/ioredis'), 1.5, '×'],
  ['lock pair 64 in flight vs node-redis (no target)', ratio('lock-64/flowguard', 'lock-64/node-redis'), null, '×'],
  ['batch claim (claimBatch) ≥ 300,000 items/s', med['track-batch/flowguard claimBatch'], 300000, ' items/s'],
  ['batch claim (claimBatch) ≥ 10× the ioredis loop (SET NX PX per item)', ratio('track-batch/flowguard claimBatch', 'track-batch/ioredis loop SET NX PX'), 10, '×'],
  ['batch claim (claimBatch) vs the ioredis GET-then-SET loop (no target)', ratio('track-batch/flowguard claimBatch', 'track-batch/ioredis loop GET then SET'), null, '×'],
  ['batch claim (claimBatch) vs an ioredis pipeline of SET NX PX (no target)', ratio('track-batch/flowguard claimBatch', 'track-batch/ioredis pipeline SET NX PX'), null, '×'],
  ['batch claim with claimMany (full item states; no target)', med['track-batch/flowguard claimMany'], null, ' items/s'],
  ['claim + complete per item vs ioredis (no target)', ratio('track-serial/flowguard', 'track-serial/ioredis'), null, '×'],
  ...(HAS_QUEUE ? [['dedup enqueue vs the ioredis ZADD NX loop (no target)', ratio('queue-enqueue/flowguard enqueue (one call)', 'queue-enqueue/ioredis loop ZADD NX'), null, '×'], ['dedup enqueue vs an ioredis pipeline of ZADD NX (no target)', ratio('queue-enqueue/flowguard enqueue (one call)', 'queue-enqueue/ioredis pipeline ZADD NX'), null, '×']] : []),
  ['embedded ≥ 1,000,000 claims/s in batch (claimBatch)', med['emb-batch/claimBatch of 10,000'], 1000000, ' claims/s'],
  ['embedded claimMany (full item states) in batch (no target)', med['emb-batch/claimMany of 10,000'], null, ' claims/s'],
  ['embedded ≥ 500,000 single calls/s (awaited one at a time)', med['emb-single/claim awaited one at a time'], 500000, ' calls/s'],
  ['embedded ≥ 500,000 single calls/s (1000 in flight)', med['emb-single/claim, 1000 in flight'], 500000, ' calls/s'],
]

const fmt = (v) => (v >= 100 ? Math.round(v).toLocaleString('en-US') : v.toFixed(2))
const lines = []
lines.push(`Command: \`node bench/run.mjs\` (after \`(cd bench && npm install)\` and \`npm run build\`). ${ROUNDS} rounds, medians; ` +
  `${ownRedis ? 'a throwaway redis-server started by the script' : 'the server at REDIS_URL'}, on loopback.`)
lines.push('')
lines.push(`Run: ${new Date().toISOString()}, git ${mach.git}. Machine: ${mach.cpu}, ${mach.memory}, ${mach.os}; Node ${mach.node}, Redis ${mach.redis}, ${mach.rustc}; ioredis ${mach.ioredis}, node-redis ${mach['node-redis']}.`)
lines.push(`1-minute load average during the run: ${load.map((l) => l.toFixed(2)).join(', ')} (the 2 cores are shared with other work).`)
lines.push('')
lines.push('| case | contender | median | unit | rounds (min – max) | Node CPU µs/op | redis-server CPU µs/op | of which executing commands µs/op |')
lines.push('|---|---|---:|---|---|---:|---:|---:|')
const us = (v) => (v >= 10 ? v.toFixed(0) : v.toFixed(2))
for (const c of cases) {
  const redisCol = c.group.startsWith('emb') || c.group === 'napi' && !/Redis|ioredis/.test(c.name) ? '–' : us(median(c.redisCpu))
  const cmdCol = redisCol === '–' ? '–' : us(median(c.redisCmd))
  lines.push(`| ${c.group} | ${c.name} | ${fmt(med[`${c.group}/${c.name}`])} | ${c.unit} | ${fmt(Math.min(...c.samples))} – ${fmt(Math.max(...c.samples))} | ${us(median(c.cpu))} | ${redisCol} | ${cmdCol} |`)
}
lines.push('')
lines.push('CPU columns: medians over the rounds of (CPU time ÷ operations); an operation is one pair, item or call as the unit says. Node CPU counts every thread of the benchmark process (JavaScript, the addon\'s tokio worker, V8\'s GC helpers); redis-server CPU is INFO cpu (its network handling included), and the last column the part spent executing commands and scripts (INFO commandstats usec). On a loaded machine CPU per operation is a steadier measure than the wall-clock rate.')
lines.push('')
lines.push('Per call (from the napi rows): ' + [
  ['sync getter', 'napi/sync getter (fg.backend)'],
  ['async embedded call', 'napi/async embedded getLock, awaited'],
  ['async Redis call (flowguard)', 'napi/async Redis getLock, awaited'],
  ['the same script by ioredis', 'napi/ioredis EVALSHA of the same script, awaited'],
  ['ioredis PING', 'napi/ioredis PING, awaited'],
].filter(([, k]) => k in med).map(([l, k]) => `${l} ${(1e6 / med[k]).toFixed(k.includes('sync getter') ? 3 : 1)} µs`).join('; ') + '.')
for (const method of ['claimBatch', 'claimMany']) {
  const bx = cases.find((c) => c.name === `flowguard ${method}`)?.extras || []
  if (!bx.length) continue
  const redisMs = median(bx.map((e) => e.redisScriptMs))
  const totalMs = median(bx.map((e) => e.totalMs))
  lines.push(`Batch claim of ${N_BATCH.toLocaleString('en-US')} on Redis with \`${method}\`, time breakdown (medians): ${totalMs.toFixed(1)} ms end to end, of which ${redisMs.toFixed(1)} ms inside Redis running the script (INFO commandstats, evalsha usec); the rest (${(totalMs - redisMs).toFixed(1)} ms) is building the call, the transfer and decoding the reply in Rust, and making the JavaScript objects.`)
}
lines.push('')
lines.push('| target | measured | status |')
lines.push('|---|---:|---|')
for (const [label, v, goal, unit] of targets) {
  if (!Number.isFinite(v)) continue
  const status = goal == null ? '' : v >= goal ? 'met' : `missed by ${((1 - v / goal) * 100).toFixed(0)}%`
  lines.push(`| ${label} | ${fmt(v)}${unit} | ${status} |`)
}
lines.push('')
lines.push(`Redis memory (INFO memory used_memory before and after, ${N_MEM.toLocaleString('en-US')} items of one group / ids of one queue):`)
lines.push('')
for (const [k, v] of Object.entries(mem)) lines.push(`- ${k}: ${Math.round(v)} bytes per item`)
const block = lines.join('\n')
console.log('\n' + block)

if (WRITE && !QUICK) {
  const path = join(root, 'BENCHMARKS.md')
  const start = '<!-- bench:results:start -->'
  const end = '<!-- bench:results:end -->'
  let doc = existsSync(path) ? readFileSync(path, 'utf8') : `# Benchmarks\n\n${start}\n${end}\n`
  if (!doc.includes(start)) doc += `\n${start}\n${end}\n`
  doc = doc.slice(0, doc.indexOf(start) + start.length) + '\n' + block + '\n' + doc.slice(doc.indexOf(end))
  writeFileSync(path, doc)
  mkdirSync(join(here, 'results'), { recursive: true })
  writeFileSync(join(here, 'results', 'last-run.json'), JSON.stringify({ machine: mach, load, rounds: ROUNDS, medians: med, cpuUsPerOp: Object.fromEntries(cases.map((c) => [`${c.group}/${c.name}`, median(c.cpu)])), redisCpuUsPerOp: Object.fromEntries(cases.map((c) => [`${c.group}/${c.name}`, median(c.redisCpu)])), redisCommandUsPerOp: Object.fromEntries(cases.map((c) => [`${c.group}/${c.name}`, median(c.redisCmd)])), samples: Object.fromEntries(cases.map((c) => [`${c.group}/${c.name}`, c.samples])), memory: mem }, null, 2) + '\n')
  console.log(`\nwrote BENCHMARKS.md and bench/results/last-run.json`)
}

io.disconnect()
await nr.quit().catch(() => {})
ownRedis?.stop()
process.exit(0)
