// flowguard-server on a Sentinel-managed Redis (__test__/redis-sentinel.mjs: a primary, a replica
// and three sentinels on loopback, with passwords on the data nodes and on the sentinels): lock
// and tracker calls over HTTP, then HTTP clients calling through `SENTINEL FAILOVER` (calls go on
// within a few seconds, nothing acknowledged is lost); bad flags and unreachable sentinels refuse
// to start with a coded error naming the flag; no password in any output.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { haveRedis } from '../../../__test__/redis-server.mjs'
import { startSentinelSet } from '../../../__test__/redis-sentinel.mjs'
import { freePort, refusedStart, startServer, stopServer } from './server-process.mjs'
import { callers, ok, poster } from './http-callers.mjs'

const skip = !haveRedis && 'redis-server is not installed'
const TOKEN = 'sentinel-test-token-0123456789'
const DATA_PASSWORD = 'data-pw-7f3a9c'
const SENTINEL_PASSWORD = 'sentinel-pw-1e8d42'
const NAME = 'fgserver'
const PREFIX = `fgsrv${process.pid}:`
/** The longest an HTTP client may see its calls failing during the failover. */
const MAX_OUTAGE_MS = 5000
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

let set
let dir
let server

/** The flags and environment of a server on the set (the data password in a file). */
function sentinelConfig() {
  const passwordFile = join(dir, 'redis-password')
  writeFileSync(passwordFile, `${DATA_PASSWORD}\n`)
  return {
    args: [
      '--redis-sentinel-master', NAME,
      '--redis-sentinel-nodes', set.sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
      '--redis-password-file', passwordFile,
      '--prefix', PREFIX,
      '--command-timeout-ms', '2000',
      // Each call answered once the replica holds it: a failover then loses nothing acknowledged
      // (without it a write the old primary ran just before the promotion can be lost).
      '--redis-sentinel-replica-acks', '1',
    ],
    env: { FLOWGUARD_TOKEN: TOKEN, FLOWGUARD_REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD, FLOWGUARD_LOG: 'debug' },
  }
}

before(async () => {
  if (skip) return
  dir = mkdtempSync(join(tmpdir(), 'fg-server-sentinel-'))
  set = await startSentinelSet({ name: NAME, password: DATA_PASSWORD, sentinelPassword: SENTINEL_PASSWORD })
  const { args, env } = sentinelConfig()
  server = await startServer(args, env)
})

