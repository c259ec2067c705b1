import type { IDataObject, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { secondsToMs, toText } from '../../shared/convert';
import { clean, ItemOutputs } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import { maxAttempts } from './set.operation';

export const option = {
	name: 'Retry',
	value: 'retry',
	description: 'Claim the failed and/or dead items of a group again, in one call (Bull Board\'s "retry")',
	action: 'Retry the failed or dead items of a group',
};

export const description: INodeProperties[] = [
	{
		displayName: 'Retry',
		name: 'retryStatus',
		type: 'options',
		options: [
			{ name: 'Dead Items', value: 'dead', description: 'Items that failed at their last allowed attempt (Max Attempts)' },
			{ name: 'Failed Items', value: 'failed' },
			{ name: 'Failed and Dead Items', value: 'both' },
		],
		default: 'both',
		displayOptions: { show: { operation: ['retry'] } },
	},
	{
		displayName: 'Reset Attempts',
		name: 'resetAttempts',
		type: 'boolean',
		default: false,
		description:
			"Whether to start the items' attempts again at 0 (a whole new Max Attempts budget, BullMQ's resetAttemptsMade). Off: attempts are kept, so a dead item gets one more attempt.",
		displayOptions: { show: { operation: ['retry'] } },
	},
	{
		displayName: 'Timeout (Seconds)',
		name: 'retryTimeout',
		type: 'number',
		typeOptions: { minValue: 0.001 },
		default: 600,
		description: 'How long each claim lasts (as Set In Progress)',
		displayOptions: { show: { operation: ['retry'] } },
	},
	{
		displayName: 'Max Attempts',
		name: 'retryMaxAttempts',
		type: 'number',
		typeOptions: { minValue: 0, maxValue: 1000 },
		default: 0,
		description: 'How many attempts each item gets (0: no limit), as the Max Attempts option of Set In Progress',
		displayOptions: { show: { operation: ['retry'] } },
	},
	{
		displayName: 'Limit',
		name: 'retryLimit',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: 10000 },
		default: 1000,
		description: 'Max number of items to retry in one execution',
		displayOptions: { show: { operation: ['retry'] } },
	},
];

const PAGE = 500;

/**
 * Per group of the input items (once each): the ids of its dead (and/or failed) items, read by
 * pages up to Limit; the dead ones revived (`reviveItems`, attempts kept unless Reset Attempts);
 * then all of them claimed in one `setItems` call. One output item per item claimed, with its
 * owner token (as Set In Progress outputs it, so a later Set Completed / Failed finds it).
 */
export async function execute({ ctx, items, params, fg }: OperationContext): Promise<INodeExecutionData[][]> {
	const outputs = new ItemOutputs(ctx, items, { group: 'Group', timeoutMs: 'Timeout', maxAttempts: 'Max Attempts' });
	const seen = new Set<string>();
	await outputs.each(async (i) => {
		const group = toText(params.get('group', i)) as string;
		if (seen.has(group)) return;
		seen.add(group);
		const which = params.get('retryStatus', i, 'both') as 'dead' | 'failed' | 'both';
		const reset = params.get('resetAttempts', i, false) === true;
		const limit = params.get('retryLimit', i, 1000) as number;
		const budget = maxAttempts({ maxAttempts: params.get('retryMaxAttempts', i, 0) as IDataObject[string] });
		const timeoutMs = secondsToMs(ctx, params.get('retryTimeout', i), 'Timeout', i);
		const statuses: Array<'dead' | 'failed'> = which === 'both' ? ['dead', 'failed'] : [which];
		const found: Record<'dead' | 'failed', string[]> = { dead: [], failed: [] };
		for (const status of statuses) {
			let offset = 0;
			while (found.dead.length + found.failed.length < limit) {
				const want = Math.min(PAGE, limit - found.dead.length - found.failed.length);
				const page = await fg.listItems(group, { status, offset, limit: want });
				for (const it of page.items) found[status].push(it.id);
				if (page.nextOffset === undefined || page.nextOffset === null) break;
				offset = page.nextOffset;
			}
		}
		// Dead items first made claimable; failed ones are claimable already (revived too with
		// Reset Attempts, for their new budget).
		const revive = reset ? [...found.dead, ...found.failed] : found.dead;
		if (revive.length) await fg.reviveItems(group, revive, { failed: reset, resetAttempts: reset });
		const ids = [...found.dead, ...found.failed];
		if (!ids.length) return;
		const claim = { status: 'in_progress' as const, timeoutMs, ...budget };
		const results = await fg.setItems(group, ids.map((id) => ({ id, ...claim })));
		outputs.put(
			i,
			...results
				.filter((r) => r.claimed)
				.map((r) => ({ json: clean({ group, ...r, retried: true }), pairedItem: { item: i } })),
		);
	});
	return [outputs.list()];
}
