// Writes the benchmark workflows of bench/n8n/ (run once; the JSON files are committed).
// Kept so that the workflows can be regenerated after an edit here rather than by hand.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const CRED = { redis: { id: 'fgBenchRedisCred1', name: 'flowguard bench Redis (throwaway, loopback)' } };
// The flowguard nodes' Redis credential type (the same server).
const FG_CRED = { flowguardRedisApi: { id: 'fgBenchFgRedisCr1', name: 'flowguard bench flowguard Redis (throwaway, loopback)' } };
const trigger = { id: 'a0000000-0000-4000-8000-000000000001', name: 'Start', type: 'n8n-nodes-base.manualTrigger', typeVersion: 1, position: [0, 0], parameters: {} };
// N is replaced by run.mjs (5,000 items, or 1 for the start-up baseline).
const items = {
	id: 'a0000000-0000-4000-8000-000000000002',
	name: 'Items',
	type: 'n8n-nodes-base.code',
	typeVersion: 2,
	position: [220, 0],
	parameters: {
		jsCode: "const N = 5000;\nconst out = [];\nfor (let i = 1; i <= N; i++) out.push({ json: { group: 'bench', id: 'item-' + i } });\nreturn out;",
	},
};
const chain = (...names) => Object.fromEntries(names.slice(0, -1).map((n, i) => [n, { main: [[{ node: names[i + 1], type: 'main', index: 0 }]] }]));

// 1. The template approach: n8n's Redis node, GET in_progress, GET completed, IF neither, SET in_progress EX 600.
const K = (field, suffix) => `={{ 'tpl:' + ${field}.group + ':' + ${field}.id + ':${suffix}' }}`;
const template = {
	id: 'fgBenchTemplate01',
	name: 'bench: template approach (Redis node GET, GET, IF, SET with TTL per item)',
	active: false,
	nodes: [
		trigger,
		items,
		{
			id: 'a0000000-0000-4000-8000-000000000003', name: 'Get in progress', type: 'n8n-nodes-base.redis', typeVersion: 1, position: [440, 0],
			parameters: { operation: 'get', propertyName: 'inProgress', key: K('$json', 'in_progress'), keyType: 'string', options: {} },
			credentials: CRED,
		},
		{
			id: 'a0000000-0000-4000-8000-000000000004', name: 'Get completed', type: 'n8n-nodes-base.redis', typeVersion: 1, position: [660, 0],
			parameters: { operation: 'get', propertyName: 'completed', key: K("$('Items').item.json", 'completed'), keyType: 'string', options: {} },
			credentials: CRED,
		},
		{
			id: 'a0000000-0000-4000-8000-000000000005', name: 'Neither in progress nor completed?', type: 'n8n-nodes-base.if', typeVersion: 2.2, position: [880, 0],
			parameters: {
				conditions: {
					options: { caseSensitive: true, leftValue: '', typeValidation: 'loose', version: 2 },
					conditions: [
						{
							id: 'b0000000-0000-4000-8000-000000000001',
							leftValue: "={{ $json.completed === null && $('Get in progress').item.json.inProgress === null }}",
							rightValue: '',
							operator: { type: 'boolean', operation: 'true', singleValue: true },
						},
					],
					combinator: 'and',
				},
				options: {},
			},
		},
		{
			id: 'a0000000-0000-4000-8000-000000000006', name: 'Set in progress', type: 'n8n-nodes-base.redis', typeVersion: 1, position: [1100, -100],
			parameters: { operation: 'set', key: K("$('Items').item.json", 'in_progress'), value: '={{ $execution.id }}', keyType: 'string', expire: true, ttl: 600 },
			credentials: CRED,
		},
	],
	connections: {
		...chain('Start', 'Items', 'Get in progress', 'Get completed', 'Neither in progress nor completed?'),
		'Neither in progress nor completed?': { main: [[{ node: 'Set in progress', type: 'main', index: 0 }], []] },
	},
	settings: { executionOrder: 'v1' },
};

// 2./3. flowguard: one Item Tracker node, Set -> In Progress (two outputs: Claimed, Skipped).
function flowguard(id, backend, group = '={{ $json.group }}', itemId = '={{ $json.id }}', label = group.startsWith('=') ? '' : ', fixed group') {
	const claim = {
		id: 'a0000000-0000-4000-8000-000000000007', name: 'Claim', type: 'n8n-nodes-flowguard.itemTracker', typeVersion: 2, position: [440, 0],
		parameters: { backend, operation: 'set', status: 'inProgress', group, itemId, timeout: 600, options: { keyPrefix: 'fgbench:' } },
	};
	if (backend === 'redis') claim.credentials = FG_CRED;
	return {
		id,
		name: `bench: flowguard Item Tracker, Set In Progress (${backend}${label})`,
		active: false,
		nodes: [trigger, items, claim],
		connections: chain('Start', 'Items', 'Claim'),
		settings: { executionOrder: 'v1' },
	};
}

const out = {
	'template.json': template,
	'flowguard-redis.json': flowguard('fgBenchFgRedis001', 'redis'),
	'flowguard-embedded.json': flowguard('fgBenchFgEmbedd01', 'embedded'),
	// Group as a plain string (as in the examples: a loop's name), Item ID the only expression.
	'flowguard-redis-fixed-group.json': flowguard('fgBenchFgRedisFG1', 'redis', 'bench'),
	// Group and Item ID expressions that are not a plain field reference (same values): n8n
	// evaluates them for each item, as the node did for every expression before ItemParameters.
	'flowguard-redis-evaluated.json': flowguard('fgBenchFgRedisEv1', 'redis', '={{ String($json.group) }}', '={{ String($json.id) }}', ', expressions n8n evaluates'),
};
for (const [f, w] of Object.entries(out)) fs.writeFileSync(path.join(here, f), JSON.stringify(w, null, 2) + '\n');
console.log(`wrote ${Object.keys(out).join(', ')}`);
