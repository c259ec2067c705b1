// flowguard-server on a Redis Cluster over TLS only (__test__/redis-cluster.mjs with a CA made for
// the test; 3 primaries): rediss:// seeds in --redis-cluster-nodes, the CA trusted through
// SSL_CERT_FILE; lock, tracker, queue and state calls over HTTP land on every primary. A server
// that does not trust the CA refuses to start with a coded error naming TLS.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { haveRedis } from '../../../__test__/redis-server.mjs'
import { startCluster, cliWith, infoFields } from '../../../__test__/redis-cluster.mjs'
import { haveOpenssl, makeCerts } from '../../../__test__/tls-certs.mjs'
import { refusedStart, startServer, stopServer } from './server-process.mjs'
import { ok, poster } from './http-callers.mjs'

const skip = !(haveRedis && haveOpenssl) && 'needs redis-server and openssl'
const TOKEN = 'cluster-tls-token-0123456789'
const PREFIX = `fgsrvt${process.pid}:`

let dir
let certs
let cluster
let server
let cli
before(async () => {
  if (skip) return
  dir = mkdtempSync(join(tmpdir(), 'fg-server-cluster-tls-'))
  certs = makeCerts(dir)
  cluster = await startCluster({ replicas: 0, tls: certs })
  cli = cliWith(undefined, certs.ca)
  server = await startServer(['--redis-cluster-nodes', cluster.urls[0], '--prefix', PREFIX],
    { FLOWGUARD_TOKEN: TOKEN, SSL_CERT_FILE: certs.ca })
})
after(async () => {
  await stopServer(server)
  cluster?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test('rediss:// cluster seeds: calls over HTTP land on every primary', { skip }, async () => {
  const post = poster(server.base, TOKEN)
  for (let g = 0; g < 12; g++) {
    const l = ok(await post('/v1/lock/acquire', { name: `L${g}` }), 'lock/acquire')
    ok(await post('/v1/lock/release', { name: `L${g}`, owner: l.owner }), 'lock/release')
    const c = ok(await post('/v1/tracker/claim', { group: `g${g}`, id: 'item' }), 'tracker/claim')
    ok(await post('/v1/tracker/complete', { group: `g${g}`, id: 'item', owner: c.owner }), 'tracker/complete')
    assert.equal(ok(await post('/v1/state/increment', { key: `c${g}`, by: 2 }), 'state/increment').value, 2)
  }
  const ids = Array.from({ length: 30 }, (_, i) => `id${i}`)
  ok(await post('/v1/queue/enqueue', { queue: 'q', shards: 6, ids }), 'queue/enqueue')
  const b = ok(await post('/v1/queue/readBatch', { queue: 'q', shards: 6, limit: 100 }), 'queue/readBatch')
  assert.deepEqual([...b.ids].sort(), [...ids].sort())
  ok(await post('/v1/queue/ack', { queue: 'q', shards: 6, owner: b.owner, ids: b.ids }), 'queue/ack')
  const primaries = cluster.nodes.filter((n) => infoFields(cli(n.port, 'INFO', 'replication')).role === 'master')
  const keys = primaries.map((p) => cli(p.port, 'KEYS', `${PREFIX}*`).split('\n').filter(Boolean).length)
  assert.equal(keys.length, 3)
  assert.ok(keys.every((n) => n > 0), `keys on every primary: ${keys}`)
})

test('a server that does not trust the cluster\'s CA refuses to start, naming TLS', { skip }, async () => {
  const { code, output } = await refusedStart(['--redis-cluster-nodes', cluster.urls[0], '--connect-timeout-ms', '1000'],
    { FLOWGUARD_TOKEN: TOKEN, SSL_CERT_FILE: '/nonexistent-ca.pem' })
  assert.equal(code, 2, output)
  assert.match(output, /ERR_BACKEND_UNAVAILABLE/)
  assert.match(output, /TLS|certificate/i)
})
