import type { IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

export function errorMessage(error: unknown): string {
	if (error instanceof Error) return error.message;
	return String(error);
}

export function errorCode(error: unknown): string | undefined {
	const code = (error as { code?: unknown } | null)?.code;
	return typeof code === 'string' ? code : undefined;
}

export function describeCode(code: string | undefined): string | undefined {
	switch (code) {
		case 'ERR_BACKEND_UNAVAILABLE':
			return "The backend (Redis) could not be reached. Check that it is running and that the credential's host and port are right.";
		case 'ERR_BACKEND_AUTH':
			return 'The backend (Redis) refused the user or password of the credential.';
		case 'ERR_TIMEOUT':
			return 'Redis did not answer in time.';
		case 'ERR_INVALID_ARGUMENT':
			return 'A parameter has a value flowguard does not accept; the message names it.';
		case 'ERR_SERVER_UNAVAILABLE':
			return "The flowguard server could not be reached. Check that it is running and the Server URL of the credential.";
		case 'ERR_UNAUTHORIZED':
			return 'Set the Token of the flowguard Server credential to the token the server was started with.';
		case 'ERR_CLOCK_SKEW':
			return "This process's clock is far from the time of the store's file, which another process that agrees with it is using: correct the clock (NTP) or restart the process; the message says by how much.";
		case 'ERR_STORAGE':
			return "The flowguard server cannot read or write its store's file (disk full, read-only); see the server's log.";
		default:
			return undefined;
	}
}

/**
 * Display names of the node's parameters, by the argument field of the flowguard call they fill:
 * `{ group: 'Group', id: 'Item ID', timeoutMs: 'Timeout' }`. A field with an index or a parent
 * (`requests[3].id`, `options.shards`) is looked up whole without its indexes (`requests.id`),
 * then by its last name (`id`).
 */
export type FieldNames = Readonly<Record<string, string>>;

/** The field an ERR_INVALID_ARGUMENT names as `error.field` (the addon's errors and the server's bodies). */
export interface CoreField {
	/** The field as flowguard names it, e.g. `requests[3].id`. */
	path: string;
	/** The first index in it (the entry of a batch call), e.g. 3. */
	index?: number;
	/** The message after the field, e.g. ` must be a non-empty string`. */
	rest: string;
}

export function coreField(error: unknown): CoreField | undefined {
	if (errorCode(error) !== 'ERR_INVALID_ARGUMENT') return undefined;
	const path = (error as { field?: unknown }).field;
	if (typeof path !== 'string' || path === '') return undefined;
	const message = errorMessage(error);
	const index = /\[(\d+)\]/.exec(path)?.[1];
	return {
		path,
		index: index === undefined ? undefined : Number(index),
		rest: message.startsWith(path) ? message.slice(path.length) : ` ${message}`,
	};
}

function displayName(path: string, fields: FieldNames): string | undefined {
	const bare = path.replace(/\[\d+\]/g, '');
	return fields[bare] ?? fields[bare.slice(bare.lastIndexOf('.') + 1)];
}

/**
 * Any error of a flowguard call, or of reading the node's parameters, as a NodeOperationError that
 * names the item. The core's coded errors keep their text, with the field it names replaced by the
 * n8n parameter's display name (`Item ID must be a non-empty string`); `context` (`Enqueue to queue
 * "q" failed`) goes before any other error's message.
 */
export function nodeError(
	ctx: IExecuteFunctions,
	error: unknown,
	itemIndex: number,
	fields: FieldNames = {},
	context?: string,
): NodeOperationError {
	if (error instanceof NodeOperationError) {
		if (error.context) error.context.itemIndex = itemIndex;
		return error;
	}
	// The addon's AddonUnavailableError (addon.ts), known by its code: this module is shared with
	// the n8n Cloud package, which has no addon.
	if (errorCode(error) === 'ERR_ADDON_UNAVAILABLE' && error instanceof Error) {
		const description = (error as { description?: unknown }).description;
		return new NodeOperationError(ctx.getNode(), error.message, {
			itemIndex,
			...(typeof description === 'string' ? { description } : {}),
		});
	}
	const code = errorCode(error);
	const field = coreField(error);
	const name = field && displayName(field.path, fields);
	const described = describeCode(code);
	if (name) {
		return new NodeOperationError(ctx.getNode(), `${name}${field.rest}`, {
			itemIndex,
			description: `${described} (${code})`,
		});
	}
	return new NodeOperationError(ctx.getNode(), context ? `${context}: ${errorMessage(error)}` : errorMessage(error), {
		itemIndex,
		description: described,
	});
}
