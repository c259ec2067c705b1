// The Item Tracker's compact layout on Redis (docs/redis-compact.md) with groups big enough that
// record buckets and index leaves split many times, checked against the in-memory store (the
// rules' reference) after every round: every item read back, and pages of each status with
// their counts. The model test (model.test.mjs) keeps to a few ids per group, too few for a
// split; the layout's own structures have their randomized tests (redis-cidx, redis-crec).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Flowguard, backends, freshPrefix, sleep } from './backends.mjs'
import { compactKeys, completedIds, recordKey } from './redis-layout.mjs'
import { connect } from './resp.mjs'
import { mulberry32 } from './prng.mjs'

// The in-memory store is the reference whichever backends FLOWGUARD_BACKENDS names.
const reference = { open: () => Flowguard.open({ prefix: freshPrefix('compact') }) }
const sides = backends().filter((b) => b.name === 'redis' || b.name === 'cluster')
const skip = sides.length === 0 && 'no Redis: set REDIS_URL (npm test does)'

function rng(seed) {
  const next = mulberry32(seed)
  return {
    next,
    sample(xs, n) {
      const out = []
      for (const x of xs) if (next() < n / xs.length) out.push(x)
      return out
    },
  }
}

// Ids: short ones (their records fit a bucket), non-ASCII and NUL ones, and ids over 64 bytes
// (their records stay in the records hash, indexed all the same).
const ids = [
  ...Array.from({ length: 900 }, (_, i) => `id-${String(i).padStart(4, '0')}`),
  ...Array.from({ length: 40 }, (_, i) => `é-ü-${i}`),
  ...Array.from({ length: 10 }, (_, i) => `nul\u0000${i}`),
  ...Array.from({ length: 30 }, (_, i) => `${'L'.repeat(70)}-${i}`),
]

const shape = (s) => ({
  id: s.id,
  status: s.status,
  attempts: s.attempts,
  lastError: s.lastError,
  result: s.result,
  timeline: s.timeline.map((t) => `${t.status}:${t.attempt}:${t.error ?? ''}`),
})

