import type { RateLimitResult } from 'flowguard';
import type { IDataObject } from 'n8n-workflow';

import { clean } from '../../shared/items';
import type { Group, LimitRun, Plan } from './limiter';

/**
 * Route and Fail: one token per item, in item order, until the first refusal. `limited` handles
 * each item over the rate (it throws to fail the item).
 */
export async function takeTokens(
	run: LimitRun,
	group: Group,
	limited: (plan: Plan, res: IDataObject, itemIndex: number) => void,
): Promise<void> {
	let open = true;
	for (const { itemIndex: i, plan } of group) {
		const r: RateLimitResult | undefined = open ? await run.fg.rateLimit(plan.name, plan.opts) : undefined;
		const res = r
			? clean({
					name: r.name,
					allowed: r.allowed,
					remaining: r.remaining,
					retryAfterMs: r.retryAfterMs,
					slotAt: r.allowed ? Math.round(r.decidedAt) : undefined,
				})
			: { name: plan.name, allowed: false };
		open = r?.allowed === true;
		try {
			if (res.allowed) run.outputs.result(i, plan.field, res);
			else limited(plan, res, i);
		} catch (e) {
			run.outputs.fail(i, e);
		}
	}
}
