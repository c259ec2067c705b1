// The flowguard server half of the n8n end-to-end suite (run by run-e2e.mjs, with its helpers):
// a flowguard-server (the cargo-built binary, FG_SERVER_BIN) started here on a random port with a
// token and a store file; the HTTP Request-only examples (11, 12) against it, and the community
// nodes on their "flowguard server" backend (Item Tracker loop, Concurrency Lock overlap, the
// credential's Test, an unreachable server, the native addon never loaded on that backend).

import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { withBarrierAfter, withGate } from './barrier.mjs';

const HTTP_LOOP = 'fgExHttpLoop00001';
const HTTP_LOCK = 'fgExHttpLock00001';
const LOOP = 'fgExLoop000000001';
const JOB = 'fgExLockedJob0001';
const QENQ = 'fgExQueueEnqueue1';
const QSYNC = 'fgExQueueSync0001';

export const SERVER_CRED = { id: 'fgE2eServerCred1', name: 'flowguard e2e server', type: 'flowguardServerApi' };
const HEADER_CRED = { id: 'fgServerHeaderAuth1', name: 'flowguard server token (Header Auth)', type: 'httpHeaderAuth' };
const DOWN_CRED = { id: 'fgE2eServerDown1', name: 'flowguard e2e server (nothing listening)', type: 'flowguardServerApi' };

/**
 * Starts flowguard-server on a free port with a token and a store file in `dir`; resolves once
 * /readyz answers. `stop()` sends SIGTERM and waits for the exit.
 */
export async function startServer({ bin, dir, port, token, log }) {
	const logFile = path.join(dir, 'flowguard-server.log');
	const out = fs.openSync(logFile, 'a');
	const child = spawn(bin, ['--listen', `127.0.0.1:${port}`, '--path', path.join(dir, 'flowguard-server.db'), '--log-format', 'text'], {
		env: { ...process.env, FLOWGUARD_TOKEN: token },
		stdio: ['ignore', out, out],
	});
	const url = `http://127.0.0.1:${port}`;
	const t0 = Date.now();
	while (Date.now() - t0 < 30000 && child.exitCode === null) {
		try {
			if ((await fetch(`${url}/readyz`)).ok) break;
		} catch {
			// not listening yet
		}
		await new Promise((r) => setTimeout(r, 100));
	}
	log(`flowguard-server on ${url} (exit code ${child.exitCode}), log ${logFile}`);
	return {
		url,
		child,
		async stop() {
			if (child.exitCode !== null) return;
			child.kill('SIGTERM');
			await new Promise((r) => child.once('exit', r));
		},
	};
}

/**
 * Starts dropping-proxy.mjs (its own process: the suite blocks while n8n runs) in front of
 * `target`: it loses the answer of the first call to `dropPath` after the server applied it, so
 * n8n's Retry On Fail sends the call again.
 */
async function droppingProxy(target, dropPath, port) {
	const here = path.dirname(fileURLToPath(import.meta.url));
	const child = spawn(process.execPath, [path.join(here, 'dropping-proxy.mjs'), String(port), target, dropPath], { stdio: ['ignore', 'pipe', 'inherit'] });
	await new Promise((resolve) => child.stdout.once('data', resolve));
	const url = `http://127.0.0.1:${port}`;
	return {
		url,
		child,
		seen: async () => (await (await fetch(`${url}/__proxy/seen`)).json()),
		close: async () => {
			if (child.exitCode !== null) return;
			child.kill('SIGTERM');
			await new Promise((r) => child.once('exit', r));
		},
	};
}

