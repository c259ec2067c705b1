import type {
	ExtendResult,
	ItemList,
	ItemRequestInput,
	ItemResult,
	ItemState,
	ListOptions,
	ReviveOptions,
	LockInfo,
	LockOptions,
	LockResult,
	PermitOptions,
	PermitResult,
	QueueAckOptions,
	QueueBatch,
	QueueEnqueueOptions,
	QueueEnqueueResult,
	QueueReadOptions,
	QueueReleaseOptions,
	QueueSettleResult,
	QueueSize,
	QueueSizeOptions,
	QueueDeadOptions,
	QueueDeadPage,
	QueueRequeueOptions,
	QueueRequeueResult,
	PauseRateLimitOptions,
	RateLimiterInfo,
	RateLimitOptions,
	RateLimitResult,
	ReleaseResult,
	SemaphoreInfo,
} from 'flowguard';
import type { ICredentialDataDecryptedObject, IDataObject, IExecuteFunctions, IHttpRequestOptions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

/*
 * The flowguard server backend: the calls the nodes make, over HTTP to a flowguard-server
 * (crates/server, docs/server.md) instead of the native addon, which is never loaded on this
 * backend. Each call is one request to the route of the same name, whose body and answer are the
 * addon's arguments and result; the server's error bodies {code, message, field} become errors
 * with the same `code`, message and `field` as the addon's, so the nodes' outputs and messages
 * are the same on every backend.
 */

export const SERVER_CREDENTIAL = 'flowguardServerApi';

/** An HTTP answer: status and parsed JSON body (undefined when not JSON). */
export interface Answer {
	status: number;
	body: unknown;
	/** The raw text when the body was not JSON (a proxy's error page). */
	text?: string;
}

/** Sends one POST (or GET without a body) to `path` of the server and returns the answer; throws only when no answer came. */
export type Transport = (method: 'GET' | 'POST', path: string, body: IDataObject | undefined, timeoutMs: number) => Promise<Answer>;

/** An error of a server call, shaped like the addon's errors: `code`, message naming `field`. */
export class ServerCallError extends Error {
	constructor(
		readonly code: string,
		message: string,
		readonly field?: string,
		/** The HTTP status (none when no answer came). */
		readonly status?: number,
	) {
		super(message);
		this.name = 'ServerCallError';
	}
}

/** The server's URL from the credential, without trailing slashes. */
export function serverUrl(credential: ICredentialDataDecryptedObject): string {
	const url = String(credential.url ?? '').trim().replace(/\/+$/, '');
	if (!/^https?:\/\/[^/]/i.test(url)) {
		throw new ServerCallError(
			'ERR_INVALID_ARGUMENT',
			`Server URL of the flowguard Server credential must start with http:// or https://, got ${JSON.stringify(url)}`,
		);
	}
	return url;
}

/** How long a call may take: the server's own request timeout (60 s by default), plus a lock's wait. */
const CALL_TIMEOUT_MS = 65_000;
/** The longest wait asked of the server in one acquire call: below its --max-wait-ms (30 s by default). */
export const WAIT_CHUNK_MS = 25_000;

function isObject(v: unknown): v is IDataObject {
	return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Drops the `code` the server adds to a busy result (409 / 412), so it is the addon's result. */
function result<T>(body: unknown): T {
	if (isObject(body) && 'code' in body) {
		const rest = { ...body };
		delete rest.code;
		return rest as T;
	}
	return body as T;
}

/** The error of an answer that is not a result: the server's coded body, else the status. */
export function answerError(a: Answer): ServerCallError {
	const b = a.body;
	if (isObject(b) && typeof b.code === 'string' && typeof b.message === 'string') {
		const field = typeof b.field === 'string' ? b.field : undefined;
		if (b.code === 'ERR_UNAUTHORIZED') {
			return new ServerCallError(
				b.code,
				'The flowguard server refused the token of the flowguard Server credential',
				undefined,
				a.status,
			);
		}
		return new ServerCallError(b.code, b.message, field, a.status);
	}
	const text = (a.text ?? JSON.stringify(b) ?? '').replace(/\s+/g, ' ').slice(0, 200);
	return new ServerCallError('ERR_SERVER', `The flowguard server answered HTTP ${a.status}${text ? `: ${text}` : ''}`, undefined, a.status);
}

/**
 * The nodes' calls on a flowguard server. Each is one HTTP request (a lock wait longer than
 * WAIT_CHUNK_MS is asked in several), so a node execution makes one round trip wherever it makes
 * one addon call.
 */
export class ServerClient {
	constructor(
		private readonly send: Transport,
		/** Shown in errors: where the server was expected. */
		readonly url: string,
	) {}

	async call<T>(path: string, body: IDataObject, okStatus: number[] = [], timeoutMs = CALL_TIMEOUT_MS): Promise<T> {
		let a: Answer;
		try {
			a = await this.send('POST', path, body, timeoutMs);
		} catch (error) {
			throw unreachable(this.url, error);
		}
		if ((a.status >= 200 && a.status < 300) || okStatus.includes(a.status)) return result<T>(a.body);
		throw answerError(a);
	}

	async setItems(group: string, requests: ItemRequestInput[]): Promise<ItemResult[]> {
		return await this.call('/v1/tracker/setItems', { group, requests: requests as unknown as IDataObject[] });
	}

	async getItems(group: string, ids: string[]): Promise<ItemState[]> {
		return await this.call('/v1/tracker/getItems', { group, ids });
	}

	async listItems(group: string, options?: ListOptions | null): Promise<ItemList> {
		return await this.call('/v1/tracker/listItems', { group, ...(options ?? {}) });
	}

	async reviveItems(group: string, ids: string[], options?: ReviveOptions | null): Promise<ItemResult[]> {
		return await this.call('/v1/tracker/reviveItems', { group, ids, ...(options ?? {}) });
	}

	/** A held lock is a result (409 with the holder), as on the addon. A wait over WAIT_CHUNK_MS is asked in parts. */
	async acquireLock(name: string, options?: LockOptions | null): Promise<LockResult> {
		return await this.acquire<LockResult>('/v1/lock/acquire', { name, ...(options ?? {}) });
	}

	/** A full semaphore is a result (409 with the holders), as on the addon; waits as `acquireLock` does. */
	async acquirePermit(name: string, options: PermitOptions): Promise<PermitResult> {
		return await this.acquire<PermitResult>('/v1/semaphore/acquire', { name, ...options });
	}

	/** One acquire route (lock or permit): 409 is a result; a wait over WAIT_CHUNK_MS is asked in parts. */
	private async acquire<R extends { acquired: boolean; waitedMs: number; attempts: number }>(
		path: string,
		body: IDataObject & { waitMs?: number },
	): Promise<R> {
		const { waitMs = 0, ...rest } = body;
		const until = Date.now() + waitMs;
		let waitedMs = 0;
		let attempts = 0;
		for (;;) {
			const wait = Math.max(0, Math.min(WAIT_CHUNK_MS, until - Date.now()));
			const r = await this.call<R>(path, { ...rest, ...(wait > 0 ? { waitMs: wait } : {}) }, [409], CALL_TIMEOUT_MS + wait);
			waitedMs += r.waitedMs ?? 0;
			attempts += r.attempts ?? 1;
			if (r.acquired || Date.now() >= until) return { ...r, waitedMs, attempts };
		}
	}

	async releaseLock(name: string, owner: string): Promise<ReleaseResult> {
		return await this.call('/v1/lock/release', { name, owner });
	}

	/** A lock no longer held is a result (412 with `extended: false`), as on the addon. */
	async extendLock(name: string, owner: string, options?: { timeoutMs?: number } | null): Promise<ExtendResult> {
		return await this.call('/v1/lock/extend', { name, owner, ...(options ?? {}) }, [412]);
	}

	async getLock(name: string): Promise<LockInfo> {
		return await this.call('/v1/lock/get', { name });
	}

	async releasePermit(name: string, owner: string): Promise<ReleaseResult> {
		return await this.call('/v1/semaphore/release', { name, owner });
	}

	/** A permit no longer held is a result (412 with `extended: false`), as on the addon. */
	async extendPermit(name: string, owner: string, options?: { timeoutMs?: number } | null): Promise<ExtendResult> {
		return await this.call('/v1/semaphore/extend', { name, owner, ...(options ?? {}) }, [412]);
	}

	async getSemaphore(name: string): Promise<SemaphoreInfo> {
		return await this.call('/v1/semaphore/get', { name });
	}

	/** A refused take (429) is a result, as on the addon. */
	async rateLimit(name: string, options: RateLimitOptions): Promise<RateLimitResult> {
		return await this.call('/v1/limiter/take', { name, ...options }, [429]);
	}

	/**
	 * The server waits until the reserved tokens are due: `maxWaitMs` is at most the server's
	 * `--max-wait-ms` (a longer one is refused with ERR_INVALID_ARGUMENT naming it).
	 */
	async waitRateLimit(name: string, options: RateLimitOptions): Promise<RateLimitResult> {
		return await this.call('/v1/limiter/wait', { name, ...options }, [429], CALL_TIMEOUT_MS + (options.maxWaitMs ?? 0));
	}

	async pauseRateLimit(name: string, options: PauseRateLimitOptions): Promise<RateLimiterInfo> {
		return await this.call('/v1/limiter/pause', { name, ...options });
	}

	async enqueue(queue: string, ids: string | string[], options?: QueueEnqueueOptions | null): Promise<QueueEnqueueResult> {
		return await this.call('/v1/queue/enqueue', { queue, ids, ...(options ?? {}) });
	}

	async readBatch(queue: string, options?: QueueReadOptions | null): Promise<QueueBatch> {
		return await this.call('/v1/queue/readBatch', { queue, ...(options ?? {}) });
	}

	async ack(queue: string, owner: string, ids: string | string[], options?: QueueAckOptions | null): Promise<QueueSettleResult> {
		return await this.call('/v1/queue/ack', { queue, owner, ids, ...(options ?? {}) });
	}

	async release(queue: string, owner: string, ids: string | string[], options?: QueueReleaseOptions | null): Promise<QueueSettleResult> {
		return await this.call('/v1/queue/release', { queue, owner, ids, ...(options ?? {}) });
	}

	async queueSize(queue: string, options?: QueueSizeOptions | null): Promise<QueueSize> {
		return await this.call('/v1/queue/size', { queue, ...(options ?? {}) });
	}

	async deadLetters(queue: string, options?: QueueDeadOptions | null): Promise<QueueDeadPage> {
		return await this.call('/v1/queue/deadLetters', { queue, ...(options ?? {}) });
	}

	async requeueDead(queue: string, ids: string | string[], options?: QueueRequeueOptions | null): Promise<QueueRequeueResult> {
		return await this.call('/v1/queue/requeueDead', { queue, ids, ...(options ?? {}) });
	}
}

/** The error of a call that got no answer (refused, timed out, DNS). */
export function unreachable(url: string, error: unknown): ServerCallError {
	// n8n's helper wraps the network error (NodeApiError); its cause has the system's message.
	const cause = (error as { cause?: unknown } | null)?.cause;
	const inner = cause instanceof Error ? cause : error;
	const detail = inner instanceof Error ? inner.message : String(inner);
	return new ServerCallError('ERR_SERVER_UNAVAILABLE', `Could not reach the flowguard server at ${url}: ${detail}`);
}

/** The answer of n8n's HTTP helper (returnFullResponse) as an Answer. */
export function toAnswer(response: unknown): Answer {
	const r = (response ?? {}) as { statusCode?: number; status?: number; body?: unknown };
	const status = Number(r.statusCode ?? r.status ?? 0);
	const body = r.body;
	if (typeof body === 'string') {
		try {
			return { status, body: JSON.parse(body) as unknown };
		} catch {
			return { status, body: undefined, text: body };
		}
	}
	return { status, body };
}

/**
 * The node's client of the flowguard server of its credential: requests go through n8n's
 * httpRequestWithAuthentication (the credential's bearer token, n8n's proxy and TLS settings).
 */
export async function serverClientFor(ctx: IExecuteFunctions): Promise<ServerClient> {
	const data = await ctx.getCredentials(SERVER_CREDENTIAL);
	let url: string;
	try {
		url = serverUrl(data);
	} catch (error) {
		throw new NodeOperationError(ctx.getNode(), (error as Error).message);
	}
	// Decrypted once per execution and handed to every request of it.
	const credentialsDecrypted = { id: '', name: SERVER_CREDENTIAL, type: SERVER_CREDENTIAL, data };
	const send: Transport = async (method, path, body, timeoutMs) => {
		const options: IHttpRequestOptions = {
			method,
			url: `${url}${path}`,
			json: true,
			returnFullResponse: true,
			ignoreHttpStatusErrors: true,
			timeout: timeoutMs,
			...(body ? { body, headers: { 'content-type': 'application/json' } } : {}),
		};
		return toAnswer(await ctx.helpers.httpRequestWithAuthentication.call(ctx, SERVER_CREDENTIAL, options, { credentialsDecrypted }));
	};
	return new ServerClient(send, url);
}
