// Sentinel-managed Redis, on a throwaway set of its own on loopback: a primary, a replica and
// three sentinels (quorum 2, down-after 1 s). The four patterns through the `sentinel` option;
// clients calling through `SENTINEL FAILOVER` and through a SIGKILLed primary: calls go on on the
// new primary within a few seconds, nothing acknowledged is lost (the longest run of failing
// calls and the failures' codes are printed); bad options are coded errors.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Flowguard, freshPrefix, sleep, rejection } from './backends.mjs'
import { haveRedis, freePort, waitForPort, startRedis, stopRedis } from './redis-server.mjs'
import { cli, infoFields } from './redis-cluster.mjs'

const skip = !haveRedis && 'redis-server is not installed'
const NAME = 'fgmain'
/** The longest a client may see its calls failing during a failover. */
const MAX_OUTAGE_MS = 5000

let dir
const data = [] // [{ port, proc }]
const sentinels = [] // [{ port, proc }]
let nodes // sentinel URLs

before(async () => {
  if (skip) return
  dir = mkdtempSync(join(tmpdir(), 'fg-sentinel-'))
  const primary = await freePort()
  data.push({ port: primary, proc: await startRedis(primary, ['--dir', dir]) })
  const replica = await freePort()
  data.push({ port: replica, proc: await startRedis(replica, ['--dir', dir, '--replicaof', '127.0.0.1', String(primary)]) })
  await until(() => infoFields(cli(replica, 'INFO', 'replication')).master_link_status === 'up', 10000, 'the replica to sync')
  for (let i = 0; i < 3; i++) {
    const port = await freePort()
    const conf = join(dir, `sentinel-${port}.conf`)
    writeFileSync(conf, [
      `port ${port}`, 'bind 127.0.0.1', `dir ${dir}`,
      `sentinel monitor ${NAME} 127.0.0.1 ${primary} 2`,
      `sentinel down-after-milliseconds ${NAME} 1000`,
      `sentinel failover-timeout ${NAME} 3000`,
      '',
    ].join('\n'))
    const proc = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' })
    sentinels.push({ port, proc })
    if (!(await waitForPort(port))) throw new Error(`sentinel on port ${port} did not start`)
  }
  // A failover needs the sentinels to know each other (quorum, leader election) and the replica.
  await until(() => sentinels.every((s) => {
    const m = infoFields(cli(s.port, 'INFO', 'sentinel').replace(/,/g, '\n').replace(/=/g, ':'))
    return m.slaves === '1' && m.sentinels === '3'
  }), 20000, 'the sentinels to find the replica and each other')
  nodes = sentinels.map((s) => `redis://127.0.0.1:${s.port}`)
})

after(async () => {
  for (const p of [...data, ...sentinels]) await stopRedis(p.proc)
  if (dir) rmSync(dir, { recursive: true, force: true })
})

