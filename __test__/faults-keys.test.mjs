// Keys: a property test over random names (colons, braces, percent signs, unicode, long) of item
// groups, item ids, locks, and (when in the build) queues and state keys. Distinct names never share a key (every claim and lock of a distinct name succeeds, and the key count is
// exact), and all keys of one group (or one lock) share one Redis Cluster hash slot: checked by
// CLUSTER KEYSLOT, and enforced by Redis itself, because the suite runs against a single-node
// cluster holding every slot, where a script touching two slots fails with CROSSSLOT.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Flowguard, sleep } from './backends.mjs'
import { connect } from './resp.mjs'
import { mulberry32 as rng } from './prng.mjs'
import { freePort } from './redis-server.mjs'

const haveRedis = spawnSync('redis-server', ['--version']).status === 0
if (process.env.CI === 'true' && !haveRedis) throw new Error('CI=true but redis-server is not installed')
const LONG = process.env.FLOWGUARD_LONG === '1'
const SEED = Number(process.env.FLOWGUARD_SEED || Date.now() % 2 ** 31)


const ALPHABET = ['a', 'b', 'Z', '0', '7', ':', ':', '{', '{', '}', '}', '%', '%', '3', 'A', 'B', 'D', '2', '5', ' ', '-', 'i', 's', 't', 'l', 'ü', '日', '本', '🚀', '\\', '"', "'", '*', '?', '[', ']']
const ADVERSARIAL = ['a', 'a:b', 'a%3Ab', 'a%b', '%25', '%', '{a}', 'a}', '{', '}', '{}', '}{', '%7B', '%7D', ':', '::', 'a:i:b', 'a:s:in_progress', 'i', 's', 'x{y}z', '日本語', 'emoji 🚀', 'fence', ':fence', 'a:fence']

function names(next, count) {
  const out = new Set(ADVERSARIAL)
  while (out.size < count) {
    const r = next()
    let s = ''
    if (r < 0.05) {
      // Long: up to the 1024-byte limit.
      const body = 'k'.repeat(900 + Math.floor(next() * 100))
      s = body + ALPHABET[Math.floor(next() * ALPHABET.length)]
    } else {
      const len = 1 + Math.floor(next() * 24)
      for (let i = 0; i < len; i++) s += ALPHABET[Math.floor(next() * ALPHABET.length)]
    }
    if (Buffer.byteLength(s) <= 1024) out.add(s)
  }
  return [...out]
}

/** The hash tag Redis Cluster uses: between the first '{' and the first '}' after it, if non-empty. */
function hashTag(key) {
  const open = key.indexOf('{')
  if (open < 0) return key
  const close = key.indexOf('}', open + 1)
  if (close <= open + 1) return key
  return key.slice(open + 1, close)
}

let getStatesAcrossSlots = null

