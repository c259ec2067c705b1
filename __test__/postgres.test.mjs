// The PostgreSQL backend through `Flowguard.open({ postgres })`: each pattern once (lock, Job
// State, tracker, rate limiter, semaphore, Dedup Queue; the suites of each run on it with
// FLOWGUARD_BACKENDS=postgres), and its options. The tests that
// need a database run when FLOWGUARD_TEST_POSTGRES_URL is set (node scripts/postgres.mjs -- node --test
// __test__/postgres.test.mjs starts a throwaway cluster and sets it); the option checks need none.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { Flowguard, freshPrefix } from './backends.mjs'

const url = process.env.FLOWGUARD_TEST_POSTGRES_URL
const needsDb = url ? {} : { skip: 'FLOWGUARD_TEST_POSTGRES_URL is not set (node scripts/postgres.mjs -- node --test …)' }

/** The error a promise rejects with. */
async function rejection(p) {
  try {
    await p
  } catch (e) {
    return e
  }
  assert.fail('expected a rejection')
}

describe('PostgreSQL options', () => {
  test('bad options are refused by field before connecting, the URL never shown', async () => {
    const secret = 'postgres://u:hunter2@127.0.0.1:1/db'
    let e = await rejection(Flowguard.open({ postgres: { url: secret, schema: 'Bad-Name' } }))
    assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
    assert.match(e.message, /postgres\.schema/)
    e = await rejection(Flowguard.open({ postgres: { url: secret, poolSize: 0 } }))
    assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
    assert.match(e.message, /postgres\.poolSize/)
    for (const sweepIntervalMs of [50, 3600001, -1, 1.5]) {
      e = await rejection(Flowguard.open({ postgres: { url: secret, sweepIntervalMs } }))
      assert.equal(e.code, 'ERR_INVALID_ARGUMENT', `sweepIntervalMs ${sweepIntervalMs}`)
      assert.match(e.message, /postgres\.sweepIntervalMs/)
    }
    e = await rejection(Flowguard.open({ postgres: { url: secret, pool: 3 } }))
    assert.equal(e.code, 'ERR_INVALID_ARGUMENT', 'an unknown option name is refused')
    e = await rejection(Flowguard.open({ postgres: secret, url: 'redis://127.0.0.1:1' }))
    assert.equal(e.code, 'ERR_INVALID_ARGUMENT')
    assert.match(e.message, /postgres/)
    e = await rejection(Flowguard.open({ postgres: `${secret}?sslmode=allow` }))
    assert.equal(e.code, 'ERR_INVALID_ARGUMENT', 'an sslmode flowguard does not take (postgres-tls.test.mjs: the others)')
    assert.match(e.message, /postgres\.url/)
    e = await rejection(Flowguard.open({ postgres: secret, connectTimeoutMs: 500 }))
    assert.equal(e.code, 'ERR_BACKEND_UNAVAILABLE')
    assert.doesNotMatch(`${e.message} ${e.stack}`, /hunter2/)
  })
})

