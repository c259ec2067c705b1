// The flowguard server backend's client (run after `npm run build`): node --test test/*.test.js
// A fake transport stands for the server; the e2e suite runs the nodes against the real one.
const test = require('node:test');
const assert = require('node:assert/strict');
const { ServerClient, ServerCallError, WAIT_CHUNK_MS, serverUrl, toAnswer } = require('../dist/nodes/shared/server');
const { coreField, nodeError } = require('../dist/nodes/shared/errors');
const { flowguardServerConnectionTest } = require('../dist/nodes/shared/credentialTest');
const { ItemTracker } = require('../dist/nodes/ItemTracker/ItemTracker.node');

/** A client whose transport answers from `answer(path, body)` and records the calls. */
function fake(answer) {
	const calls = [];
	const client = new ServerClient(async (method, path, body, timeoutMs) => {
		calls.push({ method, path, body, timeoutMs });
		return answer(path, body, calls.length);
	}, 'http://fg.test:8080');
	return { client, calls };
}

test('each call is one POST to the route of the same name, with the addon\'s arguments as body fields', async () => {
	const { client, calls } = fake(() => ({ status: 200, body: [] }));
	await client.setItems('g', [{ id: 'a', status: 'in_progress', timeoutMs: 1000 }]);
	await client.enqueue('q', ['x', 'y'], { shards: 4 });
	await client.ack('q', 'own', ['x'], { shards: 4 });
	await client.queueSize('q', null);
	assert.deepEqual(
		calls.map((c) => [c.method, c.path, c.body]),
		[
			['POST', '/v1/tracker/setItems', { group: 'g', requests: [{ id: 'a', status: 'in_progress', timeoutMs: 1000 }] }],
			['POST', '/v1/queue/enqueue', { queue: 'q', ids: ['x', 'y'], shards: 4 }],
			['POST', '/v1/queue/ack', { queue: 'q', owner: 'own', ids: ['x'], shards: 4 }],
			['POST', '/v1/queue/size', { queue: 'q' }],
		],
	);
});

test('a held lock (409) and a lost lock on extend (412) are results, without the added code', async () => {
	const held = { name: 'l', acquired: false, fence: 3, remainingMs: 5000, holder: 'run 7', waitedMs: 0, attempts: 1, code: 'ERR_LOCK_HELD' };
	const { client } = fake((path) =>
		path === '/v1/lock/acquire'
			? { status: 409, body: held }
			: { status: 412, body: { extended: false, remainingMs: 0, reason: 'not_owner', code: 'ERR_NOT_OWNER' } },
	);
	const r = await client.acquireLock('l', { timeoutMs: 1000 });
	assert.equal(r.acquired, false);
	assert.equal(r.holder, 'run 7');
	assert.equal(r.code, undefined);
	assert.deepEqual(await client.extendLock('l', 'o', { timeoutMs: 1000 }), { extended: false, remainingMs: 0, reason: 'not_owner' });
});

test('permits (Concurrency Lock with Permits > 1): the semaphore routes; a full semaphore (409) and a lost permit (412) are results', async () => {
	const full = { name: 's', acquired: false, fence: 4, holders: 3, remainingMs: 900, waitedMs: 0, attempts: 1, code: 'ERR_SEMAPHORE_FULL' };
	const { client, calls } = fake((path) => {
		if (path === '/v1/semaphore/acquire') return { status: 409, body: full };
		if (path === '/v1/semaphore/extend') return { status: 412, body: { extended: false, remainingMs: 0, reason: 'not_held', code: 'ERR_NOT_OWNER' } };
		if (path === '/v1/semaphore/get') return { status: 200, body: { name: 's', holders: [{ fence: 4, remainingMs: 900 }], fence: 4 } };
		return { status: 200, body: { released: true } };
	});
	const r = await client.acquirePermit('s', { permits: 3, timeoutMs: 1000, label: 'run 8' });
	assert.equal(r.acquired, false);
	assert.equal(r.holders, 3);
	assert.equal(r.code, undefined);
	assert.deepEqual(await client.extendPermit('s', 'o', { timeoutMs: 1000 }), { extended: false, remainingMs: 0, reason: 'not_held' });
	assert.deepEqual(await client.releasePermit('s', 'o'), { released: true });
	assert.equal((await client.getSemaphore('s')).holders.length, 1);
	assert.deepEqual(
		calls.map((c) => [c.path, c.body]),
		[
			['/v1/semaphore/acquire', { name: 's', permits: 3, timeoutMs: 1000, label: 'run 8' }],
			['/v1/semaphore/extend', { name: 's', owner: 'o', timeoutMs: 1000 }],
			['/v1/semaphore/release', { name: 's', owner: 'o' }],
			['/v1/semaphore/get', { name: 's' }],
		],
	);
});

