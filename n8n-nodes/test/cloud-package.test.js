// n8n-nodes-flowguard-server, the n8n Cloud package (scripts/cloud-package.mjs): node --test test/cloud-package.test.js
// Stages and builds it, then checks what n8n Cloud requires of a verified community package: no
// runtime dependency, strict mode, and compiled files that load nothing but n8n-workflow and each
// other; and that its nodes are the full package's nodes with the flowguard server backend only.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');

const nodesDir = path.join(__dirname, '..');
const stageDir = path.join(nodesDir, '.cloud-package');
const dist = path.join(stageDir, 'dist');
const NODES = ['ItemTracker', 'ConcurrencyLock', 'DedupQueue', 'RateLimit'];

const built = spawnSync(process.execPath, [path.join(nodesDir, 'scripts', 'cloud-package.mjs')], { encoding: 'utf8' });
const pkg = built.status === 0 ? JSON.parse(fs.readFileSync(path.join(stageDir, 'package.json'), 'utf8')) : {};

function jsFiles(dir) {
	return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
		e.isDirectory() ? jsFiles(path.join(dir, e.name)) : e.name.endsWith('.js') ? [path.join(dir, e.name)] : [],
	);
}

test('the Cloud package stages and builds', () => {
	assert.equal(built.status, 0, built.stderr);
});

test('package.json: an n8n-nodes-* name, strict mode, no runtime dependency, the four nodes and the server credential only', () => {
	assert.match(pkg.name, /^n8n-nodes-/);
	assert.equal(pkg.name, 'n8n-nodes-flowguard-server');
	assert.equal(pkg.n8n.strict, true);
	for (const field of ['dependencies', 'optionalDependencies', 'bundleDependencies', 'bundledDependencies']) {
		assert.equal(pkg[field], undefined, `${field} must be absent`);
	}
	assert.deepEqual(pkg.peerDependencies, { 'n8n-workflow': '*' });
	assert.deepEqual(pkg.n8n.credentials, ['dist/credentials/FlowguardServerApi.credentials.js']);
	assert.deepEqual(pkg.n8n.nodes, NODES.map((n) => `dist/nodes/${n}/${n}.node.js`));
	for (const f of [...pkg.n8n.nodes, ...pkg.n8n.credentials]) assert.ok(fs.existsSync(path.join(stageDir, f)), f);
	const full = require('../package.json');
	assert.equal(pkg.version, full.version, 'the two packages are released together');
});

test('every compiled file requires only n8n-workflow and files of the package (no flowguard addon, no node: module)', () => {
	const files = jsFiles(dist);
	assert.ok(files.length > 20, `${files.length} files`);
	const outside = [];
	for (const file of files) {
		const text = fs.readFileSync(file, 'utf8');
		assert.doesNotMatch(text, /\bimport\(/, `${file}: a dynamic import`);
		for (const [, spec] of text.matchAll(/\brequire\(\s*["'`]([^"'`]+)["'`]\s*\)/g)) {
			if (spec === 'n8n-workflow') continue;
			const target = spec.startsWith('./') || spec.startsWith('../') ? require.resolve(path.resolve(path.dirname(file), spec)) : '';
			if (!target.startsWith(dist + path.sep)) outside.push(`${path.relative(dist, file)}: require(${JSON.stringify(spec)})`);
		}
		// Every require has a literal argument: nothing is computed at run time.
		assert.equal((text.match(/\brequire\(/g) ?? []).length, [...text.matchAll(/\brequire\(\s*["'`][^"'`]+["'`]\s*\)/g)].length, file);
	}
	assert.deepEqual(outside, []);
	for (const f of ['addon.js', 'client.js', 'storage.js', 'credentialTest.js']) {
		assert.equal(fs.existsSync(path.join(dist, 'nodes', 'shared', f)), false, `${f} is the full package's`);
	}
});

// Loads the package's entry points with every module request outside it refused, as n8n Cloud would.
function loadIsolated() {
	const refused = [];
	const realLoad = Module._load;
	Module._load = function load(request, parent, ...rest) {
		const fromPackage = parent?.filename?.startsWith(dist + path.sep);
		if (fromPackage && request !== 'n8n-workflow' && !request.startsWith('./') && !request.startsWith('../')) {
			refused.push(request);
			throw new Error(`refused: ${request}`);
		}
		return realLoad.call(this, request, parent, ...rest);
	};
	try {
		const nodes = NODES.map((n) => new (require(path.join(dist, 'nodes', n, `${n}.node.js`))[n])());
		const credential = new (require(path.join(dist, 'credentials', 'FlowguardServerApi.credentials.js')).FlowguardServerApi)();
		return { nodes, credential, refused };
	} finally {
		Module._load = realLoad;
	}
}

test('the nodes: the full package\'s names, version and operations, with the flowguard server backend only', () => {
	const { nodes, credential, refused } = loadIsolated();
	assert.deepEqual(refused, []);
	assert.equal(credential.name, 'flowguardServerApi');
	for (const n of nodes) {
		const full = new (require(`../dist/nodes/${n.constructor.name}/${n.constructor.name}.node`)[n.constructor.name])();
		const d = n.description;
		assert.equal(d.name, full.description.name);
		assert.deepEqual(d.version, full.description.version);
		assert.deepEqual(d.credentials, [
			{ name: 'flowguardServerApi', required: true, testedBy: 'flowguardServerConnectionTest', displayOptions: { show: { backend: ['server'] } } },
		]);
		const backend = d.properties.find((p) => p.name === 'backend');
		assert.deepEqual(backend.options.map((o) => o.value), ['server']);
		assert.equal(backend.default, 'server');
		assert.deepEqual(Object.keys(n.methods.credentialTest), ['flowguardServerConnectionTest']);
		// The same parameters as the full package's, less the options of the addon's backends.
		const names = (props) => props.flatMap((p) => [p.name, ...(p.options ?? []).map((o) => (o.value !== undefined ? o.value : o.name))]);
		const addonOnly = new Set(['keyPrefix', 'memoryOnly', 'embedded', 'redis', 'postgres']);
		assert.deepEqual(names(d.properties), names(full.description.properties).filter((x) => !addonOnly.has(x)));
	}
});

test('a workflow made with the full package\'s Embedded backend fails with what to change', async () => {
	const { nodes } = loadIsolated();
	const { NodeOperationError } = require('n8n-workflow');
	const ctx = {
		getInputData: () => [{ json: {} }],
		getNodeParameter: (name, _i, fallback) => ({ operation: 'get', backend: 'embedded' })[name] ?? fallback,
		getNode: () => ({ id: '1', name: 'Node', type: 'n8n-nodes-flowguard-server.itemTracker', typeVersion: 2, parameters: {} }),
	};
	await assert.rejects(nodes[0].execute.call(ctx), (e) => {
		assert.ok(e instanceof NodeOperationError || e.name === 'NodeOperationError', String(e));
		assert.match(e.message, /"embedded" backend is not in n8n-nodes-flowguard-server/);
		assert.match(e.description, /Set Backend to Flowguard Server/);
		return true;
	});
});
