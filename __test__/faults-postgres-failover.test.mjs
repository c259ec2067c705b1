// A streaming replica promoted after the primary is killed (issue 27): a primary of this suite's
// own and a replica of it (`pg_basebackup -R`), a client writing to the primary (claims and
// completions, lock and semaphore permit acquire/release pairs, enqueues) when the primary is stopped at once (`pg_ctl
// stop -m immediate`: every server process ended, as in a crash); the replica is promoted
// (`pg_ctl promote`) and a client opened on it (faults-postgres-sync-standby.test.mjs: a
// synchronous standby away). Three times:
//
// - asynchronous replication (PostgreSQL's default): what the replica had replayed is kept, so
//   everything acknowledged before a WAL position (`pg_current_wal_lsn()` on the primary, read
//   after the acknowledgement) the replica had replayed when promoted must be there; writes
//   acknowledged after it may be lost (the figures are printed: docs/postgres.md);
// - the same with the replica cut off from the primary 500 ms before the kill (a replica fallen
//   behind): what was acknowledged since is lost (printed);
// - synchronous replication (`synchronous_standby_names = '*'`, `synchronous_commit = on`): a
//   commit is answered once the replica has it, so nothing acknowledged may be lost.
//
// Every way the promoted replica serves flowguard: the schema's version is read, claims and locks
// work, and the first lock fence and semaphore fence after the promotion are past every fence
// handed out before, the lost ones too: a grant's fence is at least the database's clock in µs
// (`rules::lock::next_fence`), and the promoted replica runs on the same machine's clock (a
// new primary whose clock is behind by more than the time since the last lost grant could hand
// tokens out again: docs/postgres.md). The PostgreSQL leg of `npm test`
// runs it (FLOWGUARD_BACKENDS=postgres).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Flowguard, freshPrefix, sleep } from './backends.mjs'
import { lsn, pgSkip, promote, psql, startPostgres, startReplica, stopCluster, streaming, until } from './postgres-server.mjs'

const LOAD_MS = 1000
const LEASE_MS = 1000
const CUT_MS = 500
const CODED = ['ERR_BACKEND_UNAVAILABLE', 'ERR_TIMEOUT']

