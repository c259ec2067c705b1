import type { INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { clean } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import { permitsOf, runLockCalls } from './calls';

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
		({ name, itemIndex }) => {
			const permits = permitsOf(op, itemIndex);
			return { key: JSON.stringify([name, permits]), name, permits };
		},
		async (c) => {
			if (c.permits === 1) return clean(await op.fg.getLock(c.name));
			// A semaphore: locked when all its permits are held.
			const s = await op.fg.getSemaphore(c.name);
			// keys: the holders per key (Per Key).
			return clean({ name: s.name, locked: s.holders.length >= c.permits, permits: c.permits, fence: s.fence, holders: s.holders.map((h) => clean({ ...h })), keys: { ...s.keys } });
		},
	);
	return [main];
}
