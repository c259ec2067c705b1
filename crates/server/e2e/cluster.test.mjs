// flowguard-server on a Redis Cluster (__test__/redis-cluster.mjs: 3 primaries and 3 replicas on
// loopback, a password on every node given to the server in a file): lock, tracker and queue calls
// over HTTP whose keys land on every primary; the listing routes and the state gauges answer a
// coded refusal, never a crash; then HTTP clients calling through `CLUSTER FAILOVER` on a replica
// and then a SIGKILL of the promoted primary (the longest run of failing calls is printed; nothing
// acknowledged is lost); bad flags and
// unreachable nodes refuse to start with a coded error naming the flag; no password in any output.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { haveRedis } from '../../../__test__/redis-server.mjs'
import { startCluster, cli, cliWith, infoFields } from '../../../__test__/redis-cluster.mjs'
import { freePort, refusedStart, startServer, stopServer } from './server-process.mjs'
import { callers, ok, poster } from './http-callers.mjs'

const skip = !haveRedis && 'redis-server is not installed'
const TOKEN = 'cluster-test-token-0123456789'
const PASSWORD = 'cluster-pw-5b0e7d'
const PREFIX = `fgsrvc${process.pid}:`
/** The longest an HTTP client may see its calls failing during the failover. */
const MAX_OUTAGE_MS = 5000
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const authed = cliWith(PASSWORD)

let cluster
let dir
let server

before(async () => {
  if (skip) return
  dir = mkdtempSync(join(tmpdir(), 'fg-server-cluster-'))
  cluster = await startCluster({ nodeTimeoutMs: 1000 })
  // A password on every node (replicas authenticate to their primary with masterauth first).
  for (const n of cluster.nodes) cli(n.port, 'CONFIG', 'SET', 'masterauth', PASSWORD)
  for (const n of cluster.nodes) cli(n.port, 'CONFIG', 'SET', 'requirepass', PASSWORD)
  const passwordFile = join(dir, 'redis-password')
  writeFileSync(passwordFile, `${PASSWORD}\n`)
  server = await startServer([
    // Two seeds are enough: the slot map names the other nodes.
    '--redis-cluster-nodes', cluster.nodes.slice(0, 2).map((n) => `127.0.0.1:${n.port}`).join(','),
    '--redis-password-file', passwordFile,
    '--prefix', PREFIX,
    '--command-timeout-ms', '2000',
  ], { FLOWGUARD_TOKEN: TOKEN, FLOWGUARD_LOG: 'debug' })
})

