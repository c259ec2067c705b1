// The Dedup Queue node's dead letters (run after `npm run build`): Read Batch's Max Deliveries
// option, the Dead Letters and Requeue Dead operations, on the embedded backend in memory:
// node --test test/*.test.js
const test = require('node:test');
const assert = require('node:assert/strict');
const { DedupQueue } = require('../dist/nodes/DedupQueue/DedupQueue.node');
const { plainContext } = require('./plain-context');

/** An n8n execution context of the Dedup Queue node with `parameters` over `items`. */
const context = (parameters, items) => plainContext('Dedup Queue', 'n8n-nodes-flowguard.dedupQueue', parameters, items);

/** Runs the node with `operation` on queue "q" of the in-memory store under `prefix`: its output items' json. */
async function run(prefix, operation, extra = {}, items) {
	const { options, ...rest } = extra;
	const parameters = {
		backend: 'embedded',
		operation,
		queue: 'q',
		shards: 1,
		...rest,
		options: { memoryOnly: true, keyPrefix: prefix, ...options },
	};
	return (await DedupQueue.prototype.execute.call(context(parameters, items)))[0].map((o) => o.json);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('Max Deliveries: an ID read that many times without an ack is listed by Dead Letters, and Requeue Dead brings it back', async () => {
	const p = 'dl1:';
	await run(p, 'enqueue', { ids: ['x', 'y'] });
	const read = { visibilityTimeout: 0.05, batchSize: 10, options: { maxDeliveries: 1 } };
	assert.deepEqual((await run(p, 'readBatch', read)).map((o) => o.id).sort(), ['x', 'y']);
	// Both claims expire (50 ms): read again with Max Deliveries 1, they die instead.
	await sleep(120);
	assert.deepEqual(await run(p, 'readBatch', read), []);
	const [size] = await run(p, 'size');
	assert.equal(size.dead, 2);
	const dead = await run(p, 'deadLetters', { deadLimit: 1 });
	assert.equal(dead.length, 1);
	assert.equal(dead[0].deliveries, 1);
	assert.equal(dead[0].nextOffset, 1, 'the last item of a page with more after it carries nextOffset');
	const all = await run(p, 'deadLetters');
	assert.deepEqual(all.map((d) => [d.id, d.queue, d.shard, d.deliveries]).sort(), [['x', 'q', 0, 1], ['y', 'q', 0, 1]]);
	// Requeue Dead takes the Dead Letters output items (their id), all in one call.
	const requeued = await run(p, 'requeueDead', {}, all.map((json) => ({ json })));
	assert.deepEqual(requeued.map((o) => o.dedupQueue.outcome), ['requeued', 'requeued']);
	assert.deepEqual((await run(p, 'requeueDead', { itemId: 'x' })).map((o) => o.dedupQueue.outcome), ['not_dead']);
	assert.equal((await run(p, 'size'))[0].dead, 0);
	assert.deepEqual((await run(p, 'readBatch', read)).map((o) => o.id).sort(), ['x', 'y']);
});

test('Max Deliveries out of 1 to 1000 fails the item naming Max Deliveries', async () => {
	for (const maxDeliveries of [0, 1001, 1.5]) {
		await assert.rejects(run('dl2:', 'readBatch', { visibilityTimeout: 60, options: { maxDeliveries } }), (e) => {
			assert.match(e.message, /Max Deliveries/, `${maxDeliveries}: ${e.message}`);
			return true;
		});
	}
});
