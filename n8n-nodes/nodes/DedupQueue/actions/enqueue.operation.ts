import type { IDataObject, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { secondsToMs, toText } from '../../shared/convert';
import { callBatch } from '../../shared/batch';
import { ItemOutputs } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import type { QueueRef } from './queue';
import { DEFAULT_FIELD, FIELDS, queueRef } from './queue';

export const option = {
	name: 'Enqueue',
	value: 'enqueue',
	description: 'Add IDs to the queue; an ID already waiting is not added again',
	action: 'Enqueue items',
};

export const description: INodeProperties[] = [
	{
		displayName: 'Item IDs',
		name: 'ids',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'e.g. {{ $json.productId }}',
		description:
			'ID to enqueue, usually an expression. An expression that yields an array enqueues each of its elements. All the IDs of an execution are enqueued in one call.',
		displayOptions: { show: { operation: ['enqueue'] } },
	},
];

/** Enqueue's entry in the node's Options collection (Delay is shared with Release). */
export const options: INodeProperties[] = [
	{
		displayName: 'Debounce',
		name: 'debounce',
		type: 'boolean',
		default: false,
		description:
			'Whether enqueueing an ID that is already waiting moves its due time to now + Delay (instead of keeping its first one), so that it is read only once updates to it stop',
		displayOptions: { show: { '/operation': ['enqueue'] } },
	},
	{
		displayName: 'Max Delay (Seconds)',
		name: 'maxDelay',
		type: 'number',
		typeOptions: { minValue: 0 },
		default: 60,
		description:
			"With Debounce only: an ID's due time is never moved past its first enqueue + this many seconds, so an ID that keeps being enqueued is still read (Trigger.dev's maxDelay). Counted from the first enqueue with Max Delay since the ID last entered the queue; a read starts a new count.",
		displayOptions: { show: { '/operation': ['enqueue'] } },
	},
];

interface Plan {
	itemIndex: number;
	ids: string[];
	/** The expression gave one ID (not an array): the result names that ID. */
	single: boolean;
}

/** Items of the same queue (and settings) go to one call: one atomic step per shard on Redis. */
export async function execute({ ctx, items, params, fg }: OperationContext): Promise<INodeExecutionData[][]> {
	const outputs = new ItemOutputs(ctx, items, FIELDS);
	const fieldOf: string[] = [];
	const calls = new Map<
		string,
		{ ref: QueueRef; delayMs: number; debounce: boolean; maxDelayMs: number | undefined; plans: Plan[] }
	>();
	await outputs.each((i) => {
		const options = params.get('options', i, {}) as IDataObject;
		fieldOf[i] = (options.resultField as string) || DEFAULT_FIELD;
		const ref = queueRef(params, i);
		const raw = params.get('ids', i);
		const single = !Array.isArray(raw);
		const ids = (single ? [raw] : (raw as unknown[])).map(toText) as string[];
		const delayMs = secondsToMs(ctx, options.delay ?? 0, 'Delay', i, { allowZero: true });
		const debounce = options.debounce === true;
		// Given to the core as set (without Debounce it refuses it, naming Max Delay).
		const maxDelayMs = options.maxDelay === undefined ? undefined : secondsToMs(ctx, options.maxDelay, 'Max Delay', i);
		const key = JSON.stringify([ref.queue, ref.shards, delayMs, debounce, maxDelayMs]);
		const call = calls.get(key) ?? { ref, delayMs, debounce, maxDelayMs, plans: [] };
		call.plans.push({ itemIndex: i, ids, single });
		calls.set(key, call);
	});

	for (const { ref, delayMs, debounce, maxDelayMs, plans } of calls.values()) {
		const done = await callBatch(
			plans,
			async (left) =>
				await fg.enqueue(
					ref.queue,
					left.flatMap((p) => p.ids),
					{
						shards: ref.shards,
						...(delayMs > 0 ? { delayMs } : {}),
						...(debounce ? { debounce } : {}),
						...(maxDelayMs !== undefined ? { maxDelayMs } : {}),
					},
				),
			{
				refused: (p, error) => outputs.fail(p.itemIndex, error),
				// The whole call failed (Redis unreachable, invalid queue): every item of it fails.
				failed: (left, error) => {
					for (const p of left) outputs.fail(p.itemIndex, error, {}, `Enqueue to queue "${ref.queue}" failed`);
				},
				entryOf: (left, k) => {
					for (let j = 0, end = 0; j < left.length; j++) if (k < (end += left[j].ids.length)) return j;
					return -1;
				},
			},
		);
		if (!done) continue;
		let offset = 0;
		for (const p of done.entries) {
			const mine = done.result.items.slice(offset, offset + p.ids.length);
			offset += p.ids.length;
			const count = (o: string) => mine.filter((e) => e.outcome === o).length;
			const result: IDataObject = p.single
				? { queue: ref.queue, ...mine[0] }
				: {
						queue: ref.queue,
						added: count('added'),
						duplicates: count('duplicate'),
						debounced: count('debounced'),
						claimed: count('claimed'),
						items: mine.map((e) => ({ ...e })),
					};
			outputs.result(p.itemIndex, fieldOf[p.itemIndex], result);
		}
	}
	return [outputs.list()];
}
