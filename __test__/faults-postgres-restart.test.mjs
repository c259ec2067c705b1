// PostgreSQL restarted under load (issue 27): 3 clients (pools of their own) run loops of claims
// and completions, lock acquire/release pairs and Dedup Queue enqueue/read/ack on a cluster of
// this suite's own; it is stopped (`pg_ctl stop -m fast`, then `-m immediate`: a crash) and
// started again after an outage of 1.5 s. While it is down calls fail with a coded error
// (ERR_BACKEND_UNAVAILABLE, ERR_TIMEOUT), every call settles (none hangs), and once it is back
// every client's calls succeed again without being reopened (the pools drop the dead
// connections). Nothing acknowledged is lost: every completion answered reads completed, every
// enqueue answered is delivered (read then, or by the drain at the end), no id whose ack was
// answered is delivered by a read begun after that answer, and each lock's acknowledged fences
// increase. The PostgreSQL leg of `npm test` runs it (FLOWGUARD_BACKENDS=postgres).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Flowguard, freshPrefix, sleep } from './backends.mjs'
import { pgSkip, startCluster, startPostgres, stopCluster } from './postgres-server.mjs'

const CLIENTS = 3
const OUTAGE_MS = 1500
const CONNECT_TIMEOUT_MS = 500
const COMMAND_TIMEOUT_MS = 2000
const LEASE_MS = 2000
const CODED = ['ERR_BACKEND_UNAVAILABLE', 'ERR_TIMEOUT']

