// Item Tracker: maxAttempts and dead items (BullMQ's `attempts` and `retryJobs`), on every
// available backend (PostgreSQL with FLOWGUARD_BACKENDS=postgres).
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { backends, rejection } from './backends.mjs'

for (const b of backends()) {
  describe(`Item Tracker dead items on ${b.name}`, () => {
    test('a failure at maxAttempts makes the item dead: kept, counted, listed, never claimed until revived', async () => {
      const fg = await b.open()
      const first = await fg.claim('g', 'x', { maxAttempts: 2, timeoutMs: 60000 })
      assert.equal(first.item.maxAttempts, 2)
      assert.equal((await fg.fail('g', 'x', 'HTTP 500', { owner: first.owner })).status, 'failed')
      const second = await fg.claim('g', 'x', { maxAttempts: 2 })
      assert.equal(second.claimed, true)
      const dead = await fg.fail('g', 'x', 'HTTP 500 again', { owner: second.owner })
      assert.equal(dead.status, 'dead')
      assert.equal(dead.attempts, 2)
      assert.equal(dead.lastError, 'HTTP 500 again')
      assert.deepEqual(dead.timeline.map((t) => t.status), ['in_progress', 'failed', 'in_progress', 'dead'])
      assert.equal(dead.timeline[3].error, 'HTTP 500 again')

      // Every way of claiming leaves it alone, with the outcome `dead`.
      const again = await fg.claim('g', 'x')
      assert.equal(again.claimed, false)
      assert.equal(again.reason, 'dead')
      assert.equal((await fg.claimMany('g', ['x'], { reclaimCompleted: true }))[0].reason, 'dead')
      const batch = await fg.claimBatch('g', ['x', 'y'], { maxAttempts: 1 })
      assert.deepEqual(batch.results, ['dead', 'claimed'])
      assert.deepEqual(batch.attempts, [2, 1])
      assert.equal(batch.claimed, 1)
      const set = await fg.setItems('g', [{ id: 'x', status: 'in_progress', maxAttempts: 5 }])
      assert.equal(set[0].ok, false)
      assert.equal(set[0].reason, 'dead')

      // A batch claim's maxAttempts of 1: its first failure is dead.
      assert.equal((await fg.fail('g', 'y', 'nope', { owner: batch.owner })).status, 'dead')
      const got = await fg.getItems('g', ['x', 'y'])
      assert.deepEqual(got.map((i) => i.status), ['dead', 'dead'])
      assert.equal((await fg.getItem('g', 'x')).status, 'dead')
      const list = await fg.listItems('g', { status: 'dead' })
      assert.deepEqual(list.counts, { inProgress: 0, abandoned: 0, completed: 0, failed: 0, dead: 2, total: 2 })
      assert.deepEqual(list.items.map((i) => i.id).sort(), ['x', 'y'])

      // Revived: failed with its attempts kept; one more attempt, then dead again (BullMQ's retry).
      const revived = await fg.reviveItems('g', ['x', 'none'])
      assert.equal(revived[0].ok, true)
      assert.equal(revived[0].action, 'revive')
      assert.equal(revived[0].item.status, 'failed')
      assert.equal(revived[0].item.attempts, 2)
      assert.equal(revived[0].item.lastError, 'HTTP 500 again')
      assert.equal(revived[0].item.timeline.at(-1).status, 'revived')
      assert.equal(revived[1].ok, false)
      assert.equal(revived[1].reason, 'none')
      const third = await fg.claim('g', 'x', { maxAttempts: 2 })
      assert.equal(third.claimed, true)
      assert.equal(third.item.attempts, 3)
      assert.equal((await fg.fail('g', 'x', 'still', { owner: third.owner })).status, 'dead')

      // resetAttempts: a new budget; `failed` revives failed items too.
      const reset = await fg.reviveItems('g', ['x', 'y'], { resetAttempts: true })
      assert.deepEqual(reset.map((r) => [r.ok, r.item.attempts]), [[true, 0], [true, 0]])
      const fourth = await fg.claim('g', 'x', { maxAttempts: 2 })
      assert.equal(fourth.item.attempts, 1)
      assert.equal((await fg.fail('g', 'x', 'once more', { owner: fourth.owner })).status, 'failed')
      assert.equal((await fg.reviveItems('g', ['x']))[0].reason, 'failed')
      const failedToo = await fg.reviveItems('g', ['x'], { failed: true, resetAttempts: true })
      assert.equal(failedToo[0].ok, true)
      assert.equal(failedToo[0].item.attempts, 0)

      // Unset forgets a dead item.
      const z = await fg.claim('g', 'z', { maxAttempts: 1 })
      await fg.fail('g', 'z', 'boom', { owner: z.owner })
      assert.equal(await fg.unsetItem('g', 'z'), true)
      assert.equal((await fg.claim('g', 'z')).claimed, true)
    })

    test('without maxAttempts nothing changes: failures stay failed and claimable', async () => {
      const fg = await b.open()
      for (let i = 1; i <= 4; i++) {
        const c = await fg.claim('plain', 'p')
        assert.equal(c.claimed, true)
        assert.equal(c.item.maxAttempts, undefined)
        assert.equal(c.item.attempts, i)
        const f = await fg.fail('plain', 'p', `try ${i}`, { owner: c.owner })
        assert.equal(f.status, 'failed')
        assert.equal('maxAttempts' in f, false)
      }
      // A claim without maxAttempts clears an earlier one's.
      const limited = await fg.claim('plain', 'q', { maxAttempts: 1 })
      await fg.fail('plain', 'q', 'x', { owner: limited.owner })
      await fg.reviveItems('plain', ['q'])
      const free = await fg.claim('plain', 'q')
      assert.equal(free.item.maxAttempts, undefined)
      assert.equal((await fg.fail('plain', 'q', 'y', { owner: free.owner })).status, 'failed')
    })

    test('a bad maxAttempts is refused before anything is written, naming the field', async () => {
      const fg = await b.open()
      // Out of range (1 to 1000): the core's field; not a whole number: the option's path (as
      // timeoutMs is named).
      for (const [bad, field] of [[0, 'maxAttempts'], [1001, 'maxAttempts'], [1.5, 'options.maxAttempts'], [-1, 'options.maxAttempts']]) {
        const e = await rejection(fg.claim('g', 'a', { maxAttempts: bad }))
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT', String(bad))
        assert.equal(e.field, field, String(bad))
      }
      const e = await rejection(fg.claimBatch('g', ['a'], { maxAttempts: 0 }))
      assert.equal(e.field, 'maxAttempts')
      const s = await rejection(fg.setItems('g', [{ id: 'a', status: 'in_progress', maxAttempts: 2000 }]))
      assert.equal(s.field, 'requests[0].maxAttempts')
      assert.equal((await fg.getItem('g', 'a')).status, 'none')
    })
  })
}
