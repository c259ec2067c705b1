#!/usr/bin/env node
// Redis memory per completed Item Tracker item, beside the seed's own layout and the cheapest
// structures that hold the same facts, and the Redis commands one claim + complete costs.
//
//   npm run build && (cd bench && npm install) && node bench/memory.mjs [dir]
//
// `dir`: a built flowguard package (a directory with index.js and the addon) to measure instead
// of this checkout, e.g. a build from before a change. The Redis figures do not depend on a
// debug or release build of the addon.
//
// Each case writes BENCH_ITEMS (default 50,000) items into a group / keys of its own and reports
// the `used_memory` delta (INFO memory, after MEMORY PURGE) divided by the items:
//   flowguard completed   claimMany + complete (owner-checked), default options
//   flowguard failed      claimMany + fail with a 10-byte reason
//   seed SET per item     `SET <prefix><group>:<id> <finished ms>` (the seed's key per item)
//   hash of ids           `HSET <key> <id> 1`
//   floor hash + zset     `HSET <key> <id> <record>` + `ZADD <index> <expiry> <id>`, with a record
//                         as long as flowguard's completed one: what any layout costs that keeps
//                         a record per id in one hash and an index per status (list by status,
//                         purge by expiry) as Redis's own structures
//   zset alone            `ZADD <index> <expiry> <id>`: the index entry by itself
// Then commands: BENCH_PAIRS (default 1,000) items claimed and completed one at a time, awaited;
// INFO commandstats before and after: scripts and Redis commands (those the scripts ran
// included) per item, by command.
//
// Starts its own redis-server unless REDIS_URL is set (then it must be a throwaway server: the
// benchmark runs FLUSHALL and CONFIG RESETSTAT).
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { benchRedis } from './redis-server.mjs'

const require = createRequire(import.meta.url)
const IORedis = require('ioredis')
const dir = resolve(process.argv[2] ?? join(import.meta.dirname, '..'))
const { Flowguard } = require(join(dir, 'index.js'))

const N = Number(process.env.BENCH_ITEMS || 50_000)
const PAIRS = Number(process.env.BENCH_PAIRS || 1_000)
const CHUNK = 5_000
const PREFIX = 'mem:'

const server = await benchRedis('memory')
const io = new IORedis(server.url)
const fg = await Flowguard.open({ url: server.url, prefix: PREFIX })
const serverInfo = await io.info('server')
const version = /valkey_version:(\S+)/.test(serverInfo)
  ? `Valkey ${serverInfo.match(/valkey_version:(\S+)/)[1]}`
  : `Redis ${serverInfo.match(/redis_version:(\S+)/)[1]}`
await io.flushall()

async function usedMemory() {
  await io.memory('PURGE').catch(() => {})
  const m = /used_memory:(\d+)/.exec(await io.info('memory'))
  return Number(m[1])
}
const ids = Array.from({ length: N }, (_, i) => `item-${i}`)

/** Bytes per item that `fill` adds. */
async function perItem(fill) {
  const before = await usedMemory()
  await fill()
  return (await usedMemory() - before) / N
}

async function trackerCase(group, finish) {
  return perItem(async () => {
    for (let i = 0; i < N; i += CHUNK) {
      const claims = await fg.claimMany(group, ids.slice(i, i + CHUNK), { timeoutMs: 60_000 })
      await Promise.all(claims.map((c, j) => finish(group, ids[i + j], c.owner)))
    }
  })
}

/** Bytes of flowguard's stored record of `id` in `group` (the records hash, read directly). */
async function recordBytes(group, id) {
  for (const k of await io.keys(`${PREFIX}*${group}*`)) {
    if ((await io.type(k)) === 'hash') {
      const v = await io.hgetBuffer(k, id)
      if (v) return v.length
    }
  }
  return 0
}

async function pipelined(each) {
  for (let i = 0; i < N; i += CHUNK) {
    const p = io.pipeline()
    for (const id of ids.slice(i, i + CHUNK)) each(p, id)
    await p.exec()
  }
}

const rows = []
const completed = await trackerCase('done', (g, id, owner) => fg.complete(g, id, { owner }))
const recLen = await recordBytes('done', ids[0])
rows.push(['flowguard completed (default options)', completed, `record ${recLen} B`])
const failed = await trackerCase('failed', (g, id, owner) => fg.fail(g, id, 'boom: 1234', { owner }))
rows.push(['flowguard failed (10-byte reason)', failed, `record ${await recordBytes('failed', ids[0])} B`])
const finished = String(Date.now())
rows.push(['seed: SET key per item', await perItem(() => pipelined((p, id) => p.set(`seed:{done}:${id}`, finished))), `value ${finished.length} B`])
rows.push(['hash of ids (HSET key id 1)', await perItem(() => pipelined((p, id) => p.hset('ids', id, '1'))), ''])
const record = 'x'.repeat(recLen)
const expiry = Date.now() + 30 * 86_400_000
rows.push([
  'floor: hash field + zset entry',
  await perItem(() => pipelined((p, id) => p.hset('floor:rec', id, record).zadd('floor:idx', expiry, id))),
  `record ${recLen} B`,
])
rows.push(['zset entry alone', await perItem(() => pipelined((p, id) => p.zadd('zonly', expiry, id))), ''])
// What a layout of small structures could reach: ids spread over BUCKETS keys, few enough per key
// (below hash-max-listpack-entries and zset-max-listpack-entries, 128 by default) for Redis to
// keep each as a listpack rather than a hashtable or skiplist.
const BUCKETS = Math.ceil(N / 100)
const bucket = (id) => {
  let h = 0x811c9dc5
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193) >>> 0
  return h % BUCKETS
}
rows.push([
  'buckets: listpack hash + listpack zset',
  await perItem(() => pipelined((p, id) => p.hset(`lp:{b}:r:${bucket(id)}`, id, record).zadd(`lp:{b}:x:${bucket(id)}`, expiry, id))),
  `record ${recLen} B, ${BUCKETS} keys of each`,
])

// Commands per claim + complete of one item, one at a time.
await io.config('RESETSTAT')
for (let i = 0; i < PAIRS; i++) {
  const c = await fg.claim('pairs', `item-${i}`, { timeoutMs: 60_000 })
  if (!c.claimed) throw new Error('claim failed')
  await fg.complete('pairs', `item-${i}`, { owner: c.owner })
}
const stats = {}
for (const line of (await io.info('commandstats')).split('\r\n')) {
  const m = /^cmdstat_([\w|]+):calls=(\d+)/.exec(line)
  if (m && m[1] !== 'info' && m[1] !== 'config|resetstat') stats[m[1]] = Number(m[2]) / PAIRS
}
const scripts = (stats.evalsha ?? 0) + (stats.eval ?? 0) + (stats.fcall ?? 0)
const commands = Object.entries(stats).filter(([k]) => !['evalsha', 'eval', 'fcall'].includes(k))

console.log(`${version}, ${N.toLocaleString('en-US')} items per case (used_memory delta / items)`)
for (const [name, bytes, note] of rows) console.log(`  ${name.padEnd(40)} ${bytes.toFixed(1).padStart(7)} B  ${note}`)
console.log(`claim + complete one item at a time, ${PAIRS} items: ${scripts.toFixed(2)} scripts, ` +
  `${commands.reduce((s, [, v]) => s + v, 0).toFixed(2)} commands per item`)
console.log('  ' + commands.sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', '))
await fg.close()
io.disconnect()
server.stop()
