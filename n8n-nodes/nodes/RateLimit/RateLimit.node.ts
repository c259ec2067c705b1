import type { Flowguard, RateLimitResult } from 'flowguard';
import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';

import { clientFor } from '../shared/client';
import { serverClientFor } from '../shared/server';
import { secondsToMs, toNumber, toText } from '../shared/convert';
import { credentialTest } from '../shared/credentialTest';
import { backendProperty, keyPrefixOption, NODE_VERSIONS, REDIS_V1, REDIS_V2, resultFieldOption, SERVER_BACKEND } from '../shared/descriptions';
import { clean, ItemOutputs, withResult } from '../shared/items';
import { ItemParameters } from '../shared/params';

type WhenLimited = 'wait' | 'output' | 'error';

const DEFAULT_FIELD = 'rateLimit';
const RATE_LIMITED = 'Rate Limited';

/** The node's parameters behind the fields of the limiter call (named in errors). */
const FIELDS = {
	name: 'Limiter Name',
	limit: 'Limit',
	periodMs: 'Per (Seconds)',
	burst: 'Burst',
	maxWaitMs: 'Max Wait',
};

/** One item's limiter: items with the same `key` share one limiter call. */
interface Plan {
	key: string;
	name: string;
	opts: { limit: number; periodMs: number; burst?: number };
	maxWaitMs: number;
	field: string;
}

export class RateLimit implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Rate Limit',
		name: 'rateLimit',
		icon: { light: 'file:rateLimit.svg', dark: 'file:rateLimit.dark.svg' },
		group: ['transform'],
		...NODE_VERSIONS,
		usableAsTool: true,
		subtitle: '={{ $parameter["maxPerPeriod"] + " per " + $parameter["period"] + " s: " + $parameter["limiterName"] }}',
		description: 'Let at most N items per period through, across every execution and worker (GCRA)',
		defaults: {
			name: 'Rate Limit',
		},
		inputs: [NodeConnectionTypes.Main],
		// With "When Limited: Route to Limited Output", a second output for the items over the rate.
		outputs: `={{ $parameter["whenLimited"] === "output" ? [{ type: "${NodeConnectionTypes.Main}", displayName: "Allowed" }, { type: "${NodeConnectionTypes.Main}", displayName: "Limited" }] : ["${NodeConnectionTypes.Main}"] }}`,
		credentials: [
			// n8n's own Redis credential (version 1), this package's flowguard Redis credential (version 2).
			// eslint-disable-next-line @n8n/community-nodes/valid-credential-references
			{ name: 'redis', required: true, displayOptions: REDIS_V1 },
			{
				name: 'flowguardRedisApi',
				required: true,
				testedBy: 'flowguardRedisConnectionTest',
				displayOptions: REDIS_V2,
			},
			{ name: 'flowguardServerApi', required: true, testedBy: 'flowguardServerConnectionTest', displayOptions: SERVER_BACKEND },
		],
		properties: [
			backendProperty,
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
			{
				displayName: 'When Limited',
				name: 'whenLimited',
				type: 'options',
				options: [
					{
						name: 'Wait Until Allowed',
						value: 'wait',
						description: 'Book a slot for each item and wait for the last one, up to a maximum time, then fail',
					},
					{
						name: 'Route to Limited Output',
						value: 'output',
						description: 'Send the items over the rate to a second output, "Limited"',
					},
					{
						name: 'Fail With "Rate Limited"',
						value: 'error',
						description: 'Stop the flow with the error "Rate Limited"',
					},
				],
				default: 'wait',
				description: 'What to do with items over the rate',
			},
			{
				displayName: 'Max Wait (Seconds)',
				name: 'maxWait',
				type: 'number',
				typeOptions: { minValue: 0 },
				default: 60,
				description:
					'The longest time to wait for the slots of the items; when they are further away, nothing is booked and the node fails with "Rate Limited"',
				displayOptions: { show: { whenLimited: ['wait'] } },
			},
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				options: [
					{
						displayName: 'Burst',
						name: 'burst',
						type: 'number',
						typeOptions: { minValue: 1, numberPrecision: 0 },
						default: 1,
						description:
							'How many items may pass at once after a quiet time. 1: items are spaced evenly (Per / Limit apart), and no period holds more than Limit.',
					},
					keyPrefixOption,
					resultFieldOption(DEFAULT_FIELD),
				],
			},
		],
	};

	methods = { credentialTest };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await limitItems(this);
	}
}

