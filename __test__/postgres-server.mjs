// Throwaway PostgreSQL clusters for the fault suites (faults-postgres-*.test.mjs): started by
// scripts/postgres.mjs (`startPostgres`, initdb in a temp dir, a free loopback port, as the
// `postgres` user when run as root), and here stopped, started again, queried with psql,
// replicated (`pg_basebackup -R`) and promoted, without blocking the event loop (the suites'
// clients keep calling meanwhile).
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { freePort, postgresBin, startPostgres } from '../scripts/postgres.mjs'
import { sleep } from './backends.mjs'

const run = promisify(execFile)

/** Why a fault suite cannot run here, or false: they run in the PostgreSQL leg of `npm test`
 * (FLOWGUARD_BACKENDS=postgres, scripts/test.mjs `postgresSuites`), on clusters of their own. */
export const pgSkip = !process.env.FLOWGUARD_BACKENDS?.split(',').includes('postgres')
  ? 'the PostgreSQL leg only (FLOWGUARD_BACKENDS=postgres)'
  : !postgresBin() && 'PostgreSQL is not installed (apt-get install postgresql)'

export { startPostgres }

/** Runs a PostgreSQL program of `cluster`'s bin dir as the cluster's user. */
function pg(cluster, program, args) {
  return run(join(cluster.bin, program), args, { ...cluster.as, encoding: 'utf8', timeout: 90_000 })
}

/** `pg_ctl stop` of the cluster: `fast` (sessions ended, a checkpoint written) or `immediate`
 * (every server process ended at once, as in a crash: recovery from the WAL at the next start). */
export const stopCluster = (cluster, mode) => pg(cluster, 'pg_ctl', ['-D', cluster.data, '-m', mode, '-w', 'stop'])

/** Starts the cluster again, on its port and with its options. */
export const startCluster = (cluster) =>
  pg(cluster, 'pg_ctl', ['-D', cluster.data, '-l', cluster.log, '-w', '-t', '60', '-o', cluster.options(cluster.port), 'start'])

/** The output of one SQL statement run by psql on `url`, trimmed (rows by line, columns by `|`). */
export async function psql(cluster, url, sql) {
  const { stdout } = await run(join(cluster.bin, 'psql'), [url, '-XAt', '-v', 'ON_ERROR_STOP=1', '-c', sql], { encoding: 'utf8', timeout: 30_000 })
  return stdout.trim()
}

/** A streaming replica of `primary` (pg_basebackup -R: a standby.signal and the primary's
 * conninfo; initdb's pg_hba.conf takes replication connections on loopback, wal_level=replica and
 * max_wal_senders are PostgreSQL's defaults), started on a free port; `stop()` stops it at once. */
export async function startReplica(primary) {
  const data = join(primary.dir, 'replica')
  await pg(primary, 'pg_basebackup', ['-D', data, '-R', '-X', 'stream', '-c', 'fast', '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'flowguard'])
  const port = await freePort()
  const replica = { ...primary, port, data, log: join(primary.dir, 'replica.log'), url: `postgres://flowguard@127.0.0.1:${port}/postgres` }
  await startCluster(replica)
  replica.stop = () => stopCluster(replica, 'immediate').catch(() => {})
  return replica
}

/** Waits until `primary` streams to its replica, as a synchronous standby with `sync`
 * (`synchronous_standby_names = '*'`, set after the base backup so that the replica does not
 * take it: promoted with it and no standby of its own, every commit of the replica would wait for
 * ever; `synchronous_commit` is `on`, PostgreSQL's default). */
export async function streaming(primary, { sync = false } = {}) {
  if (sync) {
    await psql(primary, primary.url, "ALTER SYSTEM SET synchronous_standby_names = '*'")
    await psql(primary, primary.url, 'SELECT pg_reload_conf()')
  }
  await until('the replica streams', 30_000, async () =>
    (await psql(primary, primary.url, "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'")) === (sync ? 'sync' : 'async'))
}

/** Polls `check` (async, truthy when done) every 50 ms for up to `ms`; throws naming `what`. */
export async function until(what, ms, check) {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`)
    await sleep(50)
  }
}

/** Promotes a replica to a primary (`pg_ctl promote`, waiting until it takes writes). */
export const promote = (replica) => pg(replica, 'pg_ctl', ['-D', replica.data, '-w', '-t', '60', 'promote'])

/** A WAL position (`pg_lsn` text, `X/Y` in hex) as a number that orders as the WAL does. */
export function lsn(text) {
  const [hi, lo] = text.split('/')
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`)
}
