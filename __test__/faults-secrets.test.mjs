// Secrets: a password in the Redis URL appears in no error message, stack, inspected error or
// log line, across auth failures, connection failures, a bad URL, TLS to a plain server and a
// server that goes away under a connected client. The scenarios run in a child process whose
// whole output (stdout and stderr) is searched for the password in every spelling.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { sleep } from './backends.mjs'
import { haveRedis, freePort, startRedis } from './redis-server.mjs'

const here = dirname(fileURLToPath(import.meta.url))

test('secrets: a password in the URL appears in no error, stack or log line', { skip: !haveRedis && 'redis-server not installed', timeout: 60_000 }, async () => {
  const tag = randomBytes(6).toString('hex')
  const PW = `Pw@:/${tag}-s3cr3t`                    // needs URL encoding: '@', ':' and '/'
  const PW_URL = encodeURIComponent(PW)
  const WRONG = `wrongpw${tag}`
  const [authPort, openPort, deadPort] = [await freePort(), await freePort(), await freePort()]
  const auth = await startRedis(authPort, ['--requirepass', PW])
  const open = await startRedis(openPort)
  try {
    const child = spawn(process.execPath, [join(here, 'fixtures/secrets-child.mjs')], {
      env: { ...process.env, AUTH_PORT: String(authPort), OPEN_PORT: String(openPort), DEAD_PORT: String(deadPort), PW, PW_URL, WRONG },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    child.stderr.on('data', (d) => (err += d))
    child.stdout.on('data', (d) => {
      out += d
      if (out.includes('"ready":true') && auth.exitCode === null && auth.signalCode === null) {
        auth.kill('SIGKILL')
        auth.once('exit', () => child.stdin.write('go\n'))
      }
    })
    const code = await new Promise((r) => child.on('exit', r))
    assert.equal(code, 0, err)
    const results = Object.fromEntries(out.trim().split('\n').map((l) => JSON.parse(l)).filter((r) => r.scenario).map((r) => [r.scenario, r]))
    const expect = {
      'wrong password': 'ERR_BACKEND_AUTH',
      'unknown user': 'ERR_BACKEND_AUTH',
      'no password given': 'ERR_BACKEND_AUTH',
      'refused': 'ERR_BACKEND_UNAVAILABLE',
      'invalid url': 'ERR_INVALID_ARGUMENT',
      'server gone': 'ERR_BACKEND_UNAVAILABLE',
      'server gone (lock)': 'ERR_BACKEND_UNAVAILABLE',
      'server gone (withLock)': 'ERR_BACKEND_UNAVAILABLE',
    }
    for (const [scenario, want] of Object.entries(expect)) assert.equal(results[scenario]?.code, want, `${scenario}: ${JSON.stringify(results[scenario])}`)
    assert.ok(results['right password'].ok, 'the right password works')
    // A server without a password refuses AUTH (an auth error); TLS to a plain server cannot connect.
    assert.ok(['ERR_BACKEND_AUTH', 'ERR_BACKEND'].includes(results['password to a server without one'].code), JSON.stringify(results['password to a server without one']))
    assert.ok(['ERR_BACKEND_UNAVAILABLE', 'ERR_TIMEOUT'].includes(results['tls to a plain server'].code), JSON.stringify(results['tls to a plain server']))
    const everything = out + err
    for (const secret of [PW, PW_URL, WRONG, `s3cr3t`, encodeURIComponent(PW_URL)]) {
      assert.ok(!everything.includes(secret), `the secret ${JSON.stringify(secret)} appears in the output:\n${everything.split('\n').filter((l) => l.includes(secret)).join('\n')}`)
    }
    console.log(`# secrets: ${Object.keys(results).length} scenarios, ${everything.length} bytes of errors and logs, no password: ${Object.values(results).map((r) => `${r.scenario}=${r.code ?? 'ok'}`).join(', ')}`)
  } finally {
    auth.kill('SIGKILL')
    open.kill('SIGKILL')
  }
})
