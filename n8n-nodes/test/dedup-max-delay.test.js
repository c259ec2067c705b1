// The Dedup Queue node's Max Delay option (run after `npm run build`), on the embedded backend
// in memory: node --test test/*.test.js
const test = require('node:test');
const assert = require('node:assert/strict');
const { DedupQueue } = require('../dist/nodes/DedupQueue/DedupQueue.node');

/** An n8n execution context of the Dedup Queue node enqueueing `ids` with `options`. */
function context(options, prefix) {
	const parameters = {
		backend: 'embedded',
		operation: 'enqueue',
		queue: 'q',
		shards: 1,
		ids: 'x',
		options: { memoryOnly: true, keyPrefix: prefix, ...options },
	};
	const get = (name, fallback) => {
		const path = name.split('.');
		let v = parameters;
		for (const p of path) v = v?.[p];
		return v === undefined ? fallback : v;
	};
	return {
		getInputData: () => [{ json: {} }],
		getNodeParameter: (name, _i, fallback) => get(name, fallback),
		getNode: () => ({ id: '1', name: 'Dedup Queue', type: 'n8n-nodes-flowguard.dedupQueue', typeVersion: 1, parameters }),
		continueOnFail: () => false,
	};
}

const run = async (options, prefix) => (await DedupQueue.prototype.execute.call(context(options, prefix)))[0][0].json.dedupQueue;

test('Max Delay caps Debounce: enqueued again, the ID stays due at its first enqueue + Max Delay', async () => {
	const options = { debounce: true, delay: 60, maxDelay: 2 };
	const before = Date.now();
	const first = await run(options, 'md1:');
	const after = Date.now();
	assert.equal(first.outcome, 'added');
	// Due 2 s after the enqueue, which happened between `before` and `after` (however long the
	// node took on a loaded machine).
	assert.ok(first.dueAt >= before + 2000 && first.dueAt <= after + 2000, `${first.dueAt - before} (call took ${after - before} ms)`);
	await new Promise((r) => setTimeout(r, 30));
	const again = await run(options, 'md1:');
	assert.deepEqual([again.outcome, again.dueAt], ['debounced', first.dueAt]);
	// Without Max Delay the same Debounce moves it to the last enqueue + Delay.
	const uncapped = await run({ debounce: true, delay: 60 }, 'md1:');
	assert.ok(uncapped.dueAt > first.dueAt + 50_000);
});

test('Max Delay without Debounce, or not a positive number of seconds, fails the item naming Max Delay', async () => {
	for (const options of [{ maxDelay: 2 }, { debounce: true, maxDelay: 0 }, { debounce: true, maxDelay: -1 }, { debounce: true, maxDelay: 'soon' }]) {
		await assert.rejects(run(options, 'md2:'), (e) => {
			assert.match(e.message, /Max Delay/, `${JSON.stringify(options)}: ${e.message}`);
			return true;
		});
	}
});
