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
// trying every subset of them. `budget`: how many steps the search may take before it gives up.
// Returns { linearizable: true | false | undefined (gave up), stuck: the operations the longest
// linearized prefix could not go past (for a report) }.
export function linearizable(ops, model, { interchangeable = () => false, budget = 2_000_000 } = {}) {
  // Call and return entries in one doubly linked list, by time; at equal times calls first (such
  // operations are concurrent, not ordered).
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
    e.prev.next = e.next
    if (e.next) e.next.prev = e.prev
    const r = e.match
    r.prev.next = r.next
    if (r.next) r.next.prev = r.prev
  }
  const unlift = (e) => {
    const r = e.match
    r.prev.next = r
    if (r.next) r.next.prev = r
    e.prev.next = e
    if (e.next) e.next.prev = e
  }

  const words = new Uint32Array(Math.ceil(ops.length / 32) + 1)
  const flip = (id) => { words[id >>> 5] ^= 1 << (id & 31) }
  const seen = new Set()
  const stack = []
  let state = model.init
  let done = 0
  let best = 0
  let stuck = []
  let steps = 0
  let e = head.next
  let twin = false // an interchangeable unknown operation was passed on this walk (so was tried)
  while (e) {
    if (++steps > budget) return { linearizable: undefined, stuck }
    if (!e.call) {
      // A return: every operation still in the list before it was tried. An unknown operation's
      // return (Infinity) means every definite one is linearized: the rest need not take effect.
      if (e.time === Infinity) return { linearizable: true, stuck: [] }
      if (!stack.length) return { linearizable: false, stuck }
      const [top, before] = stack.pop()
      state = before
      flip(top.id)
      done--
      unlift(top)
      e = top.next
      twin = isTwin(top) || twinBefore(top)
      continue
    }
    if (isTwin(e)) {
      if (twin) { e = e.next; continue }
      twin = true
    }
    const r = model.step(state, e.op)
    if (r.ok) {
      flip(e.id)
      const key = `${words.join(',')}|${JSON.stringify(r.state)}`
      if (!seen.has(key)) {
        seen.add(key)
        stack.push([e, state])
        state = r.state
        done++
        lift(e)
        if (done > best) { best = done; stuck = [] }
        e = head.next
        twin = false
        continue
      }
      flip(e.id)
    } else if (done === best && stuck.length < 5) stuck.push(e.op)
    e = e.next
  }
  return { linearizable: true, stuck: [] }

  function isTwin(e) {
    return e.call && e.op.type === 'info' && interchangeable(e.op)
  }
  // True when an interchangeable unknown operation comes before `e` in the list.
  function twinBefore(e) {
    for (let x = head.next; x && x !== e; x = x.next) if (isTwin(x)) return true
    return false
  }
}
