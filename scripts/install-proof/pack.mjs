// The tarballs of the install proofs, as the release makes them: `npm pack` of a package folder, and a
// platform package (npm/<platform>/ plus the addon built for it) staged in a temp folder and packed.
import { cpSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'

/** `npm pack` of `cwd` into `out` (made) through `sh` (a proof report's); returns the tarball's path. */
export function pack(sh, cwd, out, extra = []) {
  mkdirSync(out, { recursive: true })
  const r = sh('npm', ['pack', '--json', '--loglevel=error', `--pack-destination=${out}`, ...extra], { cwd })
  if (r.status !== 0) throw new Error(`npm pack in ${cwd}: ${r.stderr.slice(-1000)}`)
  return join(out, JSON.parse(r.stdout.slice(r.stdout.indexOf('[\n')))[0].filename)
}

/** The platform package `flowguard-<platform>` (e.g. linux-x64-musl): the repository's npm/<platform> with
 * <root>/flowguard.<platform>.node, staged under `work` and packed into `out`. */
export function packPlatform(sh, root, platform, work, out) {
  const stage = join(work, `stage-${platform}`)
  cpSync(join(root, 'npm', platform), stage, { recursive: true })
  const built = join(root, `flowguard.${platform}.node`)
  const bin = join(stage, `flowguard.${platform}.node`)
  // Debug info off a debug build only shrinks the tarball; the code is the built addon's.
  if (sh('objcopy', ['--strip-debug', built, bin]).status !== 0) cpSync(built, bin)
  return pack(sh, stage, out, ['--ignore-scripts'])
}
