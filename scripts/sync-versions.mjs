#!/usr/bin/env node
// Keeps every published version in step with the root package.json (run by `npm version` after
// `napi version`, which already set npm/*/package.json): the root's optionalDependencies on the
// platform packages, the version strings napi generated into binding.js, n8n-nodes-flowguard's
// own version and its semver range on flowguard, n8n-nodes-flowguard-server's version (its
// devDependency on flowguard's types too), and the server's npm packages (crates/server/npm/: the
// `flowguard-server` launcher, its optionalDependencies and the platform packages).
// `node scripts/pack-check.mjs` verifies the result.
import { readFileSync, writeFileSync, readdirSync } from 'node:fs'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const readJson = (p) => JSON.parse(readFileSync(join(root, p), 'utf8'))
const writeJson = (p, v) => writeFileSync(join(root, p), JSON.stringify(v, null, 2) + '\n')

const pkg = readJson('package.json')
const version = pkg.version
for (const name of Object.keys(pkg.optionalDependencies || {})) pkg.optionalDependencies[name] = version
writeJson('package.json', pkg)

// binding.js compares a platform package's version with the one it was generated for.
const binding = readFileSync(join(root, 'binding.js'), 'utf8')
  .replace(/bindingPackageVersion !== '[^']+'/g, `bindingPackageVersion !== '${version}'`)
  .replace(/version mismatch, expected \S+ but got/g, `version mismatch, expected ${version} but got`)
writeFileSync(join(root, 'binding.js'), binding)

const nodes = readJson('n8n-nodes/package.json')
nodes.version = version
nodes.dependencies.flowguard = `^${version}`
writeJson('n8n-nodes/package.json', nodes)

// npx flowguard-server: the launcher, its exact pins on the platform packages, and those packages.
for (const dir of readdirSync(join(root, 'crates/server/npm'))) {
  const file = `crates/server/npm/${dir}/package.json`
  const p = readJson(file)
  p.version = version
  for (const name of Object.keys(p.optionalDependencies || {})) p.optionalDependencies[name] = version
  writeJson(file, p)
}
// n8n-nodes-flowguard-server (the n8n Cloud package): same version; flowguard's types only (a devDependency).
const cloud = readJson('n8n-nodes/cloud/package.json')
cloud.version = version
cloud.devDependencies.flowguard = `^${version}`
writeJson('n8n-nodes/cloud/package.json', cloud)
console.log(`sync-versions: flowguard, its platform packages, n8n-nodes-flowguard, n8n-nodes-flowguard-server and the flowguard-server packages at ${version}`)
