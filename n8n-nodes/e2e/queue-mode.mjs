// n8n in queue mode (run by run-e2e.mjs after its single-process checks): a main process and two
// workers (`n8n worker --concurrency=1`, so overlapping runs land on different workers), Redis only
// for n8n's own Bull queue, n8n's SQLite database shared by the three (n8n warns that scaling mode
// is not officially supported with SQLite; it works for this test). The nodes run on the flowguard
// server backend: overlapping locked jobs on two workers, the weekly loop on two workers at once,
// and the server killed and restarted in the middle of a run.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** Env of every n8n process of the queue: Bull on the test Redis, under the run's prefix. */
function queueEnv(redisUrl, prefix) {
	const r = new URL(redisUrl);
	return {
		EXECUTIONS_MODE: 'queue',
		QUEUE_BULL_REDIS_HOST: r.hostname || '127.0.0.1',
		QUEUE_BULL_REDIS_PORT: String(r.port || 6379),
		QUEUE_BULL_REDIS_DB: String(Number((r.pathname || '/0').slice(1) || 0)),
		...(r.username ? { QUEUE_BULL_REDIS_USERNAME: decodeURIComponent(r.username) } : {}),
		...(r.password ? { QUEUE_BULL_REDIS_PASSWORD: decodeURIComponent(r.password) } : {}),
		QUEUE_BULL_PREFIX: `${prefix}bull`,
	};
}

