import type { IDataObject, INodeExecutionData } from 'n8n-workflow';

import type { FieldNames } from '../../shared/errors';
import { toText } from '../../shared/convert';
import { ItemOutputs, withResult } from '../../shared/items';
import type { OperationContext } from '../../shared/router';

export const DEFAULT_FIELD = 'lock';

/** The node's parameters behind the fields of the lock calls. */
export const FIELDS: FieldNames = {
	name: 'Lock Name',
	timeoutMs: 'Timeout',
	waitMs: 'Max Wait',
	label: 'Holder Label',
	owner: 'Owner Token',
	permits: 'Permits',
	key: 'Per Key › Key',
	perKey: 'Per Key › Limit',
};

/** The Permits parameter: 1 (the default) is a lock; more is a semaphore of that many holders. */
export const permitsProperty = {
	displayName: 'Permits',
	name: 'permits',
	type: 'number' as const,
	typeOptions: { minValue: 1, numberPrecision: 0 },
	default: 1,
	description:
		'How many runs may hold it at once. 1: a lock. More: a semaphore (for example at most 3 calls to an API at once); every node of one name must give the same number.',
};

/**
 * The Per Key parameter of Set (Permits above 1): a key (for example a customer ID) and the most
 * runs of that key at once, both checked with the total in one step (as Trigger.dev's
 * `concurrency: { perKey, total }`).
 */
export const perKeyProperty = {
	displayName: 'Per Key',
	name: 'perKey',
	type: 'fixedCollection' as const,
	placeholder: 'Add Per-Key Limit',
	default: {},
	description:
		'Also limit the runs of one key (for example a customer ID) among the Permits: a run gets a permit only if both the total and its key allow it. Needs Permits above 1.',
	displayOptions: { show: { operation: ['set'] } },
	options: [
		{
			displayName: 'Limit',
			name: 'limit',
			values: [
				{
					displayName: 'Key',
					name: 'key',
					type: 'string' as const,
					default: '',
					placeholder: 'e.g. {{ $json.customerId }}',
					description: 'The key this run counts toward',
				},
				{
					displayName: 'Limit',
					name: 'perKey',
					type: 'number' as const,
					typeOptions: { minValue: 1, numberPrecision: 0 },
					default: 1,
					description: 'The most runs of this key at once',
				},
			],
		},
	],
};

/** The item's Per Key (undefined when none is set). */
export function perKeyOf(op: OperationContext, itemIndex: number): { key: string; perKey: number } | undefined {
	const v = op.params.get('perKey', itemIndex, {}) as IDataObject;
	const limit = v?.limit as IDataObject | undefined;
	if (!limit) return undefined;
	return { key: toText(limit.key) as string, perKey: Number(limit.perKey) };
}

/** The item's Permits (1 when the node has none: workflows saved before it existed). */
export function permitsOf(op: OperationContext, itemIndex: number): number {
	const n = Number(op.params.get('permits', itemIndex, 1));
	return Number.isFinite(n) ? n : 1;
}

/** One item's lock call; items whose calls have the same `key` share one call. */
export interface LockCall {
	/** Identifies the call: the lock name and the settings that go into it. */
	key: string;
	name: string;
}

/** What an operation tells `runLockCalls` about one input item. */
export interface LockInput {
	itemIndex: number;
	options: IDataObject;
	/** The Result Field of the item. */
	field: string;
	name: string;
}

/**
 * Runs an operation's lock calls: plans one per item, then makes one call per distinct `key`
 * (items naming the same lock with the same settings share it: a flow whose trigger emits many
 * items takes its lock once, not once per item, which would lock itself out), all at once.
 * `check` looks at a call's result for each item: it returns 'second' to send the item to the
 * second output, or throws to fail it.
 */
export async function runLockCalls<C extends LockCall>(
	op: OperationContext,
	operation: string,
	plan: (input: LockInput) => C,
	call: (c: C) => Promise<IDataObject>,
	check: (c: C, r: IDataObject, itemIndex: number) => 'second' | void = () => undefined,
): Promise<{ main: INodeExecutionData[]; second: INodeExecutionData[] }> {
	const { ctx, items, params } = op;
	const outputs = new ItemOutputs(ctx, items, FIELDS);
	const second: INodeExecutionData[] = [];
	const fieldOf: string[] = [];

	const calls = new Map<string, Array<{ itemIndex: number; call: C }>>();
	await outputs.each((i) => {
		const options = params.get('options', i, {}) as IDataObject;
		fieldOf[i] = (options.resultField as string) || DEFAULT_FIELD;
		const name = toText(params.get('lockName', i)) as string;
		const c = plan({ itemIndex: i, options, field: fieldOf[i], name });
		const list = calls.get(c.key) ?? [];
		list.push({ itemIndex: i, call: c });
		calls.set(c.key, list);
	});

	const settled = await Promise.all(
		[...calls.values()].map(async (group) => {
			try {
				return { group, r: await call(group[0].call), error: undefined };
			} catch (error) {
				return { group, r: undefined, error: error as unknown };
			}
		}),
	);
	for (const { group, r, error } of settled) {
		for (const { itemIndex: i, call: c } of group) {
			if (!r) {
				outputs.fail(i, error, {}, `Concurrency Lock ${operation} of "${c.name}" failed`);
				continue;
			}
			try {
				if (check(c, r, i) === 'second') second.push(withResult(items[i], fieldOf[i], r, i));
				else outputs.result(i, fieldOf[i], r);
			} catch (e) {
				outputs.fail(i, e);
			}
		}
	}
	return { main: outputs.list(), second };
}
