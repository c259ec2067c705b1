// The native file binding.js loads: suites that load the addon themselves (`process.dlopen`, to
// get a second instance of it) must load that very file, not any `flowguard.*.node` lying beside
// it (a glibc and a musl build side by side, a stale build of another platform).
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

/** The `.node` file `<root>/binding.js` loads in this executable and environment, asked from
 * binding.js itself in a child process (the module it required, found in its require tree). */
export function addonFile(root) {
  const binding = join(root, 'binding.js')
  const prog = `
    require(${JSON.stringify(binding)})
    const find = (m, seen) => {
      if (!m || seen.has(m)) return undefined
      seen.add(m)
      if (m.filename.endsWith('.node')) return m.filename
      for (const c of m.children) { const f = find(c, seen); if (f) return f }
    }
    process.stdout.write(find(require.cache[require.resolve(${JSON.stringify(binding)})], new Set()) ?? '')
  `
  const r = spawnSync(process.execPath, ['-e', prog], { encoding: 'utf8', timeout: 30_000 })
  if (r.status !== 0 || !r.stdout) throw new Error(`binding.js in ${root} loaded no addon: ${r.stderr}`)
  return r.stdout
}
