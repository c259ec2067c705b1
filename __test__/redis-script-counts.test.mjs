// How many scripts and commands a call costs on Redis, counted by the server (INFO commandstats)
// of a throwaway redis-server of this suite's own, so no other suite's calls are counted. A
// structural check, not a timing: getStates reads 1,000 keys with one script; a serial claim and
// complete of one item runs no purge scan while nothing in its group can have expired, and reads
// no TTL.
import { test, after, before } from 'node:test'
import assert from 'node:assert/strict'
import { Flowguard } from './backends.mjs'
import { connect } from './resp.mjs'
import { freePort, haveRedis, startRedis, stopRedis } from './redis-server.mjs'

const skip = !haveRedis && 'redis-server is not installed'
let server, url, r

before(async () => {
  if (skip) return
  const port = await freePort()
  server = await startRedis(port)
  url = `redis://127.0.0.1:${port}`
  r = await connect(url)
})
after(async () => {
  r?.close()
  await stopRedis(server)
})

/** Calls per command since the last CONFIG RESETSTAT (lower-case names, INFO left out). */
async function calls() {
  const text = await r.call('INFO', 'commandstats')
  const out = {}
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (m[1] !== 'info') out[m[1]] = Number(m[2])
  return out
}

test('getStates of 1,000 keys is one script on one server; 2,500 keys three', { skip }, async () => {
  const fg = await Flowguard.open({ url, prefix: 'counts:state:' })
  try {
    const keys = Array.from({ length: 2500 }, (_, i) => `k${i}`)
    await Promise.all(keys.slice(0, 1000).map((k, i) => fg.setState(k, { i })))
    await fg.getStates(['k0']) // the script is loaded now: no NOSCRIPT round in the counts
    await r.call('CONFIG', 'RESETSTAT')
    const values = await fg.getStates(keys.slice(0, 1000))
    assert.deepEqual(values, keys.slice(0, 1000).map((_, i) => ({ i })))
    const one = await calls()
    assert.equal(one.evalsha, 1, `scripts run: ${JSON.stringify(one)}`)
    assert.equal(one.eval, undefined)
    await r.call('CONFIG', 'RESETSTAT')
    const more = await fg.getStates(keys)
    assert.equal(more.filter((v) => v !== undefined).length, 1000)
    assert.equal((await calls()).evalsha, 3, 'one script per 1,000 keys: bounded work per script')
  } finally {
    await fg.close()
  }
})

test('a serial claim and complete runs no purge scan and reads no TTL while nothing expired', { skip }, async () => {
  const fg = await Flowguard.open({ url, prefix: 'counts:tracker:' })
  try {
    // The first write of a group sets its bookkeeping (a purge and a TTL read once).
    const first = await fg.claim('g', 'first')
    await fg.complete('g', 'first', { owner: first.owner })
    await r.call('CONFIG', 'RESETSTAT')
    for (let i = 0; i < 50; i++) {
      const c = await fg.claim('g', `item-${i}`, { timeoutMs: 60_000 })
      assert.equal(c.claimed, true)
      assert.equal((await fg.complete('g', `item-${i}`, { owner: c.owner })).status, 'completed')
    }
    const n = await calls()
    assert.equal(n.evalsha, 100, `one script per call: ${JSON.stringify(n)}`)
    for (const scan of ['zrangebyscore', 'zrange', 'pttl', 'scan']) {
      assert.equal(n[scan], undefined, `${scan} ran: ${JSON.stringify(n)}`)
    }
    // A record bucket's split reads that one bucket (tracker_crec.lua: one per 40 completed
    // records at most): 51 completions split once.
    assert.ok((n.hgetall ?? 0) <= 1, `hgetall ran: ${JSON.stringify(n)}`)
    // Still exact: the status index and the timeline.
    const list = await fg.listItems('g', { limit: 100 })
    assert.equal(list.counts.completed, 51)
    const item = await fg.getItem('g', 'item-7')
    assert.deepEqual(item.timeline.map((t) => t.status), ['in_progress', 'completed'])
  } finally {
    await fg.close()
  }
})