/** A copy of an HTTP Request-only example whose Settings node points at `serverUrl` (and other settings). */
function httpVariant(wf, suffix, settings) {
	const w = structuredClone(wf);
	w.id = wf.id + suffix;
	w.name = `${wf.name} [${suffix}]`;
	for (const n of w.nodes) {
		if (n.name === 'Settings') {
			n.parameters.jsonOutput = JSON.stringify({ ...JSON.parse(n.parameters.jsonOutput), ...settings }, null, 2);
		}
		if (n.type === 'n8n-nodes-base.webhook') {
			n.parameters.path += `-${suffix.toLowerCase()}`;
			n.webhookId = randomUUID();
		} else if (n.webhookId) n.webhookId = randomUUID();
	}
	return w;
}

/** A copy of a node example with every flowguard node on the flowguard server backend. */
function serverVariant(wf, suffix, cred = SERVER_CRED) {
	const w = structuredClone(wf);
	w.id = wf.id + suffix;
	w.name = `${wf.name} [${suffix}]`;
	for (const n of w.nodes) {
		if (n.type.startsWith('n8n-nodes-flowguard.')) {
			n.parameters.backend = 'server';
			const { keyPrefix: _unused, ...options } = n.parameters.options ?? {};
			n.parameters.options = options;
			n.credentials = { flowguardServerApi: { id: cred.id, name: cred.name } };
		}
		if (n.type === 'n8n-nodes-base.webhook') {
			n.parameters.path += `-${suffix.toLowerCase()}`;
			n.webhookId = randomUUID();
		} else if (n.webhookId) n.webhookId = randomUUID();
		// The product sync's schedule must not fire while the suite runs.
		if (n.type === 'n8n-nodes-base.scheduleTrigger') n.disabled = true;
	}
	return w;
}

const QUEUE_GROUP = 'weekly-projects-queue';
const LOOP_BARRIER = 'weekly-loop-sq';

/** The workflow with every Item Tracker node on `group`. */
function withGroup(w, group) {
	for (const n of w.nodes) if (n.type === 'n8n-nodes-flowguard.itemTracker') n.parameters.group = group;
	return w;
}

/** The gates of the locked jobs: each holds its lock at its gate until the check opens it. */
const GATES = { httpJob: 'http-locked-job-t', jobSv: 'locked-job-sv', jobSq: 'locked-job-sq' };
const WORK = 'Work for 3 seconds';

/**
 * Sets up the server, its credentials and the workflows; returns the checks to run before n8n
 * starts as a server (`cli`) and those that need it (`webhooks`, given its base URL).
 */
