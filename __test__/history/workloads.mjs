// The operations each history client runs, one loop per pattern, all at once until the deadline.
// Leases are short (LEASE_MS, a few hundred ms) so that the harness's pauses outlast them: a
// paused holder then comes back and releases, extends, acks or completes with a stale owner token.
import { now } from './record.mjs'

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const pick = (a) => a[Math.floor(Math.random() * a.length)]

/** The names and sizes every client and every checker agree on. */
export const SHAPE = {
  lockNames: ['L0', 'L1'],
  semName: 'S',
  permits: 2,
  queue: 'Q',
  group: 'G',
  items: Array.from({ length: 6 }, (_, i) => `item-${i}`),
  counter: 'C',
  // At most burst + limit - 1 = 6 takes in any 500 ms (README, Rate Limiter).
  limiter: { name: 'RL', limit: 5, periodMs: 500, burst: 2 },
  registers: ['R0', 'R1'],
  locksetName: 'LS',
  // once: the keys of a time slice (every client uses the same few keys at once), then new ones.
  onceSliceMs: 250,
  onceKeys: 2,
}

/** `op` is the recorder of record.mjs, `fg` the client (maybe a planted-bug wrapper), `lease` the
 * lease of locks, permits, claims, queue reads and once's keys in ms, `running()` false once the
 * deadline passed, `deadline` that time, `register` the fenced register's client
 * (fenced-register.mjs; maybe a planted-bug wrapper). */
