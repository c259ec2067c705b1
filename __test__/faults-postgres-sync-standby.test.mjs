// A synchronous standby away (issue 27): with `synchronous_standby_names = '*'` a COMMIT waits
// for the standby, and PostgreSQL's statement_timeout (the client's command timeout) does not
// bound that wait (it is switched off before the commit runs): with the standby stopped, writes
// hung for as long as it was away. Cancelling the wait is no way out: PostgreSQL then answers the
// COMMIT as done, with only a WARNING that the standby has not confirmed it. So a write the
// standby never confirmed must fail within the command timeout (ERR_TIMEOUT: applied or not,
// unknown), and whatever was acknowledged must be on the standby once it is promoted after the
// primary is killed. The PostgreSQL leg of `npm test` runs it (FLOWGUARD_BACKENDS=postgres).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Flowguard, freshPrefix, sleep } from './backends.mjs'
import { pgSkip, promote, startCluster, startPostgres, startReplica, stopCluster, streaming } from './postgres-server.mjs'

const CODED = ['ERR_BACKEND_UNAVAILABLE', 'ERR_TIMEOUT']

test('synchronous replication with the standby away: a write it never confirmed is not acknowledged, and the promoted standby holds every acknowledged one', { skip: pgSkip, timeout: 120_000 }, async () => {
  const COMMAND_TIMEOUT_MS = 1000
  const primary = await startPostgres()
  let replica = null
  const clients = []
  const prefix = freshPrefix('pgsyncaway')
  const open = (url) => Flowguard.open({ postgres: { url, poolSize: 3 }, prefix, connectTimeoutMs: 500, commandTimeoutMs: COMMAND_TIMEOUT_MS })
  try {
    const a = await open(primary.url)
    clients.push(a)
    replica = await startReplica(primary)
    await streaming(primary, { sync: true })
    const before = await a.acquireLock('before')
    assert.ok(before.acquired)
    // The standby goes away: commits now wait for it.
    await stopCluster(replica, 'fast')
    // Each call settles within its bounds (the pool's wait, the statement, the commit: each the
    // command timeout), with room for a loaded machine; one that does not is a hang.
    const bound = COMMAND_TIMEOUT_MS * 3 + 3000
    const outcomes = {}
    await Promise.all([
      ['lock', () => a.acquireLock('W')],
      ['enqueue', () => a.enqueue('q', ['x'])],
      ['claim', () => a.claim('g', 'x')],
    ].map(async ([what, p]) => {
      const t0 = Date.now()
      const settled = p().then((v) => ({ v }), (e) => ({ code: e.code, message: e.message }))
      outcomes[what] = { ...(await Promise.race([settled, sleep(bound).then(() => ({ hung: true }))])), ms: Date.now() - t0 }
    }))
    // The connections left in their COMMIT are out of the pool (its 3 are new ones): a read, which
    // waits for no standby, is answered at once.
    const read = await Promise.race([a.getLock('before').then((v) => v, (e) => e), sleep(bound).then(() => ({ message: `no answer within ${bound} ms` }))])
    // The primary is killed before the standby comes back; the standby is promoted.
    await stopCluster(primary, 'immediate')
    await startCluster(replica)
    await promote(replica)
    const b = await open(replica.url)
    clients.push(b)
    const kept = {
      lock: (await b.getLock('W')).locked,
      enqueue: (await b.peek('q')).some((e) => e.id === 'x'),
      claim: (await b.getItem('g', 'x')).status === 'in_progress',
    }
    console.log(`# standby away: ${JSON.stringify(outcomes)}; on the promoted standby: ${JSON.stringify(kept)}`)
    for (const [what, o] of Object.entries(outcomes)) {
      assert.ok(!o.hung, `${what}: no answer within ${bound} ms`)
      if (o.code) assert.ok(CODED.includes(o.code), `${what}: a coded error (${o.code}: ${o.message})`)
      else assert.ok(kept[what], `${what} was acknowledged, so the promoted standby must hold it`)
    }
    assert.equal(read.locked, true, `a read on the same client while the standby is away: ${read.code ?? ''} ${read.message ?? ''}`)
    assert.ok((await b.getLock('before')).locked, 'what the standby confirmed is kept')
  } finally {
    await Promise.all(clients.map((fg) => fg.close()))
    await replica?.stop()
    primary.stop()
  }
})
