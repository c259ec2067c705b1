// The Concurrency Lock node's Per Key (run after `npm run build`): node --test test/*.test.js
// The node runs in a fake execution context over n8n's own expression engine (node-context.js),
// on the Embedded backend (its file in a folder of the run's own).
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const test = require('node:test');
const assert = require('node:assert/strict');
const { nodeContext } = require('./node-context');
const { ConcurrencyLock } = require('../dist/nodes/ConcurrencyLock/ConcurrencyLock.node');

/** Runs a Concurrency Lock node with `parameters` (n8n's defaults added) over `items`. */
async function run(parameters, items) {
	const nodeType = new ConcurrencyLock();
	const defaults = Object.fromEntries(nodeType.description.properties.filter((p) => p.default !== undefined).map((p) => [p.name, p.default]));
	const { ctx } = nodeContext(nodeType, 'Concurrency Lock', 'n8n-nodes-flowguard.concurrencyLock', { ...defaults, ...parameters }, items);
	return await nodeType.execute.call(ctx);
}

process.env.N8N_USER_FOLDER = fs.mkdtempSync(path.join(os.tmpdir(), 'fg-perkey-'));
fs.mkdirSync(path.join(process.env.N8N_USER_FOLDER, '.n8n'));
test.after(() => fs.rmSync(process.env.N8N_USER_FOLDER, { recursive: true, force: true }));
const options = { keyPrefix: `unit-perkey-${process.pid}:` };
const set = {
	operation: 'set',
	lockName: 'exports',
	permits: 3,
	perKey: { limit: { key: '={{ $json.customer }}', perKey: 1 } },
	whenLocked: 'output',
	options: { ...options, label: 'run 1' },
};

test('Per Key: a run gets a permit only while both the total and its key allow it; Get shows the holders per key', async () => {
	const [a] = await run(set, [{ json: { customer: 'A' } }]);
	assert.deepEqual([a[0].json.lock.acquired, a[0].json.lock.keyHolders], [true, 1]);
	// The key A is full: the run goes to the Locked output, though the total has room.
	const [none, locked] = await run(set, [{ json: { customer: 'A' } }]);
	assert.equal(none.length, 0);
	assert.deepEqual([locked[0].json.lock.acquired, locked[0].json.lock.holders, locked[0].json.lock.keyHolders], [false, 1, 1]);
	const [b] = await run(set, [{ json: { customer: 'B' } }]);
	assert.equal(b[0].json.lock.acquired, true);
	const [got] = await run({ operation: 'get', lockName: 'exports', permits: 3, options }, [{ json: {} }]);
	assert.deepEqual(got[0].json.lock.keys, { A: 1, B: 1 });
	assert.deepEqual(got[0].json.lock.holders.map((h) => h.key).sort(), ['A', 'B']);
	// Unset frees the key for the next run.
	await run({ operation: 'unset', lockName: 'exports', permits: 3, ownerToken: a[0].json.lock.owner, options }, [{ json: {} }]);
	const [again] = await run(set, [{ json: { customer: 'A' } }]);
	assert.equal(again[0].json.lock.acquired, true);
});

test('Per Key: Fail says which key is full; Permits 1 with Per Key is refused, naming both', async () => {
	await run(set, [{ json: { customer: 'C' } }]);
	await assert.rejects(run({ ...set, whenLocked: 'error' }, [{ json: { customer: 'C' } }]), (e) => {
		assert.equal(e.message, 'Already Executing');
		assert.match(e.description, /all 1 permits of key "C"/);
		return true;
	});
	await assert.rejects(run({ ...set, permits: 1 }, [{ json: { customer: 'C' } }]), /Per Key needs Permits above 1/);
	// A bad limit is the addon's coded error, named by the node's field.
	await assert.rejects(run({ ...set, perKey: { limit: { key: 'D', perKey: 0 } } }, [{ json: {} }]), /Limit|perKey/);
});
