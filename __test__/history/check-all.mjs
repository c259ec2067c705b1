// Every checker of a history of the workloads of workloads.mjs, and the counts of the report.
import { checkLock } from './check-lock.mjs'
import { checkSemaphore } from './check-semaphore.mjs'
import { checkQueue } from './check-queue.mjs'
import { checkTracker } from './check-tracker.mjs'
import { checkCounter } from './check-counter.mjs'
import { checkLimiter } from './check-limiter.mjs'
import { checkRegister } from './check-register.mjs'
import { checkOnce } from './check-once.mjs'
import { checkLockset } from './check-lockset.mjs'
import { SHAPE } from './workloads.mjs'

export const checkers = {
  lock: checkLock,
  semaphore: (h) => checkSemaphore(h, { permits: SHAPE.permits }),
  queue: checkQueue,
  tracker: checkTracker,
  counter: checkCounter,
  limiter: checkLimiter,
  register: checkRegister,
  once: checkOnce,
  lockset: checkLockset,
}

/** Per pattern: { ops, ok, fail, info, anomalies: [...], undecided: linearizability searches that gave up }. */
export function checkAll(history) {
  const out = {}
  for (const [p, check] of Object.entries(checkers)) {
    const ops = history.filter((o) => o.p === p && o.process !== 'final' && o.process !== 'register')
    const anomalies = check(history)
    out[p] = {
      ops: ops.length,
      ok: ops.filter((o) => o.type === 'ok').length,
      fail: ops.filter((o) => o.type === 'fail').length,
      info: ops.filter((o) => o.type === 'info').length,
      anomalies,
      undecided: anomalies.undecided ?? 0,
    }
  }
  return out
}

/** An anomaly in a few lines: its kind and its operations (process, f, value, result, times). */
export function describe(a) {
  const t = (x) => (x === Infinity ? '∞' : x.toFixed(1))
  return [`${a.kind}${a.detail ? `: ${a.detail}` : ''}${a.name !== undefined ? ` (${a.name})` : ''}${a.id !== undefined && a.id !== null ? ` (${a.id})` : ''}`,
    ...a.ops.map((o) => `  ${o.process} ${o.f} ${o.type} [${t(o.start)}, ${t(o.end)}] ${JSON.stringify(o.value)} -> ${JSON.stringify(o.result ?? o.error ?? null)}`)].join('\n')
}
