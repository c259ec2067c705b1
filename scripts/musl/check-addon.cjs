// Run by the musl Node inside scripts/musl/env.sh: that this Node is a musl build and that requiring the
// package (index.js → binding.js) loads flowguard.linux-x64-musl.node, and no glibc build of the addon, as
// on Alpine. Prints "musl addon: 1 passed, 0 failed" (or "0 passed, 1 failed" and why) for scripts/test.mjs.
'use strict'
const { join } = require('node:path')

const why = []
const header = process.report.getReport().header
if (header.glibcVersionRuntime) why.push(`not a musl Node (glibc ${header.glibcVersionRuntime})`)
try {
  require(join(__dirname, '..', '..', 'index.js'))
} catch (e) {
  why.push(`index.js did not load: ${e.message}`)
}
const addons = process.report.getReport().sharedObjects.filter((s) => s.endsWith('.node'))
console.log(`${process.version} (${header.glibcVersionRuntime ? 'glibc' : 'musl'}), addon loaded: ${addons.join(', ') || 'none'}`)
if (!addons.some((s) => s.endsWith('/flowguard.linux-x64-musl.node'))) why.push('flowguard.linux-x64-musl.node was not loaded')
if (addons.some((s) => /flowguard[.-]linux-x64-gnu/.test(s))) why.push('a glibc build of the addon was loaded')
for (const w of why) console.error(`musl addon: ${w}`)
console.log(`musl addon: ${why.length ? 0 : 1} passed, ${why.length ? 1 : 0} failed`)
process.exit(why.length ? 1 : 0)
