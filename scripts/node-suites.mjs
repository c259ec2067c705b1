#!/usr/bin/env node
// `node --test` on the suites of directories, named one by one. Node 20 takes a directory and
// expands no glob; Node 22 and later take files and globs but no directory ("Cannot find module
// '<dir>'"): a list of files is what every Node from 18 on runs the same way.
//
//   node scripts/node-suites.mjs [--node-test-option[=value]…] [dir-or-file…]   (default: __test__)
//
// Runs `node --test <options> <the *.test.{js,mjs,cjs} files under each dir, sorted>` and exits
// with its status. scripts/test.mjs imports `testFiles` for its own runs.
import { spawnSync } from 'node:child_process'
import { readdirSync, statSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const SUITE = /\.test\.[cm]?js$/

/** The suites under `dir` (recursively; node_modules left out), as paths relative to `base`,
 * sorted; `dir` itself when it is a file. Throws when there is none. */
export function testFiles(dir, base = process.cwd()) {
  const top = resolve(base, dir)
  if (statSync(top).isFile()) return [relative(base, top)]
  const found = []
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory() && e.name !== 'node_modules') walk(join(d, e.name))
      else if (e.isFile() && SUITE.test(e.name)) found.push(relative(base, join(d, e.name)))
    }
  }
  walk(top)
  if (found.length === 0) throw new Error(`no *.test.{js,mjs,cjs} file under ${dir}`)
  return found.sort()
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2)
  const options = args.filter((a) => a.startsWith('--'))
  const dirs = args.filter((a) => !a.startsWith('--'))
  const files = (dirs.length ? dirs : ['__test__']).flatMap((d) => testFiles(d))
  const r = spawnSync(process.execPath, ['--test', ...options, ...files], { stdio: 'inherit' })
  if (r.error) throw r.error
  process.exit(r.status ?? 1)
}
