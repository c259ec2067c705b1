import type { INodeExecutionData, INodeProperties } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { secondsToMs } from '../../shared/convert';
import { clean } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import { permitsOf, runLockCalls } from './calls';
import { ownerOf } from './owner';

export const option = {
	name: 'Extend',
	value: 'extend',
	description: 'Give the lock this flow holds more time',
	action: 'Extend a lock',
};

/** Extend's Timeout is shared with Set, its Owner Token with Unset. */
export const description: INodeProperties[] = [];

export async function execute(op: OperationContext): Promise<INodeExecutionData[][]> {
	const { ctx, params, fg } = op;
	const { main } = await runLockCalls(
		op,
		'extend',
		(input) => {
			const owner = ownerOf(op, input, 'Extend');
			const timeoutMs = secondsToMs(ctx, params.get('timeout', input.itemIndex), 'Timeout', input.itemIndex);
			const permits = permitsOf(op, input.itemIndex);
			return { key: JSON.stringify([input.name, owner, timeoutMs, permits]), name: input.name, owner, timeoutMs, permits };
		},
		async (c) => {
			const opts = { timeoutMs: c.timeoutMs };
			const r = c.permits === 1 ? await fg.extendLock(c.name, c.owner, opts) : await fg.extendPermit(c.name, c.owner, opts);
			return clean({ name: c.name, owner: c.owner, ...r });
		},
		(c, r, i) => {
			if (r.extended === true) return;
			throw new NodeOperationError(
				ctx.getNode(),
				`Lock "${c.name}" could not be extended: this flow no longer holds it${r.reason ? ` (${String(r.reason)})` : ''}`,
				{
					itemIndex: i,
					description:
						'The lock timed out and may now be held by another run. Stop the work it protects; raise the Timeout of Set, or extend sooner.',
				},
			);
		},
	);
	return [main];
}