test('a lock acquire and release is one script each, 3 + 2 commands; a held lock answers in 3', { skip }, async () => {
  const fg = await Flowguard.open({ url, prefix: 'counts:lock:' })
  try {
    const warm = await fg.acquireLock('l', { timeoutMs: 60_000 })
    await fg.releaseLock('l', warm.owner) // both scripts loaded, the fence counter made
    await r.call('CONFIG', 'RESETSTAT')
    let fence = warm.fence
    for (let i = 0; i < 20; i++) {
      const l = await fg.acquireLock('l', { timeoutMs: 60_000 })
      assert.equal(l.acquired, true)
      assert.ok(l.fence > fence, `fence ${l.fence} after ${fence}`)
      fence = l.fence
      assert.equal((await fg.releaseLock('l', l.owner)).released, true)
    }
    // An acquire: TIME, SET NX GET of the lock, SET GET of the fence counter; a release: GET, DEL.
    assert.deepEqual(await calls(), { evalsha: 40, time: 20, set: 40, get: 20, del: 20, 'config|resetstat': 1 })
    const held = await fg.acquireLock('l', { timeoutMs: 60_000 })
    await r.call('CONFIG', 'RESETSTAT')
    const busy = await fg.acquireLock('l', { timeoutMs: 60_000 })
    assert.deepEqual([busy.acquired, busy.fence], [false, held.fence])
    // Held: TIME, SET NX GET (which replies the holder's value), PTTL.
    assert.deepEqual(await calls(), { evalsha: 1, time: 1, set: 1, pttl: 1, 'config|resetstat': 1 })
  } finally {
    await fg.close()
  }
})

test('a semaphore acquire and release is one script each, 9 commands, no type probe, no clock in the release', { skip }, async () => {
  const fg = await Flowguard.open({ url, prefix: 'counts:sem:' })
  try {
    // Another holder keeps the semaphore's keys alive, as in a busy semaphore.
    const other = await fg.acquirePermit('s', { permits: 64, timeoutMs: 60_000 })
    assert.equal(other.acquired, true)
    const warm = await fg.acquirePermit('s', { permits: 64, timeoutMs: 60_000 })
    await fg.releasePermit('s', warm.owner) // both scripts loaded: no NOSCRIPT round in the counts
    await r.call('CONFIG', 'RESETSTAT')
    for (let i = 0; i < 20; i++) {
      const p = await fg.acquirePermit('s', { permits: 64, timeoutMs: 60_000 })
      assert.equal(p.acquired, true)
      assert.equal((await fg.releasePermit('s', p.owner)).released, true)
    }
    const n = await calls()
    assert.equal(n.evalsha, 40, `one script per call: ${JSON.stringify(n)}`)
    assert.equal(n.type, undefined, `a type probe ran: ${JSON.stringify(n)}`)
    const inner = Object.entries(n).filter(([c]) => !c.startsWith('config') && c !== 'evalsha').reduce((s, [, v]) => s + v, 0)
    // 7 in an acquire (the clock, the ended holders dropped, the live ones counted, the fence
    // counter swapped: a fence is at least the clock, the holder's entry, permit key and the
    // holders' lifetime), 2 in a release.
    assert.ok(inner <= 20 * 9, `${inner / 20} commands per pair: ${JSON.stringify(n)}`)
    assert.equal(n.get, undefined, `the fence counter is swapped (SET GET), not read: ${JSON.stringify(n)}`)
    assert.equal(n.time, 20, `the clock is read by the acquires only: ${JSON.stringify(n)}`)
    const info = await fg.getSemaphore('s')
    assert.equal(info.holders.length, 1)
  } finally {
    await fg.close()
  }
})

