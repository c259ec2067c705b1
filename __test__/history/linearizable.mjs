// A linearizability check of one object's history: the Wing & Gong search with Lowe's memoization
// (as Knossos's `wgl` and porcupine do; no npm package of it exists, see docs/histories.md). It
// looks for an order of the operations that respects real time (an operation that completed before
// another was invoked comes first) in which each one's result is what a sequential `model` gives.
//
// Operations: { type: ok | info, start, end } (end Infinity for `info`: it may take effect at any
// time after its invoke, or never; `fail` operations must be left out by the caller). The model:
// { init, step(state, op) -> { ok, state } }; states compare by JSON text. `interchangeable(op)`
// (optional): true for unknown operations whose effect is the same whatever the op (a counter's
// unknown increments): only the earliest not yet linearized is tried, which keeps the search from
// trying every subset of them. At each point the search tries the definite operations that may come
// next before the unknown ones (which are needed only when no definite one fits), so a history with
// many unknown operations is decided without trying where each of them could go. `budget`: how
// many steps the search may take before it gives up.
// Returns { linearizable: true | false | undefined (gave up), stuck: operations that could not come
// next where the search got furthest (for a report) }.
export function linearizable(ops, model, { interchangeable = () => false, budget = 2_000_000 } = {}) {
  // Call and return entries in one doubly linked list, by time; at equal times calls first (such
  // operations are concurrent, not ordered). A linearized operation's entries are lifted out.
  const entries = []
  ops.forEach((op, id) => {
    const call = { id, op, call: true, time: op.start }
    const ret = { id, op, call: false, time: op.end }
    call.match = ret
    entries.push(call, ret)
  })
  entries.sort((a, b) => a.time - b.time || (a.call === b.call ? 0 : a.call ? -1 : 1))
  const head = { next: null }
  let prev = head
  for (const e of entries) {
    e.prev = prev
    prev.next = e
    prev = e
  }
  const lift = (e) => {
    for (const x of [e, e.match]) {
      x.prev.next = x.next
      if (x.next) x.next.prev = x.prev
    }
  }
  const unlift = (e) => {
    for (const x of [e.match, e]) {
      x.prev.next = x
      if (x.next) x.next.prev = x
    }
  }
  // What may come next: the calls before the first return still in the list; definite ones first.
  const candidates = () => {
    const definite = []
    const unknown = []
    let twin = false
    for (let e = head.next; e && e.call; e = e.next) {
      if (e.op.type !== 'info') definite.push(e)
      else if (!interchangeable(e.op)) unknown.push(e)
      else if (!twin) {
        twin = true
        unknown.push(e)
      }
    }
    return definite.concat(unknown)
  }

  // The memo: which operations are linearized (a bitset, as text) and the model's state.
  const bits = new Uint16Array(Math.ceil(ops.length / 16) + 1)
  const flip = (id) => { bits[id >>> 4] ^= 1 << (id & 15) }
  const memoKey = (state) => `${JSON.stringify(state)}|${String.fromCharCode.apply(null, bits)}`
  const seen = new Set()
  let left = ops.filter((o) => o.type !== 'info').length
  let state = model.init
  const stack = []
  let frame = { next: candidates(), i: 0 }
  let best = -1
  let stuck = []
  for (let steps = 0; left > 0; steps++) {
    if (steps > budget) return { linearizable: undefined, stuck }
    if (frame.i >= frame.next.length) {
      if (stack.length > best) { best = stack.length; stuck = frame.next.slice(0, 5).map((e) => e.op) }
      if (!stack.length) return { linearizable: false, stuck }
      const back = stack.pop()
      unlift(back.e)
      flip(back.e.id)
      if (back.e.op.type !== 'info') left++
      state = back.state
      frame = back.frame
      continue
    }
    const e = frame.next[frame.i++]
    const r = model.step(state, e.op)
    if (!r.ok) continue
    flip(e.id)
    const key = memoKey(r.state)
    if (seen.has(key)) { flip(e.id); continue }
    seen.add(key)
    stack.push({ e, state, frame })
    lift(e)
    if (e.op.type !== 'info') left--
    state = r.state
    frame = { next: candidates(), i: 0 }
  }
  return { linearizable: true, stuck: [] }
}
