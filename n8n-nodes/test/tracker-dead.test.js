// The Item Tracker node's Max Attempts option, List → Dead and the Retry operation (run after
// `npm run build`), on the embedded backend in memory: node --test test/*.test.js
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

async function claimAndFail(prefix, id, options) {
	const [claimed] = await run(prefix, { operation: 'set', status: 'inProgress', itemId: id, timeout: 600, options });
	const owner = claimed[0].json.itemTracker.owner;
	assert.ok(owner, 'claimed');
	const [failed] = await run(prefix, { operation: 'set', status: 'failed', itemId: id, errorMessage: 'boom', options: { ownerToken: owner } });
	return failed[0].json.itemTracker;
}

test('Max Attempts: the last allowed failure is Dead, listed by List → Dead and skipped by a claim', async () => {
	const prefix = 'dead1:';
	assert.equal((await claimAndFail(prefix, 'a', { maxAttempts: 1 })).item.status, 'dead');
	assert.equal((await claimAndFail(prefix, 'b', {})).item.status, 'failed');
	const [listed] = await run(prefix, { operation: 'list', listStatus: 'dead', listOutput: 'summary', limit: 50 });
	const summary = listed[0].json;
	assert.equal(summary.counts.dead, 1);
	assert.deepEqual(summary.items.map((i) => i.id), ['a']);
	const [claimed, skipped] = await run(prefix, { operation: 'set', status: 'inProgress', itemId: 'a', timeout: 600 });
	assert.equal(claimed.length, 0);
	assert.equal(skipped[0].json.itemTracker.reason, 'dead');
});

test('Retry claims the failed and dead items of a group again in one call, once per group', async () => {
	const prefix = 'dead2:';
	await claimAndFail(prefix, 'a', { maxAttempts: 1 });
	await claimAndFail(prefix, 'b', {});
	const [done] = await run(prefix, { operation: 'set', status: 'inProgress', itemId: 'c', timeout: 600 });
	await run(prefix, { operation: 'set', status: 'completed', itemId: 'c', options: { ownerToken: done[0].json.itemTracker.owner } });
	// Two input items of the same group: one retry.
	const [out] = await run(prefix, { operation: 'retry', retryStatus: 'both', retryTimeout: 60, retryMaxAttempts: 3 }, [{ json: {} }, { json: {} }]);
	assert.deepEqual(out.map((o) => o.json.id).sort(), ['a', 'b']);
	for (const o of out) {
		assert.equal(o.json.claimed, true);
		assert.match(o.json.owner, /^[0-9a-f]{32}$/);
		assert.equal(o.json.item.status, 'in_progress');
		assert.equal(o.json.item.maxAttempts, 3);
		assert.equal(o.json.item.attempts, 2);
	}
	const dead = out.find((o) => o.json.id === 'a').json.item;
	assert.deepEqual(dead.timeline.map((t) => t.status), ['in_progress', 'dead', 'revived', 'in_progress']);
	// Nothing left to retry.
	const [again] = await run(prefix, { operation: 'retry', retryStatus: 'both', retryTimeout: 60 });
	assert.equal(again.length, 0);
});

test('Retry of dead items only, with Reset Attempts: a new budget', async () => {
	const prefix = 'dead3:';
	await claimAndFail(prefix, 'a', { maxAttempts: 1 });
	await claimAndFail(prefix, 'b', {});
	const [out] = await run(prefix, { operation: 'retry', retryStatus: 'dead', resetAttempts: true, retryTimeout: 60 });
	assert.deepEqual(out.map((o) => [o.json.id, o.json.item.attempts]), [['a', 1]]);
});
