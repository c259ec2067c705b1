// Redis Cluster with one slow primary, on a throwaway 3-primary cluster of its own: a read over
// several shards while one primary holds writes back (CLIENT PAUSE … WRITE, longer than the
// command timeout) returns what the other shards gave, names exactly the shards that gave no
// answer in failedShards, fails only when none answered, and leaves no claim behind that the
// caller never learned of: once the node resumes, every id is in the batch or readable again.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Flowguard, freshPrefix, sleep } from './backends.mjs'
import { haveRedis } from './redis-server.mjs'
import { startCluster, cli, primaryOf } from './redis-cluster.mjs'

const skip = !haveRedis && 'redis-server is not installed'
const SHARDS = 12
/** How long the slow primary holds writes back: longer than every command timeout below. */
const PAUSE_MS = 1500

let cluster
before(async () => {
  if (!skip) cluster = await startCluster({ masters: 3, replicas: 0, nodeTimeoutMs: 5000 })
})
after(() => cluster?.stop())

const ports = () => cluster.nodes.map((n) => n.port)
const allShards = Array.from({ length: SHARDS }, (_, s) => s)

/**
 * A fresh prefix whose queue `q` is laid out so that the primaries other than the one of the
 * queue's record (asked when a shard starts or stops holding ids) both hold some of its shards
 * (prefixes are random, so one is drawn until that holds):
 * { prefix, record, others: [port, port], shardsOf(port) }.
 */
function freshLayout(tag) {
  for (;;) {
    const prefix = freshPrefix(tag)
    const record = primaryOf(ports(), `${prefix}{q:q}:m`)
    const holder = allShards.map((s) => primaryOf(ports(), `${prefix}{q:q:${s}}:w`))
    const shardsOf = (port) => allShards.filter((s) => holder[s] === port)
    const others = ports().filter((p) => p !== record)
    if (others.every((p) => shardsOf(p).length > 0)) return { prefix, record, others, shardsOf }
  }
}

