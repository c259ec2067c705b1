#!/usr/bin/env node
// Builds n8n-nodes-flowguard-server, the n8n Cloud package, from the sources of n8n-nodes-flowguard:
// stages the package in n8n-nodes/.cloud-package/ (its package.json, eslint.config.mjs and
// tsconfig.json from cloud/; the node and credential sources from n8n-nodes/ without the files of
// the native addon's backends; cloud/nodes/ over them: its backend.ts, the server backend only),
// then compiles it there. n8n's lint (`n8n-node lint`, strict: the Cloud rules, unmodified config)
// and `npm pack` run in that folder, which is the package.
//
//   node scripts/cloud-package.mjs            stage and build; prints the folder
//   node scripts/cloud-package.mjs --lint     also run n8n-node lint there (exit 1 on a finding)
//   node scripts/cloud-package.mjs --pack DIR also npm pack it into DIR; prints the tarball
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const nodesDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const cloudDir = join(nodesDir, 'cloud');
export const stageDir = join(nodesDir, '.cloud-package');

/** The files of the addon's backends (Embedded, Redis, PostgreSQL) and their credentials: not in the Cloud package. */
export const FULL_ONLY = [
	'nodes/shared/addon.ts',
	'nodes/shared/client.ts',
	'nodes/shared/storage.ts',
	'nodes/shared/credentialTest.ts',
	'nodes/shared/backend.ts',
	'credentials/FlowguardRedisApi.credentials.ts',
	'credentials/FlowguardPostgresApi.credentials.ts',
];
/** The credential lines of the addon's backends in a node's inline list (one each). */
const ADDON_CREDENTIAL_LINES = [/^\s*\{ name: 'flowguardRedisApi', .*\},\n/m, /^\s*\{ name: 'flowguardPostgresApi', .*\},\n/m];

function files(dir) {
	return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
		e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)],
	);
}

function run(cmd, args) {
	const r = spawnSync(cmd, args, { cwd: stageDir, stdio: 'inherit' });
	if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status ?? r.signal} in ${stageDir}`);
}

/** Copies the package's sources into the stage folder. */
export function stage() {
	rmSync(stageDir, { recursive: true, force: true });
	mkdirSync(stageDir, { recursive: true });
	for (const f of ['package.json', 'eslint.config.mjs', 'tsconfig.json', 'README.md']) cpSync(join(cloudDir, f), join(stageDir, f));
	cpSync(join(nodesDir, 'LICENSE'), join(stageDir, 'LICENSE'));
	const sources = [...files(join(nodesDir, 'nodes')), join(nodesDir, 'credentials', 'FlowguardServerApi.credentials.ts')];
	for (const src of sources) {
		const rel = relative(nodesDir, src);
		if (FULL_ONLY.includes(rel)) continue;
		const dest = join(stageDir, rel);
		mkdirSync(dirname(dest), { recursive: true });
		if (/\.node\.ts$/.test(rel)) {
			// The node's credentials are listed inline (n8n's lint reads them from the class): the
			// Cloud package has the flowguard Server credential only.
			let out = readFileSync(src, 'utf8');
			for (const line of ADDON_CREDENTIAL_LINES) {
				const before = out;
				out = out.replace(line, '');
				if (out === before || line.test(out)) throw new Error(`${rel}: expected exactly one ${line.source} credential line`);
			}
			writeFileSync(dest, out);
		} else cpSync(src, dest);
	}
	for (const src of files(join(cloudDir, 'nodes'))) {
		const dest = join(stageDir, relative(cloudDir, src));
		mkdirSync(dirname(dest), { recursive: true });
		cpSync(src, dest);
	}
	// The dev tools (tsc, n8n-node, eslint, n8n-workflow, flowguard's types) of n8n-nodes.
	symlinkSync(join('..', 'node_modules'), join(stageDir, 'node_modules'));
}

/** Compiles the staged package and copies the icons and codex files next to the compiled nodes. */
export function build() {
	run(join(stageDir, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json']);
	for (const src of files(join(stageDir, 'nodes'))) {
		if (!/\.(svg|png|node\.json)$/.test(src)) continue;
		const dest = join(stageDir, 'dist', relative(stageDir, src));
		mkdirSync(dirname(dest), { recursive: true });
		cpSync(src, dest);
	}
}

/** n8n's community-node lint, in strict mode (the Cloud rules). */
export function lint() {
	run(join(stageDir, 'node_modules', '.bin', 'n8n-node'), ['lint']);
}

/** `npm pack` of the staged package into `dir`; returns the tarball's path. */
export function pack(dir) {
	mkdirSync(dir, { recursive: true });
	const r = spawnSync('npm', ['pack', '--json', '--loglevel=error', `--pack-destination=${dir}`], { cwd: stageDir, encoding: 'utf8' });
	if (r.status !== 0) throw new Error(`npm pack in ${stageDir}: ${r.stderr.slice(-1000)}`);
	return join(dir, JSON.parse(r.stdout.slice(r.stdout.indexOf('[')))[0].filename);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
	const args = process.argv.slice(2);
	try {
		stage();
		build();
		if (args.includes('--lint')) lint();
		const at = args.indexOf('--pack');
		console.log(at >= 0 ? pack(args[at + 1] ?? '.') : stageDir);
	} catch (e) {
		console.error(`cloud-package: ${e.message}`);
		process.exit(1);
	}
}
