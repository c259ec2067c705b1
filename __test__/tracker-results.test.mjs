// Item Tracker: a `result` stored by complete and a `note` given by a claim (seed 002's
// inspection: "payload, result"), on every available backend (PostgreSQL with
// FLOWGUARD_BACKENDS=postgres). A new claim clears the result (BullMQ's `returnvalue`, which
// `Job.retry('completed')` deletes); a note belongs to the claim that gave it.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { backends, rejection } from './backends.mjs'

for (const b of backends()) {
  describe(`Item Tracker results and notes on ${b.name}`, () => {
    test('complete stores a JSON result, claim a note; every read returns them', async () => {
      const fg = await b.open()
      const c = await fg.claim('g', 'x', { note: 'page 3 of 7', timeoutMs: 60000 })
      assert.equal(c.claimed, true)
      assert.equal(c.item.note, 'page 3 of 7')
      assert.equal('result' in c.item, false)
      const result = { rows: 12, ids: ['a', 'b'], ok: true, nested: { n: null } }
      const done = await fg.complete('g', 'x', { owner: c.owner, result })
      assert.equal(done.status, 'completed')
      assert.deepEqual(done.result, result)
      assert.equal(done.note, 'page 3 of 7', 'the completion keeps the claim note')
      assert.deepEqual((await fg.getItem('g', 'x')).result, result)
      assert.equal((await fg.getItem('g', 'x')).note, 'page 3 of 7')
      const [got] = await fg.getItems('g', ['x'])
      assert.deepEqual(got.result, result)
      const list = await fg.listItems('g')
      assert.deepEqual(list.items[0].result, result)
      assert.equal(list.items[0].note, 'page 3 of 7')

      // A result of any JSON type; a plain item keeps neither key.
      const s = await fg.claim('g', 'plain')
      assert.equal('note' in s.item, false)
      const plain = await fg.complete('g', 'plain', { owner: s.owner })
      assert.equal('result' in plain, false)
      assert.equal('note' in plain, false)
      await fg.claim('g', 'str')
      assert.equal((await fg.complete('g', 'str', { result: 'done' })).result, 'done')
      assert.equal((await fg.getItem('g', 'str')).result, 'done')

      // A new claim clears the result; a claim without a note clears the note.
      const again = await fg.claim('g', 'x', { reclaimCompleted: true })
      assert.equal(again.claimed, true)
      assert.equal('result' in again.item, false)
      assert.equal('note' in again.item, false)
      const failed = await fg.fail('g', 'x', 'boom', { owner: again.owner })
      assert.equal('result' in failed, false)
      await fg.close()
    })

    test('claimMany, claimBatch and setItems take a note; setItems a result', async () => {
      const fg = await b.open()
      const many = await fg.claimMany('g', ['a', 'b'], { note: 'many' })
      assert.deepEqual(many.map((r) => r.item.note), ['many', 'many'])
      const batch = await fg.claimBatch('g', ['c', 'd'], { note: 'batch' })
      assert.deepEqual(batch.results, ['claimed', 'claimed'])
      assert.deepEqual((await fg.getItems('g', ['c', 'd'])).map((i) => i.note), ['batch', 'batch'])
      const set = await fg.setItems('g', [
        { id: 'e', status: 'in_progress', note: 'set' },
        { id: 'c', status: 'completed', owner: batch.owner, result: [1, 2, 3] },
      ])
      assert.equal(set[0].item.note, 'set')
      assert.deepEqual(set[1].item.result, [1, 2, 3])
      assert.equal(set[1].item.note, 'batch')
      assert.deepEqual((await fg.getItem('g', 'c')).result, [1, 2, 3])
      await fg.close()
    })

    // Found by the model test over HTTP: on Redis the one-claim fast path (it runs once a group's
    // bookkeeping is settled, so after a few calls) took a claim with an empty note (':') for one
    // without a note and stored none.
    test('an empty note is a note, also in a group that has seen calls before', async () => {
      const fg = await b.open()
      for (let i = 0; i < 5; i++) {
        const w = await fg.claim('g', `w${i}`)
        await fg.complete('g', `w${i}`, { owner: w.owner })
      }
      for (const id of ['e1', 'e2', 'e3']) {
        const c = await fg.claim('g', id, { note: '' })
        assert.equal(c.item.note, '', `${id}: the claim's reply`)
        assert.equal((await fg.getItem('g', id)).note, '', `${id}: read back`)
      }
      await fg.close()
    })

    test('a result past 4 KiB of JSON and a note past 256 bytes are refused, nothing written', async () => {
      const fg = await b.open()
      const c = await fg.claim('g', 'x')
      const big = { text: 'x'.repeat(4096) }
      const e = await rejection(fg.complete('g', 'x', { owner: c.owner, result: big }))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
      assert.equal(e.field, 'options.result')
      assert.match(e.message, /4096 bytes/)
      assert.equal((await fg.getItem('g', 'x')).status, 'in_progress', 'nothing written')
      const fn = await rejection(fg.complete('g', 'x', { result: { f: () => 1 } }))
      assert.equal(fn.field, 'options.result')
      const n = await rejection(fg.claim('g', 'y', { note: 'n'.repeat(257) }))
      assert.equal(n.code, 'ERR_INVALID_ARGUMENT')
      assert.equal(n.field, 'options.note')
      assert.match(n.message, /256 bytes/)
      assert.equal((await fg.getItem('g', 'y')).status, 'none', 'nothing written')
      const m = await rejection(fg.claimBatch('g', ['z'], { note: 'n'.repeat(257) }))
      assert.equal(m.field, 'options.note')
      const f = await rejection(fg.fail('g', 'x', 'boom', { result: 1 }))
      assert.equal(f.field, 'options.result', 'a result is for complete, not fail')
      assert.equal((await fg.getItem('g', 'x')).status, 'in_progress')
      const r = await rejection(fg.setItems('g', [{ id: 'w', status: 'completed', result: big }]))
      assert.equal(r.field, 'requests[0].result')
      assert.equal((await fg.getItem('g', 'w')).status, 'none')
      await fg.close()
    })
  })
}
