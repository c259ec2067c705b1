// Checker of Job State's `once` (idempotency keys) over a history of operations (p: 'once'):
// - call { key, leaseMs } -> { value, ran }: one fg.once(key, fn, { leaseMs }) call;
// - run { key, since, leaseMs } -> { token }: fn running inside such a call (recorded by fn itself;
//   `since` is a time taken just before the call was invoked, `token` the value fn returned).
// The rules (docs/queue-state.md, once), per key:
// - fn runs at most once within a lease: a call's claim was decided between its invoke and its fn's
//   start, and its lease lasts leaseMs from that decision (fn never throws here, so nothing frees
//   the key earlier); so a run r1's key is surely claimed on [r1.start, r1.since + leaseMs - margin]
//   (clock-margin.mjs), and another run whose claim was surely decided within it ([since, start]
//   inside it) ran twice within a lease;
// - never again once stored: no run whose call was invoked after a call that ran fn completed ok
//   (its result was stored; kept for ttlMs, a day here);
// - every caller gets the stored result: the ok calls of a key all return one value, and it is a
//   token some run of fn for this key returned.
// Returns a list of anomalies ({ kind, key, ops }), empty when the history is valid.
import { clockMargin } from './clock-margin.mjs'

export function checkOnce(history) {
  const anomalies = []
  const byKey = new Map()
  for (const o of history) {
    if (o.p !== 'once') continue
    if (!byKey.has(o.value.key)) byKey.set(o.value.key, [])
    byKey.get(o.value.key).push(o)
  }
  for (const [key, ops] of byKey) {
    const runs = ops.filter((o) => o.f === 'run').sort((a, b) => a.start - b.start)
    const calls = ops.filter((o) => o.f === 'call' && o.type === 'ok')

    for (const r1 of runs) {
      const until = r1.value.since + r1.value.leaseMs - clockMargin(r1.value.leaseMs)
      for (const r2 of runs) {
        if (r2 !== r1 && r2.value.since >= r1.start && r2.start <= until) anomalies.push({ kind: 'fn ran twice within a lease', key, ops: [r1, r2] })
      }
    }

    for (const c of calls) {
      if (!c.result.ran) continue
      const later = runs.find((r) => r.value.since > c.end)
      if (later) anomalies.push({ kind: 'fn ran again after its result was stored', key, ops: [c, later] })
    }

    const tokens = new Set(runs.map((r) => r.result?.token))
    const first = calls[0]
    for (const c of calls) {
      if (!tokens.has(c.result.value)) anomalies.push({ kind: 'a caller got a result no run of fn returned', key, ops: [c] })
      else if (c !== first && c.result.value !== first.result.value) anomalies.push({ kind: 'callers of one key got different results', key, ops: [first, c] })
    }
  }
  return anomalies
}
