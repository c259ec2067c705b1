#!/usr/bin/env node
// What `npm pack --dry-run` would publish, checked file by file, and the versions checked to be in
// step: the `flowguard` package (JS layer and binding loader, no binary), each platform package
// under npm/ (its one binary), `n8n-nodes-flowguard` (a fresh build of its nodes), the manifest of
// `n8n-nodes-flowguard-server`, and the packages of `npx flowguard-server` (crates/server/npm/). Each check
// prints "ok" or "FAIL"; `checkPackages()` is also run by scripts/install-proof.mjs.
// Standalone: `node scripts/pack-check.mjs` (n8n-nodes needs its dev tools: npm install in n8n-nodes).
import { spawnSync } from 'node:child_process'
import { readFileSync, readdirSync, existsSync, mkdtempSync, cpSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const nodesDir = join(root, 'n8n-nodes')
const readJson = (p) => JSON.parse(readFileSync(p, 'utf8'))

// The files `npm pack --dry-run` lists for the package in `dir`, sorted.
export function packList(dir, { ignoreScripts = true } = {}) {
  const args = ['pack', '--dry-run', '--json', '--loglevel=error']
  if (ignoreScripts) args.push('--ignore-scripts')
  const r = spawnSync('npm', args, { cwd: dir, encoding: 'utf8', maxBuffer: 1 << 26 })
  if (r.status !== 0) throw new Error(`npm pack --dry-run in ${dir} failed: ${r.stderr.slice(-2000)}`)
  // npm may print lifecycle output before the JSON (prepack runs tsc).
  const json = r.stdout.slice(r.stdout.indexOf('[\n'))
  return JSON.parse(json)[0].files.map((f) => f.path).sort()
}

function sameList(actual, expected) {
  const a = [...actual].sort()
  const e = [...expected].sort()
  const extra = a.filter((f) => !e.includes(f))
  const missing = e.filter((f) => !a.includes(f))
  return extra.length || missing.length ? `unexpected ${JSON.stringify(extra)}, missing ${JSON.stringify(missing)}` : null
}

// Platform directory (napi's platformArchABI) of each napi target in package.json.
const TARGET_DIRS = {
  'x86_64-unknown-linux-gnu': ['linux-x64-gnu', 'linux', 'x64', 'glibc'],
  'aarch64-unknown-linux-gnu': ['linux-arm64-gnu', 'linux', 'arm64', 'glibc'],
  'x86_64-unknown-linux-musl': ['linux-x64-musl', 'linux', 'x64', 'musl'],
  'aarch64-unknown-linux-musl': ['linux-arm64-musl', 'linux', 'arm64', 'musl'],
  'x86_64-apple-darwin': ['darwin-x64', 'darwin', 'x64', null],
  'aarch64-apple-darwin': ['darwin-arm64', 'darwin', 'arm64', null],
  'x86_64-pc-windows-msvc': ['win32-x64-msvc', 'win32', 'x64', null],
}

// Every n8n-nodes source the build turns into a published file: .ts -> .js, assets as they are.
function expectedNodesDist() {
  const out = []
  const walk = (dir) => {
    if (!existsSync(dir)) return
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name)
      if (e.isDirectory()) walk(p)
      else {
        const rel = relative(nodesDir, p).split(sep).join('/')
        if (/\.ts$/.test(e.name) && !/\.d\.ts$/.test(e.name)) out.push(`dist/${rel.replace(/\.ts$/, '.js')}`)
        else if (/\.(json|svg|png)$/.test(e.name)) out.push(`dist/${rel}`)
      }
    }
  }
  walk(join(nodesDir, 'nodes'))
  walk(join(nodesDir, 'credentials'))
  return out
}

