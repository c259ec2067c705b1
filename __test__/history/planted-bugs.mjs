// Deliberately broken client-side wrappers around a Flowguard client, one planted bug per
// pattern, to prove that the checkers catch what they are meant to (the product is unchanged;
// the bug sits between the workload and the client, where a careless integration would put it):
// - lock: a refused acquire is reported as granted (a "lock" that never checks the holder);
// - semaphore: every third grant hands out a fencing token one lower than the one issued
//   (a fence that goes backwards);
// - queue: a refused ack (stale or foreign owner) is reported as acked (acks without the owner);
// - tracker: complete / fail are sent without the owner token (skips the owner check);
// - counter: increment as a read then a write (not atomic: lost and repeated values).
export function plantBugs(fg) {
  let grants = 0
  return {
    acquireLock: async (name, o) => {
      const r = await fg.acquireLock(name, o)
      return r.acquired ? r : { ...r, acquired: true, owner: `forged-${Math.random()}` }
    },
    extendLock: (...a) => fg.extendLock(...a),
    releaseLock: (...a) => fg.releaseLock(...a),
    acquirePermit: async (name, o) => {
      const r = await fg.acquirePermit(name, o)
      return r.acquired && ++grants % 3 === 0 ? { ...r, fence: r.fence - 1 } : r
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
