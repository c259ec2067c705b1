// Unit tests of the nodes' shared helpers (run after `npm run build`): node --test test/*.test.js
const test = require('node:test');
const assert = require('node:assert/strict');
const { redisUrlFromCredential, redisTargetFromCredential, isQueueMode, openClient, openClientCount } = require('../dist/nodes/shared/client');

test('Redis URL from n8n\'s Redis credential: password only', () => {
	assert.equal(
		redisUrlFromCredential({ host: 'redis.local', port: 6380, password: 'p@ss:w/rd', database: 2, ssl: false }),
		'redis://:p%40ss%3Aw%2Frd@redis.local:6380/2',
	);
});

test('Redis Cluster credential: Host and Port first, then the other nodes, each with the credentials and TLS, database 0', () => {
	assert.deepEqual(redisTargetFromCredential({ host: 'h', port: 6379, database: 3 }), { url: 'redis://h:6379/3' });
	assert.deepEqual(
		redisTargetFromCredential({ host: 'n1', port: 7000, password: 'x', database: 3, ssl: true, cluster: true, clusterNodes: ' n2:7001, n3 ,[::1]:7002' }),
		{ cluster: ['rediss://:x@n1:7000/0', 'rediss://:x@n2:7001/0', 'rediss://:x@n3:7000/0', 'rediss://:x@[::1]:7002/0'] },
	);
});

test('Redis Sentinel credential: master name, sentinel URLs with the sentinels\' auth and TLS, the data nodes\' user, password and database', () => {
	assert.deepEqual(
		redisTargetFromCredential({
			host: 'ignored', port: 6379, user: 'app', password: 'p@ss', database: 2, ssl: false,
			sentinel: true, sentinelMasterName: ' mymaster ', sentinelNodes: 's1:26379, s2 ,[::1]:26380,',
		}),
		{ sentinel: { masterName: 'mymaster', nodes: ['redis://s1:26379', 'redis://s2:26379', 'redis://[::1]:26380'], username: 'app', password: 'p@ss', db: 2 } },
	);
	assert.deepEqual(
		redisTargetFromCredential({
			ssl: true, disableTlsVerification: true, sentinel: true, sentinelMasterName: 'm', sentinelNodes: 's1:1',
			sentinelUser: 'sen', sentinelPassword: 'x:y', cluster: true, sentinelReplicaAcks: 1,
		}),
		{ sentinel: { masterName: 'm', nodes: ['rediss://sen:x%3Ay@s1:1#insecure'], db: 0, replicaAcks: 1 } },
		'Sentinel wins over a Cluster switch left on (n8n hides it), no user or password when none is given',
	);
	assert.deepEqual(redisTargetFromCredential({ host: 'h', port: 6379, sentinel: false, sentinelNodes: 's1:1' }), { url: 'redis://h:6379/0' });
});

test('a Sentinel client is opened with the sentinel option, and cached by it', async () => {
	const n = openClientCount();
	const sentinel = { masterName: 'm', nodes: ['redis://127.0.0.1:1'] };
	await assert.rejects(openClient({ backend: 'redis', sentinel, prefix: 'x:' }), (e) => e.code === 'ERR_BACKEND_UNAVAILABLE' && e.message.includes('127.0.0.1:1'));
	await assert.rejects(openClient({ backend: 'redis', sentinel: { ...sentinel, masterName: '' }, prefix: 'x:' }), (e) => e.code === 'ERR_INVALID_ARGUMENT' && e.message.includes('sentinel.masterName'));
	assert.equal(openClientCount(), n);
});

test('Redis URL: user and password, TLS, TLS verification disabled', () => {
	assert.equal(
		redisUrlFromCredential({ host: 'h', port: 6379, user: 'app', password: 'x', database: 0, ssl: true, disableTlsVerification: true }),
		'rediss://app:x@h:6379/0#insecure',
	);
	assert.equal(redisUrlFromCredential({ host: 'h', port: 6379, ssl: true }), 'rediss://h:6379/0');
});

test('Redis URL: defaults and IPv6 host', () => {
	assert.equal(redisUrlFromCredential({}), 'redis://localhost:6379/0');
	assert.equal(redisUrlFromCredential({ host: '::1', port: 7000 }), 'redis://[::1]:7000/0');
});

test('queue mode is read from EXECUTIONS_MODE', () => {
	const before = process.env.EXECUTIONS_MODE;
	try {
		process.env.EXECUTIONS_MODE = 'queue';
		assert.equal(isQueueMode(), true);
		process.env.EXECUTIONS_MODE = 'regular';
		assert.equal(isQueueMode(), false);
	} finally {
		if (before === undefined) delete process.env.EXECUTIONS_MODE;
		else process.env.EXECUTIONS_MODE = before;
	}
});

test('clients are cached by settings: the same settings give the same client', async () => {
	const n = openClientCount();
	const a = await openClient({ backend: 'embedded', prefix: 'unit-a:' });
	const b = await openClient({ backend: 'embedded', prefix: 'unit-a:' });
	const c = await openClient({ backend: 'embedded', prefix: 'unit-b:' });
	assert.equal(a, b);
	assert.notEqual(a, c);
	assert.equal(openClientCount(), n + 2);
	assert.equal(a.backend, 'embedded');
});

test('a failed open is not cached', async () => {
	const n = openClientCount();
	await assert.rejects(openClient({ backend: 'redis', url: 'redis://127.0.0.1:1/0', prefix: 'x:' }), (e) => typeof e.code === 'string');
	assert.equal(openClientCount(), n);
});

test("the Embedded backend's file is in n8n's folder: N8N_USER_FOLDER/.n8n, else ~/.n8n", () => {
	const { embeddedStatePath, n8nFolder } = require('../dist/nodes/shared/storage');
	const path = require('node:path');
	assert.equal(embeddedStatePath({ N8N_USER_FOLDER: '/srv/n8n', HOME: '/home/u' }), path.join('/srv/n8n', '.n8n', 'flowguard.db'));
	if (process.platform !== 'win32') assert.equal(n8nFolder({ HOME: '/home/u' }), path.join('/home/u', '.n8n'));
	assert.equal(n8nFolder({}), path.join(process.cwd(), '.n8n'));
});

test('an Embedded client with a path is the durable store, cached apart from the in-memory one', async () => {
	const fs = require('node:fs');
	const os = require('node:os');
	const path = require('node:path');
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fg-nodes-'));
	try {
		const file = path.join(dir, 'flowguard.db');
		const durable = await openClient({ backend: 'embedded', path: file, prefix: 'unit-d:' });
		const memory = await openClient({ backend: 'embedded', prefix: 'unit-d:' });
		assert.equal(durable.backend, 'durable');
		assert.equal(memory.backend, 'embedded');
		assert.equal(await openClient({ backend: 'embedded', path: file, prefix: 'unit-d:' }), durable);
		assert.equal((await durable.claim('g', 'a')).claimed, true);
		assert.equal((await memory.claim('g', 'a')).claimed, true, 'the in-memory store does not see the file');
		assert.ok(fs.statSync(file).size > 0);
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});
