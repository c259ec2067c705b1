// Dedup Queue: the semantic suite, on every available backend.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { backends, Flowguard, sleep, rejection } from './backends.mjs'

const require = createRequire(import.meta.url)
const fnv1a = require('fnv1a')

const ASCII_IDS = ['product-id-1', 'product-id-2', 'a', 'foobar', 'SKU-000123', 'x'.repeat(300), '0', ' ', '{tag}:1']
const NON_ASCII_IDS = ['produkt-ü', 'café', '日本語の商品', 'emoji 🚀 rocket', '😀', 'Ωμέγα', 'mixed-ü-🚀-日', '\u0000nul', 'tab\tsep']

test('fnv1a shards equal the npm fnv1a package for ASCII and non-ASCII ids', () => {
  assert.equal(Flowguard.shardOf('product-id-1', 4), 0)
  for (const id of [...ASCII_IDS, ...NON_ASCII_IDS]) {
    for (const n of [1, 2, 3, 4, 7, 16, 100, 1024]) {
      assert.equal(Flowguard.shardOf(id, n), fnv1a(id) % n, `id ${JSON.stringify(id)} shards ${n}`)
    }
  }
  for (const bad of [0, -1, 1.5, 1025, NaN]) {
    assert.throws(() => Flowguard.shardOf('a', bad), (e) => e.code === 'ERR_INVALID_ARGUMENT')
  }
})

