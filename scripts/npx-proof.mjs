#!/usr/bin/env node
// The npx proof: `npx flowguard-server` as a user gets it, with nothing reaching into the repository. Stages the
// launcher package and the linux-x64 platform package from a binary (scripts/stage-server-npm.mjs), packs them
// (`npm pack`), publishes the tarballs to a local registry (Verdaccio, scripts/install-proof/verdaccio.mjs), installs
// `flowguard-server` by name into a fresh temp directory (own HOME and npm cache, PATH only), then:
// `npx flowguard-server --version`, a usage error's exit status passed through, a real start on the durable store
// answering /healthz and a call (the time from spawning npx to the first healthy answer is printed), SIGTERM to
// npx ending it with status 0 and the server with it, SIGINT to the launcher likewise; and, installed with
// --omit=optional, the launcher's coded error naming the missing platform package.
//
// The binary: FLOWGUARD_STATIC_SERVER_BIN when set (the static musl build the package ships), else the debug
// build target/x86_64-unknown-linux-gnu/debug/flowguard-server (what `cargo test` built); the output says which.
// Prints one line per check and closes with "npx-proof: N passed, M failed".
import { spawn } from 'node:child_process'
import { mkdtempSync, mkdirSync, writeFileSync, existsSync, realpathSync, statSync, rmSync, cpSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { stageServerPackages, workspaceVersion } from './stage-server-npm.mjs'
import { startVerdaccio, installVerdaccio, freePort } from './install-proof/verdaccio.mjs'
import { proofReport, sleep } from './proof-report.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'flowguard-npx-proof-')))
const logFile = join(tmp, 'proof.log')
const report = proofReport('npx-proof', logFile)
const { check, sh, figures } = report

/** A user's fresh project directory and environment: PATH only (node and npm), its own HOME and npm cache. */
function userDir(name, registry) {
  const dir = join(tmp, name)
  mkdirSync(join(dir, 'home'), { recursive: true })
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `npx-proof-${name}`, version: '1.0.0', private: true }))
  const env = {
    PATH: `${dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
    HOME: join(dir, 'home'),
    npm_config_registry: registry.url,
    npm_config_cache: join(dir, 'home', '.npm'),
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
  }
  return { dir, env }
}

/** Waits for `proc` to exit within `ms`; resolves to { code, signal } or null. */
function exited(proc, ms) {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve({ code: proc.exitCode, signal: proc.signalCode })
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(null), ms)
    proc.once('exit', (code, signal) => {
      clearTimeout(t)
      resolve({ code, signal })
    })
  })
}

/** Starts `cmd args` in `cwd` and waits for /healthz on `port`: { proc, ms (spawn to first 200, or -1), output() }. */
async function startServer(cmd, args, { cwd, env, port }) {
  const t0 = Date.now()
  // Its own process group: the cleanup can end npx, the launcher and the server at once.
  const proc = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let out = ''
  proc.stdout.on('data', (d) => { out += d })
  proc.stderr.on('data', (d) => { out += d })
  let ms = -1
  while (Date.now() - t0 < 60_000 && proc.exitCode === null && proc.signalCode === null) {
    if (await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false)) {
      ms = Date.now() - t0
      break
    }
    await sleep(20)
  }
  return { proc, ms, output: () => out }
}
/** Ms until no process of the group `pgid` is left (signal 0 fails with ESRCH), or -1 after `ms`. */
async function groupGone(pgid, ms) {
  const t0 = Date.now()
  while (Date.now() - t0 < ms) {
    try {
      process.kill(-pgid, 0)
    } catch (e) {
      if (e.code === 'ESRCH') return Date.now() - t0
    }
    await sleep(20)
  }
  return -1
}
const portClosed = (port) => fetch(`http://127.0.0.1:${port}/healthz`).then(() => false, () => true)

async function main() {
  const t0 = Date.now()
  const version = workspaceVersion()
  const staticBin = process.env.FLOWGUARD_STATIC_SERVER_BIN
  const bin = staticBin || join(root, 'target', 'x86_64-unknown-linux-gnu', 'debug', 'flowguard-server')
  const which = staticBin ? `the static binary of FLOWGUARD_STATIC_SERVER_BIN (${staticBin})` : `the glibc debug build ${bin} (FLOWGUARD_STATIC_SERVER_BIN not set)`
  console.log(`npx-proof: packages built from ${which}; work folder ${tmp}`)
  figures.push(`binary: ${which}, ${existsSync(bin) ? (statSync(bin).size / 1e6).toFixed(1) : '?'} MB`)
  if (!check('the server binary exists', existsSync(bin), `no ${bin}: cargo build -p flowguard-server --target x86_64-unknown-linux-gnu`)) return
  const err = installVerdaccio(sh)
  if (!check('the pinned Verdaccio is installed', !err, err)) return

  // Stage and pack. Debug info off (a debug build's is most of its size) only shortens packing and publishing; the
  // code is the built binary's.
  const shipped = join(tmp, 'flowguard-server')
  if (sh('objcopy', ['--strip-debug', bin, shipped]).status !== 0) cpSync(bin, shipped)
  let staged
  const tp = Date.now()
  try {
    staged = stageServerPackages(join(tmp, 'stage'), { 'linux-x64': shipped })
  } catch (e) {
    check('stage the flowguard-server packages', false, e.message)
    return
  }
  const tarballs = {}
  for (const [name, dir] of [['flowguard-server', staged.launcher], ['@flowguard/server-linux-x64', staged.platforms['linux-x64']]]) {
    const r = sh('npm', ['pack', '--json', '--loglevel=error', `--pack-destination=${tmp}`], { cwd: dir })
    const info = r.status === 0 ? JSON.parse(r.stdout.slice(r.stdout.indexOf('[')))[0] : undefined
    const files = (info?.files ?? []).map((f) => `${f.path}${f.mode & 0o111 ? '*' : ''}`).sort()
    const expected = name === 'flowguard-server' ? ['README.md', 'bin/flowguard-server.js*', 'lib/binary.js', 'package.json'] : ['README.md', 'bin/flowguard-server*', 'package.json']
    check(`npm pack ${name}@${info?.version}: ${files.join(', ')} (* executable), ${((info?.size ?? 0) / 1e6).toFixed(1)} MB packed`,
      r.status === 0 && info.version === version && JSON.stringify(files) === JSON.stringify(expected), r.stderr || JSON.stringify(files))
    if (info) tarballs[name] = join(tmp, info.filename)
  }
  figures.push(`staging and npm pack took ${((Date.now() - tp) / 1000).toFixed(1)} s (binary shipped: ${(statSync(shipped).size / 1e6).toFixed(1)} MB)`)
  if (Object.keys(tarballs).length !== 2) return

  const registry = await startVerdaccio(join(tmp, 'verdaccio'))
  const servers = []
  try {
    const tu = Date.now()
    for (const [name, file] of Object.entries(tarballs)) {
      const r = sh('npm', ['publish', file, ...registry.publishArgs(), '--loglevel=error'], { cwd: tmp })
      check(`publish ${name} to the local registry`, r.status === 0, r.stderr.slice(-600))
    }
    figures.push(`npm publish (both) took ${((Date.now() - tu) / 1000).toFixed(1)} s`)

    // Install by name into a fresh directory, as a user would.
    const user = userDir('user', registry)
    const ti = Date.now()
    const inst = sh('npm', ['install', 'flowguard-server', '--loglevel=error'], { cwd: user.dir, env: user.env })
    figures.push(`npm install flowguard-server took ${((Date.now() - ti) / 1000).toFixed(1)} s`)
    if (!check(`npm install flowguard-server in a fresh directory outside the repository (${user.dir})`, inst.status === 0 && !user.dir.startsWith(root), inst.stderr.slice(-800))) return
    const resolved = sh(process.execPath, ['-p', "require('fs').realpathSync(require.resolve('@flowguard/server-linux-x64/bin/flowguard-server', { paths: [require('path').dirname(require.resolve('flowguard-server/package.json'))] }))"], { cwd: user.dir, env: user.env })
    check(`npm installed the platform package @flowguard/server-linux-x64 beside it: ${resolved.stdout.trim().replace(tmp, '$TMP')}`, resolved.status === 0 && resolved.stdout.trim().startsWith(user.dir), resolved.stderr.slice(-400))

    const v = sh('npx', ['flowguard-server', '--version'], { cwd: user.dir, env: user.env })
    check(`npx flowguard-server --version prints "${v.stdout.trim()}"`, v.status === 0 && v.stdout.trim() === `flowguard-server ${version}`, v.stdout + v.stderr)
    const bad = sh('npx', ['flowguard-server', '--no-such-flag'], { cwd: user.dir, env: user.env })
    check(`a usage error's exit status (${bad.status}) and message come through npx`, bad.status === 2 && /--no-such-flag/.test(bad.stderr), `${bad.status} ${bad.stderr}`)

    // A real start on the durable store, then SIGTERM to npx.
    const port = await freePort()
    const db = join(user.dir, 'flowguard.db')
    const s = await startServer('npx', ['flowguard-server', '--listen', `127.0.0.1:${port}`, '--path', db], { cwd: user.dir, env: user.env, port })
    servers.push(s.proc)
    figures.push(`npx flowguard-server start (spawn of npx to the first 200 from /healthz): ${s.ms} ms`)
    if (!check(`npx flowguard-server --path <file> answers /healthz (${s.ms} ms after spawning npx)`, s.ms >= 0, s.output())) return
    const set = await fetch(`http://127.0.0.1:${port}/v1/state/set`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"key":"npx","value":1}' })
    check('it serves a call on the durable store (state/set 200), the file is created', set.status === 200 && existsSync(db), set.status)
    // npm passes the signal on to the launcher, which passes it on to the server, and ends by it itself (status 0
    // or the signal); the server drains ("shutting down" in its log) and exits: the whole process group is gone.
    const ts = Date.now()
    s.proc.kill('SIGTERM')
    const end = await exited(s.proc, 15_000)
    const gone = await groupGone(s.proc.pid, 15_000)
    figures.push(`SIGTERM to npx: npx exited after ${Date.now() - ts} ms (${JSON.stringify(end)}), its process group was empty after ${gone} ms`)
    check(`SIGTERM to npx reaches the server: it drains and exits, npx ends (${JSON.stringify(end)}), no process of the group is left`,
      (end?.code === 0 || end?.signal === 'SIGTERM') && gone >= 0 && /shutting down/.test(s.output()) && (await portClosed(port)), s.output().slice(-800))

    // The launcher itself (node_modules/.bin), SIGINT as Ctrl-C sends it.
    const port2 = await freePort()
    const l = await startServer(join(user.dir, 'node_modules', '.bin', 'flowguard-server'), ['--listen', `127.0.0.1:${port2}`, '--path', db], { cwd: user.dir, env: user.env, port: port2 })
    servers.push(l.proc)
    figures.push(`node_modules/.bin/flowguard-server start (spawn of the launcher to the first 200 from /healthz): ${l.ms} ms`)
    const got = l.ms >= 0 ? await (await fetch(`http://127.0.0.1:${port2}/v1/state/get`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"key":"npx"}' })).json() : {}
    check('the launcher (node_modules/.bin/flowguard-server) starts on the same file and reads the value written before', l.ms >= 0 && got.found === true && got.value === 1, l.output() + JSON.stringify(got))
    l.proc.kill('SIGINT')
    const end2 = await exited(l.proc, 15_000)
    check(`SIGINT to the launcher is passed on: the server drains and exits 0, and so does the launcher (${JSON.stringify(end2)})`,
      end2?.code === 0 && (await groupGone(l.proc.pid, 5_000)) >= 0 && /shutting down/.test(l.output()) && (await portClosed(port2)), l.output().slice(-800))

    // Without the platform package: a coded error naming it.
    const bare = userDir('omit-optional', registry)
    const inst2 = sh('npm', ['install', 'flowguard-server', '--omit=optional', '--loglevel=error'], { cwd: bare.dir, env: bare.env })
    check('npm install flowguard-server --omit=optional installs the launcher alone', inst2.status === 0 && !existsSync(join(bare.dir, 'node_modules', '@flowguard', 'server-linux-x64')), inst2.stderr.slice(-400))
    const miss = sh('npx', ['flowguard-server', '--version'], { cwd: bare.dir, env: bare.env })
    check(`without it, npx flowguard-server exits 1 with ERR_PLATFORM_PACKAGE_MISSING naming @flowguard/server-linux-x64: "${miss.stderr.trim().slice(0, 160)}…"`,
      miss.status === 1 && /ERR_PLATFORM_PACKAGE_MISSING/.test(miss.stderr) && /@flowguard\/server-linux-x64/.test(miss.stderr), `${miss.status} ${miss.stderr}`)
  } finally {
    for (const p of servers) {
      try {
        process.kill(-p.pid, 'SIGKILL')
      } catch {}
    }
    registry.stop()
  }
  figures.push(`npx-proof: took ${((Date.now() - t0) / 1000).toFixed(1)} s in total`)
}

try {
  await main()
} catch (e) {
  check('npx proof ran to the end', false, e.stack)
}
const status = report.finish()
if (status === 0) rmSync(tmp, { recursive: true, force: true })
else console.log(`npx-proof: logs kept in ${tmp} (proof.log)`)
process.exit(status)
