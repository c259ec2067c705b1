// How many scripts and commands a call costs on Redis, counted by the server (INFO commandstats)
// of a throwaway redis-server of this suite's own, so no other suite's calls are counted. A
// structural check, not a timing: getStates reads 1,000 keys with one script; a serial claim and
// complete of one item runs no purge scan while nothing in its group can have expired, and reads
// no TTL.
import { test, after, before } from 'node:test'
import assert from 'node:assert/strict'
import { Flowguard } from './backends.mjs'
import { connect } from './resp.mjs'
import { freePort, haveRedis, startRedis, stopRedis } from './redis-server.mjs'

const skip = !haveRedis && 'redis-server is not installed'
let server, url, r

before(async () => {
  if (skip) return
  const port = await freePort()
  server = await startRedis(port)
  url = `redis://127.0.0.1:${port}`
  r = await connect(url)
})
after(async () => {
  r?.close()
  await stopRedis(server)
})

/** Calls per command since the last CONFIG RESETSTAT (lower-case names, INFO left out). */
async function calls() {
  const text = await r.call('INFO', 'commandstats')
  const out = {}
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (m[1] !== 'info') out[m[1]] = Number(m[2])
  return out
}

test('getStates of 1,000 keys is one script on one server; 2,500 keys three', { skip }, async () => {
  const fg = await Flowguard.open({ url, prefix: 'counts:state:' })
  try {
    const keys = Array.from({ length: 2500 }, (_, i) => `k${i}`)
    await Promise.all(keys.slice(0, 1000).map((k, i) => fg.setState(k, { i })))
    await fg.getStates(['k0']) // the script is loaded now: no NOSCRIPT round in the counts
    await r.call('CONFIG', 'RESETSTAT')
    const values = await fg.getStates(keys.slice(0, 1000))
    assert.deepEqual(values, keys.slice(0, 1000).map((_, i) => ({ i })))
    const one = await calls()
    assert.equal(one.evalsha, 1, `scripts run: ${JSON.stringify(one)}`)
    assert.equal(one.eval, undefined)
    await r.call('CONFIG', 'RESETSTAT')
    const more = await fg.getStates(keys)
    assert.equal(more.filter((v) => v !== undefined).length, 1000)
    assert.equal((await calls()).evalsha, 3, 'one script per 1,000 keys: bounded work per script')
  } finally {
    await fg.close()
  }
})

test('a serial claim and complete runs no purge scan and reads no TTL while nothing expired', { skip }, async () => {
  const fg = await Flowguard.open({ url, prefix: 'counts:tracker:' })
  try {
    // The first write of a group sets its bookkeeping (a purge and a TTL read once).
    const first = await fg.claim('g', 'first')
    await fg.complete('g', 'first', { owner: first.owner })
    await r.call('CONFIG', 'RESETSTAT')
    for (let i = 0; i < 50; i++) {
      const c = await fg.claim('g', `item-${i}`, { timeoutMs: 60_000 })
      assert.equal(c.claimed, true)
      assert.equal((await fg.complete('g', `item-${i}`, { owner: c.owner })).status, 'completed')
    }
    const n = await calls()
    assert.equal(n.evalsha, 100, `one script per call: ${JSON.stringify(n)}`)
    for (const scan of ['zrangebyscore', 'zrange', 'pttl', 'hgetall', 'scan']) {
      assert.equal(n[scan], undefined, `${scan} ran: ${JSON.stringify(n)}`)
    }
    // Still exact: the status index and the timeline.
    const list = await fg.listItems('g', { limit: 100 })
    assert.equal(list.counts.completed, 51)
    const item = await fg.getItem('g', 'item-7')
    assert.deepEqual(item.timeline.map((t) => t.status), ['in_progress', 'completed'])
  } finally {
    await fg.close()
  }
})

test('a semaphore acquire and release is one script each, 12 commands and no type probe', { skip }, async () => {
  const fg = await Flowguard.open({ url, prefix: 'counts:sem:' })
  try {
    // Another holder keeps the semaphore's keys alive, as in a busy semaphore.
    const other = await fg.acquirePermit('s', { permits: 64, timeoutMs: 60_000 })
    assert.equal(other.acquired, true)
    const warm = await fg.acquirePermit('s', { permits: 64, timeoutMs: 60_000 })
    await fg.releasePermit('s', warm.owner) // both scripts loaded: no NOSCRIPT round in the counts
    await r.call('CONFIG', 'RESETSTAT')
    for (let i = 0; i < 20; i++) {
      const p = await fg.acquirePermit('s', { permits: 64, timeoutMs: 60_000 })
      assert.equal(p.acquired, true)
      assert.equal((await fg.releasePermit('s', p.owner)).released, true)
    }
    const n = await calls()
    assert.equal(n.evalsha, 40, `one script per call: ${JSON.stringify(n)}`)
    assert.equal(n.type, undefined, `a type probe ran: ${JSON.stringify(n)}`)
    const inner = Object.entries(n).filter(([c]) => !c.startsWith('config') && c !== 'evalsha').reduce((s, [, v]) => s + v, 0)
    assert.ok(inner <= 20 * 12, `${inner / 20} commands per pair: ${JSON.stringify(n)}`)
    const info = await fg.getSemaphore('s')
    assert.equal(info.holders.length, 1)
  } finally {
    await fg.close()
  }
})
