import type { INodeProperties } from 'n8n-workflow';

import { clean } from '../../shared/items';
import type { Group, LimitRun } from './limiter';
import { refuse } from './limiter';

export const option = {
	name: 'Wait Until Allowed',
	value: 'wait',
	description: 'Book a slot for each item and wait for the last one, up to a maximum time, then fail',
};

export const description: INodeProperties[] = [
	{
		displayName: 'Max Wait (Seconds)',
		name: 'maxWait',
		type: 'number',
		typeOptions: { minValue: 0 },
		default: 60,
		description:
			'The longest time to wait for the slots of the items; when they are further away, nothing is booked and the node fails with "Rate Limited"',
		displayOptions: { show: { whenLimited: ['wait'] } },
	},
];

/** One booking of a slot per item of the group, in one call; each item waits for its own slot. */
export async function execute(run: LimitRun, group: Group): Promise<void> {
	const p = group[0].plan;
	const r = await run.fg.waitRateLimit(p.name, {
		...p.opts,
		cost: group.length,
		maxWaitMs: p.maxWaitMs,
	});
	group.forEach(({ itemIndex: i, plan }, j) => {
		const res = clean({
			name: r.name,
			allowed: r.allowed,
			slotAt: r.allowed ? Math.round(r.decidedAt + r.slotsMs[j]) : undefined,
			waitedMs: r.allowed ? Math.round(r.slotsMs[j]) : undefined,
			retryAfterMs: r.allowed ? undefined : r.retryAfterMs,
			cost: r.cost,
		});
		try {
			if (!r.allowed) refuse(run, plan, res, i);
			run.outputs.result(i, plan.field, res);
		} catch (e) {
			run.outputs.fail(i, e);
		}
	});
}
