// A Redis Cluster over TLS only (clients, cluster bus and replication; 3 primaries, 1 replica each,
// a CA made for the test): the client opened with rediss:// seeds trusting that CA (SSL_CERT_FILE)
// reaches every primary through the slot map, whose entries are plain host:port; a client that does
// not trust the CA is refused with a coded error naming TLS. Calls run in child processes, since
// SSL_CERT_FILE is read once per process.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { haveRedis } from './redis-server.mjs'
import { startCluster, cliWith, infoFields } from './redis-cluster.mjs'
import { haveOpenssl, makeCerts } from './tls-certs.mjs'

const skip = !(haveRedis && haveOpenssl) && 'needs redis-server and openssl'
if (process.env.CI === 'true' && skip) throw new Error(`CI=true but the cluster TLS suite cannot run: ${skip}`)
const PREFIX = `fgtls${process.pid}:`

let dir
let certs
let cluster
let cli
before(async () => {
  if (skip) return
  dir = mkdtempSync(join(tmpdir(), 'fg-cluster-tls-'))
  certs = makeCerts(dir)
  cluster = await startCluster({ tls: certs })
  cli = cliWith(undefined, certs.ca)
})
after(() => {
  cluster?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

/** Runs `body` (an async function of `fg`, source text) in a child process; its JSON result. */
function inChild(body, certFile) {
  const code = `const { Flowguard } = require(${JSON.stringify(new URL('../index.js', import.meta.url).pathname)});
    (async () => {
      let fg
      try {
        fg = await Flowguard.open({ cluster: JSON.parse(process.env.SEEDS), prefix: process.env.PREFIX, connectTimeoutMs: 2000 })
        console.log(JSON.stringify({ ok: await (${body})(fg) }))
      } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }
      finally { await fg?.close() }
    })()`
  const env = { ...process.env, SEEDS: JSON.stringify(cluster.urls.slice(0, 2)), PREFIX, SSL_CERT_FILE: certFile }
  const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', env, timeout: 30000 })
  const last = r.stdout.trim().split('\n').pop()
  assert.ok(last, `no result from the child: ${r.stderr}`)
  return JSON.parse(last)
}

test('rediss:// seeds: tracker, lock, queue and state calls land on every primary over TLS', { skip }, async () => {
  const r = inChild(`async (fg) => {
    const out = { completed: 0, fences: [], read: 0, counters: 0 }
    for (let g = 0; g < 12; g++) {
      const c = await fg.claim('g' + g, 'item')
      await fg.complete('g' + g, 'item', { owner: c.owner })
      out.completed += (await fg.getItem('g' + g, 'item')).status === 'completed' ? 1 : 0
      const l = await fg.acquireLock('L' + g)
      out.fences.push(l.fence)
      await fg.releaseLock('L' + g, l.owner)
      out.counters += await fg.increment('c' + g, 1)
    }
    const ids = Array.from({ length: 60 }, (_, i) => 'id' + i)
    await fg.enqueue('q', ids, { shards: 6 })
    const b = await fg.readBatch('q', { shards: 6, limit: 100 })
    await fg.ack('q', b.owner, b.ids, { shards: 6 })
    out.read = b.ids.length
    out.failedShards = b.failedShards ?? []
    return out
  }`, certs.ca)
  assert.ok(r.ok, JSON.stringify(r))
  assert.equal(r.ok.completed, 12)
  assert.equal(r.ok.counters, 12)
  assert.equal(r.ok.read, 60)
  assert.deepEqual(r.ok.failedShards, [])
  assert.ok(r.ok.fences.every((f) => Number.isSafeInteger(f) && f > 0), JSON.stringify(r.ok.fences))
  const primaries = cluster.nodes.filter((n) => infoFields(cli(n.port, 'INFO', 'replication')).role === 'master')
  assert.equal(primaries.length, 3)
  const keys = primaries.map((p) => cli(p.port, 'KEYS', `${PREFIX}*`).split('\n').filter(Boolean).length)
  assert.ok(keys.every((n) => n > 0), `keys on every primary: ${keys}`)
})

test('a client that does not trust the cluster\'s CA is refused, naming TLS', { skip }, async () => {
  const r = inChild(`async (fg) => fg.claim('g', 'x')`, '/nonexistent-ca.pem')
  assert.equal(r.code, 'ERR_BACKEND_UNAVAILABLE', JSON.stringify(r))
  assert.match(r.message, /TLS|certificate/i)
})
