// Bad store files: each a coded error (ERR_STORAGE) naming the path, and nothing else lost.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { createInterface } from 'node:readline'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Flowguard, durableFolder, freshPrefix, rejection } from './backends.mjs'

const isRoot = process.getuid?.() === 0
const here = dirname(fileURLToPath(import.meta.url))

function hasSqlite3() {
  try {
    execFileSync('sqlite3', ['-version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** A small tmpfs mounted for the test (root only), unmounted after `fn`. */
async function withTmpfs(sizeKb, fn) {
  const dir = mkdtempSync(join(tmpdir(), 'fg-tmpfs-'))
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeKb}k`, 'tmpfs', dir])
  try {
    return await fn(dir)
  } finally {
    execFileSync('umount', ['-l', dir])
    rmSync(dir, { recursive: true, force: true })
  }
}

function assertStorage(e, path, words) {
  assert.equal(e.code, 'ERR_STORAGE', e.message)
  assert.ok(e.message.includes(path), `names the path: ${e.message}`)
  assert.match(e.message, words)
}

test('a corrupt file: ERR_STORAGE naming it, and the file is left as it was', async () => {
  const path = join(durableFolder(), 'corrupt.db')
  const junk = Buffer.alloc(16384, 0x5a)
  writeFileSync(path, junk)
  assertStorage(await rejection(Flowguard.open({ path })), path, /corrupt/)
})

test('a path in a missing directory: ERR_STORAGE naming it', async () => {
  const path = join(durableFolder(), 'no-such-dir', 'state.db')
  assertStorage(await rejection(Flowguard.open({ path })), path, /directory/)
})

test('a path that is a directory, or under a file: ERR_STORAGE naming the path and the reason', async () => {
  const dir = join(durableFolder(), 'a-directory.db')
  mkdirSync(dir)
  assertStorage(await rejection(Flowguard.open({ path: dir })), dir, /is a directory/)
  const file = join(durableFolder(), 'plain-file')
  writeFileSync(file, 'not a directory')
  const under = join(file, 'state.db')
  assertStorage(await rejection(Flowguard.open({ path: under })), under, new RegExp(`its parent ${file} is not a directory`))
})

/** Opens `path` in a child process run as user nobody (65534); its error code and message. */
function openAsNobody(path) {
  const script = `require(${JSON.stringify(join(here, '..', 'index.js'))}).Flowguard.open({ path: ${JSON.stringify(path)} })
    .then(() => console.log(JSON.stringify({ opened: true })), (e) => console.log(JSON.stringify({ code: e.code, message: e.message })))`
  const r = spawnSync(process.execPath, ['-e', script], { uid: 65534, gid: 65534, encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  return JSON.parse(r.stdout)
}

test('a directory this process cannot write: ERR_STORAGE says permission denied', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fg-rodir-'))
  chmodSync(dir, 0o555)
  const path = join(dir, 'state.db')
  // Root writes through file modes: the open runs as user nobody instead.
  const e = isRoot ? openAsNobody(path) : await rejection(Flowguard.open({ path }))
  assertStorage(e, path, /permission denied: this process cannot create files in its directory/)
  assert.ok(!existsSync(path), 'nothing was created')
})

test('a directory on a read-only file system: ERR_STORAGE says so', { skip: !isRoot && 'needs root to mount a read-only tmpfs' }, async () => {
  await withTmpfs(64, async (dir) => {
    execFileSync('mount', ['-o', 'remount,ro', dir])
    const path = join(dir, 'state.db')
    assertStorage(await rejection(Flowguard.open({ path })), path, /is on a read-only file system/)
  })
})

test('another program\'s SQLite database is refused and left byte for byte as it was', { skip: !hasSqlite3() && 'needs the sqlite3 command' }, async () => {
  const path = join(durableFolder(), 'other.db')
  execFileSync('sqlite3', [path, 'CREATE TABLE t(x); INSERT INTO t VALUES (1);'])
  const before = readFileSync(path)
  assertStorage(await rejection(Flowguard.open({ path })), path, /another program/)
  assert.ok(readFileSync(path).equals(before), 'the file is unchanged')
  for (const side of ['-wal', '-shm', '-journal']) assert.ok(!existsSync(path + side), `no ${side} file`)
  assert.equal(execFileSync('sqlite3', [path, 'PRAGMA journal_mode']).toString().trim(), 'delete')
})

test('url and path together, an empty path, an unknown durability, a misspelt option: ERR_INVALID_ARGUMENT naming it', async () => {
  const path = join(durableFolder(), 'd.db')
  const cases = [
    [{ url: 'redis://127.0.0.1:1', path: 'x.db' }, /^path cannot be given with url/],
    [{ path: '' }, /^path must be a non-empty file path/],
    [{ path, durability: 'sometimes' }, /^options\.durability must be 'process' or 'fsync', got "sometimes"/],
    [{ path, durabilty: 'fsync' }, /unknown option "durabilty"/],
  ]
  for (const [opts, message] of cases) {
    const e = await rejection(Flowguard.open(opts))
    assert.equal(e.code, 'ERR_INVALID_ARGUMENT', e.message)
    assert.match(e.message, message)
  }
})

test('a read-only file: ERR_STORAGE naming it', async () => {
  if (!isRoot) {
    const path = join(durableFolder(), 'readonly.db')
    await Flowguard.open({ path, prefix: freshPrefix('ro') })
    chmodSync(path, 0o444)
    // A file made read-only after this process opened it keeps its connection: open a new path.
    const other = join(mkdtempSync(join(tmpdir(), 'fg-ro-')), 'ro.db')
    writeFileSync(other, '')
    chmodSync(other, 0o444)
    assertStorage(await rejection(Flowguard.open({ path: other })), other, /read-only/)
    return
  }
  // Root writes through file modes: use a file system mounted read-only instead.
  await withTmpfs(1024, async (dir) => {
    const path = join(dir, 'ro.db')
    writeFileSync(path, '')
    execFileSync('mount', ['-o', 'remount,ro', dir])
    const e = await rejection(Flowguard.open({ path }))
    assert.equal(e.code, 'ERR_STORAGE', e.message)
    assert.ok(e.message.includes(path), e.message)
  })
})

test('a full disk: ERR_STORAGE naming the file; what was written before is kept', { skip: !isRoot && 'needs root to mount a small tmpfs' }, async () => {
  await withTmpfs(512, async (dir) => {
    const path = join(dir, 'full.db')
    const filler = join(dir, 'filler')
    writeFileSync(filler, Buffer.alloc(128 * 1024))
    const fg = await Flowguard.open({ path, prefix: freshPrefix('full') })
    const big = 'x'.repeat(50_000)
    let written = 0
    let err
    for (let i = 0; i < 100; i++) {
      try {
        await fg.setState(`k${i}`, big)
        written++
      } catch (e) {
        err = e
        break
      }
    }
    assert.ok(err, 'the disk filled up')
    assert.ok(written >= 1, `some values were written first (${written})`)
    assertStorage(err, path, /full/)
    for (let i = 0; i < written; i++) assert.equal(await fg.getState(`k${i}`), big, `value ${i} kept`)
    // Once there is space again, writes go on where they stopped.
    rmSync(filler)
    await fg.setState('after', 1)
    assert.equal(await fg.getState('after'), 1)
  })
})

test('durability fsync opens and writes', async () => {
  const dir = join(durableFolder(), 'fsync')
  mkdirSync(dir, { recursive: true })
  const fg = await Flowguard.open({ path: join(dir, 'f.db'), durability: 'fsync', prefix: freshPrefix('fsync') })
  assert.equal((await fg.claim('g', 'a')).claimed, true)
  assert.equal((await fg.complete('g', 'a')).status, 'completed')
})

/** Claims 20,000 items on `fg` in batches: enough for the log to pass the background checkpoint's mark. */
async function fill(fg) {
  for (let b = 0; b < 20; b++) await fg.claimBatch('g', Array.from({ length: 1000 }, (_, i) => `i-${b}-${i}`))
}

const sides = (path) => ['-wal', '-shm'].filter((s) => existsSync(path + s))

test('close() of the last client of a file removes its -wal and -shm files; its calls then reject with ERR_CLOSED', async () => {
  const dir = join(durableFolder(), 'close')
  mkdirSync(dir, { recursive: true })
  const path = join(dir, 'c.db')
  const [a, b] = [await Flowguard.open({ path, prefix: 'a:' }), await Flowguard.open({ path, prefix: 'b:' })]
  await fill(a)
  await a.close()
  assert.equal((await rejection(a.getItem('g', 'i-0-0'))).code, 'ERR_CLOSED')
  assert.deepEqual(sides(path), ['-wal', '-shm'], 'b still has the file open')
  assert.equal((await b.claim('g', 'x')).claimed, true)
  await b.close()
  assert.deepEqual(sides(path), [], 'no log left after the last close')
  const again = await Flowguard.open({ path, prefix: 'a:' })
  assert.equal((await again.getItem('g', 'i-19-999')).status, 'in_progress')
  await again.close()
})

/** Runs `script` (CommonJS, with `Flowguard` and `path` defined) in a child process; its stdin and a line reader. */
function child(path, script) {
  const code = `const { Flowguard } = require(${JSON.stringify(join(here, '..', 'index.js'))}); const path = ${JSON.stringify(path)};
    const lines = require('node:readline').createInterface({ input: process.stdin })[Symbol.asyncIterator]();
    (async () => { ${script} })().catch((e) => { console.log('failed: ' + e.code + ' ' + e.message); process.exit(1) })`
  const p = spawn(process.execPath, ['-e', code], { stdio: ['pipe', 'pipe', 'inherit'] })
  const out = createInterface({ input: p.stdout })[Symbol.asyncIterator]()
  const exited = new Promise((resolve) => p.on('exit', resolve))
  return { say: (line) => p.stdin.write(line + '\n'), next: async () => (await out.next()).value, exited }
}

test('close() while another process has the file open leaves the log to it, and it reads and writes on', { timeout: 60_000 }, async () => {
  const dir = join(durableFolder(), 'close-shared')
  mkdirSync(dir, { recursive: true })
  const path = join(dir, 's.db')
  const other = child(path, `const fg = await Flowguard.open({ path, prefix: 'o:' })
    await fg.claim('g', 'first'); console.log('open'); await lines.next()
    console.log(JSON.stringify([(await fg.getItem('g', 'first')).status, (await fg.claim('g', 'second')).claimed, (await fg.claim('g', 'third')).claimed]))
    await fg.close(); process.exit(0)`)
  assert.equal(await other.next(), 'open')
  const fg = await Flowguard.open({ path, prefix: 'a:' })
  await fill(fg)
  await fg.close()
  assert.ok(sides(path).includes('-wal'), 'the log stays while the other process has the file open')
  other.say('go')
  assert.equal(await other.next(), JSON.stringify(['in_progress', true, true]))
  assert.equal(await other.exited, 0)
  assert.deepEqual(sides(path), [], 'the last process to close removed it')
  const again = await Flowguard.open({ path, prefix: 'a:' })
  assert.equal((await again.getItem('g', 'i-19-999')).status, 'in_progress')
  await again.close()
})

test('a process that ends without close() (its event loop done) removes the log too; process.exit() leaves it, and the next open reads it', { timeout: 60_000 }, async () => {
  const dir = join(durableFolder(), 'exit')
  mkdirSync(dir, { recursive: true })
  for (const [name, end] of [['natural', ''], ['exit', 'process.exit(0)']]) {
    const path = join(dir, `${name}.db`)
    const p = child(path, `const fg = await Flowguard.open({ path })
      for (let b = 0; b < 20; b++) await fg.claimBatch('g', Array.from({ length: 1000 }, (_, i) => 'i-' + b + '-' + i))
      process.stdin.destroy(); ${end}`)
    assert.equal(await p.exited, 0)
    assert.deepEqual(sides(path), name === 'natural' ? [] : ['-wal', '-shm'], name)
    const fg = await Flowguard.open({ path })
    assert.equal((await fg.getItem('g', 'i-19-999')).status, 'in_progress', name)
    await fg.close()
    assert.deepEqual(sides(path), [], `${name}: closed cleanly by the next process`)
  }
})
