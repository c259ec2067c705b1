// A fresh n8n of the install proofs (scripts/install-proof.mjs on glibc, scripts/musl/n8n-proof.mjs on musl):
// its own temp user folder, started and stopped, driven through its REST API as the UI does and through its
// CLI, with only what a user's service unit would set in its environment. A runtime is
// { nodeBin, n8nBin, wrap? }: the Node's bin folder (first on PATH: its npm is the one n8n runs), n8n's bin
// script, and an optional command every node process is started through (the musl proof's
// scripts/musl/env.sh namespace).
import { spawn } from 'node:child_process'
import { mkdirSync, writeFileSync, openSync, closeSync, cpSync } from 'node:fs'
import { join } from 'node:path'
import { sleep } from '../proof-report.mjs'
import { freePort } from './verdaccio.mjs'

export const EXPECTED_TYPES = ['n8n-nodes-flowguard.itemTracker', 'n8n-nodes-flowguard.concurrencyLock', 'n8n-nodes-flowguard.dedupQueue', 'n8n-nodes-flowguard.rateLimit']

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

export class N8n {
  /** `ctx`: { registry, proxy, ca, work (the proof's temp folder), sh (the proof report's sh) }. */
  constructor(name, runtime, ctx) {
    this.name = name
    this.runtime = runtime
    const base = join(ctx.work, name.replace(/[^a-z0-9.-]+/gi, '-'))
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
  /** [command, args] that run this runtime's node with `args`. */
  nodeCommand(args) {
    const node = join(this.runtime.nodeBin, 'node')
    const w = this.runtime.wrap ?? []
    return w.length ? [w[0], [...w.slice(1), node, ...args]] : [node, args]
  }
  /** Runs node (synchronously, logged) with `args`; `opts` as spawnSync's. */
  node(args, opts) {
    const [cmd, a] = this.nodeCommand(args)
    return this.ctx.sh(cmd, a, opts)
  }
  cli(args, env = {}) {
    return this.node([this.runtime.n8nBin, ...args], { cwd: this.run.cwd, env: { ...this.env, ...env } })
  }
  async start() {
    const out = join(this.run.cwd, 'n8n.log')
    writeFileSync(out, `--- start ${new Date().toISOString()}\n`, { flag: 'a' })
    const fd = openSync(out, 'a')
    const [cmd, args] = this.nodeCommand([this.runtime.n8nBin, 'start'])
    this.proc = spawn(cmd, args, { cwd: this.run.cwd, env: this.env, stdio: ['ignore', fd, fd] })
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

/** The JSON `n8n execute --rawOutput` prints, from the first line that is exactly `{`. */
export function parseRun(stdout) {
  const lines = stdout.split('\n')
  const start = lines.findIndex((l) => l === '{')
  const end = lines.findIndex((l, i) => i > start && l === '}')
  try {
    return start < 0 ? undefined : JSON.parse(lines.slice(start, end + 1).join('\n'))
  } catch {
    return undefined
  }
}
/** The items node `name` output last on `output` in a run of parseRun. */
export const outOf = (run, name, output = 0) => {
  const runs = run?.data?.resultData?.runData?.[name]
  return runs?.length ? (runs[runs.length - 1].data?.main?.[output] ?? []).map((i) => i.json) : undefined
}

/** Imports the example workflow (the weekly project loop, embedded backend) into the stopped n8n `a` and runs it
 * with `n8n execute`, checking its output; `env` is added to the execute's environment. `h`: { check, figures, nodesDir }. */
export function runProjectLoop(label, a, h, env = {}) {
  const wf = join(a.run.cwd, 'project-loop.json')
  cpSync(join(h.nodesDir, 'examples', '01-project-loop.json'), wf)
  const imp = a.cli(['import:workflow', `--input=${wf}`])
  h.check(`${label}: import the example workflow (weekly project loop)`, imp.status === 0, imp.stderr.slice(-400))
  const t0 = Date.now()
  const ex = a.cli(['execute', '--id=fgExLoop000000001', '--rawOutput'], env)
  h.figures.push(`${label}: n8n execute of the project loop took ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  const run = parseRun(ex.stdout)
  const claimed = outOf(run, 'Claim project') ?? []
  const failedItems = outOf(run, 'Mark failed') ?? []
  const completed = outOf(run, 'Mark completed') ?? []
  const ids = (items) => items.map((j) => j.itemTracker?.id ?? j.id).sort().join(',')
  return h.check(
    `${label}: the example runs: 5 projects claimed, globex and umbrella marked failed with their reason, acme, hooli and initech completed`,
    ex.status === 0 && run && !run.data?.resultData?.error && claimed.length === 5 && claimed.every((j) => j.itemTracker?.claimed === true) &&
      ids(failedItems) === 'globex,umbrella' && failedItems.every((j) => j.itemTracker?.item?.status === 'failed' && /Simulated failure/.test(j.itemTracker.item.lastError)) &&
      ids(completed) === 'acme,hooli,initech' && completed.every((j) => j.itemTracker?.item?.status === 'completed'),
    run?.data?.resultData?.error?.message ?? (ex.stdout + ex.stderr).slice(-1200),
  )
}
