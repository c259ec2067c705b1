import type { ItemResult, ItemState } from 'flowguard';
import type { IDataObject, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import type { FieldNames } from '../../shared/errors';
import { toText } from '../../shared/convert';
import { callBatch } from '../../shared/batch';
import { clean, ItemOutputs, withResult } from '../../shared/items';
import type { OperationContext } from '../../shared/router';

export const DEFAULT_FIELD = 'itemTracker';

/** The node's parameters behind the fields of `getItems` / `setItems`. */
export const FIELDS: FieldNames = {
	group: 'Group',
	id: 'Item ID',
	ids: 'Item ID',
	timeoutMs: 'Timeout',
	keepMs: 'Expire After',
	error: 'Error Message',
	owner: 'Owner Token',
	maxAttempts: 'Max Attempts',
	note: 'Note',
	result: 'Result',
};

/** One `setItems` request as the flowguard core takes it. */
export interface SetRequest {
	id: string;
	status: 'in_progress' | 'completed' | 'failed' | 'none';
	owner?: string;
	error?: string;
	timeoutMs?: number;
	keepMs?: number | 'forever';
	reclaimCompleted?: boolean;
	maxAttempts?: number;
	note?: string;
	result?: unknown;
}

interface Pending {
	itemIndex: number;
	request: SetRequest;
}

/** What an operation tells `trackItems` about one input item. */
export interface ItemInput {
	itemIndex: number;
	options: IDataObject;
	/** The Result Field of the item. */
	field: string;
	group: string;
	id: string;
}

/**
 * Get, Set and Unset: reads each item's Group and Item ID, lets the operation make its request,
 * then makes one batched call per group (a node execution usually has one group: one round trip
 * on Redis). `getItems` for Get, `setItems` for the others. A claim that was not granted is not an
 * error: with `twoOutputs` it goes to the second output (Skipped).
 */
export async function trackItems(
	op: OperationContext,
	operation: 'get' | 'set' | 'unset',
	request: (input: ItemInput) => SetRequest,
	twoOutputs = false,
): Promise<INodeExecutionData[][]> {
	const { ctx, items, params, fg } = op;
	const outputs = new ItemOutputs(ctx, items, FIELDS);
	const skipped: INodeExecutionData[] = [];
	const fieldOf: string[] = [];

	// Every item's request first; the core checks them all before it writes anything.
	const byGroup = new Map<unknown, Pending[]>();
	await outputs.each((i) => {
		const options = params.get('options', i, {}) as IDataObject;
		const field = (options.resultField as string) || DEFAULT_FIELD;
		fieldOf[i] = field;
		const group = toText(params.get('group', i)) as string;
		const id = toText(params.get('itemId', i)) as string;
		const pending = { itemIndex: i, request: request({ itemIndex: i, options, field, group, id }) };
		const list = byGroup.get(group) ?? [];
		list.push(pending);
		byGroup.set(group, list);
	});

	for (const [g, batch] of byGroup) {
		const group = g as string;
		const done = await callBatch(
			batch,
			async (left) =>
				operation === 'get'
					? await fg.getItems(
							group,
							left.map((p) => p.request.id),
						)
					: await fg.setItems(
							group,
							left.map((p) => p.request),
						),
			{
				refused: (p, error) => outputs.fail(p.itemIndex, error),
				// The whole call failed (Redis unreachable, invalid group): every item of the batch fails.
				failed: (left, error) => {
					const context = `Item Tracker ${operation} failed for group "${String(group)}"`;
					for (const p of left) outputs.fail(p.itemIndex, error, {}, context);
				},
			},
		);
		if (!done) continue;
		if (operation === 'get') {
			const states = done.result as ItemState[];
			done.entries.forEach((p, k) => outputs.result(p.itemIndex, fieldOf[p.itemIndex], clean({ group, ...states[k] })));
			continue;
		}
		const results = done.result as ItemResult[];
		done.entries.forEach((p, k) => {
			const r = results[k];
			const i = p.itemIndex;
			const result = clean({
				group,
				...r,
				// For Completed / Failed: whether the change was checked against a claim's owner token.
				...(r.action === 'complete' || r.action === 'fail' ? { ownerChecked: p.request.owner !== undefined } : {}),
			});
			if (r.ok || r.action === 'claim') {
				if (r.action === 'claim' && !r.claimed && twoOutputs) skipped.push(withResult(items[i], fieldOf[i], result, i));
				else outputs.result(i, fieldOf[i], result);
				return;
			}
			const notOwner = r.code === 'ERR_NOT_OWNER';
			const message = notOwner
				? `Item "${r.id}" of group "${group}" is now owned by a newer claim: not marked ${p.request.status}`
				: `Could not set item "${r.id}" of group "${group}": ${r.message ?? r.code ?? 'refused'}`;
			const error = new NodeOperationError(ctx.getNode(), message, {
				itemIndex: i,
				description: notOwner
					? 'The claim this item came from timed out and another run claimed the item again. That run now decides its status; this result is discarded so it does not overwrite the newer one.'
					: undefined,
			});
			outputs.fail(i, error, { [fieldOf[i]]: result });
		});
	}
	return twoOutputs ? [outputs.list(), skipped] : [outputs.list()];
}