// `cut`: the replica stops receiving (its primary_conninfo pointed at a closed port) CUT_MS before
// the kill, as a replica that falls behind would: what the primary acknowledged since is lost.
for (const { sync, cut } of [{ sync: false }, { sync: false, cut: true }, { sync: true }]) {
  const mode = sync ? 'synchronous' : cut ? `asynchronous, the replica cut off ${CUT_MS} ms before the kill` : 'asynchronous'
  test(`a replica promoted after the primary is killed, ${mode} replication: ${sync ? 'nothing acknowledged lost' : 'what it had replayed kept'}, usable, fences past`, { skip: pgSkip, timeout: 120_000 }, async () => {
    const primary = await startPostgres()
    let replica = null
    const clients = []
    const prefix = freshPrefix(`pgfailover${sync ? 's' : cut ? 'c' : 'a'}`)
    const open = (url) => Flowguard.open({ postgres: { url, poolSize: 4 }, prefix, connectTimeoutMs: 500, commandTimeoutMs: 2000 })
    try {
      const a = await open(primary.url)
      clients.push(a)
      // Fences handed out before the replica existed (in its base backup).
      for (let i = 0; i < 3; i++) {
        const l = await a.acquireLock('L')
        await a.releaseLock('L', l.owner)
      }
      replica = await startReplica(primary)
      await streaming(primary, { sync })
      const version = await psql(primary, primary.url, "SELECT value FROM flowguard.meta WHERE key = 'version'")

      // What was acknowledged, in the order answered; `marks`: how many of each had been answered
      // before the primary's WAL position read next.
      const completed = []
      const enqueued = []
      const fences = []
      const permitFences = []
      const marks = []
      const codes = new Map()
      const unexpected = []
      let stop = false
      const call = async (p) => {
        try {
          return await p()
        } catch (e) {
          codes.set(e.code, (codes.get(e.code) || 0) + 1)
          if (!CODED.includes(e.code)) unexpected.push(`${e.code}: ${e.message}`)
          return undefined
        }
      }
      const writers = [
        async () => {
          for (let i = 0; !stop; i++) {
            const c = await call(() => a.claim('g', `item-${i}`, { timeoutMs: LEASE_MS }))
            if (c?.claimed && (await call(() => a.complete('g', `item-${i}`, { owner: c.owner })))) completed.push(`item-${i}`)
            await sleep(1)
          }
        },
        async () => {
          while (!stop) {
            const l = await call(() => a.acquireLock('L', { timeoutMs: LEASE_MS }))
            if (l?.acquired) {
              fences.push(l.fence)
              await call(() => a.releaseLock('L', l.owner))
            }
            await sleep(1)
          }
        },
        async () => {
          while (!stop) {
            const p = await call(() => a.acquirePermit('S', { permits: 2, timeoutMs: LEASE_MS }))
            if (p?.acquired) {
              permitFences.push(p.fence)
              await call(() => a.releasePermit('S', p.owner))
            }
            await sleep(1)
          }
        },
        async () => {
          for (let i = 0; !stop; i++) {
            if (await call(() => a.enqueue('q', [`job-${i}`]))) enqueued.push(`job-${i}`)
            await sleep(1)
          }
        },
        async () => {
          while (!stop) {
            const answered = { completed: completed.length, enqueued: enqueued.length, fences: fences.length }
            const at = await psql(primary, primary.url, 'SELECT pg_current_wal_lsn()').catch(() => null)
            if (at) marks.push({ answered, at: lsn(at) })
            await sleep(50)
          }
        },
      ].map((w) => w())
      try {
        await sleep(LOAD_MS)
        if (cut) {
          await psql(replica, replica.url, "ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=1'")
          await psql(replica, replica.url, 'SELECT pg_reload_conf()')
          await sleep(CUT_MS)
        }
        await stopCluster(primary, 'immediate')
        await sleep(300)
      } finally {
        stop = true
        await Promise.all(writers)
      }
      assert.deepEqual(unexpected, [], 'the calls on the killed primary fail with coded errors')
      assert.ok(completed.length > 0 && enqueued.length > 0 && fences.length > 3 && permitFences.length > 3, 'writes were acknowledged')

      // What the replica had when promoted: it replays all it received (the primary is gone).
      await until('the replica replays what it received', 10_000, async () => {
        const [received, replayed] = (await psql(replica, replica.url, 'SELECT pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()')).split('|')
        return lsn(replayed) >= lsn(received)
      })
      const replayed = lsn(await psql(replica, replica.url, 'SELECT pg_last_wal_replay_lsn()'))
      await promote(replica)
      const kept = marks.filter((m) => m.at <= replayed).at(-1)?.answered ?? { completed: 0, enqueued: 0, fences: 0 }

      const b = await open(replica.url)
      clients.push(b)
      assert.equal(await psql(replica, replica.url, "SELECT value FROM flowguard.meta WHERE key = 'version'"), version, 'the schema version is there')
      const items = await Promise.all(completed.map((id) => b.getItem('g', id)))
      const lostCompleted = completed.filter((id, i) => items[i].status !== 'completed')
      const waiting = new Set((await b.peek('q', { limit: 10000 })).map((e) => e.id))
      const lostEnqueued = enqueued.filter((id) => !waiting.has(id))
      const l = await b.acquireLock('L', { waitMs: LEASE_MS * 3 })
      assert.ok(l.acquired, 'the lock is taken on the promoted replica (once the lease held at the kill ends)')
      const p = await b.acquirePermit('S', { permits: 2, waitMs: LEASE_MS * 3 })
      assert.ok(p.acquired, 'a permit is taken on the promoted replica')
      const reissued = fences.filter((f) => f >= l.fence)
      const permitsReissued = permitFences.filter((f) => f >= p.fence)
      console.log(`# ${mode}: acknowledged ${completed.length} completions, ${enqueued.length} enqueues, ${fences.length} lock fences, ${permitFences.length} permit fences ` +
        `(${kept.completed}/${kept.enqueued}/${kept.fences} before a WAL position the replica had replayed, ${marks.length} positions read); ` +
        `lost after the promotion: ${lostCompleted.length} completions, ${lostEnqueued.length} enqueues; ` +
        `handed out again: ${reissued.length} lock fences (fence after: ${l.fence}, last before: ${fences.at(-1)}), ` +
        `${permitsReissued.length} permit fences (fence after: ${p.fence}, last before: ${permitFences.at(-1)}); ` +
        `calls on the dead primary: ${[...codes].map(([c, n]) => `${n} ${c}`).join(', ')}`)
      // What is guaranteed: with synchronous replication everything answered; with asynchronous,
      // what was answered before a position the replica had replayed.
      const must = sync ? { completed: completed.length, enqueued: enqueued.length, fences: fences.length } : kept
      assert.deepEqual(lostCompleted.filter((id) => completed.indexOf(id) < must.completed), [], 'acknowledged completions kept')
      assert.deepEqual(lostEnqueued.filter((id) => enqueued.indexOf(id) < must.enqueued), [], 'acknowledged enqueues kept')
      // Every fence handed out before, kept or lost (the database's clock is the floor).
      assert.ok(fences.every((f) => f < l.fence), `the lock fence after the promotion (${l.fence}) is past every one before (last ${fences.at(-1)})`)
      assert.ok(permitFences.every((f) => f < p.fence), `the permit fence after the promotion (${p.fence}) is past every one before (last ${permitFences.at(-1)})`)
      if (sync) assert.ok(must.completed > 0 && must.enqueued > 0, 'the check covered writes')

      // The promoted replica serves flowguard: claims, completions, locks.
      const c = await b.claim('g', 'after')
      assert.ok(c.claimed)
      assert.equal((await b.complete('g', 'after', { owner: c.owner })).status, 'completed')
      assert.deepEqual(await b.releaseLock('L', l.owner), { released: true })
      assert.deepEqual(await b.releasePermit('S', p.owner), { released: true })
      assert.ok((await b.acquireLock('L')).fence > l.fence)
      assert.equal((await b.enqueue('q', ['after'])).added, 1)
    } finally {
      await Promise.all(clients.map((fg) => fg.close()))
      await replica?.stop()
      primary.stop()
    }
  })
}
