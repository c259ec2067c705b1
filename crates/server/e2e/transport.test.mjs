// flowguard-server's connections under stress, as a container runtime and a hostile network see
// them, on the real binary:
// - SIGTERM with a half-sent request head and a stalled body held open: the process exits within
//   its drain timeout (a container runtime sends SIGKILL after 10 s); a call in flight is answered
//   and stays applied (checked after a restart on the same store file).
// - With 128 file descriptors, 150 silent connections: /healthz still answers, because the header
//   timeout cuts them.
// The waits on the server are bounded by generous deadlines; nothing measures its speed.
//
// FLOWGUARD_SERVER_BIN: the server binary (default: the newest target/*/debug/flowguard-server).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import net from 'node:net'
import { startServer, stopServer } from './server-process.mjs'

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** A raw TCP connection to the server; `got` holds what it answered, `ended` resolves on close. */
function connect(port) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1')
    sock.got = ''
    sock.on('data', (d) => { sock.got += d })
    sock.on('error', () => {})
    sock.ended = new Promise((r) => sock.once('close', r))
    sock.once('connect', () => resolve(sock))
    sock.once('error', reject)
  })
}

/** Resolves once `sock` has received `text`; rejects when it closes first or after `ms`. */
async function waitFor(sock, text, ms = 15000) {
  const until = Date.now() + ms
  while (!sock.got.includes(text)) {
    if (sock.destroyed || sock.readableEnded) throw new Error(`closed before ${JSON.stringify(text)}: ${sock.got}`)
    if (Date.now() > until) throw new Error(`no ${JSON.stringify(text)} within ${ms} ms: ${sock.got}`)
    await sleep(10)
  }
  return sock.got
}

/** Whether `promise` settled within `ms`: its value, or `timedOut`. */
const timedOut = Symbol('timed out')
async function within(promise, ms) {
  let timer
  const late = new Promise((r) => { timer = setTimeout(() => r(timedOut), ms) })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

/** The head of a JSON POST announcing `length` bytes of body, waiting for 100 Continue. */
const postHead = (path, length) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`

test('SIGTERM: the server exits within its drain timeout with a half-sent head and a stalled body held open; the call in flight is answered and stays applied', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fg-drain-'))
  const store = join(dir, 'store.db')
  const drainMs = 2000
  const env = { FLOWGUARD_DRAIN_TIMEOUT_MS: String(drainMs), FLOWGUARD_LOG: 'warn' }
  const s = await startServer(['--path', store], env)
  try {
    // A half-sent head on a connection the server holds (a first call on it was answered).
    const head = await connect(s.port)
    head.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
    await waitFor(head, '{"status":"ok"}')
    head.write('POST /v1/lock/acquire HTTP/1.1\r\nHost: x\r\n')
    // A stalled body: the server is reading it (it asked for it with 100 Continue).
    const stalled = await connect(s.port)
    stalled.write(postHead('/v1/lock/acquire', 100))
    await waitFor(stalled, '100 Continue')
    stalled.write('{"name"')
    // A call in flight: its head is read; its body is sent after SIGTERM.
    const body = JSON.stringify({ name: 'applied', timeoutMs: 600000 })
    const inflight = await connect(s.port)
    inflight.write(postHead('/v1/lock/acquire', Buffer.byteLength(body)))
    await waitFor(inflight, '100 Continue')

    const exited = new Promise((r) => s.proc.once('exit', (code, signal) => r({ code, signal })))
    s.proc.kill('SIGTERM')
    inflight.write(body)
    const answer = await waitFor(inflight, '"acquired":true')
    assert.match(answer, /HTTP\/1\.1 200/)
    // Bounded: the drain timeout plus a generous margin, still below the 10 s of a container
    // runtime and below the default header (10 s) and body (30 s) timeouts.
    const exit = await within(exited, drainMs + 6000)
    assert.notEqual(exit, timedOut, `the server was still running after SIGTERM: ${s.output()}`)
    assert.deepEqual(exit, { code: 0, signal: null }, s.output())
    assert.match(s.output(), /drain timeout/, 'the cut connections are logged')
    for (const c of [head, stalled, inflight]) assert.notEqual(await within(c.ended, 5000), timedOut, 'a connection left open')
    assert.doesNotMatch(stalled.got, /HTTP\/1\.1 200/)

    // The answered call stays applied: the lock is held after a restart on the same store.
    const again = await startServer(['--path', store], env)
    try {
      const res = await fetch(`${again.base}/v1/lock/get`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'applied' }),
      })
      const lock = await res.json()
      assert.equal(lock.locked, true, JSON.stringify(lock))
    } finally {
      await stopServer(again)
    }
  } finally {
    s.proc.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
})

test('with 128 file descriptors, 150 silent connections do not keep /healthz from answering: the header timeout cuts them', async () => {
  const s = await startServer([], { FLOWGUARD_HEADER_TIMEOUT_MS: '1000', FLOWGUARD_LOG: 'error' }, { fdLimit: 128 })
  const silent = []
  try {
    for (let i = 0; i < 150; i++) silent.push(await connect(s.port))
    // On a new connection (fetch would reuse the one startServer polled /healthz on).
    const probe = await connect(s.port)
    probe.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    silent.push(probe)
    const answer = await waitFor(probe, '{"status":"ok"}', 20000)
    assert.match(answer, /^HTTP\/1\.1 200/)
    silent.pop()
    for (const c of silent) {
      assert.notEqual(await within(c.ended, 20000), timedOut, 'a silent connection was never cut')
      assert.equal(c.got, '', 'a silent connection is closed without an answer')
    }
  } finally {
    for (const c of silent) c.destroy()
    await stopServer(s)
  }
})
