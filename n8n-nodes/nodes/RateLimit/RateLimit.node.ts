import type { IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import { backendProperty, credentialTest, keyPrefixOptions } from '../shared/backend';
import { NODE_VERSION, resultFieldOption, SERVER_BACKEND } from '../shared/descriptions';
import * as backOff from './actions/backOff.operation';
import * as error from './actions/error.operation';
import { burstOption, DEFAULT_FIELD, limiterProperties, limitItems } from './actions/limiter';
import * as output from './actions/output.operation';
import * as wait from './actions/wait.operation';

/** The parameters of the Limit operation only. */
const LIMIT = { show: { operation: ['limit'] } };

export class RateLimit implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Rate Limit',
		name: 'rateLimit',
		icon: { light: 'file:rateLimit.svg', dark: 'file:rateLimit.dark.svg' },
		group: ['transform'],
		...NODE_VERSION,
		usableAsTool: true,
		subtitle:
			'={{ $parameter["operation"] === "backOff" ? "back off: " + $parameter["limiterName"] : $parameter["maxPerPeriod"] + " per " + $parameter["period"] + " s: " + $parameter["limiterName"] }}',
		description: 'Let at most N items per period through, across every execution and worker (GCRA)',
		defaults: {
			name: 'Rate Limit',
		},
		inputs: [NodeConnectionTypes.Main],
		// With "When Limited: Route to Limited Output" (Limit), a second output for the items over the rate.
		outputs: `={{ $parameter["operation"] !== "backOff" && $parameter["whenLimited"] === "output" ? [{ type: "${NodeConnectionTypes.Main}", displayName: "Allowed" }, { type: "${NodeConnectionTypes.Main}", displayName: "Limited" }] : ["${NodeConnectionTypes.Main}"] }}`,
		credentials: [
			{ name: 'flowguardRedisApi', required: true, testedBy: 'flowguardRedisConnectionTest', displayOptions: { show: { backend: ['redis'] } } },
			{ name: 'flowguardPostgresApi', required: true, testedBy: 'flowguardPostgresConnectionTest', displayOptions: { show: { backend: ['postgres'] } } },
			{ name: 'flowguardServerApi', required: true, testedBy: 'flowguardServerConnectionTest', displayOptions: SERVER_BACKEND },
		],
		properties: [
			backendProperty,
			{
				displayName: 'Operation',
				name: 'operation',
				type: 'options',
				noDataExpression: true,
				options: [
					{
						name: 'Limit',
						value: 'limit',
						description: 'Let at most Limit items per period through',
						action: 'Let at most n items per period through',
					},
					{
						name: 'Back Off',
						value: 'backOff',
						description:
							"Pause the limit for every flow that uses it until an upstream's Retry-After (after a 429 answer), as BullMQ's worker.rateLimit does",
						action: 'Pause the limit until an upstream retry after',
					},
				],
				default: 'limit',
			},
			...limiterProperties.map((p) => (p.name === 'limiterName' ? p : { ...p, displayOptions: LIMIT })),
			{
				displayName: 'When Limited',
				name: 'whenLimited',
				type: 'options',
				options: [wait.option, output.option, error.option],
				default: 'wait',
				description: 'What to do with items over the rate',
				displayOptions: LIMIT,
			},
			...wait.description.map((p) => ({ ...p, displayOptions: { show: { ...p.displayOptions?.show, ...LIMIT.show } } })),
			...backOff.description,
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				options: [burstOption, ...keyPrefixOptions, resultFieldOption(DEFAULT_FIELD)],
			},
		],
	};

	methods = { credentialTest };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		if (this.getNodeParameter('operation', 0, 'limit') === 'backOff') return await backOff.execute(this);
		return await limitItems(this, { wait: wait.execute, output: output.execute, error: error.execute });
	}
}
