import type { INodeExecutionData, INodeProperties } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { secondsToMs } from '../../shared/convert';
import { clean } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import type { LockCall } from './calls';
import { perKeyOf, permitsOf, runLockCalls } from './calls';
import { defaultLabel } from './holder';

type WhenLocked = 'error' | 'output' | 'wait';

const ALREADY_EXECUTING = 'Already Executing';

export const option = {
	name: 'Set',
	value: 'set',
	description: 'Take the lock',
	action: 'Set a lock',
};

export const description: INodeProperties[] = [
	{
		displayName: 'Timeout (Seconds)',
		name: 'timeout',
		type: 'number',
		typeOptions: { minValue: 0.001 },
		default: 600,
		description:
			'How long the lock lasts if the flow never unsets it (for example when it crashes). For Extend: the new time left.',
		displayOptions: { show: { operation: ['set', 'extend'] } },
	},
	{
		displayName: 'When Locked',
		name: 'whenLocked',
		type: 'options',
		options: [
			{
				name: 'Fail With "Already Executing"',
				value: 'error',
				description: 'Stop the flow with the error "Already Executing"',
			},
			{
				name: 'Route to Locked Output',
				value: 'output',
				description: 'Send the item to a second output, "Locked"',
			},
			{
				name: 'Wait',
				value: 'wait',
				description: 'Wait for the lock to be released, up to a maximum time, then fail',
			},
		],
		default: 'error',
		description: 'What to do when another run holds the lock',
		displayOptions: { show: { operation: ['set'] } },
	},
	{
		displayName: 'Max Wait (Seconds)',
		name: 'maxWait',
		type: 'number',
		typeOptions: { minValue: 0.001 },
		default: 60,
		description: 'The longest time to wait for the lock before failing with "Already Executing"',
		displayOptions: { show: { operation: ['set'], whenLocked: ['wait'] } },
	},
];

/** Set's entries in the node's Options collection. */
export const options: INodeProperties[] = [
	{
		displayName: 'Holder Label',
		name: 'label',
		type: 'string',
		default: '',
		description: 'Shown to runs that find the lock held. Empty: the workflow name and execution ID.',
		displayOptions: { show: { '/operation': ['set'] } },
	},
];

interface SetCall extends LockCall {
	timeoutMs: number;
	waitMs?: number;
	whenLocked: WhenLocked;
	label: string;
	permits: number;
	perKey?: { key: string; perKey: number };
}

export async function execute(op: OperationContext): Promise<INodeExecutionData[][]> {
	const { ctx, params, fg } = op;
	// With "When Locked: Route to Locked Output", Set has a second output for the items that found the lock held.
	const twoOutputs = ctx.getNode().parameters.whenLocked === 'output';
	let label: string | undefined;
	const { main, second } = await runLockCalls<SetCall>(
		op,
		'set',
		({ itemIndex: i, options, name }) => {
			const timeoutMs = secondsToMs(ctx, params.get('timeout', i), 'Timeout', i);
			const whenLocked = params.get('whenLocked', i, 'error') as WhenLocked;
			const waitMs = whenLocked === 'wait' ? secondsToMs(ctx, params.get('maxWait', i), 'Max Wait', i) : undefined;
			const permits = permitsOf(op, i);
			const perKey = perKeyOf(op, i);
			if (perKey && permits === 1) {
				throw new NodeOperationError(ctx.getNode(), 'Per Key needs Permits above 1', {
					itemIndex: i,
					description: 'A per-key limit shares a semaphore of more than one permit: set Permits to the total, or remove Per Key.',
				});
			}
			const c = { name, timeoutMs, waitMs, whenLocked, permits, perKey, label: (options.label as string) || (label ??= defaultLabel(ctx)) };
			return { ...c, key: JSON.stringify([name, timeoutMs, waitMs ?? 0, c.label, permits, perKey ?? null]) };
		},
		async (c) => {
			const opts = { timeoutMs: c.timeoutMs, ...(c.waitMs ? { waitMs: c.waitMs } : {}), label: c.label };
			// Permits above 1: one of that many permits of the semaphore of this name.
			// Per Key: the key's limit too, in the same step.
			return clean(c.permits === 1 ? await fg.acquireLock(c.name, opts) : await fg.acquirePermit(c.name, { ...opts, permits: c.permits, ...c.perKey }));
		},
		(c, r, i) => {
			if (r.acquired === true) return;
			if (c.whenLocked === 'output' && twoOutputs) return 'second';
			const left = Math.ceil(Number(r.remainingMs ?? 0) / 1000);
			const keyFull = c.perKey && Number(r.keyHolders) >= c.perKey.perKey;
			const holder = r.holder
				? ` by ${String(r.holder)}`
				: keyFull
					? ` (all ${c.perKey?.perKey} permits of key "${c.perKey?.key}")`
					: c.permits > 1
						? ` (all ${c.permits} permits)`
						: '';
			const waited = c.whenLocked === 'wait' ? ` (waited ${Math.round(Number(r.waitedMs ?? 0) / 1000)} s)` : '';
			throw new NodeOperationError(ctx.getNode(), ALREADY_EXECUTING, {
				itemIndex: i,
				description: `The lock "${c.name}" is held${holder} for another ${left} s${waited}. Another run of this flow is executing.`,
			});
		},
	);
	return twoOutputs ? [main, second] : [main];
}
