// Dedup Queue: a debounce capped with maxDelayMs (Trigger.dev's maxDelay), on every available
// backend. Times are read from the results (dueAt) and from peek, never hoped for.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { backends, sleep, rejection } from './backends.mjs'

const CAP = 400
const capped = { debounce: true, delayMs: 60_000, maxDelayMs: CAP }

/** Enqueues `ids` with `opts` every 40 ms until `until` (ms since the epoch) has passed; every
 * result is returned. */
async function hammer(fg, queue, ids, opts, until) {
  const out = []
  while (Date.now() <= until) {
    out.push(await fg.enqueue(queue, ids, opts))
    await sleep(40)
  }
  return out
}

/** Ids parked in every shard of queue 'q' (due in an hour), so its shards hold ids. */
async function parked(fg, shards) {
  const ids = Array.from({ length: 40 }, (_, i) => `parked-${i}`)
  await fg.enqueue('q', ids, { shards, delayMs: 3_600_000 })
  const size = await fg.queueSize('q', { shards })
  assert.ok(size.shards.every((s) => s.waiting > 0), 'every shard holds ids')
}

/** Waits until `peek` shows `id` due (by the backend's clock), at most 5 s. */
async function dueByPeek(fg, queue, id, opts = {}) {
  for (let i = 0; i < 250; i++) {
    const p = (await fg.peek(queue, { ...opts, limit: 100 })).find((w) => w.id === id)
    if (p?.due) return p
    await sleep(20)
  }
  assert.fail(`${id} never became due`)
}

