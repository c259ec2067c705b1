// Runtimes that load Node-API addons without being Node (src/runtime.rs): Bun exports libuv
// functions that abort, so the event-loop connection must never run there, whatever the
// executable is called. A copy of Bun named `node`, and a program made by `bun build --compile`,
// run lock calls against Redis and exit normally. (The Node suites themselves run under Bun and
// Deno in scripts/test.mjs.)
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const index = fileURLToPath(new URL('../index.js', import.meta.url))
let bun = null
try {
  bun = join(require.resolve('bun/package.json'), '..', 'bin', 'bun.exe')
  if (!existsSync(bun)) bun = null
} catch {}
const skip = (!process.env.REDIS_URL && 'REDIS_URL not set') || (!bun && 'the bun package is not installed') || (process.platform === 'win32' && 'Unix only')

/** 200 lock pairs, with pauses (time for a loop connection to come up, were it to). */
const program = (url) => `
  const { Flowguard } = require(${JSON.stringify(index)})
  ;(async () => {
    const fg = await Flowguard.open({ url: ${JSON.stringify(url)}, prefix: 'runtimes:' + Math.random() + ':' })
    let n = 0
    for (let i = 0; i < 200; i++) {
      const name = 'l' + (i % 7)
      const l = await fg.acquireLock(name)
      if (l.acquired && (await fg.releaseLock(name, l.owner)).released) n++
      if (i % 20 === 0) await new Promise((r) => setTimeout(r, 30))
    }
    console.log('locks', n, typeof process.versions.bun)
  })()
`

function check(r) {
  assert.equal(r.signal, null, `killed by ${r.signal}: ${r.stderr}`)
  assert.equal(r.status, 0, r.stderr)
  assert.match(r.stdout, /locks 200 string/)
}

test('a copy of Bun named node takes the redis-rs path: lock calls work, no abort', { skip, timeout: 60_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'fg-bun-node-'))
  try {
    const node = join(dir, 'node')
    copyFileSync(bun, node)
    writeFileSync(join(dir, 'prog.cjs'), program(process.env.REDIS_URL))
    check(spawnSync(node, [join(dir, 'prog.cjs')], { cwd: dir, encoding: 'utf8', timeout: 30_000 }))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a program made by bun build --compile takes the redis-rs path: lock calls work, no abort', { skip, timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'fg-bun-compile-'))
  try {
    writeFileSync(join(dir, 'prog.cjs'), program(process.env.REDIS_URL))
    const built = spawnSync(bun, ['build', '--compile', 'prog.cjs', '--outfile', 'lockprog'], { cwd: dir, encoding: 'utf8', timeout: 90_000 })
    assert.equal(built.status, 0, built.stderr)
    check(spawnSync(join(dir, 'lockprog'), [], { cwd: dir, encoding: 'utf8', timeout: 30_000 }))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
