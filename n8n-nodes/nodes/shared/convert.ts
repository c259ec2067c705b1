import type { IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

/*
 * Parameter values into the types flowguard takes. Ranges, lengths and emptiness are the core's to
 * check: its errors name the field, and nodeError names the parameter.
 */

/** Seconds from a node parameter to the milliseconds flowguard takes (the unit is the node's; the core checks the range). */
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

/** A number parameter as a number: text that holds a number (from an expression) is converted; the core checks the range. */
export function toNumber(value: unknown): unknown {
	return typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value)) ? Number(value) : value;
}

/** A name parameter as text: a number (an ID from an expression) is converted; the core checks emptiness and length. */
export function toText(value: unknown): unknown {
	return typeof value === 'number' || typeof value === 'bigint' ? String(value) : value;
}