test('a semaphore acquire with a per-key limit is one script of 2 commands more (ZRANGE + MGET of the live permits); its release is as any', { skip }, async () => {
  const fg = await Flowguard.open({ url, prefix: 'counts:semkey:' })
  try {
    const other = await fg.acquirePermit('s', { permits: 64, key: 'b', perKey: 2, timeoutMs: 60_000 })
    assert.equal(other.acquired, true)
    const warm = await fg.acquirePermit('s', { permits: 64, key: 'a', perKey: 2, timeoutMs: 60_000 })
    await fg.releasePermit('s', warm.owner)
    await r.call('CONFIG', 'RESETSTAT')
    for (let i = 0; i < 20; i++) {
      const p = await fg.acquirePermit('s', { permits: 64, key: 'a', perKey: 2, timeoutMs: 60_000 })
      assert.deepEqual([p.acquired, p.keyHolders], [true, 1])
      assert.equal((await fg.releasePermit('s', p.owner)).released, true)
    }
    const n = await calls()
    assert.equal(n.evalsha, 40, `one script per call: ${JSON.stringify(n)}`)
    assert.equal(n.mget, 20, `one MGET per acquire: ${JSON.stringify(n)}`)
    assert.equal(n.get, undefined, `no key is read one by one: ${JSON.stringify(n)}`)
    const inside = Object.entries(n).filter(([c]) => !c.startsWith('config') && c !== 'evalsha').reduce((s, [, v]) => s + v, 0)
    assert.ok(inside <= 20 * 11, `${inside / 20} commands per pair: ${JSON.stringify(n)}`)
    assert.deepEqual((await fg.getSemaphore('s')).keys, { b: 1 })
  } finally {
    await fg.close()
  }
})

/** Commands run inside scripts (every counted one but EVALSHA and CONFIG). */
const inner = (n) => Object.entries(n).filter(([c]) => !c.startsWith('config') && c !== 'evalsha').reduce((s, [, v]) => s + v, 0)

test('an enqueue of one id onto a shard holding ids is one script of at most 5 commands, a duplicate 2 (no TIME), no ZCARD', { skip }, async () => {
  const fg = await Flowguard.open({ url, prefix: 'counts:queue:' })
  try {
    // The shard holds ids and the script is loaded: no NOSCRIPT round, no record step.
    await fg.enqueue('q', 'first', { shards: 4 })
    await fg.enqueue('q', 'first', { shards: 4 })
    await r.call('CONFIG', 'RESETSTAT')
    const ids = []
    for (let i = 0; ids.length < 50; i++) if (Flowguard.shardOf(`e-${i}`, 4) === Flowguard.shardOf('first', 4)) ids.push(`e-${i}`)
    for (const id of ids) assert.equal((await fg.enqueue('q', id, { shards: 4 })).added, 1)
    const added = await calls()
    assert.equal(added.evalsha, 50, `one script per enqueue: ${JSON.stringify(added)}`)
    assert.equal(added.zcard, undefined, `a set was counted: ${JSON.stringify(added)}`)
    assert.ok(inner(added) <= 50 * 5, `${inner(added) / 50} commands per enqueue: ${JSON.stringify(added)}`)

    await r.call('CONFIG', 'RESETSTAT')
    for (const id of ids) assert.equal((await fg.enqueue('q', id, { shards: 4 })).duplicates, 1)
    const dup = await calls()
    assert.equal(dup.evalsha, 50, `one script per enqueue: ${JSON.stringify(dup)}`)
    assert.ok(inner(dup) <= 50 * 2, `${inner(dup) / 50} commands per duplicate: ${JSON.stringify(dup)}`)
    assert.equal(dup.zscore, 50, `one look per duplicate: ${JSON.stringify(dup)}`)
    assert.equal(dup.time, undefined, `a duplicate read the time: ${JSON.stringify(dup)}`)
  } finally {
    await fg.close()
  }
})

