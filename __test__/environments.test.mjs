// Several JavaScript environments of the addon: each keeps its own pending calls, threadsafe
// function and event-loop connections (src/settle.rs, src/event_loop_connection/), never one per
// thread. Two instances of the addon on one thread (each `process.dlopen` of it is an environment
// of its own) and worker threads opened and closed many times, with lock calls in flight: every
// call settles and the process exits by itself. Each case runs in a child process, so a call
// that never settles or a loop kept alive shows as a timeout.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { addonFile } from './addon-file.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))
const addon = addonFile(root)
const index = join(root, 'index.js')
const skip = !process.env.REDIS_URL && 'REDIS_URL not set'

function runChild(prog) {
  const r = spawnSync(process.execPath, ['-e', prog], { env: process.env, encoding: 'utf8', timeout: 30_000 })
  assert.equal(r.error?.code, undefined, `the child did not exit by itself: ${r.stdout}${r.stderr}`)
  assert.equal(r.status, 0, r.stderr)
  return r.stdout
}

const lockRounds = `
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
  /** Sequential lock pairs (the first ones over redis-rs, then over the loop connection). */
  async function rounds(fg, tag, n) {
    let ok = 0
    for (let i = 0; i < n; i++) {
      const l = await fg.acquireLock(tag)
      if (l.acquired && (await fg.releaseLock(tag, l.owner)).released) ok++
      if (i % 25 === 0) await sleep(10)
    }
    return ok
  }
  /** n lock calls at once. */
  async function burst(fg, tag, n) {
    const all = await Promise.all(Array.from({ length: n }, (_, i) => fg.acquireLock(tag + i + ':' + Math.random())))
    return all.filter((l) => l.acquired).length
  }
`

test('two instances of the addon on one thread: the calls of both settle, interleaved; the process exits by itself', { skip, timeout: 60_000 }, () => {
  const out = runChild(`
    ${lockRounds}
    const load = () => { const m = { exports: {} }; process.dlopen(m, ${JSON.stringify(addon)}); return m.exports.Flowguard }
    const A = load()
    const B = load()
    if (A === B) throw new Error('one environment, not two')
    ;(async () => {
      const url = process.env.REDIS_URL
      const a = await A.open({ url, prefix: 'env-a:' })
      const b = await B.open({ url, prefix: 'env-b:' })
      const warmA = await rounds(a, 'wa', 100)
      // A's calls in flight over its connection while B makes its first calls (and its own
      // environment state), then both at once.
      const first = await Promise.all([burst(a, 'x', 100), burst(b, 'y', 100)])
      const warmB = await rounds(b, 'wb', 100)
      const both = []
      for (let i = 0; i < 6; i++) {
        both.push(await Promise.all([burst(a, 'x', 200), burst(b, 'y', 200), rounds(a, 'ra', 20), rounds(b, 'rb', 20)]))
      }
      console.log(JSON.stringify({ warmA, first, warmB, both }))
    })()
  `)
  assert.deepEqual(JSON.parse(out), { warmA: 100, first: [100, 100], warmB: 100, both: Array(6).fill([200, 200, 20, 20]) })
})

test('worker threads opened and closed many times, some terminated with lock calls in flight: the main thread keeps working, the process exits by itself', { skip, timeout: 60_000 }, () => {
  const out = runChild(`
    ${lockRounds}
    const { Worker } = require('node:worker_threads')
    const { Flowguard } = require(${JSON.stringify(index)})
    const body = ${JSON.stringify(`
      const { parentPort, workerData } = require('node:worker_threads')
      const { Flowguard } = require(${JSON.stringify(index)})
      ${lockRounds}
      ;(async () => {
        const fg = await Flowguard.open({ url: process.env.REDIS_URL, prefix: 'env-w:' })
        const warm = await rounds(fg, 'w' + workerData.i, 60)
        if (workerData.kill) {
          for (let i = 0; i < 100; i++) fg.acquireLock('k' + i + ':' + Math.random())
          parentPort.postMessage({ warm })
          await burst(fg, 'kb', 100)
        } else {
          parentPort.postMessage({ warm, burst: await burst(fg, 'b', 100) })
        }
      })()
    `)}
    ;(async () => {
      const fg = await Flowguard.open({ url: process.env.REDIS_URL, prefix: 'env-main:' })
      const seen = []
      for (let i = 0; i < 12; i++) {
        const kill = i % 2 === 1
        const w = new Worker(body, { eval: true, workerData: { i, kill } })
        // Listening for 'exit' from the start: a worker that ends by itself emits it right
        // after its last message, before this function resumes.
        const exited = new Promise((r) => w.once('exit', r))
        const first = await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
        if (kill) await w.terminate()
        await exited
        seen.push(first.warm + (first.burst ?? 0))
        seen.push(await rounds(fg, 'm', 20))
      }
      console.log(JSON.stringify(seen))
    })()
  `)
  const seen = JSON.parse(out)
  assert.equal(seen.length, 24)
  seen.forEach((n, i) => assert.equal(n, i % 2 === 1 ? 20 : i % 4 === 0 ? 160 : 60, `entry ${i}: ${out}`))
})

test('workers one after another, the main thread never using the addon: the Redis calls of each work', { skip, timeout: 60_000 }, () => {
  // The addon's tokio runtime goes when the last environment using it exits, and a new one
  // starts for the next: pooled connections of the old runtime must not be handed out again.
  const out = runChild(`
    const { Worker } = require('node:worker_threads')
    const body = ${JSON.stringify(`
      const { parentPort } = require('node:worker_threads')
      const { Flowguard } = require(${JSON.stringify(index)})
      ;(async () => {
        const fg = await Flowguard.open({ url: process.env.REDIS_URL, prefix: 'env-seq:' })
        try {
          const l = await fg.acquireLock('l' + Math.random())
          const c = await fg.claim('g', 'i' + Math.random())
          parentPort.postMessage(l.acquired && c.claimed ? 'ok' : 'refused')
        } catch (e) {
          parentPort.postMessage(e.code + ': ' + e.message)
        }
      })()
    `)}
    ;(async () => {
      const seen = []
      for (let i = 0; i < 4; i++) {
        const w = new Worker(body, { eval: true })
        const exited = new Promise((r) => w.once('exit', r))
        seen.push(await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) }))
        await exited
      }
      console.log(JSON.stringify(seen))
    })()
  `)
  assert.deepEqual(JSON.parse(out), ['ok', 'ok', 'ok', 'ok'])
})

test('the suites load the addon binding.js loads, not another flowguard.*.node beside it', { timeout: 60_000 }, () => {
  // A copy of the package with builds of other platforms beside the real one (none loadable
  // here, and some sorting before it).
  const dir = mkdtempSync(join(tmpdir(), 'fg-addon-file-'))
  try {
    copyFileSync(join(root, 'binding.js'), join(dir, 'binding.js'))
    const real = basename(addon)
    copyFileSync(addon, join(dir, real))
    const decoys = ['darwin-arm64', 'linux-arm64-gnu', 'linux-x64-gnu', 'linux-x64-musl', 'win32-x64-msvc'].map((p) => `flowguard.${p}.node`)
    for (const d of decoys.filter((d) => d !== real)) writeFileSync(join(dir, d), 'not a shared object')
    const chosen = addonFile(dir)
    assert.equal(chosen, join(dir, real))
    // And that file loads (twice: what the first case does).
    const out = runChild(`
      const load = () => { const m = { exports: {} }; process.dlopen(m, ${JSON.stringify(chosen)}); return m.exports.Flowguard }
      console.log(typeof load(), load() !== load())
    `)
    assert.equal(out.trim(), 'function true')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
