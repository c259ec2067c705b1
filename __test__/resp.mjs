// A minimal RESP2 client for the fault suites (binary-safe keys, no dependency): send one
// command at a time, read its reply. Loopback only, as the tests use it.
import net from 'node:net'

export async function connect(url) {
  const u = new URL(url)
  const sock = net.connect(Number(u.port || 6379), u.hostname)
  await new Promise((resolve, reject) => {
    sock.once('connect', resolve)
    sock.once('error', reject)
  })
  let buf = Buffer.alloc(0)
  let waiting = null
  sock.on('data', (d) => {
    buf = Buffer.concat([buf, d])
    waiting?.()
  })
  // Parses one reply at `pos`; returns [value, next] or null when more bytes are needed.
  function parse(pos) {
    const eol = buf.indexOf('\r\n', pos)
    if (eol < 0) return null
    const type = String.fromCharCode(buf[pos])
    const head = buf.subarray(pos + 1, eol).toString()
    if (type === '+') return [head, eol + 2]
    if (type === '-') return [new Error(head), eol + 2]
    if (type === ':') return [Number(head), eol + 2]
    if (type === '$') {
      const n = Number(head)
      if (n < 0) return [null, eol + 2]
      if (buf.length < eol + 2 + n + 2) return null
      return [buf.subarray(eol + 2, eol + 2 + n).toString('utf8'), eol + 2 + n + 2]
    }
    if (type === '*') {
      const n = Number(head)
      if (n < 0) return [null, eol + 2]
      const out = []
      let p = eol + 2
      for (let i = 0; i < n; i++) {
        const r = parse(p)
        if (!r) return null
        out.push(r[0])
        p = r[1]
      }
      return [out, p]
    }
    throw new Error(`unexpected RESP type ${type}`)
  }
  async function call(...args) {
    const parts = [`*${args.length}\r\n`]
    for (const a of args) {
      const b = Buffer.from(String(a), 'utf8')
      parts.push(`$${b.length}\r\n`, b, '\r\n')
    }
    sock.write(Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(p)))))
    for (;;) {
      const r = parse(0)
      if (r) {
        buf = buf.subarray(r[1])
        if (r[0] instanceof Error) throw r[0]
        return r[0]
      }
      await new Promise((resolve) => (waiting = resolve))
      waiting = null
    }
  }
  async function scanAll(pattern) {
    const keys = []
    let cursor = '0'
    do {
      const [next, batch] = await call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)
      keys.push(...batch)
      cursor = next
    } while (cursor !== '0')
    return keys
  }
  return { call, scanAll, close: () => sock.end() }
}
