import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { secondsToMs } from '../../shared/convert';
import { findUpstreamResult } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import type { ItemInput, SetRequest } from './requests';
import { DEFAULT_FIELD, trackItems } from './requests';

type SetStatus = 'inProgress' | 'completed' | 'failed';

export const option = {
	name: 'Set',
	value: 'set',
	description: 'Claim an item (In Progress), or mark it Completed or Failed',
	action: 'Set the status of an item',
};

export const description: INodeProperties[] = [
	{
		displayName: 'Status',
		name: 'status',
		type: 'options',
		options: [
			{
				name: 'Completed',
				value: 'completed',
				description: 'The item is done; a later claim skips it',
			},
			{
				name: 'Failed',
				value: 'failed',
				description: 'The item failed; a later claim processes it again',
			},
			{
				name: 'In Progress',
				value: 'inProgress',
				description:
					'Claim the item atomically. Claimed items go to the first output, items already in progress or completed to the second.',
			},
		],
		default: 'inProgress',
		displayOptions: { show: { operation: ['set'] } },
	},
	{
		displayName: 'Timeout (Seconds)',
		name: 'timeout',
		type: 'number',
		typeOptions: { minValue: 0.001 },
		default: 600,
		description:
			'How long the claim lasts. If the flow has not marked the item Completed or Failed by then, the claim is abandoned and the item can be claimed again.',
		displayOptions: { show: { operation: ['set'], status: ['inProgress'] } },
	},
	{
		displayName: 'Error Message',
		name: 'errorMessage',
		type: 'string',
		default: '',
		placeholder: 'e.g. {{ $json.error }}',
		description: 'Why the item failed; kept with the item and shown by Get and List',
		displayOptions: { show: { operation: ['set'], status: ['failed'] } },
	},
	{
		displayName: 'Expire Completed Mark',
		name: 'expireCompleted',
		type: 'boolean',
		default: false,
		description:
			"Whether the Completed mark should expire after a while, so that the item is processed again (for example by next week's run) without clean-up",
		displayOptions: { show: { operation: ['set'], status: ['completed'] } },
	},
	{
		displayName: 'Expire After (Seconds)',
		name: 'completedExpiry',
		type: 'number',
		typeOptions: { minValue: 0.001 },
		default: 518400,
		description: 'How long the Completed mark lasts (518400 s = 6 days)',
		displayOptions: {
			show: { operation: ['set'], status: ['completed'], expireCompleted: [true] },
		},
	},
];

/** Set's entries in the node's Options collection. */
export const options: INodeProperties[] = [
	{
		displayName: 'Owner Token',
		name: 'ownerToken',
		// Not a secret: the claim's token is in every output item, so that later nodes can use it;
		// masking it would only hide it from the builder.
		// eslint-disable-next-line n8n-nodes-base/node-param-type-options-password-missing
		type: 'string',
		default: '',
		description:
			'Token of the claim that this completion or failure belongs to. Leave empty to use the token of the claim this item came from (found in the item, or through its lineage); when a newer claim owns the item, the node refuses to overwrite it.',
		displayOptions: { show: { '/operation': ['set'], '/status': ['completed', 'failed'] } },
	},
	{
		displayName: 'Keep Forever',
		name: 'keepForever',
		type: 'boolean',
		default: false,
		description:
			"Whether to keep the Completed or Failed mark until it is unset, with no expiry (by default it is kept 30 days), like n8n's Remove Duplicates node keeps its history. Not with Expire Completed Mark on. Each item kept costs a few hundred bytes: see the package README.",
		displayOptions: { show: { '/operation': ['set'], '/status': ['completed', 'failed'] } },
	},
	{
		displayName: 'Max Attempts',
		name: 'maxAttempts',
		type: 'number',
		typeOptions: { minValue: 0, maxValue: 1000 },
		default: 0,
		description:
			"How many attempts an item gets (0: no limit). A failure of the last one marks the item Dead instead of Failed: a later claim skips it until the Retry operation (or Unset) brings it back, as BullMQ's attempts.",
		displayOptions: { show: { '/operation': ['set'], '/status': ['inProgress'] } },
	},
	{
		displayName: 'Note',
		name: 'note',
		type: 'string',
		default: '',
		placeholder: 'e.g. page {{ $json.page }} of the export',
		description:
			'A short text kept with the claim (at most 256 bytes) and shown by Get and List as the item\'s note, until the item is claimed again',
		displayOptions: { show: { '/operation': ['set'], '/status': ['inProgress'] } },
	},
	{
		displayName: 'Result',
		name: 'result',
		type: 'json',
		default: '',
		description:
			"A JSON value stored with the completed item (at most 4 KiB of JSON text) and shown by Get and List as the item's result, until the item is claimed again (as BullMQ's returnvalue). Empty: none.",
		displayOptions: { show: { '/operation': ['set'], '/status': ['completed'] } },
	},
	{
		displayName: 'Reclaim Completed Items',
		name: 'reclaimCompleted',
		type: 'boolean',
		default: false,
		description: 'Whether to claim items that are already completed (for example to redo them)',
		displayOptions: { show: { '/operation': ['set'], '/status': ['inProgress'] } },
	},
];

