import type { Flowguard, PostgresOptions, SentinelOptions } from 'flowguard';
import type { ICredentialDataDecryptedObject, IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { AddonUnavailableError, loadFlowguard } from './addon';
import { errorMessage } from './errors';
import { embeddedStatePath } from './storage';

type Backend = 'embedded' | 'redis' | 'postgres';

interface ClientSettings {
	backend: Backend;
	url?: string;
	/** The seed nodes of a Redis Cluster (instead of `url`). */
	cluster?: string[];
	/** A Sentinel-managed Redis (instead of `url`). */
	sentinel?: SentinelOptions;
	/** PostgreSQL (backend `postgres`). */
	postgres?: PostgresOptions;
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
	return JSON.stringify([s.backend, s.url ?? '', s.cluster ?? [], s.sentinel ?? null, s.postgres ?? null, s.path ?? '', s.prefix]);
}

export async function openClient(s: ClientSettings): Promise<Flowguard> {
	const key = cacheKey(s);
	let pending = clients.get(key);
	if (!pending) {
		// Loaded here, on first use, so that n8n loads the package even without the native binary.
		pending = loadFlowguard().then(({ Flowguard }) =>
			Flowguard.open(
				s.backend === 'postgres'
					? { postgres: s.postgres, prefix: s.prefix }
					: s.backend !== 'redis'
					? { prefix: s.prefix, ...(s.path ? { path: s.path } : {}) }
					: s.cluster
						? { cluster: s.cluster, prefix: s.prefix }
						: s.sentinel
							? { sentinel: s.sentinel, prefix: s.prefix }
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

interface NodeAddress {
	host: string;
	port: number;
	user: string;
	password: string;
	tls: boolean;
	/** Skip the TLS certificate check. */
	insecure: boolean;
	/** The database, as the URL's path; none for a sentinel. */
	db?: number;
}

/** `redis[s]://[user[:password]@]host:port[/db][#insecure]` (an IPv6 host in brackets). */
function nodeUrl(a: NodeAddress): string {
	let auth = '';
	if (a.user || a.password) {
		auth = `${encodeURIComponent(a.user)}${a.password ? ':' + encodeURIComponent(a.password) : ''}@`;
	}
	const h = a.host.includes(':') && !a.host.startsWith('[') ? `[${a.host}]` : a.host;
	// redis-rs (flowguard's client) reads the `#insecure` fragment of a rediss:// URL as "do not verify the certificate".
	const insecure = a.tls && a.insecure ? '#insecure' : '';
	return `${a.tls ? 'rediss' : 'redis'}://${auth}${h}:${a.port}${a.db === undefined ? '' : `/${a.db}`}${insecure}`;
}

/** The address fields of a credential other than host and port. */
function addressOf(c: ICredentialDataDecryptedObject): Omit<NodeAddress, 'host' | 'port'> {
	return {
		user: str(c.user),
		password: str(c.password),
		tls: c.ssl === true,
		insecure: c.disableTlsVerification === true,
		db: Number(c.database ?? 0) || 0,
	};
}

/** `host:port, host, [::1]:port` (comma-separated) as hosts and ports, `port` where none is given. */
function hostList(list: unknown, port: number): Array<{ host: string; port: number }> {
	return str(list)
		.split(',')
		.map((n) => n.trim())
		.filter((n) => n !== '')
		.map((n) => {
			const at = n.lastIndexOf(':');
			const p = at > 0 && !n.endsWith(']') ? Number(n.slice(at + 1)) : NaN;
			return Number.isInteger(p) ? { host: n.slice(0, at), port: p } : { host: n, port };
		});
}

/** Builds a redis:// or rediss:// URL from n8n's Redis credential (host, port, user, password, database, ssl). */
export function redisUrlFromCredential(c: ICredentialDataDecryptedObject): string {
	const host = str(c.host).trim() || 'localhost';
	const port = Number(c.port ?? 6379) || 6379;
	return nodeUrl({ ...addressOf(c), host, port });
}

/** The port sentinels listen on unless told otherwise. */
const SENTINEL_PORT = 26379;

/**
 * The Redis target of a credential: `{ url }`; or `{ cluster }` (Host and Port, then the other
 * cluster nodes, each as a URL with the credential's user, password and TLS setting) when the
 * credential's Redis Cluster switch is on; or `{ sentinel }` when its Redis Sentinel switch is on
 * (the sentinels as URLs with the sentinels' user and password and the TLS setting; User,
 * Password and Database Number are the data nodes').
 */
export function redisTargetFromCredential(c: ICredentialDataDecryptedObject): {
	url?: string;
	cluster?: string[];
	sentinel?: SentinelOptions;
} {
	if (c.sentinel === true) {
		const { user, password, tls, insecure, db } = addressOf(c);
		const sentinelAuth = { user: str(c.sentinelUser), password: str(c.sentinelPassword), tls, insecure };
		const replicaAcks = Number(c.sentinelReplicaAcks ?? 0) || 0;
		return {
			sentinel: {
				masterName: str(c.sentinelMasterName).trim(),
				nodes: hostList(c.sentinelNodes, SENTINEL_PORT).map((a) => nodeUrl({ ...sentinelAuth, ...a })),
				...(user ? { username: user } : {}),
				...(password ? { password } : {}),
				db,
				...(replicaAcks > 0 ? { replicaAcks } : {}),
			},
		};
	}
	const url = redisUrlFromCredential(c);
	if (c.cluster !== true) return { url };
	const port = Number(c.port ?? 6379) || 6379;
	const others = hostList(c.clusterNodes, port).map((a) => nodeUrl({ ...addressOf(c), ...a, db: 0 }));
	return { cluster: [redisUrlFromCredential({ ...c, database: 0 }), ...others] };
}

/** The SSL modes of the Postgres credential (libpq's sslmode values flowguard takes). */
const SSL_MODES = new Set(['disable', 'prefer', 'require', 'verify-ca', 'verify-full']);

/**
 * The `postgres` option of the Flowguard Postgres credential: a postgres:// URL of its host, port,
 * database, user, password and SSL mode (sslmode), the CA certificate as `tls.ca` (PEM text), and
 * the schema.
 */
export function postgresOptionsFromCredential(c: ICredentialDataDecryptedObject): PostgresOptions {
	const host = str(c.host).trim() || 'localhost';
	const h = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
	const port = Number(c.port ?? 5432) || 5432;
	const user = str(c.user);
	const password = str(c.password);
	const auth = user || password ? `${encodeURIComponent(user)}${password ? ':' + encodeURIComponent(password) : ''}@` : '';
	const mode = SSL_MODES.has(str(c.sslMode)) ? str(c.sslMode) : 'prefer';
	const database = str(c.database).trim() || 'postgres';
	const url = `postgres://${auth}${h}:${port}/${encodeURIComponent(database)}?sslmode=${mode}`;
	const ca = str(c.ca).trim();
	const schema = str(c.schema).trim();
	return { url, ...(schema ? { schema } : {}), ...(ca && mode !== 'disable' ? { tls: { ca } } : {}) };
}

/** True when n8n runs in queue mode (executions spread over worker processes). */
export function isQueueMode(): boolean {
	return (process.env.EXECUTIONS_MODE ?? '').trim().toLowerCase() === 'queue';
}

export const QUEUE_MODE_MESSAGE =
	'The Embedded backend keeps its locks, items and queues on this machine (in a file in n8n\'s folder, or in memory), but this n8n runs in queue mode (EXECUTIONS_MODE=queue), where executions run in worker processes, usually on other machines, that would not see that state. Set Backend to Redis or PostgreSQL and choose its credential, or to Flowguard Server.';

/**
 * Opens (or reuses) the client for the node's backend settings. Backend and prefix are read once
 * per execution (from item 0): a node execution talks to one backend.
 */
export async function clientFor(ctx: IExecuteFunctions): Promise<Flowguard> {
	const backend = ctx.getNodeParameter('backend', 0, 'embedded') as Backend;
	const prefix = ctx.getNodeParameter('options.keyPrefix', 0, 'fg:') as string;
	if (backend === 'redis') {
		const cred = await ctx.getCredentials('flowguardRedisApi');
		try {
			return await openClient({ backend, ...redisTargetFromCredential(cred), prefix });
		} catch (error) {
			if (error instanceof AddonUnavailableError) throw addonError(ctx, error);
			throw new NodeOperationError(ctx.getNode(), `Could not connect to Redis: ${errorMessage(error)}`, {
				description:
					'Check the host, port (or the master name and sentinel nodes), password and TLS setting of the Redis credential, and that Redis is running.',
			});
		}
	}
	if (backend === 'postgres') {
		const cred = await ctx.getCredentials('flowguardPostgresApi');
		try {
			return await openClient({ backend, postgres: postgresOptionsFromCredential(cred), prefix });
		} catch (error) {
			if (error instanceof AddonUnavailableError) throw addonError(ctx, error);
			throw new NodeOperationError(ctx.getNode(), `Could not connect to PostgreSQL: ${errorMessage(error)}`, {
				description:
					'Check the host, port, database, user, password, SSL mode and CA certificate of the Postgres credential, that PostgreSQL is running, and that the user may create the schema (or that it exists).',
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