test('readBatch and ack of a batch over 4 shards holding ids are one script per shard each (9 commands each), no ZCARD, claims kept out of listpacks', { skip }, async () => {
  const fg = await Flowguard.open({ url, prefix: 'counts:queue-read:' })
  try {
    const ids = Array.from({ length: 400 }, (_, i) => `item-${i}`)
    await fg.enqueue('q', ids, { shards: 4 })
    // Scripts loaded, the store's first claim made.
    const warm = await fg.readBatch('q', { shards: 4, limit: 4 })
    await fg.ack('q', warm.owner, warm.ids, { shards: 4 })
    await r.call('CONFIG', 'RESETSTAT')
    const batch = await fg.readBatch('q', { shards: 4, limit: 100 })
    assert.equal(batch.ids.length, 100)
    const read = await calls()
    assert.equal(read.evalsha, 4, `one script per shard: ${JSON.stringify(read)}`)
    assert.equal(read.zcard, undefined, `a set was counted: ${JSON.stringify(read)}`)
    assert.equal(read.time, 4, `no TIME but the scripts': ${JSON.stringify(read)}`)
    // Variadic writes: a claim of 25 ids is not 25 commands per set.
    assert.ok(inner(read) <= 4 * 9, `${inner(read) / 4} commands per shard: ${JSON.stringify(read)}`)
    // The claimed set and the owners' hash of a claim of 25 ids are not listpacks (each insert and
    // lookup of a listpack walks the whole key: a claim of 100 and its ack were quadratic).
    for (let shard = 0; shard < 4; shard++) {
      const head = `counts:queue-read:{q:q:${shard}}`
      assert.equal(await r.call("ZCARD", `${head}:c`), 25)
      assert.equal(await r.call('OBJECT', 'ENCODING', `${head}:c`), 'skiplist', `shard ${shard}'s claimed set`)
      assert.equal(await r.call('OBJECT', 'ENCODING', `${head}:o`), 'hashtable', `shard ${shard}'s owners`)
      assert.equal(await r.call("HLEN", `${head}:o`), 25, "no member but the claimed ids")
    }
    await r.call('CONFIG', 'RESETSTAT')
    assert.equal((await fg.ack('q', batch.owner, batch.ids, { shards: 4 })).done, 100)
    const ack = await calls()
    assert.equal(ack.evalsha, 4, `one script per shard: ${JSON.stringify(ack)}`)
    assert.equal(ack.zcard, undefined, `a set was counted: ${JSON.stringify(ack)}`)
    assert.ok(inner(ack) <= 4 * 9, `${inner(ack) / 4} commands per shard: ${JSON.stringify(ack)}`)
  } finally {
    await fg.close()
  }
})

test('the queue record is asked only when a shard starts or stops holding ids', { skip }, async () => {
  const fg = await Flowguard.open({ url, prefix: 'counts:queue-record:' })
  try {
    await fg.enqueue('warm', 'x')
    const w = await fg.readBatch('warm')
    await fg.ack('warm', w.owner, w.ids)
    await r.call('CONFIG', 'RESETSTAT')
    // Onto an empty shard: the shard script finds no mark, a place is reserved, the script runs.
    assert.equal((await fg.enqueue('q', 'a')).added, 1)
    assert.equal((await calls()).evalsha, 3)
    await r.call('CONFIG', 'RESETSTAT')
    const batch = await fg.readBatch('q')
    assert.deepEqual(batch.ids, ['a'])
    assert.equal((await calls()).evalsha, 1)
    await r.call('CONFIG', 'RESETSTAT')
    // The ack that empties the shard gives its place back on the record.
    assert.equal((await fg.ack('q', batch.owner, batch.ids)).done, 1)
    assert.equal((await calls()).evalsha, 2)
    assert.equal(await r.call('EXISTS', 'counts:queue-record:{q:q}:m', 'counts:queue-record:{q:q:0}:n'), 0)
    await r.call('CONFIG', 'RESETSTAT')
    // A read of an empty shard checks the count on the record (it found nothing to undo).
    assert.deepEqual((await fg.readBatch('q')).ids, [])
    assert.equal((await calls()).evalsha, 2)
  } finally {
    await fg.close()
  }
})

