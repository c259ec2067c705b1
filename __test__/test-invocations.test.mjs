// How the suites are started: `node --test` takes a directory on Node 20 only (Node 22 and 24
// answer "Cannot find module '<dir>'"), and Node 20 expands no glob, so every script, workflow
// and package script names files (scripts/node-suites.mjs lists a directory's suites).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const self = fileURLToPath(import.meta.url)
const skipDirs = new Set(['node_modules', 'target', '.git', 'dist'])
const scanned = /\.(json|sh|ya?ml|mjs|cjs|js)$/

function* files(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) {
      if (!skipDirs.has(e.name)) yield* files(p)
    } else if (e.isFile() && (scanned.test(e.name) || basename(dir) === '.ci') && p !== self) {
      yield p
    }
  }
}

/** The operands after `--test` on a line, up to the first call (its arguments are not the
 * command's): shell words or quoted strings, options, globs, variables and spreads left out. */
function operands(line) {
  const at = line.search(/(^|[\s'"[])--test(?=[\s'",\]]|$)/)
  if (at < 0) return []
  const rest = line.slice(at).replace(/^[\s'"[]?--test['"]?/, '').split('(')[0]
  const words = [...rest.matchAll(/'([^']*)'|"([^"]*)"|([^\s'",\]()]+)/g)].map((m) => m[1] ?? m[2] ?? m[3])
  return words.filter((w) => w && !w.startsWith('-') && !/[$*{}<>&|;]|^\.\.\./.test(w))
}

test('no script, workflow or package script passes a directory to node --test', () => {
  const found = []
  for (const f of files(root)) {
    const text = readFileSync(f, 'utf8')
    if (!text.includes('--test')) continue
    const base = f.includes(`${join(root, 'n8n-nodes')}/`) ? join(root, 'n8n-nodes') : root
    text.split('\n').forEach((line, i) => {
      for (const w of operands(line)) {
        for (const b of [base, root]) {
          const p = join(b, w)
          if (existsSync(p) && statSync(p).isDirectory()) found.push(`${relative(root, f)}:${i + 1}: ${w}`)
        }
      }
    })
  }
  assert.deepEqual([...new Set(found)], [])
})

test('scripts/node-suites.mjs runs every suite under a directory, nested ones too, and fails when one fails', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fg-node-suites-'))
  try {
    mkdirSync(join(dir, 'nested'))
    writeFileSync(join(dir, 'a.test.mjs'), "import { test } from 'node:test'\ntest('a', () => {})\n")
    writeFileSync(join(dir, 'helper.mjs'), "throw new Error('not a suite')\n")
    writeFileSync(join(dir, 'nested', 'b.test.mjs'), "import { test } from 'node:test'\ntest('b', () => { throw new Error('b fails') })\n")
    // Not as a child of this test run (node:test would skip the files).
    const env = { ...process.env }
    delete env.NODE_TEST_CONTEXT
    const suites = () => spawnSync(process.execPath, [join(root, 'scripts', 'node-suites.mjs'), '--test-reporter=tap', dir], { encoding: 'utf8', env, timeout: 60_000 })
    const r = suites()
    assert.equal(r.status, 1, r.stdout + r.stderr)
    assert.match(r.stdout, /^# pass 1$/m)
    assert.match(r.stdout, /^# fail 1$/m)
    rmSync(join(dir, 'nested'), { recursive: true })
    const ok = suites()
    assert.equal(ok.status, 0, ok.stdout + ok.stderr)
    assert.match(ok.stdout, /^# pass 1$/m)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
