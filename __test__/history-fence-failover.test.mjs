// The fence bug the checked histories found (docs/histories.md, What holds where: appendfsync
// everysec), made deterministic: a replica promoted while the old primary still grants (as when a
// failover's promotion and the old primary's last writes cross) holds the fence counter one
// acquisition back. Before the lock script took the Redis clock into every token it handed the
// old primary's last token out again. The link is cut first (REPLICAOF NO ONE), so the last grant
// surely never reaches the replica (a replica merely slowed, e.g. by DEBUG SLEEP, still receives it
// later and then shows that grant as the holder: no repeat to see).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Flowguard, freshPrefix, sleep } from './backends.mjs'
import { haveRedis, freePort, startRedis, stopRedis } from './redis-server.mjs'
import { cli, infoFields } from './redis-cluster.mjs'

test('a promoted replica one acquisition behind grants a fencing token above every one handed out', { skip: !haveRedis && 'redis-server not installed' }, async () => {
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
    // The replica has those; now it is promoted, and the old primary grants once more.
    for (let i = 0; infoFields(cli(r, 'INFO', 'replication')).slave_repl_offset !== infoFields(cli(p, 'INFO', 'replication')).master_repl_offset; i++) {
      assert.ok(i < 100, 'the replica caught up')
      await sleep(20)
    }
    assert.equal(cli(r, 'REPLICAOF', 'NO', 'ONE'), 'OK')
    const last = await fg.acquireLock('L', { timeoutMs: 60_000 })
    assert.ok(last.acquired)
    fences.push(last.fence)
    await stopRedis(primary)
    const promoted = await Flowguard.open({ url: `redis://127.0.0.1:${r}`, prefix })
    const next = await promoted.acquireLock('L', { timeoutMs: 60_000 })
    console.log(`# fences before the failover ${fences.join(', ')}; after it ${next.fence} (acquired: ${next.acquired})`)
    await promoted.close()
    fg.close().catch(() => {})
    assert.ok(next.acquired, 'the promoted replica never had the last grant: the lock is free there')
    assert.ok(next.fence > Math.max(...fences), `token ${next.fence} after the failover, not above ${Math.max(...fences)}`)
  } finally {
    await stopRedis(primary)
    await stopRedis(replica)
    rmSync(dir, { recursive: true, force: true })
  }
})