/** Waits until `ok()` holds, checked every 10 ms. */
async function until(ok, what, ms = 10_000) {
  const t0 = Date.now()
  while (!ok()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`)
    await sleep(10)
  }
}

/** Every id of the queue is either in `batch` or returned by a second read now: none hidden. */
async function noneHidden(fg, batch, ids) {
  const size = await fg.queueSize('q', { shards: SHARDS })
  assert.equal(size.claimed, batch.ids.length, 'claimed ids: exactly those returned')
  const rest = await fg.readBatch('q', { shards: SHARDS, limit: 1000 })
  assert.equal(rest.failedShards, undefined)
  const all = new Set([...batch.ids, ...rest.ids])
  assert.equal(all.size, batch.ids.length + rest.ids.length)
  assert.deepEqual([...all].sort(), [...ids].sort(), 'every id returned by one of the two reads')
}

/**
 * Pauses writes on `port` (the primary of `key`) for PAUSE_MS; the returned promise settles once the pause is over and
 * the commands it held back have run (a write sent during the pause is answered only then, and
 * Redis runs the held-back commands of every client in the same event loop turn).
 */
function pauseWrites(port, key, ms = PAUSE_MS) {
  assert.equal(cli(port, 'CLIENT', 'PAUSE', String(ms), 'WRITE'), 'OK')
  const t0 = Date.now()
  return async () => {
    // redis-cli's SET is held back too: it returns when the pause ends.
    await sleep(Math.max(0, ms - (Date.now() - t0)))
    assert.equal(cli(port, 'SET', key, '1'), 'OK')
    await sleep(100)
  }
}

// Half of the reads are the first use of the claim script on the nodes (loaded during the read,
// on the node of each shard only: never waiting for the paused node), half find it loaded.
for (const [commandTimeoutMs, firstUse] of [[300, true], [500, false], [700, true], [800, false]]) {
  test(`readBatch with one primary paused past commandTimeoutMs ${commandTimeoutMs}${firstUse ? ', scripts not loaded yet' : ''}: other shards read, none hidden`, { skip }, async () => {
    // The slow primary: one holding some of the shards but not the queue's own record (a shard
    // holding no id checks its count there; see the test with the record's node paused).
    const { prefix, others: [slow], shardsOf } = freshLayout('cluster-slow')
    const onSlow = shardsOf(slow)
    const fg = await Flowguard.open({ cluster: cluster.urls, prefix, commandTimeoutMs })
    const ids = Array.from({ length: 240 }, (_, i) => `item-${i}`)
    await fg.enqueue('q', ids, { shards: SHARDS })
    if (firstUse) for (const port of ports()) assert.equal(cli(port, 'SCRIPT', 'FLUSH'), 'OK')

    const resumed = pauseWrites(slow, `${prefix}{q:q:${onSlow[0]}}:probe`)
    let batch
    try {
      batch = await fg.readBatch('q', { shards: SHARDS, limit: 1000, visibilityTimeoutMs: 600_000 })
    } finally {
      await resumed()
    }

    assert.deepEqual(batch.failedShards, onSlow, 'failedShards: exactly the shards of the slow node')
    // Every id of the shards that answered, and none of the slow node's.
    const answered = ids.filter((id) => !onSlow.includes(Flowguard.shardOf(id, SHARDS)))
    assert.deepEqual([...batch.ids].sort(), answered.sort(), 'the batch: every id of the shards that answered')
    // With the node healthy again, no id is hidden by a claim the call made after it gave up.
    await noneHidden(fg, batch, ids)
    await fg.close()
  })
}

test('a shard that answered the first pass and times out in the second is not a failed shard, and holds nothing more', { skip }, async () => {
  // X: the node whose shard goes slow between the passes; Y: the node that holds the first pass
  // back until then. Neither holds the queue's record (asked by the shards holding no id).
  const { prefix, others: [x, y], shardsOf } = freshLayout('cluster-second')
  const commandTimeoutMs = 3000
  const fg = await Flowguard.open({ cluster: cluster.urls, prefix, commandTimeoutMs })
  const sx = shardsOf(x)[0]
  const ids = []
  for (let i = 0; ids.length < 20; i++) if (Flowguard.shardOf(`item-${i}`, SHARDS) === sx) ids.push(`item-${i}`)
  await fg.enqueue('q', ids, { shards: SHARDS })

  // Limit 24 over 12 shards: 2 each in the first pass; shard sx fills its 2, the others are
  // empty, so the second pass asks sx for the other 22.
  assert.equal(cli(y, 'CLIENT', 'PAUSE', '60000', 'WRITE'), 'OK')
  let resumedX
  let batch
  try {
    const read = fg.readBatch('q', { shards: SHARDS, limit: 24 })
    // The first pass ran on X (its 2 ids are claimed), and waits for Y: now X goes slow, then Y
    // is let go, so the second pass meets X paused past the command timeout.
    await until(() => cli(x, 'ZCARD', `${prefix}{q:q:${sx}}:c`) === '2', 'the first pass on shard ' + sx)
    resumedX = pauseWrites(x, `${prefix}{q:q:${sx}}:probe`, commandTimeoutMs + 1000)
    assert.equal(cli(y, 'CLIENT', 'UNPAUSE'), 'OK')
    batch = await read
  } finally {
    cli(y, 'CLIENT', 'UNPAUSE')
    await resumedX?.()
  }
  assert.equal(batch.failedShards, undefined, 'every shard answered (sx in the first pass)')
  assert.equal(batch.ids.length, 2)
  assert.ok(batch.ids.every((id) => ids.includes(id)))
  await noneHidden(fg, batch, ids)
  await fg.close()
})

test('a read goes on while the node of the queue\'s record is paused: a shard holding ids needs no record', { skip }, async () => {
  // Each shard checks the shard count against its own mark; only a shard holding no id asks the
  // queue's record. So with the record's node held back, the shards of the other nodes are read.
  const { prefix, record, shardsOf } = freshLayout('cluster-record')
  const onRecord = shardsOf(record)
  const fg = await Flowguard.open({ cluster: cluster.urls, prefix, commandTimeoutMs: 500 })
  const ids = Array.from({ length: 240 }, (_, i) => `item-${i}`)
  await fg.enqueue('q', ids, { shards: SHARDS })
  assert.equal((await fg.queueSize('q', { shards: SHARDS })).shards.filter((s) => s.waiting === 0).length, 0)

  const resumed = pauseWrites(record, `${prefix}{q:q}:probe`)
  let batch
  try {
    batch = await fg.readBatch('q', { shards: SHARDS, limit: 1000, visibilityTimeoutMs: 600_000 })
  } finally {
    await resumed()
  }
  assert.deepEqual(batch.failedShards ?? [], onRecord, 'failedShards: exactly the shards of the paused node')
  const answered = ids.filter((id) => !onRecord.includes(Flowguard.shardOf(id, SHARDS)))
  assert.deepEqual([...batch.ids].sort(), answered.sort(), 'the batch: every id of the shards that answered')
  await noneHidden(fg, batch, ids)
  await fg.close()
})
