// The core's coded errors as NodeOperationErrors naming the n8n parameter (run after `npm run build`).
const test = require('node:test');
const assert = require('node:assert/strict');
const { NodeOperationError } = require('n8n-workflow');
const { coreField, describeCode, nodeError } = require('../dist/nodes/shared/errors');
const { callBatch } = require('../dist/nodes/shared/batch');
const { ItemOutputs } = require('../dist/nodes/shared/items');
const { Flowguard } = require('flowguard');

const node = { id: '1', name: 'Item Tracker', type: 'n8n-nodes-flowguard.itemTracker', typeVersion: 2, parameters: {} };
const ctx = (continueOnFail = false) => ({ getNode: () => node, continueOnFail: () => continueOnFail });
const FIELDS = { group: 'Group', id: 'Item ID', ids: 'Item ID', timeoutMs: 'Timeout' };

async function coreError(f) {
	try {
		await f();
	} catch (e) {
		return e;
	}
	throw new Error('the call did not fail');
}

test("the core's ERR_INVALID_ARGUMENT names the field; the node error names the parameter", async () => {
	const fg = await Flowguard.open({ prefix: 'unit-errors:' });
	const e = await coreError(() => fg.setItems('g', [{ id: 'a', status: 'none' }, { id: '', status: 'none' }]));
	assert.equal(e.code, 'ERR_INVALID_ARGUMENT');
	assert.equal(e.field, 'requests[1].id');
	assert.deepEqual(coreField(e), { path: 'requests[1].id', index: 1, rest: ' must be a non-empty string' });
	const n = nodeError(ctx(), e, 4, FIELDS);
	assert.ok(n instanceof NodeOperationError);
	assert.equal(n.message, 'Item ID must be a non-empty string');
	assert.equal(n.context.itemIndex, 4);
	assert.match(n.description, /ERR_INVALID_ARGUMENT/);
	const g = await coreError(() => fg.getItems('', ['a']));
	assert.equal(nodeError(ctx(), g, 0, FIELDS).message, 'Group must be a non-empty string');
	const q = await coreError(() => fg.enqueue('q', ['a'], { shards: 0 }));
	assert.equal(nodeError(ctx(), q, 0, { shards: 'Shards' }).message, 'Shards must be a whole number from 1 to 1024, got 0');
	// Not an argument error, or a field without a parameter: the context and the core's text.
	const other = Object.assign(new Error('connection refused'), { code: 'ERR_BACKEND_UNAVAILABLE' });
	assert.equal(nodeError(ctx(), other, 0, FIELDS, 'Item Tracker get failed').message, 'Item Tracker get failed: connection refused');
	assert.equal(coreField(other), undefined);
	// The field is the error's `field`, never guessed from the message.
	const unnamed = Object.assign(new TypeError('group must be a non-empty string'), { code: 'ERR_INVALID_ARGUMENT' });
	assert.equal(coreField(unnamed), undefined);
	assert.equal(nodeError(ctx(), unnamed, 0, FIELDS).message, 'group must be a non-empty string');
	// A JavaScript-layer argument error of flowguard (`once`'s options) has its `field` too.
	const js = await coreError(() => fg.once('k', () => 1, { waitMs: 'soon' }));
	assert.deepEqual([js.code, js.field], ['ERR_INVALID_ARGUMENT', 'waitMs']);
	assert.equal(nodeError(ctx(), js, 0, { waitMs: 'Max Wait' }).message, 'Max Wait must be a number, got a string');
});

test('a batch call refused for one entry fails that item alone; the others are written in one more call', async () => {
	const fg = await Flowguard.open({ prefix: 'unit-errors:' });
	const entries = [
		{ itemIndex: 0, id: 'x1' },
		{ itemIndex: 1, id: '' },
		{ itemIndex: 2, id: 'x3' },
	];
	let calls = 0;
	const items = entries.map((e) => ({ json: { id: e.id } }));
	const outputs = new ItemOutputs(ctx(true), items, FIELDS);
	const done = await callBatch(
		entries,
		async (left) => {
			calls++;
			return await fg.setItems('batch-group', left.map((e) => ({ id: e.id, status: 'in_progress', timeoutMs: 60000 })));
		},
		{ refused: (e, error) => outputs.fail(e.itemIndex, error), failed: () => assert.fail('the whole call failed') },
	);
	assert.equal(calls, 2);
	assert.deepEqual(done.entries.map((e) => e.id), ['x1', 'x3']);
	assert.ok(done.result.every((r) => r.claimed === true));
	const out = outputs.list();
	assert.equal(out.length, 1);
	assert.deepEqual(out[0].json, { id: '', error: 'Item ID must be a non-empty string' });
	assert.deepEqual(out[0].pairedItem, { item: 1 });
	// Without continue-on-fail the refused item fails the node.
	await assert.rejects(
		callBatch([{ itemIndex: 0, id: '' }], (left) => fg.getItems('g', left.map((e) => e.id)), {
			refused: (e, error) => new ItemOutputs(ctx(false), items, FIELDS).fail(e.itemIndex, error),
			failed: () => assert.fail('the whole call failed'),
		}),
		(e) => e instanceof NodeOperationError && e.message === 'Item ID must be a non-empty string',
	);
});

test('a durable file refusing a skewed clock is explained to the user', () => {
	assert.match(describeCode('ERR_CLOCK_SKEW'), /clock/);
	assert.equal(describeCode('ERR_NO_SUCH_CODE'), undefined);
});
