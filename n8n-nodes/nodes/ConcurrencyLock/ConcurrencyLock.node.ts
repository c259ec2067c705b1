import type { IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import { backendProperty, credentialTest, keyPrefixOptions, memoryOnlyOptions } from '../shared/backend';
import { NODE_VERSION, resultFieldOption, SERVER_BACKEND } from '../shared/descriptions';
import { route } from '../shared/router';
import { DEFAULT_FIELD, permitsProperty } from './actions/calls';
import * as extend from './actions/extend.operation';
import * as get from './actions/get.operation';
import { ownerTokenProperty } from './actions/owner';
import * as set from './actions/set.operation';
import * as unset from './actions/unset.operation';

export class ConcurrencyLock implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Concurrency Lock',
		name: 'concurrencyLock',
		icon: { light: 'file:concurrencyLock.svg', dark: 'file:concurrencyLock.dark.svg' },
		group: ['transform'],
		...NODE_VERSION,
		usableAsTool: true,
		subtitle: '={{ $parameter["operation"] + ": " + $parameter["lockName"] }}',
		description: 'Keep a workflow, or a part of it, from running twice at the same time',
		defaults: {
			name: 'Concurrency Lock',
		},
		inputs: [NodeConnectionTypes.Main],
		// With "When Locked: Route to Locked Output", Set has a second output for the items that found the lock held.
		outputs: `={{ $parameter["operation"] === "set" && $parameter["whenLocked"] === "output" ? [{ type: "${NodeConnectionTypes.Main}", displayName: "Acquired" }, { type: "${NodeConnectionTypes.Main}", displayName: "Locked" }] : ["${NodeConnectionTypes.Main}"] }}`,
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
				options: [extend.option, get.option, set.option, unset.option],
				default: 'set',
			},
			{
				displayName: 'Lock Name',
				name: 'lockName',
				type: 'string',
				required: true,
				default: '',
				placeholder: 'e.g. {{ $workflow.name }}',
				description: 'Name of the lock. Flows that must not run at the same time use the same name.',
			},
			permitsProperty,
			...set.description,
			...get.description,
			...extend.description,
			...unset.description,
			ownerTokenProperty,
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				options: [...keyPrefixOptions, ...memoryOnlyOptions, ...set.options, resultFieldOption(DEFAULT_FIELD)],
			},
		],
	};

	methods = { credentialTest };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await route(this, { get: get.execute, set: set.execute, unset: unset.execute, extend: extend.execute });
	}
}