/** The claim's Max Attempts option, when set (0 or empty: no limit). */
export function maxAttempts(options: IDataObject): { maxAttempts?: number } {
	const m = options.maxAttempts;
	return typeof m === 'number' && m > 0 ? { maxAttempts: m } : {};
}

export async function execute(op: OperationContext): Promise<INodeExecutionData[][]> {
	const { ctx, items, params } = op;
	// Both outputs exist only when the node's Status is literally "In Progress" (see `outputs`).
	const twoOutputs = (ctx.getNode().parameters.status ?? 'inProgress') === 'inProgress';
	const request = ({ itemIndex: i, options, field, group, id }: ItemInput): SetRequest => {
		const status = params.get('status', i) as SetStatus;
		if (status === 'inProgress') {
			return {
				id,
				status: 'in_progress',
				timeoutMs: secondsToMs(ctx, params.get('timeout', i), 'Timeout', i),
				...(options.reclaimCompleted === true ? { reclaimCompleted: true } : {}),
				...maxAttempts(options),
				...(typeof options.note === 'string' && options.note !== '' ? { note: options.note } : {}),
			};
		}
		if (status !== 'completed' && status !== 'failed') {
			throw new NodeOperationError(
				ctx.getNode(),
				`Status must be In Progress, Completed or Failed, got ${JSON.stringify(status)}`,
				{ itemIndex: i },
			);
		}
		const owner = ownerFor(ctx, items[i], i, field, group, id, options.ownerToken);
		const req: SetRequest = { id, status, ...(owner ? { owner } : {}) };
		if (status === 'failed') {
			req.error = String(params.get('errorMessage', i, '') ?? '') || 'failed';
		} else if (params.get('expireCompleted', i, false) === true) {
			req.keepMs = secondsToMs(ctx, params.get('completedExpiry', i), 'Expire After', i);
		}
		if (req.keepMs === undefined && options.keepForever === true) req.keepMs = 'forever';
		if (status === 'completed') {
			const result = resultOption(ctx, options.result, i);
			if (result !== undefined) req.result = result;
		}
		return req;
	};
	return await trackItems(op, 'set', request, twoOutputs);
}

/**
 * The Result option as a JSON value: JSON text (the field's own form) parsed, a value given by an
 * expression as it is; empty: none.
 */
function resultOption(ctx: IExecuteFunctions, value: unknown, itemIndex: number): unknown {
	if (value === undefined || value === '') return undefined;
	if (typeof value !== 'string') return value;
	try {
		return JSON.parse(value);
	} catch (err) {
		throw new NodeOperationError(ctx.getNode(), `Result must be JSON: ${(err as Error).message}`, { itemIndex });
	}
}

/** The owner token for Set Completed / Failed: given, in the item, or in the item's lineage. */
function ownerFor(
	ctx: IExecuteFunctions,
	item: INodeExecutionData,
	itemIndex: number,
	field: string,
	group: string,
	id: string,
	given: unknown,
): string | undefined {
	if (typeof given === 'string' && given.trim() !== '') return given.trim();
	const matches = (r: IDataObject) =>
		r.group === group && r.id === id && typeof r.owner === 'string' && r.owner !== '';
	const own = item.json[field];
	if (own && typeof own === 'object' && !Array.isArray(own) && matches(own as IDataObject)) {
		return (own as IDataObject).owner as string;
	}
	return findUpstreamResult(ctx, itemIndex, '.itemTracker', DEFAULT_FIELD, matches)?.owner as string | undefined;
}