export async function queueModeSuite(h, fg) {
	const { check, post, freePort, sleep, log, userFolder, n8nBin, executionsOf, redisUrl, prefix } = h;
	const base = queueEnv(redisUrl, prefix);
	const procs = [];
	const start = async (name, args, extra) => {
		const logFile = path.join(userFolder, `queue-${name}.log`);
		const out = fs.openSync(logFile, 'a');
		const env = { ...process.env, ...base, N8N_RUNNERS_BROKER_PORT: String(await freePort()), ...extra };
		const child = spawn(process.execPath, [n8nBin, ...args], { env, stdio: ['ignore', out, out] });
		procs.push(child);
		return { child, text: () => fs.readFileSync(logFile, 'utf8') };
	};
	const port = await freePort();
	const url = `http://127.0.0.1:${port}`;
	const alive = (ps) => ps.every((p) => p.child.exitCode === null);
	/** Waits up to 180 s for `ready`, while the processes `ps` run. */
	const until = async (ps, ready) => {
		for (let t = Date.now(); Date.now() - t < 180000 && alive(ps); await sleep(500)) {
			try {
				if (await ready()) return true;
			} catch {
				// not listening yet
			}
		}
		return false;
	};
	// The main first (it migrates the database), then the workers: three processes opening the
	// SQLite file at once time out on its lock on a slow machine.
	const t0 = Date.now();
	const main = await start('main', ['start'], { N8N_PORT: String(port), N8N_LISTEN_ADDRESS: '127.0.0.1' });
	const mainUp = await until([main], async () => (await fetch(`${url}/healthz/readiness`)).ok && main.text().includes('Editor is now accessible'));
	const workers = mainUp
		? [await start('worker-a', ['worker', '--concurrency=1'], {}), await start('worker-b', ['worker', '--concurrency=1'], {})]
		: [];
	const up = mainUp && (await until([main, ...workers], async () => workers.every((w) => w.text().includes('n8n worker is now ready'))));
	check(`[queue mode] n8n main and two workers up (EXECUTIONS_MODE=queue, SQLite, Bull on Redis; ${((Date.now() - t0) / 1000).toFixed(1)} s)`, up);
	/** Which worker logged that it ran execution `id`. */
	const ranOn = (id) => workers.findIndex((w) => w.text().includes(`Worker started execution ${id} `));
	try {
		if (!up) return;
		// ------------------------------------------------ overlapping locked jobs on two workers
		{
			// The first run holds the lock at its gate (on its worker, busy: concurrency 1) until
			// the second, on the other worker, has been refused.
			fg.barrier.shut(fg.GATES.jobSv);
			const first = post(`${url}/webhook/flowguard-locked-job-sv`);
			await fg.barrier.atGate(fg.GATES.jobSv);
			await fg.lockHeld('locked-job');
			const second = await post(`${url}/webhook/flowguard-locked-job-sv`);
			fg.barrier.open(fg.GATES.jobSv);
			const a = await first;
			const execs = executionsOf(fg.JOB_SV, 'Already Executing').slice(-2);
			const where = execs.map((e) => ranOn(e.id));
			check(
				'[queue mode] overlapping runs on two workers: the first takes the server lock and releases it, the second fails with "Already Executing"',
				a.status === 200 && /"released":\s*true/.test(a.text) && second.status === 500 &&
					execs.length === 2 && execs.some((e) => e.status === 'error' && e.has) && execs.some((e) => e.status === 'success') &&
					where.includes(0) && where.includes(1),
				`${a.status} ${a.text.slice(0, 200)} | ${second.status} | ${JSON.stringify(execs)} on workers ${where.join(',')}`,
			);
		}
		// ------------------------------------------------ the weekly loop on both workers at once
		{
			// Each run waits after its claims at a barrier that opens only when both runs are there
			// (barrier.mjs): both have claimed before either completes or fails an item, so the
			// second run finds the first's claims in progress, never its failed items to re-claim.
			// Without the overlap the first run's barrier call times out and the run fails.
			const runs = await Promise.all([post(`${url}/webhook/flowguard-project-loop-sq`), post(`${url}/webhook/flowguard-project-loop-sq`)]);
			const met = fg.barrier.state('barrier', fg.LOOP_BARRIER);
			const execs = executionsOf(fg.LOOP_SQ, 'Claim project');
			const where = execs.map((e) => ranOn(e.id));
			const st = await fg.api('/v1/tracker/listItems', { group: fg.QUEUE_GROUP });
			const items = st.json?.items ?? [];
			check(
				'[queue mode] the weekly loop run twice at once on the two workers (both claimed before either settled: a barrier): each project claimed once (attempt 1 on the server), 3 completed and 2 failed',
				runs.every((r) => r.status === 200) && met.opened && met.arrived.length === 2 && met.timedOut === 0 &&
					where.includes(0) && where.includes(1) && st.status === 200 &&
					items.length === 5 && items.every((i) => i.attempts === 1) && st.json.counts.completed === 3 && st.json.counts.failed === 2,
				`${runs.map((r) => r.status).join(',')} on workers ${where.join(',')} | barrier ${JSON.stringify(met)} | ${JSON.stringify(st.json?.counts)} attempts ${items.map((i) => i.attempts).join(',')}`,
			);
		}
		// ------------------------------------------------ the server killed and restarted during a run
		{
			const before = await fg.api('/v1/tracker/listItems', { group: fg.QUEUE_GROUP });
			// The job takes the lock and holds it at its gate until the server is back.
			const job = post(`${url}/webhook/flowguard-locked-job-sq`);
			await fg.barrier.atGate(fg.GATES.jobSq);
			const held = await fg.lockHeld('locked-job');
			await fg.kill();
			const down = await post(`${url}/webhook/flowguard-project-loop-sq`);
			const failed = executionsOf(fg.LOOP_SQ, 'Could not reach the flowguard server');
			await fg.restart();
			fg.barrier.open(fg.GATES.jobSq);
			const j = await job;
			const after = await fg.api('/v1/tracker/listItems', { group: fg.QUEUE_GROUP });
			check(
				'[queue mode] while the server is down (killed), a run fails with "Could not reach the flowguard server at <url>"',
				held.json?.locked === true && down.status === 500 && failed.some((e) => e.status === 'error' && e.has),
				`held ${JSON.stringify(held.json)} | ${down.status} ${down.text.slice(0, 200)} | ${JSON.stringify(failed)}`,
			);
			check(
				'[queue mode] after the restart nothing acknowledged is lost: the lock taken before the kill is released by its run (released: true), the loop\'s items unchanged',
				j.status === 200 && /"released":\s*true/.test(j.text) && JSON.stringify(after.json?.counts) === JSON.stringify(before.json?.counts) &&
					JSON.stringify(after.json?.items) === JSON.stringify(before.json?.items),
				`${j.status} ${j.text.slice(0, 200)} | before ${JSON.stringify(before.json?.counts)} after ${JSON.stringify(after.json?.counts)}`,
			);
		}
	} finally {
		for (const p of procs) if (p.exitCode === null) p.kill('SIGTERM');
		await Promise.all(
			procs.map((p) =>
				p.exitCode !== null
					? undefined
					: Promise.race([new Promise((r) => p.once('exit', r)), sleep(20000).then(() => p.exitCode === null && p.kill('SIGKILL'))]),
			),
		);
		log(`queue mode: n8n logs in ${userFolder}/queue-*.log`);
	}
}
