#!/usr/bin/env node
// A throwaway PostgreSQL cluster for the PostgreSQL suites (Debian's `postgresql` package).
//
//   node scripts/postgres.mjs [--tls] -- <command> [args…]
//
// makes a cluster with `initdb` in a temp dir, starts it with `pg_ctl` on a free loopback port
// (127.0.0.1 only, its socket in the temp dir), runs the command with FLOWGUARD_TEST_POSTGRES_URL set
// to it, then stops the cluster and removes the dir, whatever the command did; the exit code is
// the command's. FLOWGUARD_POSTGRES_DATA and FLOWGUARD_POSTGRES_BIN are set too (the cluster's
// data dir and PostgreSQL's bin dir), for fault tests that stop and restart it with pg_ctl (as the
// `postgres` user when run as root: `runuser -u postgres`). For example:
//
//   node scripts/postgres.mjs -- cargo test -p flowguard-core --target x86_64-unknown-linux-gnu \
//     --test postgres -- --include-ignored
//
// PostgreSQL refuses to run as root: run as root, the cluster's processes run as the `postgres`
// user (made by the Debian package); run as anyone else, as that user. The cluster is for tests:
// trust authentication on loopback, superuser `flowguard`, and fsync off (nothing on it is kept).
// `startPostgres()` is exported for other scripts (it returns { url, port, dir, data, bin, stop },
// and for the fault suites that stop, start and replicate it (__test__/postgres-server.mjs) `as`,
// the uid and gid its programs run as, `log`, its log file, and `options(port)`, the server options
// it was started with on another port).
//
// With `startPostgres({ password })`: TCP connections (and `hostssl` ones with --tls) authenticate
// with that password (scram-sha-256; the socket stays trust), and the URL carries it: for tests of
// a wrong password (the n8n e2e's Postgres credential).
//
// With --tls (`startPostgres({ tls: true })`): `ssl=on` with a throwaway CA and a server
// certificate for localhost / 127.0.0.1 (__test__/tls-certs.mjs, openssl), and a pg_hba.conf that
// takes TCP connections over TLS only (`hostssl`); the CA's PEM file is FLOWGUARD_TEST_POSTGRES_CA
// (`ca` of the returned object). The role `flowguard_cert` signs in with a client certificate
// only (`cert` authentication; the server trusts the same CA, whose key is in `certs`).
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { makeCerts } from '../__test__/tls-certs.mjs'

/** The bin dir of the newest installed PostgreSQL (/usr/lib/postgresql/<major>/bin), or null. */
export function postgresBin() {
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return null
  const majors = readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => b - a)
  const bin = majors.map((m) => join(root, m, 'bin')).find((d) => existsSync(join(d, 'pg_ctl')))
  return bin ?? null
}

export function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** The uid and gid the cluster runs as: the `postgres` user when this process is root. */
function runAs() {
  if (process.getuid?.() !== 0) return {}
  const id = (flag) => spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' })
  const [uid, gid] = [id('-u'), id('-g')]
  if (uid.status !== 0 || gid.status !== 0) {
    throw new Error('running as root, and there is no `postgres` user to run PostgreSQL as (apt-get install postgresql)')
  }
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) }
}

/** Runs a PostgreSQL program as the cluster's user; throws with its output when it fails. */
function pg(bin, program, args, as) {
  const r = spawnSync(join(bin, program), args, { encoding: 'utf8', ...as })
  if (r.status !== 0) throw new Error(`${program} ${args.join(' ')} failed (${r.status ?? r.signal}):\n${r.stdout}${r.stderr}${r.error ?? ''}`)
  return r
}

/** The server's TLS files in `dir`/tls, readable by the cluster's user only; the options that use
 * them; and a pg_hba.conf (in `data`) that takes TCP connections over TLS only. */
function tlsSetup(dir, data, as, method) {
  const certs = join(dir, 'tls')
  mkdirSync(certs)
  const files = makeCerts(certs)
  for (const f of [certs, files.cert, files.key]) {
    if (as.uid !== undefined) chownSync(f, as.uid, as.gid)
  }
  chmodSync(files.key, 0o600)
  // The role flowguard_cert signs in with a client certificate only (`cert`: its common name is
  // the role, its chain the CA's), every other role over TLS without one.
  writeFileSync(
    join(data, 'pg_hba.conf'),
    `local all all trust\nhostssl all flowguard_cert 127.0.0.1/32 cert\nhostssl all all 127.0.0.1/32 ${method}\n`,
  )
  return { ca: files.ca, certs, opts: ` -c ssl=on -c ssl_cert_file=${files.cert} -c ssl_key_file=${files.key} -c ssl_ca_file=${files.ca}` }
}

