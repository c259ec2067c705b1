// The durable store's clock against a process whose clock is wrong (run under `faketime`, which
// moves the wall clock of one process): refused with ERR_CLOCK_SKEW while a process whose clock
// agrees with the file is live, so it moves nothing for the others (docs/architecture.md).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Flowguard, durableFolder, freshPrefix, sleep } from './backends.mjs'
import { faketimeEnv, noFaketime } from './faketime.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const HOUR = 3_600_000

const skip = noFaketime

/** Runs the clock child with libfaketime moving its clock by `offset`; resolves to its report. */
function skewedChild(offset, env) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [join(here, 'fixtures/durable-clock-child.mjs')], {
      env: { ...process.env, ...env, ...faketimeEnv(offset) },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    p.stdout.on('data', (d) => (out += d))
    p.stderr.on('data', (d) => (err += d))
    p.on('error', reject)
    p.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`child exited ${code}: ${err}`))))
  })
}

/** The child ran with its clock `offset` ms off this one's: faketime did move it. */
function assertOffset(report, offset) {
  const off = report.now - Date.now()
  assert.ok(Math.abs(off - offset) < 60_000, `the child's clock is ${off} ms off, not ${offset}`)
}

function assertAllSkew(report, words) {
  for (const r of report.results) {
    assert.equal(r.code, 'ERR_CLOCK_SKEW', JSON.stringify(r))
    assert.match(r.message, words)
    assert.match(r.message, /the bound is 1 s/)
  }
}

test('a process an hour ahead is refused; after it exits, the others\' 1 s lock ends on time and the limiter keeps its rate', { skip }, async () => {
  const env = { FG_PATH: join(durableFolder(), 'fast.db'), FG_PREFIX: freshPrefix('fast'), CALLS: '20' }
  const fg = await Flowguard.open({ path: env.FG_PATH, prefix: env.FG_PREFIX })
  // This process writes the file (it is live) just before the other one starts.
  assert.equal((await fg.acquireLock('warm', { timeoutMs: 60_000 })).acquired, true)
  const report = await skewedChild('+1h', env)
  assertOffset(report, HOUR)
  assertAllSkew(report, /this process's clock is 36\d\d\.\d s ahead of the time of the store file/)
  assert.equal((await fg.getLock('child-lock')).locked, false, 'the refused process took nothing')

  const lock = await fg.acquireLock('short', { timeoutMs: 1000 })
  assert.equal(lock.acquired, true)
  await sleep(1600)
  const again = await fg.acquireLock('short', { timeoutMs: 1000 })
  assert.equal(again.acquired, true, `the 1 s lock ended: ${JSON.stringify(again)}`)

  // 5 tokens a second, one at a time: a call every 250 ms is always allowed.
  const allowed = []
  for (let i = 0; i < 6; i++) {
    allowed.push((await fg.rateLimit('paced', { limit: 5, periodMs: 1000 })).allowed)
    await sleep(250)
  }
  assert.deepEqual(allowed, [true, true, true, true, true, true])
  await fg.close?.()
})

test('a process an hour ahead of its host is refused on a file no other process writes, and leaves it as it was', { skip }, async () => {
  const env = { FG_PATH: join(durableFolder(), 'alone.db'), FG_PREFIX: freshPrefix('alone'), CALLS: '3' }
  const report = await skewedChild('+1h', env)
  assertOffset(report, HOUR)
  assertAllSkew(report, /this process's clock is 36\d\d\.\d s ahead of its host's clock .*restart it/)
  const fg = await Flowguard.open({ path: env.FG_PATH, prefix: env.FG_PREFIX })
  const lock = await fg.acquireLock('short', { timeoutMs: 1000 })
  assert.equal(lock.acquired, true)
  await sleep(1600)
  assert.equal((await fg.acquireLock('short', { timeoutMs: 1000 })).acquired, true, 'the 1 s lock ended')
})

test('a process an hour behind is refused with ERR_CLOCK_SKEW, not left without tokens silently', { skip }, async () => {
  const env = { FG_PATH: join(durableFolder(), 'slow.db'), FG_PREFIX: freshPrefix('slow'), CALLS: '20' }
  const fg = await Flowguard.open({ path: env.FG_PATH, prefix: env.FG_PREFIX })
  assert.equal((await fg.rateLimit('shared', { limit: 20, periodMs: 1000, burst: 20, cost: 1 })).allowed, true)
  const report = await skewedChild('-1h', env)
  assertOffset(report, -HOUR)
  assertAllSkew(report, /this process's clock is 36\d\d\.\d s behind the time of the store file/)
  const left = await fg.rateLimit('shared', { limit: 20, periodMs: 1000, burst: 20, cost: 1 })
  assert.equal(left.allowed, true, 'the refused process took no token')
  assert.ok(left.remaining >= 18, JSON.stringify(left))
})
