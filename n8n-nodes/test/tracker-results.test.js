// The Item Tracker node's Note (Set In Progress) and Result (Set Completed) options, and Get and
// List showing them (run after `npm run build`), on the embedded backend in memory:
// node --test test/*.test.js
const test = require('node:test');
const assert = require('node:assert/strict');
const { ItemTracker } = require('../dist/nodes/ItemTracker/ItemTracker.node');
const { plainContext } = require('./plain-context');

/** An n8n execution context of the Item Tracker node with `parameters` over `items` (one by default). */
const context = (parameters, items) =>
	plainContext('Item Tracker', 'n8n-nodes-flowguard.itemTracker', { backend: 'embedded', group: 'g', ...parameters }, items);

const run = async (prefix, parameters, items) =>
	await ItemTracker.prototype.execute.call(
		context({ ...parameters, options: { memoryOnly: true, keyPrefix: prefix, ...(parameters.options ?? {}) } }, items),
	);

test('Note on Set In Progress and Result on Set Completed are shown by Get and List', async () => {
	const prefix = 'results1:';
	const [claimed] = await run(prefix, { operation: 'set', status: 'inProgress', itemId: 'a', timeout: 600, options: { note: 'page 3' } });
	const c = claimed[0].json.itemTracker;
	assert.equal(c.item.note, 'page 3');
	const [done] = await run(prefix, {
		operation: 'set',
		status: 'completed',
		itemId: 'a',
		options: { ownerToken: c.owner, result: '{"rows": 12, "ok": true}' },
	});
	assert.deepEqual(done[0].json.itemTracker.item.result, { rows: 12, ok: true });
	const [got] = await run(prefix, { operation: 'get', itemId: 'a' });
	assert.deepEqual(got[0].json.itemTracker.result, { rows: 12, ok: true });
	assert.equal(got[0].json.itemTracker.note, 'page 3');
	const [listed] = await run(prefix, { operation: 'list', listStatus: 'all', listOutput: 'summary', limit: 50 });
	assert.deepEqual(listed[0].json.items[0].result, { rows: 12, ok: true });
	assert.equal(listed[0].json.items[0].note, 'page 3');
	// A value from an expression is taken as it is; empty options store nothing.
	await run(prefix, { operation: 'set', status: 'inProgress', itemId: 'b', timeout: 600 });
	const [b] = await run(prefix, { operation: 'set', status: 'completed', itemId: 'b', options: { result: [1, 2] } });
	assert.deepEqual(b[0].json.itemTracker.item.result, [1, 2]);
	await run(prefix, { operation: 'set', status: 'inProgress', itemId: 'c', timeout: 600, options: { note: '' } });
	const [plain] = await run(prefix, { operation: 'set', status: 'completed', itemId: 'c', options: { result: '' } });
	assert.equal('result' in plain[0].json.itemTracker.item, false);
	assert.equal('note' in plain[0].json.itemTracker.item, false);
});

test('a Result that is not JSON or is past 4 KiB fails the item, naming Result', async () => {
	const prefix = 'results2:';
	await run(prefix, { operation: 'set', status: 'inProgress', itemId: 'a', timeout: 600 });
	await assert.rejects(
		run(prefix, { operation: 'set', status: 'completed', itemId: 'a', options: { result: '{not json' } }),
		/Result must be JSON/,
	);
	await assert.rejects(
		run(prefix, { operation: 'set', status: 'completed', itemId: 'a', options: { result: JSON.stringify({ t: 'x'.repeat(4100) }) } }),
		/Result|4096/,
	);
	const [got] = await run(prefix, { operation: 'get', itemId: 'a' });
	assert.equal(got[0].json.itemTracker.status, 'in_progress', 'nothing written');
});