/** The node's run: one limiter call per group of items that share a limiter. */
async function limitItems(ctx: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const items = ctx.getInputData();
	const params = new ItemParameters(ctx, items);
	// The flowguard server backend never loads the native addon (see addon.ts).
	const fg: Pick<Flowguard, 'rateLimit' | 'waitRateLimit'> =
		ctx.getNodeParameter('backend', 0, 'embedded') === 'server' ? await serverClientFor(ctx) : await clientFor(ctx);
	const whenLimited = ctx.getNodeParameter('whenLimited', 0, 'wait') as WhenLimited;
	const outputs = new ItemOutputs(ctx, items, FIELDS);
	const limited: INodeExecutionData[] = [];

	// Items of one limiter go in one call: with Wait, one booking of a slot per item.
	const groups = new Map<string, Array<{ itemIndex: number; plan: Plan }>>();
	await outputs.each((i) => {
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

	const refuse = (p: Plan, r: IDataObject, i: number) => {
		const retry = Math.ceil(Number(r.retryAfterMs ?? 0) / 1000);
		throw new NodeOperationError(ctx.getNode(), RATE_LIMITED, {
			itemIndex: i,
			description: `The limit "${p.name}" allows ${p.opts.limit} per ${p.opts.periodMs / 1000} s; the next slot for ${String(r.cost ?? 1)} item(s) is ${retry} s away${whenLimited === 'wait' ? `, more than Max Wait` : ''}.`,
		});
	};

	await Promise.all(
		[...groups.values()].map(async (group) => {
			const p = group[0].plan;
			try {
				if (whenLimited === 'wait') {
					const r = await fg.waitRateLimit(p.name, {
						...p.opts,
						cost: group.length,
						maxWaitMs: p.maxWaitMs,
					});
					group.forEach(({ itemIndex: i, plan }, j) => {
						const res = clean({
							name: r.name,
							allowed: r.allowed,
							slotAt: r.allowed ? Math.round(r.decidedAt + r.slotsMs[j]) : undefined,
							waitedMs: r.allowed ? Math.round(r.slotsMs[j]) : undefined,
							retryAfterMs: r.allowed ? undefined : r.retryAfterMs,
							cost: r.cost,
						});
						try {
							if (!r.allowed) refuse(plan, res, i);
							outputs.result(i, plan.field, res);
						} catch (e) {
							outputs.fail(i, e);
						}
					});
					return;
				}
				// Route or Fail: one token per item, in item order, until the first refusal.
				let open = true;
				for (const { itemIndex: i, plan } of group) {
					const r: RateLimitResult | undefined = open ? await fg.rateLimit(plan.name, plan.opts) : undefined;
					const res = r
						? clean({
								name: r.name,
								allowed: r.allowed,
								remaining: r.remaining,
								retryAfterMs: r.retryAfterMs,
								slotAt: r.allowed ? Math.round(r.decidedAt) : undefined,
							})
						: { name: plan.name, allowed: false };
					open = r?.allowed === true;
					try {
						if (res.allowed) outputs.result(i, plan.field, res);
						else if (whenLimited === 'output') limited.push(withResult(items[i], plan.field, res, i));
						else refuse(plan, res, i);
					} catch (e) {
						outputs.fail(i, e);
					}
				}
			} catch (error) {
				for (const { itemIndex: i, plan } of group) outputs.fail(i, error, {}, `Rate Limit of "${plan.name}" failed`);
			}
		}),
	);
	return whenLimited === 'output' ? [outputs.list(), limited] : [outputs.list()];
}
