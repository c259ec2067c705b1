// flowguard-server as a child process, for the suites of this folder.
//
// FLOWGUARD_SERVER_BIN: the server binary (default: the newest target/*/debug/flowguard-server).
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, statSync, readdirSync } from 'node:fs'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import net from 'node:net'

export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')

export function serverBin() {
  if (process.env.FLOWGUARD_SERVER_BIN) return process.env.FLOWGUARD_SERVER_BIN
  const target = join(root, 'target')
  const candidates = [join(target, 'debug', 'flowguard-server')]
  for (const d of existsSync(target) ? readdirSync(target) : []) candidates.push(join(target, d, 'debug', 'flowguard-server'))
  const found = candidates.filter(existsSync).sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)
  assert.ok(found.length, 'flowguard-server is not built: cargo build -p flowguard-server (or set FLOWGUARD_SERVER_BIN)')
  return found[0]
}

/**
 * The environment of a server: this process's, less the server's own FLOWGUARD_POSTGRES_*
 * variables (one left in the caller's shell would turn the server to PostgreSQL, or make it
 * refuse --path or --redis-url; the suites' database is FLOWGUARD_TEST_POSTGRES_URL), plus `env`
 * (which may set them).
 */
export function serverEnv(env = {}) {
  return {
    ...process.env,
    FLOWGUARD_POSTGRES_URL: undefined,
    FLOWGUARD_POSTGRES_SCHEMA: undefined,
    FLOWGUARD_POSTGRES_POOL_SIZE: undefined,
    ...env,
  }
}

export function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/**
 * Starts the server on a free loopback port with `args` and `env` added to this process's
 * environment (see serverEnv); resolves to `{ base, port, proc, output() }` once /healthz answers (`output()`: what
 * it printed so far, stdout and stderr). Rejects, with that output, when it exits first.
 * `fdLimit`: run it under `ulimit -n fdLimit` (the file descriptors it may hold open).
 */
export async function startServer(args = [], env = {}, { fdLimit } = {}) {
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const argv = [serverBin(), '--listen', `127.0.0.1:${port}`, ...args]
  const [cmd, ...cmdArgs] = fdLimit ? ['sh', '-c', 'ulimit -n "$0" && exec "$@"', String(fdLimit), ...argv] : argv
  const proc = spawn(cmd, cmdArgs, {
    env: serverEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  proc.stdout.on('data', (d) => { out += d })
  proc.stderr.on('data', (d) => { out += d })
  for (let i = 0; ; i++) {
    const up = await fetch(`${base}/healthz`).then((r) => r.ok, () => false)
    if (up) break
    if (proc.exitCode !== null || i >= 400) {
      proc.kill('SIGKILL')
      throw new Error(`the server did not start: ${out}`)
    }
    await new Promise((r) => setTimeout(r, 25))
  }
  return { base, port, proc, output: () => out }
}

/** Runs the server with `args` expecting it to refuse to start; resolves to `{ code, output }`. */
export function refusedStart(args, env = {}) {
  return new Promise((resolve) => {
    const proc = spawn(serverBin(), ['--listen', '127.0.0.1:0', ...args], { env: serverEnv(env), stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    proc.stdout.on('data', (d) => { out += d })
    proc.stderr.on('data', (d) => { out += d })
    const timer = setTimeout(() => proc.kill('SIGKILL'), 15000)
    proc.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, output: out })
    })
  })
}

/** Stops a server started by startServer (SIGTERM: it answers the calls in flight, then exits). */
export async function stopServer(s) {
  if (!s || s.proc.exitCode !== null || s.proc.signalCode !== null) return
  const exited = new Promise((r) => s.proc.once('exit', r))
  s.proc.kill('SIGTERM')
  await exited
}
