// Dedup Queue dead letters: readBatch({ maxDeliveries }) moves an id delivered that many times
// without an ack to the queue's dead letters (SQS's redrive policy, maxReceiveCount), on every
// available backend. Deliveries end by release (a retry) or by the visibility timeout, whose end
// is waited for by the backend's clock (the batch's visibleUntil), never hoped for.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { backends, sleep, rejection, Flowguard } from './backends.mjs'

/** Reads `queue` with `opts` and releases what it got at once: one delivery without an ack. */
async function deliverOnce(fg, queue, opts) {
  const b = await fg.readBatch(queue, opts)
  if (b.ids.length) await fg.release(queue, b.owner, b.ids, { shards: opts.shards })
  return b.ids
}

for (const b of backends()) {
  describe(`queue dead letters on ${b.name}`, () => {
    test('an id delivered maxDeliveries times (released) dies on the next read instead of being delivered', async () => {
      const fg = await b.open()
      await fg.enqueue('q', ['x', 'y'])
      const read = { maxDeliveries: 2 }
      assert.deepEqual((await deliverOnce(fg, 'q', read)).sort(), ['x', 'y'])
      const second = await fg.readBatch('q', read)
      assert.deepEqual(second.ids.sort(), ['x', 'y'])
      await fg.ack('q', second.owner, ['y'])
      await fg.release('q', second.owner, ['x'])
      const before = Date.now()
      const third = await fg.readBatch('q', read)
      assert.deepEqual(third.ids, [], 'x was delivered twice: not a third time')
      const size = await fg.queueSize('q')
      assert.deepEqual([size.waiting, size.claimed, size.dead, size.shards[0].dead], [0, 0, 1, 1])
      const page = await fg.deadLetters('q')
      assert.equal(page.items.length, 1)
      const [d] = page.items
      assert.deepEqual([d.id, d.shard, d.deliveries], ['x', 0, 2])
      assert.ok(Math.abs(d.diedAt - before) < 5_000, `diedAt ${d.diedAt - before} ms from the read`)
      assert.equal(page.nextOffset, undefined)
      // A read without maxDeliveries does not deliver a dead letter either.
      assert.deepEqual((await fg.readBatch('q')).ids, [])
      await fg.close()
    })

    test('an id whose claims expired dies after maxDeliveries deliveries', async () => {
      const fg = await b.open()
      await fg.enqueue('q', 'x')
      const read = { maxDeliveries: 1, visibilityTimeoutMs: 100 }
      const first = await fg.readBatch('q', read)
      assert.deepEqual(first.ids, ['x'])
      // Wait until its claim has expired by the backend's clock: size counts it waiting again.
      for (let i = 0; i < 250 && (await fg.queueSize('q')).claimed > 0; i++) await sleep(20)
      assert.deepEqual((await fg.readBatch('q', read)).ids, [])
      assert.equal((await fg.queueSize('q')).dead, 1)
      assert.deepEqual((await fg.deadLetters('q')).items.map((d) => [d.id, d.deliveries]), [['x', 1]])
      await fg.close()
    })

    test('an ack drops the count: the id enqueued again is delivered maxDeliveries times anew', async () => {
      const fg = await b.open()
      await fg.enqueue('q', 'x')
      const read = { maxDeliveries: 2 }
      await deliverOnce(fg, 'q', read)
      const b2 = await fg.readBatch('q', read)
      assert.deepEqual(b2.ids, ['x'])
      await fg.ack('q', b2.owner, 'x')
      assert.equal((await fg.enqueue('q', 'x')).added, 1)
      assert.deepEqual(await deliverOnce(fg, 'q', read), ['x'])
      assert.deepEqual(await deliverOnce(fg, 'q', read), ['x'])
      assert.deepEqual(await deliverOnce(fg, 'q', read), [])
      assert.equal((await fg.queueSize('q')).dead, 1)
      await fg.close()
    })

    test('reads without maxDeliveries count nothing and never dead-letter', async () => {
      const fg = await b.open()
      await fg.enqueue('q', 'x')
      for (let i = 0; i < 4; i++) assert.deepEqual(await deliverOnce(fg, 'q', {}), ['x'])
      // Those deliveries were not counted: a first counting read delivers it.
      assert.deepEqual(await deliverOnce(fg, 'q', { maxDeliveries: 1 }), ['x'])
      assert.equal((await fg.queueSize('q')).dead, 0)
      await fg.close()
    })

    test('an enqueue of a dead letter leaves it dead (outcome dead); requeueDead makes it waiting, count reset', async () => {
      const fg = await b.open()
      await fg.enqueue('q', ['x', 'w'])
      await deliverOnce(fg, 'q', { maxDeliveries: 1 })
      assert.deepEqual(await deliverOnce(fg, 'q', { maxDeliveries: 1 }), [])
      assert.equal((await fg.queueSize('q')).dead, 2)
      // One id (the single-id path) and a batch, with and without debounce.
      for (const [ids, opts] of [['x', {}], [['x', 'w', 'n'], {}], ['w', { debounce: true, delayMs: 10 }]]) {
        const e = await fg.enqueue('q', ids, opts)
        const dead = e.items.filter((i) => i.outcome === 'dead')
        assert.deepEqual(dead.map((i) => [i.id, i.dueAt]), [].concat(ids).filter((i) => i !== 'n').map((i) => [i, 0]))
        assert.equal(e.dead, dead.length)
      }
      const size = await fg.queueSize('q')
      assert.deepEqual([size.waiting, size.dead], [1, 2], 'only n is waiting')
      const r = await fg.requeueDead('q', ['x', 'n', 'x'])
      assert.deepEqual(r.items.map((i) => i.outcome), ['requeued', 'not_dead', 'not_dead'])
      assert.deepEqual([r.requeued, r.notDead], [1, 2])
      assert.ok(r.items[0].dueAt > 0)
      const after = await fg.queueSize('q')
      assert.deepEqual([after.waiting, after.dead], [2, 1])
      // Its count was reset: delivered once more with maxDeliveries 1.
      const got = await fg.readBatch('q', { maxDeliveries: 1 })
      assert.deepEqual(got.ids.sort(), ['n', 'x'])
      await fg.close()
    })

    test('dead letters of many shards: paged by offset, counted, requeued in one call; they keep the shard count', async () => {
      const fg = await b.open()
      const shards = 4
      const ids = Array.from({ length: 23 }, (_, i) => `id-${i}`)
      await fg.enqueue('q', ids, { shards })
      assert.equal((await deliverOnce(fg, 'q', { shards, maxDeliveries: 1, limit: 100 })).length, 23)
      assert.deepEqual(await deliverOnce(fg, 'q', { shards, maxDeliveries: 1, limit: 100 }), [])
      assert.equal((await fg.queueSize('q', { shards })).dead, 23)
      const seen = []
      let offset = 0
      for (;;) {
        const page = await fg.deadLetters('q', { shards, offset, limit: 7 })
        seen.push(...page.items)
        assert.ok(page.items.length <= 7)
        if (page.nextOffset === undefined) break
        offset = page.nextOffset
      }
      assert.deepEqual(seen.map((d) => d.id).sort(), [...ids].sort())
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i - 1].diedAt <= seen[i].diedAt, 'oldest death first')
      for (const d of seen) assert.equal(d.shard, Flowguard.shardOf(d.id, shards))
      const one = await fg.deadLetters('q', { shards, shard: 2 })
      assert.ok(one.items.every((d) => d.shard === 2))
      // Only dead letters held: the queue's shard count stays.
      const e = await rejection(fg.enqueue('q', 'other', { shards: 2 }))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
      const r = await fg.requeueDead('q', ids, { shards })
      assert.equal(r.requeued, 23)
      const size = await fg.queueSize('q', { shards })
      assert.deepEqual([size.waiting, size.due, size.dead], [23, 23, 0])
      await fg.close()
    })

    test('a read moves at most `limit` ids to the dead letters per call', async () => {
      const fg = await b.open()
      const ids = Array.from({ length: 10 }, (_, i) => `id-${i}`)
      await fg.enqueue('q', ids)
      await deliverOnce(fg, 'q', { maxDeliveries: 1, limit: 10 })
      assert.deepEqual((await fg.readBatch('q', { maxDeliveries: 1, limit: 3 })).ids, [])
      assert.equal((await fg.queueSize('q')).dead, 3)
      assert.deepEqual((await fg.readBatch('q', { maxDeliveries: 1, limit: 10 })).ids, [])
      assert.equal((await fg.queueSize('q')).dead, 10)
      // A batch is filled past the ids that die: two fresh ids behind them are delivered.
      await fg.requeueDead('q', ids)
      await deliverOnce(fg, 'q', { maxDeliveries: 1, limit: 10 })
      await fg.enqueue('q', ['fresh-1', 'fresh-2'], { delayMs: 1 })
      await sleep(20)
      const got = await fg.readBatch('q', { maxDeliveries: 1, limit: 20 })
      assert.deepEqual(got.ids.sort(), ['fresh-1', 'fresh-2'])
      assert.equal((await fg.queueSize('q')).dead, 10)
      await fg.close()
    })

    test('bad maxDeliveries, offset and limit are refused, naming the field', async () => {
      const fg = await b.open()
      for (const v of [0, 1001, 1.5, -1]) {
        const e = await rejection(fg.readBatch('q', { maxDeliveries: v }))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
        assert.match(e.message, /maxDeliveries|max_deliveries/)
      }
      for (const [opts, field] of [[{ offset: 100_001 }, /offset/], [{ limit: 0 }, /limit/], [{ limit: 1001 }, /limit/]]) {
        const e = await rejection(fg.deadLetters('q', opts))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
        assert.match(e.message, field)
      }
      const e = await rejection(fg.requeueDead('q', ['']))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
      await fg.close()
    })
  })
}
