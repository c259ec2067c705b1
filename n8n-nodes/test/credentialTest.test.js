// flowguard's own test of the Redis credential (run after `npm run build`): node --test test/*.test.js
// With REDIS_URL set, the success case runs against that Redis too.
const test = require('node:test');
const assert = require('node:assert/strict');
const { flowguardPostgresConnectionTest, flowguardRedisConnectionTest } = require('../dist/nodes/shared/credentialTest');
const { postgresOptionsFromCredential } = require('../dist/nodes/shared/client');
const { ItemTracker } = require('../dist/nodes/ItemTracker/ItemTracker.node');
const { FlowguardRedisApi } = require('../dist/credentials/FlowguardRedisApi.credentials');
const { FlowguardPostgresApi } = require('../dist/credentials/FlowguardPostgresApi.credentials');
const { ConcurrencyLock } = require('../dist/nodes/ConcurrencyLock/ConcurrencyLock.node');
const { DedupQueue } = require('../dist/nodes/DedupQueue/DedupQueue.node');
const { RateLimit } = require('../dist/nodes/RateLimit/RateLimit.node');

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
	assert.deepEqual(d.credentials.map((c) => c.name), ['flowguardRedisApi', 'flowguardPostgresApi', 'flowguardServerApi']);
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

test('every node takes the flowguard Postgres credential for its PostgreSQL backend, tested by flowguardPostgresConnectionTest', () => {
	assert.equal(new FlowguardPostgresApi().name, 'flowguardPostgresApi');
	assert.deepEqual(
		new FlowguardPostgresApi().properties.map((p) => p.name).sort(),
		['ca', 'database', 'host', 'password', 'port', 'schema', 'sslMode', 'user'],
	);
	const modes = new FlowguardPostgresApi().properties.find((p) => p.name === 'sslMode').options.map((o) => o.value);
	assert.deepEqual(modes, ['disable', 'prefer', 'require', 'verify-ca', 'verify-full']);
	assert.equal(new FlowguardPostgresApi().properties.find((p) => p.name === 'password').typeOptions.password, true);
	for (const Node of [ItemTracker, ConcurrencyLock, DedupQueue, RateLimit]) {
		const d = new Node().description;
		const cred = d.credentials.find((c) => c.name === 'flowguardPostgresApi');
		assert.deepEqual(cred, { name: 'flowguardPostgresApi', required: true, testedBy: 'flowguardPostgresConnectionTest', displayOptions: { show: { backend: ['postgres'] } } });
		assert.ok(d.properties.find((p) => p.name === 'backend').options.some((o) => o.value === 'postgres'), d.name);
		assert.equal(new Node().methods.credentialTest.flowguardPostgresConnectionTest, flowguardPostgresConnectionTest);
	}
});

test('the Postgres credential as flowguard options: a URL with the SSL mode, the CA as tls.ca, the schema', () => {
	assert.deepEqual(
		postgresOptionsFromCredential({ host: 'db.example', port: 6543, database: 'n8n db', user: 'u@x', password: 'p:w/@?#', sslMode: 'verify-full', ca: ' PEM ', schema: 'fg_1' }),
		{ url: 'postgres://u%40x:p%3Aw%2F%40%3F%23@db.example:6543/n8n%20db?sslmode=verify-full', schema: 'fg_1', tls: { ca: 'PEM' } },
	);
	// Defaults; no CA with SSL disabled; an IPv6 host in brackets.
	assert.deepEqual(postgresOptionsFromCredential({ host: '::1', sslMode: 'disable', ca: 'PEM' }), { url: 'postgres://[::1]:5432/postgres?sslmode=disable' });
	assert.deepEqual(postgresOptionsFromCredential({}), { url: 'postgres://localhost:5432/postgres?sslmode=prefer' });
});

const pgCredential = (data) => ({ id: '2', name: 'pg', type: 'flowguardPostgresApi', data });

