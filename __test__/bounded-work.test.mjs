// Bounded work and memory that is given back (issue 12). Structural checks, not timings: when
// more entries expire together than one clean-up slice (1000), one call forgets at most a slice
// and the following calls go on, while every result already counts the expired entries as gone;
// and the keys of the README's weekly pattern (claim, then complete with a shorter keepMs) leave
// Redis when the last record's keepMs ends.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Flowguard, backends, sleep } from './backends.mjs'
import { connect } from './resp.mjs'
import { recordCount } from './redis-layout.mjs'

const SLICE = 1000
const redisUrl = process.env.REDIS_URL

const keysUnder = (r, prefix) => r.scanAll(`${prefix}*`)

const ids = (n, tag = 'i') => Array.from({ length: n }, (_, i) => `${tag}${i}`)

test('redis: listItems forgets at most one slice of expired records per call, counts exclude the rest', { skip: !redisUrl && 'REDIS_URL not set' }, async () => {
  const prefix = `bounded:${process.pid}:${Date.now()}:t:`
  const fg = await Flowguard.open({ url: redisUrl, prefix })
  const r = await connect(redisUrl)
  try {
    // One item stays in progress, so the group's keys live on (their TTL follows the latest
    // record) and only the purge slices can forget the others.
    assert.equal((await fg.claim('g', 'live', { timeoutMs: 60_000 })).claimed, true)
    const all = ids(2500)
    const b = await fg.claimBatch('g', all)
    // Failed: their records stay in the records hash until a purge (completed ones that fit a
    // record bucket leave with its TTL, see docs/redis-compact.md).
    const done = await fg.setItems('g', all.map((id) => ({ id, status: 'failed', error: 'x', owner: b.owner, keepMs: 1 })))
    assert.equal(done.filter((x) => x.ok !== false).length, 2500)
    const [records] = (await keysUnder(r, prefix)).filter((k) => k.endsWith('}:r'))
    assert.ok(records, 'the records hash exists')
    const head = records.slice(0, -2)
    assert.equal(await recordCount(r, head), 2501)
    await sleep(20)
    const sizes = []
    for (let i = 0; i < 3; i++) {
      const l = await fg.listItems('g', { limit: 10 })
      assert.deepEqual(l.counts, { inProgress: 1, abandoned: 0, completed: 0, failed: 0, dead: 0, total: 1 })
      assert.deepEqual(l.items.map((x) => x.id), ['live'])
      sizes.push(await recordCount(r, head))
    }
    assert.deepEqual(sizes, [2501 - SLICE, 2501 - 2 * SLICE, 1])
  } finally {
    r.close()
  }
})

test('redis: expired queue claims return to waiting one slice per call, counted as waiting meanwhile', { skip: !redisUrl && 'REDIS_URL not set' }, async () => {
  const prefix = `bounded:${process.pid}:${Date.now()}:q:`
  const fg = await Flowguard.open({ url: redisUrl, prefix })
  const r = await connect(redisUrl)
  try {
    await fg.enqueue('q', ids(2500))
    const got = await fg.readBatch('q', { limit: 2500, visibilityTimeoutMs: 1 })
    assert.equal(got.items.length, 2500)
    await sleep(20)
    const claimedKey = (await keysUnder(r, prefix)).find((k) => k.endsWith(':c'))
    assert.ok(claimedKey)
    const left = []
    for (let i = 0; i < 3; i++) {
      const s = await fg.queueSize('q')
      assert.equal(s.waiting, 2500)
      assert.equal(s.due, 2500)
      assert.equal(s.claimed, 0)
      left.push(await r.call('ZCARD', claimedKey))
    }
    assert.deepEqual(left, [2500 - SLICE, 2500 - 2 * SLICE, 0])
    // A claim of more than a slice returns as many expired claims as it asks for.
    const again = await fg.readBatch('q', { limit: 2500 })
    assert.equal(again.items.length, 2500)
  } finally {
    r.close()
  }
})

for (const b of backends()) {
  for (const how of ['claimMany', 'claimBatch']) {
    test(`${b.name}: README weekly pattern (${how}, then setItems with a shorter keepMs) forgets everything at keepMs`, async () => {
      const prefix = `bounded:${process.pid}:${Date.now()}:${how}:`
      const fg = await b.open({ prefix })
      const all = ids(300, 'p')
      let owner
      if (how === 'claimMany') {
        const claims = await fg.claimMany('weekly', all, { timeoutMs: 5 * 60_000 })
        assert.ok(claims.every((c) => c.claimed))
        owner = (id) => claims.find((c) => c.id === id).owner
      } else {
        const c = await fg.claimBatch('weekly', all, { timeoutMs: 5 * 60_000 })
        owner = () => c.owner
      }
      // keepMs long enough that the listing right after the write comes before it on a loaded
      // machine too; then a wait until past it, counted from before the write.
      const keepMs = 2000
      const results = all.map((id, i) =>
        i % 10 === 0
          ? { id, status: 'failed', owner: owner(id), error: 'x', keepMs }
          : { id, status: 'completed', owner: owner(id), keepMs },
      )
      const written = Date.now()
      await fg.setItems('weekly', results)
      const before = await fg.listItems('weekly')
      assert.ok(Date.now() - written < keepMs, `the write and the listing took ${Date.now() - written} ms, not under keepMs ${keepMs}`)
      assert.deepEqual(before.counts, { inProgress: 0, abandoned: 0, completed: 270, failed: 30, dead: 0, total: 300 })
      await sleep(written + keepMs + 150 - Date.now())
      if (b.name === 'redis') {
        const r = await connect(b.url)
        try {
          // The keys go with their TTL, without any call on the group.
          assert.deepEqual(await keysUnder(r, prefix), [])
        } finally {
          r.close()
        }
      }
      const after = await fg.listItems('weekly')
      assert.deepEqual(after.counts, { inProgress: 0, abandoned: 0, completed: 0, failed: 0, dead: 0, total: 0 })
      assert.equal((await fg.getItem('weekly', 'p1')).status, 'none')
    })
  }
}

