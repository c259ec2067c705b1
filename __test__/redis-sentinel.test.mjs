// Sentinel-managed Redis, on a throwaway set of its own on loopback: a primary, a replica and
// three sentinels (quorum 2, down-after 1 s). The four patterns through the `sentinel` option;
// clients calling with `replicaAcks: 1` through `SENTINEL FAILOVER` and through a SIGKILLed
// primary (restarted as a replica once the other node is promoted): calls go on on the new
// primary within a few seconds, nothing acknowledged is lost (the longest run of failing calls
// and the failures' codes are printed); a client opened while the primary is down waits for the
// promotion; a call more replicas must confirm than there are fails with a coded error after it
// ran; bad options are coded errors.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Flowguard, freshPrefix, sleep, rejection } from './backends.mjs'
import { haveRedis, freePort, stopRedis } from './redis-server.mjs'
import { cli } from './redis-cluster.mjs'
import { startSentinelSet, until } from './redis-sentinel.mjs'

const skip = !haveRedis && 'redis-server is not installed'
const NAME = 'fgmain'
/** The longest a client may see its calls failing during a failover. */
const MAX_OUTAGE_MS = 5000

let set
let nodes // sentinel URLs

before(async () => {
  if (skip) return
  set = await startSentinelSet({ name: NAME })
  nodes = set.nodes
})

after(async () => {
  await set?.stop()
})

const primaryPort = () => set.primaryPort()

const open = (extra = {}, sentinel = {}) =>
  Flowguard.open({ sentinel: { masterName: NAME, nodes, ...sentinel }, prefix: freshPrefix('sentinel'), ...extra })

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

test('replicaAcks: a call is answered once the replica holds it; more replicas than there are: ERR_BACKEND_UNAVAILABLE after it ran', { skip }, async () => {
  const fg = await open({}, { replicaAcks: 1 })
  const c = await fg.claim('g', 'confirmed')
  assert.ok(c.claimed)
  // Confirmed: the replica has it now, not at some later moment.
  const replica = set.data.find((d) => d.port !== primaryPort()).port
  const key = cli(replica, 'KEYS', `${fg.prefix}*`)
  assert.ok(key.length > 0, 'the replica holds the claim when the call resolves')
  await fg.close()

  const commandTimeoutMs = 600
  const strict = await open({ commandTimeoutMs }, { replicaAcks: 2 })
  const t0 = Date.now()
  const e = await rejection(strict.claim('g', 'unconfirmed'))
  const took = Date.now() - t0
  assert.equal(e.code, 'ERR_BACKEND_UNAVAILABLE', e.message)
  assert.match(e.message, /1 of the 2 replicas asked for \(replicaAcks\) confirmed it/)
  assert.ok(took < commandTimeoutMs + 500, `failed after ${took} ms, commandTimeoutMs ${commandTimeoutMs}`)
  // It ran on the primary: a client that asks for no confirmation sees the claim.
  const plain = await open({ prefix: strict.prefix })
  assert.equal((await plain.getItem('g', 'unconfirmed')).status, 'in_progress')
  await Promise.all([strict.close(), plain.close()])
})

/**
 * Clients calling lock and tracker calls in a loop while `fault()` runs, each call confirmed by
 * the replica (`replicaAcks: 1`); returns what was acknowledged, the failures by code and the
 * longest run of failing calls after `fault` began.
 */