// Runs every check; `report(name, error-or-null)` receives each result. `binary` is a built
// flowguard.linux-x64-gnu.node to stage into its platform package (defaults to the root's).
export function checkPackages(report, { binary = join(root, 'flowguard.linux-x64-gnu.node') } = {}) {
  const check = (name, fn) => {
    let err = null
    try {
      err = fn()
    } catch (e) {
      err = e.message
    }
    report(name, err || null)
  }
  const pkg = readJson(join(root, 'package.json'))
  const version = pkg.version

  check('flowguard: npm pack lists exactly the JS layer (index.js, lib/), binding loader, types, README, LICENSE', () => {
    const files = packList(root)
    const lib = ['errors', 'item-results', 'job-state', 'once', 'options', 'queue-results', 'with-lease'].map((f) => `lib/${f}.js`)
    const wrong = sameList(files, ['LICENSE', 'README.md', 'package.json', 'index.js', 'index.d.ts', 'binding.js', 'binding.d.ts', ...lib])
    if (wrong) return wrong
    if (!files.includes(pkg.main) || !files.includes(pkg.types)) return `main ${pkg.main} / types ${pkg.types} not in the tarball`
  })

  check('flowguard: one optional dependency per napi target, each at the package version', () => {
    const want = Object.fromEntries(pkg.napi.targets.map((t) => [`flowguard-${TARGET_DIRS[t][0]}`, version]))
    const wrong = sameList(Object.keys(pkg.optionalDependencies || {}), Object.keys(want))
    if (wrong) return wrong
    const off = Object.entries(pkg.optionalDependencies).filter(([, v]) => v !== version)
    if (off.length) return `not at ${version}: ${JSON.stringify(off)}`
  })

  check('flowguard: binding.js was generated for the package version', () => {
    const versions = new Set([...readFileSync(join(root, 'binding.js'), 'utf8').matchAll(/bindingPackageVersion !== '([^']+)'/g)].map((m) => m[1]))
    if (versions.size !== 1 || !versions.has(version)) return `binding.js expects ${[...versions].join(', ')}, package is ${version}`
  })

  for (const target of pkg.napi.targets) {
    const [abi, os, cpu, libc] = TARGET_DIRS[target] || []
    check(`flowguard-${abi}: manifest (${target})`, () => {
      if (!abi) return `no platform directory known for ${target}`
      const p = readJson(join(root, 'npm', abi, 'package.json'))
      const bin = `flowguard.${abi}.node`
      const problems = []
      if (p.name !== `flowguard-${abi}`) problems.push(`name ${p.name}`)
      if (p.version !== version) problems.push(`version ${p.version} (package is ${version})`)
      if (p.main !== bin) problems.push(`main ${p.main}`)
      if (JSON.stringify(p.files) !== JSON.stringify([bin])) problems.push(`files ${JSON.stringify(p.files)}`)
      if (JSON.stringify(p.os) !== JSON.stringify([os]) || JSON.stringify(p.cpu) !== JSON.stringify([cpu])) problems.push(`os/cpu ${p.os}/${p.cpu}`)
      if (JSON.stringify(p.libc) !== JSON.stringify(libc ? [libc] : undefined)) problems.push(`libc ${p.libc}`)
      if (p.license !== pkg.license) problems.push(`license ${p.license}`)
      return problems.join('; ')
    })
  }

  // Each platform package with its binary (in npm/<platform>/ after `napi artifacts`, or the
  // root's build staged into a copy) lists exactly binary, README and package.json; without one,
  // exactly README and package.json (nothing stray gets published).
  for (const target of pkg.napi.targets) {
    const abi = TARGET_DIRS[target]?.[0]
    if (!abi) continue
    const bin = `flowguard.${abi}.node`
    const dir = join(root, 'npm', abi)
    const staged = !existsSync(join(dir, bin)) && abi === 'linux-x64-gnu' ? binary : null
    const withBinary = existsSync(join(dir, bin)) || staged
    check(`flowguard-${abi}: npm pack lists exactly ${withBinary ? 'its binary, ' : '(no binary built here) '}README and package.json`, () => {
      if (abi === 'linux-x64-gnu' && !withBinary) return `no built addon at ${binary} (npm run build)`
      let stage = null
      try {
        if (staged) {
          stage = mkdtempSync(join(tmpdir(), 'flowguard-pack-'))
          cpSync(dir, stage, { recursive: true })
          cpSync(staged, join(stage, bin))
        }
        return sameList(packList(stage ?? dir), withBinary ? ['README.md', 'package.json', bin] : ['README.md', 'package.json'])
      } finally {
        if (stage) rmSync(stage, { recursive: true, force: true })
      }
    })
  }

  // npx flowguard-server (crates/server/npm/): the launcher pins each platform package at the version; each platform
  // package is static, so it names os and cpu and no libc. scripts/npx-proof.mjs packs them with a binary.
  const serverNpm = join(root, 'crates', 'server', 'npm')
  check('flowguard-server: the launcher and its platform packages at the version, each pinned, os/cpu and no libc', () => {
    const launcher = readJson(join(serverNpm, 'flowguard-server', 'package.json'))
    const problems = []
    if (launcher.version !== version) problems.push(`flowguard-server at ${launcher.version}`)
    if (launcher.scripts && Object.keys(launcher.scripts).some((k) => /install/.test(k))) problems.push('an install script')
    const platforms = readdirSync(serverNpm).filter((d) => d !== 'flowguard-server')
    const wrong = sameList(Object.keys(launcher.optionalDependencies || {}), platforms.map((d) => `@flowguard/server-${d}`))
    if (wrong) problems.push(`optionalDependencies: ${wrong}`)
    for (const d of platforms) {
      const p = readJson(join(serverNpm, d, 'package.json'))
      const [os, cpu] = d.split('-')
      if (p.name !== `@flowguard/server-${d}`) problems.push(`name ${p.name}`)
      if (p.version !== version || launcher.optionalDependencies?.[p.name] !== version) problems.push(`${p.name} at ${p.version}, pinned ${launcher.optionalDependencies?.[p.name]}`)
      if (JSON.stringify(p.os) !== JSON.stringify([os]) || JSON.stringify(p.cpu) !== JSON.stringify([cpu]) || p.libc) problems.push(`${p.name}: os/cpu/libc ${p.os}/${p.cpu}/${p.libc}`)
      if (JSON.stringify(p.files) !== JSON.stringify(['bin/flowguard-server'])) problems.push(`${p.name}: files ${JSON.stringify(p.files)}`)
    }
    return problems.join('; ')
  })
  check('flowguard-server: npm pack lists exactly the launcher, its lib, README and package.json', () =>
    sameList(packList(join(serverNpm, 'flowguard-server')), ['README.md', 'package.json', 'bin/flowguard-server.js', 'lib/binary.js']))

  const nodesPkg = readJson(join(nodesDir, 'package.json'))
  check('n8n-nodes-flowguard: same version, depends on flowguard by a semver range that accepts it', () => {
    if (nodesPkg.version !== version) return `version ${nodesPkg.version} (flowguard is ${version})`
    const range = nodesPkg.dependencies?.flowguard
    if (range !== `^${version}`) return `dependency on flowguard is ${JSON.stringify(range)}, expected "^${version}"`
    for (const field of ['dependencies', 'optionalDependencies', 'peerDependencies']) {
      for (const [name, spec] of Object.entries(nodesPkg[field] || {})) {
        if (/^(file|link|workspace|portal):|^\.\.?\//.test(spec)) return `${field}.${name} points into the repository: ${spec}`
      }
    }
  })

  check('n8n-nodes-flowguard-server (the n8n Cloud package): same version, no runtime dependency, flowguard\'s types at the same range', () => {
    const cloud = readJson(join(nodesDir, 'cloud', 'package.json'))
    if (cloud.version !== version) return `version ${cloud.version} (flowguard is ${version})`
    for (const field of ['dependencies', 'optionalDependencies', 'bundleDependencies', 'bundledDependencies']) {
      if (cloud[field] !== undefined) return `${field} must be absent (n8n Cloud installs no dependencies): ${JSON.stringify(cloud[field])}`
    }
    if (cloud.devDependencies?.flowguard !== `^${version}`) return `devDependency on flowguard is ${JSON.stringify(cloud.devDependencies?.flowguard)}, expected "^${version}"`
    if (cloud.n8n?.strict !== true) return 'n8n.strict must be true'
  })

  check('n8n-nodes-flowguard: npm pack (fresh build) lists exactly the built nodes, assets, README, LICENSE', () => {
    if (!existsSync(join(nodesDir, 'node_modules', 'typescript'))) return 'n8n-nodes dev tools not installed (npm install in n8n-nodes)'
    const files = packList(nodesDir, { ignoreScripts: false })
    const wrong = sameList(files, ['LICENSE', 'README.md', 'package.json', ...expectedNodesDist()])
    if (wrong) return wrong
    const declared = [...(nodesPkg.n8n.nodes || []), ...(nodesPkg.n8n.credentials || [])]
    const absent = declared.filter((f) => !files.includes(f))
    if (absent.length) return `package.json n8n entries not in the tarball: ${absent.join(', ')}`
  })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  let passed = 0
  let failed = 0
  checkPackages((name, err) => {
    if (err) failed++
    else passed++
    console.log(`${err ? 'FAIL' : 'ok'} - ${name}${err ? `: ${err}` : ''}`)
  })
  console.log(`pack-check: ${passed} passed, ${failed} failed`)
  process.exit(failed ? 1 : 0)
}
