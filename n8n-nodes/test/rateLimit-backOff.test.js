// The Rate Limit node's Back Off operation (run after `npm run build`): node --test test/*.test.js
// The node runs in a fake execution context over n8n's own expression engine (node-context.js),
// on the Embedded backend (its file in a folder of the run's own); the server backend's route is
// checked with a fake transport.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const test = require('node:test');
const assert = require('node:assert/strict');
const { nodeContext } = require('./node-context');
const { RateLimit } = require('../dist/nodes/RateLimit/RateLimit.node');
const { ServerClient } = require('../dist/nodes/shared/server');

/** Runs a Rate Limit node with `parameters` (n8n's defaults added) over `items`. */
async function run(parameters, items) {
	const nodeType = new RateLimit();
	const defaults = Object.fromEntries(nodeType.description.properties.filter((p) => p.default !== undefined).map((p) => [p.name, p.default]));
	const { ctx } = nodeContext(nodeType, 'Rate Limit', 'n8n-nodes-flowguard.rateLimit', { ...defaults, ...parameters }, items);
	return await nodeType.execute.call(ctx);
}

// The Embedded backend's file, in a folder of this run's own.
process.env.N8N_USER_FOLDER = fs.mkdtempSync(path.join(os.tmpdir(), 'fg-backoff-'));
fs.mkdirSync(path.join(process.env.N8N_USER_FOLDER, '.n8n'));
test.after(() => fs.rmSync(process.env.N8N_USER_FOLDER, { recursive: true, force: true }));
const options = { keyPrefix: `unit-backoff-${process.pid}:` };
const limit = { operation: 'limit', limiterName: 'api', maxPerPeriod: 100, period: 1, whenLimited: 'output', options };

test('Back Off pauses the limit for every run until the Retry-After of the item (seconds or an HTTP date)', async () => {
	// Before: the limit lets the item through.
	let [allowed, limited] = await run(limit, [{ json: { n: 1 } }]);
	assert.equal(allowed.length, 1);
	assert.equal(limited.length, 0);
	// An HTTP Request node's full response: the default Retry After reads its header.
	const t0 = Date.now();
	const [out] = await run({ operation: 'backOff', limiterName: 'api', options }, [{ json: { statusCode: 429, headers: { 'retry-after': '30' } } }]);
	const r = out[0].json.rateLimit;
	assert.equal(r.name, 'api');
	assert.equal(r.retryAfter, '30');
	assert.ok(r.pausedUntil >= t0 + 29_000 && r.pausedUntil <= Date.now() + 30_000, JSON.stringify(r));
	assert.equal(out[0].json.statusCode, 429, 'the item goes on');
	// Another run of the limit: over the rate until the pause ends.
	[allowed, limited] = await run(limit, [{ json: { n: 2 } }]);
	assert.equal(allowed.length, 0);
	assert.equal(limited.length, 1);
	assert.ok(limited[0].json.rateLimit.retryAfterMs > 28_000, JSON.stringify(limited[0].json));
	// A shorter pause (an HTTP date) leaves it; a later one lengthens it.
	const soon = new Date(Date.now() + 5_000).toUTCString();
	const later = new Date(Date.now() + 90_000).toUTCString();
	const [both] = await run({ operation: 'backOff', limiterName: 'api', retryAfter: '={{ $json.when }}', options }, [{ json: { when: soon } }, { json: { when: later } }]);
	assert.equal(both[0].json.rateLimit.pausedUntil, r.pausedUntil);
	assert.equal(both[1].json.rateLimit.pausedUntil, Date.parse(later));
});

test('Back Off without the header uses the Fallback; a bad value fails naming Retry After', async () => {
	const [out] = await run({ operation: 'backOff', limiterName: 'fallback', fallback: 7, options }, [{ json: { statusCode: 429, headers: {} } }]);
	assert.equal(out[0].json.rateLimit.retryAfter, '7');
	assert.ok(out[0].json.rateLimit.pauseMs > 6_000 && out[0].json.rateLimit.pauseMs <= 7_000);
	await assert.rejects(
		run({ operation: 'backOff', limiterName: 'bad', retryAfter: 'soon', options }, [{ json: {} }]),
		(e) => /Retry After/.test(e.message) && /soon/.test(e.message),
	);
});

test('Back Off on the server backend: one POST to /v1/limiter/pause with the value as given', async () => {
	const calls = [];
	const info = { name: 'api', active: true, resetAfterMs: 30_000, pausedUntil: 1_000_030_000, pauseMs: 30_000, readAt: 1_000_000_000 };
	const client = new ServerClient(async (method, path, body) => {
		calls.push([method, path, body]);
		return { status: 200, body: info };
	}, 'http://fg.test:8080');
	assert.deepEqual(await client.pauseRateLimit('api', { retryAfter: '30' }), info);
	assert.deepEqual(calls, [['POST', '/v1/limiter/pause', { name: 'api', retryAfter: '30' }]]);
});