// A fence counter on Redis is made from the clock (microseconds) with a 30-day lifetime, once;
// later acquisitions only increment it, whatever their lease. When it is gone (expired: deleted
// here), the next one is made from the clock again, past every fence of the old one.
const keep = 30 * 86_400_000
const micros = () => Date.now() * 1000

test('redis: a lock fence counter is made from the clock with a 30-day lifetime, set once; after it expires the next fence is larger', { skip: !redisUrl && 'REDIS_URL not set' }, async () => {
  const prefix = `bounded:${process.pid}:${Date.now()}:l:`
  const fg = await Flowguard.open({ url: redisUrl, prefix })
  const r = await connect(redisUrl)
  try {
    const t0 = micros()
    const a = await fg.acquireLock('job', { timeoutMs: 60_000 })
    assert.equal(a.acquired, true)
    // From the Redis clock (same machine): within a few seconds of ours.
    assert.ok(Math.abs(a.fence - t0) < 5e6, `fence ${a.fence} vs clock ${t0}`)
    const fence = (await keysUnder(r, prefix)).find((k) => k.endsWith(':fence'))
    assert.ok(fence)
    const ttl = await r.call('PTTL', fence)
    assert.ok(ttl > keep - 60_000 && ttl <= keep, `fence TTL ${ttl}`)
    await fg.releaseLock('job', a.owner)
    await sleep(20)
    const b = await fg.acquireLock('job', { timeoutMs: 1000 })
    assert.ok(b.fence > a.fence, `fence ${b.fence} after ${a.fence}`)
    // The lifetime is the one given when the counter was made (later grants write it KEEPTTL).
    const ttl2 = await r.call('PTTL', fence)
    assert.ok(ttl2 < ttl && ttl2 > ttl - 60_000, `fence TTL after a second acquisition ${ttl2} (first ${ttl})`)
    // A busy attempt leaves the counter as it was.
    const busy = await fg.acquireLock('job', { timeoutMs: 1000 })
    assert.equal(busy.acquired, false)
    assert.equal(busy.fence, b.fence)
    assert.equal(await r.call('GET', fence), String(b.fence))
    // Counter gone while the lock is held: a busy attempt does not make it again.
    await r.call('DEL', fence)
    assert.equal((await fg.acquireLock('job')).acquired, false)
    assert.equal(await r.call('EXISTS', fence), 0)
    await fg.releaseLock('job', b.owner)
    // The counter expires (its lifetime, cut short here): the next fence is still larger.
    const c = await fg.acquireLock('job', { timeoutMs: 1000 })
    assert.ok(c.fence > b.fence, `${c.fence} > ${b.fence}`)
    await r.call('PEXPIRE', fence, 1)
    await sleep(20)
    await fg.releaseLock('job', c.owner)
    const d = await fg.acquireLock('job', { timeoutMs: 1000 })
    assert.ok(d.fence > c.fence, `${d.fence} > ${c.fence}`)
    assert.equal((await fg.getLock('job')).fence, d.fence)
    assert.ok((await r.call('PTTL', fence)) > keep - 60_000)
    await fg.releaseLock('job', d.owner)
    assert.equal((await fg.getLock('job')).fence, d.fence)
  } finally {
    r.close()
  }
})

test('redis: a semaphore fence counter is made like a lock\'s; after it expires the next fence is larger', { skip: !redisUrl && 'REDIS_URL not set' }, async () => {
  const prefix = `bounded:${process.pid}:${Date.now()}:s:`
  const fg = await Flowguard.open({ url: redisUrl, prefix })
  const r = await connect(redisUrl)
  try {
    const t0 = micros()
    const a = await fg.acquirePermit('api', { permits: 2, timeoutMs: 60_000 })
    assert.equal(a.acquired, true)
    assert.ok(Math.abs(a.fence - t0) < 5e6, `fence ${a.fence} vs clock ${t0}`)
    const fence = (await keysUnder(r, prefix)).find((k) => k.endsWith(':fence'))
    assert.ok(fence, 'the fence counter key')
    const ttl = await r.call('PTTL', fence)
    assert.ok(ttl > keep - 60_000 && ttl <= keep, `fence TTL ${ttl}`)
    await sleep(20)
    const b = await fg.acquirePermit('api', { permits: 2, timeoutMs: 1000 })
    assert.ok(b.fence > a.fence, `fence ${b.fence} after ${a.fence}`)
    const ttl2 = await r.call('PTTL', fence)
    assert.ok(ttl2 < ttl && ttl2 > ttl - 60_000, `fence TTL after a second acquisition ${ttl2} (first ${ttl})`)
    // Full: the last fence, the counter untouched.
    assert.equal((await fg.acquirePermit('api', { permits: 2 })).fence, b.fence)
    await fg.releasePermit('api', a.owner)
    await r.call('PEXPIRE', fence, 1)
    await sleep(20)
    const c = await fg.acquirePermit('api', { permits: 2, timeoutMs: 1000 })
    assert.ok(c.fence > b.fence, `${c.fence} > ${b.fence}`)
    assert.equal((await fg.getSemaphore('api')).fence, c.fence)
    await fg.releasePermit('api', b.owner)
    await fg.releasePermit('api', c.owner)
  } finally {
    r.close()
  }
})
