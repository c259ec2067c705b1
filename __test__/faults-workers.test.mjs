// Worker threads: every JavaScript environment settles its calls through its own threadsafe
// function (src/binding/settle.rs). Three workers and the main thread make Redis and embedded
// calls at once; a worker busy with 50 calls in flight is terminated; the main thread's calls
// keep settling, and the process exits by itself afterwards (nothing left referenced).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Worker } from 'node:worker_threads'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Flowguard, freshPrefix } from './backends.mjs'

const child = `
const { isMainThread, parentPort, workerData } = require('node:worker_threads')
const { Flowguard } = require(${JSON.stringify(fileURLToPath(new URL('../index.js', import.meta.url)))})
if (!isMainThread) {
  (async () => {
    const fg = await Flowguard.open({ url: workerData.url, prefix: workerData.prefix })
    if (workerData.busy) for (;;) await Promise.all(Array.from({ length: 50 }, (_, i) => fg.getLock('l' + i)))
    let n = 0
    for (let i = 0; i < 200; i++) if ((await fg.claim(workerData.group, 'i' + i)).claimed) n++
    parentPort.postMessage(n)
  })()
}
`

test('worker threads: calls settle in every environment; a busy worker can be terminated', { skip: !process.env.REDIS_URL && 'REDIS_URL not set', timeout: 60_000 }, async () => {
  const prefix = freshPrefix('workers')
  const url = process.env.REDIS_URL
  const mk = (data) => new Worker(child, { eval: true, workerData: { url, prefix, ...data } })
  const workers = [0, 1, 2].map((i) => mk({ group: `w${i}` }))
  const results = workers.map((w) => new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) }))
  const fg = await Flowguard.open({ url, prefix })
  let mine = 0
  for (let i = 0; i < 200; i++) if ((await fg.claim('main', `i${i}`)).claimed) mine++
  assert.equal(mine, 200)
  assert.deepEqual(await Promise.all(results), [200, 200, 200])
  const busy = mk({ busy: true })
  await new Promise((r) => setTimeout(r, 300))
  await busy.terminate()
  assert.equal((await fg.getLock('after')).locked, false)
  assert.ok((await fg.claim('main', 'after')).claimed)
})

test('a process that used Redis from a worker and the main thread exits by itself', { skip: !process.env.REDIS_URL && 'REDIS_URL not set', timeout: 60_000 }, () => {
  const prog = `
const { Worker } = require('node:worker_threads')
const { Flowguard } = require(${JSON.stringify(fileURLToPath(new URL('../index.js', import.meta.url)))})
const w = new Worker(\`
  const { Flowguard } = require(${JSON.stringify(fileURLToPath(new URL('../index.js', import.meta.url)))})
  Flowguard.open({ url: process.env.REDIS_URL, prefix: 'exit:' }).then((fg) => fg.claim('g', 'w' + Math.random()))
\`, { eval: true })
Flowguard.open({ url: process.env.REDIS_URL, prefix: 'exit:' }).then((fg) => fg.claim('g', 'm' + Math.random())).then((c) => console.log('claimed', c.claimed))
`
  const r = spawnSync(process.execPath, ['-e', prog], { env: process.env, encoding: 'utf8', timeout: 30_000 })
  assert.equal(r.status, 0, r.stderr)
  assert.match(r.stdout, /claimed true/)
})