after(async () => {
  await stopServer(server)
  if (server) {
    const out = server.output()
    assert.ok(!out.includes(DATA_PASSWORD) && !out.includes(SENTINEL_PASSWORD), `a password in the server's output: ${out}`)
  }
  await set?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

/** POST to the server; `{ status, body }`. */
const post = (path, body) => poster(server.base, TOKEN)(path, body)

/** A lock acquire + release and a tracker claim + complete of `id`; throws a failed call's answer. */
async function lockAndTrack(lock, id) {
  const l = ok(await post('/v1/lock/acquire', { name: lock, timeoutMs: 5000 }), 'lock/acquire')
  ok(await post('/v1/lock/release', { name: lock, owner: l.owner }), 'lock/release')
  const c = ok(await post('/v1/tracker/claim', { group: 'g', id }), 'tracker/claim')
  ok(await post('/v1/tracker/complete', { group: 'g', id, owner: c.owner }), 'tracker/complete')
}

test('lock and tracker calls over HTTP reach the primary the sentinels name', { skip }, async () => {
  await lockAndTrack('L', 'first')
  const item = await post('/v1/tracker/getItem', { group: 'g', id: 'first' })
  assert.equal(item.body.status, 'completed', JSON.stringify(item.body))
  assert.ok(set.dataCli(set.primaryPort(), 'KEYS', `${PREFIX}*`).length > 0, 'keys are on the primary')
  assert.equal((await fetch(`${server.base}/readyz`)).status, 200)
})

test('HTTP calls go on through SENTINEL FAILOVER: nothing acknowledged lost', { skip, timeout: 60_000 }, async () => {
  const WORKERS = 4
  const acked = []
  // A lock of its own per round: an acquire answered "unavailable" (run on a primary demoted
  // before its replicas confirmed it, or on the new one before it had a replica) may still hold
  // its lock, as it should, until its lease ends; the next round must not wait for it.
  const clients = callers(WORKERS, async (w, i) => {
    await lockAndTrack(`L${w}-${i}`, `w${w}-${i}`)
    acked.push(`w${w}-${i}`)
  })
  await sleep(500)
  const before = acked.length
  const t0 = Date.now()
  const first = set.primaryPort()
  const second = await set.failover()
  const switched = Date.now() - t0
  // The new primary's only replica is the old primary once converted (rejoin does it at once):
  // until then calls are unconfirmed and fail.
  await set.rejoin(first)
  await sleep(1500)
  const { codes, longest } = await clients.stop()
  console.log(`# server on sentinels: new primary named after ${switched} ms; failures ${JSON.stringify(codes)}; ` +
    `longest run of failing calls ${longest} ms; acknowledged ${acked.length} (${acked.length - before} after the failover began)`)
  assert.notEqual(second, first)
  assert.ok(acked.length > before, 'calls went on after the failover')
  assert.ok(longest < MAX_OUTAGE_MS, `calls failed for ${longest} ms`)

  // After the failover: the same server answers on the new primary, and every acknowledged
  // item is completed there.
  await lockAndTrack('after', 'after-failover')
  const items = []
  for (let i = 0; i < acked.length; i += 1000) {
    const r = await post('/v1/tracker/getItems', { group: 'g', ids: acked.slice(i, i + 1000) })
    assert.equal(r.status, 200, JSON.stringify(r.body))
    items.push(...r.body)
  }
  assert.deepEqual(items.filter((s) => s.status !== 'completed').map((s) => s.id), [], 'every acknowledged item stays completed')
  assert.equal(set.role(second), 'master')
})

test('bad sentinel flags and unreachable sentinels: the server refuses to start, naming the flag, without a password', { skip }, async () => {
  const base = ['--redis-sentinel-master', NAME]
  const env = { FLOWGUARD_REDIS_PASSWORD: DATA_PASSWORD, FLOWGUARD_REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD }
  const cases = [
    [[...base, '--redis-sentinel-nodes', '127.0.0.1:26379,nohostport'], 'ERR_INVALID_ARGUMENT: --redis-sentinel-nodes[1] must be host:port'],
    [['--redis-sentinel-master', 'a b', '--redis-sentinel-nodes', '127.0.0.1:26379'], 'ERR_INVALID_ARGUMENT: --redis-sentinel-master must be'],
    [[...base, '--redis-sentinel-nodes', '127.0.0.1:26379', '--redis-db=-1'], 'ERR_INVALID_ARGUMENT: --redis-db must be 0 or more'],
    [[...base, '--redis-sentinel-nodes', '127.0.0.1:26379', '--redis-url', 'redis://127.0.0.1:1'], '--redis-url'],
    [[...base, '--redis-sentinel-nodes', '127.0.0.1:26379', '--redis-password-file', join(dir, 'none')], 'ERR_INVALID_ARGUMENT: --redis-password-file cannot read', { FLOWGUARD_REDIS_PASSWORD: undefined }],
  ]
  const dead = [await freePort(), await freePort()]
  cases.push([[...base, '--redis-sentinel-nodes', dead.map((p) => `127.0.0.1:${p}`).join(','), '--connect-timeout-ms', '300'], 'ERR_BACKEND_UNAVAILABLE'])
  for (const [args, expected, extra] of cases) {
    const { code, output } = await refusedStart(args, { ...env, ...extra })
    assert.equal(code, 2, `${args.join(' ')}: exit ${code}: ${output}`)
    assert.ok(output.includes(expected), `${args.join(' ')}: ${output} names ${expected}`)
    assert.ok(!output.includes(DATA_PASSWORD) && !output.includes(SENTINEL_PASSWORD), output)
  }
})
