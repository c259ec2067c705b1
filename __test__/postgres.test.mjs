// The PostgreSQL backend through `Flowguard.open({ postgres })`: each pattern once (lock, Job
// State, tracker, rate limiter, semaphore, Dedup Queue; the suites of each run on it with
// FLOWGUARD_BACKENDS=postgres), and its options. The tests that
// need a database run when FLOWGUARD_TEST_POSTGRES_URL is set (node scripts/postgres.mjs -- node --test
// __test__/postgres.test.mjs starts a throwaway cluster and sets it); the option checks need none.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
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
