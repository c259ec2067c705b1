// The local npm registry of the install proofs (scripts/install-proof.mjs, scripts/npx-proof.mjs): the pinned
// Verdaccio of ./verdaccio (installed on first use from its lockfile), on a free loopback port, with one user
// whose token publishes, and no uplink (nothing is fetched from elsewhere).
import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, writeFileSync, existsSync } from 'node:fs'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import net from 'node:net'

const here = join(dirname(fileURLToPath(import.meta.url)), 'verdaccio')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

export function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** Installs the pinned Verdaccio once; returns null, or why it could not. `sh` runs (and logs) a command. */
export function installVerdaccio(sh = (cmd, args, opts) => spawnSync(cmd, args, { encoding: 'utf8', ...opts })) {
  if (existsSync(join(here, 'node_modules', '.fg-installed'))) return null
  const i = sh('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: here })
  if (i.status !== 0) return `Verdaccio install failed: ${i.stderr.slice(-1500)}`
  writeFileSync(join(here, 'node_modules', '.fg-installed'), '')
  return null
}

/** Starts Verdaccio with its storage, config and log under `dir`; resolves to { url, port, token, publishArgs(), stop() }. */
export async function startVerdaccio(dir) {
  mkdirSync(join(dir, 'storage'), { recursive: true })
  const port = await freePort()
  writeFileSync(join(dir, 'config.yaml'), [
    `storage: ${join(dir, 'storage')}`,
    'auth:',
    '  htpasswd:',
    `    file: ${join(dir, 'htpasswd')}`,
    '    max_users: 1',
    'uplinks: {}',
    'packages:',
    "  '**':",
    '    access: $all',
    '    publish: $authenticated',
    '    unpublish: $authenticated',
    'max_body_size: 200mb',
    'log: { type: file, path: ' + join(dir, 'verdaccio.log') + ', level: warn }',
    '',
  ].join('\n'))
  const bin = join(here, 'node_modules', 'verdaccio', 'bin', 'verdaccio')
  const proc = spawn(process.execPath, [bin, '--config', join(dir, 'config.yaml'), '--listen', `127.0.0.1:${port}`], { cwd: dir, stdio: 'ignore' })
  const url = `http://127.0.0.1:${port}/`
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${url}-/ping`)).ok) break
    } catch {}
    await sleep(100)
  }
  // One registry user; its token publishes.
  const res = await fetch(`${url}-/user/org.couchdb.user:proof`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'proof', password: 'proof-password-1' }),
  })
  const { token } = await res.json()
  return {
    url,
    port,
    token,
    /** The arguments of `npm publish` / `npm unpublish` against this registry. */
    publishArgs: () => [`--registry=${url}`, `--//127.0.0.1:${port}/:_authToken=${token}`],
    stop: () => proc.kill('SIGTERM'),
  }
}