for (const b of backends()) {
  describe(`queue on ${b.name}`, () => {
    test('enqueue places ids in the shard the npm fnv1a package gives', async () => {
      const fg = await b.open()
      const ids = [...ASCII_IDS, ...NON_ASCII_IDS]
      const r = await fg.enqueue('products', ids, { shards: 7 })
      assert.equal(r.added, ids.length)
      assert.deepEqual(
        r.items.map((i) => [i.id, i.shard]),
        ids.map((id) => [id, fnv1a(id) % 7]),
      )
      const size = await fg.queueSize('products', { shards: 7 })
      assert.equal(size.waiting, ids.length)
      for (const s of size.shards) {
        assert.equal(s.waiting, ids.filter((id) => fnv1a(id) % 7 === s.shard).length, `shard ${s.shard}`)
      }
      const batch = await fg.readBatch('products', { shards: 7, limit: 100 })
      assert.deepEqual(new Set(batch.ids), new Set(ids))
      for (const it of batch.items) assert.equal(it.shard, fnv1a(it.id) % 7)
    })

    test('duplicates are not enqueued and keep their first due time', async () => {
      const fg = await b.open()
      const first = await fg.enqueue('q', ['a', 'b'])
      assert.equal(first.added, 2)
      await sleep(20)
      const again = await fg.enqueue('q', ['a', 'b', 'c', 'c'])
      assert.deepEqual(again.items.map((i) => i.outcome), ['duplicate', 'duplicate', 'added', 'duplicate'])
      assert.equal(again.items[0].dueAt, first.items[0].dueAt)
      assert.equal(again.added, 1)
      assert.equal(again.duplicates, 3)
      const size = await fg.queueSize('q')
      assert.equal(size.waiting, 3)
      const batch = await fg.readBatch('q', { limit: 10 })
      assert.deepEqual(batch.ids.sort(), ['a', 'b', 'c'])
    })

    test('reads oldest first and only what is due', async () => {
      const fg = await b.open()
      await fg.enqueue('q', 'first')
      await sleep(15)
      await fg.enqueue('q', ['second'])
      await fg.enqueue('q', ['later'], { delayMs: 60000 })
      const batch = await fg.readBatch('q', { limit: 10 })
      assert.deepEqual(batch.ids, ['first', 'second'])
      const peek = await fg.peek('q')
      assert.deepEqual(peek.map((p) => [p.id, p.due]), [['later', false]])
    })

    test('debounce moves a waiting id\'s due time to the last enqueue plus the delay', async () => {
      const fg = await b.open()
      // Later: due now, then debounced 60 s ahead: not readable.
      const a1 = await fg.enqueue('q', ['a'])
      assert.equal((await fg.peek('q'))[0].due, true)
      const a2 = await fg.enqueue('q', ['a'], { debounce: true, delayMs: 60000 })
      assert.equal(a2.items[0].outcome, 'debounced')
      assert.ok(a2.items[0].dueAt >= a1.items[0].dueAt + 60000)
      assert.deepEqual((await fg.readBatch('q')).ids, [])
      const [p] = await fg.peek('q')
      assert.equal(p.dueAt, a2.items[0].dueAt)
      assert.equal(p.due, false)
      // Without debounce the due time stays where it is.
      const a3 = await fg.enqueue('q', ['a'], { delayMs: 0 })
      assert.equal(a3.items[0].outcome, 'duplicate')
      assert.equal(a3.items[0].dueAt, a2.items[0].dueAt)
      assert.deepEqual((await fg.readBatch('q')).ids, [])
      // Earlier: debounced with no delay, it is due now.
      const a4 = await fg.enqueue('q', ['a'], { debounce: true })
      assert.equal(a4.items[0].outcome, 'debounced')
      assert.ok(a4.items[0].dueAt < a2.items[0].dueAt)
      assert.deepEqual((await fg.readBatch('q')).ids, ['a'])
      assert.equal((await fg.queueSize('q')).waiting, 0)
    })

    test('concurrent readers get disjoint batches', async () => {
      const fg = await b.open()
      const ids = Array.from({ length: 200 }, (_, i) => `item-${i}`)
      await fg.enqueue('work', ids, { shards: 4 })
      const other = await b.open({ prefix: fg.prefix })
      const batches = await Promise.all(
        Array.from({ length: 5 }, (_, i) => (i % 2 ? other : fg).readBatch('work', { shards: 4, limit: 60 })),
      )
      const all = batches.flatMap((x) => x.ids)
      assert.equal(all.length, 200, 'every id was delivered')
      assert.equal(new Set(all).size, 200, 'no id was delivered twice')
      assert.equal(new Set(batches.map((x) => x.owner)).size, 5)
      const size = await fg.queueSize('work', { shards: 4 })
      assert.equal(size.claimed, 200)
      assert.equal(size.waiting, 0)
      // Acking with one read's owner token acks only that read's ids.
      const r = await fg.ack('work', batches[0].owner, all, { shards: 4 })
      assert.equal(r.done, batches[0].ids.length)
      assert.equal(r.refused, 200 - batches[0].ids.length)
      const foreign = r.items.find((i) => !batches[0].ids.includes(i.id))
      assert.equal(foreign.reason, 'not_owner')
    })

    test('a read spreads its limit over the shards and fills up from the others', async () => {
      const fg = await b.open()
      // Six ids on shard 0 of 4, two elsewhere.
      const ids = []
      for (let i = 0; ids.filter((x) => fnv1a(x) % 4 === 0).length < 6; i++) {
        if (fnv1a(`s${i}`) % 4 === 0) ids.push(`s${i}`)
      }
      const others = ['x1', 'x2', 'x3', 'x4', 'x5'].filter((x) => fnv1a(x) % 4 !== 0).slice(0, 2)
      await fg.enqueue('q', [...ids, ...others], { shards: 4 })
      const batch = await fg.readBatch('q', { shards: 4, limit: 8 })
      assert.equal(batch.ids.length, 8)
      const one = await fg.readBatch('q', { shards: 4, shard: 0 })
      assert.deepEqual(one.ids, [])
      // A limit below the shard count still finds the one due id, whichever shard holds it.
      for (const id of ['solo-1', 'solo-2', 'solo-3', 'solo-4', 'solo-5', 'solo-6', 'solo-7', 'solo-8']) {
        await fg.enqueue('solo', id, { shards: 16 })
        const b1 = await fg.readBatch('solo', { shards: 16, limit: 1 })
        assert.deepEqual(b1.ids, [id])
        assert.equal((await fg.ack('solo', b1.owner, b1.ids, { shards: 16 })).done, 1)
      }
    })

    test('a reader that never acks has its ids redelivered after the visibility timeout', async () => {
      const fg = await b.open()
      await fg.enqueue('q', ['a', 'b', 'c'])
      const dead = await fg.readBatch('q', { visibilityTimeoutMs: 1000 })
      assert.deepEqual(dead.ids.sort(), ['a', 'b', 'c'])
      assert.ok(dead.visibleUntil > 0)
      assert.deepEqual((await fg.readBatch('q')).ids, [], 'held ids are not delivered twice at once')
      await sleep(1300)
      const next = await fg.readBatch('q', { visibilityTimeoutMs: 60000 })
      assert.deepEqual(next.ids.sort(), ['a', 'b', 'c'])
      // The dead reader's late ack is refused; the new holder's ack works.
      const late = await fg.ack('q', dead.owner, ['a'])
      assert.equal(late.items[0].ok, false)
      assert.equal(late.items[0].reason, 'not_owner')
      assert.equal((await fg.ack('q', next.owner, next.ids)).done, 3)
      const size = await fg.queueSize('q')
      assert.deepEqual([size.waiting, size.claimed, size.again], [0, 0, 0])
    })

    test('an ack after the visibility timeout is refused and the id comes back', async () => {
      const fg = await b.open()
      await fg.enqueue('q', ['a'])
      const batch = await fg.readBatch('q', { visibilityTimeoutMs: 200 })
      await sleep(400)
      const r = await fg.ack('q', batch.owner, ['a'])
      assert.equal(r.items[0].ok, false)
      assert.equal(r.items[0].reason, 'expired')
      assert.deepEqual((await fg.readBatch('q')).ids, ['a'])
    })

    test('an id enqueued again while claimed is delivered again after the ack, never twice at once', async () => {
      const fg = await b.open()
      await fg.enqueue('q', ['p1', 'p2'])
      const batch = await fg.readBatch('q')
      assert.deepEqual(batch.ids.sort(), ['p1', 'p2'])
      const during = await fg.enqueue('q', ['p1'])
      assert.equal(during.items[0].outcome, 'claimed')
      assert.equal(during.claimed, 1)
      assert.equal((await fg.enqueue('q', ['p1'])).items[0].outcome, 'claimed')
      const size = await fg.queueSize('q')
      assert.deepEqual([size.waiting, size.claimed, size.again], [0, 2, 1])
      assert.deepEqual((await fg.readBatch('q')).ids, [], 'p1 is not handed to a second reader while held')
      const ack = await fg.ack('q', batch.owner, batch.ids)
      assert.equal(ack.done, 2)
      const p1 = ack.items.find((i) => i.id === 'p1')
      assert.equal(p1.requeued, true)
      assert.equal(typeof p1.dueAt, 'number')
      assert.equal(ack.items.find((i) => i.id === 'p2').requeued, false)
      const again = await fg.readBatch('q')
      assert.deepEqual(again.ids, ['p1'])
      assert.equal((await fg.ack('q', again.owner, 'p1')).done, 1)
      assert.deepEqual((await fg.readBatch('q')).ids, [])
      const end = await fg.queueSize('q')
      assert.deepEqual([end.waiting, end.claimed, end.again], [0, 0, 0])
    })

    test('one id per enqueue (the webhook step) decides as a batch does: waiting, claimed, claim expired, debounced', async () => {
      const fg = await b.open()
      // The shard holds ids, so a one-id enqueue takes its own short path on Redis.
      await fg.enqueue('one', ['hold', 'w', 'c', 'x', 'xd', 'cd'])
      assert.deepEqual((await fg.enqueue('one', 'n')).items.map((i) => i.outcome), ['added'])
      const w = await fg.enqueue('one', 'w')
      assert.equal(w.items[0].outcome, 'duplicate')
      const wd = await fg.enqueue('one', 'w', { debounce: true, delayMs: 60_000 })
      assert.equal(wd.items[0].outcome, 'debounced')
      assert.ok(wd.items[0].dueAt > w.items[0].dueAt + 50_000)
      // Claims: c and cd for a minute, x and xd for 50 ms.
      const long = await fg.readBatch('one', { limit: 100, visibilityTimeoutMs: 60_000 })
      assert.deepEqual(long.ids.sort(), ['c', 'cd', 'hold', 'n', 'x', 'xd'])
      assert.equal((await fg.release('one', long.owner, ['x', 'xd'])).done, 2)
      const short = await fg.readBatch('one', { limit: 100, visibilityTimeoutMs: 50 })
      assert.deepEqual(short.ids.sort(), ['x', 'xd'])
      const c1 = await fg.enqueue('one', 'c')
      assert.equal(c1.items[0].outcome, 'claimed')
      assert.equal((await fg.enqueue('one', 'c')).items[0].dueAt, c1.items[0].dueAt, 'a second enqueue keeps the first due time')
      const cd = await fg.enqueue('one', 'cd', { debounce: true, delayMs: 30_000 })
      assert.equal(cd.items[0].outcome, 'claimed')
      const cd2 = await fg.enqueue('one', 'cd', { debounce: true, delayMs: 60_000 })
      assert.ok(cd2.items[0].dueAt > cd.items[0].dueAt + 20_000, 'debounce moves the time it is due again')
      await sleep(120)
      // Expired claims go back to waiting as the enqueue judges them.
      const x = await fg.enqueue('one', 'x')
      assert.equal(x.items[0].outcome, 'duplicate')
      assert.ok(x.items[0].dueAt <= Date.now() + 1000)
      const xd = await fg.enqueue('one', 'xd', { debounce: true, delayMs: 60_000 })
      assert.equal(xd.items[0].outcome, 'debounced')
      const size = await fg.queueSize('one')
      assert.deepEqual([size.claimed, size.again], [4, 2])
      assert.equal((await fg.ack('one', short.owner, ['x'])).items[0].reason, 'not_claimed')
      const next = await fg.readBatch('one', { limit: 100 })
      assert.deepEqual(next.ids, ['x'], 'x is due again, xd debounced a minute, the others claimed')
    })

    test('release makes ids due again, after an optional delay; owner-checked', async () => {
      const fg = await b.open()
      await fg.enqueue('q', ['a', 'b'])
      const batch = await fg.readBatch('q')
      const wrong = await fg.release('q', '0'.repeat(32), ['a'])
      assert.equal(wrong.items[0].reason, 'not_owner')
      const r = await fg.release('q', batch.owner, ['a', 'b', 'zzz'], { delayMs: 60000 })
      assert.equal(r.done, 2)
      assert.equal(r.items[2].reason, 'not_claimed')
      assert.ok(r.items[0].dueAt > batch.items[0].dueAt + 59000)
      assert.deepEqual((await fg.readBatch('q')).ids, [])
      const peek = await fg.peek('q')
      assert.deepEqual(peek.map((p) => p.id).sort(), ['a', 'b'])
      // Released again without delay after a new claim: due now.
      await fg.enqueue('q', ['c'])
      const c = await fg.readBatch('q')
      assert.deepEqual(c.ids, ['c'])
      await fg.release('q', c.owner, 'c')
      assert.deepEqual((await fg.readBatch('q')).ids, ['c'])
      // A second ack of the same id is refused.
      const twice = await fg.ack('q', batch.owner, ['a'])
      assert.equal(twice.items[0].reason, 'not_claimed')
    })

    test('every id a batch adds carries the batch due time, before and after a duplicate', async () => {
      const fg = await b.open()
      const fresh = await fg.enqueue('q', ['n1', 'n2', 'n3'], { delayMs: 30_000 })
      assert.deepEqual(fresh.items.map((i) => [i.id, i.outcome]), [['n1', 'added'], ['n2', 'added'], ['n3', 'added']])
      assert.equal(new Set(fresh.items.map((i) => i.dueAt)).size, 1)
      assert.ok(fresh.items[0].dueAt > Date.now() + 20_000, `due ${fresh.items[0].dueAt}`)
      const first = await fg.enqueue('q', ['x'], { delayMs: 60_000 })
      const r = await fg.enqueue('q', ['a', 'b', 'x', 'c'], { delayMs: 30_000 })
      assert.deepEqual(r.items.map((i) => [i.id, i.outcome]), [['a', 'added'], ['b', 'added'], ['x', 'duplicate'], ['c', 'added']])
      assert.equal(r.items[2].dueAt, first.items[0].dueAt)
      const due = r.items[0].dueAt
      assert.deepEqual([r.items[1].dueAt, r.items[3].dueAt], [due, due])
      assert.ok(due > Date.now() + 20_000 && due < first.items[0].dueAt, `due ${due}, the duplicate's ${first.items[0].dueAt}`)
      assert.deepEqual([r.added, r.duplicates], [3, 1])
    })

    test('an id repeated within one call is judged as by calls one after another', async () => {
      const fg = await b.open()
      const r = await fg.enqueue('q', ['a', 'a', 'b', 'a'])
      assert.deepEqual(r.items.map((i) => i.outcome), ['added', 'duplicate', 'added', 'duplicate'])
      const d = await fg.enqueue('q', ['c', 'c', 'a'], { debounce: true, delayMs: 60_000 })
      assert.deepEqual(d.items.map((i) => i.outcome), ['added', 'debounced', 'debounced'])
      const batch = await fg.readBatch('q')
      assert.deepEqual(batch.ids, ['b'])
      const again = await fg.enqueue('q', ['b', 'b'])
      assert.deepEqual(again.items.map((i) => i.outcome), ['claimed', 'claimed'])
      assert.equal(again.items[1].dueAt, again.items[0].dueAt)
      const ack = await fg.ack('q', batch.owner, ['b', 'b', 'zz'])
      assert.deepEqual(ack.items.map((i) => [i.ok, i.reason ?? null, i.requeued]), [[true, null, true], [false, 'not_claimed', false], [false, 'not_claimed', false]])
      const next = await fg.readBatch('q')
      assert.deepEqual(next.ids, ['b'])
      const rel = await fg.release('q', next.owner, ['b', 'b'], { delayMs: 60_000 })
      assert.deepEqual(rel.items.map((i) => [i.ok, i.reason ?? null]), [[true, null], [false, 'not_claimed']])
      assert.deepEqual((await fg.peek('q')).map((p) => p.id).sort(), ['a', 'b', 'c'])
    })

    test('calls of more than 1,000 ids, one repeated in another thousand', async () => {
      const fg = await b.open()
      const ids = Array.from({ length: 2500 }, (_, i) => `big-${i}`)
      const r = await fg.enqueue('q', [...ids, 'big-3'])
      assert.deepEqual([r.added, r.duplicates], [2500, 1])
      const batch = await fg.readBatch('q', { limit: 2500 })
      assert.equal(batch.ids.length, 2500)
      const ack = await fg.ack('q', batch.owner, [...batch.ids, batch.ids[0]])
      assert.deepEqual([ack.done, ack.refused, ack.items[2500].reason], [2500, 1, 'not_claimed'])
      const size = await fg.queueSize('q')
      assert.deepEqual([size.waiting, size.claimed], [0, 0])
    })

    test('a different shard count for the same queue is refused', async () => {
      const fg = await b.open()
      assert.equal(fnv1a('a') % 2, 0)
      await fg.enqueue('q', ['a'], { shards: 1 })
      const e = await rejection(fg.enqueue('q', ['a'], { shards: 2 }))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
      assert.match(e.message, /shards/)
      // Once the queue is empty the shard count can change.
      const batch = await fg.readBatch('q', { shards: 1 })
      await fg.ack('q', batch.owner, batch.ids, { shards: 1 })
      assert.equal((await fg.enqueue('q', ['a'], { shards: 2 })).added, 1)
    })

    test('bad inputs are coded errors and nothing is written', async () => {
      const fg = await b.open()
      const bad = async (p, field) => {
        const e = await rejection(p)
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
        if (field) assert.match(e.message, new RegExp(field))
      }
      for (const shards of [0, -1, 1.5, 1025, 1e9, NaN, '4']) {
        await bad(fg.enqueue('q', ['a', 'b'], { shards }), 'shards')
        await bad(fg.readBatch('q', { shards }), 'shards')
        await bad(fg.queueSize('q', { shards }), 'shards')
      }
      for (const limit of [0, -1, -100, 1.5, 10001, Infinity]) {
        await bad(fg.readBatch('q', { limit }), 'limit')
        await bad(fg.peek('q', { limit }), 'limit')
      }
      await bad(fg.readBatch('q', { shards: 4, shard: 4 }), 'shard')
      await bad(fg.readBatch('q', { visibilityTimeoutMs: 0 }), 'visibilityTimeoutMs')
      await bad(fg.enqueue('q', ['a', ''], { shards: 4 }), 'ids\\[1\\]')
      await bad(fg.enqueue('q', ['a', 'x'.repeat(1025)]), 'ids\\[1\\]')
      await bad(fg.enqueue('q', ['a', 5]), 'ids\\[1\\]')
      await bad(fg.enqueue('q', 42), 'ids')
      await bad(fg.enqueue('', ['a']), 'queue')
      await bad(fg.enqueue('q', ['a'], { delayMs: -5 }), 'delayMs')
      await bad(fg.ack('q', 'not-a-token', ['a']), 'owner')
      await bad(fg.release('q', '0'.repeat(32), ['a'], { delayMs: -1 }), 'delayMs')
      const size = await fg.queueSize('q', { shards: 4 })
      assert.deepEqual([size.waiting, size.claimed], [0, 0])
      assert.equal((await fg.queueSize('q')).waiting, 0)
      assert.deepEqual(await fg.peek('q'), [])
    })
  })
}
