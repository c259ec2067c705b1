// The two seed flows, written with flowguard, run on the embedded store (no Redis needed), or on
// Redis with REDIS_URL=redis://... . Prints what happened.
//
// 1. A weekly loop over client projects: claim each, process (some fail on purpose), complete or
//    fail with the reason; the second run processes only what failed.
// 2. "Prevent concurrent runs": two overlapping runs of one workflow; the second finds the lock
//    held ("Already Executing"); a run that outlived its lease cannot release the newer run's lock.
import { createRequire } from 'node:module'
const require = createRequire(import.meta.url)
const { Flowguard } = require('../index.js')

const fg = await Flowguard.open({ url: process.env.REDIS_URL, prefix: `demo:${Date.now()}:` })
console.log(`backend: ${fg.backend}`)

// 1. The weekly loop.
const projects = Array.from({ length: 12 }, (_, i) => `client-project-${i + 1}`)
const flaky = new Set(['client-project-3', 'client-project-8'])
async function weeklyRun(run, failing) {
  const claims = await fg.claimMany('weekly-sync', projects, { timeoutMs: 5 * 60_000 })
  const mine = claims.filter((c) => c.claimed)
  const outcome = mine.map((c) =>
    failing.has(c.id)
      ? { id: c.id, status: 'failed', owner: c.owner, error: 'API answered 429 Too Many Requests' }
      : { id: c.id, status: 'completed', owner: c.owner, keepMs: 6 * 24 * 3600_000 },
  )
  await fg.setItems('weekly-sync', outcome)
  const skipped = claims.filter((c) => !c.claimed).length
  const failed = outcome.filter((o) => o.status === 'failed').map((o) => o.id)
  console.log(`run ${run}: processed ${mine.length}, skipped ${skipped} (already completed), failed: ${failed.join(', ') || 'none'}`)
}
await weeklyRun(1, flaky)
await weeklyRun(2, new Set()) // the API is back: only the failed ones run again
const list = await fg.listItems('weekly-sync')
console.log(`status: ${JSON.stringify(list.counts)}`)
const p3 = await fg.getItem('weekly-sync', 'client-project-3')
console.log(`client-project-3: ${p3.status} after ${p3.attempts} attempts; timeline ${p3.timeline.map((t) => t.status + (t.error ? ` (${t.error})` : '')).join(' -> ')}`)

// 2. Prevent concurrent runs.
async function workflowRun(name, ms) {
  const lock = await fg.acquireLock('sync-workflow', { timeoutMs: 600_000, label: name })
  if (!lock.acquired) {
    console.log(`${name}: Already Executing (held by ${lock.holder}, ${Math.round(lock.remainingMs / 1000)} s left, fence ${lock.fence})`)
    return
  }
  console.log(`${name}: acquired, fencing token ${lock.fence}`)
  await new Promise((r) => setTimeout(r, ms))
  const rel = await fg.releaseLock('sync-workflow', lock.owner)
  console.log(`${name}: released=${rel.released}`)
}
await Promise.all([workflowRun('run A', 200), new Promise((r) => setTimeout(r, 50)).then(() => workflowRun('run B', 10))])
await workflowRun('run C', 10)

// A run that outlives its lease cannot delete the lock a newer run holds.
const slow = await fg.acquireLock('report', { timeoutMs: 100, label: 'slow run' })
await new Promise((r) => setTimeout(r, 200))
const fresh = await fg.acquireLock('report', { label: 'new run' })
const stale = await fg.releaseLock('report', slow.owner)
console.log(`slow run's late unset: released=${stale.released} (${stale.reason}); lock still held by ${(await fg.getLock('report')).holder}`)
await fg.releaseLock('report', fresh.owner)
