#!/usr/bin/env node
// What keeping Item Tracker marks costs per item, on each backend: N items (ids like
// `project-0000123`) claimed and then completed with `keepMs: 'forever'` (the n8n loop's records:
// owner token, two timeline entries), in batches of 10,000.
// - durable: growth of the SQLite file, measured after a checkpoint (sqlite3 CLI) so that the
//   write-ahead log is in the file;
// - embedded (in memory): not here; its resident memory per item needs a process of its own
//   and paced calls to be read apart from the host's garbage: node bench/embedded-bytes.mjs;
// - Redis (REDIS_URL set): MEMORY USAGE of every key of the group (records hash, indexes, record
//   buckets and the compact index), and the growth of INFO used_memory.
//
//   npm run build && nice -n 10 node bench/retention.mjs [N=100000]
import { createRequire } from 'node:module'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect } from '../__test__/resp.mjs'

const require = createRequire(import.meta.url)
const { Flowguard } = require('../index.js')
const N = Number(process.argv[2] || 100000)
const BATCH = 10000
const dir = mkdtempSync(join(tmpdir(), 'fg-retention-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))

async function keep(fg, group) {
  for (let i = 0; i < N; i += BATCH) {
    const ids = Array.from({ length: Math.min(BATCH, N - i) }, (_, k) => `project-${String(i + k).padStart(7, '0')}`)
    const c = await fg.claimBatch(group, ids)
    if (c.claimed !== ids.length) throw new Error('claim failed')
    const r = await fg.setItems(group, ids.map((id) => ({ id, status: 'completed', owner: c.owner, keepMs: 'forever' })))
    if (!r.every((x) => x.ok && x.item.expiresAt === undefined)) throw new Error('complete failed')
  }
}

const perItem = (bytes) => `${Math.round(bytes / N)} B/item`
const rows = []

{
  const file = join(dir, 'state.db')
  const fg = await Flowguard.open({ path: file })
  await fg.claim('warm-up', 'x')
  const size = () => {
    execFileSync('sqlite3', [file, 'PRAGMA wal_checkpoint(TRUNCATE);'])
    return statSync(file).size
  }
  const before = size()
  await keep(fg, 'kept')
  rows.push(['durable (file)', perItem(size() - before)])
}
if (process.env.REDIS_URL) {
  const r = await connect(process.env.REDIS_URL)
  const fg = await Flowguard.open({ url: process.env.REDIS_URL, prefix: `bench-retention-${process.pid}:` })
  const used = async () => Number(/used_memory:(\d+)/.exec(await r.call('INFO', 'memory'))[1])
  const before = await used()
  await keep(fg, 'kept')
  // Every key of the group: records hash and indexes, and the compact layout's record buckets and
  // index (docs/redis-compact.md); they share the group's hash tag. The prefix holds no glob
  // character, the tag's braces are escaped.
  const keys = []
  let cursor = '0'
  do {
    const [next, found] = await r.call('SCAN', cursor, 'MATCH', `${fg.prefix}\\{t:kept\\}*`, 'COUNT', '1000')
    cursor = String(next)
    keys.push(...found.map(String))
  } while (cursor !== '0')
  let usage = 0
  for (const k of keys) usage += Number(await r.call('MEMORY', 'USAGE', k, 'SAMPLES', '0'))
  rows.push(['Redis (MEMORY USAGE of the group keys)', perItem(usage)])
  rows.push(['Redis (INFO used_memory growth)', perItem((await used()) - before)])
  for (const k of keys) await r.call('UNLINK', k)
  r.close()
}
console.log(`Item Tracker records kept forever, ${N.toLocaleString('en-US')} items:`)
for (const [name, v] of rows) console.log(`  ${name.padEnd(40)} ${v}`)
process.exit(0)
