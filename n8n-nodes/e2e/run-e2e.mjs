// End-to-end test of n8n-nodes-flowguard in a real n8n (the pinned 2.41.1 of e2e/n8n-install).
// Run by .ci/n8n-e2e.sh, which installs n8n, builds the package and sets the environment.
// Imports a Redis credential and the example workflows (as they are: Embedded backend; and a
// Redis copy of each), executes them with `n8n execute --id --rawOutput`, then starts n8n as a
// server and fires overlapping webhook runs. Checks the outputs and the Redis keys (redis-cli).
// The project loop and the credential's Test button also run on a Sentinel-managed Redis of the
// suite's own (__test__/redis-sentinel.mjs). The seed flows also run as PostgreSQL copies (the
// "Flowguard Postgres" credential) on a throwaway PostgreSQL of the suite's own
// (postgres-backend.mjs), checked as the Redis copies are (their state read with psql).
// FG_E2E_BACKENDS (a comma list of embedded, redis, server, postgres; all by default, and always
// all under CI=true) runs the checks of some backends only, while working on one.
// Prints `n8n-e2e: N passed, M failed` and exits non-zero on any failure.

import { spawn, spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';

import { startBarrierServer, withGate } from './barrier.mjs';
import { COMPARE_ID, COMPARE_PATH, compareWorkflow } from './compare-workflow.mjs';
import { queueModeSuite } from './queue-mode.mjs';
import { PG_BAD_CRED, PG_CRED, postgresSide } from './postgres-backend.mjs';
import { serverSuite } from './server-backend.mjs';
import { startSentinelSet } from '../../__test__/redis-sentinel.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const nodesDir = path.resolve(here, '..');
const examplesDir = path.join(nodesDir, 'examples');
const n8nBin = process.env.FG_N8N_BIN;
const userFolder = process.env.N8N_USER_FOLDER;
const redisUrl = process.env.REDIS_URL;
if (!n8nBin || !userFolder) {
	console.error('run-e2e.mjs: FG_N8N_BIN and N8N_USER_FOLDER must be set (run .ci/n8n-e2e.sh)');
	process.exit(2);
}
if (!redisUrl) {
	console.error('run-e2e.mjs: REDIS_URL is not set: the Redis half of the suite cannot run, and a missing Redis is a failure');
	process.exit(2);
}
const redis = new URL(redisUrl);
const redisHost = redis.hostname || '127.0.0.1';
const redisPort = Number(redis.port || 6379);
const redisPassword = decodeURIComponent(redis.password || '');
const redisUser = decodeURIComponent(redis.username || '');
const redisDb = Number((redis.pathname || '/0').slice(1) || 0);
const secrets = [redisPassword, 'e2e-wrong-password-5b1d'].filter(Boolean);

const runId = randomBytes(4).toString('hex');
const prefix = `fge2e-${runId}:`;
const workDir = path.join(userFolder, 'e2e-files');
fs.mkdirSync(workDir, { recursive: true });
const logFile = path.join(userFolder, 'e2e.log');
const log = (s) => fs.appendFileSync(logFile, s + '\n');

let passed = 0;
let failed = 0;
function check(name, ok, detail = '') {
	if (ok) {
		passed++;
		console.log(`  ok   ${name}`);
	} else {
		failed++;
		console.log(`  FAIL ${name}${detail ? `\n       ${detail}` : ''}`);
	}
}
function redact(s) {
	let out = String(s);
	for (const x of secrets) out = out.split(x).join('***');
	return out;
}

// ---------------------------------------------------------------- n8n helpers
function n8n(args, extraEnv = {}) {
	const t0 = Date.now();
	const r = spawnSync(process.execPath, [n8nBin, ...args], {
		env: { ...process.env, ...extraEnv },
		encoding: 'utf8',
		maxBuffer: 64 * 1024 * 1024,
	});
	const ms = Date.now() - t0;
	log(`$ n8n ${args.join(' ')}  (rc=${r.status}, ${ms} ms)\n--- stdout\n${redact(r.stdout)}\n--- stderr\n${redact(r.stderr)}`);
	return { rc: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '', ms };
}

/** The JSON that `n8n execute --rawOutput` prints, from the first line that is exactly `{`. */
function parseRun(stdout) {
	const lines = stdout.split('\n');
	const start = lines.findIndex((l) => l === '{');
	if (start < 0) return undefined;
	// The JSON ends at the first later line that is exactly `}`.
	const end = lines.findIndex((l, i) => i > start && l === '}');
	try {
		return JSON.parse(lines.slice(start, end + 1).join('\n'));
	} catch {
		return undefined;
	}
}

const durations = [];
function execute(id, extraEnv = {}) {
	const r = n8n(['execute', `--id=${id}`, '--rawOutput'], extraEnv);
	durations.push(r.ms);
	const run = parseRun(r.stdout);
	const runData = run?.data?.resultData?.runData ?? {};
	const error = run?.data?.resultData?.error;
	return {
		...r,
		run,
		error,
		ok: r.rc === 0 && run !== undefined && !error,
		all: r.stdout + r.stderr,
		/** Items of output `output` of node `name` (its last run). */
		out(name, output = 0) {
			const runs = runData[name];
			if (!runs?.length) return undefined;
			return (runs[runs.length - 1].data?.main?.[output] ?? []).map((i) => i.json);
		},
		ran: (name) => Array.isArray(runData[name]) && runData[name].length > 0,
		nodeError(name) {
			const runs = runData[name];
			return runs?.[runs.length - 1]?.error;
		},
	};
}

function redisCli(...args) {
	const a = ['-h', redisHost, '-p', String(redisPort), '-n', String(redisDb), '--no-auth-warning'];
	if (redisUser) a.push('--user', redisUser);
	if (redisPassword) a.push('-a', redisPassword);
	const r = spawnSync('redis-cli', [...a, ...args], { encoding: 'utf8' });
	if (r.status !== 0) throw new Error(`redis-cli ${args[0]} failed: ${redact(r.stderr)}`);
	return r.stdout.trim();
}
const redisKeys = (pattern) =>
	redisCli('--scan', '--pattern', pattern)
		.split('\n')
		.filter(Boolean);
/** Runs a store read; a failed read is a failed check with its message. */
function guarded(fn) {
	try {
		return fn();
	} catch (e) {
		return { ok: false, detail: redact(e.message) };
	}
}
/**
 * What the checks read from a store with its own tool (redis-cli here; psql in
 * postgres-backend.mjs, the same functions): each answers { ok, detail, where } (and the value asked for).
 */
const redisStore = {
	tool: 'redis-cli',
	loopState: () =>
		guarded(() => {
			const keys = redisKeys(`${prefix}*`);
			return { ok: keys.some((k) => k.includes('weekly-projects')), detail: `keys: ${keys.slice(0, 10).join(' ')}`, where: 'Redis under the configured key prefix (--scan)' };
		}),
	lockState: (name) =>
		guarded(() => {
			const keys = redisKeys(`${prefix}*${name}*`);
			return { ok: keys.length > 0, detail: `keys: ${keys.join(' ')}`, where: 'Redis under the key prefix' };
		}),
	lockHeld: (name) => redisStore.lockState(name),
	queueWaiting: (queue, shards) =>
		guarded(() => {
			const members = [...Array(shards).keys()].flatMap((s) => redisCli('ZRANGE', `${prefix}{q:${queue}:${s}}:w`, '0', '-1').split('\n').filter(Boolean));
			return { ok: true, ids: sorted(members), where: "the shards' sorted sets <prefix>{q:" + queue + ':N}:w' };
		}),
	queueLeft: (queue, shards) =>
		guarded(() => {
			const count = (kind) => [...Array(shards).keys()].reduce((n, s) => n + Number(redisCli('ZCARD', `${prefix}{q:${queue}:${s}}:${kind}`)), 0);
			return { ok: true, left: `${count('w')}/${count('c')}`, where: "the shards' sorted sets (ZCARD w and c)" };
		}),
	dueOf: (queue, id, shard) =>
		guarded(() => ({ ok: true, due: Number(redisCli('ZSCORE', `${prefix}{q:${queue}:${shard}}:w`, id)), where: `ZSCORE of <prefix>{q:${queue}:${shard}}:w` })),
};

// ---------------------------------------------------------------- setup
const ALL_BACKENDS = ['embedded', 'redis', 'server', 'postgres'];
const only = new Set(
	process.env.CI === 'true' || !process.env.FG_E2E_BACKENDS ? ALL_BACKENDS : process.env.FG_E2E_BACKENDS.split(',').map((b) => b.trim()),
);
/** Whether the checks of `backend` run (FG_E2E_BACKENDS). */
const on = (backend) => only.has(backend);
/** The entries of a list of [backend label, …] whose backend (the label's first word) runs. */
const onBackends = (list) => list.filter(([label]) => on(label.split(/[ ,]/)[0]));

// A Sentinel-managed Redis of its own (a primary, a replica and three sentinels on loopback) for
// the credential's Redis Sentinel choice.
const SENTINEL_PASSWORD = `e2e-sentinel-pw-${runId}`;
secrets.push(SENTINEL_PASSWORD);
const sentinelSet = await startSentinelSet({ name: 'fge2e', password: SENTINEL_PASSWORD });
process.on('exit', () => sentinelSet.killNow());
const sentinelData = {
	sentinel: true,
	sentinelMasterName: 'fge2e',
	sentinelNodes: sentinelSet.sentinels.map((x) => `127.0.0.1:${x.port}`).join(', '),
	password: SENTINEL_PASSWORD,
	database: 0,
	ssl: false,
};
const SENTINEL_CRED = { id: 'fgE2eFgSentinel1', name: 'flowguard e2e flowguard Redis (Sentinel)', type: 'flowguardRedisApi' };
// The credential type of the nodes' Redis backend (this package's, the fields of n8n's Redis and more).
const REDIS_CRED = { id: 'fgE2eRedisCred01', name: 'flowguard e2e Redis', type: 'flowguardRedisApi' };
// The PostgreSQL side: a cluster of its own, its credentials (the right password and a wrong one).
const pgSide = on('postgres') ? await postgresSide({ check, log, prefix }) : undefined;
if (pgSide) {
	secrets.push(pgSide.password, pgSide.wrongPassword);
	process.on('exit', () => pgSide.stop());
} else only.delete('postgres');
const BAD_CRED = { id: 'fgE2eRedisBad001', name: 'flowguard e2e Redis (wrong port)', type: 'flowguardRedisApi' };
fs.writeFileSync(
	path.join(workDir, 'credentials.json'),
	JSON.stringify([
		{
			...REDIS_CRED,
			data: { host: redisHost, port: redisPort, user: redisUser, password: redisPassword, database: redisDb, ssl: false },
		},
		{ ...SENTINEL_CRED, data: sentinelData },
		{
			...BAD_CRED,
			// Nothing listens on port 1; the password must never appear in any output.
			data: { host: '127.0.0.1', port: 1, password: 'e2e-wrong-password-5b1d', database: 0, ssl: false },
		},
		...(pgSide?.credentials ?? []),
	]),
);

// Barriers and gates (barrier.mjs) for the checks of overlapping runs: the overlap is made, not hoped for.
const barrier = await startBarrierServer();
/** The gate of each locked job's webhook path: the run holds its lock there until the check opens it. */
const jobGate = (sfx) => `locked-job${sfx}`;

const examples = fs
	.readdirSync(examplesDir)
	.filter((f) => f.endsWith('.json'))
	.map((f) => JSON.parse(fs.readFileSync(path.join(examplesDir, f), 'utf8')));
const byName = Object.fromEntries(examples.map((w) => [w.id, w]));
const isFg = (n) => n.type.startsWith('n8n-nodes-flowguard.');

/** A copy of a workflow with every flowguard node on Redis (credential, run-unique key prefix). */
function redisVariant(wf, cred = REDIS_CRED, suffix = 'R') {
	return storeVariant(wf, { backend: 'redis', label: 'Redis', cred, suffix, main: 'R' });
}
/** A copy of a workflow with every flowguard node on PostgreSQL (the Flowguard Postgres credential, run-unique key prefix). */
function postgresVariant(wf, cred = PG_CRED, suffix = 'PG') {
	return storeVariant(wf, { backend: 'postgres', label: 'PostgreSQL', cred, suffix, main: 'PG' });
}
/** A copy with every flowguard node on a store's backend; webhook paths get `-<backend>`. */
function storeVariant(wf, { backend, label, cred, suffix, main }) {
	const w = structuredClone(wf);
	w.id = wf.id + suffix;
	w.name = `${wf.name} [${label}${suffix === main ? '' : ' ' + suffix}]`;
	for (const n of w.nodes) {
		if (isFg(n)) {
			n.parameters.backend = backend;
			n.parameters.options = { ...(n.parameters.options ?? {}), keyPrefix: prefix };
			n.credentials = { [cred.type]: { id: cred.id, name: cred.name } };
		}
		if (n.type === 'n8n-nodes-base.executeWorkflow') {
			n.parameters.workflowId = { ...n.parameters.workflowId, value: n.parameters.workflowId.value + suffix };
		}
		if (n.type === 'n8n-nodes-base.webhook') {
			n.parameters.path += `-${backend}`;
			n.webhookId = randomUUID();
		}
		if (n.webhookId && n.type !== 'n8n-nodes-base.webhook') n.webhookId = randomUUID();
	}
	return w;
}
/** A copy whose flowguard nodes use another key prefix and options (Embedded stays Embedded). */
function optionsVariant(wf, options, suffix) {
	const w = structuredClone(wf);
	w.id = wf.id + suffix;
	w.name = `${wf.name} [${suffix}]`;
	for (const n of w.nodes) if (isFg(n)) n.parameters.options = { ...(n.parameters.options ?? {}), ...options };
	return w;
}
/** A copy with the On Error setting of one node changed. */
function onErrorVariant(wf, nodeName, onError, suffix) {
	const w = structuredClone(wf);
	w.id = wf.id + suffix;
	w.name = `${wf.name} [${suffix}]`;
	const n = w.nodes.find((x) => x.name === nodeName);
	if (onError) n.onError = onError;
	else delete n.onError;
	// A key prefix of its own: the Embedded state of the original's runs is in the same file.
	for (const x of w.nodes) if (isFg(x)) x.parameters.options = { ...(x.parameters.options ?? {}), keyPrefix: `fg-${suffix.toLowerCase()}:` };
	return w;
}

const LOOP = 'fgExLoop000000001';
const REPORT = 'fgExReport0000001';
const SUB = 'fgExLockSub000001';
const CALLER = 'fgExLockCall00001';
const JOB = 'fgExLockedJob0001';
const ROUTE = 'fgExLockedRoute01';
const STALE = 'fgExStale00000001';
const QENQ = 'fgExQueueEnqueue1';
const QSYNC = 'fgExQueueSync0001';
const QRCPT = 'fgExQueueReceipt1';
const PACED = 'fgExPacedSync0001';
const BACKOFF = 'fgExBackOff429001';
for (const id of [LOOP, REPORT, SUB, CALLER, JOB, ROUTE, STALE, QENQ, QSYNC, QRCPT, PACED, BACKOFF]) {
	if (!byName[id]) {
		console.error(`example workflow ${id} is missing from ${examplesDir}`);
		process.exit(2);
	}
}
const toImport = [
	...examples,
	...examples.map((w) => redisVariant(w)),
	onErrorVariant(byName[STALE], 'Complete with the stale token', undefined, 'S'),
	onErrorVariant(byName[STALE], 'Complete with the stale token', 'continueErrorOutput', 'E'),
	redisVariant(byName[LOOP], BAD_CRED, 'B'),
	redisVariant(byName[LOOP], SENTINEL_CRED, 'SN'),
	onErrorVariant(byName[QRCPT], 'Ack with a wrong receipt', undefined, 'S'),
	// The loop through `n8n execute` (a new process each time) on the Embedded file, under a key
	// prefix of its own (the server runs the example's own prefix), and in memory only.
	optionsVariant(byName[LOOP], { keyPrefix: 'fg-cli:' }, 'C'),
	optionsVariant(byName[LOOP], { keyPrefix: 'fg-cli:', memoryOnly: true }, 'M'),
	compareWorkflow(barrier.url),
	// The seed flows on PostgreSQL, and the loop with a wrong password.
	...(pgSide ? [...examples.map((w) => postgresVariant(w)), postgresVariant(byName[LOOP], PG_BAD_CRED, 'PB')] : []),
];
// The locked jobs hold their lock at a gate instead of for 3 s: the overlapping run is sent only
// once the first holds the lock, and the first goes on only once the second has been answered.
for (const [id, sfx] of [
	[JOB, ''],
	[JOB + 'R', '-redis'],
	[ROUTE, '-route'],
	[ROUTE + 'R', '-route-redis'],
	...(pgSide ? [[JOB + 'PG', '-postgres'], [ROUTE + 'PG', '-route-postgres']] : []),
]) {
	const i = toImport.findIndex((w) => w.id === id);
	toImport[i] = withGate(structuredClone(toImport[i]), 'Work for 3 seconds', barrier.url, jobGate(sfx));
}
// The product sync's Schedule Trigger (every 30 min, at :00 and :30) is disabled in the imported
// copies: the server started below must not run a sync of its own in the middle of the checks.
for (const w of toImport) {
	for (const n of w.nodes) if (n.type === 'n8n-nodes-base.scheduleTrigger') n.disabled = true;
}
const wfDir = path.join(workDir, 'workflows');
fs.mkdirSync(wfDir, { recursive: true });
for (const w of toImport) fs.writeFileSync(path.join(wfDir, `${w.id}.json`), JSON.stringify(w, null, 1));

console.log(`n8n-e2e: n8n ${n8nVersion()} on Node ${process.version}; Redis at ${redisHost}:${redisPort}/${redisDb}, key prefix ${prefix}`);

function n8nVersion() {
	const r = spawnSync(process.execPath, [n8nBin, '--version'], { encoding: 'utf8' });
	return (r.stdout || '').trim().split('\n').pop();
}

if (process.env.FG_UNIT_RESULT) {
	check('unit tests of the nodes\' helpers pass (node --test n8n-nodes/test/*.test.js)', process.env.FG_UNIT_RESULT === 'pass');
}
if (process.env.FG_LINT_RESULT) {
	check("n8n's community-node lint passes (eslint, @n8n/node-cli config)", process.env.FG_LINT_RESULT === 'pass');
}
if (process.env.FG_CLOUD_LINT_RESULT) {
	check(
		"the n8n Cloud package n8n-nodes-flowguard-server passes n8n's lint in strict mode (n8n-node lint, the Cloud rules)",
		process.env.FG_CLOUD_LINT_RESULT === 'pass',
	);
}

{
	const c = n8n(['import:credentials', `--input=${path.join(workDir, 'credentials.json')}`]);
	check(
		`import the Redis credentials (credential type "flowguardRedisApi")${pgSide ? ' and the Postgres ones ("flowguardPostgresApi")' : ''}`,
		c.rc === 0,
		redact(c.stderr).slice(-400),
	);
	// n8n keeps them encrypted; the plain file is not left on disk.
	fs.rmSync(path.join(workDir, 'credentials.json'));
	const w = n8n(['import:workflow', '--separate', `--input=${wfDir}`]);
	check(
		`import ${toImport.length} workflows (the examples, their Redis${pgSide ? ' and PostgreSQL' : ''} copies and variants)`,
		w.rc === 0,
		redact(w.stderr).slice(-400),
	);
	const published = onBackends([
		['embedded', [SUB, JOB, ROUTE, LOOP, REPORT, QENQ, QSYNC, COMPARE_ID, PACED, BACKOFF]],
		['redis', [SUB + 'R', JOB + 'R', ROUTE + 'R', PACED + 'R', BACKOFF + 'R']],
		['postgres', [SUB + 'PG', JOB + 'PG', ROUTE + 'PG', PACED + 'PG', BACKOFF + 'PG']],
	]).flatMap(([, list]) => list);
	for (const id of published) {
		const p = n8n(['publish:workflow', `--id=${id}`]);
		if (p.rc !== 0) check(`publish workflow ${id}`, false, redact(p.stderr).slice(-400));
	}
}

const ids = (items) => (items ?? []).map((j) => j.id ?? j.itemTracker?.id).sort().join(',');
const sorted = (a) => [...a].sort().join(',');

// ---------------------------------------------------------------- Item Tracker: the project loop
for (const [backend, id] of onBackends([
	['embedded', LOOP + 'C'],
	['redis', LOOP + 'R'],
	['postgres', LOOP + 'PG'],
])) {
	const r = execute(id);
	check(`[${backend}] project loop run 1 succeeds`, r.ok, redact(r.error?.message ?? r.all.slice(-600)));
	const claimed = r.out('Claim project', 0) ?? [];
	check(
		`[${backend}] run 1: Set In Progress claims all 5 projects (first output), none skipped`,
		claimed.length === 5 && claimed.every((j) => j.itemTracker.claimed === true && /^[0-9a-f]{16,}$/.test(j.itemTracker.owner)) &&
			(r.out('Claim project', 1) ?? []).length === 0,
		JSON.stringify(claimed.map((j) => j.itemTracker)).slice(0, 400),
	);
	const failedItems = r.out('Mark failed') ?? [];
	check(
		`[${backend}] run 1: the 2 projects that fail on purpose are marked failed with their reason`,
		ids(failedItems) === 'globex,umbrella' &&
			failedItems.every((j) => j.itemTracker.ok === true && j.itemTracker.item.status === 'failed' && /Simulated failure of .* on attempt 1/.test(j.itemTracker.item.lastError) && j.itemTracker.ownerChecked === true),
		JSON.stringify(failedItems).slice(0, 400),
	);
	const completed = r.out('Mark completed') ?? [];
	check(
		`[${backend}] run 1: 3 projects completed, each checked against its claim's token found through the item lineage`,
		sorted(completed.map((j) => j.itemTracker?.id)) === 'acme,hooli,initech' &&
			completed.every((j) => j.itemTracker.ok === true && j.itemTracker.item.status === 'completed' && j.itemTracker.ownerChecked === true && j.report),
		JSON.stringify(completed).slice(0, 400),
	);
}
for (const [backend, id] of onBackends([
	// Each `n8n execute` is a new process: on Embedded the state is in the file in n8n's folder.
	['embedded, a second n8n execute', LOOP + 'C'],
	['redis', LOOP + 'R'],
	['postgres', LOOP + 'PG'],
])) {
	const r = execute(id);
	const claimed = r.out('Claim project', 0) ?? [];
	const skipped = r.out('Claim project', 1) ?? [];
	check(
		`[${backend}] run 2: only the 2 failed projects are claimed again (attempt 2); the 3 completed go to the Skipped output`,
		r.ok && ids(claimed) === 'globex,umbrella' && claimed.every((j) => j.itemTracker.item.attempts === 2) &&
			ids(skipped) === 'acme,hooli,initech' && skipped.every((j) => j.itemTracker.reason === 'completed' && j.itemTracker.claimed === false),
		JSON.stringify({ claimed: claimed.map((j) => j.id), skipped: skipped.map((j) => j.id), err: r.error?.message }),
	);
	check(
		`[${backend}] run 2: the re-processed projects succeed and are completed; no Mark failed`,
		ids(r.out('Mark completed')?.map((j) => j.itemTracker)) === 'globex,umbrella' && !r.ran('Mark failed'),
	);
}
if (on('embedded')) {
	const stateFile = path.join(userFolder, '.n8n', 'flowguard.db');
	check(
		"[embedded] the state is in .n8n/flowguard.db, beside n8n's database.sqlite",
		fs.existsSync(stateFile) && fs.statSync(stateFile).size > 0 && fs.existsSync(path.join(userFolder, '.n8n', 'database.sqlite')),
		stateFile,
	);
	const m = execute(LOOP + 'M');
	check(
		'[embedded, Keep State in Memory Only] a new n8n execute sees none of the file\'s state: all 5 projects claimed (attempt 1)',
		m.ok && (m.out('Claim project', 0) ?? []).length === 5 && (m.out('Claim project', 0) ?? []).every((j) => j.itemTracker.item.attempts === 1),
		redact(m.error?.message ?? m.all.slice(-400)),
	);
}
/** The backends of the webhook checks, with the suffix of their webhook paths. */
const WEBHOOK_BACKENDS = [
	['embedded', ''],
	['redis', '-redis'],
	['postgres', '-postgres'],
];
/** The store of each backend whose state the checks read with its own tool. */
const stores = { redis: redisStore, postgres: pgSide?.store };
for (const [backend, sfx] of onBackends([
	['redis', 'R'],
	['postgres', 'PG'],
])) {
	const r3 = execute(LOOP + sfx);
	check(
		`[${backend}] run 3: nothing left to do, all 5 projects skipped as completed`,
		r3.ok && (r3.out('Claim project', 0) ?? []).length === 0 && (r3.out('Claim project', 1) ?? []).length === 5,
	);
	const rep = execute(REPORT + sfx);
	const summary = rep.out('List projects')?.[0];
	check(
		`[${backend}] List: counts per status and the items with their attempts`,
		rep.ok && summary?.counts?.completed === 5 && summary.counts.failed === 0 && summary.counts.total === 5 &&
			summary.items.length === 5 && summary.items.find((i) => i.id === 'globex')?.attempts === 2,
		String(JSON.stringify(summary)).slice(0, 400),
	);
	const st = stores[backend].loopState();
	check(`[${backend}] the loop left its state in ${st.where} (${stores[backend].tool})`, st.ok, st.detail);
}

// ---------------------------------------------------------------- Item Tracker: stale token refused
for (const [backend, id] of onBackends([
	['embedded', STALE],
	['redis', STALE + 'R'],
	['postgres', STALE + 'PG'],
])) {
	const r = execute(id);
	const stale = r.out('Complete with the stale token')?.[0];
	const newer = r.out('Complete with the newer token')?.[0];
	check(
		`[${backend}] stale token: completing with the timed-out claim's token is refused (continueOnFail shows the error)`,
		r.ok && /now owned by a newer claim/.test(stale?.error ?? '') && stale?.itemTracker?.code === 'ERR_NOT_OWNER' &&
			stale.itemTracker.item.status === 'in_progress',
		String(JSON.stringify(stale ?? r.error?.message)).slice(0, 400),
	);
	check(
		`[${backend}] stale token: the newer claim's owner completes the item (attempt 2)`,
		newer?.itemTracker?.ok === true && newer.itemTracker.item.status === 'completed' && newer.itemTracker.item.attempts === 2 && newer.itemTracker.ownerChecked === true,
		String(JSON.stringify(newer)).slice(0, 400),
	);
}
if (on('embedded')) {
	const r = execute(STALE + 'S');
	check(
		'stale token without continueOnFail: the execution fails with a NodeOperationError naming the node and the newer claim',
		!r.ok && /now owned by a newer claim/.test(r.all) && !r.ran('Complete with the newer token'),
		redact(r.all.slice(-500)),
	);
	const e = execute(STALE + 'E');
	const errOut = e.out('Complete with the stale token', 1) ?? [];
	check(
		'stale token with On Error = "Continue (using error output)": the refused item goes to the error output',
		e.ok && errOut.length === 1 && /now owned by a newer claim/.test(errOut[0].error ?? '') && (e.out('Complete with the stale token', 0) ?? []).length === 0,
		JSON.stringify({ main: e.out('Complete with the stale token', 0), err: errOut }).slice(0, 400),
	);
}

// ---------------------------------------------------------------- Concurrency Lock via the sub-workflow
for (const [backend, sfx] of onBackends([
	['embedded', ''],
	['redis', 'R'],
	['postgres', 'PG'],
])) {
	const id = CALLER + sfx;
	const r = execute(id);
	const took = r.out('Take the lock')?.[0];
	const again = r.out('Take the lock again')?.[0];
	const rel = r.out('Release the lock')?.[0];
	check(
		`[${backend}] sub-workflow {action:"set", key, timeout} via Execute Workflow takes the lock (owner and fencing token in the output)`,
		r.ok && took?.lock?.acquired === true && typeof took.lock.owner === 'string' && took.lock.fence >= 1 && took.lock.remainingMs > 590000,
		String(JSON.stringify(took ?? r.error?.message ?? r.all.slice(-400))).slice(0, 400),
	);
	check(
		`[${backend}] while it is held, a second "set" through the sub-workflow fails with "Already Executing"`,
		/Already Executing/.test(again?.error ?? ''),
		String(JSON.stringify(again)).slice(0, 400),
	);
	check(
		`[${backend}] "unset" through the sub-workflow with the owner token releases the lock`,
		rel?.lock?.released === true,
		String(JSON.stringify(rel)).slice(0, 300),
	);
	{
		// The refused sub-workflow run names the workflow that holds the lock: the caller (the
		// workflow that ran Execute Workflow) and its execution, not the helper sub-workflow.
		const caller = id;
		const callerRuns = executionsOf(caller, '').map((e) => String(e.id));
		const refused = executionData(SUB + sfx, 'Already Executing');
		const holder = /held by workflow (\w+) \(execution (\w+)\), through the sub-workflow /.exec(refused.at(-1)?.data ?? '');
		check(
			`[${backend}] "Already Executing" in the sub-workflow names the calling workflow and its execution as the holder`,
			holder !== null && holder[1] === caller && callerRuns.includes(holder[2]),
			`holder ${JSON.stringify(holder?.slice(1))}, caller executions ${callerRuns.join(' ')}, refused sub-executions ${refused.length}`,
		);
	}
	if (stores[backend]) {
		const r2 = execute(id);
		const took2 = r2.out('Take the lock')?.[0];
		check(
			`[${backend}] a later run takes the released lock again, with a higher fencing token`,
			r2.ok && took2?.lock?.acquired === true && took2.lock.fence > took.lock.fence,
			JSON.stringify({ first: took?.lock?.fence, second: took2?.lock?.fence }),
		);
		const st = stores[backend].lockState('nightly-sync', took2?.lock?.fence);
		check(`[${backend}] the lock lives in ${st.where}, released, with the later run's fencing token (${stores[backend].tool})`, st.ok, st.detail);
	}
}

// ---------------------------------------------------------------- Dedup Queue on Redis and PostgreSQL: producer, consumer, receipts
const HEX32 = /^[0-9a-f]{32}$/;
for (const [backend, sfx] of onBackends([
	['redis', 'R'],
	['postgres', 'PG'],
])) {
	const store = stores[backend];
	const e = execute(QENQ + sfx);
	const enq = e.out('Enqueue product') ?? [];
	const outcomes = enq.map((j) => j.dedupQueue?.outcome).join(',');
	const first = Object.fromEntries(enq.filter((j) => j.dedupQueue?.outcome === 'added').map((j) => [j.productId, j.dedupQueue.dueAt]));
	check(
		`[${backend}] enqueue: 6 product IDs with duplicates (one call): 4 added, the 2 repeats are duplicates that keep their first due time`,
		e.ok && enq.length === 6 && outcomes === 'added,added,duplicate,added,duplicate,added' &&
			enq.every((j) => j.productId === j.dedupQueue.id && j.dedupQueue.queue === 'product-sync' && j.dedupQueue.dueAt === first[j.productId]),
		String(JSON.stringify(enq.map((j) => j.dedupQueue) ?? e.error?.message ?? e.all.slice(-400))).slice(0, 600),
	);
	check(
		`[${backend}] enqueue: shards are fnv1a(id) % 4, as the npm fnv1a package computes them (product-id-1 is shard 0)`,
		enq.find((j) => j.productId === 'product-id-1')?.dedupQueue.shard === 0 &&
			sorted(enq.map((j) => `${j.productId}:${j.dedupQueue.shard}`)) === sorted(['product-id-1:0', 'product-id-2:1', 'product-id-1:0', 'product-id-3:2', 'product-id-2:1', 'product-id-4:3']),
		JSON.stringify(enq.map((j) => [j.productId, j.dedupQueue?.shard])),
	);
	const size = e.out('Queue size')?.[0];
	check(
		`[${backend}] Size after the enqueue: 4 waiting and due (duplicates not enqueued), 0 claimed, one per shard`,
		size?.waiting === 4 && size.due === 4 && size.claimed === 0 && size.shards?.map((x) => x.waiting).join(',') === '1,1,1,1',
		JSON.stringify(size),
	);
	const waiting = store.queueWaiting('product-sync', 4);
	const counted = store.queueLeft('product-sync', 4);
	check(
		`[${backend}] ${store.tool}: the 4 distinct IDs wait in ${waiting.where}, none claimed`,
		waiting.ids === 'product-id-1,product-id-2,product-id-3,product-id-4' && counted.left === '4/0',
		`waiting ${waiting.ids ?? waiting.detail}, waiting/claimed ${counted.left ?? counted.detail}`,
	);

	const c = execute(QSYNC + sfx);
	const read = c.out('Read a batch') ?? [];
	const owner = read[0]?.owner;
	check(
		`[${backend}] Read Batch claims the 4 due IDs: one item each with { id, queue, shard, owner (receipt) }, one receipt for the batch, visible for 900 s`,
		c.ok && read.length === 4 && ids(read) === 'product-id-1,product-id-2,product-id-3,product-id-4' && HEX32.test(owner ?? '') &&
			read.every((j) => j.owner === owner && j.queue === 'product-sync' && j.shard === enq.find((x) => x.productId === j.id)?.dedupQueue.shard &&
				j.visibleUntil - Date.now() > 850000),
		String(JSON.stringify(read.length ? read : (c.error?.message ?? c.all.slice(-500)))).slice(0, 600),
	);
	const syncRuns = c.run?.data?.resultData?.runData?.['Sync product (simulated API call)'] ?? [];
	const gaps = syncRuns.slice(1).map((r, k) => r.startTime - syncRuns[k].startTime);
	check(
		`[${backend}] the batch is processed one product at a time with the 0.5 s Wait between calls (Loop Over Items)`,
		syncRuns.length === 4 && gaps.every((g) => g >= 450),
		`runs ${syncRuns.length}, gaps ${gaps.join(' ')} ms`,
	);
	const acked = c.out('Ack synced products') ?? [];
	const after = c.out('Queue size')?.[0];
	check(
		`[${backend}] Ack: the 4 IDs acked in one call with the receipt found in each item; Size then 0 waiting, 0 claimed`,
		acked.length === 4 && acked.every((j) => j.dedupQueue?.ok === true && j.dedupQueue.id === j.id && j.syncedAt) &&
			after?.waiting === 0 && after.claimed === 0,
		String(JSON.stringify({ acked: acked.map((j) => j.dedupQueue), after })).slice(0, 600),
	);
	const left = store.queueLeft('product-sync', 4);
	check(`[${backend}] ${store.tool}: nothing waiting or claimed left in ${left.where}`, left.left === '0/0', left.left ?? left.detail);

	const t = execute(QRCPT + sfx);
	const rd = t.out('Read the batch') ?? [];
	const wrong = t.out('Ack with a wrong receipt') ?? [];
	const rel = t.out('Release for a retry in 30 s') ?? [];
	const again = t.out('Ack after the release') ?? [];
	const rsize = t.out('Queue size')?.[0];
	check(
		`[${backend}] refusal: Ack with a wrong receipt refuses both IDs (not_owner); continue-on-fail keeps the item and adds the error`,
		t.ok && rd.length === 2 && wrong.length === 2 &&
			wrong.every((j) => j.dedupQueue?.ok === false && j.dedupQueue.reason === 'not_owner' && /held by another read: not acked/.test(j.error ?? '') && j.owner === rd[0].owner),
		String(JSON.stringify(wrong.length ? wrong : (t.error?.message ?? t.all.slice(-500)))).slice(0, 600),
	);
	check(
		`[${backend}] release: the right receipt and ID are found through the item lineage (JSON replaced by a Set node); due again in 30 s`,
		rel.length === 2 && rel.every((j) => j.order && j.id === undefined && j.dedupQueue?.ok === true && j.dedupQueue.id === j.order &&
			j.dedupQueue.dueAt - rd[0].dueAt > 25000 && j.dedupQueue.dueAt - rd[0].dueAt < 40000),
		String(JSON.stringify(rel)).slice(0, 600),
	);
	check(
		`[${backend}] an Ack after the release is refused (not_claimed); Size: 2 waiting, none due yet, 0 claimed`,
		again.length === 2 && again.every((j) => j.dedupQueue?.reason === 'not_claimed' && /is not claimed/.test(j.error ?? '')) &&
			rsize?.waiting === 2 && rsize.due === 0 && rsize.claimed === 0,
		String(JSON.stringify({ again: again.map((j) => j.dedupQueue), rsize })).slice(0, 600),
	);
	const due = store.dueOf('order-export', 'order-1001', 0);
	check(
		`[${backend}] ${store.tool}: the released ID waits again with its due time 30 s ahead (${due.where})`,
		due.due > Date.now() + 15000,
		`due ${due.due ?? due.detail}, now ${Date.now()}`,
	);
}
if (on('embedded')) {
	const f = execute(QRCPT + 'S');
	check(
		'[embedded] a wrong receipt without continue-on-fail fails the execution with a NodeOperationError naming the ID; nothing after it runs',
		!f.ok && /ID "order-1001" of queue "order-export" is held by another read: not acked/.test(f.all) && !f.ran('Keep only the order'),
		redact(f.all.slice(-500)),
	);
}

// ---------------------------------------------------------------- Both nodes: bad input, bad credential, queue mode
if (on('embedded')) {
	// `n8n execute` falls back to regular mode but still connects to the queue's Redis at start:
	// point it at the test Redis, under the run's prefix (deleted at the end).
	const r = execute(LOOP, {
		EXECUTIONS_MODE: 'queue',
		QUEUE_BULL_REDIS_HOST: redisHost,
		QUEUE_BULL_REDIS_PORT: String(redisPort),
		QUEUE_BULL_REDIS_DB: String(redisDb),
		...(redisUser ? { QUEUE_BULL_REDIS_USERNAME: redisUser } : {}),
		...(redisPassword ? { QUEUE_BULL_REDIS_PASSWORD: redisPassword } : {}),
		QUEUE_BULL_PREFIX: `${prefix}bull`,
	});
	check(
		'[embedded] in queue mode (EXECUTIONS_MODE=queue) the Embedded backend is refused with the reason',
		!r.ok && /queue mode/.test(r.all) && /Set Backend to Redis/.test(r.all),
		redact(r.all.slice(-500)),
	);
}
if (on('redis')) {
	const b = execute(LOOP + 'B');
	check(
		'[redis] an unreachable Redis fails the node with a message naming it, and the password appears nowhere',
		!b.ok && /Could not connect to Redis/.test(b.all) && !b.all.includes('e2e-wrong-password-5b1d'),
		redact(b.all.slice(-500)),
	);
}
if (on('postgres')) {
	const b = execute(LOOP + 'PB');
	check(
		'[postgres] a wrong password fails the node with the server\'s refusal (28P01), and neither password appears anywhere in the output',
		!b.ok && /Could not connect to PostgreSQL: PostgreSQL: the server refused the credentials \(28P01 password authentication failed/.test(b.all) &&
			!b.all.includes(pgSide.wrongPassword) && !b.all.includes(pgSide.password),
		redact(b.all.slice(-500)),
	);
}

// ---------------------------------------------------------------- n8n as a server: overlapping runs
async function freePort() {
	return await new Promise((resolve, reject) => {
		const s = net.createServer();
		s.once('error', reject);
		s.listen(0, '127.0.0.1', () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function withServer(fn) {
	const port = await freePort();
	const env = { ...process.env, N8N_PORT: String(port), N8N_LISTEN_ADDRESS: '127.0.0.1' };
	const serverLog = path.join(userFolder, 'server.log');
	const out = fs.openSync(serverLog, 'a');
	const logStart = fs.statSync(serverLog).size;
	const child = spawn(process.execPath, [n8nBin, 'start'], { env, stdio: ['ignore', out, out] });
	const base = `http://127.0.0.1:${port}`;
	const t0 = Date.now();
	let up = false;
	while (Date.now() - t0 < 120000 && child.exitCode === null) {
		try {
			// Ready, and done activating the published workflows (their webhooks are registered
			// before n8n prints where the editor is).
			const res = await fetch(`${base}/healthz/readiness`);
			const text = fs.readFileSync(serverLog, 'utf8').slice(logStart);
			if (res.ok && text.includes('Editor is now accessible')) {
				up = true;
				break;
			}
		} catch {
			// not listening yet
		}
		await sleep(500);
	}
	check(`n8n start serves on 127.0.0.1:${port} with the published workflows active (ready in ${((Date.now() - t0) / 1000).toFixed(1)} s)`, up);
	try {
		if (up) await fn(base);
	} finally {
		child.kill('SIGTERM');
		const exited = await Promise.race([new Promise((r) => child.once('exit', () => r(true))), sleep(20000).then(() => false)]);
		if (!exited) child.kill('SIGKILL');
	}
}

/** Executions of a workflow in n8n's database, with whether their data holds `text`. */
function executionsOf(workflowId, text) {
	const db = new DatabaseSync(path.join(userFolder, '.n8n', 'database.sqlite'), { readOnly: true });
	try {
		return db
			.prepare(
				'select e.id as id, e.status as status, instr(d.data, ?) > 0 as has from execution_entity e join execution_data d on d.executionId = e.id where e.workflowId = ? order by e.id',
			)
			.all(text, workflowId);
	} finally {
		db.close();
	}
}

/** Data of the executions of a workflow whose data holds `text`, oldest first. */
function executionData(workflowId, text) {
	const db = new DatabaseSync(path.join(userFolder, '.n8n', 'database.sqlite'), { readOnly: true });
	try {
		return db
			.prepare(
				'select e.id as id, d.data as data from execution_entity e join execution_data d on d.executionId = e.id where e.workflowId = ? and instr(d.data, ?) > 0 order by e.id',
			)
			.all(workflowId, text);
	} finally {
		db.close();
	}
}

async function post(url, body = {}) {
	const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
	const text = await res.text();
	let json;
	try {
		json = JSON.parse(text);
	} catch {
		json = undefined;
	}
	log(`POST ${url} -> ${res.status} ${redact(text).slice(0, 2000)}`);
	return { status: res.status, text, json };
}

/** Sets up n8n's owner account and returns the session cookie of the REST API. */
async function ownerSession(base) {
	const res = await fetch(`${base}/rest/owner/setup`, {
		method: 'POST',
		headers: { 'content-type': 'application/json' },
		body: JSON.stringify({ email: 'e2e@flowguard.test', firstName: 'Flow', lastName: 'Guard', password: `E2e-${runId}-pw1` }),
	});
	log(`POST ${base}/rest/owner/setup -> ${res.status}`);
	return (res.headers.get('set-cookie') ?? '').split(';')[0];
}

const reportOf = (res) => (Array.isArray(res.json) ? res.json[0] : res.json);
let compareBase = '';
/**
 * One execution of the comparison workflow (see compare-workflow.mjs) on the current server; it
 * starts once `parties` executions of run `tag` have started (the barrier `compare-<tag>`).
 */
async function compare(items, tag, parties = 1) {
	return await post(`${compareBase}/webhook/${COMPARE_PATH}`, { items: items.map((x) => ({ ...x, tag })), barrier: `compare-${tag}`, parties });
}
/** How many executions of the comparison worked on `id` in run `tag` on `side` (rd or ft). */
const worked = (side, id, tag) => executionsOf(COMPARE_ID, `"${side}:${id}:${tag}"`).filter((e) => e.has).length;
if (on('redis')) {
	// The nodes on the Sentinel-managed Redis: the credential's Redis Sentinel choice.
	const r = execute(LOOP + 'SN');
	const claimed = r.out('Claim project', 0) ?? [];
	const keys = sentinelSet.dataCli(sentinelSet.primaryPort(), '--scan', '--pattern', `${prefix}*`);
	check(
		'[redis sentinel] the project loop with a Redis Sentinel credential: 5 claimed, 3 completed, 2 failed, keys on the primary the sentinels name',
		r.ok && claimed.length === 5 && (r.out('Mark completed') ?? []).length === 3 && (r.out('Mark failed') ?? []).length === 2 &&
			keys.includes('weekly-projects'),
		redact(r.error?.message ?? r.all.slice(-600)) + ` keys: ${keys.slice(0, 200)}`,
	);
}

/** The Test buttons of the Redis credentials (the REST call of the credential dialog, `testCredential`). */
async function testRedisCredentials(testCredential) {
	const data = { host: redisHost, port: redisPort, user: redisUser, password: redisPassword, database: redisDb, ssl: false };
	const ok = await testCredential(REDIS_CRED, data);
	const bad = await testCredential(REDIS_CRED, { ...data, port: 1, password: 'e2e-wrong-password-5b1d' });
	check(
		"the flowguard Redis credential's Test button (POST /rest/credentials/test) runs flowguard's connection test",
		ok?.status === 'OK' && ok.message === 'Connection successful (flowguard)' && bad?.status === 'Error' &&
			!String(bad.message).includes('e2e-wrong-password-5b1d'),
		redact(JSON.stringify({ ok, bad })).slice(0, 400),
	);
	const sok = await testCredential(SENTINEL_CRED, sentinelData);
	const sbad = await testCredential(SENTINEL_CRED, { ...sentinelData, sentinelMasterName: 'nosuchmaster' });
	check(
		"[redis sentinel] the Test button of a Redis Sentinel credential: OK; an unknown master name: Error naming it, no password",
		sok?.status === 'OK' && sbad?.status === 'Error' && String(sbad.message).includes('nosuchmaster') &&
			!String(sbad.message).includes(SENTINEL_PASSWORD),
		redact(JSON.stringify({ sok, sbad })).slice(0, 400),
	);
}

/**
 * The Test button of the Flowguard Postgres credential: OK with the right password; with a wrong
 * one an ERR_BACKEND_AUTH failure with the server's refusal (28P01); neither password in the
 * answers nor in n8n's log.
 */
async function testPostgresCredential(testCredential) {
	const ok = await testCredential(PG_CRED, pgSide.data);
	const bad = await testCredential(PG_CRED, { ...pgSide.data, password: pgSide.wrongPassword });
	const answers = JSON.stringify({ ok, bad });
	const n8nLog = fs.readFileSync(path.join(userFolder, 'server.log'), 'utf8');
	check(
		"[postgres] the Flowguard Postgres credential's Test button (POST /rest/credentials/test): OK; a wrong password: ERR_BACKEND_AUTH (28P01); no password in the answers or n8n's log",
		ok?.status === 'OK' && ok.message === 'Connection successful (flowguard)' && bad?.status === 'Error' &&
			/^ERR_BACKEND_AUTH: PostgreSQL: the server refused the credentials \(28P01 password authentication failed/.test(bad.message) &&
			![pgSide.password, pgSide.wrongPassword].some((pw) => answers.includes(pw) || n8nLog.includes(pw)),
		redact(answers).slice(0, 400),
	);
}

// ---------------------------------------------------------------- the flowguard server backend (server-backend.mjs)
const serverChecks = on('server')
	? await serverSuite({
			check, execute, n8n, post, freePort, sleep, log, workDir, byName, executionsOf, executionData, redact, barrier,
			addSecret: (s) => secrets.push(s),
		})
	: { cli: async () => {}, webhooks: async () => {}, queue: undefined, stop: async () => {} };
await serverChecks.cli();

await withServer(async (base) => {
	compareBase = base;
	{
		// The Test button of a credential: the REST call the credential dialog makes.
		const cookie = await ownerSession(base);
		const testCredential = async (cred, data) => {
			const res = await fetch(`${base}/rest/credentials/test`, {
				method: 'POST',
				headers: { 'content-type': 'application/json', cookie },
				body: JSON.stringify({ credentials: { id: cred.id, name: cred.name, type: cred.type, data } }),
			});
			const text = await res.text();
			log(`POST ${base}/rest/credentials/test (${cred.type}) -> ${res.status} ${redact(text).slice(0, 500)}`);
			try {
				return JSON.parse(text).data;
			} catch {
				return { status: res.status, text };
			}
		};
		if (on('redis')) await testRedisCredentials(testCredential);
		if (on('postgres')) await testPostgresCredential(testCredential);
		await serverChecks.webhooks(base, testCredential);
	}
	for (const [backend, sfx] of onBackends(WEBHOOK_BACKENDS)) {
		// Two overlapping runs: the second is sent once the first holds the lock (at its gate),
		// and the first goes on once the second has been answered.
		barrier.shut(jobGate(sfx));
		const first = post(`${base}/webhook/flowguard-locked-job${sfx}`);
		const reached = await barrier.atGate(jobGate(sfx));
		const held = stores[backend]?.lockHeld('locked-job');
		const second = await post(`${base}/webhook/flowguard-locked-job${sfx}`);
		barrier.open(jobGate(sfx));
		const a = await first;
		check(
			`[${backend}] overlapping runs: the first run completes and releases its lock`,
			reached && a.status === 200 && /"released":\s*true/.test(a.text),
			`reached the gate: ${reached} | ${a.status} ${a.text.slice(0, 300)}`,
		);
		const execs = executionsOf(JOB + { embedded: '', redis: 'R', postgres: 'PG' }[backend], 'Already Executing');
		check(
			`[${backend}] overlapping runs: the second run fails with "Already Executing" (HTTP 500; the error read from n8n's execution record)`,
			second.status === 500 && execs.filter((e) => e.status === 'error' && e.has).length === 1 && execs.filter((e) => e.status === 'success').length === 1,
			`${second.status} ${second.text.slice(0, 300)} executions: ${JSON.stringify(execs)}`,
		);
		const third = await post(`${base}/webhook/flowguard-locked-job${sfx}`);
		check(`[${backend}] after the first run released it, a new run takes the lock`, third.status === 200 && /"released":\s*true/.test(third.text), `${third.status} ${third.text.slice(0, 200)}`);
		if (held) {
			check(`[${backend}] while the first run held it, the lock was held in ${held.where} (${stores[backend].tool})`, held.ok, held.detail);
		}

		// Locked output: the overlapping run is routed, not failed (the first holds the lock at its gate).
		barrier.shut(jobGate(`-route${sfx}`));
		const f = post(`${base}/webhook/flowguard-locked-job-route${sfx}`);
		const routeReached = await barrier.atGate(jobGate(`-route${sfx}`));
		const s = await post(`${base}/webhook/flowguard-locked-job-route${sfx}`);
		barrier.open(jobGate(`-route${sfx}`));
		const fr = await f;
		check(
			`[${backend}] "When Locked: Route to Locked Output": the overlapping run takes the Locked output with the holder and time left`,
			routeReached && s.status === 200 && /"skipped":\s*true/.test(s.text) && /execution/.test(s.text) && fr.status === 200 && /"released":\s*true/.test(fr.text),
			`${s.status} ${s.text.slice(0, 300)} | first: ${fr.status} ${fr.text.slice(0, 200)}`,
		);
	}

	// Dedup Queue, embedded (its state lives in this n8n process): the producer and consumer examples via their webhooks.
	if (on('embedded')) {
		const sizeOf = (res) => (Array.isArray(res.json) ? res.json[0] : res.json);
		const p1 = await post(`${base}/webhook/flowguard-products-edited`);
		const p2 = await post(`${base}/webhook/flowguard-products-edited`, { productIds: ['product-id-4', 'product-id-5', 'product-id-5'] });
		check(
			'[embedded] products-edited webhook: the 6 sample edits leave 4 waiting; a second call adds only product-id-5 (5 waiting)',
			p1.status === 200 && sizeOf(p1)?.waiting === 4 && p2.status === 200 && sizeOf(p2)?.waiting === 5 && sizeOf(p2)?.claimed === 0,
			`${p1.status} ${p1.text.slice(0, 200)} | ${p2.status} ${p2.text.slice(0, 200)}`,
		);
		const t0 = Date.now();
		const s1 = await post(`${base}/webhook/flowguard-product-sync`);
		const took = Date.now() - t0;
		check(
			`[embedded] product-sync webhook: the batch of 5 is read, synced 0.5 s apart (${(took / 1000).toFixed(1)} s) and acked; Size 0 waiting, 0 claimed`,
			s1.status === 200 && sizeOf(s1)?.waiting === 0 && sizeOf(s1)?.claimed === 0 && took >= 2000,
			`${s1.status} ${s1.text.slice(0, 300)}`,
		);
		const s2 = await post(`${base}/webhook/flowguard-product-sync`);
		const runs = executionsOf(QSYNC, 'Ack synced products');
		check(
			'[embedded] a sync with nothing due: Read Batch outputs no item, the flow ends there without error (no Ack)',
			s2.status === 200 && runs.length === 2 && runs.every((x) => x.status === 'success') && runs[0].has && !runs[1].has,
			`${s2.status} ${s2.text.slice(0, 200)} executions: ${JSON.stringify(runs)}`,
		);
	}

	// Rate Limit: the paced consumer (example 13), two executions at once, calling a local HTTP server
	// that logs when each call arrives. The limiter books slots 500 ms apart (exact, on the store's
	// clock); between a slot and the HTTP call n8n runs the next node, so the arrival times are
	// checked with a stated tolerance of 150 ms: consecutive calls at least 350 ms apart, and any
	// 3 calls in a row at least 850 ms apart (no second holds more than 2).
	for (const [backend, sfx] of onBackends(WEBHOOK_BACKENDS)) {
		const arrivals = [];
		const api = (await import('node:http')).createServer((req, res) => {
			arrivals.push({ t: performance.now(), path: req.url });
			res.setHeader('content-type', 'application/json');
			res.end(JSON.stringify({ ok: true, path: req.url }));
		});
		await new Promise((r) => api.listen(0, '127.0.0.1', r));
		const apiUrl = `http://127.0.0.1:${api.address().port}`;
		try {
			const [a, b] = await Promise.all([
				post(`${base}/webhook/flowguard-paced-sync${sfx}`, { productIds: ['p-a1', 'p-a2', 'p-a3'], apiUrl }),
				post(`${base}/webhook/flowguard-paced-sync${sfx}`, { productIds: ['p-b1', 'p-b2', 'p-b3'], apiUrl }),
			]);
			const times = arrivals.map((x) => x.t).sort((x, y) => x - y);
			const gaps = times.slice(1).map((t, i) => t - times[i]);
			const spans3 = times.slice(2).map((t, i) => t - times[i]);
			const acked = (r) => (Array.isArray(r.json) ? r.json : []).filter((j) => j.dedupQueue?.acked === true || j.acked === true).length;
			check(
				`[${backend}] Rate Limit 2/s across two executions of the paced sync: 6 HTTP calls, closest ${Math.round(Math.min(...gaps))} ms apart, any 3 in a row at least ${Math.round(Math.min(...spans3))} ms apart (>= 350 / 850 ms)`,
				a.status === 200 && b.status === 200 && arrivals.length === 6 && new Set(arrivals.map((x) => x.path)).size === 6 &&
					gaps.every((g) => g >= 350) && spans3.every((s) => s >= 850),
				`${a.status} ${a.text.slice(0, 300)} | ${b.status} ${b.text.slice(0, 300)} | arrivals ${JSON.stringify(arrivals.map((x) => [Math.round(x.t - times[0]), x.path]))} acked ${acked(a)}+${acked(b)}`,
			);
		} finally {
			api.close();
		}
	}

	// Back Off (example 14): a local upstream answers each id's first call 429 with Retry-After: 2
	// and its second 200. The flow's Back Off node pauses the shared limiter until 2 s after the
	// 429 it saw, so no second call may arrive before the first 429 + 2000 ms (the pause starts
	// when Back Off runs, after the 429 was answered), and the flow ends with every id done, not
	// failed.
	for (const [backend, sfx] of onBackends(WEBHOOK_BACKENDS)) {
		const arrivals = [];
		const api = (await import('node:http')).createServer((req, res) => {
			const q = new URL(req.url, 'http://x').searchParams;
			const first = q.get('attempt') === '0';
			arrivals.push({ t: performance.now(), id: q.get('id'), attempt: q.get('attempt'), code: first ? 429 : 200 });
			res.statusCode = first ? 429 : 200;
			if (first) res.setHeader('retry-after', '2');
			res.setHeader('content-type', 'application/json');
			res.end(JSON.stringify({ id: q.get('id'), attempt: q.get('attempt') }));
		});
		await new Promise((r) => api.listen(0, '127.0.0.1', r));
		const apiUrl = `http://127.0.0.1:${api.address().port}`;
		try {
			const ids = [`bo-${sfx || 'e'}-1`, `bo-${sfx || 'e'}-2`];
			const t0 = performance.now();
			const r = await post(`${base}/webhook/flowguard-back-off${sfx}`, { ids, apiUrl });
			const tooMany = arrivals.filter((x) => x.code === 429);
			const retried = arrivals.filter((x) => x.code === 200);
			const first429 = Math.min(...tooMany.map((x) => x.t));
			const earliestRetry = Math.min(...retried.map((x) => x.t));
			const done = Array.isArray(r.json) ? r.json : [];
			check(
				`[${backend}] Back Off on 429 (example 14): both ids called twice, the retries ${Math.round(earliestRetry - first429)} ms after the first 429 (>= 2000, Retry-After: 2), the flow ends with both done in ${Math.round(performance.now() - t0)} ms, not failed`,
				r.status === 200 && tooMany.length === 2 && retried.length === 2 &&
					new Set(retried.map((x) => x.id)).size === 2 && ids.every((id) => retried.some((x) => x.id === id)) &&
					earliestRetry - first429 >= 2000 && done.length === 2 && done.every((j) => j.statusCode === 200),
				`${r.status} ${r.text.slice(0, 300)} | arrivals ${JSON.stringify(arrivals.map((x) => [Math.round(x.t - t0), x.id, x.attempt, x.code]))}`,
			);
		} finally {
			api.close();
		}
	}

	// The rest runs on Embedded.
	if (!on('embedded')) return;
	// The weekly loop on the Embedded file, run 1 before n8n restarts (run 2 after it, below).
	const l1 = await post(`${base}/webhook/flowguard-project-loop`);
	const c1 = reportOf(await post(`${base}/webhook/flowguard-project-report`))?.counts;
	check(
		'[embedded, n8n start] run 1 of the loop leaves 3 completed and 2 failed',
		l1.status === 200 && c1?.completed === 3 && c1?.failed === 2,
		`${l1.status} ${JSON.stringify(c1)}`,
	);

	// Comparison with Remove Duplicates: run 1, item b fails (its work failed).
	const r1 = await compare([{ id: 'a' }, { id: 'b', fail: true }, { id: 'c' }], 'run1');
	check(
		'[compare] run 1: Remove Duplicates and the Item Tracker both let a, b and c through to the work (b fails)',
		r1.status === 200 && ['a', 'b', 'c'].every((x) => worked('rd', x, 'run1') === 1 && worked('ft', x, 'run1') === 1),
		`${r1.status} ${r1.text.slice(0, 300)}`,
	);
	// The webhook answers with the last node's items: Mark completed, with Options → Keep Forever.
	check(
		'[compare] run 1: Mark completed with Keep Forever: a and c completed with no expiry (no expiresAt)',
		Array.isArray(r1.json) && r1.json.map((j) => j.itemTracker?.id).join(',') === 'a,c' &&
			r1.json.every((j) => j.itemTracker.item.status === 'completed' && !('expiresAt' in j.itemTracker.item)),
		r1.text.slice(0, 400),
	);
	// Race: 3 items, each sent by two executions, all six held at a barrier until all have started.
	// Whether Remove Duplicates lets both executions of an item through depends on where inside
	// that node each one is (its check and its record are one node's step): it is reported, not
	// asserted. The Item Tracker's claim lets exactly one work on each item, whatever the timing.
	const race = await Promise.all(['r1', 'r1', 'r2', 'r2', 'r3', 'r3'].map((x) => compare([{ id: x }], 'race', 6)));
	const met = barrier.state('barrier', 'compare-race');
	const rdTwice = ['r1', 'r2', 'r3'].filter((x) => worked('rd', x, 'race') === 2);
	const ftCounts = ['r1', 'r2', 'r3'].map((x) => worked('ft', x, 'race'));
	check(
		`[compare, race] two executions at once per item (six held at a barrier until all started): the Item Tracker lets exactly one work on each item (${ftCounts.join(',')}); Remove Duplicates let both work on ${rdTwice.length} of 3 items`,
		race.every((x) => x.status === 200) && met.arrived.length === 6 && met.timedOut === 0 && ftCounts.join(',') === '1,1,1',
		JSON.stringify({ statuses: race.map((x) => x.status), barrier: met, rdTwice, ftCounts }),
	);
});

// Stop and start n8n: the Embedded state is in the file, n8n's own (Remove Duplicates) in its database.
if (on('embedded')) await withServer(async (base) => {
	compareBase = base;
	const l2 = await post(`${base}/webhook/flowguard-project-loop`);
	const rep = reportOf(await post(`${base}/webhook/flowguard-project-report`));
	const attempts = Object.fromEntries((rep?.items ?? []).map((i) => [i.id, i.attempts]).sort());
	check(
		'[embedded, n8n restarted] run 2 of the loop processes only the 2 failed projects: 5 completed, 0 failed; attempts 2 for those, 1 for the rest',
		l2.status === 200 && rep?.counts?.completed === 5 && rep.counts.failed === 0 &&
			JSON.stringify(attempts) === JSON.stringify({ acme: 1, globex: 2, hooli: 1, initech: 1, umbrella: 2 }),
		`${l2.status} ${JSON.stringify(rep).slice(0, 400)}`,
	);
	const r2 = await compare([{ id: 'a' }, { id: 'b' }, { id: 'c' }], 'run2');
	check(
		'[compare, restart] after the restart both skip a and c, done in run 1 (Remove Duplicates and the Item Tracker alike)',
		r2.status === 200 && ['a', 'c'].every((x) => worked('rd', x, 'run2') === 0 && worked('ft', x, 'run2') === 0),
		`${r2.status} ${r2.text.slice(0, 300)}`,
	);
	check(
		'[compare, retry] b, whose work failed in run 1, is worked on again by the Item Tracker; Remove Duplicates drops it (it recorded b as seen although the work failed)',
		worked('ft', 'b', 'run2') === 1 && worked('rd', 'b', 'run2') === 0,
		JSON.stringify({ ft: worked('ft', 'b', 'run2'), rd: worked('rd', 'b', 'run2') }),
	);
});

// ---------------------------------------------------------------- queue mode (queue-mode.mjs), nodes on the flowguard server
if (serverChecks.queue) {
	await queueModeSuite({ check, post, freePort, sleep, log, userFolder, n8nBin, executionsOf, redisUrl, prefix }, serverChecks.queue);
}

// ---------------------------------------------------------------- clean-up and summary
await serverChecks.stop();
await barrier.close();
await sentinelSet.stop();
if (pgSide) {
	// Every n8n server of the suite has stopped: its whole log.
	const n8nLog = fs.readFileSync(path.join(userFolder, 'server.log'), 'utf8');
	check(
		"[postgres] neither Postgres password (the credential's, the wrong one) appears in n8n's server log",
		n8nLog.length > 0 && !n8nLog.includes(pgSide.password) && !n8nLog.includes(pgSide.wrongPassword),
	);
	pgSide.stop();
}
try {
	const keys = redisKeys(`${prefix}*`);
	for (let i = 0; i < keys.length; i += 200) redisCli('DEL', ...keys.slice(i, i + 200));
} catch (e) {
	console.log(`  (could not delete the test keys: ${redact(e.message)})`);
}
const total = durations.reduce((a, b) => a + b, 0);
console.log(
	`n8n-e2e: ${durations.length} n8n executions, ${(total / 1000).toFixed(1)} s in total (${(total / durations.length / 1000).toFixed(1)} s each); log: ${logFile}`,
);
console.log(`n8n-e2e: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
