import type { IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import { backendProperty, credentialTest, keyPrefixOptions, memoryOnlyOptions } from '../shared/backend';
import { NODE_VERSION, resultFieldOption, SERVER_BACKEND } from '../shared/descriptions';
import { route } from '../shared/router';
import * as ack from './actions/ack.operation';
import * as deadLetters from './actions/deadLetters.operation';
import * as enqueue from './actions/enqueue.operation';
import { DEFAULT_FIELD, MAX_SHARDS } from './actions/queue';
import * as readBatch from './actions/readBatch.operation';
import * as release from './actions/release.operation';
import * as requeueDead from './actions/requeueDead.operation';
import { itemIdProperty, receiptOption } from './actions/settle';
import * as size from './actions/size.operation';

export class DedupQueue implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Dedup Queue',
		name: 'dedupQueue',
		icon: { light: 'file:dedupQueue.svg', dark: 'file:dedupQueue.dark.svg' },
		group: ['transform'],
		...NODE_VERSION,
		usableAsTool: true,
		subtitle:
			'={{ ({ enqueue: "Enqueue", readBatch: "Read Batch", ack: "Ack", release: "Release", size: "Size", deadLetters: "Dead Letters", requeueDead: "Requeue Dead" })[$parameter["operation"]] + ": " + $parameter["queue"] }}',
		description:
			'Queue IDs to process once: duplicates are not added again, a batch is claimed atomically, then acked or released',
		defaults: {
			name: 'Dedup Queue',
		},
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main],
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
				options: [ack.option, deadLetters.option, enqueue.option, readBatch.option, release.option, requeueDead.option, size.option],
				default: 'enqueue',
			},
			{
				displayName: 'Queue Name',
				name: 'queue',
				type: 'string',
				required: true,
				default: '',
				placeholder: 'e.g. product-sync',
				description: 'Name of the queue. Producers and consumers of the same IDs use the same name.',
			},
			{
				displayName: 'Shards',
				name: 'shards',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: MAX_SHARDS, numberPrecision: 0 },
				default: 1,
				description:
					'Number of shards of the queue (1 to 1024). An ID goes to shard fnv1a(ID) % Shards, as the npm package fnv1a computes it. Every node and program using the queue must give the same number.',
			},
			...enqueue.description,
			itemIdProperty,
			...ack.description,
			...release.description,
			...readBatch.description,
			...size.description,
			...deadLetters.description,
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				options: [
					...enqueue.options,
					release.delayOption,
					...keyPrefixOptions,
					...memoryOnlyOptions,
					{
						displayName: 'Only Shard',
						name: 'shard',
						type: 'number',
						typeOptions: { minValue: 0, maxValue: MAX_SHARDS - 1, numberPrecision: 0 },
						default: 0,
						description: 'Read or count only this shard (0 to Shards - 1). Without this option: all shards.',
						displayOptions: { show: { '/operation': ['readBatch', 'size', 'deadLetters'] } },
					},
					{
						displayName: 'Max Deliveries',
						name: 'maxDeliveries',
						type: 'number',
						typeOptions: { minValue: 1, maxValue: 1000, numberPrecision: 0 },
						default: 5,
						description:
							'Move an ID read this many times without an ack (its visibility timeout passed, or it was released) to the dead letters instead of delivering it again (1 to 1000, as SQS\'s maxReceiveCount). List them with Dead Letters, put them back with Requeue Dead. Without this option: no count is kept.',
						displayOptions: { show: { '/operation': ['readBatch'] } },
					},
					receiptOption,
					resultFieldOption(DEFAULT_FIELD, ['enqueue', 'ack', 'release', 'requeueDead']),
				],
			},
		],
	};

	methods = { credentialTest };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await route(this, {
			enqueue: enqueue.execute,
			readBatch: readBatch.execute,
			ack: ack.execute,
			release: release.execute,
			size: size.execute,
			deadLetters: deadLetters.execute,
			requeueDead: requeueDead.execute,
		});
	}
}