test('PostgreSQL stopped (fast, then immediate) and started again under load: coded errors, back within seconds, nothing acknowledged lost', { skip: pgSkip, timeout: 120_000 }, async () => {
  const unhandled = []
  const onUnhandled = (e) => unhandled.push(e)
  process.on('unhandledRejection', onUnhandled)
  const cluster = await startPostgres()
  const prefix = freshPrefix('pgrestart')
  const open = () => Flowguard.open({ postgres: { url: cluster.url, poolSize: 4 }, prefix, connectTimeoutMs: CONNECT_TIMEOUT_MS, commandTimeoutMs: COMMAND_TIMEOUT_MS })
  const clients = []
  const codes = new Map()
  const unexpected = []
  let [started, settled, ok, slowestMs] = [0, 0, 0, 0]
  // What was acknowledged: completions, enqueued ids, acks (id -> when the answer came), fences
  // of each lock in the order they were answered (one loop per lock name).
  const completed = []
  const enqueued = []
  const ackedAt = new Map()
  const delivered = new Set()
  const redelivered = []
  const fences = new Map()
  let stop = false
  const call = async (p) => {
    started++
    const t0 = Date.now()
    try {
      const v = await p()
      ok++
      return v
    } catch (e) {
      codes.set(e.code, (codes.get(e.code) || 0) + 1)
      if (!CODED.includes(e.code)) unexpected.push(`${e.code}: ${e.message}`)
      return undefined
    } finally {
      slowestMs = Math.max(slowestMs, Date.now() - t0)
      settled++
    }
  }
  /** A read's ids: none acked before the read began. */
  const received = (ids, begun) => {
    for (const id of ids) {
      if (ackedAt.has(id) && ackedAt.get(id) < begun) redelivered.push(id)
      delivered.add(id)
    }
  }
  const loop = async (fg, w, kind) => {
    for (let i = 0; !stop; i++) {
      const id = `c${w}-${kind}-${i}`
      if (kind === 'tracker') {
        const c = await call(() => fg.claim('g', id, { timeoutMs: LEASE_MS }))
        if (c?.claimed && (await call(() => fg.complete('g', id, { owner: c.owner })))) completed.push(id)
      } else if (kind === 'lock') {
        const name = `lock-${w}`
        const l = await call(() => fg.acquireLock(name, { timeoutMs: LEASE_MS }))
        if (l?.acquired) {
          fences.set(name, [...(fences.get(name) ?? []), l.fence])
          await call(() => fg.releaseLock(name, l.owner))
        }
      } else {
        const ids = [`${id}-a`, `${id}-b`]
        if (await call(() => fg.enqueue('q', ids))) enqueued.push(...ids)
        const begun = Date.now()
        const batch = await call(() => fg.readBatch('q', { limit: 4, visibilityTimeoutMs: LEASE_MS }))
        if (batch?.ids.length) {
          received(batch.ids, begun)
          const acked = await call(() => fg.ack('q', batch.owner, batch.ids))
          for (const it of acked?.items ?? []) if (it.ok) ackedAt.set(it.id, Date.now())
        }
      }
      // While the server is down failures come back at once: pace the loops a little.
      await sleep(2)
    }
  }
  const loops = []
  const restarts = []
  try {
    try {
      for (let w = 0; w < CLIENTS; w++) clients.push(await open())
      clients.forEach((fg, w) => loops.push(...['tracker', 'lock', 'queue'].map((k) => loop(fg, w, k))))
      for (const mode of ['fast', 'immediate']) {
        await sleep(1000)
        const okBefore = ok
        const failedBefore = settled - ok
        await stopCluster(cluster, mode)
        await sleep(OUTAGE_MS)
        assert.ok(settled - ok > failedBefore, `calls fail while PostgreSQL is down (${mode})`)
        await startCluster(cluster)
        const back = Date.now()
        // Each client's first success after the server is back, by a probe of its own.
        const recovered = await Promise.all(clients.map(async (fg) => {
          while (Date.now() - back < 10_000) {
            if (await fg.getLock('probe').then(() => true, () => false)) return Date.now() - back
            await sleep(20)
          }
          return null
        }))
        assert.ok(recovered.every((t) => t !== null), `every client succeeds again after the restart (${mode}): ${recovered}`)
        const okAtRecovery = ok
        await sleep(500)
        assert.ok(ok > okAtRecovery && ok > okBefore, `the loops succeed again (${mode})`)
        restarts.push({ mode, recovered })
      }
    } finally {
      stop = true
      await Promise.all(loops)
      process.off('unhandledRejection', onUnhandled)
    }
    const fg = clients[0]
    assert.equal(settled, started, 'every call settled (none hangs)')
    assert.deepEqual(unexpected, [], 'only coded errors (ERR_BACKEND_UNAVAILABLE, ERR_TIMEOUT)')
    assert.deepEqual(unhandled, [])
    // No call past its bounds: the pool's wait (the command timeout), a connect (the connect
    // timeout) and the statement (the command timeout), with room for a loaded machine.
    assert.ok(slowestMs < 2 * COMMAND_TIMEOUT_MS + CONNECT_TIMEOUT_MS + 3000, `no call hung: slowest ${slowestMs} ms`)
    // Every acknowledged completion reads completed.
    const items = await Promise.all(completed.map((id) => fg.getItem('g', id)))
    assert.deepEqual(completed.filter((id, i) => items[i].status !== 'completed'), [], 'every acknowledged completion is kept')
    // Each lock's acknowledged fences increase, and a lock taken now is past them all.
    for (const [name, fs] of fences) {
      assert.ok(fs.every((f, i) => i === 0 || f > fs[i - 1]), `${name}: fences increase (${fs.join(',')})`)
      const l = await fg.acquireLock(name, { waitMs: LEASE_MS * 2 })
      assert.ok(l.acquired && l.fence > fs.at(-1), `${name}: a fence after the restarts (${l.fence}) is past ${fs.at(-1)}`)
    }
    // Drain the queue once the claims of unanswered acks have expired: every acknowledged enqueue
    // was delivered, no answered ack's id again.
    await sleep(LEASE_MS + 200)
    for (;;) {
      const begun = Date.now()
      const batch = await fg.readBatch('q', { limit: 1000, visibilityTimeoutMs: 60_000 })
      if (batch.ids.length === 0) break
      received(batch.ids, begun)
      await fg.ack('q', batch.owner, batch.ids)
    }
    assert.deepEqual(redelivered, [], 'no id is delivered after its ack was answered')
    assert.deepEqual(enqueued.filter((id) => !delivered.has(id)), [], 'every acknowledged enqueue is delivered')
    const size = await fg.queueSize('q')
    assert.deepEqual([size.waiting, size.claimed], [0, 0])
    assert.ok(completed.length > 0 && enqueued.length > 0 && ackedAt.size > 0 && fences.size === CLIENTS, 'every kind of call was acknowledged')
    console.log(`# ${started} calls, ${ok} ok, ${[...codes].map(([c, n]) => `${n} ${c}`).join(', ')}; slowest ${slowestMs} ms; ` +
      `${completed.length} completions, ${enqueued.length} ids enqueued, ${ackedAt.size} acked, all kept; ` +
      `back after ${restarts.map((r) => `${r.mode}: ${r.recovered.join('/')} ms`).join(', ')}`)
  } finally {
    await Promise.all(clients.map((fg) => fg.close()))
    cluster.stop()
  }
})
