// The fence bug the checked histories found (docs/histories.md, What holds where: appendfsync
// everysec), made deterministic: a failover to a replica that missed the fence counter's last INCR
// hands that token out again, though the README (Concurrency Lock) promises tokens keep increasing
// for as long as the server's clock does not go back. The replica is held back with DEBUG SLEEP
// while the primary grants the lock, then the primary is SIGKILLed and the replica promoted
// (REPLICAOF NO ONE). A `todo` until the lock script is fixed (for example a new token =
// max(counter + 1, Redis TIME in µs)): it fails on today's code, reported as `# todo`.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Flowguard, freshPrefix, sleep } from './backends.mjs'
import { haveRedis, freePort, startRedis, stopRedis } from './redis-server.mjs'
import { cli, infoFields } from './redis-cluster.mjs'

test('a failover to a replica behind by one acquisition: the next fencing token is above every one handed out', { skip: !haveRedis && 'redis-server not installed', todo: 'fence counter one INCR back after a failover: the token is handed out again (docs/histories.md)' }, async () => {
  const [p, r] = [await freePort(), await freePort()]
  // (A folder of its own: the replica writes the RDB of its first sync there.)
  const dir = mkdtempSync(join(tmpdir(), 'fg-fence-failover-'))
  const primary = await startRedis(p, ['--repl-diskless-sync-delay', '0', '--dir', dir])
  const replica = await startRedis(r, ['--replicaof', '127.0.0.1', String(p), '--enable-debug-command', 'yes', '--dir', dir])
  try {
    for (let i = 0; infoFields(cli(r, 'INFO', 'replication')).master_link_status !== 'up'; i++) {
      assert.ok(i < 100, 'the replica synced')
      await sleep(50)
    }
    const prefix = freshPrefix('fence-failover')
    const fg = await Flowguard.open({ url: `redis://127.0.0.1:${p}`, prefix })
    const fences = []
    for (let i = 0; i < 2; i++) {
      const g = await fg.acquireLock('L', { timeoutMs: 60_000 })
      fences.push(g.fence)
      await fg.releaseLock('L', g.owner)
    }
    // The replica has those; now it sleeps, and the primary grants once more.
    for (let i = 0; infoFields(cli(r, 'INFO', 'replication')).slave_repl_offset !== infoFields(cli(p, 'INFO', 'replication')).master_repl_offset; i++) {
      assert.ok(i < 100, 'the replica caught up')
      await sleep(20)
    }
    const slept = spawn('redis-cli', ['-p', String(r), 'DEBUG', 'SLEEP', '1'], { stdio: 'ignore' })
    const woke = new Promise((resolve) => slept.on('exit', resolve))
    await sleep(200)
    const last = await fg.acquireLock('L', { timeoutMs: 60_000 })
    fences.push(last.fence)
    await stopRedis(primary) // SIGKILL before the replica had the last INCR
    await woke
    assert.equal(cli(r, 'REPLICAOF', 'NO', 'ONE'), 'OK')
    const promoted = await Flowguard.open({ url: `redis://127.0.0.1:${r}`, prefix })
    const next = await promoted.acquireLock('L', { timeoutMs: 60_000 })
    console.log(`# fences before the failover ${fences.join(', ')}; after it ${next.fence}`)
    await promoted.close()
    fg.close().catch(() => {})
    assert.ok(next.fence > Math.max(...fences), `token ${next.fence} after the failover, not above ${Math.max(...fences)}`)
  } finally {
    await stopRedis(primary)
    await stopRedis(replica)
    rmSync(dir, { recursive: true, force: true })
  }
})
