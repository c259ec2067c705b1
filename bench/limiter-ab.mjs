// The rate limiter's take before and after a change, in one process: `rateLimit` awaited one at a
// time on two built checkouts (A, B), rounds interleaved, medians; on Redis also the commands and
// Redis time per call (INFO commandstats), on the durable file and in memory the calls per second.
//
//   node bench/limiter-ab.mjs <dir A> <dir B>    (REDIS_URL, else a throwaway redis-server on a free port)
import { createRequire } from 'node:module'
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import net from 'node:net'

const require = createRequire(import.meta.url)
const [dirA, dirB] = process.argv.slice(2).map((d) => resolve(d))
if (!dirA || !dirB) throw new Error('usage: node bench/limiter-ab.mjs <dir A> <dir B>')
const N = Number(process.env.BENCH_CALLS || 3000)
const ROUNDS = Number(process.env.BENCH_ROUNDS || 7)

const tmp = mkdtempSync(join(tmpdir(), 'fg-limiter-ab-'))
let server
let url = process.env.REDIS_URL
if (!url) {
  const port = await new Promise((r) => { const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => r(p)) }) })
  server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmp], { stdio: 'ignore' })
  url = `redis://127.0.0.1:${port}`
  const ping = () => { try { return execFileSync('redis-cli', ['-u', url, 'ping'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() } catch { return '' } }
  for (let i = 0; i < 100 && ping() !== 'PONG'; i++) await new Promise((r) => setTimeout(r, 50))
}
const stats = () => Object.fromEntries(execFileSync('redis-cli', ['-u', url, 'INFO', 'commandstats'], { encoding: 'utf8' }).split('\n')
  .map((l) => l.match(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/)).filter(Boolean).map((m) => [m[1], { calls: +m[2], usec: +m[3] }]))
const perCall = (before, after) => Object.fromEntries(Object.entries(after)
  .map(([c, v]) => [c, { calls: (v.calls - (before[c]?.calls || 0)) / N, usec: (v.usec - (before[c]?.usec || 0)) / N }])
  .filter(([c, v]) => c !== 'info' && v.calls >= 0.5))

const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
for (const backend of ['redis', 'durable', 'embedded']) {
  const sides = {}
  for (const [k, dir] of [['A', dirA], ['B', dirB]]) {
    const opts = { prefix: `lab${k}:` }
    if (backend === 'redis') opts.url = url
    if (backend === 'durable') opts.path = join(tmp, `${k}.db`)
    sides[k] = await require(join(dir, 'index.js')).Flowguard.open(opts)
  }
  const rate = { A: [], B: [] }
  const cmds = {}
  for (let r = 0; r < ROUNDS; r++) {
    for (const k of r % 2 ? ['B', 'A'] : ['A', 'B']) {
      const before = backend === 'redis' && stats()
      const t0 = performance.now()
      for (let i = 0; i < N; i++) await sides[k].rateLimit(`n${i % 50}`, { limit: 1e6, periodMs: 1000 })
      rate[k].push((N / (performance.now() - t0)) * 1000)
      if (before && r === 0) cmds[k] = perCall(before, stats())
    }
  }
  const [a, b] = [med(rate.A), med(rate.B)]
  console.log(`${backend}: rateLimit awaited one at a time, calls/s (median of ${ROUNDS}): A ${a.toFixed(0)}, B ${b.toFixed(0)}, B / A ${(b / a).toFixed(2)}`)
  for (const k of ['A', 'B']) if (cmds[k]) console.log(`  ${k} per call: ${Object.entries(cmds[k]).map(([c, v]) => `${c} ${v.calls.toFixed(2)} (${v.usec.toFixed(1)} µs)`).join(', ')}`)
  for (const fg of Object.values(sides)) await fg.close()
}
server?.kill('SIGKILL')
rmSync(tmp, { recursive: true, force: true })
