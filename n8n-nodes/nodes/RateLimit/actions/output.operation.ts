import { withResult } from '../../shared/items';
import type { Group, LimitRun } from './limiter';
import { takeTokens } from './tokens';

export const option = {
	name: 'Route to Limited Output',
	value: 'output',
	description: 'Send the items over the rate to a second output, "Limited"',
};

/** The items over the rate go to the second output, "Limited", with the limiter's answer. */
export async function execute(run: LimitRun, group: Group): Promise<void> {
	await takeTokens(run, group, (plan, res, i) => {
		run.limited.push(withResult(run.items[i], plan.field, res, i));
	});
}
