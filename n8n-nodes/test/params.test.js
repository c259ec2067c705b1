// Unit tests of ItemParameters (run after `npm run build`): node --test test/*.test.js
// n8n's own expression engine (n8n-workflow, the dev dependency) is the reference: the fake
// execution context below resolves parameters the way n8n-core's getNodeParameter does, and every
// value the helper gives must equal what that gives, with fewer calls to it.
const test = require('node:test');
const assert = require('node:assert/strict');
const { nodeContext } = require('./node-context');
const { ItemParameters, simpleFieldPath, isConstantValue } = require('../dist/nodes/shared/params');
const { ItemTracker } = require('../dist/nodes/ItemTracker/ItemTracker.node');
const { ConcurrencyLock } = require('../dist/nodes/ConcurrencyLock/ConcurrencyLock.node');
const { DedupQueue } = require('../dist/nodes/DedupQueue/DedupQueue.node');

/** An n8n workflow holding one Item Tracker node with these parameters (defaults added by n8n). */
function context(parameters, items) {
	const { ctx, calls } = nodeContext(new ItemTracker(), 'Item Tracker', 'n8n-nodes-flowguard.itemTracker', parameters, items);
	return { ctx, calls, params: new ItemParameters(ctx, items) };
}

/** Each item's value through the helper, and through n8n directly; asserts they are equal. */
function readAll(parameters, items, name, fallback) {
	const { ctx, calls, params } = context(parameters, items);
	const got = items.map((_, i) => attempt(() => params.get(name, i, fallback)));
	const helperCalls = calls.length;
	const want = items.map((_, i) => attempt(() => ctx.getNodeParameter(name, i, fallback)));
	assert.deepEqual(got, want, `${name} = ${JSON.stringify(parameters[name])}`);
	return { got, helperCalls, plan: params.planOf(name) };
}

function attempt(f) {
	try {
		return { value: f() };
	} catch (error) {
		return { error: error.message };
	}
}

const ITEMS = [
	{ json: { id: 'item-1', n: 7, ok: true, a: { b: 'x', 'c d': { e: 'deep' } }, 'my id': 'k1', t: '30' } },
	{ json: { id: 'item-2', n: 0, ok: false, a: { b: '', 'c d': { e: 'deeper' } }, 'my id': 'k2', t: 45 } },
	{ json: { id: 3, n: -1.5, ok: true, a: { b: 'z', 'c d': { e: '' } }, 'my id': 'k3', t: '1' } },
];

test('plain values are read once and given to every item', () => {
	for (const [name, raw] of [
		['group', 'weekly'],
		['timeout', 30],
		['options', { resultField: 'r', reclaimCompleted: true }],
		['status', 'completed'],
	]) {
		const { got, helperCalls, plan } = readAll({ group: 'g', itemId: 'i', [name]: raw }, ITEMS, name);
		assert.equal(plan, 'constant');
		assert.equal(helperCalls, 1, name);
		assert.deepEqual(got[2].value, raw);
	}
});

test('defaults: a parameter left out gets its default, once', () => {
	const { got, helperCalls, plan } = readAll({ group: 'g', itemId: 'i' }, ITEMS, 'timeout');
	assert.equal(plan, 'constant');
	assert.equal(helperCalls, 1);
	assert.deepEqual(got.map((r) => r.value), [600, 600, 600]);
	assert.deepEqual(readAll({ group: 'g', itemId: 'i' }, ITEMS, 'options', {}).got[0].value, {});
});

test('a parameter that is not there: the fallback, or n8n\'s error for every item', () => {
	const params = { group: 'g', itemId: 'i', operation: 'get' };
	// errorMessage is hidden for Get, so n8n has no value for it.
	assert.deepEqual(readAll(params, ITEMS, 'errorMessage', '').got.map((r) => r.value), ['', '', '']);
	const { got, helperCalls } = readAll(params, ITEMS, 'errorMessage');
	assert.deepEqual(got.map((r) => r.error), Array(3).fill('Could not get parameter "errorMessage"'));
	// Read once for all, which fails; then per item (the first item's read again), as before.
	assert.equal(helperCalls, 4);
});

test('simple references are read from the item, without n8n', () => {
	for (const [expr, want] of [
		['={{ $json.id }}', ['item-1', 'item-2', 3]],
		['={{$json.id}}', ['item-1', 'item-2', 3]],
		['={{   $json . id   }}', ['item-1', 'item-2', 3]],
		['={{ $json.n }}', [7, 0, -1.5]],
		['={{ $json.ok }}', [true, false, true]],
		['={{ $json.t }}', ['30', 45, '1']],
		['={{ $json["id"] }}', ['item-1', 'item-2', 3]],
		["={{ $json['my id'] }}", ['k1', 'k2', 'k3']],
		['={{ $json.a.b }}', ['x', '', 'z']],
		['={{ $json["a"]["c d"].e }}', ['deep', 'deeper', '']],
		["={{ $json.a [ 'c d' ] . e }}", ['deep', 'deeper', '']],
	]) {
		const { got, helperCalls, plan } = readAll({ group: 'g', itemId: expr }, ITEMS, 'itemId');
		assert.equal(plan, 'field', expr);
		assert.equal(helperCalls, 0, expr);
		assert.deepEqual(got.map((r) => r.value), want, expr);
	}
});