describe('PostgreSQL backend', needsDb, () => {
  const open = (extra = {}) => Flowguard.open({ postgres: url, prefix: freshPrefix('pg'), ...extra })

  test('a URL or an object opens it; backend is postgres', async () => {
    const a = await open()
    assert.equal(a.backend, 'postgres')
    const b = await Flowguard.open({ postgres: { url, schema: 'flowguard', poolSize: 2 }, prefix: a.prefix })
    assert.equal(b.backend, 'postgres')
    await a.close()
    await b.close()
    const e = await rejection(a.getLock('x'))
    assert.equal(e.code, 'ERR_CLOSED')
  })

  test('lock, Job State, tracker, rate limiter and semaphore answer as on the other backends', async () => {
    const fg = await open()
    const l = await fg.acquireLock('wf', { label: 'run-1' })
    assert.ok(l.acquired)
    const other = await fg.acquireLock('wf')
    assert.equal(other.acquired, false)
    assert.equal(other.holder, 'run-1')
    assert.deepEqual(await fg.releaseLock('wf', l.owner), { released: true })
    assert.ok((await fg.acquireLock('wf')).fence > l.fence)

    await fg.setState('cfg', { a: 1 })
    assert.deepEqual(await fg.getState('cfg'), { a: 1 })
    assert.equal(await fg.increment('n', 2), 2)

    const c = await fg.claim('g', 'item-1')
    assert.ok(c.claimed)
    assert.equal((await fg.claim('g', 'item-1')).claimed, false)
    await fg.complete('g', 'item-1', { owner: c.owner })
    assert.equal((await fg.getItem('g', 'item-1')).status, 'completed')

    const p = await fg.acquirePermit('pool', { permits: 1 })
    assert.ok(p.acquired)
    assert.equal((await fg.acquirePermit('pool', { permits: 1 })).acquired, false)
    assert.deepEqual(await fg.releasePermit('pool', p.owner), { released: true })

    const r = await fg.rateLimit('api', { limit: 1, periodMs: 60000 })
    assert.ok(r.allowed)
    assert.equal((await fg.rateLimit('api', { limit: 1, periodMs: 60000 })).allowed, false)
    await fg.close()
  })

  test('a schema made before the semaphore key column gets it when opened; its holders still count', async () => {
    const schema = `fgold${process.pid}`
    const a = await Flowguard.open({ postgres: { url, schema }, prefix: freshPrefix('pg') })
    const old = await a.acquirePermit('s', { permits: 2 })
    await a.close()
    // As a schema of an earlier flowguard of layout 1: no k column (psql, the cluster's own client).
    const psql = spawnSync('psql', [url, '-v', 'ON_ERROR_STOP=1', '-c', `ALTER TABLE ${schema}.sem_holders DROP COLUMN k`], { encoding: 'utf8' })
    assert.equal(psql.status, 0, psql.stderr)
    const b = await Flowguard.open({ postgres: { url, schema }, prefix: a.prefix })
    const k = await b.acquirePermit('s', { permits: 2, key: 'a', perKey: 1 })
    assert.deepEqual([k.acquired, k.holders, k.keyHolders], [true, 2, 1])
    assert.deepEqual((await b.getSemaphore('s')).keys, { a: 1 })
    assert.deepEqual(await b.releasePermit('s', old.owner), { released: true })
    await b.close()
  })

  test('a schema made before the item result and note columns gets them when opened; its items still read', async () => {
    const schema = `fgoldr${process.pid}`
    const a = await Flowguard.open({ postgres: { url, schema }, prefix: freshPrefix('pg') })
    const old = await a.claim('g', 'old')
    await a.close()
    // As a schema of an earlier flowguard of layout 1: no r and n columns.
    const drop = `ALTER TABLE ${schema}.items DROP COLUMN r, DROP COLUMN n`
    const psql = spawnSync('psql', [url, '-v', 'ON_ERROR_STOP=1', '-c', drop], { encoding: 'utf8' })
    assert.equal(psql.status, 0, psql.stderr)
    const b = await Flowguard.open({ postgres: { url, schema }, prefix: a.prefix })
    const item = await b.getItem('g', 'old')
    assert.deepEqual([item.status, 'result' in item, 'note' in item], ['in_progress', false, false])
    assert.deepEqual((await b.complete('g', 'old', { owner: old.owner, result: { n: 1 } })).result, { n: 1 })
    assert.equal((await b.claim('g', 'new', { note: 'p3' })).item.note, 'p3')
    await b.close()
  })

  test('expired rows of a group no one writes to are swept with no call; records still kept stay', async () => {
    const fg = await Flowguard.open({ postgres: { url, sweepIntervalMs: 100 }, prefix: freshPrefix('pg') })
    const quiet = await open({ postgres: { url, sweepIntervalMs: 0 } })
    const count = (group) => {
      const sql = `SELECT count(*) FROM flowguard.items WHERE ns = convert_to('${quiet.prefix}', 'UTF8') AND grp = convert_to('${group}', 'UTF8')`
      const r = spawnSync('psql', [url, '-At', '-v', 'ON_ERROR_STOP=1', '-c', sql], { encoding: 'utf8' })
      assert.equal(r.status, 0, r.stderr)
      return Number(r.stdout.trim())
    }
    // Written by a client that does not sweep: kept 300 ms after completion, and kept an hour.
    for (const [group, keepMs] of [['kept', 3_600_000], ['brief', 300]]) {
      for (const id of ['a', 'b', 'c']) {
        const c = await quiet.claim(group, id)
        await quiet.complete(group, id, { owner: c.owner, keepMs })
      }
    }
    assert.equal(count('brief'), 3)
    const started = Date.now()
    while (count('brief') > 0) {
      assert.ok(Date.now() - started < 10_000, 'expired records left 10 s after they expired')
      await new Promise((r) => setTimeout(r, 100))
    }
    assert.equal(count('kept'), 3, 'records a read still returns are kept')
    assert.equal((await quiet.getItem('kept', 'a')).status, 'completed')
    await fg.close()
    await quiet.close()
  })

  test('a process with an open client and its sweep still exits', () => {
    const code = `require('./index.js').Flowguard.open({ postgres: { url: process.env.URL, sweepIntervalMs: 100 } })
      .then(() => setTimeout(() => console.log('opened'), 300))`
    const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', env: { ...process.env, URL: url }, timeout: 20_000 })
    assert.equal(r.signal, null, 'the process did not exit by itself')
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout.trim(), 'opened')
  })

  test('the Dedup Queue: enqueue, read, ack, size', async () => {
    const fg = await open()
    const e = await fg.enqueue('q', ['a', 'b', 'a'])
    assert.deepEqual(e.items.map((i) => i.outcome), ['added', 'added', 'duplicate'])
    const batch = await fg.readBatch('q', { limit: 10 })
    assert.deepEqual(batch.ids.sort(), ['a', 'b'])
    assert.deepEqual((await fg.readBatch('q')).ids, [], 'held while the lease lasts')
    await fg.ack('q', batch.owner, batch.ids)
    assert.equal((await fg.queueSize('q')).waiting, 0)
    await fg.close()
  })
})
