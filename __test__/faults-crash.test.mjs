// Crashes (on Redis and on the durable store, where the workers share one file): workers SIGKILLed while holding item claims, the lock and Dedup Queue batches. After
// the lease (visibility timeout) every item and id is processed (completed / acked exactly once),
// none is lost, none is held by two live owners at once, and fencing tokens strictly increase.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { fork } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { freshPrefix, sharedTargets } from './backends.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const LONG = process.env.FLOWGUARD_LONG === '1'
const WORKERS = 4
const ITEMS = LONG ? 2000 : 300
const KILLS = LONG ? 20 : 6
const ITEM_LEASE_MS = 1500
const LOCK_LEASE_MS = 1000

for (const target of sharedTargets('crash')) test(`crashes on ${target.name}: ${KILLS} SIGKILLs among ${WORKERS} workers holding the lock, item claims and queue batches (${ITEMS} items)`, { skip: target.skip, timeout: LONG ? 600_000 : 120_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fg-crash-'))
  const env = {
    ...process.env,
    ...target.env,
    FG_PREFIX: freshPrefix('crash'),
    GROUP: 'batch:{crash}',
    ITEMS: String(ITEMS),
    LOG: join(dir, 'steps.log'),
    ITEM_LEASE_MS: String(ITEM_LEASE_MS),
    LOCK_LEASE_MS: String(LOCK_LEASE_MS),
  }
  writeFileSync(env.LOG, '')
  // The Dedup Queue part runs once the queue exists in this build (it landed beside this suite).
  const probe = await target.open(env.FG_PREFIX)
  const QUEUE_IDS = typeof probe.enqueue === 'function' ? ITEMS : 0
  if (QUEUE_IDS) {
    env.QUEUE = 'jobs:{crash}'
    await probe.enqueue(env.QUEUE, Array.from({ length: QUEUE_IDS }, (_, i) => `job-${i}`))
  }
  let queueKills = 0
  const killedAt = new Map() // pid -> hrtime of the kill
  const live = new Set()
  let kills = 0
  let lockKills = 0
  let claimKills = 0
  const failures = []
  let exits = 0
  try {
    await new Promise((resolveAll) => {
      const start = () => {
        const p = fork(join(here, 'fixtures/crash-worker.mjs'), [], { env, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] })
        let err = ''
        p.stderr.on('data', (d) => (err += d))
        live.add(p)
        p.on('message', (m) => {
          if (!live.has(p)) return
          // Kill on about every other report, rotating what the victim holds: the lock, item
          // claims, a queue batch.
          const least = Math.min(lockKills, claimKills, QUEUE_IDS ? queueKills : Infinity)
          const want = lockKills === least ? 'lock' : claimKills === least ? 'claim' : 'queue'
          if (kills >= KILLS || m.kind !== want || Math.random() < 0.5) { try { p.send('go') } catch {} return }
          kills++
          if (m.kind === 'lock') lockKills++
          else if (m.kind === 'claim') claimKills++
          else queueKills++
          killedAt.set(p.pid, process.hrtime.bigint())
          live.delete(p)
          p.kill('SIGKILL')
          start() // a replacement, as a supervisor would start one
        })
        p.on('exit', (code, sig) => {
          exits++
          if (sig !== 'SIGKILL' && code !== 0) failures.push(`worker ${p.pid} exited ${code ?? sig}: ${err}`)
          live.delete(p)
          if (live.size === 0) resolveAll()
        })
      }
      for (let i = 0; i < WORKERS; i++) start()
    })
    assert.deepEqual(failures, [])
    assert.ok(lockKills >= 1 && claimKills >= 1, `killed while holding the lock ${lockKills}×, claims ${claimKills}×`)
    if (QUEUE_IDS) assert.ok(queueKills >= 1, `killed while holding a queue batch ${queueKills}×`)

    const fg = await target.open(env.FG_PREFIX)
    const { counts } = await fg.listItems(env.GROUP, { limit: 1 })
    assert.equal(counts.completed, ITEMS, 'every item completed')
    assert.equal(counts.total, ITEMS, 'no other state left')

    const steps = readFileSync(env.LOG, 'utf8').trim().split('\n').map((l) => l.split(' '))
    // Items: per item, the claims in order; each ends with D (done) by a live worker or belongs to
    // a killed worker; exactly one completion succeeded.
    const perItem = new Map()
    for (const s of steps) {
      if (!['C', 'D', 'OK', 'NO'].includes(s[0])) continue
      const [kind, id, owner, at, pid] = s
      if (!perItem.has(id)) perItem.set(id, new Map())
      const claims = perItem.get(id)
      if (!claims.has(owner)) claims.set(owner, { pid: Number(pid) })
      claims.get(owner)[kind] = BigInt(at)
    }
    assert.equal(perItem.size, ITEMS, 'every item was claimed at least once')
    let abandonedThenDone = 0
    for (const [id, claims] of perItem) {
      const list = [...claims.values()].sort((a, b) => (a.C < b.C ? -1 : 1))
      assert.equal(list.filter((c) => c.OK).length, 1, `item ${id} completed exactly once`)
      for (let i = 0; i < list.length; i++) {
        const c = list[i]
        assert.ok(c.C !== undefined, `item ${id}: a step without its claim`)
        // A hold ends when its worker finished it (D) or when its worker was killed.
        const end = c.D ?? killedAt.get(c.pid)
        assert.ok(end !== undefined, `item ${id}: a claim by live worker ${c.pid} was never finished`)
        if (c.D === undefined) abandonedThenDone++
        if (i + 1 < list.length) assert.ok(list[i + 1].C > end, `item ${id}: claimed by two live owners at once`)
      }
    }
    assert.ok(abandonedThenDone >= 1, 'some claims were abandoned by killed workers and their items processed after the lease')

    // Lock: holds in order of fence; each ended (U) before the next began, or its holder was
    // killed before the next began (the next one only after the lease ran out).
    const holds = new Map()
    for (const s of steps) {
      if (s[0] !== 'L' && s[0] !== 'U') continue
      const [kind, fence, at, pid] = s
      if (!holds.has(fence)) holds.set(fence, { fence: Number(fence), pid: Number(pid) })
      holds.get(fence)[kind] = BigInt(at)
    }
    const hl = [...holds.values()].sort((a, b) => (a.L < b.L ? -1 : 1))
    for (let i = 0; i < hl.length; i++) {
      const end = hl[i].U ?? killedAt.get(hl[i].pid)
      assert.ok(end !== undefined, `lock fence ${hl[i].fence} held by a live worker was never released`)
      if (i + 1 < hl.length) {
        assert.ok(hl[i + 1].fence > hl[i].fence, 'fencing tokens strictly increase')
        assert.ok(hl[i + 1].L > end, `lock held by two live owners at once (fences ${hl[i].fence}, ${hl[i + 1].fence})`)
      }
    }
    // Queue: per id, the batches that held it in order; each ended with QD by a live reader or
    // belongs to a killed one; exactly one ack succeeded; the queue is empty.
    let redelivered = 0
    if (QUEUE_IDS) {
      const perId = new Map()
      for (const s of steps) {
        if (!['QR', 'QD', 'QA', 'QN'].includes(s[0])) continue
        const [kind, id, owner, at, pid] = s
        if (!perId.has(id)) perId.set(id, new Map())
        const holds = perId.get(id)
        if (!holds.has(owner)) holds.set(owner, { pid: Number(pid) })
        holds.get(owner)[kind] = BigInt(at)
      }
      assert.equal(perId.size, QUEUE_IDS, 'every queued id was delivered')
      for (const [id, holds] of perId) {
        const list = [...holds.values()].sort((a, b) => (a.QR < b.QR ? -1 : 1))
        assert.equal(list.filter((h) => h.QA).length, 1, `queued id ${id} acked exactly once`)
        for (let i = 0; i < list.length; i++) {
          const end = list[i].QD ?? killedAt.get(list[i].pid)
          assert.ok(end !== undefined, `queued id ${id}: a batch of live reader ${list[i].pid} was never finished`)
          if (list[i].QD === undefined) redelivered++
          if (i + 1 < list.length) assert.ok(list[i + 1].QR > end, `queued id ${id} held by two live readers at once`)
        }
      }
      const size = await fg.queueSize(env.QUEUE)
      assert.equal(size.waiting + size.claimed + size.again, 0, 'the queue is empty')
      assert.ok(redelivered >= 1, 'ids of a killed reader were delivered again after the visibility timeout')
    }
    console.log(`# crashes: ${kills} kills (${lockKills} holding the lock, ${claimKills} holding item claims, ${queueKills} holding queue batches), ${exits} worker exits, ${abandonedThenDone} abandoned claims re-processed, ${redelivered} queued ids redelivered, ${hl.length} lock holds`)
  } finally {
    for (const p of live) p.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
})
