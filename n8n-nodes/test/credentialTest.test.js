// flowguard's own test of the Redis credential (run after `npm run build`): node --test test/*.test.js
// With REDIS_URL set, the success case runs against that Redis too.
const test = require('node:test');
const assert = require('node:assert/strict');
const { flowguardRedisConnectionTest } = require('../dist/nodes/shared/credentialTest');
const { ItemTracker } = require('../dist/nodes/ItemTracker/ItemTracker.node');
const { FlowguardRedisApi } = require('../dist/credentials/FlowguardRedisApi.credentials');

const credential = (data) => ({ id: '1', name: 'test', type: 'flowguardRedisApi', data });

test('the nodes have one version and name the flowguard Redis credential, tested by flowguardRedisConnectionTest', () => {
	const d = new ItemTracker().description;
	assert.equal(d.version, 2);
	const cred = d.credentials.find((c) => c.name === 'flowguardRedisApi');
	assert.equal(cred.testedBy, 'flowguardRedisConnectionTest');
	assert.equal(new FlowguardRedisApi().name, 'flowguardRedisApi');
	assert.deepEqual(
		new FlowguardRedisApi().properties.map((p) => p.name).sort(),
		[
			'cluster', 'clusterNodes', 'database', 'disableTlsVerification', 'host', 'password', 'port',
			'sentinel', 'sentinelMasterName', 'sentinelNodes', 'sentinelPassword', 'sentinelReplicaAcks', 'sentinelUser', 'ssl', 'user',
		],
	);
	// The only credential of the Redis backend: n8n's own Redis credential type is not one of them.
	assert.deepEqual(d.credentials.map((c) => c.name), ['flowguardRedisApi', 'flowguardServerApi']);
	assert.deepEqual(cred.displayOptions, { show: { backend: ['redis'] } });
	assert.equal(new ItemTracker().methods.credentialTest.flowguardRedisConnectionTest, flowguardRedisConnectionTest);
});

test('an unreachable Redis: status Error with a message, and no password in it', async () => {
	const r = await flowguardRedisConnectionTest.call({}, credential({ host: '127.0.0.1', port: 1, password: 'secret-pw-91', database: 0 }));
	assert.equal(r.status, 'Error');
	assert.ok(r.message.length > 0);
	assert.ok(!r.message.includes('secret-pw-91'), r.message);
});

test('unreachable sentinels: status Error naming them, and no password in it', async () => {
	const r = await flowguardRedisConnectionTest.call({}, credential({
		password: 'secret-pw-92', sentinel: true, sentinelMasterName: 'mymaster', sentinelNodes: '127.0.0.1:1', sentinelPassword: 'secret-pw-93',
	}));
	assert.equal(r.status, 'Error');
	assert.ok(r.message.includes('127.0.0.1:1') && r.message.includes('mymaster'), r.message);
	assert.ok(!r.message.includes('secret-pw-9'), r.message);
});

test('a reachable Redis (REDIS_URL): status OK from flowguard', { skip: !process.env.REDIS_URL && 'REDIS_URL is not set' }, async () => {
	const u = new URL(process.env.REDIS_URL);
	const r = await flowguardRedisConnectionTest.call(
		{},
		credential({
			host: u.hostname,
			port: Number(u.port || 6379),
			user: decodeURIComponent(u.username),
			password: decodeURIComponent(u.password),
			database: Number(u.pathname.slice(1) || 0),
			ssl: false,
		}),
	);
	assert.deepEqual(r, { status: 'OK', message: 'Connection successful (flowguard)' });
});
