// Checker of the "lock-set" workload: clients take the lock `LS`, read the fenced register of
// fenced-register.mjs with their fencing token, and write the value + 1 with it. The register's
// own log of applied writes (process `register`, f `applied` { seq, fence, from, value }) must show
// no lost update: each applied write is the value it replaced + 1 (a holder that read v wrote v + 1
// only if nobody wrote in between), and the fences of applied writes never go down. Every write a
// client saw ok must be in the log.
// Returns a list of anomalies ({ kind, ops }), empty when the history is valid.
export function checkLockset(history) {
  const anomalies = []
  const applied = history.filter((o) => o.p === 'lockset' && o.f === 'applied').sort((a, b) => a.value.seq - b.value.seq)
  let prev
  for (const a of applied) {
    if (a.value.value !== a.value.from + 1) anomalies.push({ kind: 'lost update: a write not one above the value it replaced', ops: prev ? [prev, a] : [a] })
    if (prev && a.value.fence < prev.value.fence) anomalies.push({ kind: 'a write applied with a lower fence than an earlier one', ops: [prev, a] })
    prev = a
  }
  const values = new Set(applied.map((a) => `${a.value.fence}:${a.value.value}`))
  for (const w of history) {
    if (w.p === 'lockset' && w.f === 'write' && w.type === 'ok' && !values.has(`${w.value.fence}:${w.value.value}`)) anomalies.push({ kind: 'a write seen ok is not in the register', ops: [w] })
  }
  return anomalies
}
