// Checker of the Dedup Queue over a history of operations (p: 'queue'; f: enqueue { ids },
// read { visibilityTimeoutMs } -> { owner, ids }, ack { owner, ids } -> { items: [{ id, ok }] },
// size -> { waiting, claimed, again }; the harness ends every history by draining the queue as
// process `final`). Rules:
// - no id lost: every id of an ok enqueue is acked (an ok ack item, or an `info` ack that may
//   have happened) by the end, and the last size read is empty;
// - none delivered again after a successful ack: a read invoked after an ok ack of the id
//   completed must not return it, unless the id was enqueued again (an enqueue not failed that
//   completed after the acked read was invoked: enqueued while claimed, it is delivered once more);
// - no two deliveries of one id under overlapping visibility leases, each surely live
//   (clock-margin.mjs) from its read's completion until its read's invoke + visibilityTimeoutMs -
//   margin, or until its ack (ok or info) was invoked;
// - stale readers refused: an ack item is not ok once its read's lease is surely over, nor after
//   another read (invoked after this read completed) returned the id before the ack was invoked,
//   nor for an owner no read returned.
// Returns a list of anomalies ({ kind, id, ops }), empty when the history is valid.
import { surelyLive, surelyOver } from './clock-margin.mjs'

export function checkQueue(history) {
  const anomalies = []
  const ops = history.filter((o) => o.p === 'queue')
  const deliveries = new Map() // id -> [{ read, owner }]
  const readsByOwner = new Map()
  for (const r of ops) {
    if (r.f !== 'read' || r.type !== 'ok') continue
    readsByOwner.set(r.result.owner, r)
    for (const id of r.result.ids) {
      if (!deliveries.has(id)) deliveries.set(id, [])
      deliveries.get(id).push(r)
    }
  }
  const acks = new Map() // id -> [{ op, ok }] (ok: acked; false: refused; undefined: unknown)
  for (const a of ops) {
    if (a.f !== 'ack') continue
    for (const id of a.value.ids) {
      const item = a.type === 'ok' ? a.result.items.find((i) => i.id === id) : undefined
      if (!acks.has(id)) acks.set(id, [])
      acks.get(id).push({ op: a, ok: a.type === 'ok' ? !!item?.ok : a.type === 'fail' ? false : undefined })
    }
  }
  const enqueues = new Map() // id -> enqueue ops not failed
  for (const e of ops) {
    if (e.f !== 'enqueue' || e.type === 'fail') continue
    for (const id of e.value.ids) {
      if (!enqueues.has(id)) enqueues.set(id, [])
      enqueues.get(id).push(e)
    }
  }

  // No id lost.
  for (const [id, es] of enqueues) {
    if (!es.some((e) => e.type === 'ok')) continue
    if (!(acks.get(id) || []).some((a) => a.ok !== false)) anomalies.push({ kind: 'enqueued id never acked (lost)', id, ops: [...es, ...(deliveries.get(id) || [])] })
  }
  const sizes = ops.filter((o) => o.f === 'size' && o.type === 'ok')
  const last = sizes.at(-1)
  if (last && last.result.waiting + last.result.claimed + last.result.again !== 0) anomalies.push({ kind: 'queue not empty after the drain', id: null, ops: [last] })

  for (const [id, reads] of deliveries) {
    const idAcks = acks.get(id) || []
    // Not delivered again after a successful ack.
    for (const a of idAcks) {
      if (a.ok !== true) continue
      const acked = readsByOwner.get(a.op.value.owner)
      const again = (enqueues.get(id) || []).some((e) => acked && e.end > acked.start)
      if (again) continue
      const later = reads.find((r) => r.start > a.op.end)
      if (later) anomalies.push({ kind: 'delivered again after a successful ack', id, ops: [acked, a.op, later] })
    }
    // Visibility leases of one id never overlap.
    const ivs = reads.map((r) => {
      const V = r.value.visibilityTimeoutMs
      let [from, to] = surelyLive(r, V)
      for (const a of idAcks) if (a.op.value.owner === r.result.owner && a.ok !== false) to = Math.min(to, a.op.start)
      return { from, to, r }
    }).filter((iv) => iv.to > iv.from).sort((x, y) => x.from - y.from)
    let prev
    for (const iv of ivs) {
      if (prev && iv.from < prev.to) anomalies.push({ kind: 'two deliveries under overlapping live visibility leases', id, ops: [prev.r, iv.r] })
      if (!prev || iv.to > prev.to) prev = iv
    }
  }
  // Stale readers refused.
  for (const [id, idAcks] of acks) {
    const reads = deliveries.get(id) || []
    for (const a of idAcks) {
      if (a.ok !== true) continue
      const r = readsByOwner.get(a.op.value.owner)
      if (!r || !r.result.ids.includes(id)) {
        anomalies.push({ kind: 'ack ok for an owner whose read did not return the id', id, ops: [a.op] })
        continue
      }
      if (a.op.start > surelyOver(r, r.value.visibilityTimeoutMs)) anomalies.push({ kind: 'ack ok after the visibility lease was surely over', id, ops: [r, a.op] })
      const newer = reads.find((r2) => r2 !== r && r2.start > r.end && r2.end < a.op.start)
      if (newer) anomalies.push({ kind: 'ack ok after another read was given the id', id, ops: [r, newer, a.op] })
    }
  }
  return anomalies
}
