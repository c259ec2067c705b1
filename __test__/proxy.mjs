// A TCP proxy on loopback between a client and Redis that can black-hole its connections on
// command: bytes stop flowing both ways while the sockets stay open (as with a dropped route or
// a silent firewall), so calls through it hang instead of failing.
import net from 'node:net'

/** Starts a proxy to 127.0.0.1:`port`. Resolves to { port, blackhole(on), close() }. */
export async function startProxy(port) {
  let dropping = false
  const sockets = new Set()
  const silenced = new WeakSet()
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1')
    for (const [from, to] of [[client, upstream], [upstream, client]]) {
      sockets.add(from)
      from.on('data', (d) => {
        if (!dropping && !silenced.has(from)) to.write(d)
      })
      from.on('error', () => {})
      from.on('close', () => {
        sockets.delete(from)
        to.destroy()
      })
    }
  })
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: server.address().port,
    /** From now on, drop every byte in both directions (true), or forward them again (false). */
    blackhole(on) {
      dropping = on
    },
    /** Drops every byte of the connections open now, for good; connections made later forward. */
    blackholeOpen() {
      for (const s of sockets) silenced.add(s)
    },
    close() {
      for (const s of sockets) s.destroy()
      return new Promise((r) => server.close(r))
    },
  }
}