test(`keys: distinct names never share a key; one group's keys share a slot (seed ${SEED})`, { skip: !haveRedis && 'redis-server not installed', timeout: 120_000 }, async () => {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'fg-keys-'))
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf')], { stdio: 'ignore' })
  let r = null
  try {
    for (let i = 0; i < 100 && !r; i++) {
      r = await connect(`redis://127.0.0.1:${port}`).catch(() => null)
      if (!r) await sleep(50)
    }
    assert.ok(r, 'redis-server started')
    await r.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383')
    for (let i = 0; i < 100; i++) {
      if ((await r.call('CLUSTER', 'INFO')).includes('cluster_state:ok')) break
      await sleep(50)
    }
    const next = rng(SEED)
    const groupNames = names(next, LONG ? 2000 : 300)
    const lockNames = names(next, LONG ? 2000 : 300)
    const prefix = `keys:${SEED}:`
    const fg = await Flowguard.open({ url: `redis://127.0.0.1:${port}`, prefix })

    // Two ids per group, themselves random names; shared ids across groups on purpose.
    const idsOf = (i) => [groupNames[(i * 7 + 3) % groupNames.length], `${groupNames[(i * 13 + 5) % groupNames.length]}#`]
    let claims = 0
    for (let i = 0; i < groupNames.length; i++) {
      const res = await fg.claimMany(groupNames[i], idsOf(i))
      for (const c of res) assert.ok(c.claimed, `claim of ${JSON.stringify(c.id)} in group ${JSON.stringify(groupNames[i])} found ${c.reason}: a shared key`)
      claims += res.length
      // A completion and a failure touch the per-status indexes too (still one slot).
      await fg.complete(groupNames[i], res[0].id, { owner: res[0].owner })
      await fg.fail(groupNames[i], res[1].id, 'x', { owner: res[1].owner })
    }
    const held = []
    for (const n of lockNames) {
      const l = await fg.acquireLock(n)
      assert.ok(l.acquired, `lock ${JSON.stringify(n)} was found held: a shared key`)
      held.push(l)
    }
    // Once every lock was taken, each taken again gets a fence above its own first one; once all
    // are free, each reports its own last fence (a free lock shows its counter): a counter shared
    // with another name would show the fence that name was given later.
    const again = []
    for (const [i, n] of lockNames.entries()) {
      assert.equal((await fg.releaseLock(n, held[i].owner)).released, true)
      const l = await fg.acquireLock(n)
      assert.ok(l.fence > held[i].fence, `lock ${JSON.stringify(n)}: fence ${l.fence} after ${held[i].fence}`)
      again.push(l)
    }
    for (const [i, n] of lockNames.entries()) assert.equal((await fg.releaseLock(n, again[i].owner)).released, true)
    for (const [i, n] of lockNames.entries()) {
      assert.equal((await fg.getLock(n)).fence, again[i].fence, `lock ${JSON.stringify(n)} has its own fence counter`)
      assert.ok((await fg.acquireLock(n)).acquired) // held again, for the key count below
    }
    // Each group reads back its own items, untouched by the others.
    for (let i = 0; i < groupNames.length; i++) {
      const [a, b] = await fg.getItems(groupNames[i], idsOf(i))
      assert.equal(a.status, 'completed')
      assert.equal(b.status, 'failed')
      assert.equal(a.attempts + b.attempts, 2)
    }

    const keys = await r.scanAll(`${prefix}*`)
    // Per group: its record hash + the three status indexes (in_progress emptied of ids, kept by
    // its end mark until the group expires); per lock: the lock and its fence counter.
    assert.equal(keys.length, groupNames.length * 4 + lockNames.length * 2, 'exact key count: no two names share a key')
    // The items are fields of their group's record hash: two distinct fields per group.
    const hashes = keys.filter((k) => k.endsWith('}:r'))
    assert.equal(hashes.length, groupNames.length)
    // Two records and the group's bookkeeping (the field '').
    for (const h of hashes) assert.equal(await r.call('HLEN', h), 3, `${JSON.stringify(h)} holds 2 records`)
    for (const h of hashes) assert.equal(await r.call('HEXISTS', h, ''), 1)
    const byTag = new Map()
    for (const k of keys) {
      const t = hashTag(k)
      if (!byTag.has(t)) byTag.set(t, [])
      byTag.get(t).push(k)
    }
    assert.equal(byTag.size, groupNames.length + lockNames.length, 'one hash tag per group and per lock')
    let checked = 0
    for (const [tag, ks] of byTag) {
      assert.ok(ks.length === 4 || ks.length === 2, `tag ${JSON.stringify(tag)} has ${ks.length} keys`)
      const slots = new Set()
      for (const k of ks) slots.add(await r.call('CLUSTER', 'KEYSLOT', k))
      assert.equal(slots.size, 1, `keys of ${JSON.stringify(tag)} span ${slots.size} slots`)
      checked += ks.length
    }
    // Dedup Queue and Job State (when in the build), under a prefix of their own: every shard of
    // a queue is its own hash tag (shards spread over slots by design), and so is the queue's
    // record; a state key is one tag.
    let extra = ''
    if (typeof fg.enqueue === 'function') {
      const prefix2 = `keys2:${SEED}:`
      const fg2 = await Flowguard.open({ url: `redis://127.0.0.1:${port}`, prefix: prefix2 })
      const queueNames = names(next, LONG ? 500 : 100)
      const stateNames = names(next, LONG ? 500 : 100)
      // Two ids per queue, one on each of its 2 shards.
      const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']
      const pair = [ids.find((x) => Flowguard.shardOf(x, 2) === 0), ids.find((x) => Flowguard.shardOf(x, 2) === 1)]
      for (const q of queueNames) {
        const r = await fg2.enqueue(q, pair, { shards: 2 })
        assert.equal(r.added, 2, `queue ${JSON.stringify(q)} found its ids already waiting: a shared key`)
      }
      for (const [i, k] of stateNames.entries()) await fg2.setState(k, { i })
      for (const [i, k] of stateNames.entries()) assert.deepEqual(await fg2.getState(k), { i }, `state ${JSON.stringify(k)} read another key's value`)
      // getStates reads keys of many hash slots: one script per slot (a single script over keys of
      // several slots is a CROSSSLOT error on a cluster). Asserted by the test below.
      getStatesAcrossSlots = await fg2.getStates(stateNames).then(
        (v) => (JSON.stringify(v) === JSON.stringify(stateNames.map((_, i) => ({ i }))) ? 'ok' : `wrong values: ${JSON.stringify(v).slice(0, 200)}`),
        (e) => `${e.code}: ${e.message}`,
      )
      const keys2 = await r.scanAll(`${prefix2}*`)
      const tags2 = new Map()
      for (const k of keys2) {
        const t = hashTag(k)
        if (!tags2.has(t)) tags2.set(t, [])
        tags2.get(t).push(k)
      }
      // Per queue: its 2 shards and its record (the shard count it holds ids for).
      assert.equal(tags2.size, queueNames.length * 3 + stateNames.length, 'one hash tag per queue shard, per queue and per state key')
      for (const [tag, ks] of tags2) {
        const slots = new Set()
        for (const k of ks) slots.add(await r.call('CLUSTER', 'KEYSLOT', k))
        assert.equal(slots.size, 1, `keys of ${JSON.stringify(tag)} span ${slots.size} slots`)
        checked += ks.length
      }
      extra = `, ${queueNames.length} queues × 2 shards, ${stateNames.length} state keys`
    }
    console.log(`# keys: seed ${SEED}, ${groupNames.length} groups (${claims} items), ${lockNames.length} locks${extra}, ${checked} keys checked with CLUSTER KEYSLOT on a single-node cluster`)
  } finally {
    r?.close()
    server.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
})

test('keys: getStates of keys in different hash slots works on a Redis Cluster', {
  skip: !haveRedis && 'redis-server not installed',
}, () => {
  if (getStatesAcrossSlots === null) return // the queue/state part did not run in this build
  console.log(`# keys: getStates across slots on a single-node cluster: ${getStatesAcrossSlots}`)
  assert.equal(getStatesAcrossSlots, 'ok')
})