test('a claimBatch of many small records keeps the group\'s records hash out of listpack encoding', { skip }, async () => {
  // Records of about 40 bytes fit a listpack, which Redis keeps up to 512 fields: each lookup and
  // insert walks the whole key, so the second chunk of a claimBatch was quadratic.
  const fg = await Flowguard.open({ url, prefix: 'counts:claim-wide:' })
  try {
    const ids = Array.from({ length: 500 }, (_, i) => `order-${i}`)
    // 400 records (one chunk, a listpack), then a claim of 100 more reads and writes them.
    assert.equal((await fg.claimBatch('g', ids.slice(0, 400))).claimed, 400)
    assert.equal((await fg.claimBatch('g', ids.slice(400))).claimed, 100)
    const keys = await r.call('KEYS', 'counts:claim-wide:*')
    const hashes = []
    for (const k of keys) if ((await r.call('TYPE', k)) === 'hash') hashes.push(k)
    assert.equal(hashes.length, 1, `one records hash: ${keys}`)
    assert.equal(await r.call('OBJECT', 'ENCODING', hashes[0]), 'hashtable')
    assert.ok((await r.call('HLEN', hashes[0])) <= 501, 'no field but the records and the group\'s bookkeeping')
    assert.equal((await fg.getItems('g', ['order-0', 'order-499'])).filter((i) => i.status === 'in_progress').length, 2)
  } finally {
    await fg.close()
  }
})

test('a capped debounce (maxDelayMs) costs a plain enqueue and a claim nothing; only its shard records first-enqueue times, and an emptied shard keeps no key', { skip }, async () => {
  const fg = await Flowguard.open({ url, prefix: 'counts:queue-cap:' })
  const head = 'counts:queue-cap:{q:q:0}'
  try {
    await fg.enqueue('q', 'parked', { delayMs: 3_600_000 })
    await fg.readBatch('q') // scripts loaded, the clock sampled
    assert.equal(await r.call('GET', `${head}:n`), '1')
    await r.call('CONFIG', 'RESETSTAT')
    // A plain one-id enqueue: GET of the mark, ZSCORE, TIME, ZSCORE of claimed, ZADD; no HSET.
    assert.equal((await fg.enqueue('q', 'plain')).added, 1)
    assert.deepEqual(await calls(), { evalsha: 1, get: 1, zscore: 2, time: 1, zadd: 1, 'config|resetstat': 1 })
    // A claim on a shard that never had a capped debounce: no HDEL.
    await r.call('CONFIG', 'RESETSTAT')
    const b1 = await fg.readBatch('q')
    assert.deepEqual(b1.ids, ['plain'])
    assert.equal((await calls()).hdel, undefined)
    await fg.ack('q', b1.owner, b1.ids)
    // A capped debounce records the id's first enqueue and flags the mark.
    const c = await fg.enqueue('q', 'capped', { debounce: true, delayMs: 60_000, maxDelayMs: 1 })
    assert.equal(await r.call('GET', `${head}:n`), '1f')
    assert.equal(Number(await r.call('HGET', `${head}:f`, 'capped')), c.items[0].dueAt - 1)
    await new Promise((res) => setTimeout(res, 5))
    // The claim drops it; the ack that empties the shard leaves no key.
    const b2 = await fg.readBatch('q', { limit: 10 })
    assert.deepEqual(b2.ids, ['capped'])
    assert.equal(await r.call('EXISTS', `${head}:f`), 0)
    await fg.ack('q', b2.owner, b2.ids)
    // Onto an empty shard (the batch script), read and acked: no key of the shard is left.
    await fg.enqueue('e', ['x', 'y'], { debounce: true, delayMs: 60_000, maxDelayMs: 1 })
    assert.equal(await r.call('GET', 'counts:queue-cap:{q:e:0}:n'), '1f')
    assert.equal(await r.call('HLEN', 'counts:queue-cap:{q:e:0}:f'), 2)
    await new Promise((res) => setTimeout(res, 5))
    const b3 = await fg.readBatch('e', { limit: 10 })
    assert.deepEqual(b3.ids.sort(), ['x', 'y'])
    await fg.ack('e', b3.owner, b3.ids)
    assert.deepEqual(await r.call('KEYS', 'counts:queue-cap:{q:e*'), [])
  } finally {
    await fg.close()
  }
})