after(async () => {
  await stopServer(server)
  if (server) assert.ok(!server.output().includes(PASSWORD), `the password in the server's output: ${server.output()}`)
  cluster?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

/** The live nodes by role: [{ port, role }]. */
function roles() {
  return cluster.nodes
    .filter((n) => n.proc.exitCode === null && n.proc.signalCode === null)
    .map((n) => ({ port: n.port, role: infoFields(authed(n.port, 'INFO', 'replication')).role }))
}

/** POST to the server; `{ status, body }`. */
const post = (path, body) => poster(server.base, TOKEN)(path, body)

const QUEUE = { queue: 'q', shards: 3 }

/**
 * One round of a client: a lock acquire + release, a tracker claim + complete of `id` in `group`,
 * `id` enqueued, and a batch read and acknowledged. `seen` records what the server acknowledged.
 */
async function round(lock, group, id, seen) {
  // An acquire answered by a failure may still have landed (its reply lost to the failover): its
  // hold is nobody's, so the lease is short and the next acquire waits it out.
  const l = ok(await post('/v1/lock/acquire', { name: lock, timeoutMs: 1000, waitMs: 3000 }), 'lock/acquire')
  ok(await post('/v1/lock/release', { name: lock, owner: l.owner }), 'lock/release')
  const c = ok(await post('/v1/tracker/claim', { group, id }), 'tracker/claim')
  ok(await post('/v1/tracker/complete', { group, id, owner: c.owner }), 'tracker/complete')
  seen.tracked.push([group, id])
  ok(await post('/v1/queue/enqueue', { ...QUEUE, ids: [id] }), 'queue/enqueue')
  seen.enqueued.push(id)
  const b = ok(await post('/v1/queue/readBatch', { ...QUEUE, limit: 5, visibilityTimeoutMs: 1000 }), 'queue/readBatch')
  // A batch handed out is delivered (at least once): an id whose ack fails is handed out again.
  for (const x of b.ids) seen.delivered.add(x)
  if (b.ids.length) ok(await post('/v1/queue/ack', { ...QUEUE, owner: b.owner, ids: b.ids }), 'queue/ack')
}

test('lock, tracker and queue calls over HTTP land on every primary; listing is refused with a code', { skip }, async () => {
  const seen = { tracked: [], enqueued: [], delivered: new Set() }
  for (let i = 0; i < 12; i++) await round(`L${i}`, `g${i}`, `first-${i}`, seen)
  const primaries = roles().filter((r) => r.role === 'master')
  assert.equal(primaries.length, 3)
  const keys = primaries.map((p) => authed(p.port, 'KEYS', `${PREFIX}*`).split('\n').filter(Boolean).length)
  assert.ok(keys.every((n) => n > 0), `keys on every primary: ${keys}`)
  const item = await post('/v1/tracker/getItem', { group: 'g3', id: 'first-3' })
  assert.equal(item.body.status, 'completed', JSON.stringify(item.body))
  assert.equal((await fetch(`${server.base}/readyz`)).status, 200)

  // Listing needs a SCAN of every primary: refused with a code, and the server goes on.
  for (const path of ['/v1/tracker/listGroups', '/v1/lock/list', '/v1/queue/list']) {
    const r = await post(path, {})
    assert.equal(r.status, 400, `${path}: ${JSON.stringify(r.body)}`)
    assert.equal(r.body.code, 'ERR_UNSUPPORTED', `${path}: ${JSON.stringify(r.body)}`)
  }
  const metrics = await fetch(`${server.base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
  assert.equal(metrics.status, 200)
  assert.match(await metrics.text(), /^flowguard_state_up 0$/m, 'the state gauges are left out, the scrape answered')
  assert.equal((await fetch(`${server.base}/`)).status, 200, 'the dashboard page')
  assert.equal((await fetch(`${server.base}/healthz`)).status, 200)
})

test('HTTP calls go on through CLUSTER FAILOVER and a killed primary: nothing acknowledged lost', { skip, timeout: 90_000 }, async () => {
  const WORKERS = 3
  const seen = { tracked: [], enqueued: [], delivered: new Set() }
  const clients = callers(WORKERS, (w, i) => round(`L${w}`, `g${w}`, `w${w}-${i}`, seen))
  await sleep(500)
  const before = seen.tracked.length
  const before0 = seen.tracked.filter(([g]) => g === 'g0').length
  // The replica of the primary holding worker 0's group (`…{…:g0}…` keys).
  const owner = roles().find((r) => r.role === 'master' && authed(r.port, 'KEYS', `${PREFIX}*`).includes(':g0}'))
  const replica = roles().find((r) => r.role === 'slave' && Number(infoFields(authed(r.port, 'INFO', 'replication')).master_port) === owner.port)
  const t0 = Date.now()
  assert.equal(authed(replica.port, 'CLUSTER', 'FAILOVER'), 'OK')
  for (let i = 0; infoFields(authed(replica.port, 'INFO', 'replication')).role !== 'master'; i++) {
    assert.ok(i < 200, 'the replica was not promoted within 10 s')
    await sleep(50)
  }
  const promoted = Date.now() - t0
  await sleep(1500)
  assert.equal(infoFields(authed(owner.port, 'INFO', 'replication')).role, 'slave', 'the old primary is a replica now')
  const afterManual = seen.tracked.filter(([g]) => g === 'g0').length

  // The promoted primary killed: the old primary, its replica now, takes over once the others
  // mark the dead node failed (cluster-node-timeout 1 s).
  const t1 = Date.now()
  cluster.nodes.find((n) => n.port === replica.port).proc.kill('SIGKILL')
  for (let i = 0; infoFields(authed(owner.port, 'INFO', 'replication')).role !== 'master'; i++) {
    assert.ok(i < 300, 'the old primary was not promoted again within 15 s of the kill')
    await sleep(50)
  }
  const repromoted = Date.now() - t1
  await sleep(1500)
  const { codes, longest } = await clients.stop()
  const stoppedAt = Date.now()

  // What a failed readBatch or ack left claimed is handed out again after its visibility timeout.
  for (;;) {
    const b = ok(await post('/v1/queue/readBatch', { ...QUEUE, limit: 500, visibilityTimeoutMs: 60_000 }), 'drain')
    for (const x of b.ids) seen.delivered.add(x)
    if (b.ids.length) ok(await post('/v1/queue/ack', { ...QUEUE, owner: b.owner, ids: b.ids }), 'drain ack')
    else if (Date.now() - stoppedAt > 1500) break
    else await sleep(100)
  }
  const lost = seen.enqueued.filter((id) => !seen.delivered.has(id))
  const items = []
  for (let w = 0; w < WORKERS; w++) {
    const ids = seen.tracked.filter(([g]) => g === `g${w}`).map(([, id]) => id)
    for (let i = 0; i < ids.length; i += 1000) {
      items.push(...ok(await post('/v1/tracker/getItems', { group: `g${w}`, ids: ids.slice(i, i + 1000) }), 'getItems'))
    }
  }
  const notCompleted = items.filter((s) => s.status !== 'completed').map((s) => s.id)
  console.log(`# server on a cluster: replica ${replica.port} promoted after ${promoted} ms; killed, ${owner.port} promoted again after ${repromoted} ms; failures ${JSON.stringify(codes)}; ` +
    `longest run of failing calls ${longest} ms; rounds acknowledged ${seen.tracked.length} (${seen.tracked.length - before} after the failover began); ` +
    `queue: ${seen.enqueued.length} enqueued, ${lost.length} lost; tracker: ${notCompleted.length} of ${items.length} not completed`)
  assert.ok(afterManual > before0, 'calls on the failed-over slots went on after CLUSTER FAILOVER')
  assert.ok(seen.tracked.filter(([g]) => g === 'g0').length > afterManual, 'calls on those slots went on after the kill')
  assert.ok(longest < MAX_OUTAGE_MS, `calls failed for ${longest} ms`)
  assert.deepEqual(lost, [], 'every acknowledged enqueue is handed out')
  assert.deepEqual(notCompleted, [], 'every acknowledged item stays completed')
  const size = ok(await post('/v1/queue/size', QUEUE), 'size')
  assert.deepEqual([size.waiting, size.claimed], [0, 0], 'the queue is drained')
})

test('bad cluster flags and unreachable nodes: the server refuses to start, naming the flag, without a password', { skip }, async () => {
  const node = `127.0.0.1:${cluster.nodes[0].port}`
  const env = { FLOWGUARD_REDIS_PASSWORD: PASSWORD }
  const dead = [await freePort(), await freePort()].map((p) => `127.0.0.1:${p}`).join(',')
  const cases = [
    [['--redis-cluster-nodes', `${node},nohostport`], 'ERR_INVALID_ARGUMENT: --redis-cluster-nodes[1] must be host:port'],
    [['--redis-cluster-nodes', `${node},redis://:${PASSWORD}@${node}`], 'ERR_INVALID_ARGUMENT: --redis-cluster-nodes[1] holds credentials'],
    [['--redis-cluster-nodes', `${node},rediss://${node}`], 'ERR_INVALID_ARGUMENT: --redis-cluster-nodes[1] must use the same scheme'],
    [['--redis-cluster-nodes', node, '--redis-url', `redis://${node}`], '--redis-url'],
    [['--redis-cluster-nodes', node, '--redis-sentinel-master', 'm', '--redis-sentinel-nodes', node], '--redis-sentinel-master'],
    [['--redis-cluster-nodes', node, '--redis-password-file', join(dir, 'none')], 'ERR_INVALID_ARGUMENT: --redis-password-file cannot read', { FLOWGUARD_REDIS_PASSWORD: undefined }],
    [['--redis-cluster-nodes', node], 'ERR_BACKEND_UNAVAILABLE', { FLOWGUARD_REDIS_PASSWORD: 'wrong-password' }],
    [['--redis-cluster-nodes', dead, '--connect-timeout-ms', '300'], 'ERR_BACKEND_UNAVAILABLE'],
  ]
  for (const [args, expected, extra] of cases) {
    const { code, output } = await refusedStart(args, { ...env, ...extra })
    assert.equal(code, 2, `${args.join(' ')}: exit ${code}: ${output}`)
    assert.ok(output.includes(expected), `${args.join(' ')}: ${output} names ${expected}`)
    assert.ok(!output.includes(PASSWORD) && !output.includes('wrong-password'), output)
  }
})
