import type { IDataObject, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { secondsToMs, toNumber } from '../../shared/convert';
import { ItemOutputs } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import { FIELDS, MAX_BATCH, onlyShard, queueRef } from './queue';

export const option = {
	name: 'Read Batch',
	value: 'readBatch',
	description: 'Claim the oldest due IDs for a visibility timeout; one output item per ID',
	action: 'Read a batch of items',
};

export const description: INodeProperties[] = [
	{
		displayName: 'Batch Size',
		name: 'batchSize',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: MAX_BATCH, numberPrecision: 0 },
		default: 100,
		description: 'The most IDs to claim (1 to 10000), oldest first',
		displayOptions: { show: { operation: ['readBatch'] } },
	},
	{
		displayName: 'Visibility Timeout (Seconds)',
		name: 'visibilityTimeout',
		type: 'number',
		typeOptions: { minValue: 0.001 },
		default: 600,
		description:
			'How long the IDs read stay claimed by this flow. IDs not acked or released by then become due again, so a flow that crashed loses nothing. Set it above the time the flow takes to process a batch.',
		displayOptions: { show: { operation: ['readBatch'] } },
	},
];

/**
 * One read per input item (usually the single item of a trigger). Each claimed ID becomes an
 * output item `{ id, queue, shard, owner, dueAt, visibleUntil }` paired with that input item, so
 * that a later Ack or Release finds the receipt (`owner`) in it. An empty batch outputs no item:
 * the rest of the branch does not run.
 */
export async function execute({ ctx, items, params, fg }: OperationContext): Promise<INodeExecutionData[][]> {
	const outputs = new ItemOutputs(ctx, items, FIELDS);
	await outputs.each(async (i) => {
		const options = params.get('options', i, {}) as IDataObject;
		const ref = queueRef(params, i);
		const limit = toNumber(params.get('batchSize', i, 100)) as number;
		const visibilityTimeoutMs = secondsToMs(ctx, params.get('visibilityTimeout', i), 'Visibility Timeout', i);
		const maxDeliveries =
			options.maxDeliveries === undefined || options.maxDeliveries === '' || options.maxDeliveries === null
				? {}
				: { maxDeliveries: toNumber(options.maxDeliveries) as number };
		let batch;
		try {
			batch = await fg.readBatch(ref.queue, {
				shards: ref.shards,
				limit,
				visibilityTimeoutMs,
				...maxDeliveries,
				...onlyShard(options),
			});
		} catch (error) {
			outputs.fail(i, error, {}, `Read Batch of queue "${ref.queue}" failed`);
			return;
		}
		for (const it of batch.items) {
			outputs.put(i, {
				json: {
					id: it.id,
					queue: ref.queue,
					shard: it.shard,
					owner: batch.owner,
					dueAt: it.dueAt,
					visibleUntil: batch.visibleUntil,
				},
				pairedItem: { item: i },
			});
		}
	});
	return [outputs.list()];
}
