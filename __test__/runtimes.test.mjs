// Runtimes that load Node-API addons without being Node (src/runtime.rs): Bun exports libuv
// functions that abort, and Deno's do not drive the loop the connection needs, so the event-loop
// connection must never run there, whatever the executable is called and whatever a script does
// to `process`. A copy of Bun named `node`, a program made by `bun build --compile`, and Bun and
// Deno with `process.versions.bun`/`deno` deleted run lock and tracker calls against Redis and
// exit normally; Node with a made-up `process.versions.bun` still uses its loop connection. (The
// Node suites themselves run under Bun and Deno in scripts/test.mjs.)
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { haveRedis, freePort, startRedis, stopRedis } from './redis-server.mjs'
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
let deno = null
try {
  deno = join(require.resolve('deno/package.json'), '..', process.platform === 'win32' ? 'deno.exe' : 'deno')
  if (!existsSync(deno)) deno = null
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

/** A program (ESM, for all three runtimes) that first runs `tamper`, then makes lock calls on the
 * redis-server at `port` until a second client runs scripts there (the loop connection: the first
 * calls go over redis-rs) or 150 pairs were made, then a tracker claim and completion; it prints
 * what it saw as JSON. */
const tamperedProgram = (tamper, port) => `
  import process from 'node:process'
  import { createRequire } from 'node:module'
  import { spawnSync } from 'node:child_process'
  ${tamper}
  const { Flowguard } = createRequire(import.meta.url)(${JSON.stringify(index)})
  const scriptClients = () => spawnSync('redis-cli', ['-p', '${port}', 'CLIENT', 'LIST'], { encoding: 'utf8' })
    .stdout.split('\\n').filter((l) => / cmd=eval/.test(l)).length
  const fg = await Flowguard.open({ url: 'redis://127.0.0.1:${port}', prefix: 'tampered:' })
  let locks = 0
  let loop = false
  for (let i = 0; i < 150 && !loop; i++) {
    const l = await fg.acquireLock('l')
    if (l.acquired && (await fg.releaseLock('l', l.owner)).released) locks++
    loop = scriptClients() >= 2
    await new Promise((r) => setTimeout(r, 20))
  }
  const c = await fg.claim('g', 'item-1')
  const done = await fg.complete('g', 'item-1', { owner: c.owner })
  await fg.close()
  console.log(JSON.stringify({ locks: locks > 0, loop, claimed: c.claimed, status: done.status }))
`

/** Runs `tamperedProgram` with `cmd args… prog.mjs` against a redis-server of its own. */
async function runTampered(cmd, args, tamper) {
  const port = await freePort()
  const server = await startRedis(port)
  const dir = mkdtempSync(join(tmpdir(), 'fg-tampered-'))
  try {
    writeFileSync(join(dir, 'prog.mjs'), tamperedProgram(tamper, port))
    const r = spawnSync(cmd, [...args, join(dir, 'prog.mjs')], { cwd: dir, encoding: 'utf8', timeout: 60_000, env: { ...process.env, NO_COLOR: '1' } })
    assert.equal(r.error?.code, undefined, `the program did not exit by itself: ${r.stdout}${r.stderr}`)
    assert.equal(r.signal, null, `killed by ${r.signal}: ${r.stderr}`)
    assert.equal(r.status, 0, r.stderr)
    return JSON.parse(r.stdout.trim().split('\n').pop())
  } finally {
    rmSync(dir, { recursive: true, force: true })
    await stopRedis(server)
  }
}

const tamperSkip = (!haveRedis && 'redis-server not installed') || (process.platform === 'win32' && 'Unix only')
const works = { locks: true, claimed: true, status: 'completed' }

test('Bun with process.versions.bun deleted: lock and tracker calls work over redis-rs, the process exits 0', { skip: tamperSkip || (!bun && 'the bun package is not installed'), timeout: 90_000 }, async () => {
  const seen = await runTampered(bun, [], 'delete process.versions.bun')
  assert.deepEqual(seen, { ...works, loop: false })
})

test('Deno with process.versions.deno deleted: lock and tracker calls work over redis-rs, the process exits 0', { skip: tamperSkip || (!deno && 'the deno package is not installed'), timeout: 90_000 }, async () => {
  const seen = await runTampered(deno, ['run', '-A', '--no-check'], 'delete process.versions.deno')
  assert.deepEqual(seen, { ...works, loop: false })
})

test('Node with a made-up process.versions.bun: lock and tracker calls work, over its loop connection still', { skip: tamperSkip || (!!(process.versions.bun || process.versions.deno) && 'a Node case'), timeout: 90_000 }, async () => {
  const seen = await runTampered(process.execPath, [], "Object.defineProperty(process.versions, 'bun', { value: '1.4.5', enumerable: true })")
  assert.deepEqual(seen, { ...works, loop: true })
})
