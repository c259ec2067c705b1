// Copies the icons and codex files of the nodes next to their compiled .node.js files
// (what `n8n-node build` does), so that n8n finds them in dist/.
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
let copied = 0;
function walk(dir) {
	for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
		const src = path.join(dir, entry.name);
		if (entry.isDirectory()) walk(src);
		else if (/\.(svg|png|node\.json)$/.test(entry.name)) {
			const dest = path.join(root, 'dist', path.relative(root, src));
			fs.mkdirSync(path.dirname(dest), { recursive: true });
			fs.copyFileSync(src, dest);
			copied++;
		}
	}
}
walk(path.join(root, 'nodes'));
if (copied === 0) {
	process.stderr.write('copy-assets: no icon or codex file found under nodes/\n');
	process.exit(1);
}
