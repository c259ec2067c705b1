// A throwaway Sentinel-managed Redis on loopback: a primary, a replica and three sentinels
// (quorum 2, down-after 1 s, failover-timeout 3 s). For the Node suite (redis-sentinel.test.mjs)
// and the server's (crates/server/e2e/sentinel.test.mjs), which fail the primary over. Every process
// is redis-server, or the binary FLOWGUARD_REDIS_SERVER names (scripts/test.mjs's Valkey run).
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, serverBin, waitForPort, startRedis, stopRedis } from './redis-server.mjs'
import { cliWith, infoFields } from './redis-cluster.mjs'
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Waits until `ok()` holds (checked every 50 ms, for at most `ms`). */
export async function until(ok, ms, what) {
  const t0 = Date.now()
  while (!(await ok())) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

/** `INFO sentinel`'s `master0:name=…,status=…,slaves=1,sentinels=3` fields as an object. */
const sentinelFields = (text) => infoFields(text.replace(/,/g, '\n').replace(/=/g, ':'))

/**
 * Starts the set: resolves once the sentinels know the replica and each other (a failover needs
 * both). `password`: the data nodes' (requirepass, masterauth, and the sentinels' auth-pass);
 * `sentinelPassword`: the sentinels' own (requirepass, sentinel-pass). Returns
 * `{ name, nodes, data, sentinels, primaryPort(), role(port), dataCli, failover(), rejoin(port), restart(port), stop(), killNow() }`:
 * `nodes` are the sentinel URLs (without credentials), `data` and `sentinels` `[{ port, proc }]`.
 */
export async function startSentinelSet({ name = 'fgmain', password, sentinelPassword } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'fg-sentinel-'))
  const data = []
  const sentinels = []
  const dataCli = cliWith(password)
  const sentinelCli = cliWith(sentinelPassword)
  const stop = async () => {
    for (const p of [...data, ...sentinels]) await stopRedis(p.proc)
    rmSync(dir, { recursive: true, force: true })
  }
  // A primary sends a full copy to a replica at once (not after the default 5 s of waiting for more).
  const auth = ['--repl-diskless-sync-delay', '0', ...(password ? ['--requirepass', password, '--masterauth', password] : [])]
  try {
    const primary = await freePort()
    data.push({ port: primary, proc: await startRedis(primary, ['--dir', dir, '--dbfilename', `dump-${primary}.rdb`, ...auth]) })
    const replica = await freePort()
    data.push({ port: replica, proc: await startRedis(replica, ['--dir', dir, '--dbfilename', `dump-${replica}.rdb`, ...auth, '--replicaof', '127.0.0.1', String(primary)]) })
    await until(() => infoFields(dataCli(replica, 'INFO', 'replication')).master_link_status === 'up', 10000, 'the replica to sync')
    for (let i = 0; i < 3; i++) {
      const port = await freePort()
      const conf = join(dir, `sentinel-${port}.conf`)
      writeFileSync(conf, [
        `port ${port}`, 'bind 127.0.0.1', `dir ${dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${primary} 2`,
        `sentinel down-after-milliseconds ${name} 1000`,
        `sentinel failover-timeout ${name} 3000`,
        ...(password ? [`sentinel auth-pass ${name} ${password}`] : []),
        ...(sentinelPassword ? [`requirepass ${sentinelPassword}`, `sentinel sentinel-pass ${sentinelPassword}`] : []),
        '',
      ].join('\n'))
      const proc = spawn(serverBin, [conf, '--sentinel'], { stdio: 'ignore' })
      sentinels.push({ port, proc })
      if (!(await waitForPort(port))) throw new Error(`sentinel on port ${port} did not start`)
    }
    await until(() => sentinels.every((s) => {
      const m = sentinelFields(sentinelCli(s.port, 'INFO', 'sentinel'))
      return m.slaves === '1' && m.sentinels === '3'
    }), 20000, 'the sentinels to find the replica and each other')
  } catch (e) {
    await stop()
    throw e
  }

  /** The port the sentinels name as the primary (all of them agreeing), else null. */
  const primaryPort = () => {
    const live = sentinels.filter((s) => s.proc.exitCode === null && s.proc.signalCode === null)
    const seen = new Set(live.map((s) => sentinelCli(s.port, 'SENTINEL', 'get-master-addr-by-name', name).split('\n')[1]))
    return seen.size === 1 ? Number([...seen][0]) : null
  }
  const role = (port) => infoFields(dataCli(port, 'INFO', 'replication')).role
  return {
    name,
    nodes: sentinels.map((s) => `redis://127.0.0.1:${s.port}`),
    data,
    sentinels,
    dataCli,
    primaryPort,
    role,
    /** SENTINEL FAILOVER, then waits until the sentinels name the other data node and it is a primary; its port. */
    async failover() {
      const first = primaryPort()
      const second = data.find((d) => d.port !== first).port
      const ok = sentinelCli(sentinels[0].port, 'SENTINEL', 'FAILOVER', name)
      if (ok !== 'OK') throw new Error(`SENTINEL FAILOVER answered ${ok}`)
      await until(() => primaryPort() === second && role(second) === 'master', 15000, 'the sentinels to switch to the replica')
      return second
    },
    /**
     * The old primary at `port` rejoins as a replica of the current one (the sentinels would
     * convert it themselves some seconds later), so that the next failover has a replica to promote.
     */
    async rejoin(port) {
      dataCli(port, 'REPLICAOF', '127.0.0.1', String(primaryPort()))
      await until(() => infoFields(dataCli(port, 'INFO', 'replication')).master_link_status === 'up', 10000, 'the old primary to sync as a replica')
      await until(() => sentinels.every((s) => sentinelFields(sentinelCli(s.port, 'INFO', 'sentinel')).slaves === '1'), 15000, 'the sentinels to see the replica')
    },
    /**
     * Starts the data node at `port` again (after it was killed) as a replica of the current
     * primary, and waits until it is in sync.
     */
    async restart(port) {
      const node = data.find((d) => d.port === port)
      node.proc = await startRedis(port, ['--dir', dir, '--dbfilename', `dump-${port}.rdb`, ...auth, '--replicaof', '127.0.0.1', String(primaryPort())])
      await until(() => infoFields(dataCli(port, 'INFO', 'replication')).master_link_status === 'up', 10000, 'the restarted node to sync as a replica')
    },
    stop,
    /** Kills every process at once, for a `process.on('exit')` hook (which cannot wait). */
    killNow() {
      for (const p of [...data, ...sentinels]) if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL')
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
