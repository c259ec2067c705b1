import type { Group, LimitRun } from './limiter';
import { refuse } from './limiter';
import { takeTokens } from './tokens';

export const option = {
	name: 'Fail With "Rate Limited"',
	value: 'error',
	description: 'Stop the flow with the error "Rate Limited"',
};

/** The items over the rate fail with "Rate Limited". */
export async function execute(run: LimitRun, group: Group): Promise<void> {
	await takeTokens(run, group, (plan, res, i) => refuse(run, plan, res, i));
}
