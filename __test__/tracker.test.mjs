import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { backends, sleep, rejection } from './backends.mjs'
import { recordCount, recordKey, compactKeys, completedIds } from './redis-layout.mjs'

for (const b of backends()) {
  describe(`Item Tracker on ${b.name}`, () => {
    test('50 concurrent claims of one item: exactly one wins', async () => {
      const fg = await b.open()
      const results = await Promise.all(Array.from({ length: 50 }, () => fg.claim('race', 'item-1', { timeoutMs: 60000 })))
      const winners = results.filter((r) => r.claimed)
      assert.equal(winners.length, 1)
      assert.match(winners[0].owner, /^[0-9a-f]{32}$/)
      for (const r of results.filter((r) => !r.claimed)) {
        assert.equal(r.reason, 'in_progress')
        assert.equal(r.owner, undefined)
        assert.equal(r.item.status, 'in_progress')
      }
    })

    test('50 concurrent claims from separate clients of one backend: exactly one wins', async () => {
      const prefix = (await b.open()).prefix
      const clients = await Promise.all(Array.from({ length: 5 }, () => b.open({ prefix })))
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => clients[i % 5].claim('race', 'x')))
      assert.equal(results.filter((r) => r.claimed).length, 1)
    })

    test('the weekly loop: claim, complete or fail with reason, re-run only what failed', async () => {
      const fg = await b.open()
      const projects = Array.from({ length: 20 }, (_, i) => `project-${i}`)
      const first = await fg.claimMany('weekly', projects, { timeoutMs: 60000 })
      assert.equal(first.filter((r) => r.claimed).length, 20)
      const outcome = first.map((r, i) =>
        i % 4 === 0
          ? { id: r.id, status: 'failed', owner: r.owner, error: `quota exceeded for ${r.id}` }
          : { id: r.id, status: 'completed', owner: r.owner },
      )
      const set = await fg.setItems('weekly', outcome)
      assert.ok(set.every((r) => r.ok))

      const list = await fg.listItems('weekly', { status: 'failed' })
      assert.deepEqual(list.counts, { inProgress: 0, abandoned: 0, completed: 15, failed: 5, dead: 0, total: 20 })
      assert.deepEqual(list.items.map((i) => i.id).sort(), ['project-0', 'project-12', 'project-16', 'project-4', 'project-8'])
      assert.equal(list.items[0].lastError.startsWith('quota exceeded'), true)

      // Second run over the same list: only the failed ones are claimed again.
      const second = await fg.claimMany('weekly', projects)
      const again = second.filter((r) => r.claimed).map((r) => r.id)
      assert.equal(again.length, 5)
      assert.ok(second.filter((r) => !r.claimed).every((r) => r.reason === 'completed'))
      const item = await fg.getItem('weekly', 'project-4')
      assert.equal(item.attempts, 2)
      assert.deepEqual(item.timeline.map((t) => t.status), ['in_progress', 'failed', 'in_progress'])
    })

    test('lease expiry: an abandoned item shows as such and is claimable; the stale owner is refused', async () => {
      const fg = await b.open()
      const a = await fg.claim('g', 'slow', { timeoutMs: 100 })
      assert.ok(a.claimed)
      await sleep(250)
      assert.equal((await fg.getItem('g', 'slow')).status, 'abandoned')
      const listed = await fg.listItems('g', { status: 'abandoned' })
      assert.equal(listed.counts.abandoned, 1)
      const c = await fg.claim('g', 'slow', { timeoutMs: 60000 })
      assert.ok(c.claimed)
      const err = await rejection(fg.complete('g', 'slow', { owner: a.owner }))
      assert.equal(err.code, 'ERR_NOT_OWNER')
      assert.match(err.message, /slow/)
      const err2 = await rejection(fg.fail('g', 'slow', 'late failure', { owner: a.owner }))
      assert.equal(err2.code, 'ERR_NOT_OWNER')
      assert.equal((await fg.getItem('g', 'slow')).status, 'in_progress')
      const done = await fg.complete('g', 'slow', { owner: c.owner })
      assert.equal(done.status, 'completed')
    })

    test('setItems reports a stale owner per item and applies the rest', async () => {
      const fg = await b.open()
      const [x, y] = await fg.claimMany('g', ['x', 'y'])
      await fg.unsetItem('g', 'y')
      await fg.claim('g', 'y')
      const r = await fg.setItems('g', [
        { id: 'x', status: 'completed', owner: x.owner },
        { id: 'y', status: 'completed', owner: y.owner },
      ])
      assert.equal(r[0].ok, true)
      assert.equal(r[1].ok, false)
      assert.equal(r[1].code, 'ERR_NOT_OWNER')
      assert.equal(r[1].item.status, 'in_progress')
    })

    test('completed marks can expire (keepMs) so a loop runs again without clean-up', async () => {
      const fg = await b.open()
      const a = await fg.claim('g', 'w')
      // Kept long enough to be live still at the next call on a loaded machine.
      await fg.complete('g', 'w', { owner: a.owner, keepMs: 1000 })
      assert.equal((await fg.claim('g', 'w')).reason, 'completed')
      await sleep(1150)
      assert.equal((await fg.getItem('g', 'w')).status, 'none')
      assert.ok((await fg.claim('g', 'w')).claimed)
    })

    test("keepMs 'forever': the mark has no expiry, outlives retention and keepMs limits, and goes only when unset", async () => {
      const fg = await b.open({ retentionMs: 100 })
      const a = await fg.claim('g', 'f')
      const done = await fg.complete('g', 'f', { owner: a.owner, keepMs: 'forever' })
      assert.equal(done.status, 'completed')
      assert.equal(done.expiresAt, undefined)
      const failed = await fg.fail('g', 'x', 'boom', { keepMs: 'forever' })
      assert.equal(failed.expiresAt, undefined)
      const r = await fg.setItems('g', [{ id: 's', status: 'completed', keepMs: 'forever' }, { id: 't', status: 'completed' }])
      assert.equal(r[0].item.expiresAt, undefined)
      assert.equal(typeof r[1].item.expiresAt, 'number')
      await sleep(250)
      // The client's retention (100 ms) forgot 't'; the marks kept forever are still there.
      assert.deepEqual((await fg.getItems('g', ['f', 'x', 's', 't'])).map((i) => i.status), ['completed', 'failed', 'completed', 'none'])
      assert.equal((await fg.claim('g', 'f')).reason, 'completed')
      const list = await fg.listItems('g')
      assert.deepEqual([list.counts.completed, list.counts.failed], [2, 1])
      assert.ok(list.items.every((i) => i.expiresAt === undefined))
      await fg.unsetItem('g', 'f')
      assert.equal((await fg.getItem('g', 'f')).status, 'none')
      assert.match((await rejection(fg.complete('g', 'y', { keepMs: 366 * 86400000 }))).message, /^keepMs is 31622400000 ms; the limit is 31536000000 ms \(365 days\); "forever" keeps it with no expiry$/)
      assert.match((await rejection(fg.complete('g', 'y', { keepMs: 'Forever' }))).message, /^options\.keepMs must be a number of milliseconds or "forever"/)
    })

    test('retention: finished records are forgotten after retentionMs', async () => {
      const fg = await b.open({ retentionMs: 100 })
      await fg.claim('g', 'r')
      await fg.fail('g', 'r', 'boom')
      assert.equal((await fg.getItem('g', 'r')).status, 'failed')
      await sleep(250)
      assert.equal((await fg.getItem('g', 'r')).status, 'none')
      assert.equal((await fg.listItems('g')).counts.total, 0)
    })

    test('unset forgets; get of an unknown item says none', async () => {
      const fg = await b.open()
      assert.equal(await fg.unsetItem('g', 'nothing'), false)
      await fg.claim('g', 'z')
      assert.equal(await fg.unsetItem('g', 'z'), true)
      const st = await fg.getItem('g', 'z')
      assert.deepEqual(st, { id: 'z', status: 'none', attempts: 0, timeline: [] })
      const many = await fg.getItems('g', ['z', 'z2'])
      assert.equal(many.length, 2)
    })

    test('claim results carry the same item state as getItem, in every state', async () => {
      const fg = await b.open()
      const same = async (r, id) => assert.deepEqual(r.item, await fg.getItem('st', id))
      const a = await fg.claim('st', 'a', { timeoutMs: 60000 })
      assert.deepEqual(Object.keys(a), ['id', 'claimed', 'owner', 'item'])
      await same(a, 'a')
      const busy = await fg.claim('st', 'a')
      assert.deepEqual([busy.claimed, busy.reason, busy.owner], [false, 'in_progress', undefined])
      await same(busy, 'a')
      await fg.complete('st', 'a', { owner: a.owner })
      const done = await fg.claim('st', 'a')
      assert.deepEqual([done.claimed, done.reason, done.item.status, done.item.attempts], [false, 'completed', 'completed', 1])
      assert.equal(typeof done.item.finishedAt, 'number')
      await same(done, 'a')
      // An error text in the timeline, and an abandoned lease.
      const f = await fg.claim('st', 'f')
      await fg.fail('st', 'f', 'boom: "quoted" \u2603', { owner: f.owner })
      const again = await fg.claim('st', 'f', { timeoutMs: 50 })
      assert.equal(again.item.lastError, 'boom: "quoted" \u2603')
      await same(again, 'f')
      await sleep(120)
      const third = await fg.claim('st', 'f')
      assert.deepEqual(third.item.timeline.map((t) => t.status), ['in_progress', 'failed', 'in_progress', 'abandoned', 'in_progress'])
      assert.equal(third.item.attempts, 3)
      await same(third, 'f')
      const back = await fg.claim('st', 'a', { reclaimCompleted: true })
      assert.deepEqual([back.claimed, back.item.attempts, back.item.finishedAt], [true, 2, undefined])
      await same(back, 'a')
    })

    test('claimBatch: one owner for the call, per-id outcome and attempts, same rules as claim', async () => {
      const fg = await b.open()
      const busy = await fg.claim('cb', 'busy', { timeoutMs: 60000 })
      const done = await fg.claim('cb', 'done')
      await fg.complete('cb', 'done', { owner: done.owner })
      const failed = await fg.claim('cb', 'failed')
      await fg.fail('cb', 'failed', 'boom', { owner: failed.owner })
      await fg.claim('cb', 'lapsed', { timeoutMs: 50 })
      await sleep(120)
      const r = await fg.claimBatch('cb', ['new', 'busy', 'done', 'failed', 'lapsed', 'new'], { timeoutMs: 60000 })
      assert.match(r.owner, /^[0-9a-f]{32}$/)
      assert.deepEqual(r.results, ['claimed', 'in_progress', 'completed', 'claimed', 'claimed', 'in_progress'])
      assert.deepEqual(r.attempts, [1, 1, 1, 2, 2, 1])
      assert.equal(r.claimed, 3)
      assert.ok(r.leaseExpiresAt > Date.now() + 50000 && r.leaseExpiresAt < Date.now() + 70000, `${r.leaseExpiresAt}`)
      // The records are the same as claim's: state, attempts, timeline, lastError kept.
      const [n, f, l] = await fg.getItems('cb', ['new', 'failed', 'lapsed'])
      assert.equal(n.status, 'in_progress')
      assert.deepEqual(n.timeline.map((t) => t.status), ['in_progress'])
      assert.equal(f.lastError, 'boom')
      assert.deepEqual(f.timeline.map((t) => t.status), ['in_progress', 'failed', 'in_progress'])
      assert.deepEqual(l.timeline.map((t) => t.status), ['in_progress', 'abandoned', 'in_progress'])
      assert.equal(n.leaseExpiresAt, r.leaseExpiresAt)
      // The batch's owner token completes its items; the busy item's older owner is untouched.
      assert.equal((await fg.complete('cb', 'new', { owner: r.owner })).status, 'completed')
      await assert.rejects(fg.complete('cb', 'failed', { owner: busy.owner }), { code: 'ERR_NOT_OWNER' })
      const list = await fg.listItems('cb')
      assert.deepEqual(
        { ...list.counts },
        { inProgress: 3, abandoned: 0, completed: 2, failed: 0, dead: 0, total: 5 },
      )
      // reclaimCompleted, and an empty batch.
      const again = await fg.claimBatch('cb', ['done'], { reclaimCompleted: true })
      assert.deepEqual([again.results, again.attempts, again.claimed], [['claimed'], [2], 1])
      const empty = await fg.claimBatch('cb', [])
      assert.deepEqual([empty.results, empty.attempts, empty.claimed], [[], [], 0])
    })

    test('claimBatch of 10,000 ids: every id claimed once, then all busy', async () => {
      const fg = await b.open()
      const ids = Array.from({ length: 10000 }, (_, i) => `id-${i}`)
      const r = await fg.claimBatch('big', ids)
      assert.equal(r.claimed, 10000)
      assert.ok(r.results.every((x) => x === 'claimed'))
      const again = await fg.claimBatch('big', ids)
      assert.equal(again.claimed, 0)
      assert.ok(again.results.every((x) => x === 'in_progress'))
      assert.equal((await fg.listItems('big', { limit: 1 })).counts.inProgress, 10000)
      assert.equal((await fg.getItem('big', 'id-9999')).attempts, 1)
    })

    if (b.name === 'redis') {
      test("Redis: a group holding a mark kept forever keeps its keys (no TTL that would drop it)", async () => {
        const { connect } = await import('./resp.mjs')
        const r = await connect(process.env.REDIS_URL)
        try {
          const fg = await b.open({ retentionMs: 100 })
          await fg.complete('kf', 'a', { keepMs: 'forever' })
          await fg.complete('kf', 'b', { keepMs: 50 })
          const year = 365 * 86400000
          const head = `${fg.prefix}{t:kf}`
          // The records hash and the completed ids' index (both staged, see STAGE in
          // tracker_common.lua), and any key of the compact layout.
          const keys = [`${head}:r`, `${head}:s:completed`, ...(await compactKeys(r, head))]
          for (const key of keys) {
            const pttl = await r.call('PTTL', key)
            assert.ok(pttl === -1 || pttl > 1000 * year, `${key} PTTL ${pttl}`)
          }
          await sleep(150)
          await fg.claim('kf', 'c')
          assert.equal(await recordCount(r, head), 2, 'b expired and was purged; a stays')
          assert.deepEqual(await completedIds(r, head), ['a'])
          assert.equal((await fg.getItem('kf', 'a')).status, 'completed')
        } finally {
          r.close()
        }
      })

      test("Redis: every key of a group carries the group's expiry, also an index emptied and written again", async () => {
        const { connect } = await import('./resp.mjs')
        const r = await connect(process.env.REDIS_URL)
        try {
          const fg = await b.open({ retentionMs: 3600000 })
          const head = `${fg.prefix}{t:ttl}`
          const keys = ['r', 's:in_progress', 's:completed', 's:failed'].map((k) => `${head}:${k}`)
          const c = await fg.claim('ttl', 'a')
          await fg.fail('ttl', 'a', 'x', { owner: c.owner })
          for (const id of ['b', 'c']) {
            // Each claim writes to an index its previous completion emptied of ids.
            const k = await fg.claim('ttl', id)
            await fg.complete('ttl', id, { owner: k.owner })
          }
          for (const key of keys) {
            const pttl = await r.call('PTTL', key)
            assert.ok(pttl > 3000000, `${key} PTTL ${pttl}`)
            // The end mark that keeps an emptied index (see tracker_head.lua END).
            if (key !== keys[0]) assert.equal(await r.call('ZSCORE', key, ''), 'inf', key)
          }
          // Two completions are staged (see STAGE in tracker_common.lua): no compact key yet.
          assert.deepEqual(await compactKeys(r, head), [])
          assert.equal(await r.call('ZCARD', keys[1]), 1, 'in progress: only the end mark')
          assert.deepEqual((await fg.listItems('ttl')).counts, { inProgress: 0, abandoned: 0, completed: 2, failed: 1, dead: 0, total: 3 })
          assert.deepEqual((await fg.listItems('ttl', { status: 'completed' })).items.map((i) => i.id).sort(), ['b', 'c'])
        } finally {
          r.close()
        }
      })

      test('Redis: a record holds each fact once, and its timeline only when its fields do not imply it', async () => {
        // The layout of tracker_head.lua: a completed first attempt is status, attempts, 3 times,
        // the owner token as 16 bytes, no error and a timeline count of 0 (implied: claimed at
        // createdAt, completed at finishedAt); a retry or an abandoned lease stores its timeline.
        // Whatever is stored, every field reads back as the tracker wrote it.
        const { connect } = await import('./resp.mjs')
        const r = await connect(process.env.REDIS_URL)
        try {
          const fg = await b.open({ retentionMs: 3600000 })
          const head = `${fg.prefix}{t:rec}`
          // A stored record's length, first and last byte, and whether it holds `hex` as bytes
          // (read in Redis: the test's client decodes replies as UTF-8), wherever it is stored.
          const look = `local raw = redis.call('HGET', KEYS[1], ARGV[1])
            local bin = string.gsub(ARGV[2], '..', function(h) return string.char(tonumber(h, 16)) end)
            return {#raw, string.byte(raw, 1), string.byte(raw, -1), string.find(raw, bin, 1, true) and 1 or 0}`
          const stored = async (id, hex = '') => {
            const key = await recordKey(r, head, id)
            assert.ok(key, `no record of ${id}`)
            const [length, first, last, has] = await r.call('EVAL', look, '1', key, id, hex)
            return { length, first, last, has: has === 1 }
          }
          const check = (s, status, attempts, steps) => {
            assert.equal(s.status, status)
            assert.equal(s.attempts, attempts)
            assert.deepEqual(s.timeline.map((t) => [t.status, t.attempt, t.error]), steps)
            assert.ok(s.timeline.every((t, i) => t.at >= s.createdAt && t.at <= s.updatedAt && (i === 0 || t.at >= s.timeline[i - 1].at)))
          }

          const c = await fg.claim('rec', 'done')
          check(c.item, 'in_progress', 1, [['in_progress', 1, undefined]])
          assert.equal(c.item.timeline[0].at, c.item.createdAt)
          const done = await fg.complete('rec', 'done', { owner: c.owner })
          check(done, 'completed', 1, [['in_progress', 1, undefined], ['completed', 1, undefined]])
          assert.equal(done.timeline[1].at, done.finishedAt)
          assert.equal(done.finishedAt, done.updatedAt)
          assert.equal(done.leaseExpiresAt, undefined)
          assert.equal(done.expiresAt, done.finishedAt + 3600000)
          assert.deepEqual(await fg.getItem('rec', 'done'), done)
          const raw = await stored('done', c.owner)
          assert.equal(raw.length, 1 + 4 + 3 * 6 + 17 + 1 + 1, `completed record: ${raw.length} bytes`)
          assert.equal(raw.first, 'c'.charCodeAt(0))
          assert.equal(raw.last, 0, 'timeline implied')
          assert.ok(raw.has, 'owner token as 16 bytes')
          // Completed again by its owner: kept, and now three transitions are stored.
          const twice = await fg.complete('rec', 'done', { owner: c.owner })
          check(twice, 'completed', 1, [['in_progress', 1, undefined], ['completed', 1, undefined], ['completed', 1, undefined]])
          assert.equal((await stored('done')).length, raw.length + 3 * 18, '3 entries of 18 bytes')
          // A newer claim's owner check holds on the packed token.
          await assert.rejects(fg.complete('rec', 'done', { owner: 'f'.repeat(32) }), { code: 'ERR_NOT_OWNER' })

          // A first failure implies its timeline too; its reason is kept as the last error.
          const f = await fg.claim('rec', 'bad')
          const failed = await fg.fail('rec', 'bad', 'boom: ünïcode', { owner: f.owner })
          check(failed, 'failed', 1, [['in_progress', 1, undefined], ['failed', 1, 'boom: ünïcode']])
          assert.equal(failed.lastError, 'boom: ünïcode')
          assert.equal((await stored('bad')).last, 0)
          // Retried: the whole timeline is stored; the last error stays until the next failure.
          const again = await fg.claim('rec', 'bad', { timeoutMs: 60000 })
          check(again.item, 'in_progress', 2, [['in_progress', 1, undefined], ['failed', 1, 'boom: ünïcode'], ['in_progress', 2, undefined]])
          assert.equal(again.item.lastError, 'boom: ünïcode')
          assert.equal(again.item.leaseExpiresAt, again.item.updatedAt + 60000)
          const ok = await fg.complete('rec', 'bad', { owner: again.owner })
          check(ok, 'completed', 2, [['in_progress', 1, undefined], ['failed', 1, 'boom: ünïcode'], ['in_progress', 2, undefined], ['completed', 2, undefined]])
          assert.deepEqual(await fg.getItem('rec', 'bad'), ok)

          // Finished without a claim (no owner, attempt 0), an empty reason, kept forever.
          const bare = await fg.fail('rec', 'bare', '', { keepMs: 'forever' })
          check(bare, 'failed', 0, [['failed', 0, '']])
          assert.equal(bare.lastError, '')
          assert.equal(bare.expiresAt, undefined)
          assert.deepEqual(await fg.getItem('rec', 'bare'), bare)
          assert.deepEqual((await fg.listItems('rec')).counts, { inProgress: 0, abandoned: 0, completed: 2, failed: 1, dead: 0, total: 3 })
        } finally {
          r.close()
        }
      })

      test('Redis: one claim or completion writes the same on the fast path as on the general one', async () => {
        // tracker_apply_fast.lua takes one claim of a new id, or one completion or failure of a live
        // record, when the group's bookkeeping shows nothing else due. Group `fast` keeps its
        // bookkeeping; in group `slow` it is deleted before every call, so each call goes the
        // general way (clean-up scan, TTL upkeep). Both must end with the same records, indexes
        // and key expiry (times compared by their relations, as the two run at different ms).
        const { connect } = await import('./resp.mjs')
        const r = await connect(process.env.REDIS_URL)
        try {
          const fg = await b.open({ retentionMs: 3600000 })
          const shape = (s) => ({
            id: s.id, status: s.status, attempts: s.attempts, lastError: s.lastError,
            lease: s.leaseExpiresAt === undefined ? undefined : s.leaseExpiresAt - s.updatedAt,
            keep: s.expiresAt - s.updatedAt, finished: s.finishedAt === undefined ? undefined : s.finishedAt === s.updatedAt,
            created: s.createdAt <= s.updatedAt,
            timeline: s.timeline.map((x) => [x.status, x.attempt, x.error, x.at >= s.createdAt && x.at <= s.updatedAt]),
          })
          const run = async (g, general) => {
            const head = `${fg.prefix}{t:${g}}`
            const call = async (f) => {
              if (general) await r.call('HDEL', `${head}:r`, '')
              return shape(await f())
            }
            const w = await fg.claim(g, 'w')
            await fg.complete(g, 'w', { owner: w.owner })
            const out = []
            const a = await fg.claim(g, 'a', { timeoutMs: 60000 })
            if (general) await r.call('HDEL', `${head}:r`, '')
            out.push(await call(() => fg.claim(g, 'a2', { timeoutMs: 60000 }).then((x) => x.item)))
            out.push(await call(() => fg.complete(g, 'a', { owner: a.owner })))
            const c = await fg.claim(g, 'b')
            out.push(await call(() => fg.fail(g, 'b', 'boom', { owner: c.owner })))
            await fg.claim(g, 'c')
            out.push(await call(() => fg.complete(g, 'c')))
            const again = await fg.claim(g, 'b')
            out.push(await call(() => fg.complete(g, 'b', { owner: again.owner })))
            out.push(await call(() => fg.fail(g, 'a2', '', { owner: 'not-the-owner' }).catch((e) => ({ id: e.code, timeline: [] }))))
            for (const id of ['a', 'a2', 'b', 'c', 'w']) out.push(shape(await fg.getItem(g, id)))
            for (const k of ['s:in_progress', 's:completed', 's:failed']) {
              // Sorted: ids written in the same ms may rank either way.
              out.push([k, (await r.call('ZRANGE', `${head}:${k}`, '0', '-1')).sort()])
            }
            out.push(['completed', await completedIds(r, head)])
            for (const k of ['r', 's:in_progress', 's:completed', 's:failed', 'c', 'c:r']) {
              const pttl = await r.call('PTTL', `${head}:${k}`)
              out.push([k, pttl > 3600000 && pttl < 3 * 3600000])
            }
            return out
          }
          assert.deepEqual(await run('fast', false), await run('slow', true))
        } finally {
          r.close()
        }
      })

      test('Redis: expired records are deleted by later writes, without listItems (no pile-up)', async () => {
        const { connect } = await import('./resp.mjs')
        const r = await connect(process.env.REDIS_URL)
        try {
          const fg = await b.open({ retentionMs: 100 })
          const old = Array.from({ length: 300 }, (_, i) => `old-${i}`)
          const c = await fg.claimBatch('purge', old, { timeoutMs: 50 })
          const done = await fg.setItems('purge', old.slice(0, 150).map((id) => ({ id, status: 'completed', owner: c.owner, keepMs: 50 })))
          assert.ok(done.every((x) => x.ok))
          const head = `${fg.prefix}{t:purge}`
          assert.equal(await recordCount(r, head), 300)
          await sleep(250)
          // Every old record has expired (150 completed past keepMs, 150 abandoned past retention).
          assert.equal((await fg.getItem('purge', 'old-0')).status, 'none')
          assert.equal((await fg.getItem('purge', 'old-299')).status, 'none')
          // A write of 150 new ids deletes at least 300 expired records (twice what it writes).
          const fresh = Array.from({ length: 150 }, (_, i) => `new-${i}`)
          assert.equal((await fg.claimBatch('purge', fresh)).claimed, 150)
          assert.equal(await recordCount(r, head), 150)
          // Ids in the indexes (below their end mark, scored +inf).
          assert.deepEqual(await completedIds(r, head), [])
          assert.equal(await r.call('ZCOUNT', `${fg.prefix}{t:purge}:s:in_progress`, '-inf', '(inf'), 150)
        } finally {
          r.close()
        }
      })
    }

    test('claimBatch rejects bad input before writing anything', async () => {
      const fg = await b.open()
      const e = await rejection(fg.claimBatch('g', ['ok', ''], {}))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
      assert.match(e.message, /ids\[1\]/)
      assert.equal((await rejection(fg.claimBatch('g', ['a'], { timeoutMs: -1 }))).code, 'ERR_INVALID_ARGUMENT')
      assert.equal((await rejection(fg.claimBatch('g', 'a'))).code, 'ERR_INVALID_ARGUMENT')
      assert.equal((await fg.getItem('g', 'ok')).status, 'none')
    })

    test('batch claim of 10,000 ids in one call', async () => {
      const fg = await b.open()
      const ids = Array.from({ length: 10000 }, (_, i) => `id-${i}`)
      const r = await fg.claimMany('big', ids)
      assert.equal(r.length, 10000)
      assert.ok(r.every((x) => x.claimed))
      const l = await fg.listItems('big', { limit: 10000 })
      assert.equal(l.counts.inProgress, 10000)
      assert.equal(l.items.length, 10000)
    })
  })
}
