// Deliberately broken client-side wrappers around a Flowguard client, one planted bug per
// pattern, to prove that the checkers catch what they are meant to (the product is unchanged;
// the bug sits between the workload and the client, where a careless integration would put it):
// - lock: a refused acquire is reported as granted (a "lock" that never checks the holder);
// - semaphore: every third grant hands out the fencing token of this client's grant before it
//   (a fence that goes backwards, or repeats);
// - queue: a refused ack (stale or foreign owner) is reported as acked (acks without the owner);
// - tracker: complete / fail are sent without the owner token (skips the owner check);
// - counter: increment as a read then a write (not atomic: lost and repeated values);
// - limiter: every other refused take reported as allowed (a limiter that lets calls through);
// - register: getState served from the client's own cache of what it last wrote or read (stale reads);
// - once: a check then an act (getState, fn, setState) instead of a claimed key (fn runs twice);
// - lock-set: the protected write sent without the fence check (plantRegisterBug).
export function plantBugs(fg) {
  let grants = 0
  let lastFence
  let refused = 0
  const cache = new Map()
  return {
    rateLimit: async (name, o) => {
      const r = await fg.rateLimit(name, o)
      return !r.allowed && ++refused % 2 === 0 ? { ...r, allowed: true } : r
    },
    setState: async (key, value, o) => {
      const r = await fg.setState(key, value, o)
      cache.set(key, value)
      return r
    },
    getState: async (key) => {
      if (cache.has(key)) return cache.get(key)
      const v = await fg.getState(key)
      cache.set(key, v)
      return v
    },
    once: async (key, fn) => {
      const stored = await fg.getState(`once:${key}`)
      if (stored !== undefined) return { value: stored, ran: false }
      const value = await fn()
      await fg.setState(`once:${key}`, value)
      return { value, ran: true }
    },
    acquireLock: async (name, o) => {
      const r = await fg.acquireLock(name, o)
      return r.acquired ? r : { ...r, acquired: true, owner: `forged-${Math.random()}` }
    },
    extendLock: (...a) => fg.extendLock(...a),
    releaseLock: (...a) => fg.releaseLock(...a),
    acquirePermit: async (name, o) => {
      const r = await fg.acquirePermit(name, o)
      if (!r.acquired) return r
      const before = lastFence
      lastFence = r.fence
      return ++grants % 3 === 0 && before !== undefined ? { ...r, fence: before } : r
    },
    extendPermit: (...a) => fg.extendPermit(...a),
    releasePermit: (...a) => fg.releasePermit(...a),
    enqueue: (...a) => fg.enqueue(...a),
    readBatch: (...a) => fg.readBatch(...a),
    ack: async (q, owner, ids) => {
      const r = await fg.ack(q, owner, ids)
      return { ...r, items: r.items.map((i) => ({ ...i, ok: true, reason: undefined })) }
    },
    claim: (...a) => fg.claim(...a),
    complete: (group, id) => fg.complete(group, id),
    fail: (group, id, reason) => fg.fail(group, id, reason),
    increment: async (key, by) => {
      const v = ((await fg.getState(key)) ?? 0) + by
      await fg.setState(key, v)
      return v
    },
  }
}

/** The fenced register's client with the lock-set's bug: writes skip the fence check. */
export function plantRegisterBug(register) {
  return { read: register.read, write: (fence, value) => register.write(fence, value, false) }
}
