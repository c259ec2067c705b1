// Rate Limiter and Semaphore across 4 processes, through Redis and through one durable store file.
//
// Limiter: 4 processes (2 polling rateLimit, 2 queueing with waitRateLimit) take tokens of one
// limiter of 2 per second (burst 1) for SECONDS seconds. Exact check, on the backend's clock: the
// tokens' slot times are at least 500 ms apart (so no window of 1 s holds more than 2); and the
// rate is reached: the 3 s from the first token hold 6 tokens, with a tolerance of one (5). Check on the processes' own clocks, with a stated tolerance of one
// token for the delay between a decision and its reply reaching the process: no window of 1 s
// holds more than 3 replies.
//
// Semaphore: 4 processes acquire/hold/release one of 3 permits (lease 1.5 s) for SECONDS seconds;
// two of them hang while holding their first permit and are killed with SIGKILL (and replaced,
// so 4 keep running). Checks: every acquire saw at most 3 holders (the store's count); in the
// holder log (CLOCK_MONOTONIC, one clock for every process), at no moment were more than 3
// permits held, a killed holder counted from its start to its kill; a killed holder's permit is
// still held after the kill (its lease runs on) and is free once its lease has ended.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { freshPrefix, sharedTargets, sleep } from './backends.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const PROCS = 4
const SECONDS = 4

function start(env) {
  const p = spawn(process.execPath, [join(here, 'fixtures/pace-contender.mjs')], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] })
  let err = ''
  p.stderr.on('data', (d) => (err += d))
  p.done = new Promise((resolve, reject) => {
    p.on('error', reject)
    p.on('exit', (code, sig) => (code === 0 || sig === 'SIGKILL' ? resolve() : reject(new Error(`worker exited ${code ?? sig}: ${err}`))))
  })
  return p
}

/** The largest number of intervals [a, b] open at one moment. */
function maxOverlap(intervals) {
  const ev = intervals.flatMap(([a, b]) => [[a, 1], [b, -1]])
  // At equal times, an end before a start: a release then an acquire is not an overlap.
  ev.sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] - y[1]))
  let n = 0
  let max = 0
  for (const [, d] of ev) max = Math.max(max, (n += d))
  return max
}

for (const target of sharedTargets('pacing')) {
  test(`rate limiter on ${target.name}: 2 per second across ${PROCS} processes, never more`, { skip: target.skip, timeout: 60_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fg-pacing-'))
    try {
      const prefix = freshPrefix('pacing')
      // Every process opens before the measured time starts.
      const t0 = Date.now() + 1500
      const env = { ...target.env, FG_PREFIX: prefix, MODE: 'limiter', LOG: join(dir, 'tokens.log'), END: String(t0 + SECONDS * 1000) }
      writeFileSync(env.LOG, '')
      const procs = Array.from({ length: PROCS }, (_, i) => start({ ...env, INDEX: String(i) }))
      await Promise.all(procs.map((p) => p.done))
      const rows = readFileSync(env.LOG, 'utf8').trim().split('\n').map((l) => l.split(' ').map(Number))
      const slots = rows.map((r) => r[0]).sort((a, b) => a - b)
      for (let i = 1; i < slots.length; i++) {
        assert.ok(slots[i] - slots[i - 1] >= 499.999, `tokens ${slots[i - 1]} and ${slots[i]} are ${slots[i] - slots[i - 1]} ms apart`)
      }
      // From the first token on (processes start at different times on a loaded machine).
      assert.ok(slots.at(-1) >= slots[0] + 3000, `tokens only from ${slots[0]} to ${slots.at(-1)}`)
      // Slot times carry sub-µs rounding (the spacing check above allows 0.001 ms per slot): 7 slots
      // 500 ms apart end at 3000 ms, the window's end, and may land a few µs inside it.
      const inWindow = slots.filter((s) => s < slots[0] + 3000 - 0.01).length
      assert.ok(inWindow === 6 || inWindow === 5, `${inWindow} tokens in 3 s`)
      const seen = rows.map((r) => r[1]).sort((a, b) => a - b)
      for (let i = 3; i < seen.length; i++) {
        assert.ok(seen[i] - seen[i - 3] >= 1000, `4 replies within ${seen[i] - seen[i - 3]} ms`)
      }
      console.log(`# limiter on ${target.name}: ${slots.length} tokens, ${inWindow} in the first 3 s, closest slots ${Math.min(...slots.slice(1).map((s, i) => s - slots[i])).toFixed(3)} ms apart`)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test(`semaphore on ${target.name}: 3 permits across ${PROCS} processes, holders killed with SIGKILL`, { skip: target.skip, timeout: 60_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fg-pacing-'))
    const procs = []
    try {
      const prefix = freshPrefix('sem')
      const env = { ...target.env, FG_PREFIX: prefix, MODE: 'semaphore', LOG: join(dir, 'holds.log'), END: String(Date.now() + SECONDS * 1000) }
      writeFileSync(env.LOG, '')
      const lines = () => readFileSync(env.LOG, 'utf8').trim().split('\n').filter(Boolean).map((l) => l.split(' '))
      for (let i = 0; i < PROCS - 2; i++) procs.push(start(env))
      const fg = await target.open(prefix)
      const kills = []
      for (let v = 0; v < 2; v++) {
        const victim = start({ ...env, HANG: '1' })
        procs.push(victim)
        let held
        while (!(held = lines().find((l) => l[0] === 'S' && Number(l[3]) === victim.pid))) await sleep(10)
        await sleep(200)
        victim.kill('SIGKILL')
        await victim.done
        kills.push({ fence: Number(held[1]), at: process.hrtime.bigint(), pid: victim.pid })
        // Its permit outlives it until its lease ends.
        assert.ok((await fg.getSemaphore('pool')).holders.some((h) => h.fence === Number(held[1])), 'the killed holder still holds its permit')
        procs.push(start(env))
      }
      await Promise.all(procs.map((p) => p.done))
      const log = lines()
      const starts = new Map()
      const intervals = []
      for (const [kind, fence, holders, , t] of log) {
        assert.ok(Number(holders) <= 3, `an acquire saw ${holders} holders`)
        if (kind === 'S') starts.set(fence, BigInt(t))
        else {
          intervals.push([starts.get(fence), BigInt(t)])
          starts.delete(fence)
        }
      }
      for (const k of kills) {
        intervals.push([starts.get(String(k.fence)), k.at])
        starts.delete(String(k.fence))
      }
      assert.equal(starts.size, 0, 'every hold ended or was killed')
      assert.ok(maxOverlap(intervals) <= 3, `at one moment ${maxOverlap(intervals)} holders`)
      const fences = log.filter((l) => l[0] === 'S').map((l) => Number(l[1]))
      assert.equal(new Set(fences).size, fences.length, 'fencing tokens are distinct')
      // The killed holders' leases (1.5 s) have ended: their permits are free again.
      await sleep(1600)
      const info = await fg.getSemaphore('pool')
      assert.deepEqual(info.holders, [])
      const three = await Promise.all([0, 1, 2].map(() => fg.acquirePermit('pool', { permits: 3 })))
      assert.ok(three.every((p) => p.acquired))
      console.log(`# semaphore on ${target.name}: ${intervals.length} holds, at most ${maxOverlap(intervals)} at once, 2 holders killed`)
    } finally {
      for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL')
      rmSync(dir, { recursive: true, force: true })
    }
  })
}