for (const b of backends()) {
  describe(`queue maxDelayMs on ${b.name}`, () => {
    for (const [what, ids, shards, warm] of [
      ['one id (the webhook step) onto a shard holding ids', ['x'], 1, true],
      ['one id onto an empty shard', ['x'], 1, false],
      ['a batch over shards holding ids', ['a', 'b', 'c', 'd', 'e'], 4, true],
    ]) {
      test(`${what} re-enqueued with debounce is due at its first enqueue + maxDelayMs, and read then`, async () => {
        const fg = await b.open()
        const opts = { ...capped, shards }
        // Shards holding ids (not due) or not: an enqueue onto an empty shard takes another path.
        if (warm) await parked(fg, shards)
        const before = Date.now()
        const first = await fg.enqueue('q', ids, opts)
        const after = Date.now()
        assert.deepEqual(first.items.map((i) => i.outcome), ids.map(() => 'added'))
        const due = first.items[0].dueAt
        // Due at the first enqueue + the cap, not + delayMs (the backend's clock: a few ms apart).
        assert.ok(due >= before + CAP - 50 && due <= after + CAP + 50, `due ${due - before} ms after`)
        for (const it of first.items) assert.ok(Math.abs(it.dueAt - due) <= 50, `${it.id} ${it.dueAt - due}`)
        const byId = new Map(first.items.map((i) => [i.id, i.dueAt]))
        // Enqueued again every 40 ms until past the cap: debounced, its due time never moves.
        const again = await hammer(fg, 'q', ids, opts, due + 100)
        assert.ok(again.length >= 5, `${again.length} enqueues`)
        for (const r of again) {
          assert.deepEqual(r.items.map((i) => [i.id, i.outcome, i.dueAt]), ids.map((id) => [id, 'debounced', byId.get(id)]))
        }
        const peek = (await fg.peek('q', { shards, limit: 100 })).filter((p) => !p.id.startsWith('parked-'))
        assert.deepEqual(peek.map((p) => [p.id, p.dueAt, p.due]).sort(), ids.map((id) => [id, byId.get(id), true]).sort())
        const batch = await fg.readBatch('q', { shards, limit: 100 })
        assert.deepEqual([...batch.ids].sort(), [...ids].sort())
        for (const it of batch.items) assert.equal(it.dueAt, byId.get(it.id))
      })
    }

    test('without maxDelayMs the same debounce keeps moving the due time (the starvation it caps)', async () => {
      const fg = await b.open()
      const first = await fg.enqueue('q', 'y', { debounce: true, delayMs: 60_000 })
      await sleep(20)
      const again = await fg.enqueue('q', 'y', { debounce: true, delayMs: 60_000 })
      assert.ok(again.items[0].dueAt > first.items[0].dueAt)
    })

    test('a read starts a new count; an enqueue while claimed keeps its first time through the ack', async () => {
      const fg = await b.open()
      await parked(fg, 1)
      const first = await fg.enqueue('q', 'x', capped)
      const t0 = first.items[0].dueAt - CAP
      await dueByPeek(fg, 'q', 'x')
      const batch = await fg.readBatch('q', { visibilityTimeoutMs: 60_000 })
      assert.deepEqual(batch.ids, ['x'])
      // Claimed: enqueued again with the cap, kept for after the claim, due at its own first + cap.
      const c1 = await fg.enqueue('q', 'x', capped)
      assert.equal(c1.items[0].outcome, 'claimed')
      const dueAgain = c1.items[0].dueAt
      assert.ok(dueAgain > t0 + CAP, 'counted from the enqueue while claimed, not the first one before the read')
      await sleep(50)
      const c2 = await fg.enqueue('q', 'x', capped)
      assert.deepEqual([c2.items[0].outcome, c2.items[0].dueAt], ['claimed', dueAgain])
      const acked = await fg.ack('q', batch.owner, 'x')
      assert.deepEqual([acked.items[0].requeued, acked.items[0].dueAt], [true, dueAgain])
      // Waiting again: the first time of the enqueue made while claimed still bounds the debounce.
      const w = await fg.enqueue('q', 'x', capped)
      assert.deepEqual([w.items[0].outcome, w.items[0].dueAt], ['debounced', dueAgain])
    })

    test('a release puts the id back without a first time: the next capped enqueue starts the count', async () => {
      const fg = await b.open()
      await parked(fg, 1)
      const first = await fg.enqueue('q', 'x', capped)
      await dueByPeek(fg, 'q', 'x')
      const batch = await fg.readBatch('q')
      assert.deepEqual(batch.ids, ['x'])
      const released = await fg.release('q', batch.owner, 'x')
      assert.ok(released.items[0].ok)
      const before = Date.now()
      const r = await fg.enqueue('q', 'x', capped)
      assert.equal(r.items[0].outcome, 'debounced')
      // Not the old first enqueue's cap (already passed): this enqueue's time + the cap.
      assert.ok(r.items[0].dueAt > first.items[0].dueAt + 50, `${r.items[0].dueAt - first.items[0].dueAt}`)
      assert.ok(Math.abs(r.items[0].dueAt - (before + CAP)) <= 100, `${r.items[0].dueAt - before}`)
    })

    test('maxDelayMs shorter than delayMs makes a new id due at now + maxDelayMs; a longer one changes nothing', async () => {
      const fg = await b.open()
      const short = await fg.enqueue('q', 's', { debounce: true, delayMs: 60_000, maxDelayMs: 1000 })
      const long = await fg.enqueue('q', 'l', { debounce: true, delayMs: 1000, maxDelayMs: 60_000 })
      const now = Date.now()
      assert.ok(Math.abs(short.items[0].dueAt - (now + 1000)) <= 100)
      assert.ok(Math.abs(long.items[0].dueAt - (now + 1000)) <= 100)
    })

    test('bad maxDelayMs values are coded errors naming the field, and nothing is written', async () => {
      const fg = await b.open()
      const cases = [
        [{ maxDelayMs: 1000 }, /only with debounce/],
        [{ debounce: false, maxDelayMs: 1000 }, /only with debounce/],
        [{ debounce: true, maxDelayMs: 0 }, /greater than 0/],
        [{ debounce: true, maxDelayMs: -1 }, /greater than 0/],
        [{ debounce: true, maxDelayMs: NaN }, /finite/],
        [{ debounce: true, maxDelayMs: Infinity }, /finite/],
        [{ debounce: true, maxDelayMs: 366 * 86_400_000 }, /365 days/],
        [{ debounce: true, maxDelayMs: '1000' }, /number/],
      ]
      for (const [opts, why] of cases) {
        const e = await rejection(fg.enqueue('q', ['a', 'b'], opts))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
        assert.match(e.field, /^(options\.)?maxDelayMs$/, `${JSON.stringify(opts)}: ${e.message}`)
        assert.match(e.message, why, JSON.stringify(opts))
      }
      assert.equal((await fg.queueSize('q')).waiting, 0)
    })
  })
}
