import type { IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import { backendProperty, credentialTest, keyPrefixOptions, memoryOnlyOptions } from '../shared/backend';
import { NODE_VERSION, resultFieldOption, SERVER_BACKEND } from '../shared/descriptions';
import { route } from '../shared/router';
import * as get from './actions/get.operation';
import * as list from './actions/list.operation';
import { DEFAULT_FIELD } from './actions/requests';
import * as set from './actions/set.operation';
import * as unset from './actions/unset.operation';

export class ItemTracker implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Item Tracker',
		name: 'itemTracker',
		icon: { light: 'file:itemTracker.svg', dark: 'file:itemTracker.dark.svg' },
		group: ['transform'],
		...NODE_VERSION,
		usableAsTool: true,
		subtitle:
			'={{ $parameter["operation"] === "set" ? "set " + ({inProgress: "in progress", completed: "completed", failed: "failed"})[$parameter["status"]] : $parameter["operation"] }}',
		description:
			'Track each item of a loop: claim it atomically, mark it completed or failed, and re-process only what failed',
		defaults: {
			name: 'Item Tracker',
		},
		inputs: [NodeConnectionTypes.Main],
		// Set In Progress has a second output for the items it did not claim (already in progress or completed).
		outputs: `={{ $parameter["operation"] === "set" && $parameter["status"] === "inProgress" ? [{ type: "${NodeConnectionTypes.Main}", displayName: "Claimed" }, { type: "${NodeConnectionTypes.Main}", displayName: "Skipped" }] : ["${NodeConnectionTypes.Main}"] }}`,
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
				options: [get.option, list.option, set.option, unset.option],
				default: 'set',
			},
			{
				displayName: 'Group',
				name: 'group',
				type: 'string',
				required: true,
				default: '',
				placeholder: 'e.g. weekly-report',
				description:
					'Name of the batch or loop the items belong to. Items are tracked per group: the same item ID in two groups is two items.',
			},
			{
				displayName: 'Item ID',
				name: 'itemId',
				type: 'string',
				required: true,
				default: '',
				placeholder: 'e.g. {{ $json.projectKey }}',
				description: 'ID of the item within the group, usually an expression',
				displayOptions: { show: { operation: ['get', 'set', 'unset'] } },
			},
			...get.description,
			...set.description,
			...unset.description,
			...list.description,
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				options: [...keyPrefixOptions, ...memoryOnlyOptions, ...set.options, resultFieldOption(DEFAULT_FIELD, ['get', 'set', 'unset'])],
			},
		],
	};

	methods = { credentialTest };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await route(this, { get: get.execute, set: set.execute, unset: unset.execute, list: list.execute });
	}
}
