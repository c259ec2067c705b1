import { Flowguard } from 'flowguard';
import type {
	ICredentialDataDecryptedObject,
	ICredentialTestFunctions,
	ICredentialsDecrypted,
	IExecuteFunctions,
	INodeCredentialTestResult,
	INodeProperties,
} from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

/** Backend selector shared by both nodes. */
export const backendProperty: INodeProperties = {
	displayName: 'Backend',
	name: 'backend',
	type: 'options',
	noDataExpression: true,
	options: [
		{
			name: 'Embedded',
			value: 'embedded',
			description:
				'State kept inside this n8n instance; no setup. Not for queue mode (several n8n processes).',
		},
		{
			name: 'Redis',
			value: 'redis',
			description: "State kept in Redis, using n8n's Redis credential. Works with queue mode.",
		},
	],
	default: 'embedded',
};

export const keyPrefixOption: INodeProperties = {
	displayName: 'Key Prefix',
	name: 'keyPrefix',
	type: 'string',
	default: 'fg:',
	description:
		'Prefix of every key flowguard writes (in Redis, and in the embedded store). Nodes that should see the same items or locks must use the same prefix.',
};

type Backend = 'embedded' | 'redis';

interface ClientSettings {
	backend: Backend;
	url?: string;
	prefix: string;
}

/**
 * Opened clients, by settings, for the life of the n8n process: an execution reuses the
 * connection that an earlier execution opened instead of connecting again. flowguard also pools
 * connections natively; this cache saves the handshake and the lookup.
 */
const clients = new Map<string, Promise<Flowguard>>();

function cacheKey(s: ClientSettings): string {
	return JSON.stringify([s.backend, s.url ?? '', s.prefix]);
}

export async function openClient(s: ClientSettings): Promise<Flowguard> {
	const key = cacheKey(s);
	let pending = clients.get(key);
	if (!pending) {
		pending = Flowguard.open(s.backend === 'redis' ? { url: s.url, prefix: s.prefix } : { prefix: s.prefix });
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

/** True when n8n runs in queue mode (executions spread over worker processes). */
export function isQueueMode(): boolean {
	return (process.env.EXECUTIONS_MODE ?? '').trim().toLowerCase() === 'queue';
}

export const QUEUE_MODE_MESSAGE =
	'The Embedded backend keeps its locks, items and queues inside one n8n process, but this n8n runs in queue mode (EXECUTIONS_MODE=queue), where executions run in several worker processes that would not see each other\'s state. Set Backend to Redis and choose a Redis credential.';

/**
 * Opens (or reuses) the client for the node's backend settings. Backend and prefix are read once
 * per execution (from item 0): a node execution talks to one backend.
 */
export async function clientFor(ctx: IExecuteFunctions): Promise<Flowguard> {
	const backend = ctx.getNodeParameter('backend', 0, 'embedded') as Backend;
	const prefix = ctx.getNodeParameter('options.keyPrefix', 0, 'fg:') as string;
	if (backend === 'redis') {
		const cred = await ctx.getCredentials('redis');
		try {
			return await openClient({ backend, url: redisUrlFromCredential(cred), prefix });
		} catch (error) {
			throw new NodeOperationError(ctx.getNode(), `Could not connect to Redis: ${errorMessage(error)}`, {
				description:
					'Check the host, port, password and TLS setting of the Redis credential, and that Redis is running.',
			});
		}
	}
	if (isQueueMode()) {
		throw new NodeOperationError(ctx.getNode(), QUEUE_MODE_MESSAGE);
	}
	try {
		return await openClient({ backend: 'embedded', prefix });
	} catch (error) {
		throw new NodeOperationError(ctx.getNode(), `Could not open the embedded store: ${errorMessage(error)}`);
	}
}

export function errorMessage(error: unknown): string {
	if (error instanceof Error) return error.message;
	return String(error);
}

export function errorCode(error: unknown): string | undefined {
	const code = (error as { code?: unknown } | null)?.code;
	return typeof code === 'string' ? code : undefined;
}

/** Connection test of the Redis credential, used by both nodes (`testedBy`). */
export async function testRedisCredential(
	this: ICredentialTestFunctions,
	credential: ICredentialsDecrypted,
): Promise<INodeCredentialTestResult> {
	try {
		const fg = await openClient({
			backend: 'redis',
			url: redisUrlFromCredential(credential.data ?? {}),
			prefix: 'fg:',
		});
		// One harmless read: proves the connection, the authentication and the scripts work.
		await fg.getLock('flowguard:connection-test');
		return { status: 'OK', message: 'Connection successful' };
	} catch (error) {
		return { status: 'Error', message: errorMessage(error) };
	}
}

/** Seconds from a node parameter to milliseconds, checked. */
export function secondsToMs(
	ctx: IExecuteFunctions,
	value: unknown,
	field: string,
	itemIndex: number,
	opts: { allowZero?: boolean } = {},
): number {
	const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
	if (typeof n !== 'number' || !Number.isFinite(n) || n < 0 || (!opts.allowZero && n === 0)) {
		throw new NodeOperationError(
			ctx.getNode(),
			`${field} must be a number of seconds${opts.allowZero ? ' (0 or more)' : ' greater than 0'}, got ${JSON.stringify(value)}`,
			{ itemIndex },
		);
	}
	return Math.round(n * 1000);
}

export function describeCode(code: string | undefined): string | undefined {
	switch (code) {
		case 'ERR_REDIS_UNAVAILABLE':
			return "Redis could not be reached. Check that it is running and that the credential's host and port are right.";
		case 'ERR_REDIS_AUTH':
			return 'Redis refused the user or password of the credential.';
		case 'ERR_TIMEOUT':
			return 'Redis did not answer in time.';
		case 'ERR_INVALID_ARGUMENT':
			return 'A parameter has a value flowguard does not accept; the message names it.';
		default:
			return undefined;
	}
}

/** Any error as a NodeOperationError that names the item. */
export function asNodeError(ctx: IExecuteFunctions, error: unknown, itemIndex: number): NodeOperationError {
	if (error instanceof NodeOperationError) {
		if (error.context) error.context.itemIndex = itemIndex;
		return error;
	}
	return new NodeOperationError(ctx.getNode(), errorMessage(error), {
		itemIndex,
		description: describeCode(errorCode(error)),
	});
}
