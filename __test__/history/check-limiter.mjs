// Checker of the Rate Limiter over a history of operations (p: 'limiter'; f: take { name, limit,
// periodMs, burst } -> { allowed }, cost 1, no maxWaitMs: a take never waits). The rule (README,
// Rate Limiter): GCRA with `burst` b lets at most b + limit - 1 takes through in any window of
// `periodMs` on the backend's clock (b at once after an idle time, then one every periodMs / limit).
//
// An allowed take invoked at `start` and seen at `end` was decided somewhere in [start, end]. A set of
// allowed takes whose decisions surely lie in one window of periodMs is one all of whose [start, end]
// fit in [a.start, a.start + periodMs - margin) for the earliest start a among them: margin is the
// clock margin of clock-margin.mjs (the backend's clock against the clients' over one period). So,
// per name, for each allowed take a (as the first of a window), the allowed takes invoked at or after
// a.start and completed before a.start + periodMs - margin are counted; more than b + limit - 1 is an
// anomaly. Refused and unknown (`info`) takes are not counted: an unknown take may have used a token,
// which only leaves fewer for the others, never more.
// Returns a list of anomalies ({ kind, name, detail, ops }), empty when the history is valid.
import { clockMargin } from './clock-margin.mjs'

export function checkLimiter(history) {
  const anomalies = []
  const byName = new Map()
  for (const o of history) {
    if (o.p !== 'limiter' || o.f !== 'take' || o.type !== 'ok' || !o.result?.allowed) continue
    if (!byName.has(o.value.name)) byName.set(o.value.name, [])
    byName.get(o.value.name).push(o)
  }
  for (const [name, takes] of byName) {
    takes.sort((a, b) => a.start - b.start)
    for (let i = 0; i < takes.length; i++) {
      const a = takes[i]
      const { limit, periodMs, burst = 1 } = a.value
      const most = burst + limit - 1
      const until = a.start + periodMs - clockMargin(periodMs)
      const inside = []
      for (let j = i; j < takes.length && takes[j].start < until; j++) if (takes[j].end < until) inside.push(takes[j])
      if (inside.length > most) {
        anomalies.push({ kind: 'more takes allowed in one window than burst + limit - 1', name, detail: `${inside.length} > ${most} within ${(until - a.start).toFixed(1)} ms`, ops: inside })
      }
    }
  }
  return anomalies
}
