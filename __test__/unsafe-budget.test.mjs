// The `unsafe` budget (docs/architecture.md, "Unsafe budget"): `unsafe` tokens in the Rust code
// of the workspace, counted the documented way (string literals, then `/* */` and `//` comments
// stripped, then `\bunsafe\b` counted in each `.rs` file under src/ and crates/), stay under 40;
// only the modules the document lists opt out of the workspace's `unsafe_code = "deny"`, whose
// clippy lints make every unsafe block carry a `// SAFETY:` comment.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const BUDGET = 40
/** The modules allowed to opt in to unsafe code, with the tokens each has at most. */
const allowed = {
  'src/event_loop_connection/libuv.rs': 7,
  'src/exported.rs': 1,
  'src/from_js.rs': 2,
  'src/json.rs': 1,
  'src/node_api.rs': 10,
  'src/settle.rs': 7,
  'src/tracker.rs': 1,
  'crates/core/src/backend/durable/checkpoint.rs': 4,
  'crates/core/src/backend/durable/clock.rs': 1,
  'crates/core/src/backend/durable/file_access.rs': 1,
  'crates/core/src/backend/durable/remembered.rs': 1,
  'crates/core/src/backend/durable/schema.rs': 1,
}

function* rustFiles(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) {
      if (e.name !== 'target') yield* rustFiles(p)
    } else if (e.name.endsWith('.rs')) {
      yield p
    }
  }
}

/** The code of a Rust file without string literals and comments (the documented method). */
const code = (text) =>
  text
    .replace(/"(?:\\.|[^"\\])*"/gs, '""')
    .replace(/\/\*.*?\*\//gs, '')
    .replace(/\/\/[^\n]*/g, '')

const sources = ['src', 'crates'].flatMap((d) => [...rustFiles(join(root, d))]).map((p) => ({
  path: relative(root, p).split('\\').join('/'),
  text: readFileSync(p, 'utf8'),
}))

test(`unsafe tokens in the workspace stay under ${BUDGET}, each file within its share`, () => {
  const counts = {}
  for (const { path, text } of sources) {
    const n = (code(text).match(/\bunsafe\b/g) ?? []).length
    if (n > 0) counts[path] = n
  }
  const total = Object.values(counts).reduce((a, b) => a + b, 0)
  assert.ok(total < BUDGET, `${total} unsafe tokens: ${JSON.stringify(counts)}`)
  for (const [path, n] of Object.entries(counts)) {
    assert.ok(path in allowed, `${path} has ${n} unsafe tokens and is not one of the modules that must`)
    assert.ok(n <= allowed[path], `${path} has ${n} unsafe tokens, more than its ${allowed[path]}`)
  }
})

test('only the modules that must opt in to unsafe code', () => {
  const optIn = sources.filter(({ text }) => /allow\(unsafe_code\)/.test(code(text))).map(({ path }) => path)
  for (const path of optIn) assert.ok(path in allowed, `${path} allows unsafe code`)
  const lints = readFileSync(join(root, 'Cargo.toml'), 'utf8')
  assert.match(lints, /\[workspace\.lints\.rust\][^[]*unsafe_code = "deny"/)
  assert.match(lints, /\[workspace\.lints\.clippy\][^[]*undocumented_unsafe_blocks = "deny"/)
})

