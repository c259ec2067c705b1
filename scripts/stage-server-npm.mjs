#!/usr/bin/env node
// Stages the npm packages of `npx flowguard-server` from built binaries, ready for `npm pack` / `npm publish`:
// the launcher package (crates/server/npm/flowguard-server) and one platform package per binary given
// (crates/server/npm/<platform> plus the binary as bin/flowguard-server, mode 755).
// Usage: node scripts/stage-server-npm.mjs <out dir> <platform>=<binary> [<platform>=<binary> ...]
//   e.g. node scripts/stage-server-npm.mjs /tmp/stage linux-x64=target/x86_64-unknown-linux-musl/release/flowguard-server
// Every staged package must carry the workspace's version (root package.json, kept in step by
// scripts/sync-versions.mjs, and Cargo.toml's workspace version, which the binary reports): a mismatch stops it.
// Prints the staged directories, one a line, the launcher's first.
import { readFileSync, cpSync, copyFileSync, chmodSync, mkdirSync, existsSync } from 'node:fs'
import { join, dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const npmDir = join(root, 'crates', 'server', 'npm')
const readJson = (p) => JSON.parse(readFileSync(p, 'utf8'))

export function workspaceVersion() {
  const pkg = readJson(join(root, 'package.json')).version
  const cargo = readFileSync(join(root, 'Cargo.toml'), 'utf8').match(/\[workspace\.package\][^[]*?^version\s*=\s*"([^"]+)"/m)?.[1]
  if (pkg !== cargo) throw new Error(`package.json's version ${pkg} differs from Cargo.toml's workspace version ${cargo}`)
  return pkg
}

/** Stages the packages into `out`; `binaries`: { 'linux-x64': path, ... }. Returns { launcher, platforms: {platform: dir} }. */
export function stageServerPackages(out, binaries) {
  const version = workspaceVersion()
  const launcherSrc = join(npmDir, 'flowguard-server')
  const launcherPkg = readJson(join(launcherSrc, 'package.json'))
  const mismatched = [launcherPkg.version, ...Object.values(launcherPkg.optionalDependencies)].filter((v) => v !== version)
  if (mismatched.length) throw new Error(`crates/server/npm/flowguard-server/package.json is not at ${version}: run node scripts/sync-versions.mjs`)
  mkdirSync(out, { recursive: true })
  const launcher = join(out, 'flowguard-server')
  cpSync(launcherSrc, launcher, { recursive: true })
  const platforms = {}
  for (const [platform, bin] of Object.entries(binaries)) {
    const src = join(npmDir, platform)
    if (!existsSync(join(src, 'package.json'))) throw new Error(`no platform package crates/server/npm/${platform}`)
    const pkg = readJson(join(src, 'package.json'))
    if (pkg.version !== version) throw new Error(`${pkg.name} is at ${pkg.version}, not ${version}: run node scripts/sync-versions.mjs`)
    if (!(pkg.name in launcherPkg.optionalDependencies)) throw new Error(`${pkg.name} is not an optionalDependency of flowguard-server`)
    if (!existsSync(bin)) throw new Error(`no binary at ${bin}`)
    const dir = join(out, `server-${platform}`)
    cpSync(src, dir, { recursive: true })
    mkdirSync(join(dir, 'bin'), { recursive: true })
    copyFileSync(bin, join(dir, 'bin', 'flowguard-server'))
    chmodSync(join(dir, 'bin', 'flowguard-server'), 0o755)
    platforms[platform] = dir
  }
  return { launcher, platforms }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [out, ...pairs] = process.argv.slice(2)
  if (!out || !pairs.length || pairs.some((p) => !/^[a-z0-9]+-[a-z0-9]+=./.test(p))) {
    console.error('usage: node scripts/stage-server-npm.mjs <out dir> <platform>=<binary> [...]  (platform: linux-x64, linux-arm64)')
    process.exit(2)
  }
  try {
    const staged = stageServerPackages(resolve(out), Object.fromEntries(pairs.map((p) => [p.slice(0, p.indexOf('=')), resolve(p.slice(p.indexOf('=') + 1))])))
    console.log([staged.launcher, ...Object.values(staged.platforms)].join('\n'))
  } catch (e) {
    console.error(`stage-server-npm: ${e.message}`)
    process.exit(1)
  }
}
