// A throwaway Redis Cluster on loopback: `masters` primaries with `replicas` replicas each, made
// by `redis-cli --cluster create`. For the cluster run of the core suites (scripts/test.mjs) and
// the failover suite, which kills and fails over its own nodes. The nodes are redis-server, or the
// binary FLOWGUARD_REDIS_SERVER names (scripts/test.mjs's Valkey Cluster run).
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, serverBin, waitForPort } from './redis-server.mjs'
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Runs redis-cli against 127.0.0.1:port; its trimmed output. */
export const cli = cliWith()

/**
 * `cli` authenticating with `password` (given in the environment, never on the command line), over
 * TLS trusting the CA file `tlsCa` when given.
 */
export function cliWith(password, tlsCa) {
  const env = password ? { ...process.env, REDISCLI_AUTH: password } : process.env
  const tls = tlsCa ? ['--tls', '--cacert', tlsCa] : []
  return (port, ...args) => (spawnSync('redis-cli', [...tls, '-p', String(port), ...args], { encoding: 'utf8', env }).stdout || '').trim()
}

/** Fields of `CLUSTER INFO` / `INFO` output as an object. */
export function infoFields(text) {
  return Object.fromEntries(text.split(/\r?\n/).filter((l) => l.includes(':')).map((l) => l.split(':').map((s) => s.trim())))
}

/**
 * Starts the cluster: resolves to { urls, nodes: [{ port, proc }], stop() } once every node
 * reports cluster_state:ok. `nodeTimeoutMs` is cluster-node-timeout (how soon a dead primary is
 * failed over). `tls` ({ ca, cert, key } files, see tls-certs.mjs): clients, the cluster bus and
 * replication over TLS only (the urls are rediss://). `server`: the server binary of the nodes.
 */
export async function startCluster({ masters = 3, replicas = 1, nodeTimeoutMs = 1000, tls, server = serverBin } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'fg-cluster-'))
  const cli = cliWith(undefined, tls?.ca)
  const listen = (port) => tls
    ? ['--port', '0', '--tls-port', String(port), '--tls-cluster', 'yes', '--tls-replication', 'yes',
        '--tls-cert-file', tls.cert, '--tls-key-file', tls.key, '--tls-ca-cert-file', tls.ca, '--tls-auth-clients', 'no']
    : ['--port', String(port)]
  const nodes = []
  const stop = () => {
    for (const n of nodes) if (n.proc.exitCode === null && n.proc.signalCode === null) n.proc.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    for (let i = 0; i < masters * (1 + replicas); i++) {
      const port = await freePort()
      const proc = spawn(server, [
        ...listen(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir,
        '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`,
        '--cluster-node-timeout', String(nodeTimeoutMs),
      ], { stdio: 'ignore' })
      nodes.push({ port, proc })
      if (!(await waitForPort(port))) throw new Error(`cluster node on port ${port} did not start`)
    }
    const create = spawnSync('redis-cli', [...(tls ? ['--tls', '--cacert', tls.ca] : []), '--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', String(replicas), '--cluster-yes'], { encoding: 'utf8' })
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`)
    for (let i = 0; ; i++) {
      if (nodes.every((n) => infoFields(cli(n.port, 'CLUSTER', 'INFO')).cluster_state === 'ok')) break
      if (i > 400) throw new Error('the cluster did not reach cluster_state:ok')
      await sleep(25)
    }
    // Replicas must have synced before a failover can be asked of them.
    for (let i = 0; ; i++) {
      const roles = nodes.map((n) => infoFields(cli(n.port, 'INFO', 'replication')))
      if (roles.filter((r) => r.role === 'slave').every((r) => r.master_link_status === 'up') && roles.filter((r) => r.role === 'slave').length === masters * replicas) break
      if (i > 400) throw new Error('the replicas did not sync')
      await sleep(25)
    }
  } catch (e) {
    stop()
    throw e
  }
  return { urls: nodes.map((n) => `${tls ? 'rediss' : 'redis'}://127.0.0.1:${n.port}`), nodes, stop }
}

/**
 * The port of the primary owning the slot of `key`, as the first of `ports` that answers
 * CLUSTER NODES sees it.
 */
export function primaryOf(ports, key, run = cli) {
  for (const port of ports) {
    const nodes = run(port, 'CLUSTER', 'NODES')
    if (!nodes) continue
    const slot = Number(run(port, 'CLUSTER', 'KEYSLOT', key))
    for (const line of nodes.split('\n')) {
      const parts = line.split(' ')
      if (!parts[2]?.includes('master') || parts[2].includes('fail')) continue
      for (const range of parts.slice(8)) {
        const [lo, hi = lo] = range.split('-').map(Number)
        if (slot >= lo && slot <= hi) return Number(parts[1].split(':')[1].split('@')[0])
      }
    }
    throw new Error(`no primary for slot ${slot}`)
  }
  throw new Error('no cluster node answered CLUSTER NODES')
}
