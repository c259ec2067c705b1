// The flowguard addon is loaded lazily (run after `npm run build`): node --test test/*.test.js
// Makes `require('flowguard')` fail, as it does when the native binary for the platform is
// missing, and checks that the package still loads and that the nodes fail only when run, with an
// error naming the platform and what to do.
const test = require('node:test');
const assert = require('node:assert/strict');
const Module = require('node:module');

const realLoad = Module._load;
let failFlowguard = true;
let flowguardLoads = 0;
Module._load = function load(request, ...rest) {
	if (request === 'flowguard') {
		flowguardLoads++;
		if (failFlowguard) {
			// What napi-rs's generated loader throws when the platform package is missing.
			const e = new Error(
				'Cannot find native binding. npm has a bug related to optional dependencies (https://github.com/npm/cli/issues/4828). Please try `npm i` again after removing both package-lock.json and node_modules directory.',
			);
			e.code = 'MODULE_NOT_FOUND';
			throw e;
		}
	}
	return realLoad.call(this, request, ...rest);
};

const { platformName, loadFlowguard, AddonUnavailableError } = require('../dist/nodes/shared/addon');

/** A minimal n8n execution context of a node on the Embedded backend. */
function context(type) {
	return {
		getInputData: () => [{ json: { id: 'a' } }],
		getNodeParameter: (name, _i, fallback) => ({ operation: 'get', backend: 'embedded' })[name] ?? fallback,
		getNode: () => ({ id: '1', name: 'Node', type: `n8n-nodes-flowguard.${type}`, typeVersion: 2, parameters: {} }),
		continueOnFail: () => false,
	};
}

test('the package loads without the native binary: every node and its description', () => {
	const before = flowguardLoads;
	const nodes = [
		new (require('../dist/nodes/ItemTracker/ItemTracker.node').ItemTracker)(),
		new (require('../dist/nodes/ConcurrencyLock/ConcurrencyLock.node').ConcurrencyLock)(),
		new (require('../dist/nodes/DedupQueue/DedupQueue.node').DedupQueue)(),
	];
	require('../dist/credentials/FlowguardRedisApi.credentials');
	for (const n of nodes) {
		assert.ok(n.description.properties.length > 3);
		assert.equal(typeof n.methods.credentialTest.flowguardRedisConnectionTest, 'function');
	}
	assert.equal(flowguardLoads, before, 'loading the nodes must not load flowguard');
});

test('a node fails when run, naming the platform, the missing platform package and the command', async () => {
	const { ItemTracker } = require('../dist/nodes/ItemTracker/ItemTracker.node');
	const { NodeOperationError } = require('n8n-workflow');
	await assert.rejects(ItemTracker.prototype.execute.call(context('itemTracker')), (e) => {
		assert.ok(e instanceof NodeOperationError, String(e));
		assert.match(e.message, new RegExp(`native binary for this platform \\(${platformName()}, Node v`));
		assert.match(e.description, new RegExp(`npm install flowguard-${platformName()}@\\d`));
		assert.doesNotMatch(`${e.message} ${e.description}`, /reinstall|npm i`? again/i);
		return true;
	});
	assert.match(platformName(), /^[a-z0-9]+-[a-z0-9]+(-gnu|-musl|-msvc)?$/);
});

test('on a platform without a build, the error lists the platforms that have one', async () => {
	const platform = Object.getOwnPropertyDescriptor(process, 'platform');
	Object.defineProperty(process, 'platform', { value: 'aix' });
	try {
		await assert.rejects(loadFlowguard(), (e) => {
			assert.ok(e instanceof AddonUnavailableError);
			assert.match(e.message, /^flowguard has no native binary for this platform \(aix-/);
			assert.match(e.description, /linux-x64-musl/);
			return true;
		});
	} finally {
		Object.defineProperty(process, 'platform', platform);
	}
});

test("the credential's Test reports the missing binary instead of throwing", async () => {
	const { flowguardRedisConnectionTest } = require('../dist/nodes/shared/credentialTest');
	const r = await flowguardRedisConnectionTest.call({}, { id: '1', name: 'r', type: 'flowguardRedisApi', data: { host: '127.0.0.1', port: 1 } });
	assert.equal(r.status, 'Error');
	assert.match(r.message, new RegExp(platformName()));
});

test('a failed load is not remembered: once the binary is there, the next run loads it', async () => {
	failFlowguard = false;
	try {
		assert.equal(typeof (await loadFlowguard()).Flowguard.open, 'function');
	} finally {
		failFlowguard = true;
	}
});
