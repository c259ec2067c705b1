import type { Flowguard } from 'flowguard';
import type { ICredentialDataDecryptedObject, IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { AddonUnavailableError, loadFlowguard } from './addon';
import { redisCredentialType } from './descriptions';
import { errorMessage } from './errors';
import { embeddedStatePath } from './storage';

type Backend = 'embedded' | 'redis';

interface ClientSettings {
	backend: Backend;
	url?: string;
	/** The seed nodes of a Redis Cluster (instead of `url`). */
	cluster?: string[];
	/** Embedded only: the file of the durable store; none keeps the state in memory. */
	path?: string;
	prefix: string;
}

/**
 * Opened clients, by settings, for the life of the n8n process: an execution reuses the
 * connection that an earlier execution opened instead of connecting again. flowguard also pools
 * connections natively; this cache saves the handshake and the lookup.
 */
const clients = new Map<string, Promise<Flowguard>>();

function cacheKey(s: ClientSettings): string {
	return JSON.stringify([s.backend, s.url ?? '', s.cluster ?? [], s.path ?? '', s.prefix]);
}

export async function openClient(s: ClientSettings): Promise<Flowguard> {
	const key = cacheKey(s);
	let pending = clients.get(key);
	if (!pending) {
		// Loaded here, on first use, so that n8n loads the package even without the native binary.
		pending = loadFlowguard().then(({ Flowguard }) =>
			Flowguard.open(
				s.backend !== 'redis'
					? { prefix: s.prefix, ...(s.path ? { path: s.path } : {}) }
					: s.cluster
						? { cluster: s.cluster, prefix: s.prefix }
						: { url: s.url, prefix: s.prefix },
			),
		);
		clients.set(key, pending);
		// A failed open is not cached: the next execution tries again (Redis may be back).
		pending.catch(() => clients.delete(key));
	}
	return await pending;
}

/** Number of distinct clients opened in this process (used by the end-to-end test's report). */
export function openClientCount(): number {
	return clients.size;
}

function str(v: unknown): string {
	return v === undefined || v === null ? '' : String(v);
}

/** Builds a redis:// or rediss:// URL from n8n's Redis credential (host, port, user, password, database, ssl). */
export function redisUrlFromCredential(c: ICredentialDataDecryptedObject): string {
	const host = str(c.host).trim() || 'localhost';
	const port = Number(c.port ?? 6379) || 6379;
	const db = Number(c.database ?? 0) || 0;
	const user = str(c.user);
	const password = str(c.password);
	const tls = c.ssl === true;
	let auth = '';
	if (user || password) {
		auth = `${encodeURIComponent(user)}${password ? ':' + encodeURIComponent(password) : ''}@`;
	}
	const h = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
	// redis-rs (flowguard's client) reads the `#insecure` fragment of a rediss:// URL as "do not verify the certificate".
	const insecure = tls && c.disableTlsVerification === true ? '#insecure' : '';
	return `${tls ? 'rediss' : 'redis'}://${auth}${h}:${port}/${db}${insecure}`;
}

/**
 * The Redis target of a credential: `{ url }`, or `{ cluster }` (Host and Port, then the other
 * cluster nodes, each as a URL with the credential's user, password and TLS setting) when the
 * credential's Redis Cluster switch is on.
 */
export function redisTargetFromCredential(c: ICredentialDataDecryptedObject): { url?: string; cluster?: string[] } {
	const url = redisUrlFromCredential(c);
	if (c.cluster !== true) return { url };
	const others = str(c.clusterNodes)
		.split(',')
		.map((n) => n.trim())
		.filter((n) => n !== '')
		.map((n) => {
			const at = n.lastIndexOf(':');
			const port = at > 0 && !n.endsWith(']') ? Number(n.slice(at + 1)) : NaN;
			return redisUrlFromCredential({ ...c, host: Number.isInteger(port) ? n.slice(0, at) : n, port: Number.isInteger(port) ? port : c.port, database: 0 });
		});
	return { cluster: [redisUrlFromCredential({ ...c, database: 0 }), ...others] };
}

/** True when n8n runs in queue mode (executions spread over worker processes). */
export function isQueueMode(): boolean {
	return (process.env.EXECUTIONS_MODE ?? '').trim().toLowerCase() === 'queue';
}

export const QUEUE_MODE_MESSAGE =
	'The Embedded backend keeps its locks, items and queues on this machine (in a file in n8n\'s folder, or in memory), but this n8n runs in queue mode (EXECUTIONS_MODE=queue), where executions run in worker processes, usually on other machines, that would not see that state. Set Backend to Redis and choose a Redis credential, or to Flowguard Server.';

/**
 * Opens (or reuses) the client for the node's backend settings. Backend and prefix are read once
 * per execution (from item 0): a node execution talks to one backend.
 */
export async function clientFor(ctx: IExecuteFunctions): Promise<Flowguard> {
	const backend = ctx.getNodeParameter('backend', 0, 'embedded') as Backend;
	const prefix = ctx.getNodeParameter('options.keyPrefix', 0, 'fg:') as string;
	if (backend === 'redis') {
		const cred = await ctx.getCredentials(redisCredentialType(ctx.getNode().typeVersion));
		try {
			return await openClient({ backend, ...redisTargetFromCredential(cred), prefix });
		} catch (error) {
			if (error instanceof AddonUnavailableError) throw addonError(ctx, error);
			throw new NodeOperationError(ctx.getNode(), `Could not connect to Redis: ${errorMessage(error)}`, {
				description:
					'Check the host, port, password and TLS setting of the Redis credential, and that Redis is running.',
			});
		}
	}
	if (isQueueMode()) {
		throw new NodeOperationError(ctx.getNode(), QUEUE_MODE_MESSAGE);
	}
	const memoryOnly = ctx.getNodeParameter('options.memoryOnly', 0, false) === true;
	const path = memoryOnly ? undefined : embeddedStatePath();
	try {
		return await openClient({ backend: 'embedded', prefix, ...(path ? { path } : {}) });
	} catch (error) {
		if (error instanceof AddonUnavailableError) throw addonError(ctx, error);
		throw new NodeOperationError(ctx.getNode(), `Could not open the embedded store: ${errorMessage(error)}`);
	}
}

function addonError(ctx: IExecuteFunctions, error: AddonUnavailableError): NodeOperationError {
	return new NodeOperationError(ctx.getNode(), error.message, { description: error.description });
}
