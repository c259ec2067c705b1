import type { QueueRequeueResult } from 'flowguard';
import type { IDataObject, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { callBatch } from '../../shared/batch';
import { toText } from '../../shared/convert';
import { clean, ItemOutputs } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import type { QueueRef } from './queue';
import { DEFAULT_FIELD, FIELDS, queueRef } from './queue';

export const option = {
	name: 'Requeue Dead',
	value: 'requeueDead',
	description:
		'Put dead letters back as waiting (due now, deliveries reset): the Item ID of every input item, in one call per queue',
	action: 'Requeue dead letters',
};

interface Plan {
	itemIndex: number;
	id: string;
}

/**
 * Requeue Dead: the Item ID of each input item (given, or the `id` of a Dead Letters output
 * item), all items of one queue in one call. Each item gets `{ id, shard, outcome: 'requeued' |
 * 'not_dead', dueAt? }` in the result field; an ID that is no dead letter is not an error (it
 * was requeued already, or never died).
 */
export async function execute({ ctx, items, params, fg }: OperationContext): Promise<INodeExecutionData[][]> {
	const outputs = new ItemOutputs(ctx, items, { ...FIELDS, ids: 'Item ID' });
	const fieldOf: string[] = [];
	const calls = new Map<string, { ref: QueueRef; plans: Plan[] }>();
	await outputs.each((i) => {
		const options = params.get('options', i, {}) as IDataObject;
		fieldOf[i] = (options.resultField as string) || DEFAULT_FIELD;
		const ref = queueRef(params, i);
		const given = params.get('itemId', i, '');
		const fromItem = typeof items[i].json.id === 'string' ? (items[i].json.id as string) : undefined;
		const id = given === '' || given === undefined || given === null ? fromItem : (toText(given) as string);
		if (id === undefined) {
			throw new NodeOperationError(ctx.getNode(), `No Item ID to requeue in queue "${ref.queue}"`, {
				itemIndex: i,
				description: 'Give the Item ID, for example {{ $json.id }}, or put a Dedup Queue "Dead Letters" before this node.',
			});
		}
		const key = JSON.stringify([ref.queue, ref.shards]);
		const call = calls.get(key) ?? { ref, plans: [] };
		call.plans.push({ itemIndex: i, id });
		calls.set(key, call);
	});
	for (const { ref, plans } of calls.values()) {
		const done = await callBatch(
			plans,
			async (left): Promise<QueueRequeueResult> =>
				await fg.requeueDead(ref.queue, left.map((p) => p.id), { shards: ref.shards }),
			{
				refused: (p, error) => outputs.fail(p.itemIndex, error),
				failed: (left, error) => {
					for (const p of left) outputs.fail(p.itemIndex, error, {}, `Requeue Dead in queue "${ref.queue}" failed`);
				},
			},
		);
		if (!done) continue;
		done.entries.forEach((p, k) => {
			outputs.result(p.itemIndex, fieldOf[p.itemIndex], clean({ queue: ref.queue, ...done.result.items[k] }));
		});
	}
	return [outputs.list()];
}
