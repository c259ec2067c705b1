// A loopback TCP proxy between the clients and a server (redis-server here) that injects network
// faults, as Toxiproxy does, on Node's `net` (toxiproxy-node-client needs Toxiproxy's own server,
// a Go binary this repo does not ship). Faults, one at a time:
// - latency(ms): every chunk, both ways, is delivered ms later (order kept);
// - blackHole(): nothing is delivered either way, the connections stay open (a partition): what
//   was sent waits, as TCP retransmits it, and is delivered when heal() is called (a connection
//   closed meanwhile loses it);
// - reset(): every open connection is reset (RST) at once, as a crashed middlebox or a peer's
//   reboot does; new ones are accepted.
// heal() ends latency and the black hole.
import net from 'node:net'

export async function faultProxy(targetPort, host = '127.0.0.1') {
  let delayMs = 0
  let hole = null // while black-holed: { promise, open } resolved by heal()
  const pairs = new Set()

  // Each direction is one chain, so chunks stay in order whatever the fault when they came.
  const tails = new WeakMap()
  const send = (to, chunk) => {
    const due = Date.now() + delayMs
    const gate = hole?.promise
    const tail = (tails.get(to) ?? Promise.resolve()).then(async () => {
      if (gate) await gate
      const wait = due - Date.now()
      if (wait > 0) await new Promise((r) => setTimeout(r, wait))
      if (!to.destroyed) to.write(chunk)
    })
    tails.set(to, tail)
  }
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, host)
    const pair = { client, upstream }
    pairs.add(pair)
    const close = () => {
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on('data', (c) => send(upstream, c))
    upstream.on('data', (c) => send(client, c))
    for (const s of [client, upstream]) {
      s.on('error', close)
      s.on('close', close)
    }
  })
  await new Promise((r) => server.listen(0, host, r))
  return {
    port: server.address().port,
    latency(ms) { delayMs = ms },
    blackHole() {
      if (hole) return
      let open
      const promise = new Promise((r) => { open = r })
      hole = { promise, open }
    },
    heal() {
      delayMs = 0
      hole?.open()
      hole = null
    },
    reset() {
      for (const { client, upstream } of pairs) {
        client.resetAndDestroy()
        upstream.resetAndDestroy()
      }
      pairs.clear()
    },
    close() {
      this.heal()
      this.reset()
      return new Promise((r) => server.close(r))
    },
  }
}
