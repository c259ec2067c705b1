import type { INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { clean } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import { runLockCalls } from './calls';

export const option = {
	name: 'Get',
	value: 'get',
	description: 'Whether the lock is held, for how long, and its fencing token',
	action: 'Get a lock',
};

/** Get has no parameters of its own (Lock Name and the options are the node's). */
export const description: INodeProperties[] = [];

export async function execute(op: OperationContext): Promise<INodeExecutionData[][]> {
	const { main } = await runLockCalls(
		op,
		'get',
		({ name }) => ({ key: name, name }),
		async (c) => clean(await op.fg.getLock(c.name)),
	);
	return [main];
}