for (const side of sides.length ? sides : [{ name: 'redis' }]) {
  test(`${side.name}: a thousand items through the compact layout (many splits) read back as in memory`, { skip, timeout: 120_000 }, async () => {
    const sides2 = [await reference.open(), await side.open()]
    const r = side.url ? await connect(side.url) : null
    const g = 'big'
    const next = rng(20261128)
    // Each side's owner tokens of its latest claim per id.
    const owners = [new Map(), new Map()]
    const claim = async (list, reclaimCompleted) => {
      const res = await Promise.all(sides2.map((fg) => fg.claimBatch(g, list, { timeoutMs: 3_600_000, reclaimCompleted })))
      assert.deepEqual(res[1].results, res[0].results, 'claim outcomes')
      for (const [k, c] of res.entries()) list.forEach((id, i) => res[k].results[i] === 'claimed' && owners[k].set(id, c.owner))
    }
    const finish = async (list, status, extra = () => ({})) => {
      const res = await Promise.all(
        sides2.map((fg, k) => fg.setItems(g, list.map((id) => ({ id, status, owner: owners[k].get(id), keepMs: 3_600_000, ...extra(id) })))),
      )
      assert.deepEqual(res[1].map((x) => [x.id, x.ok, x.code]), res[0].map((x) => [x.id, x.ok, x.code]), `${status} outcomes`)
    }
    const compare = async (round) => {
      const items = await Promise.all(sides2.map((fg) => fg.getItems(g, ids)))
      assert.deepEqual(items[1].map(shape), items[0].map(shape), `round ${round}: items`)
      for (const status of ['completed', 'all', 'failed', 'in_progress']) {
        for (const offset of [0, 97, 350, 800]) {
          const pages = await Promise.all(sides2.map((fg) => fg.listItems(g, { status, offset, limit: 100 })))
          assert.deepEqual(pages[1].counts, pages[0].counts, `round ${round}: counts`)
          assert.deepEqual(pages[1].items.map((x) => x.id), pages[0].items.map((x) => x.id), `round ${round}: ${status} from ${offset}`)
          assert.equal(pages[1].nextOffset, pages[0].nextOffset)
        }
      }
    }
    try {
      await claim(ids, false)
      for (let round = 0; round < 8; round++) {
        // Completions (some with a result, whose record is too long for a bucket), failures,
        // unsets, and a re-claim of completed ones that are then completed again.
        const inProgress = ids.filter((id) => owners[0].has(id))
        const done = next.sample(inProgress, inProgress.length * 0.5)
        await finish(done, 'completed', (id) => (id.endsWith('7') ? { result: { big: 'r'.repeat(40) } } : {}))
        const failed = next.sample(inProgress.filter((id) => !done.includes(id)), 60)
        await finish(failed, 'failed', () => ({ error: 'boom' }))
        for (const id of [...done, ...failed]) for (const o of owners) o.delete(id)
        const unset = next.sample(ids, 25)
        await Promise.all(sides2.map((fg) => fg.setItems(g, unset.map((id) => ({ id, status: 'none' })))))
        for (const id of unset) for (const o of owners) o.delete(id)
        await compare(round)
        await claim(next.sample(ids, 200), true)
      }
      if (r) {
        // The layout was exercised: several buckets and leaves (a generation's keys).
        const keys = await compactKeys(r, `${sides2[1].prefix}{t:${g}}`)
        const buckets = keys.filter((k) => k.includes(':c:b:')).length
        const leaves = keys.filter((k) => k.includes(':c:l:')).length
        assert.ok(buckets >= 8 && leaves >= 4, `${buckets} buckets, ${leaves} leaves`)
        for (const k of keys) {
          if (k.includes(':c:b:')) assert.equal(await r.call('OBJECT', 'ENCODING', k), 'listpack', k)
        }
      }
      // Everything completed now, with a short keep: the group forgets them all.
      await claim(ids, true)
      await Promise.all(sides2.map((fg, k) => fg.setItems(g, ids.map((id) => ({ id, status: 'completed', owner: owners[k].get(id), keepMs: 300 })))))
      await sleep(600)
      const after = await Promise.all(sides2.map((fg) => fg.listItems(g)))
      assert.deepEqual(after[1].counts, after[0].counts)
      assert.equal(after[1].counts.total, 0)
    } finally {
      r?.close()
    }
  })
}

const single = sides.find((s) => s.name === 'redis')
test('redis: a batch of completions moves what it staged into the compact layout within the call', { skip: !single && 'no single Redis: set REDIS_URL (npm test does)' }, async () => {
  const fg = await single.open()
  const r = await connect(single.url)
  try {
    const g = 'batched'
    const head = `${fg.prefix}{t:${g}}`
    // Two batches of 5,000 (more than four steps of the move each): after each, at most STAGE
    // (128) completions are left staged, the rest are in the compact index and their records
    // in buckets.
    for (const round of [0, 1]) {
      const list = Array.from({ length: 5000 }, (_, i) => `b-${round}-${i}`)
      const c = await fg.claimBatch(g, list, { timeoutMs: 3_600_000 })
      assert.equal(c.claimed, list.length)
      const done = await fg.setItems(g, list.map((id) => ({ id, status: 'completed', owner: c.owner })))
      assert.ok(done.every((x) => x.ok))
      const staged = await r.call('ZCARD', `${head}:s:completed`)
      assert.ok(staged <= 128, `round ${round}: ${staged} completions left staged`)
      const inHash = (await r.call('HLEN', `${head}:r`)) - (await r.call('HEXISTS', `${head}:r`, ''))
      assert.ok(inHash <= 128, `round ${round}: ${inHash} records left in the records hash`)
      assert.equal((await completedIds(r, head)).length, 5000 * (round + 1))
      for (const id of [list[0], list[2500], list[4999]]) {
        const key = await recordKey(r, head, id)
        assert.ok(key === `${head}:r` || key.includes(':c:b:'), `${id} in ${key}`)
      }
      const l = await fg.listItems(g, { status: 'completed', limit: 2, offset: 5000 * (round + 1) - 2 })
      assert.equal(l.counts.completed, 5000 * (round + 1))
      assert.deepEqual(l.items.map((i) => i.status), ['completed', 'completed'])
    }
  } finally {
    r.close()
    await fg.close()
  }
})
