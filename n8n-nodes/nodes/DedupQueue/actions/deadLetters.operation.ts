import type { IDataObject, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { toNumber } from '../../shared/convert';
import { ItemOutputs } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import { FIELDS, onlyShard, queueRef } from './queue';

export const option = {
	name: 'Dead Letters',
	value: 'deadLetters',
	description:
		'List the IDs a Read Batch with Max Deliveries moved aside (delivered that many times without an ack), oldest first; one output item per ID',
	action: 'List the dead letters of a queue',
};

export const description: INodeProperties[] = [
	{
		displayName: 'Limit',
		name: 'deadLimit',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: 1000, numberPrecision: 0 },
		default: 100,
		description: 'The most dead letters to list (1 to 1000), oldest death first',
		displayOptions: { show: { operation: ['deadLetters'] } },
	},
	{
		displayName: 'Offset',
		name: 'deadOffset',
		type: 'number',
		typeOptions: { minValue: 0, maxValue: 100000, numberPrecision: 0 },
		default: 0,
		description: 'Skip this many (the "nextOffset" of the previous page)',
		displayOptions: { show: { operation: ['deadLetters'] } },
	},
];

/**
 * One listing per input item. Each dead letter becomes an output item `{ id, queue, shard,
 * deliveries, diedAt, nextOffset? }` paired with that input item (nextOffset on the last one when
 * more follow), ready for a Requeue Dead node. No dead letter: no output item.
 */
export async function execute({ ctx, items, params, fg }: OperationContext): Promise<INodeExecutionData[][]> {
	const outputs = new ItemOutputs(ctx, items, { ...FIELDS, limit: 'Limit', offset: 'Offset' });
	await outputs.each(async (i) => {
		const options = params.get('options', i, {}) as IDataObject;
		const ref = queueRef(params, i);
		const limit = toNumber(params.get('deadLimit', i, 100)) as number;
		const offset = toNumber(params.get('deadOffset', i, 0)) as number;
		let page;
		try {
			page = await fg.deadLetters(ref.queue, { shards: ref.shards, limit, offset, ...onlyShard(options) });
		} catch (error) {
			outputs.fail(i, error, {}, `Dead Letters of queue "${ref.queue}" failed`);
			return;
		}
		page.items.forEach((d, k) => {
			const last = k === page.items.length - 1 && page.nextOffset !== undefined;
			outputs.put(i, {
				json: {
					id: d.id,
					queue: ref.queue,
					shard: d.shard,
					deliveries: d.deliveries,
					diedAt: d.diedAt,
					...(last ? { nextOffset: page.nextOffset } : {}),
				},
				pairedItem: { item: i },
			});
		});
	});
	return [outputs.list()];
}
