// Checker of Job State counters over a history of operations (p: 'counter'; f: incr -> { value }
// by 1 from 0, read -> { value } by process `final` at the end):
// - every ok increment returned a distinct value;
// - consistent with real-time order: an increment that completed before another was invoked
//   returned the lower value;
// - the final value lies between the ok increments and the ok + unknown (`info`) ones, and no
//   increment returned more than it (or less than 1).
// - and the whole history, the final read included, is linearizable (linearizable.mjs) against a
//   counter from 0: the conditions above are necessary, this one is also sufficient (it finds, for
//   example, a value that no increment could have produced in time). Unknown increments may take
//   effect any time after their invoke, or never; they are interchangeable.
// Returns a list of anomalies ({ kind, ops }), empty when the history is valid; a search that
// gave up is counted in `anomalies.undecided`, not reported as an anomaly.
import { linearizable } from './linearizable.mjs'

export const counterModel = {
  init: 0,
  step: (state, op) => op.f === 'incr'
    ? { ok: op.type === 'info' || op.result.value === state + 1, state: state + 1 }
    : { ok: op.result.value === state, state },
}

export function checkCounter(history) {
  const anomalies = []
  Object.defineProperty(anomalies, 'undecided', { value: 0, writable: true }) // not an anomaly: counted apart
  const all = history.filter((o) => o.p === 'counter' && o.type !== 'fail' && (o.type === 'ok' || o.f === 'incr'))
  const lin = linearizable(all, counterModel, { interchangeable: (o) => o.f === 'incr' })
  if (lin.linearizable === false) anomalies.push({ kind: 'counter history not linearizable', ops: lin.stuck })
  if (lin.linearizable === undefined) anomalies.undecided++
  const incs = history.filter((o) => o.p === 'counter' && o.f === 'incr' && o.type === 'ok')
  const unknown = history.filter((o) => o.p === 'counter' && o.f === 'incr' && o.type === 'info').length
  const seen = new Map()
  for (const o of incs) {
    if (seen.has(o.result.value)) anomalies.push({ kind: 'two increments returned the same value', ops: [seen.get(o.result.value), o] })
    else seen.set(o.result.value, o)
  }
  const byEnd = [...incs].sort((a, b) => a.end - b.end)
  let i = 0
  let top
  for (const o of [...incs].sort((a, b) => a.start - b.start)) {
    while (i < byEnd.length && byEnd[i].end < o.start) {
      if (!top || byEnd[i].result.value > top.result.value) top = byEnd[i]
      i++
    }
    if (top && top.result.value >= o.result.value) anomalies.push({ kind: 'increment not above one that completed before it', ops: [top, o] })
  }
  const read = history.filter((o) => o.p === 'counter' && o.f === 'read' && o.type === 'ok').at(-1)
  if (read) {
    const v = read.result.value
    if (v < incs.length || v > incs.length + unknown) anomalies.push({ kind: 'final value outside [ok increments, ok + unknown increments]', detail: `${v} outside [${incs.length}, ${incs.length + unknown}]`, ops: [read] })
    const out = incs.find((o) => o.result.value > v || o.result.value < 1)
    if (out) anomalies.push({ kind: 'an increment returned a value outside [1, final]', ops: [out, read] })
  }
  return anomalies
}
