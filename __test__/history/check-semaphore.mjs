// Checker of the Semaphore (and, with permits 1, of the Concurrency Lock: check-lock.mjs) over a
// history of operations { process, p, f: acquire | extend | release, value, type: ok | fail | info,
// result, start, end } (end = Infinity for `info`: it may still take effect). Per name:
// - at most `permits` grants are live at once, a grant being surely live (clock-margin.mjs) from
//   its ok completion until its invoke + timeoutMs - margin, moved on by each ok extend (its
//   invoke + timeoutMs - margin) and cut at the invoke of its release (ok or info: a release
//   may take effect as soon as it is sent);
// - fencing tokens are distinct, and a grant that completed before another was invoked has the
//   lower token (strictly increasing in real-time order; concurrent grants may go either way);
// - a release or extend is never ok once its grant's lease is surely over (its last ok grant or
//   extend's completion + timeoutMs + margin; not checked after an `info` extend, which may have
//   moved it), nor for an owner token no grant returned; with `staleOnNewerGrant` (the lock),
//   nor once another grant of the name was invoked after this one completed and itself completed
//   before the release or extend was invoked (a newer holder took over).
// Returns a list of anomalies ({ kind, name, ops }), empty when the history is valid.
import { surelyLive, surelyOver, clockMargin } from './clock-margin.mjs'

export function checkSemaphore(history, { p = 'semaphore', permits, staleOnNewerGrant = false }) {
  const anomalies = []
  const byName = new Map()
  for (const o of history) {
    if (o.p !== p) continue
    if (!byName.has(o.value.name)) byName.set(o.value.name, [])
    byName.get(o.value.name).push(o)
  }
  for (const [name, ops] of byName) {
    const grants = ops.filter((o) => o.f === 'acquire' && o.type === 'ok')
    const owners = new Map(grants.map((g) => [g.result.owner, g]))
    const after = new Map()
    for (const o of ops) {
      if (o.f === 'acquire') continue
      if (!owners.has(o.value.owner)) {
        if (o.type === 'ok') anomalies.push({ kind: `${o.f} ok for an owner no grant returned`, name, ops: [o] })
        continue
      }
      if (!after.has(o.value.owner)) after.set(o.value.owner, [])
      after.get(o.value.owner).push(o)
    }

    const intervals = []
    for (const g of grants) {
      const T = g.value.timeoutMs
      let [from, to] = surelyLive(g, T)
      let over = surelyOver(g, T)
      let unknown = false
      for (const x of (after.get(g.result.owner) || []).sort((a, b) => a.start - b.start)) {
        if (x.type === 'ok') {
          if (!unknown && x.start > over) anomalies.push({ kind: `${x.f} ok by an owner whose lease was surely over`, name, ops: [g, x] })
          if (staleOnNewerGrant) {
            const newer = grants.find((h) => h !== g && h.start > g.end && h.end < x.start)
            if (newer) anomalies.push({ kind: `${x.f} ok by an owner after a newer holder was granted`, name, ops: [g, newer, x] })
          }
        }
        if (x.f === 'extend') {
          if (x.type === 'ok') {
            to = Math.max(to, x.start + T - clockMargin(T))
            over = Math.max(over, surelyOver(x, T))
          } else if (x.type === 'info') unknown = true
        } else if (x.type !== 'fail') to = Math.min(to, x.start)
      }
      if (to > from) intervals.push({ from, to, g })
    }

    // At most `permits` surely-live grants at any moment.
    const events = intervals.flatMap((iv) => [[iv.from, 1, iv], [iv.to, -1, iv]])
    events.sort((a, b) => a[0] - b[0] || a[1] - b[1]) // an end before a start at the same time
    const active = new Set()
    for (const [, d, iv] of events) {
      if (d < 0) { active.delete(iv); continue }
      active.add(iv)
      if (active.size > permits) anomalies.push({ kind: `more than ${permits} live grant(s) at once`, name, ops: [...active].map((a) => a.g) })
    }

    // Fencing tokens: distinct, and increasing in real-time order.
    const seen = new Map()
    for (const g of grants) {
      const f = g.result.fence
      if (seen.has(f)) anomalies.push({ kind: 'fencing token handed out twice', name, ops: [seen.get(f), g] })
      else seen.set(f, g)
    }
    const byEnd = [...grants].sort((a, b) => a.end - b.end)
    let i = 0
    let top // the grant with the highest token among those completed so far
    for (const g of [...grants].sort((a, b) => a.start - b.start)) {
      while (i < byEnd.length && byEnd[i].end < g.start) {
        if (!top || byEnd[i].result.fence > top.result.fence) top = byEnd[i]
        i++
      }
      if (top && top.result.fence >= g.result.fence) anomalies.push({ kind: 'fencing token not above an earlier grant\'s', name, ops: [top, g] })
    }
  }
  return anomalies
}