export async function serverSuite(h) {
	const { check, execute, n8n, post, freePort, sleep, log, workDir, byName, executionsOf, redact, barrier } = h;
	const bin = process.env.FG_SERVER_BIN;
	if (!bin || !fs.existsSync(bin)) {
		check('flowguard-server binary is built (FG_SERVER_BIN)', false, `FG_SERVER_BIN=${bin}`);
		return { cli: async () => {}, webhooks: async () => {}, queue: undefined, stop: async () => {} };
	}
	const token = randomBytes(24).toString('hex');
	const dir = path.join(workDir, 'flowguard-server');
	fs.mkdirSync(dir, { recursive: true });
	const serverPort = await freePort();
	let server = await startServer({ bin, dir, port: serverPort, token, log });
	h.addSecret(token);
	const proxy = await droppingProxy(server.url, '/v1/tracker/complete', await freePort());
	// Neither outlives the suite, even when it stops early.
	process.on('exit', () => {
		server.child.kill('SIGKILL');
		proxy.child.kill('SIGKILL');
	});
	const downPort = await freePort();

	// Credentials: the nodes' flowguard Server credential (and one pointing at nothing); the
	// examples' Header Auth credential, as a user makes it for the HTTP Request node.
	const credFile = path.join(workDir, 'server-credentials.json');
	fs.writeFileSync(
		credFile,
		JSON.stringify([
			{ ...SERVER_CRED, data: { url: server.url, token } },
			{ ...DOWN_CRED, data: { url: `http://127.0.0.1:${downPort}`, token } },
			{ ...HEADER_CRED, data: { name: 'Authorization', value: `Bearer ${token}` } },
		]),
	);
	const c = n8n(['import:credentials', `--input=${credFile}`]);
	fs.rmSync(credFile);
	check('import the flowguard Server and Header Auth credentials', c.rc === 0, redact(c.stderr).slice(-400));

	const wfs = [
		httpVariant(byName[HTTP_LOOP], 'T', { serverUrl: server.url }),
		httpVariant(byName[HTTP_LOOP], 'P', { serverUrl: proxy.url, group: 'weekly-projects-http-retry' }),
		withGate(httpVariant(byName[HTTP_LOCK], 'T', { serverUrl: server.url }), WORK, barrier.url, GATES.httpJob),
		httpVariant(byName[HTTP_LOCK], 'X', { serverUrl: server.url, lockName: '' }),
		serverVariant(byName[LOOP], 'SV'),
		serverVariant(byName[LOOP], 'SD', DOWN_CRED),
		withGate(serverVariant(byName[JOB], 'SV'), WORK, barrier.url, GATES.jobSv),
		serverVariant(byName[QENQ], 'SV'),
		serverVariant(byName[QSYNC], 'SV'),
		// For the queue-mode part (queue-mode.mjs): the loop on a group of its own, each run waiting
		// after its claims at a barrier until both runs have claimed; a job that holds the lock at
		// its gate until the check opens it.
		withBarrierAfter(withGroup(serverVariant(byName[LOOP], 'SQ'), QUEUE_GROUP), 'Claim project', barrier.url, 'barrier', LOOP_BARRIER),
		withGate(serverVariant(byName[JOB], 'SQ'), WORK, barrier.url, GATES.jobSq),
	];
	const wfDir = path.join(workDir, 'server-workflows');
	fs.mkdirSync(wfDir, { recursive: true });
	for (const w of wfs) fs.writeFileSync(path.join(wfDir, `${w.id}.json`), JSON.stringify(w, null, 1));
	const w = n8n(['import:workflow', '--separate', `--input=${wfDir}`]);
	check(`import ${wfs.length} workflows on the flowguard server (HTTP Request examples, nodes on the server backend)`, w.rc === 0, redact(w.stderr).slice(-400));
	for (const id of [HTTP_LOCK + 'T', JOB + 'SV', LOOP + 'SQ', JOB + 'SQ']) {
		const p = n8n(['publish:workflow', `--id=${id}`]);
		if (p.rc !== 0) check(`publish workflow ${id}`, false, redact(p.stderr).slice(-400));
	}

	const api = async (route, body) => {
		const res = await fetch(`${server.url}${route}`, {
			method: 'POST',
			headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
			body: JSON.stringify(body),
		});
		return { status: res.status, json: await res.json() };
	};
	/** Waits (up to 20 s) until the server says the lock is held: the first run took it. */
	const lockHeld = async (name) => {
		let r;
		for (let t0 = Date.now(); Date.now() - t0 < 20000; await sleep(100)) {
			r = await api('/v1/lock/get', { name });
			if (r.json?.locked) break;
		}
		return r;
	};
	const ids = (items) => (items ?? []).map((j) => j.body?.id ?? j.project ?? j.id ?? j.itemTracker?.id).sort().join(',');

	async function cli() {
		// ------------------------------------------------ HTTP Request only: the weekly loop
		const r1 = execute(HTTP_LOOP + 'T');
		const claimed = r1.out('Claim project') ?? [];
		check(
			'[server, HTTP Request only] loop run 1: 5 claims answered 200 with an owner token, routed to the claimed branch',
			r1.ok && claimed.length === 5 && claimed.every((j) => j.statusCode === 200 && j.body.claimed === true && /^[0-9a-f]{16,}$/.test(j.body.owner)) &&
				(r1.out('Claimed (200)?', 0) ?? []).length === 5,
			redact(JSON.stringify(r1.error?.message ?? claimed.map((j) => [j.statusCode, j.body?.code])) ?? r1.all.slice(-500)).slice(0, 500),
		);
		const failedItems = r1.out('Mark failed') ?? [];
		const completed = r1.out('Mark completed') ?? [];
		check(
			'[server, HTTP Request only] loop run 1: 2 projects failed with their reason (fail with the owner), 3 completed (complete with the owner)',
			ids(failedItems) === 'globex,umbrella' && failedItems.every((j) => j.status === 'failed' && /Simulated failure of .* on attempt 1/.test(j.lastError)) &&
				ids(completed) === 'acme,hooli,initech' && completed.every((j) => j.status === 'completed' && j.attempts === 1),
			JSON.stringify({ failedItems, completed }).slice(0, 500),
		);
		const r2 = execute(HTTP_LOOP + 'T');
		const again = r2.out('Claimed (200)?', 0) ?? [];
		const busy = r2.out('Already done or running') ?? [];
		check(
			'[server, HTTP Request only] loop run 2: only the 2 failed projects are claimed (attempt 2); the 3 completed answer 409 ERR_ITEM_BUSY (reason completed), routed to "Already done or running"',
			r2.ok && ids(again) === 'globex,umbrella' && again.every((j) => j.body.item.attempts === 2) &&
				ids(busy) === 'acme,hooli,initech' && busy.every((j) => j.statusCode === 409 && j.body.code === 'ERR_ITEM_BUSY' && j.body.reason === 'completed') &&
				(r2.out('Mark completed') ?? []).length === 2 && !r2.ran('Mark failed'),
			JSON.stringify({ again: again.map((j) => j.body?.id), busy: busy.map((j) => [j.statusCode, j.body?.code]), err: r2.error?.message }).slice(0, 500),
		);

		// Retry On Fail: the answer of the first complete is lost after the server applied it. n8n
		// retries the node, which sends the complete of every item again: each is answered 200 with
		// the same state.
		const rp = execute(HTTP_LOOP + 'P');
		const seen = await proxy.seen();
		const completes = seen.seen.filter((x) => x.path === '/v1/tracker/complete').map((x) => JSON.parse(x.body));
		const sentTwice = ['acme', 'hooli', 'initech'].every(
			(id) => completes.filter((x) => x.id === id).length === 2 && new Set(completes.filter((x) => x.id === id).map((x) => x.owner)).size === 1,
		);
		const done = rp.out('Mark completed') ?? [];
		const state = await api('/v1/tracker/getItems', { group: 'weekly-projects-http-retry', ids: ['acme', 'hooli', 'initech'] });
		check(
			'[server, HTTP Request only] Retry On Fail: the first complete\'s answer is lost after the server applied it; n8n resends the node\'s 3 completes, each answered 200 with the same state (completed, attempt 1)',
			rp.ok && seen.dropped === 1 && completes.length === 6 && sentTwice &&
				done.length === 3 && done.every((x) => x.status === 'completed' && x.attempts === 1) && state.status === 200 &&
				state.json.every((x) => x.status === 'completed' && x.attempts === 1),
			redact(JSON.stringify({ err: rp.error?.message, dropped: seen.dropped, completes: completes.map((x) => x.id), done, state: state.json })).slice(0, 600),
		);

		// A 400 with a coded body is routed to the error branch, which stops the run with the server's code and message.
		const x = execute(HTTP_LOCK + 'X');
		check(
			'[server, HTTP Request only] a bad argument (empty lock name) answers 400 {code, message, field}, routed to the error branch that stops the run with them',
			!x.ok && /flowguard server: ERR_INVALID_ARGUMENT: name .*\(HTTP 400\)/.test(x.all) && !x.ran('Work for 3 seconds'),
			redact(x.all.slice(-500)),
		);

		// ------------------------------------------------ the nodes on the flowguard server backend
		// NAPI_RS_NATIVE_LIBRARY_PATH at a missing file makes flowguard's native binary unloadable:
		// the server backend never loads it, so the loop still runs.
		const noAddon = { NAPI_RS_NATIVE_LIBRARY_PATH: path.join(workDir, 'no-such-flowguard.node') };
		const n1 = execute(LOOP + 'SV', noAddon);
		const nc = n1.out('Claim project', 0) ?? [];
		check(
			'[server backend] Item Tracker loop run 1 with the native addon unloadable: 5 claimed, 3 completed (owner checked), 2 failed',
			n1.ok && nc.length === 5 && nc.every((j) => j.itemTracker.claimed === true && /^[0-9a-f]{16,}$/.test(j.itemTracker.owner)) &&
				(n1.out('Claim project', 1) ?? []).length === 0 &&
				(n1.out('Mark completed') ?? []).every((j) => j.itemTracker.ownerChecked === true && j.itemTracker.item.status === 'completed') &&
				(n1.out('Mark completed') ?? []).length === 3 && ids(n1.out('Mark failed')) === 'globex,umbrella',
			redact(n1.error?.message ?? n1.all.slice(-600)).slice(0, 600),
		);
		const control = execute(LOOP, noAddon);
		check(
			'[embedded, control] the same unloadable addon fails the Embedded loop with the platform error (so the run above did not load it)',
			!control.ok && /flowguard could not load its native binary/.test(control.all),
			redact(control.all.slice(-400)),
		);
		const n2 = execute(LOOP + 'SV');
		const c2 = n2.out('Claim project', 0) ?? [];
		const s2 = n2.out('Claim project', 1) ?? [];
		check(
			'[server backend] loop run 2: only the 2 failed projects claimed again (attempt 2); the 3 completed go to Skipped',
			n2.ok && ids(c2) === 'globex,umbrella' && c2.every((j) => j.itemTracker.item.attempts === 2) &&
				ids(s2) === 'acme,hooli,initech' && s2.every((j) => j.itemTracker.reason === 'completed'),
			JSON.stringify({ c2: c2.map((j) => j.id), s2: s2.map((j) => j.id), err: n2.error?.message }).slice(0, 400),
		);
		const st = await api('/v1/tracker/listItems', { group: 'weekly-projects' });
		check(
			'[server backend] the state is the server\'s: its listItems shows 5 completed in group weekly-projects',
			st.status === 200 && st.json.counts.completed === 5 && st.json.counts.total === 5,
			JSON.stringify(st.json?.counts),
		);
		// Dedup Queue: the product sync pair (one enqueue call, one read, one ack call).
		const e = execute(QENQ + 'SV');
		const enq = e.out('Enqueue product') ?? [];
		const size = e.out('Queue size')?.[0];
		check(
			'[server backend] Dedup Queue enqueue: 6 product IDs, 4 added and 2 duplicates, shards fnv1a(id) % 4; Size 4 waiting',
			e.ok && enq.map((j) => j.dedupQueue?.outcome).join(',') === 'added,added,duplicate,added,duplicate,added' &&
				enq.find((j) => j.productId === 'product-id-1')?.dedupQueue.shard === 0 && size?.waiting === 4 && size.due === 4,
			String(JSON.stringify(enq.map((j) => j.dedupQueue) ?? e.error?.message)).slice(0, 500),
		);
		const q = execute(QSYNC + 'SV');
		const read = q.out('Read a batch') ?? [];
		const acked = q.out('Ack synced products') ?? [];
		const after = q.out('Queue size')?.[0];
		check(
			'[server backend] Dedup Queue read, sync and ack: the 4 IDs read with one receipt, acked in one call; Size 0 waiting, 0 claimed',
			q.ok && read.length === 4 && /^[0-9a-f]{32}$/.test(read[0]?.owner ?? '') && read.every((j) => j.owner === read[0].owner) &&
				acked.length === 4 && acked.every((j) => j.dedupQueue?.ok === true) && after?.waiting === 0 && after.claimed === 0,
			String(JSON.stringify({ read, acked: acked.map((j) => j.dedupQueue), after, err: q.error?.message })).slice(0, 600),
		);
		const d = execute(LOOP + 'SD');
		check(
			'[server backend] an unreachable server fails the node with "Could not reach the flowguard server at <url>", no token in the output',
			!d.ok && new RegExp(`Could not reach the flowguard server at http://127\\.0\\.0\\.1:${downPort}`).test(d.all) && !d.all.includes(token),
			redact(d.all.slice(-500)),
		);
	}

	async function webhooks(base, testCredential) {
		const ok = await testCredential(SERVER_CRED, { url: server.url, token });
		const bad = await testCredential(SERVER_CRED, { url: server.url, token: 'wrong-token-0123456789' });
		const down = await testCredential(SERVER_CRED, { url: `http://127.0.0.1:${downPort}`, token });
		check(
			"[server backend] the flowguard Server credential's Test: OK; a wrong token: refused; nothing listening: not reachable",
			ok?.status === 'OK' && ok.message === 'Connection successful (flowguard server)' && bad?.status === 'Error' &&
				/refused the token/.test(bad.message) && down?.status === 'Error' && /Could not reach the flowguard server/.test(down.message) &&
				!JSON.stringify([ok, bad, down]).includes(token),
			redact(JSON.stringify({ ok, bad, down })).slice(0, 500),
		);
		for (const [what, wf, sfx, busyText, gate] of [
			['HTTP Request only', HTTP_LOCK + 'T', 'http-locked-job-t', 'Already Executing: the lock is held by', GATES.httpJob],
			['server backend', JOB + 'SV', 'locked-job-sv', 'Already Executing', GATES.jobSv],
		]) {
			// The first run holds the lock at its gate until the second has been refused.
			barrier.shut(gate);
			const first = post(`${base}/webhook/flowguard-${sfx}`);
			await barrier.atGate(gate);
			const held = await lockHeld(wf === JOB + 'SV' ? 'locked-job' : 'locked-job-http');
			const second = await post(`${base}/webhook/flowguard-${sfx}`);
			barrier.open(gate);
			const a = await first;
			const execs = executionsOf(wf, busyText);
			check(
				`[${what}] overlapping runs: the first takes the lock on the server and releases it; the second fails with "Already Executing"`,
				a.status === 200 && /"released":\s*true/.test(a.text) && held.json.locked === true && second.status === 500 &&
					execs.filter((e) => e.status === 'error' && e.has).length === 1 && execs.filter((e) => e.status === 'success').length === 1,
				`${a.status} ${a.text.slice(0, 200)} | ${second.status} ${second.text.slice(0, 200)} | held ${JSON.stringify(held.json)} | ${JSON.stringify(execs)}`,
			);
			if (what === 'HTTP Request only') {
				const data = h.executionData(wf, busyText).at(-1)?.data ?? '';
				check(
					'[HTTP Request only] the 409 is routed to "Already Executing" with the holder (workflow and execution) and the time left',
					/Already Executing: the lock is held by flowguard server: locked job \(HTTP Request only\) \[T\] \(execution \d+\) for another 60\d s/.test(data),
					data.slice(0, 300),
				);
			}
		}
	}

	return {
		cli,
		webhooks,
		/** What the queue-mode part uses: the server's API, a kill and a restart on the same port and store file. */
		queue: {
			api,
			lockHeld,
			barrier,
			GATES,
			LOOP_BARRIER,
			JOB_SV: JOB + 'SV',
			LOOP_SQ: LOOP + 'SQ',
			QUEUE_GROUP,
			async kill() {
				server.child.kill('SIGKILL');
				await new Promise((r) => (server.child.exitCode !== null || server.child.signalCode ? r() : server.child.once('exit', r)));
			},
			async restart() {
				server = await startServer({ bin, dir, port: serverPort, token, log });
			},
		},
		async stop() {
			await proxy.close();
			await server.stop();
		},
	};
}
