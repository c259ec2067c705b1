import type { QueueSettleResult } from 'flowguard';
import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { secondsToMs, toText } from '../../shared/convert';
import { callBatch } from '../../shared/batch';
import { clean, findUpstream, ItemOutputs } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import type { QueueRef } from './queue';
import { DEFAULT_FIELD, FIELDS, queueRef } from './queue';

/** The Item ID parameter of Ack and Release. */
export const itemIdProperty: INodeProperties = {
	displayName: 'Item ID',
	name: 'itemId',
	type: 'string',
	default: '',
	placeholder: 'e.g. {{ $json.productId }}',
	description:
		'ID to ack or release. Leave empty to use the ID of the Read Batch output item this item came from (found in the item, or through its lineage).',
	displayOptions: { show: { operation: ['ack', 'release', 'requeueDead'] } },
};

/** The Receipt option of Ack and Release. */
export const receiptOption: INodeProperties = {
	displayName: 'Receipt',
	name: 'receipt',
	type: 'string',
	default: '',
	description:
		'The owner token of the read that claimed the ID. Leave empty to use the one of the Read Batch output item this item came from (its "owner" field, found in the item or through its lineage).',
	displayOptions: { show: { '/operation': ['ack', 'release'] } },
};

/** The Read Batch output `{ id, queue, owner }` this item is, or descends from. */
function readRecord(
	ctx: IExecuteFunctions,
	item: INodeExecutionData,
	itemIndex: number,
	queue: string,
	id: string | undefined,
): IDataObject | undefined {
	const matches = (j: IDataObject) =>
		j.queue === queue &&
		typeof j.id === 'string' &&
		(id === undefined || j.id === id) &&
		typeof j.owner === 'string' &&
		j.owner !== '';
	if (matches(item.json)) return item.json;
	return findUpstream(ctx, itemIndex, '.dedupQueue', (json, parameters) =>
		parameters.operation === 'readBatch' && matches(json) ? json : undefined,
	);
}

const REFUSAL: Record<string, { message: string; description: string }> = {
	not_owner: {
		message: 'is held by another read',
		description:
			'The receipt is not the one of the read that holds this ID now (its visibility timeout passed and another read claimed it, or the receipt is wrong). That read acks or releases it.',
	},
	not_claimed: {
		message: 'is not claimed',
		description: 'It was acked or released already, its claim ended, or it was never read.',
	},
	expired: {
		message: 'was claimed by a read whose visibility timeout has passed',
		description:
			'It will be delivered again by a later read. Set the Visibility Timeout of Read Batch above the time the flow takes to process a batch.',
	},
};

interface Plan {
	itemIndex: number;
	id: string;
}

/**
 * Ack and Release: finds each item's ID and receipt (given, or from the Read Batch it descends
 * from), then makes one call per queue and receipt (and settings): the IDs of one read are settled
 * together.
 */
export async function settle(op: OperationContext, operation: 'ack' | 'release'): Promise<INodeExecutionData[][]> {
	const { ctx, items, params, fg } = op;
	const verb = operation === 'ack' ? 'acked' : 'released';
	const Verb = operation === 'ack' ? 'Ack' : 'Release';
	const outputs = new ItemOutputs(ctx, items, { ...FIELDS, ids: 'Item ID' });
	const fieldOf: string[] = [];

	const calls = new Map<string, { ref: QueueRef; owner: string; delayMs: number; plans: Plan[] }>();
	await outputs.each((i) => {
		const options = params.get('options', i, {}) as IDataObject;
		fieldOf[i] = (options.resultField as string) || DEFAULT_FIELD;
		const ref = queueRef(params, i);
		const given = params.get('itemId', i, '');
		const givenId = given === '' || given === undefined || given === null ? undefined : (toText(given) as string);
		const receipt = typeof options.receipt === 'string' ? options.receipt.trim() : '';
		const record = givenId !== undefined && receipt !== '' ? undefined : readRecord(ctx, items[i], i, ref.queue, givenId);
		const id = givenId ?? (record?.id as string | undefined);
		if (id === undefined) {
			throw new NodeOperationError(
				ctx.getNode(),
				`No Item ID to ${operation} in queue "${ref.queue}": the item does not come from a Read Batch of that queue`,
				{
					itemIndex: i,
					description:
						'Put a Dedup Queue "Read Batch" of this queue before this node (its output items carry id, queue and owner), or give the Item ID, for example {{ $json.id }}, and the Receipt.',
				},
			);
		}
		const owner = receipt || (record?.owner as string | undefined);
		if (!owner) {
			throw new NodeOperationError(
				ctx.getNode(),
				`No receipt for ID "${id}" of queue "${ref.queue}": ${Verb} needs the owner token of the read that claimed it`,
				{
					itemIndex: i,
					description:
						'The receipt travels in the "owner" field of the Read Batch output items, and is found through the item\'s lineage when an intermediate node replaced the item. You can also give it in Options → Receipt.',
				},
			);
		}
		const delayMs = operation === 'release' ? secondsToMs(ctx, options.delay ?? 0, 'Delay', i, { allowZero: true }) : 0;
		const key = JSON.stringify([ref.queue, ref.shards, owner, delayMs]);
		const call = calls.get(key) ?? { ref, owner, delayMs, plans: [] };
		call.plans.push({ itemIndex: i, id });
		calls.set(key, call);
	});

	for (const { ref, owner, delayMs, plans } of calls.values()) {
		const done = await callBatch(
			plans,
			async (left): Promise<QueueSettleResult> => {
				const ids = left.map((p) => p.id);
				return operation === 'ack'
					? await fg.ack(ref.queue, owner, ids, { shards: ref.shards })
					: await fg.release(ref.queue, owner, ids, { shards: ref.shards, ...(delayMs > 0 ? { delayMs } : {}) });
			},
			{
				refused: (p, error) => outputs.fail(p.itemIndex, error),
				failed: (left, error) => {
					for (const p of left) outputs.fail(p.itemIndex, error, {}, `${Verb} in queue "${ref.queue}" failed`);
				},
			},
		);
		if (!done) continue;
		const r = done.result;
		done.entries.forEach((p, k) => {
			const s = r.items[k];
			const i = p.itemIndex;
			const result = clean({ queue: ref.queue, ...s });
			if (s.ok) {
				outputs.result(i, fieldOf[i], result);
				return;
			}
			const why = REFUSAL[s.reason ?? ''] ?? { message: `was refused (${s.reason ?? 'unknown reason'})`, description: '' };
			const others = r.done > 0 ? ` The other ${r.done} ID(s) of this call were ${verb}.` : '';
			outputs.fail(
				i,
				new NodeOperationError(ctx.getNode(), `ID "${s.id}" of queue "${ref.queue}" ${why.message}: not ${verb}`, {
					itemIndex: i,
					description: `${why.description}${others}`.trim() || undefined,
				}),
				{ [fieldOf[i]]: result },
			);
		});
	}
	return [outputs.list()];
}
