// flowguard-server on PostgreSQL (--postgres-url; FLOWGUARD_TEST_POSTGRES_URL: a throwaway cluster of
// scripts/postgres.mjs, which scripts/test.mjs starts): a lock, a tracker item, a Job State value
// and a queue over HTTP, shared by two servers on the same schema and not seen by one on another;
// bad flags and an unreachable database refuse to start with a coded error naming the flag; the
// URL's password in no output.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { freePort, refusedStart, startServer, stopServer } from './server-process.mjs'
import { ok, poster } from './http-callers.mjs'

const given = process.env.FLOWGUARD_TEST_POSTGRES_URL
if (process.env.CI === 'true' && !given) throw new Error('CI=true but FLOWGUARD_TEST_POSTGRES_URL is not set (scripts/postgres.mjs)')
const skip = !given && 'needs FLOWGUARD_TEST_POSTGRES_URL (node scripts/postgres.mjs -- node --test …)'
const TOKEN = 'postgres-test-token-0123456789'
const PASSWORD = 'pg-pw-5c0e91d7'
const SCHEMA = `fgsrv${process.pid}`
const PREFIX = `fgsrv${process.pid}:`

/** FLOWGUARD_TEST_POSTGRES_URL with a password (the test cluster trusts loopback: it is not checked). */
function withPassword(url, password = PASSWORD) {
  const u = new URL(url)
  u.password = password
  return u.toString()
}

let servers = []

async function start(extra = [], schema = SCHEMA) {
  const s = await startServer(['--prefix', PREFIX, '--postgres-schema', schema, ...extra], {
    FLOWGUARD_TOKEN: TOKEN,
    // The server's own variable (its password never shown): --postgres-url by the environment.
    FLOWGUARD_POSTGRES_URL: withPassword(given),
    FLOWGUARD_LOG: 'debug',
  })
  servers.push(s)
  return { ...s, post: poster(s.base, TOKEN) }
}

let a
let b

before(async () => {
  if (skip) return
  ;[a, b] = [await start(), await start(['--postgres-pool-size', '2'])]
})

after(async () => {
  for (const s of servers) {
    await stopServer(s)
    const out = s.output()
    assert.ok(!out.includes(PASSWORD), `the password in the server's output: ${out}`)
  }
})

test('calls over HTTP on PostgreSQL, seen by a second server on the same schema', { skip }, async () => {
  const ready = await fetch(`${a.base}/readyz`)
  assert.deepEqual([ready.status, await ready.json()], [200, { status: 'ready', backend: 'postgres' }])

  const l = ok(await a.post('/v1/lock/acquire', { name: 'L', timeoutMs: 60_000 }), 'lock/acquire')
  const held = await b.post('/v1/lock/acquire', { name: 'L', timeoutMs: 60_000 })
  assert.equal(held.status, 409, JSON.stringify(held.body))
  assert.equal(held.body.code, 'ERR_LOCK_HELD')
  assert.equal(held.body.fence, l.fence)
  assert.deepEqual(ok(await b.post('/v1/lock/release', { name: 'L', owner: l.owner }), 'lock/release'), { released: true })

  const c = ok(await b.post('/v1/tracker/claim', { group: 'g', id: 'i1' }), 'tracker/claim')
  assert.equal(c.claimed, true)
  ok(await a.post('/v1/tracker/complete', { group: 'g', id: 'i1', owner: c.owner }), 'tracker/complete')
  assert.equal(ok(await b.post('/v1/tracker/getItem', { group: 'g', id: 'i1' }), 'getItem').status, 'completed')

  assert.equal(ok(await a.post('/v1/state/set', { key: 'k', value: { n: 1 } }), 'state/set').written, true)
  assert.deepEqual(ok(await b.post('/v1/state/get', { key: 'k' }), 'state/get'), { key: 'k', found: true, value: { n: 1 } })

  const e = ok(await a.post('/v1/queue/enqueue', { queue: 'q', ids: ['x', 'y', 'x'] }), 'enqueue')
  assert.deepEqual([e.added, e.duplicates], [2, 1], JSON.stringify(e))
  const r = ok(await b.post('/v1/queue/readBatch', { queue: 'q', limit: 10, visibilityTimeoutMs: 60_000 }), 'readBatch')
  assert.deepEqual(r.ids.sort(), ['x', 'y'])
  const acked = ok(await a.post('/v1/queue/ack', { queue: 'q', owner: r.owner, ids: r.ids }), 'ack')
  assert.deepEqual([acked.done, acked.refused], [2, 0], JSON.stringify(acked))
  assert.equal(ok(await b.post('/v1/queue/size', { queue: 'q' }), 'size').waiting, 0)

  // Another schema is another store.
  const other = await start([], `${SCHEMA}_other`)
  assert.equal(ok(await other.post('/v1/state/get', { key: 'k' }), 'state/get').found, false)
})

test('bad PostgreSQL flags and an unreachable database: the server refuses to start, naming the flag, without the password', { skip }, async () => {
  const url = withPassword(given)
  const dead = new URL(url)
  dead.port = String(await freePort())
  const cases = [
    [['--postgres-url', url, '--postgres-schema', 'Bad-Schema'], 'ERR_INVALID_ARGUMENT: --postgres-schema must be'],
    [['--postgres-url', url, '--postgres-pool-size', '0'], 'ERR_INVALID_ARGUMENT: --postgres-pool-size must be'],
    [['--postgres-url', `postgres://flowguard:${PASSWORD}@/postgres`], 'ERR_INVALID_ARGUMENT: --postgres-url names no host'],
    [['--postgres-url', `postgres://flowguard:${PASSWORD}@127.0.0.1:port/postgres`], 'ERR_INVALID_ARGUMENT: --postgres-url is not'],
    [['--postgres-url', url, '--redis-url', 'redis://127.0.0.1:1'], '--postgres-url'],
    [['--postgres-url', url, '--path', 'x.db'], '--postgres-url'],
    [['--postgres-schema', 'fg'], '--postgres-url'],
    [['--postgres-url', dead.toString(), '--connect-timeout-ms', '300'], 'ERR_BACKEND_UNAVAILABLE'],
  ]
  for (const [args, expected] of cases) {
    const { code, output } = await refusedStart(args, { FLOWGUARD_TEST_POSTGRES_URL: undefined })
    assert.equal(code, 2, `${args.join(' ')}: exit ${code}: ${output}`)
    assert.ok(output.includes(expected), `${output} names ${expected}`)
    assert.ok(!output.includes(PASSWORD), output)
  }
})
