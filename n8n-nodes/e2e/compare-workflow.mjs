// The workflow of the e2e comparison with n8n's built-in Remove Duplicates node ("Remove Items
// Processed in Previous Executions", whose history n8n keeps in its own database): one webhook
// execution runs both sides on the same items, Remove Duplicates first, then the Item Tracker on
// the Embedded backend (its file in n8n's folder).
//
// Body: { items: [{ id, fail, tag }], barrier, parties }. Every execution first waits at barrier
// `barrier` of the e2e's barrier server (barrier.mjs) until `parties` executions are there, so
// executions fired together are all in flight before any of them reaches either side.
// Each side's "Work" node writes `<side>:<id>:<tag>` (rd or ft) into the execution data: the test
// reads from n8n's database which executions worked on which item.
import { randomUUID } from 'node:crypto';

import { barrierNode } from './barrier.mjs';

export const COMPARE_ID = 'fgE2eCompare0001';
export const COMPARE_PATH = 'flowguard-e2e-compare';

const node = (name, type, typeVersion, position, parameters, extra = {}) => ({
	id: randomUUID(),
	name,
	type,
	typeVersion,
	position,
	parameters,
	...extra,
});

const work = (name, side, position) =>
	node(name, 'n8n-nodes-base.set', 3.4, position, {
		mode: 'manual',
		assignments: {
			assignments: [{ id: randomUUID(), name: 'worked', value: `={{ '${side}:' + $json.id + ':' + $json.tag }}`, type: 'string' }],
		},
		includeOtherFields: true,
		options: {},
	});

const failIf = (name, position) =>
	node(name, 'n8n-nodes-base.if', 2.2, position, {
		conditions: {
			options: { caseSensitive: true, leftValue: '', typeValidation: 'loose', version: 2 },
			conditions: [
				{
					id: randomUUID(),
					leftValue: '={{ $json.fail === true }}',
					rightValue: '',
					operator: { type: 'boolean', operation: 'true', singleValue: true },
				},
			],
			combinator: 'and',
		},
		options: {},
	});

const tracker = (name, position, parameters) =>
	node(name, 'n8n-nodes-flowguard.itemTracker', 2, position, { group: 'compare', itemId: '={{ $json.id }}', ...parameters });

export function compareWorkflow(barrierUrl) {
	const start = barrierNode('Wait until all have started', barrierUrl, 'barrier', '{{ $json.body.barrier }}', [220, 0]);
	start.parameters.url = start.parameters.url.replace(/parties=\d+/, 'parties={{ $json.body.parties }}');
	const nodes = [
		node('Webhook', 'n8n-nodes-base.webhook', 2, [0, 0], {
			httpMethod: 'POST',
			path: COMPARE_PATH,
			responseMode: 'lastNode',
			responseData: 'allEntries',
			options: {},
		}, { webhookId: randomUUID() }),
		start,
		node('One item per entry', 'n8n-nodes-base.splitOut', 1, [440, 0], { fieldToSplitOut: 'body.items', options: {} }),
		node('Remove Duplicates', 'n8n-nodes-base.removeDuplicates', 2, [660, -200], {
			operation: 'removeItemsSeenInPreviousExecutions',
			dedupeValue: '={{ $json.id }}',
			options: {},
		}),
		work('RD: Work', 'rd', [880, -200]),
		failIf('RD: Failed?', [1100, -200]),
		tracker('Claim', [660, 200], { timeout: 600, options: {} }),
		work('FT: Work', 'ft', [880, 200]),
		failIf('FT: Failed?', [1100, 200]),
		tracker('Mark failed', [1320, 100], { status: 'failed', errorMessage: 'simulated failure', options: {} }),
		tracker('Mark completed', [1320, 300], { status: 'completed', options: { keepForever: true } }),
	];
	const to = (...names) => names.map((n) => ({ node: n, type: 'main', index: 0 }));
	return {
		id: COMPARE_ID,
		name: 'e2e: Remove Duplicates vs Item Tracker',
		active: false,
		nodes,
		connections: {
			Webhook: { main: [to('Wait until all have started')] },
			'Wait until all have started': { main: [to('One item per entry')] },
			// Remove Duplicates first (n8n runs the branches in order), then the Item Tracker.
			'One item per entry': { main: [to('Remove Duplicates', 'Claim')] },
			'Remove Duplicates': { main: [to('RD: Work')] },
			'RD: Work': { main: [to('RD: Failed?')] },
			Claim: { main: [to('FT: Work'), []] },
			'FT: Work': { main: [to('FT: Failed?')] },
			'FT: Failed?': { main: [to('Mark failed'), to('Mark completed')] },
		},
		settings: { executionOrder: 'v1' },
	};
}
