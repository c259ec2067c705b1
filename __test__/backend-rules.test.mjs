// Rules both backends must keep alike (queue shard counts, empty labels), and Redis values written
// behind flowguard's back with redis-cli (large fencing tokens, foreign lock values).
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { backends, freshPrefix, Flowguard, rejection } from './backends.mjs'

const mismatch = (e, n, stored) => {
  assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
  assert.match(e.message, new RegExp(`shards is ${n}\\b`))
  assert.match(e.message, new RegExp(`shards = ${stored}\\b`))
}

const emptyLabel = {}
for (const b of backends()) {
  describe(`backend rules on ${b.name}`, () => {
    test('ids enqueued with shards: 8 are refused to a reader with shards: 4, not hidden', async () => {
      const fg = await b.open()
      const ids = Array.from({ length: 40 }, (_, i) => `id-${i}`)
      await fg.enqueue('q', ids, { shards: 8 })
      mismatch(await rejection(fg.readBatch('q', { shards: 4 })), 4, 8)
      mismatch(await rejection(fg.queueSize('q', { shards: 4 })), 4, 8)
      mismatch(await rejection(fg.peek('q', { shards: 16, shard: 12 })), 16, 8)
      mismatch(await rejection(fg.enqueue('q', ['new'], { shards: 4 })), 4, 8)
      assert.equal((await fg.queueSize('q', { shards: 8 })).waiting, 40)
      // Emptied, the queue takes the next writer's count.
      const batch = await fg.readBatch('q', { shards: 8, limit: 100 })
      assert.equal(batch.ids.length, 40)
      await fg.ack('q', batch.owner, batch.ids, { shards: 8 })
      await fg.enqueue('q', ['a', 'b'], { shards: 4 })
      assert.equal((await fg.queueSize('q', { shards: 4 })).waiting, 2)
      mismatch(await rejection(fg.readBatch('q', { shards: 8 })), 8, 4)
    })

    test("label: '' reads back the same as no label", async () => {
      const fg = await b.open()
      const a = await fg.acquireLock('l', { label: '' })
      const held = await fg.acquireLock('l')
      const info = await fg.getLock('l')
      assert.equal(a.acquired, true)
      emptyLabel[b.name] = [a.holder, held.holder, info.holder]
      assert.deepEqual(emptyLabel[b.name].map((h) => h ?? null), [null, null, null])
      if (emptyLabel.embedded && emptyLabel.redis) assert.deepEqual(emptyLabel.redis, emptyLabel.embedded)
    })
  })
}

const redisCli = (...args) => {
  const r = spawnSync('redis-cli', ['-u', process.env.REDIS_URL, ...args], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`redis-cli ${args.join(' ')}: ${r.stderr}`)
  return r.stdout.trim()
}
const haveCli = process.env.REDIS_URL && spawnSync('redis-cli', ['--version']).status === 0

describe('Redis values written with redis-cli', { skip: !haveCli && 'needs REDIS_URL and redis-cli' }, () => {
  // Counters above the Redis clock in µs (a token is the larger of the counter + 1 and the clock;
  // the clock passes 4e15 µs in 2096): 4e15, a round number Lua would print as 4e+15.
  test('fencing tokens are exact at 4e15 and at 2^53 - 1', async () => {
    const prefix = freshPrefix('fence')
    const fg = await Flowguard.open({ url: process.env.REDIS_URL, prefix })
    for (const [name, start] of [['4e15', 4e15 - 1], ['max', Number.MAX_SAFE_INTEGER - 1]]) {
      redisCli('SET', `${prefix}{l:${name}}:fence`, String(start))
      const a = await fg.acquireLock(name, { label: 'run' })
      assert.equal(a.acquired, true)
      assert.equal(a.fence, start + 1)
      assert.match(redisCli('GET', `${prefix}{l:${name}}`), new RegExp(`:${start + 1}:run$`))
      assert.equal((await fg.getLock(name)).fence, start + 1)
      assert.equal((await fg.acquireLock(name)).holder, 'run')
      assert.equal((await fg.extendLock(name, a.owner, { timeoutMs: 5000 })).extended, true)
      assert.equal((await fg.releaseLock(name, a.owner)).released, true)
    }
  })

  test('a lock key set by hand is a coded error naming the key', async () => {
    const prefix = freshPrefix('foreign')
    const fg = await Flowguard.open({ url: process.env.REDIS_URL, prefix })
    redisCli('SET', `${prefix}{l:hand}`, 'hello')
    for (const p of [fg.acquireLock('hand'), fg.getLock('hand'), fg.releaseLock('hand', 'a'.repeat(32))]) {
      const e = await rejection(p)
      assert.equal(e.code, 'ERR_BACKEND', e.message)
      assert.ok(e.message.includes(`${prefix}{l:hand}`), e.message)
    }
    assert.equal(redisCli('GET', `${prefix}{l:hand}`), 'hello')
  })
})
