// The launcher of `npx flowguard-server` (crates/server/npm/flowguard-server), on the real binary: which binary it
// picks (the platform package by require.resolve, FLOWGUARD_SERVER_BINARY) and its coded errors, and that it passes
// arguments, the exit status and signals through, SIGTERM included when its parent dies without passing one on (as
// npx's `sh -c` does). scripts/npx-proof.mjs proves the packed packages installed from a registry.
//
// FLOWGUARD_SERVER_BIN: the server binary (default: the newest target/*/debug/flowguard-server).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { root, serverBin, serverEnv, freePort } from './server-process.mjs'

const launcherDir = join(root, 'crates', 'server', 'npm', 'flowguard-server')
const launcher = join(launcherDir, 'bin', 'flowguard-server.js')
const { binaryPath, PLATFORM_PACKAGES } = createRequire(import.meta.url)(join(launcherDir, 'lib', 'binary.js'))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** The error `fn` throws (it must throw). */
function thrown(fn) {
  try {
    fn()
  } catch (e) {
    return e
  }
  assert.fail('expected an error')
}

test('the platform package is resolved by name; FLOWGUARD_SERVER_BINARY overrides it', () => {
  const asked = []
  const resolve = (spec) => {
    asked.push(spec)
    return `/nm/${spec}`
  }
  assert.equal(binaryPath({ platform: 'linux', arch: 'arm64', env: {}, resolve }), '/nm/@flowguard/server-linux-arm64/bin/flowguard-server')
  assert.deepEqual(asked, ['@flowguard/server-linux-arm64/bin/flowguard-server'])
  assert.equal(binaryPath({ platform: 'linux', arch: 'x64', env: { FLOWGUARD_SERVER_BINARY: '/opt/fg' }, resolve }), '/opt/fg')
})

test('a platform without a package: ERR_UNSUPPORTED_PLATFORM naming it and the published ones', () => {
  const e = thrown(() => binaryPath({ platform: 'darwin', arch: 'arm64', env: {}, resolve: () => assert.fail('not resolved') }))
  assert.equal(e.code, 'ERR_UNSUPPORTED_PLATFORM')
  assert.equal(e.field, 'platform')
  assert.match(e.message, /darwin-arm64/)
  for (const key of Object.keys(PLATFORM_PACKAGES)) assert.ok(e.message.includes(key), key)
})

test('the platform package not installed: ERR_PLATFORM_PACKAGE_MISSING naming the package', () => {
  const e = thrown(() => binaryPath({ platform: 'linux', arch: 'x64', env: {}, resolve: () => { throw new Error('MODULE_NOT_FOUND') } }))
  assert.equal(e.code, 'ERR_PLATFORM_PACKAGE_MISSING')
  assert.equal(e.field, '@flowguard/server-linux-x64')
  assert.match(e.message, /@flowguard\/server-linux-x64.*not installed/)
})

test('the launcher prints the coded error and exits 1 when no binary is found', () => {
  const env = { ...process.env }
  delete env.FLOWGUARD_SERVER_BINARY
  // From the repository no platform package resolves (none is installed here).
  const r = spawnSync(process.execPath, [launcher, '--version'], { env, encoding: 'utf8' })
  assert.equal(r.status, 1)
  assert.match(r.stderr, /^flowguard-server: ERR_(PLATFORM_PACKAGE_MISSING|UNSUPPORTED_PLATFORM): /)
})

test('arguments and the exit status pass through', () => {
  const env = serverEnv({ FLOWGUARD_SERVER_BINARY: serverBin() })
  const v = spawnSync(process.execPath, [launcher, '--version'], { env, encoding: 'utf8' })
  assert.equal(v.status, 0)
  assert.match(v.stdout, /^flowguard-server \d+\.\d+\.\d+/)
  const bad = spawnSync(process.execPath, [launcher, '--no-such-flag'], { env, encoding: 'utf8' })
  assert.equal(bad.status, 2, bad.stderr)
  assert.match(bad.stderr, /--no-such-flag/)
})

/** Starts `argv` (the launcher, maybe under a shell) with the server on a free port; resolves once /healthz answers. */
async function startVia(argv) {
  const port = await freePort()
  const env = serverEnv({ FLOWGUARD_SERVER_BINARY: serverBin(), FLOWGUARD_LISTEN: `127.0.0.1:${port}` })
  // Its own process group: what is left of it can be found, and killed at the end.
  const proc = spawn(argv[0], argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let out = ''
  proc.stdout.on('data', (d) => { out += d })
  proc.stderr.on('data', (d) => { out += d })
  for (let i = 0; !(await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false)); i++) {
    if (i > 600 || proc.exitCode !== null) throw new Error(`did not start: ${out}`)
    await sleep(25)
  }
  return { proc, port, output: () => out }
}

/** Resolves once no process of the group `pgid` is left; rejects after `ms`. */
async function groupGone(pgid, ms = 15000) {
  for (const until = Date.now() + ms; Date.now() < until; await sleep(20)) {
    try {
      process.kill(-pgid, 0)
    } catch (e) {
      if (e.code === 'ESRCH') return
    }
  }
  process.kill(-pgid, 'SIGKILL')
  throw new Error(`processes of group ${pgid} still running after ${ms} ms`)
}

for (const signal of ['SIGTERM', 'SIGINT']) {
  test(`${signal} to the launcher reaches the server: it drains, both exit 0`, async () => {
    const s = await startVia([process.execPath, launcher])
    const exited = new Promise((r) => s.proc.once('exit', (code, sig) => r({ code, sig })))
    s.proc.kill(signal)
    assert.deepEqual(await exited, { code: 0, sig: null }, s.output())
    await groupGone(s.proc.pid)
    assert.match(s.output(), /shutting down/)
  })
}

test('SIGTERM to a shell the launcher runs under (as npx runs it) still stops the server', async () => {
  // `sh -c '<launcher>; :'` keeps the shell as the launcher's parent (no exec), as npm exec's shell does; the shell
  // dies of the SIGTERM without passing it on.
  const s = await startVia(['sh', '-c', `"${process.execPath}" "${launcher}"; :`])
  s.proc.kill('SIGTERM')
  await groupGone(s.proc.pid)
  assert.match(s.output(), /shutting down/)
})
