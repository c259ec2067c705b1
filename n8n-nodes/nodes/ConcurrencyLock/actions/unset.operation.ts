import type { INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { clean } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import { permitsOf, runLockCalls } from './calls';
import { ownerOf } from './owner';

export const option = {
	name: 'Unset',
	value: 'unset',
	description: 'Release the lock this flow took',
	action: 'Unset a lock',
};

/** Unset's Owner Token is shared with Extend (see owner.ts). */
export const description: INodeProperties[] = [];

export async function execute(op: OperationContext): Promise<INodeExecutionData[][]> {
	const { main } = await runLockCalls(
		op,
		'unset',
		(input) => {
			const owner = ownerOf(op, input, 'Unset');
			const permits = permitsOf(op, input.itemIndex);
			return { key: JSON.stringify([input.name, owner, permits]), name: input.name, owner, permits };
		},
		async (c) =>
			clean({ name: c.name, ...(await (c.permits === 1 ? op.fg.releaseLock(c.name, c.owner) : op.fg.releasePermit(c.name, c.owner))) }),
	);
	return [main];
}
