// rediss:// against a local TLS redis-server with a CA made for the test. flowguard trusts the
// system's certificate store; SSL_CERT_FILE points it at another CA file.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import net from 'node:net'
import { sleep } from './backends.mjs'
import { freePort } from './redis-server.mjs'
import { makeCerts } from './tls-certs.mjs'

const have = (cmd, args) => spawnSync(cmd, args).status === 0
const ready = have('redis-server', ['--version']) && have('openssl', ['version'])
if (process.env.CI === 'true' && !ready) throw new Error('CI=true but redis-server or openssl is missing')

// Runs one call in a child process (SSL_CERT_FILE is read once per process).
// certFile 'system': the system's certificate store, which does not hold the test's CA.
function callWith(url, certFile) {
  const code = `const { Flowguard } = require(${JSON.stringify(new URL('../index.js', import.meta.url).pathname)});
    Flowguard.open({ url: process.env.U, connectTimeoutMs: 2000 })
      .then((fg) => fg.claim('tls', 'a')).then((r) => console.log(JSON.stringify({ ok: r.claimed })))
      .catch((e) => console.log(JSON.stringify({ code: e.code, message: e.message })))`
  const env = { ...process.env, U: url }
  if (certFile === 'system') delete env.SSL_CERT_FILE
  else if (certFile) env.SSL_CERT_FILE = certFile
  else env.SSL_CERT_FILE = '/nonexistent-ca.pem'
  const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', env, timeout: 15000 })
  return JSON.parse(r.stdout.trim().split('\n').pop())
}

test('rediss:// with a trusted CA works; an untrusted certificate is refused unless #insecure', { skip: !ready && 'needs redis-server and openssl' }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'flowguard-tls-'))
  let server
  try {
    makeCerts(dir)
    const port = await freePort()
    server = spawn('redis-server', ['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--tls-cert-file', join(dir, 'server.pem'), '--tls-key-file', join(dir, 'server.key'), '--tls-ca-cert-file', join(dir, 'ca.pem'),
      '--tls-auth-clients', 'no', '--requirepass', 'tls-Secret-9'], { stdio: 'ignore' })
    for (let i = 0; i < 100; i++) {
      const up = await new Promise((res) => { const c = net.connect(port, '127.0.0.1', () => { c.end(); res(true) }); c.on('error', () => res(false)) })
      if (up) break
      await sleep(50)
    }
    const url = `rediss://:tls-Secret-9@localhost:${port}/0`
    assert.deepEqual(callWith(url, join(dir, 'ca.pem')), { ok: true })
    const refused = callWith(url, null)
    assert.equal(refused.code, 'ERR_BACKEND_UNAVAILABLE', refused.message)
    assert.match(refused.message, /TLS/)
    assert.ok(!refused.message.includes('tls-Secret-9'))
    // The n8n credential's "Disable TLS verification": `#insecure` accepts the certificate the
    // system's store does not trust; without it the connection is refused, naming TLS.
    const untrusted = callWith(url, 'system')
    assert.equal(untrusted.code, 'ERR_BACKEND_UNAVAILABLE', untrusted.message)
    assert.match(untrusted.message, /TLS/)
    // It gets an answer: the item is in progress, claimed by the first call above.
    assert.deepEqual(callWith(`${url}#insecure`, 'system'), { ok: false })
    // Plain redis:// to a TLS port does not hang: it fails within the connect timeout.
    const plain = callWith(`redis://:tls-Secret-9@localhost:${port}/0`, join(dir, 'ca.pem'))
    assert.ok(plain.code, JSON.stringify(plain))
    assert.ok(!plain.message.includes('tls-Secret-9'))
  } finally {
    server?.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
})
