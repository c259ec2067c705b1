import type { Flowguard } from 'flowguard';
import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { openCalls } from '../../shared/backend';
import { secondsToMs, toNumber, toText } from '../../shared/convert';
import { ItemOutputs } from '../../shared/items';
import { ItemParameters } from '../../shared/params';

export type WhenLimited = 'wait' | 'output' | 'error';

export const DEFAULT_FIELD = 'rateLimit';
const RATE_LIMITED = 'Rate Limited';

/** The node's parameters behind the fields of the limiter call (named in errors). */
const FIELDS = {
	name: 'Limiter Name',
	limit: 'Limit',
	periodMs: 'Per (Seconds)',
	burst: 'Burst',
	maxWaitMs: 'Max Wait',
};

/** The limiter's parameters: its name, and how many items may pass per period. */
export const limiterProperties: INodeProperties[] = [
	{
		displayName: 'Limiter Name',
		name: 'limiterName',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'e.g. store-api',
		description: 'Name of the limit. Flows that share a limit (for example calls to one API) use the same name.',
	},
	{
		displayName: 'Limit',
		name: 'maxPerPeriod',
		type: 'number',
		typeOptions: { minValue: 1, numberPrecision: 0 },
		default: 2,
		description: 'How many items may pass per period, in total over every execution that uses this name',
	},
	{
		displayName: 'Per (Seconds)',
		name: 'period',
		type: 'number',
		typeOptions: { minValue: 0.001 },
		default: 1,
		description: 'The period of the limit, in seconds',
	},
];

export const burstOption: INodeProperties = {
	displayName: 'Burst',
	name: 'burst',
	type: 'number',
	typeOptions: { minValue: 1, numberPrecision: 0 },
	default: 1,
	description:
		'How many items may pass at once after a quiet time. 1: items are spaced evenly (Per / Limit apart), and no period holds more than Limit.',
};

/** One item's limiter: items with the same `key` share one limiter call. */
export interface Plan {
	key: string;
	name: string;
	opts: { limit: number; periodMs: number; burst?: number };
	maxWaitMs: number;
	field: string;
}

/** The items of one limiter call, in item order. */
export type Group = Array<{ itemIndex: number; plan: Plan }>;

/** What a When Limited choice's `execute` gets: the run's context, client and outputs. */
export interface LimitRun {
	ctx: IExecuteFunctions;
	items: INodeExecutionData[];
	fg: Pick<Flowguard, 'rateLimit' | 'waitRateLimit'>;
	whenLimited: WhenLimited;
	outputs: ItemOutputs;
	/** The items over the rate, for the Limited output. */
	limited: INodeExecutionData[];
}

/** A When Limited choice's handling of one group of items (one limiter). */
export type GroupExecute = (run: LimitRun, group: Group) => Promise<void>;

/** Fails item `i` with "Rate Limited" and when its limiter's next slot is. */
export function refuse(run: LimitRun, p: Plan, r: IDataObject, i: number): never {
	const retry = Math.ceil(Number(r.retryAfterMs ?? 0) / 1000);
	throw new NodeOperationError(run.ctx.getNode(), RATE_LIMITED, {
		itemIndex: i,
		description: `The limit "${p.name}" allows ${p.opts.limit} per ${p.opts.periodMs / 1000} s; the next slot for ${String(r.cost ?? 1)} item(s) is ${retry} s away${run.whenLimited === 'wait' ? `, more than Max Wait` : ''}.`,
	});
}

/** The node's run: one limiter call per group of items that share a limiter, by the When Limited choice. */
export async function limitItems(
	ctx: IExecuteFunctions,
	choices: Readonly<Record<WhenLimited, GroupExecute>>,
): Promise<INodeExecutionData[][]> {
	const items = ctx.getInputData();
	const params = new ItemParameters(ctx, items);
	const fg: LimitRun['fg'] = await openCalls(ctx);
	const whenLimited = ctx.getNodeParameter('whenLimited', 0, 'wait') as WhenLimited;
	const run: LimitRun = { ctx, items, fg, whenLimited, outputs: new ItemOutputs(ctx, items, FIELDS), limited: [] };

	// Items of one limiter go in one call: with Wait, one booking of a slot per item.
	const groups = new Map<string, Group>();
	await run.outputs.each((i) => {
		const options = params.get('options', i, {}) as IDataObject;
		const name = toText(params.get('limiterName', i)) as string;
		const opts = {
			limit: toNumber(params.get('maxPerPeriod', i)) as number,
			periodMs: secondsToMs(ctx, params.get('period', i), 'Per (Seconds)', i),
			...(options.burst !== undefined ? { burst: toNumber(options.burst) as number } : {}),
		};
		const maxWaitMs =
			whenLimited === 'wait'
				? secondsToMs(ctx, params.get('maxWait', i), 'Max Wait', i, {
						allowZero: true,
					})
				: 0;
		const plan = {
			key: JSON.stringify([name, opts, maxWaitMs]),
			name,
			opts,
			maxWaitMs,
			field: (options.resultField as string) || DEFAULT_FIELD,
		};
		const list = groups.get(plan.key) ?? [];
		list.push({ itemIndex: i, plan });
		groups.set(plan.key, list);
	});

	// Any other value than Wait or Route is handled as Fail.
	const execute = Object.prototype.hasOwnProperty.call(choices, whenLimited) ? choices[whenLimited] : choices.error;
	await Promise.all(
		[...groups.values()].map(async (group) => {
			try {
				await execute(run, group);
			} catch (error) {
				for (const { itemIndex: i, plan } of group) run.outputs.fail(i, error, {}, `Rate Limit of "${plan.name}" failed`);
			}
		}),
	);
	return whenLimited === 'output' ? [run.outputs.list(), run.limited] : [run.outputs.list()];
}
