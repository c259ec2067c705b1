// What the proofs (scripts/install-proof.mjs, npx-proof.mjs, image-proof.mjs) share: one "ok"/"FAIL" line per
// check, figures printed at the end, a log of every command run, and the closing "<name>: N passed, M failed" line
// that scripts/test.mjs counts.
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** A proof's report; `logFile`: where `sh` logs each command with its output (none when absent). */
export function proofReport(name, logFile) {
  let passed = 0
  let failed = 0
  const figures = []
  const log = (s) => {
    if (logFile) writeFileSync(logFile, s + '\n', { flag: 'a' })
  }
  return {
    figures,
    log,
    get failed() {
      return failed
    },
    /** Counts and prints one check; returns `ok`. */
    check(label, ok, detail = '') {
      if (ok) passed++
      else failed++
      console.log(`${ok ? 'ok' : 'FAIL'} - ${label}${!ok && detail ? `\n    ${String(detail).slice(0, 1500).replace(/\n/g, '\n    ')}` : ''}`)
      return Boolean(ok)
    },
    /** spawnSync with text output (stdout and stderr always strings; a spawn error in stderr), logged. */
    sh(cmd, args, opts = {}) {
      const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 28, ...opts })
      const out = { ...r, stdout: r.stdout ?? '', stderr: (r.stderr ?? '') || (r.error?.message ?? '') }
      log(`$ ${cmd} ${args.join(' ')} (cwd ${opts.cwd ?? process.cwd()}) -> ${r.status}\n${out.stdout}${out.stderr}`)
      return out
    },
    /** Prints the figures and the closing line; returns the exit status. */
    finish() {
      console.log('\n' + figures.join('\n'))
      console.log(`${name}: ${passed} passed, ${failed} failed`)
      return failed === 0 && passed > 0 ? 0 : 1
    },
  }
}
