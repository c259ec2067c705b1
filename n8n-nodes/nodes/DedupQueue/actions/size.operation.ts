import type { IDataObject, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { clean, ItemOutputs } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import { FIELDS, onlyShard, queueRef } from './queue';

export const option = {
	name: 'Size',
	value: 'size',
	description: 'Count the waiting, due, claimed and dead IDs, in total and per shard',
	action: 'Get the size of a queue',
};

/** Size has no parameters of its own (Queue Name, Shards and Only Shard are the node's). */
export const description: INodeProperties[] = [];

export async function execute({ ctx, items, params, fg }: OperationContext): Promise<INodeExecutionData[][]> {
	const outputs = new ItemOutputs(ctx, items, FIELDS);
	await outputs.each(async (i) => {
		const options = params.get('options', i, {}) as IDataObject;
		const ref = queueRef(params, i);
		const only = onlyShard(options);
		let s;
		try {
			s = await fg.queueSize(ref.queue, { shards: ref.shards, ...only });
		} catch (error) {
			outputs.fail(i, error, {}, `Size of queue "${ref.queue}" failed`);
			return;
		}
		outputs.put(i, {
			json: clean({
				queue: ref.queue,
				...only,
				waiting: s.waiting,
				due: s.due,
				claimed: s.claimed,
				again: s.again,
				dead: s.dead,
				shards: s.shards.map((x) => ({ ...x })),
			}),
			pairedItem: { item: i },
		});
	});
	return [outputs.list()];
}