async function underLoad(tag, fault) {
  const prefix = freshPrefix(`sentinel-${tag}`)
  const WORKERS = 4
  const clients = await Promise.all(
    Array.from({ length: WORKERS }, () => open({ prefix, commandTimeoutMs: 2000 }, { replicaAcks: 1 })),
  )
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
        assert.ok(['ERR_BACKEND_UNAVAILABLE', 'ERR_TIMEOUT'].includes(e.code), `${e.code}: ${e.message}`)
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
  // Right after a fault the sentinels may still name a node that is not a primary yet (seen on
  // Valkey 8.1): opening then is ERR_BACKEND_UNAVAILABLE by design, so the reader tries again
  // for up to 10 s.
  let checker
  for (let tries = 1; ; tries++) {
    try {
      checker = await open({ prefix })
      break
    } catch (e) {
      if (e.code !== 'ERR_BACKEND_UNAVAILABLE' || tries >= 100) throw e
      await sleep(100)
    }
  }
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

test('calls with replicaAcks: 1 go on through SENTINEL FAILOVER and a killed primary: nothing acknowledged lost', { skip, timeout: 60_000 }, async () => {
  const first = primaryPort()
  let second
  // The new primary's only replica is the old primary once it is converted (the sentinels take
  // seconds; rejoin does it at once): calls are unconfirmed, and fail, until then.
  await underLoad('failover', async () => {
    const t = Date.now()
    second = await set.failover()
    const named = Date.now() - t
    await set.rejoin(first)
    return `SENTINEL FAILOVER: new primary named after ${named} ms, the old one its replica after ${Date.now() - t} ms`
  })

  // With its only replica promoted, the new primary has none to confirm calls until the killed
  // node is back as its replica: calls fail meanwhile (they ran, unconfirmed), then go on.
  await underLoad('sigkill', async () => {
    const t = Date.now()
    await stopRedis(set.data.find((d) => d.port === second).proc)
    await until(() => primaryPort() === first && set.role(first) === 'master', 20000, 'the sentinels to promote the replica')
    const promoted = Date.now() - t
    await set.restart(second)
    return `SIGKILL of the primary: replica promoted after ${promoted} ms, the killed node back as a replica after ${Date.now() - t} ms`
  })
})

test('opened while the primary is killed and not yet replaced: it waits for the promotion, within connectTimeoutMs', { skip, timeout: 60_000 }, async () => {
  const old = primaryPort()
  const other = set.data.find((d) => d.port !== old).port
  await stopRedis(set.data.find((d) => d.port === old).proc)
  // The sentinels still name the killed node (down-after 1 s): the open below begins before
  // they see it down, so it first meets a refused connection.
  assert.equal(primaryPort(), old, 'the sentinels still name the killed primary')
  const t = Date.now()
  const fg = await open({ connectTimeoutMs: 20_000 })
  const waited = Date.now() - t
  try {
    await fg.setState('opened-in-failover', { n: 1 })
    assert.deepEqual(await fg.getState('opened-in-failover'), { n: 1 })
    assert.equal(primaryPort(), other, 'the sentinels promoted the replica')
    assert.ok(cli(other, 'KEYS', `${fg.prefix}*`).length > 0, 'written to the promoted node')
  } finally {
    await fg.close()
  }
  console.log(`# opened ${waited} ms after the primary was killed, on the promoted replica`)
  await set.restart(old)
})

test('sentinel options are checked, with coded errors naming the field', { skip }, async () => {
  const cases = [
    [{ url: 'redis://127.0.0.1:1', sentinel: { masterName: NAME, nodes } }, 'sentinel'],
    [{ path: join(tmpdir(), 'fg-sentinel-refused.db'), sentinel: { masterName: NAME, nodes } }, 'sentinel'],
    [{ sentinel: { masterName: '', nodes } }, 'sentinel.masterName'],
    [{ sentinel: { masterName: 'a b', nodes } }, 'sentinel.masterName'],
    [{ sentinel: { masterName: NAME, nodes: [] } }, 'sentinel.nodes'],
    [{ sentinel: { masterName: NAME, nodes: ['redis://127.0.0.1:1', 'not a url'] } }, 'sentinel.nodes[1]'],
    [{ sentinel: { masterName: NAME, nodes, db: -1 } }, 'sentinel.db'],
    [{ sentinel: { masterName: NAME, nodes, replicaAcks: 65 } }, 'sentinel.replicaAcks'],
    [{ sentinel: { masterName: NAME, nodes, replicaAcks: 1.5 } }, 'sentinel.replicaAcks'],
    [{ sentinel: { masterName: NAME, nodes, hosts: [] } }, 'unknown option "hosts"'],
    [{ sentinel: { nodes } }, 'sentinel.masterName'],
  ]
  for (const [opts, field] of cases) {
    const e = await rejection(Flowguard.open(opts))
    assert.equal(e.code, 'ERR_INVALID_ARGUMENT', `${JSON.stringify(opts)}: ${e.message}`)
    assert.ok(e.message.includes(field), `${JSON.stringify(opts)}: ${e.message} names ${field}`)
  }
})

test('unreachable sentinels and an unknown master name: ERR_BACKEND_UNAVAILABLE naming them, no password', { skip }, async () => {
  const dead = [await freePort(), await freePort()]
  const e = await rejection(Flowguard.open({
    sentinel: { masterName: NAME, nodes: dead.map((p) => `redis://:sentinel-secret@127.0.0.1:${p}`), password: 'data-secret' },
    connectTimeoutMs: 300,
  }))
  assert.equal(e.code, 'ERR_BACKEND_UNAVAILABLE', e.message)
  assert.ok(e.message.includes(NAME) && dead.every((p) => e.message.includes(`127.0.0.1:${p}`)), e.message)
  assert.ok(!e.message.includes('secret'), e.message)
  const unknown = await rejection(Flowguard.open({ sentinel: { masterName: 'nosuchmaster', nodes }, connectTimeoutMs: 500 }))
  assert.equal(unknown.code, 'ERR_BACKEND_UNAVAILABLE', unknown.message)
  assert.ok(unknown.message.includes('nosuchmaster'), unknown.message)
})
