// A proxy for the e2e suite (server-backend.mjs), run as its own process (the suite blocks in
// spawnSync while n8n runs): it forwards every call to the flowguard server, but loses the answer
// of the first call to DROP_PATH: the server applies that call, then the proxy cuts the connection
// instead of answering, as a network failure after the write would. GET /__proxy/seen lists the
// calls it forwarded and how many answers it dropped.
// Usage: node dropping-proxy.mjs <port> <target URL> <path to drop>

import http from 'node:http';

const [port, target, dropPath] = process.argv.slice(2);
const seen = [];
let dropped = 0;
const server = http.createServer((req, res) => {
	if (req.url === '/__proxy/seen') {
		res.writeHead(200, { 'content-type': 'application/json' });
		res.end(JSON.stringify({ seen, dropped }));
		return;
	}
	const chunks = [];
	req.on('data', (c) => chunks.push(c));
	req.on('end', () => {
		const body = Buffer.concat(chunks);
		seen.push({ path: req.url, body: body.toString('utf8') });
		const up = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
			const parts = [];
			answer.on('data', (c) => parts.push(c));
			answer.on('end', () => {
				if (req.url === dropPath && dropped === 0) {
					dropped++;
					req.socket.destroy();
					return;
				}
				res.writeHead(answer.statusCode, answer.headers);
				res.end(Buffer.concat(parts));
			});
		});
		up.on('error', () => req.socket.destroy());
		up.end(body);
	});
});
server.listen(Number(port), '127.0.0.1', () => console.log(`listening on ${port}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