export const workloads = {
  async lock({ fg, op, lease, running }) {
    while (running()) {
      const name = pick(SHAPE.lockNames)
      const [t, r] = await op('lock', 'acquire', { name, timeoutMs: lease }, async () => {
        const l = await fg.acquireLock(name, { timeoutMs: lease, waitMs: 30 })
        return [l.acquired ? 'ok' : 'fail', { acquired: l.acquired, owner: l.owner, fence: l.fence }]
      })
      if (t !== 'ok') { await sleep(Math.random() * 5); continue }
      await holdThenLetGo({ op, p: 'lock', name, owner: r.owner, lease, extend: () => fg.extendLock(name, r.owner, { timeoutMs: lease }), release: () => fg.releaseLock(name, r.owner) })
    }
  },

  async semaphore({ fg, op, lease, running }) {
    const name = SHAPE.semName
    while (running()) {
      const [t, r] = await op('semaphore', 'acquire', { name, timeoutMs: lease, permits: SHAPE.permits }, async () => {
        const l = await fg.acquirePermit(name, { permits: SHAPE.permits, timeoutMs: lease, waitMs: 30 })
        return [l.acquired ? 'ok' : 'fail', { acquired: l.acquired, owner: l.owner, fence: l.fence }]
      })
      if (t !== 'ok') { await sleep(Math.random() * 5); continue }
      await holdThenLetGo({ op, p: 'semaphore', name, owner: r.owner, lease, extend: () => fg.extendPermit(name, r.owner, { timeoutMs: lease }), release: () => fg.releasePermit(name, r.owner) })
    }
  },

  async queue({ fg, op, lease, running, client }) {
    const mine = []
    let n = 0
    while (running()) {
      // Two new ids, and now and then one of ours again (deduplicated while waiting, delivered
      // once more when it is claimed).
      const ids = [`${client}-${n++}`, `${client}-${n++}`]
      if (mine.length && Math.random() < 0.1) ids.push(pick(mine))
      mine.push(ids[0], ids[1])
      await op('queue', 'enqueue', { ids }, async () => {
        const r = await fg.enqueue(SHAPE.queue, ids)
        return ['ok', { outcomes: r.items.map((i) => i.outcome) }]
      })
      const [t, b] = await op('queue', 'read', { limit: 3, visibilityTimeoutMs: lease }, async () => {
        const r = await fg.readBatch(SHAPE.queue, { limit: 3, visibilityTimeoutMs: lease })
        return ['ok', { owner: r.owner, ids: r.ids }]
      })
      if (t !== 'ok' || b.ids.length === 0) { await sleep(Math.random() * 5); continue }
      await sleep(Math.random() * lease * 0.6)
      if (Math.random() < 0.1) continue // abandoned: delivered again after the visibility timeout
      await op('queue', 'ack', { owner: b.owner, ids: b.ids }, async () => {
        const r = await fg.ack(SHAPE.queue, b.owner, b.ids)
        return ['ok', { items: r.items.map((i) => ({ id: i.id, ok: i.ok, reason: i.reason })) }]
      })
    }
  },

  async tracker({ fg, op, lease, running }) {
    while (running()) {
      const id = pick(SHAPE.items)
      const reclaimCompleted = Math.random() < 0.25
      const [t, c] = await op('tracker', 'claim', { id, timeoutMs: lease, reclaimCompleted }, async () => {
        const r = await fg.claim(SHAPE.group, id, { timeoutMs: lease, reclaimCompleted })
        return [r.claimed ? 'ok' : 'fail', { claimed: r.claimed, owner: r.owner, reason: r.reason, attempts: r.item.attempts }]
      })
      if (t !== 'ok') { await sleep(Math.random() * 5); continue }
      await sleep(Math.random() * lease * 0.6)
      const roll = Math.random()
      if (roll < 0.1) continue // abandoned: claimable again after the lease
      const f = roll < 0.8 ? 'complete' : 'fail'
      await op('tracker', f, { id, owner: c.owner }, async () => {
        if (f === 'complete') await fg.complete(SHAPE.group, id, { owner: c.owner })
        else await fg.fail(SHAPE.group, id, 'planned failure', { owner: c.owner })
        return ['ok', {}]
      })
    }
  },

  async counter({ fg, op, running }) {
    while (running()) {
      await op('counter', 'incr', {}, async () => ['ok', { value: await fg.increment(SHAPE.counter, 1) }])
      await sleep(Math.random() * 3)
    }
  },

  async limiter({ fg, op, running }) {
    const { name, limit, periodMs, burst } = SHAPE.limiter
    while (running()) {
      await op('limiter', 'take', { name, limit, periodMs, burst }, async () => {
        const r = await fg.rateLimit(name, { limit, periodMs, burst })
        return [r.allowed ? 'ok' : 'fail', { allowed: r.allowed }]
      })
      await sleep(Math.random() * 10)
    }
  },

  // Job State registers: writes of values no other write uses, and reads.
  async register({ fg, op, running, client }) {
    let n = 0
    while (running()) {
      const key = pick(SHAPE.registers)
      if (Math.random() < 0.5) {
        const value = `${client}-${n++}`
        await op('register', 'write', { key, value }, async () => {
          await fg.setState(key, value)
          return ['ok', {}]
        })
      } else {
        await op('register', 'read', { key }, async () => ['ok', { value: (await fg.getState(key)) ?? null }])
      }
      await sleep(Math.random() * 5)
    }
  },

  // once: fn records its own run (and returns a token naming it); it runs for up to half a lease.
  async once({ fg, op, lease, running, deadline, client }) {
    let n = 0
    while (running()) {
      const key = `once-${Math.floor((deadline - now()) / SHAPE.onceSliceMs)}-${Math.floor(Math.random() * SHAPE.onceKeys)}`
      const since = now()
      const fn = async () => {
        const token = `${client}-${n++}`
        await op('once', 'run', { key, since, leaseMs: lease }, async () => {
          await sleep(Math.random() * lease * 0.5)
          return ['ok', { token }]
        })
        return token
      }
      await op('once', 'call', { key, leaseMs: lease }, async () => {
        const r = await fg.once(key, fn, { leaseMs: lease, waitMs: lease * 2 })
        return ['ok', { value: r.value, ran: r.ran }]
      })
      await sleep(Math.random() * 20)
    }
  },

  // Lock-set: the lock protects a read-modify-write of the fenced register, which checks the fence;
  // the holder waits between the read and the write, where a pause makes it lose its lease.
  async lockset({ unwrapped: fg, op, lease, running, register }) {
    const name = SHAPE.locksetName
    while (running()) {
      const [t, l] = await op('lock', 'acquire', { name, timeoutMs: lease }, async () => {
        const r = await fg.acquireLock(name, { timeoutMs: lease, waitMs: 30 })
        return [r.acquired ? 'ok' : 'fail', { acquired: r.acquired, owner: r.owner, fence: r.fence }]
      })
      if (t !== 'ok') { await sleep(Math.random() * 5); continue }
      const [rt, read] = await op('lockset', 'read', { fence: l.fence }, async () => {
        const r = await register.read(l.fence)
        return [r.ok ? 'ok' : 'fail', r]
      })
      if (rt === 'ok') {
        await sleep(Math.random() * lease * 0.5)
        await op('lockset', 'write', { fence: l.fence, value: read.value + 1 }, async () => {
          const r = await register.write(l.fence, read.value + 1)
          return [r.ok ? 'ok' : 'fail', r]
        })
      }
      await op('lock', 'release', { name, owner: l.owner }, async () => {
        const r = await fg.releaseLock(name, l.owner)
        return [r.released ? 'ok' : 'fail', { released: r.released, reason: r.reason }]
      })
    }
  },
}

/** Holds a grant for a while (maybe extending it once), then releases it, or abandons it now and
 * then so that its lease runs out. */
async function holdThenLetGo({ op, p, name, owner, lease, extend, release }) {
  await sleep(Math.random() * lease * 0.5)
  if (Math.random() < 0.3) {
    await op(p, 'extend', { name, owner, timeoutMs: lease }, async () => {
      const r = await extend()
      return [r.extended ? 'ok' : 'fail', { extended: r.extended, reason: r.reason }]
    })
    await sleep(Math.random() * lease * 0.3)
  }
  if (Math.random() < 0.1) return
  await op(p, 'release', { name, owner }, async () => {
    const r = await release()
    return [r.released ? 'ok' : 'fail', { released: r.released, reason: r.reason }]
  })
}