test('missing fields, null and objects are left to n8n for that item only', () => {
	const items = [
		{ json: { id: 'a' } },
		{ json: {} },
		{ json: { id: null } },
		{ json: { id: { x: 1 } } },
		{ json: { id: ['a', 'b'] } },
		{ json: { id: 'b' } },
	];
	const { got, helperCalls, plan } = readAll({ group: 'g', itemId: '={{ $json.id }}' }, items, 'itemId');
	assert.equal(plan, 'field');
	assert.equal(helperCalls, 4);
	assert.deepEqual(got.map((r) => r.value), ['a', undefined, null, { x: 1 }, ['a', 'b'], 'b']);
	// A missing intermediate object: n8n's result (no value), not a TypeError of the helper.
	const nested = readAll({ group: 'g', itemId: '={{ $json.a.b }}' }, [{ json: {} }, { json: { a: 'text' } }], 'itemId');
	assert.equal(nested.helperCalls, 2);
	// A field of the prototype is not an own field: n8n decides.
	readAll({ group: 'g', itemId: '={{ $json.toString }}' }, [{ json: {} }], 'itemId');
});

test('any other expression is evaluated by n8n for each item', () => {
	for (const expr of [
		'={{ $json.id + "" }}',
		'={{ $json.id.toString() }}',
		'={{ $json.id.toUpperCase() }}',
		'=id-{{ $json.id }}',
		'={{ $json.id }} ',
		'= {{ $json.id }}',
		'={{ $json.id }}{{ $json.n }}',
		'={{ $json }}',
		'={{ $json2.id }}',
		'={{ $json.id || "x" }}',
		'={{ $json[0] }}',
		'={{ $json["a\\"b"] }}',
		'={{ $json.constructor }}',
		'={{ $json.__proto__ }}',
		"={{ $('Code').item.json.id }}",
		'={{ $json.id }',
	]) {
		const { helperCalls, plan } = readAll({ group: 'g', itemId: expr }, ITEMS, 'itemId');
		assert.equal(plan, 'perItem', expr);
		assert.equal(helperCalls, ITEMS.length, expr);
	}
});

test('a collection with an expression inside is evaluated per item', () => {
	const { got, helperCalls, plan } = readAll(
		{ group: 'g', itemId: 'i', options: { resultField: '={{ $json.id }}' } },
		ITEMS,
		'options',
		{},
	);
	assert.equal(plan, 'perItem');
	assert.equal(helperCalls, 3);
	assert.deepEqual(got.map((r) => r.value.resultField), ['item-1', 'item-2', 3]);
});

test('simpleFieldPath and isConstantValue', () => {
	assert.deepEqual(simpleFieldPath('={{ $json.a.b }}'), ['a', 'b']);
	assert.deepEqual(simpleFieldPath('={{ $json["a.b"] }}'), ['a.b']);
	assert.deepEqual(simpleFieldPath("={{\n\t$json['x']\n}}"), ['x']);
	for (const raw of ['{{ $json.a }}', '={{ $jsonx }}', '={{ $json.a.constructor }}', '={{ $json.__x }}', 42, undefined]) {
		assert.equal(simpleFieldPath(raw), undefined, String(raw));
	}
	assert.equal(isConstantValue('a=b'), true);
	assert.equal(isConstantValue({ a: [1, 'x', { b: null }] }), true);
	assert.equal(isConstantValue({ a: [1, '={{ 1 }}'] }), false);
	assert.equal(isConstantValue('=x'), false);
});

test('no node parameter has a validateType (the fast paths would skip that check)', () => {
	const found = [];
	const walk = (props, path) => {
		for (const p of props ?? []) {
			if (p.validateType) found.push(`${path}${p.name}`);
			walk(p.options?.filter?.((o) => o && typeof o === 'object' && 'type' in o), `${path}${p.name}.`);
			for (const o of p.options ?? []) if (o && o.values) walk(o.values, `${path}${p.name}.${o.name}.`);
		}
	};
	for (const N of [ItemTracker, ConcurrencyLock, DedupQueue]) walk(new N().description.properties, `${N.name}.`);
	assert.deepEqual(found, []);
});