/** Waits until `ok()` holds (checked every 50 ms, for at most `ms`). */
async function until(ok, ms, what) {
  const t0 = Date.now()
  while (!(await ok())) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

/** The port the sentinels name as the primary (all of them agreeing), else null. */
function primaryPort() {
  const seen = new Set(sentinels.filter((s) => s.proc.exitCode === null).map((s) => cli(s.port, 'SENTINEL', 'get-master-addr-by-name', NAME).split('\n')[1]))
  return seen.size === 1 ? Number([...seen][0]) : null
}

function role(port) {
  return infoFields(cli(port, 'INFO', 'replication')).role
}

const open = (extra = {}) => Flowguard.open({ sentinel: { masterName: NAME, nodes }, prefix: freshPrefix('sentinel'), ...extra })

test('the four patterns work through the sentinel option', { skip }, async () => {
  const fg = await open()
  assert.equal(fg.backend, 'redis')
  const lock = await fg.acquireLock('L')
  assert.ok(lock.acquired)
  assert.deepEqual(await fg.releaseLock('L', lock.owner), { released: true })
  const c = await fg.claim('g', 'item-1')
  assert.ok(c.claimed)
  assert.equal((await fg.complete('g', 'item-1', { owner: c.owner })).status, 'completed')
  await fg.enqueue('q', ['a', 'b', 'c'])
  assert.deepEqual((await fg.readBatch('q', { limit: 10 })).ids.sort(), ['a', 'b', 'c'])
  await fg.setState('k', { n: 1 })
  assert.deepEqual(await fg.getState('k'), { n: 1 })
  // Written to the primary the sentinels name, and replicated.
  const key = cli(primaryPort(), 'KEYS', `${fg.prefix}*`)
  assert.ok(key.length > 0, 'keys are on the primary')
  await fg.close()
})

/**
 * Clients calling lock and tracker calls in a loop while `fault()` runs; returns what was
 * acknowledged, the failures by code and the longest run of failing calls after `fault` began.
 */
async function underLoad(tag, fault) {
  const prefix = freshPrefix(`sentinel-${tag}`)
  const WORKERS = 4
  const clients = await Promise.all(Array.from({ length: WORKERS }, () => open({ prefix, commandTimeoutMs: 2000 })))
  const acked = []
  const codes = {}
  let stop = false
  let rounds = 0
  const outages = []
  const workers = clients.map(async (fg, w) => {
    let failingSince = null
    for (let i = 0; !stop; i++) {
      const id = `w${w}-${i}`
      try {
        rounds++
        const l = await fg.acquireLock(`L${w}`, { timeoutMs: 5000 })
        if (l.acquired) await fg.releaseLock(`L${w}`, l.owner)
        const c = await fg.claim('g', id)
        if (c.claimed) {
          await fg.complete('g', id, { owner: c.owner })
          acked.push(id)
        }
        if (failingSince !== null) outages.push([failingSince, Date.now()])
        failingSince = null
      } catch (e) {
        assert.ok(['ERR_REDIS_UNAVAILABLE', 'ERR_TIMEOUT'].includes(e.code), `${e.code}: ${e.message}`)
        codes[e.code] = (codes[e.code] ?? 0) + 1
        failingSince ??= Date.now()
        await sleep(10)
      }
    }
    if (failingSince !== null) outages.push([failingSince, Date.now()])
  })
  await sleep(500)
  const t0 = Date.now()
  const ackedBefore = acked.length
  const detail = await fault()
  await sleep(1500)
  stop = true
  await Promise.all(workers)
  const longest = Math.max(0, ...outages.filter(([, e]) => e >= t0).map(([s, e]) => e - s))
  // Read back by a new client, which asks the sentinels afresh: the loop's clients would read
  // their own writes back from an old primary they still wrote to.
  const checker = await open({ prefix })
  const states = await checker.getItems('g', acked)
  await checker.close()
  const lost = states.filter((s) => s.status !== 'completed').map((s) => s.id)
  const afterFault = acked.length - ackedBefore
  console.log(
    `# sentinel ${tag}: ${WORKERS} clients, ${rounds} rounds, failures ${JSON.stringify(codes)}; longest run of failing calls ` +
      `${longest} ms; ${detail}; acknowledged ${acked.length} items (${afterFault} after the fault began), ${lost.length} lost`,
  )
  await Promise.all(clients.map((c) => c.close()))
  assert.deepEqual(lost, [], 'every acknowledged item stays completed')
  assert.ok(afterFault > 0, 'calls went on after the fault')
  assert.ok(longest < MAX_OUTAGE_MS, `calls failed for ${longest} ms`)
}

test('calls go on through SENTINEL FAILOVER and a killed primary: nothing acknowledged lost', { skip, timeout: 60_000 }, async () => {
  const first = primaryPort()
  const second = data.find((d) => d.port !== first).port
  await underLoad('failover', async () => {
    const t = Date.now()
    assert.equal(cli(sentinels[0].port, 'SENTINEL', 'FAILOVER', NAME), 'OK')
    await until(() => primaryPort() === second && role(second) === 'master', 15000, 'the sentinels to switch to the replica')
    return `SENTINEL FAILOVER: new primary named after ${Date.now() - t} ms`
  })

  // The old primary rejoins as a replica of the new one (the sentinels would convert it
  // themselves some seconds later), so the next failover has a replica to promote.
  cli(first, 'REPLICAOF', '127.0.0.1', String(second))
  await until(() => infoFields(cli(first, 'INFO', 'replication')).master_link_status === 'up', 10000, 'the old primary to sync as a replica')
  await until(() => sentinels.every((s) => infoFields(cli(s.port, 'INFO', 'sentinel').replace(/,/g, '\n').replace(/=/g, ':')).slaves === '1'), 15000, 'the sentinels to see the replica')

  await underLoad('sigkill', async () => {
    const t = Date.now()
    await stopRedis(data.find((d) => d.port === second).proc)
    await until(() => primaryPort() === first && role(first) === 'master', 20000, 'the sentinels to promote the replica')
    return `SIGKILL of the primary: replica promoted after ${Date.now() - t} ms`
  })
})

test('sentinel options are checked, with coded errors naming the field', { skip }, async () => {
  const cases = [
    [{ url: 'redis://127.0.0.1:1', sentinel: { masterName: NAME, nodes } }, 'sentinel'],
    [{ path: join(dir, 'x.db'), sentinel: { masterName: NAME, nodes } }, 'sentinel'],
    [{ sentinel: { masterName: '', nodes } }, 'sentinel.masterName'],
    [{ sentinel: { masterName: 'a b', nodes } }, 'sentinel.masterName'],
    [{ sentinel: { masterName: NAME, nodes: [] } }, 'sentinel.nodes'],
    [{ sentinel: { masterName: NAME, nodes: ['redis://127.0.0.1:1', 'not a url'] } }, 'sentinel.nodes[1]'],
    [{ sentinel: { masterName: NAME, nodes, db: -1 } }, 'sentinel.db'],
    [{ sentinel: { masterName: NAME, nodes, hosts: [] } }, 'unknown option "hosts"'],
    [{ sentinel: { nodes } }, 'sentinel.masterName'],
  ]
  for (const [opts, field] of cases) {
    const e = await rejection(Flowguard.open(opts))
    assert.equal(e.code, 'ERR_INVALID_ARGUMENT', `${JSON.stringify(opts)}: ${e.message}`)
    assert.ok(e.message.includes(field), `${JSON.stringify(opts)}: ${e.message} names ${field}`)
  }
})

test('unreachable sentinels and an unknown master name: ERR_REDIS_UNAVAILABLE naming them, no password', { skip }, async () => {
  const dead = [await freePort(), await freePort()]
  const e = await rejection(Flowguard.open({
    sentinel: { masterName: NAME, nodes: dead.map((p) => `redis://:sentinel-secret@127.0.0.1:${p}`), password: 'data-secret' },
    connectTimeoutMs: 300,
  }))
  assert.equal(e.code, 'ERR_REDIS_UNAVAILABLE', e.message)
  assert.ok(e.message.includes(NAME) && dead.every((p) => e.message.includes(`127.0.0.1:${p}`)), e.message)
  assert.ok(!e.message.includes('secret'), e.message)
  const unknown = await rejection(Flowguard.open({ sentinel: { masterName: 'nosuchmaster', nodes }, connectTimeoutMs: 500 }))
  assert.equal(unknown.code, 'ERR_REDIS_UNAVAILABLE', unknown.message)
  assert.ok(unknown.message.includes('nosuchmaster'), unknown.message)
})