test('Rate Limit on the server: take and wait routes, a refused take (429) is a result', async () => {
	const refused = { name: 'api', allowed: false, cost: 1, remaining: 0, retryAfterMs: 400, resetAfterMs: 900, waitMs: 0, slotsMs: [], decidedAt: 1, code: 'ERR_RATE_LIMITED' };
	const { client, calls } = fake((path) => ({ status: 429, body: refused }));
	const r = await client.rateLimit('api', { limit: 2, periodMs: 1000 });
	assert.equal(r.allowed, false);
	assert.equal(r.retryAfterMs, 400);
	assert.equal(r.code, undefined);
	assert.equal((await client.waitRateLimit('api', { limit: 2, periodMs: 1000, maxWaitMs: 5000 })).allowed, false);
	assert.deepEqual(
		calls.map((c) => [c.path, c.body]),
		[
			['/v1/limiter/take', { name: 'api', limit: 2, periodMs: 1000 }],
			['/v1/limiter/wait', { name: 'api', limit: 2, periodMs: 1000, maxWaitMs: 5000 }],
		],
	);
});

test('a wait longer than one server call is asked in parts, and the waits and attempts add up', async () => {
	const { client, calls } = fake((path, body, n) => ({
		status: n < 3 ? 409 : 200,
		body: { name: 'l', acquired: n >= 3, owner: n >= 3 ? 'o' : undefined, fence: 1, remainingMs: 1000, waitedMs: body.waitMs ?? 0, attempts: 2 },
	}));
	// The fake answers at once; a wait of 2.5 chunks would take 3 calls if each call waited its part.
	const r = await client.acquireLock('l', { waitMs: WAIT_CHUNK_MS * 100 });
	assert.equal(r.acquired, true);
	assert.equal(calls.length, 3);
	assert.ok(calls.every((c) => c.body.waitMs > 0 && c.body.waitMs <= WAIT_CHUNK_MS), JSON.stringify(calls.map((c) => c.body.waitMs)));
	assert.ok(calls.every((c) => c.timeoutMs > c.body.waitMs));
	assert.equal(r.attempts, 6);
	assert.equal(r.waitedMs, WAIT_CHUNK_MS * 3);
});

test("the server's coded errors keep code, message and field, so the nodes name their parameter", async () => {
	const { client } = fake(() => ({
		status: 400,
		body: { code: 'ERR_INVALID_ARGUMENT', message: 'requests[1].id must be a non-empty string', field: 'requests[1].id' },
	}));
	const e = await client.setItems('g', []).catch((x) => x);
	assert.ok(e instanceof ServerCallError);
	assert.equal(e.code, 'ERR_INVALID_ARGUMENT');
	assert.equal(e.status, 400);
	assert.deepEqual(coreField(e), { path: 'requests[1].id', index: 1, rest: ' must be a non-empty string' });
	const ctx = { getNode: () => ({ name: 'Item Tracker', type: 'n8n-nodes-flowguard.itemTracker', typeVersion: 2, parameters: {} }) };
	assert.equal(nodeError(ctx, e, 0, { id: 'Item ID' }).message, 'Item ID must be a non-empty string');
});

test('a wrong token, a non-JSON answer and no answer at all are coded errors naming the server', async () => {
	const unauthorized = await fake(() => ({ status: 401, body: { code: 'ERR_UNAUTHORIZED', message: 'a valid token is required' } }))
		.client.getLock('l')
		.catch((x) => x);
	assert.equal(unauthorized.code, 'ERR_UNAUTHORIZED');
	assert.match(unauthorized.message, /refused the token/);
	const proxy = await fake(() => toAnswer({ statusCode: 502, body: '<html>Bad gateway</html>' })).client.getLock('l').catch((x) => x);
	assert.equal(proxy.code, 'ERR_SERVER');
	assert.match(proxy.message, /answered HTTP 502: <html>Bad gateway/);
	const down = await new ServerClient(async () => {
		throw Object.assign(new Error('The service refused the connection'), { cause: new Error('connect ECONNREFUSED 127.0.0.1:1') });
	}, 'http://127.0.0.1:1')
		.getLock('l')
		.catch((x) => x);
	assert.equal(down.code, 'ERR_SERVER_UNAVAILABLE');
	assert.equal(down.message, 'Could not reach the flowguard server at http://127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1');
});

test('the Server URL is checked and kept without trailing slashes', () => {
	assert.equal(serverUrl({ url: ' http://flowguard:8080// ' }), 'http://flowguard:8080');
	assert.throws(() => serverUrl({ url: 'flowguard:8080' }), /must start with http:\/\/ or https:\/\//);
});

test("the nodes offer the flowguard server backend with its credential, tested by flowguardServerConnectionTest", async () => {
	const d = new ItemTracker().description;
	assert.ok(d.properties.find((p) => p.name === 'backend').options.some((o) => o.value === 'server'));
	const cred = d.credentials.find((c) => c.name === 'flowguardServerApi');
	assert.equal(cred.testedBy, 'flowguardServerConnectionTest');
	assert.deepEqual(cred.displayOptions.show.backend, ['server']);
	// The credential's Test with nothing listening: an error naming the URL, never the token.
	const ctx = { helpers: { request: async () => { throw new Error('connect ECONNREFUSED 127.0.0.1:1'); } } };
	const r = await flowguardServerConnectionTest.call(ctx, { id: '1', name: 't', type: 'flowguardServerApi', data: { url: 'http://127.0.0.1:1', token: 'tok-secret-5512' } });
	assert.equal(r.status, 'Error');
	assert.match(r.message, /Could not reach the flowguard server at http:\/\/127\.0\.0\.1:1/);
	assert.ok(!r.message.includes('tok-secret-5512'));
});
