// Dedup Queue results as the caller sees them: built in JavaScript (lib/queue-results.js) from the
// native side's numbers, with exactly the keys, values and order the typed objects have, on every
// available backend.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { backends, rejection } from './backends.mjs'

const KEYS = {
  enqueue: ['added', 'duplicates', 'debounced', 'claimed', 'dead', 'items'],
  enqueued: ['id', 'shard', 'outcome', 'dueAt'],
  batch: ['owner', 'visibleUntil', 'ids', 'items'],
  item: ['id', 'shard', 'dueAt'],
  settle: ['done', 'refused', 'items'],
}

for (const b of backends()) {
  describe(`queue results on ${b.name}`, () => {
    test('enqueue: every outcome, its counts, ids in the order given', async () => {
      const fg = await b.open()
      await fg.enqueue('q', ['held'])
      const read = await fg.readBatch('q')
      assert.deepEqual(read.ids, ['held'])
      await fg.enqueue('q', ['waiting'])
      const r = await fg.enqueue('q', ['new', 'waiting', 'held', 'new'], { shards: 1 })
      assert.deepEqual(Object.keys(r), KEYS.enqueue)
      for (const item of r.items) assert.deepEqual(Object.keys(item), KEYS.enqueued)
      assert.deepEqual(r.items.map((i) => [i.id, i.shard, i.outcome]), [
        ['new', 0, 'added'],
        ['waiting', 0, 'duplicate'],
        ['held', 0, 'claimed'],
        ['new', 0, 'duplicate'],
      ])
      assert.deepEqual([r.added, r.duplicates, r.debounced, r.claimed, r.dead], [1, 2, 0, 1, 0])
      for (const item of r.items) assert.ok(Number.isInteger(item.dueAt) && item.dueAt > 1.7e12, `dueAt ${item.dueAt}`)
      const d = await fg.enqueue('q', 'waiting', { debounce: true, delayMs: 60_000 })
      assert.deepEqual(d.items.map((i) => i.outcome), ['debounced'])
      assert.deepEqual([d.added, d.duplicates, d.debounced, d.claimed, d.dead], [0, 0, 1, 0, 0])
      assert.ok(d.items[0].dueAt >= r.items[1].dueAt + 59_000)
    })

    test('enqueue: the ids of the result are the ones given, even when the caller changes the array at once', async () => {
      const fg = await b.open()
      const ids = ['a', 'b', 'c']
      const p = fg.enqueue('q', ids)
      ids[0] = 'changed'
      ids.length = 1
      const r = await p
      assert.deepEqual(r.items.map((i) => i.id), ['a', 'b', 'c'])
      assert.equal(r.added, 3)
      const empty = await fg.enqueue('q', [])
      assert.deepEqual(empty, { added: 0, duplicates: 0, debounced: 0, claimed: 0, dead: 0, items: [] })
    })

    test('readBatch: ids and items agree, oldest first, with shards', async () => {
      const fg = await b.open()
      await fg.enqueue('q', ['x', 'y', 'z'], { shards: 3 })
      const batch = await fg.readBatch('q', { shards: 3, limit: 10 })
      assert.deepEqual(Object.keys(batch), KEYS.batch)
      assert.equal(batch.items.length, 3)
      assert.deepEqual(batch.items.map((i) => i.id), batch.ids)
      for (const item of batch.items) {
        assert.deepEqual(Object.keys(item), KEYS.item)
        assert.equal(item.shard, (await fg.enqueue('q', item.id, { shards: 3 })).items[0].shard)
        assert.ok(item.dueAt <= batch.visibleUntil)
      }
      const none = await fg.readBatch('q', { shards: 3 })
      assert.deepEqual({ ids: none.ids, items: none.items, visibleUntil: none.visibleUntil }, { ids: [], items: [], visibleUntil: 0 })
    })

    test('ack and release: done, requeued, not_claimed, not_owner, with due times only when waiting again', async () => {
      const fg = await b.open()
      await fg.enqueue('q', ['a', 'b', 'c'])
      const batch = await fg.readBatch('q', { limit: 10 })
      await fg.enqueue('q', 'b')
      const acked = await fg.ack('q', batch.owner, ['a', 'b', 'nope'])
      assert.deepEqual(Object.keys(acked), KEYS.settle)
      assert.deepEqual(acked.items.map((i) => [i.id, i.ok, i.requeued, i.reason]), [
        ['a', true, false, undefined],
        ['b', true, true, undefined],
        ['nope', false, false, 'not_claimed'],
      ])
      assert.deepEqual(Object.keys(acked.items[0]), ['id', 'shard', 'ok', 'requeued'])
      assert.deepEqual(Object.keys(acked.items[1]), ['id', 'shard', 'ok', 'requeued', 'dueAt'])
      assert.deepEqual(Object.keys(acked.items[2]), ['id', 'shard', 'ok', 'requeued', 'reason'])
      assert.deepEqual([acked.done, acked.refused], [2, 1])
      const other = await fg.ack('q', 'f'.repeat(32), 'c')
      assert.deepEqual(other.items.map((i) => [i.id, i.ok, i.reason]), [['c', false, 'not_owner']])
      const released = await fg.release('q', batch.owner, 'c', { delayMs: 60_000 })
      assert.equal(released.done, 1)
      assert.ok(released.items[0].dueAt > Date.now() + 50_000, `dueAt ${released.items[0].dueAt}`)
    })

    test('bad input is a coded rejection, never a throw', async () => {
      const fg = await b.open()
      for (const call of [
        () => fg.enqueue('q', [1]),
        () => fg.enqueue('', 'a'),
        () => fg.readBatch('q', { limit: 0 }),
        () => fg.ack('q', 'owner', null),
        () => fg.release('q', 'owner', 'a', { delayMs: -1 }),
      ]) {
        let p
        assert.doesNotThrow(() => { p = call() })
        const e = await rejection(p)
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
      }
    })
  })
}
