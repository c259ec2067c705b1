import type { Flowguard } from 'flowguard';
import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { openCalls } from '../../shared/backend';
import { toText } from '../../shared/convert';
import { clean, ItemOutputs } from '../../shared/items';
import { ItemParameters } from '../../shared/params';
import { DEFAULT_FIELD } from './limiter';

/** The node's parameters behind the fields of the pause call (named in errors). */
const FIELDS = { name: 'Limiter Name', retryAfter: 'Retry After', untilMs: 'Retry After' };

const SHOW = { show: { operation: ['backOff'] } };

export const description: INodeProperties[] = [
	{
		displayName: 'Retry After',
		name: 'retryAfter',
		type: 'string',
		default: '={{ $json.headers?.["retry-after"] }}',
		placeholder: 'e.g. 120 or Wed, 21 Oct 2026 07:28:00 GMT',
		description:
			'The Retry-After value the upstream sent: seconds, or an HTTP date. With the HTTP Request node\'s "Include Response Headers and Status" (Full Response), it is in the item\'s headers. A date in the past pauses nothing; an empty value uses the Fallback.',
		displayOptions: SHOW,
	},
	{
		displayName: 'Fallback (Seconds)',
		name: 'fallback',
		type: 'number',
		typeOptions: { minValue: 0, numberPrecision: 0 },
		default: 60,
		description: 'The pause when Retry After is empty (a 429 without the header)',
		displayOptions: SHOW,
	},
];

/** Each item pauses its limiter (one call per item, in order); the item goes on with the pause's end. */
export async function execute(ctx: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const items = ctx.getInputData();
	const params = new ItemParameters(ctx, items);
	const fg: Pick<Flowguard, 'pauseRateLimit'> = await openCalls(ctx);
	const outputs = new ItemOutputs(ctx, items, FIELDS);
	await outputs.each(async (i) => {
		const options = params.get('options', i, {}) as IDataObject;
		const name = toText(params.get('limiterName', i)) as string;
		const given = params.get('retryAfter', i);
		const empty = given === undefined || given === null || String(given).trim() === '';
		const retryAfter = empty ? String(params.get('fallback', i, 60)) : (toText(given) as string);
		const r = await fg.pauseRateLimit(name, { retryAfter });
		outputs.result(
			i,
			(options.resultField as string) || DEFAULT_FIELD,
			clean({
				name: r.name,
				pausedUntil: r.pausedUntil === undefined ? undefined : Math.round(r.pausedUntil),
				pauseMs: Math.round(r.pauseMs),
				retryAfter,
			}),
		);
	});
	return [outputs.list()];
}
