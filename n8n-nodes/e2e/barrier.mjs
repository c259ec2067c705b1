// Barriers and gates for the e2e checks that need two n8n executions at once: a tiny HTTP server
// that n8n's HTTP Request node calls, and that answers only when the test's condition holds. A
// check that needs overlap makes it happen here; it never hopes for it with a sleep.
//
// - POST /barrier/<name>?parties=N&party=<id>: answered once N distinct parties (an execution
//   passes `{{ $execution.id }}`) have called it; every later call is answered at once.
// - POST /gate/<name>?party=<id>: answered once the test opens the gate (`open(name)`).
// Both answer with the JSON body they were sent (so that a node inserted into a workflow passes
// its items on unchanged), or after `timeoutMs` with 504 and what arrived: the execution then
// fails, and so does the check that needed the overlap.

import { randomUUID } from 'node:crypto';
import http from 'node:http';

export async function startBarrierServer({ timeoutMs = 90000 } = {}) {
	/** name -> { arrived: Set of parties, opened, parties (barriers), waiting: answer callbacks, timedOut } */
	const points = new Map();
	const point = (name) => {
		if (!points.has(name)) points.set(name, { arrived: new Set(), opened: false, parties: 0, waiting: [], timedOut: 0, arrivals: [] });
		return points.get(name);
	};
	const release = (p) => {
		p.opened = true;
		for (const answer of p.waiting.splice(0)) answer();
	};
	const server = http.createServer((req, res) => {
		const chunks = [];
		req.on('data', (c) => chunks.push(c));
		req.on('end', () => {
			const u = new URL(req.url, 'http://barrier');
			const [, kind, name] = u.pathname.split('/');
			if ((kind !== 'barrier' && kind !== 'gate') || !name) {
				res.statusCode = 404;
				res.end();
				return;
			}
			const p = point(`${kind}/${name}`);
			const party = u.searchParams.get('party') ?? '';
			p.arrived.add(party);
			p.arrivals.push({ party, at: Date.now() });
			if (kind === 'barrier') p.parties = Number(u.searchParams.get('parties') ?? 2);
			const body = Buffer.concat(chunks).toString('utf8') || '{}';
			let done = false;
			const answer = () => {
				if (done) return;
				done = true;
				clearTimeout(timer);
				res.setHeader('content-type', 'application/json');
				res.end(body);
			};
			const timer = setTimeout(() => {
				if (done) return;
				done = true;
				p.timedOut++;
				res.statusCode = 504;
				res.setHeader('content-type', 'application/json');
				res.end(JSON.stringify({ error: `${kind} ${name} not released in ${timeoutMs} ms`, arrived: [...p.arrived] }));
			}, timeoutMs);
			p.waiting.push(answer);
			if (p.opened || (kind === 'barrier' && p.arrived.size >= p.parties)) release(p);
		});
	});
	await new Promise((r) => server.listen(0, '127.0.0.1', r));
	const url = `http://127.0.0.1:${server.address().port}`;
	return {
		url,
		/** What reached barrier or gate `name` so far: the distinct parties, whether it opened, timeouts. */
		state(kind, name) {
			const p = point(`${kind}/${name}`);
			return { arrived: [...p.arrived], opened: p.opened, timedOut: p.timedOut, arrivals: p.arrivals.slice() };
		},
		/** Waits (up to `timeoutMs`) until `n` distinct parties are at gate `name`; resolves whether they are. */
		async atGate(name, n = 1) {
			const p = point(`gate/${name}`);
			for (const t0 = Date.now(); Date.now() - t0 < timeoutMs; await new Promise((r) => setTimeout(r, 50))) {
				if (p.arrived.size >= n) return true;
			}
			return false;
		},
		/** Opens gate `name`: its waiting calls are answered, and later ones at once. */
		open(name) {
			release(point(`gate/${name}`));
		},
		/** Closes gate `name` again and forgets who reached it (for the next round of a check). */
		shut(name) {
			points.delete(`gate/${name}`);
		},
		close: () =>
			new Promise((r) => {
				server.closeAllConnections?.();
				server.close(r);
			}),
	};
}

/**
 * An HTTP Request node that calls barrier `name` of `barrierUrl` (`kind` 'barrier' for `parties`
 * executions, or 'gate') with the item's JSON, and outputs the JSON it gets back: the item unchanged.
 */
export function barrierNode(nodeName, barrierUrl, kind, name, position, parties = 2) {
	const query = kind === 'barrier' ? `parties=${parties}&party={{ $execution.id }}` : 'party={{ $execution.id }}';
	return {
		id: randomUUID(),
		name: nodeName,
		type: 'n8n-nodes-base.httpRequest',
		typeVersion: 4.2,
		position,
		parameters: {
			method: 'POST',
			url: `=${barrierUrl}/${kind}/${name}?${query}`,
			sendBody: true,
			specifyBody: 'json',
			jsonBody: '={{ JSON.stringify($json) }}',
			options: { timeout: 300000 },
		},
	};
}

/** The workflow with node `nodeName` (a Wait, say) replaced by gate `name`, under the same name. */
export function withGate(w, nodeName, barrierUrl, name) {
	const i = w.nodes.findIndex((n) => n.name === nodeName);
	const old = w.nodes[i];
	w.nodes[i] = { ...barrierNode(nodeName, barrierUrl, 'gate', name, old.position), id: old.id };
	return w;
}

/**
 * The workflow with a barrier or gate node after each connected main output of node `after`:
 * every item leaving `after` waits there before it goes on (see `barrierNode`).
 */
export function withBarrierAfter(w, after, barrierUrl, kind, name, parties = 2) {
	const from = w.nodes.find((n) => n.name === after);
	const outs = w.connections[after]?.main ?? [];
	outs.forEach((targets, i) => {
		if (!targets?.length) return;
		const nodeName = `${kind === 'barrier' ? 'Barrier' : 'Gate'}: ${name} (${after}, output ${i})`;
		w.nodes.push(barrierNode(nodeName, barrierUrl, kind, name, [from.position[0] + 110, from.position[1] + 160 * (i + 1)], parties));
		w.connections[nodeName] = { main: [targets] };
		outs[i] = [{ node: nodeName, type: 'main', index: 0 }];
	});
	return w;
}
