// Checker of Job State registers (setState / getState) over a history of operations (p: 'register';
// f: write { key, value } -> {}, read { key } -> { value } (null when absent)): each key's history
// must be linearizable (linearizable.mjs) against a register starting absent. Writes carry values
// no other write uses. Left out: failed operations (nothing happened), reads of unknown outcome
// (they constrain nothing), and unknown writes whose value no read returned (taking effect could
// only make a read impossible, so leaving them out never hides an anomaly).
// Returns a list of anomalies ({ kind, key, ops }); a search that gave up is reported as
// { kind: 'undecided', ... } in `anomalies.undecided` (a count), not as an anomaly.
import { linearizable } from './linearizable.mjs'

export const registerModel = {
  init: null,
  step: (state, op) => op.f === 'write'
    ? { ok: true, state: op.value.value }
    : { ok: state === (op.result.value ?? null), state },
}

export function checkRegister(history, { p = 'register' } = {}) {
  const anomalies = []
  Object.defineProperty(anomalies, 'undecided', { value: 0, writable: true }) // not an anomaly: counted apart
  const byKey = new Map()
  for (const o of history) {
    if (o.p !== p || o.type === 'fail') continue
    if (!byKey.has(o.value.key)) byKey.set(o.value.key, [])
    byKey.get(o.value.key).push(o)
  }
  for (const [key, all] of byKey) {
    const read = new Set(all.filter((o) => o.f === 'read' && o.type === 'ok').map((o) => o.result.value))
    const ops = all.filter((o) => o.type === 'ok' || (o.f === 'write' && read.has(o.value.value)))
    const r = linearizable(ops, registerModel)
    if (r.linearizable === false) anomalies.push({ kind: 'register history not linearizable', key, ops: r.stuck })
    if (r.linearizable === undefined) anomalies.undecided++
  }
  return anomalies
}
