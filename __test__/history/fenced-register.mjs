// The storage a lock protects in the "lock-set" workload: one register, kept by the harness's parent
// process (outside flowguard, as a database would be), that refuses a lower fencing token than any it
// has seen. A read carries the reader's token too and raises the highest seen: a holder whose lease
// ran out (paused past it) and was replaced can then neither write over what the newer holder read,
// nor after it. Clients reach it over the fork's IPC channel (registerClient); every write it applies
// is logged in order, and the log goes into the history (process `register`, f `applied`), so the
// checker sees the register's own order, not the clients'.
// `checked: false` on a write is the planted bug (planted-bugs.mjs): the fence is not compared.
export function fencedRegister() {
  let value = 0
  let highest = -Infinity
  const log = []
  return {
    log,
    handle(m) {
      if (m.f === 'read') {
        if (m.fence < highest) return { ok: false, highest }
        highest = m.fence
        return { ok: true, value }
      }
      if (m.checked !== false && m.fence < highest) return { ok: false, highest }
      highest = Math.max(highest, m.fence)
      log.push({ seq: log.length, fence: m.fence, from: value, value: m.value, client: m.client })
      value = m.value
      return { ok: true }
    },
  }
}

/** The client side in a worker: read(fence) -> { ok, value }, write(fence, value, checked) -> { ok }. */
export function registerClient(client) {
  let next = 0
  const waiting = new Map()
  process.on('message', (m) => {
    if (m?.register === undefined) return
    waiting.get(m.register)?.(m.reply)
    waiting.delete(m.register)
  })
  const call = (m) => new Promise((resolve) => {
    const id = next++
    waiting.set(id, resolve)
    process.send({ register: id, client, ...m })
  })
  return {
    read: (fence) => call({ f: 'read', fence }),
    write: (fence, value, checked = true) => call({ f: 'write', fence, value, checked }),
  }
}