/** Writes `password` to a file the cluster's user can read, for initdb's --pwfile. */
function pwfile(dir, password, as) {
  const file = join(dir, 'pwfile')
  writeFileSync(file, `${password}\n`, { mode: 0o600 })
  if (as.uid !== undefined) chownSync(file, as.uid, as.gid)
  return file
}

/**
 * Starts a throwaway cluster on a free loopback port (`tls`: over TLS only; `password`: TCP
 * connections authenticate with it; see above).
 */
export async function startPostgres({ tls = false, password } = {}) {
  const bin = postgresBin()
  if (!bin) throw new Error('PostgreSQL is not installed: apt-get install -y postgresql (or set FLOWGUARD_TEST_POSTGRES_URL)')
  const as = runAs()
  const dir = mkdtempSync(join(tmpdir(), 'flowguard-postgres-'))
  if (as.uid !== undefined) chownSync(dir, as.uid, as.gid)
  const data = join(dir, 'data')
  const stopAt = () => {
    spawnSync(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'], { stdio: 'ignore', ...as })
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    const auth = password === undefined ? ['-A', 'trust'] : ['--auth-local=trust', '--auth-host=scram-sha-256', `--pwfile=${pwfile(dir, password, as)}`]
    pg(bin, 'initdb', ['-D', data, '-U', 'flowguard', ...auth, '-E', 'UTF8', '--no-sync', '--no-instructions'], as)
    rmSync(join(dir, 'pwfile'), { force: true })
    const port = await freePort()
    const withTls = tls ? tlsSetup(dir, data, as, password === undefined ? 'trust' : 'scram-sha-256') : null
    const options = (p) => `-p ${p} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off -c max_connections=300${withTls?.opts ?? ''}`
    const log = join(dir, 'log')
    pg(bin, 'pg_ctl', ['-D', data, '-l', log, '-w', '-t', '60', '-o', options(port), 'start'], as)
    if (withTls) pg(bin, 'psql', ['-h', dir, '-p', String(port), '-U', 'flowguard', '-d', 'postgres', '-qc', 'CREATE ROLE flowguard_cert LOGIN SUPERUSER'], as)
    const user = password === undefined ? 'flowguard' : `flowguard:${encodeURIComponent(password)}`
    return { url: `postgres://${user}@127.0.0.1:${port}/postgres`, port, dir, data, bin, as, log, options, stop: stopAt, ...(withTls ? { ca: withTls.ca, certs: withTls.certs } : {}) }
  } catch (e) {
    stopAt()
    throw e
  }
}

if (resolve(process.argv[1] ?? '') === fileURLToPath(import.meta.url)) {
  const dash = process.argv.indexOf('--')
  const command = dash < 0 ? [] : process.argv.slice(dash + 1)
  if (command.length === 0) {
    console.error('usage: node scripts/postgres.mjs -- <command> [args…]')
    process.exit(2)
  }
  const cluster = await startPostgres({ tls: process.argv.slice(2, dash).includes('--tls') })
  console.log(`throwaway PostgreSQL on 127.0.0.1:${cluster.port}`)
  let stopped = false
  const stop = () => {
    if (!stopped) {
      stopped = true
      cluster.stop()
    }
  }
  const child = spawn(command[0], command.slice(1), {
    stdio: 'inherit',
    env: {
      ...process.env,
      FLOWGUARD_TEST_POSTGRES_URL: cluster.url,
      FLOWGUARD_POSTGRES_DATA: cluster.data,
      FLOWGUARD_POSTGRES_BIN: cluster.bin,
      ...(cluster.ca ? { FLOWGUARD_TEST_POSTGRES_CA: cluster.ca } : {}),
    },
  })
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
      child.kill(sig)
    })
  }
  child.on('exit', (code, signal) => {
    stop()
    process.exit(code ?? (signal ? 1 : 0))
  })
  child.on('error', (e) => {
    console.error(`${command[0]}: ${e.message}`)
    stop()
    process.exit(1)
  })
}
