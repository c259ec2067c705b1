// Checker of the Item Tracker over a history of operations (p: 'tracker'; f: claim { id,
// timeoutMs, reclaimCompleted } -> { claimed, owner, attempts }, complete / fail { id, owner },
// get { id } -> { status, attempts } read by process `final` at the end). Per item:
// - at most one live claim: a claim is surely live (clock-margin.mjs) from its completion until
//   its invoke + timeoutMs - margin, or until its complete / fail (ok or info) was invoked;
// - a completed item is not claimed again: a claim without reclaimCompleted invoked after an ok
//   complete completed must not be ok, unless a reclaimCompleted claim (not failed) could have
//   come in between (the item is in progress again and may be abandoned or failed);
// - attempts count every claim: ok claims have distinct attempts, increasing in real-time order,
//   and the final attempts lie between the ok claims and the ok + unknown (`info`) ones;
// - stale owners refused: a complete / fail is not ok for an owner no claim returned, nor once
//   another claim (invoked after this owner's claim completed) completed before it was invoked.
// Returns a list of anomalies ({ kind, id, ops }), empty when the history is valid.
import { surelyLive } from './clock-margin.mjs'

export function checkTracker(history) {
  const anomalies = []
  const byItem = new Map()
  for (const o of history) {
    if (o.p !== 'tracker') continue
    if (!byItem.has(o.value.id)) byItem.set(o.value.id, [])
    byItem.get(o.value.id).push(o)
  }
  for (const [id, ops] of byItem) {
    const claims = ops.filter((o) => o.f === 'claim' && o.type === 'ok')
    const owners = new Map(claims.map((c) => [c.result.owner, c]))
    const finishes = ops.filter((o) => o.f === 'complete' || o.f === 'fail')

    // One live claim at a time.
    const ivs = claims.map((c) => {
      let [from, to] = surelyLive(c, c.value.timeoutMs)
      for (const x of finishes) if (x.value.owner === c.result.owner && x.type !== 'fail') to = Math.min(to, x.start)
      return { from, to, c }
    }).filter((iv) => iv.to > iv.from).sort((a, b) => a.from - b.from)
    let prev
    for (const iv of ivs) {
      if (prev && iv.from < prev.to) anomalies.push({ kind: 'two live claims at once', id, ops: [prev.c, iv.c] })
      if (!prev || iv.to > prev.to) prev = iv
    }

    // A completed item is not claimed again.
    const completes = finishes.filter((x) => x.f === 'complete' && x.type === 'ok')
    for (const c of claims) {
      if (c.value.reclaimCompleted) continue
      for (const a of completes) {
        if (a.end >= c.start) continue
        const excuse = ops.some((x) => x.f === 'claim' && x.value.reclaimCompleted && x.type !== 'fail' && x.end > a.start && x.start < c.end)
        if (!excuse) { anomalies.push({ kind: 'completed item claimed again', id, ops: [a, c] }); break }
      }
    }

    // Attempts.
    const seen = new Map()
    for (const c of claims) {
      if (seen.has(c.result.attempts)) anomalies.push({ kind: 'two claims with the same attempts', id, ops: [seen.get(c.result.attempts), c] })
      else seen.set(c.result.attempts, c)
    }
    for (const a of claims) for (const b of claims) {
      if (a.end < b.start && a.result.attempts >= b.result.attempts) anomalies.push({ kind: 'attempts not increasing in real-time order', id, ops: [a, b] })
    }
    const get = ops.filter((o) => o.f === 'get' && o.type === 'ok').at(-1)
    if (get) {
      const unknown = ops.filter((o) => o.f === 'claim' && o.type === 'info').length
      if (get.result.attempts < claims.length || get.result.attempts > claims.length + unknown) {
        anomalies.push({ kind: 'final attempts outside [ok claims, ok + unknown claims]', detail: `${get.result.attempts} outside [${claims.length}, ${claims.length + unknown}]`, id, ops: [get] })
      }
    }

    // Stale owners refused.
    for (const x of finishes) {
      if (x.type !== 'ok') continue
      const c = owners.get(x.value.owner)
      if (!c) { anomalies.push({ kind: `${x.f} ok for an owner no claim returned`, id, ops: [x] }); continue }
      const newer = claims.find((c2) => c2 !== c && c2.start > c.end && c2.end < x.start)
      if (newer) anomalies.push({ kind: `${x.f} ok by a stale owner (a newer claim was granted)`, id, ops: [c, newer, x] })
    }
  }
  return anomalies
}
