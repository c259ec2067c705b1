import type { IDataObject, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { toText } from '../../shared/convert';
import { clean, ItemOutputs } from '../../shared/items';
import type { OperationContext } from '../../shared/router';

export const option = {
	name: 'List',
	value: 'list',
	description: 'List the items of a group by status, with counts',
	action: 'List the items of a group',
};

export const description: INodeProperties[] = [
	{
		displayName: 'Status Filter',
		name: 'listStatus',
		type: 'options',
		options: [
			{ name: 'Abandoned', value: 'abandoned', description: 'In progress, but the claim timed out' },
			{ name: 'All', value: 'all' },
			{ name: 'Completed', value: 'completed' },
			{ name: 'Dead', value: 'dead', description: 'Failed at its last allowed attempt (Max Attempts); skipped by claims until retried' },
			{ name: 'Failed', value: 'failed' },
			{ name: 'In Progress', value: 'in_progress', description: 'Claimed, claim still running' },
		],
		default: 'all',
		displayOptions: { show: { operation: ['list'] } },
	},
	{
		displayName: 'Return All',
		name: 'returnAll',
		type: 'boolean',
		default: false,
		description: 'Whether to return all results or only up to a given limit',
		displayOptions: { show: { operation: ['list'] } },
	},
	{
		displayName: 'Limit',
		name: 'limit',
		type: 'number',
		typeOptions: { minValue: 1 },
		default: 50,
		description: 'Max number of results to return',
		displayOptions: { show: { operation: ['list'], returnAll: [false] } },
	},
	{
		displayName: 'Output',
		name: 'listOutput',
		type: 'options',
		options: [
			{
				name: 'Summary',
				value: 'summary',
				description: 'One item with the counts per status and the list of items',
			},
			{
				name: 'One Item per Tracked Item',
				value: 'items',
				description: 'One output item per tracked item (counts are left out)',
			},
		],
		default: 'summary',
		displayOptions: { show: { operation: ['list'] } },
	},
];

const PAGE = 500;

/** One listing per input item, read in pages of 500 up to Limit. */
export async function execute({ ctx, items, params, fg }: OperationContext): Promise<INodeExecutionData[][]> {
	const outputs = new ItemOutputs(ctx, items, { group: 'Group', status: 'Status Filter', limit: 'Limit' });
	await outputs.each(async (i) => {
		const group = toText(params.get('group', i)) as string;
		const status = params.get('listStatus', i, 'all') as 'all' | 'in_progress' | 'abandoned' | 'completed' | 'failed' | 'dead';
		const returnAll = params.get('returnAll', i, false) as boolean;
		const limit = returnAll ? Infinity : (params.get('limit', i, 50) as number);
		const mode = params.get('listOutput', i, 'summary') as 'summary' | 'items';
		let offset = 0;
		let counts: IDataObject = {};
		const tracked: IDataObject[] = [];
		let nextOffset: number | undefined;
		for (;;) {
			const want = Math.min(PAGE, limit - tracked.length);
			const r = await fg.listItems(group, { status, offset, limit: want });
			counts = { ...r.counts };
			for (const it of r.items) tracked.push(clean({ group, ...it }));
			nextOffset = r.nextOffset ?? undefined;
			if (nextOffset === undefined || tracked.length >= limit) break;
			offset = nextOffset;
		}
		if (mode === 'items') {
			outputs.put(i, ...tracked.map((t) => ({ json: t, pairedItem: { item: i } })));
		} else {
			outputs.put(i, {
				json: clean({ group, status, counts, items: tracked, nextOffset }),
				pairedItem: { item: i },
			});
		}
	});
	return [outputs.list()];
}