test('an unreachable PostgreSQL: status Error with a message, and no password in it', async () => {
	const r = await flowguardPostgresConnectionTest.call({}, pgCredential({ host: '127.0.0.1', port: 1, user: 'u', password: 'secret-pw-94', sslMode: 'disable' }));
	assert.equal(r.status, 'Error');
	assert.match(r.message, /PostgreSQL: the connection failed/);
	assert.ok(!r.message.includes('secret-pw-94'), r.message);
	const bad = await flowguardPostgresConnectionTest.call({}, pgCredential({ host: '127.0.0.1', port: 1, password: 'secret-pw-95', sslMode: 'verify-full', ca: 'not a certificate' }));
	assert.equal(bad.status, 'Error');
	assert.match(bad.message, /PEM/);
	assert.ok(!bad.message.includes('secret-pw-95'), bad.message);
});

const pgUrl = process.env.FLOWGUARD_TEST_POSTGRES_URL;
test('a reachable PostgreSQL (FLOWGUARD_TEST_POSTGRES_URL): status OK from flowguard', { skip: !pgUrl && 'FLOWGUARD_TEST_POSTGRES_URL is not set' }, async () => {
	const u = new URL(pgUrl);
	const r = await flowguardPostgresConnectionTest.call(
		{},
		pgCredential({
			host: u.hostname,
			port: Number(u.port || 5432),
			user: decodeURIComponent(u.username),
			password: decodeURIComponent(u.password),
			database: u.pathname.slice(1),
			sslMode: 'disable',
			schema: 'flowguard_n8n_test',
		}),
	);
	assert.deepEqual(r, { status: 'OK', message: 'Connection successful (flowguard)' });
});

test('a TLS-only PostgreSQL: Verify Full with its CA is OK; Disable is refused, no password shown', async (t) => {
	const { postgresBin, startPostgres } = await import('../../scripts/postgres.mjs');
	const { haveOpenssl } = await import('../../__test__/tls-certs.mjs');
	if (!postgresBin() || !haveOpenssl) return t.skip('PostgreSQL or openssl is not installed');
	const cluster = await startPostgres({ tls: true });
	try {
		const data = { host: '127.0.0.1', port: cluster.port, user: 'flowguard', password: 'secret-pw-96', database: 'postgres' };
		const ca = require('node:fs').readFileSync(cluster.ca, 'utf8');
		assert.deepEqual(
			await flowguardPostgresConnectionTest.call({}, pgCredential({ ...data, sslMode: 'verify-full', ca })),
			{ status: 'OK', message: 'Connection successful (flowguard)' },
		);
		const r = await flowguardPostgresConnectionTest.call({}, pgCredential({ ...data, sslMode: 'disable' }));
		assert.equal(r.status, 'Error');
		assert.match(r.message, /refused the credentials .*no pg_hba\.conf entry/);
		assert.ok(!r.message.includes('secret-pw-96'), r.message);
	} finally {
		cluster.stop();
	}
});

test('a PostgreSQL that takes a password: the right one is OK; a wrong one is an ERR_BACKEND_AUTH failure (28P01), no password shown', async (t) => {
	const { postgresBin, startPostgres } = await import('../../scripts/postgres.mjs');
	if (!postgresBin()) return t.skip('PostgreSQL is not installed');
	const password = 'right-pw-97';
	const cluster = await startPostgres({ password });
	try {
		const data = { host: '127.0.0.1', port: cluster.port, user: 'flowguard', password, database: 'postgres', sslMode: 'disable' };
		assert.deepEqual(await flowguardPostgresConnectionTest.call({}, pgCredential(data)), { status: 'OK', message: 'Connection successful (flowguard)' });
		const r = await flowguardPostgresConnectionTest.call({}, pgCredential({ ...data, password: 'wrong-pw-98' }));
		assert.equal(r.status, 'Error');
		assert.match(r.message, /^ERR_BACKEND_AUTH: PostgreSQL: the server refused the credentials \(28P01 password authentication failed/);
		assert.ok(!r.message.includes('wrong-pw-98') && !r.message.includes(password), r.message);
	} finally {
		cluster.stop();
	}
});
