import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';
import type { ItemResult, ItemState } from 'flowguard';

import {
	asNodeError,
	backendProperty,
	describeCode,
	clientFor,
	errorCode,
	errorMessage,
	keyPrefixOption,
	secondsToMs,
	testRedisCredential,
} from '../shared/client';
import { clean, errorItem, findUpstreamResult, withResult } from '../shared/items';
import { ItemParameters } from '../shared/params';

type Operation = 'get' | 'set' | 'unset' | 'list';
type SetStatus = 'inProgress' | 'completed' | 'failed';

const DEFAULT_FIELD = 'itemTracker';
const MAX_ID_BYTES = 1024;

/** One `setItems` request as the flowguard core takes it. */
interface SetRequest {
	id: string;
	status: 'in_progress' | 'completed' | 'failed' | 'none';
	owner?: string;
	error?: string;
	timeoutMs?: number;
	keepMs?: number;
	reclaimCompleted?: boolean;
}

interface Pending {
	itemIndex: number;
	group: string;
	request: SetRequest;
}

export class ItemTracker implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Item Tracker',
		name: 'itemTracker',
		icon: { light: 'file:itemTracker.svg', dark: 'file:itemTracker.dark.svg' },
		group: ['transform'],
		version: 1,
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
			{
				// n8n's own Redis credential type (host, port, user, password, database, SSL).
				name: 'redis',
				required: true,
				testedBy: 'flowguardRedisConnectionTest',
				displayOptions: { show: { backend: ['redis'] } },
			},
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
						name: 'Get',
						value: 'get',
						description: 'Get the status, attempts, last error and timeline of an item',
						action: 'Get an item',
					},
					{
						name: 'List',
						value: 'list',
						description: 'List the items of a group by status, with counts',
						action: 'List the items of a group',
					},
					{
						name: 'Set',
						value: 'set',
						description: 'Claim an item (In Progress), or mark it Completed or Failed',
						action: 'Set the status of an item',
					},
					{
						name: 'Unset',
						value: 'unset',
						description: 'Forget an item',
						action: 'Unset an item',
					},
				],
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
			{
				displayName: 'Status',
				name: 'status',
				type: 'options',
				options: [
					{
						name: 'Completed',
						value: 'completed',
						description: 'The item is done; a later claim skips it',
					},
					{
						name: 'Failed',
						value: 'failed',
						description: 'The item failed; a later claim processes it again',
					},
					{
						name: 'In Progress',
						value: 'inProgress',
						description:
							'Claim the item atomically. Claimed items go to the first output, items already in progress or completed to the second.',
					},
				],
				default: 'inProgress',
				displayOptions: { show: { operation: ['set'] } },
			},
			{
				displayName: 'Timeout (Seconds)',
				name: 'timeout',
				type: 'number',
				typeOptions: { minValue: 0.001 },
				default: 600,
				description:
					'How long the claim lasts. If the flow has not marked the item Completed or Failed by then, the claim is abandoned and the item can be claimed again.',
				displayOptions: { show: { operation: ['set'], status: ['inProgress'] } },
			},
			{
				displayName: 'Error Message',
				name: 'errorMessage',
				type: 'string',
				default: '',
				placeholder: 'e.g. {{ $json.error }}',
				description: 'Why the item failed; kept with the item and shown by Get and List',
				displayOptions: { show: { operation: ['set'], status: ['failed'] } },
			},
			{
				displayName: 'Expire Completed Mark',
				name: 'expireCompleted',
				type: 'boolean',
				default: false,
				description:
					'Whether the Completed mark should expire after a while, so that the item is processed again (for example by next week\'s run) without clean-up',
				displayOptions: { show: { operation: ['set'], status: ['completed'] } },
			},
			{
				displayName: 'Expire After (Seconds)',
				name: 'completedExpiry',
				type: 'number',
				typeOptions: { minValue: 0.001 },
				default: 518400,
				description: 'How long the Completed mark lasts (518400 s = 6 days)',
				displayOptions: {
					show: { operation: ['set'], status: ['completed'], expireCompleted: [true] },
				},
			},
			{
				displayName: 'Status Filter',
				name: 'listStatus',
				type: 'options',
				options: [
					{ name: 'Abandoned', value: 'abandoned', description: 'In progress, but the claim timed out' },
					{ name: 'All', value: 'all' },
					{ name: 'Completed', value: 'completed' },
					{ name: 'Failed', value: 'failed' },
					{ name: 'In Progress', value: 'in_progress', description: 'Claimed, claim still running' },
				],
				default: 'all',
				displayOptions: { show: { operation: ['list'] } },
			},
			{
				displayName: 'Return All',
				name: 'returnAll',
				type: 'boolean',
				default: false,
				description: 'Whether to return all results or only up to a given limit',
				displayOptions: { show: { operation: ['list'] } },
			},
			{
				displayName: 'Limit',
				name: 'limit',
				type: 'number',
				typeOptions: { minValue: 1 },
				default: 50,
				description: 'Max number of results to return',
				displayOptions: { show: { operation: ['list'], returnAll: [false] } },
			},
			{
				displayName: 'Output',
				name: 'listOutput',
				type: 'options',
				options: [
					{
						name: 'Summary',
						value: 'summary',
						description: 'One item with the counts per status and the list of items',
					},
					{
						name: 'One Item per Tracked Item',
						value: 'items',
						description: 'One output item per tracked item (counts are left out)',
					},
				],
				default: 'summary',
				displayOptions: { show: { operation: ['list'] } },
			},
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				options: [
					keyPrefixOption,
					{
						displayName: 'Owner Token',
						name: 'ownerToken',
						type: 'string',
						default: '',
						description:
							'Token of the claim that this completion or failure belongs to. Leave empty to use the token of the claim this item came from (found in the item, or through its lineage); when a newer claim owns the item, the node refuses to overwrite it.',
						displayOptions: { show: { '/operation': ['set'], '/status': ['completed', 'failed'] } },
					},
					{
						displayName: 'Reclaim Completed Items',
						name: 'reclaimCompleted',
						type: 'boolean',
						default: false,
						description: 'Whether to claim items that are already completed (for example to redo them)',
						displayOptions: { show: { '/operation': ['set'], '/status': ['inProgress'] } },
					},
					{
						displayName: 'Result Field',
						name: 'resultField',
						type: 'string',
						default: DEFAULT_FIELD,
						description:
							'Field of the output item that receives the result; the rest of the input item is kept',
						displayOptions: { show: { '/operation': ['get', 'set', 'unset'] } },
					},
				],
			},
		],
	};

	methods = {
		credentialTest: {
			flowguardRedisConnectionTest: testRedisCredential,
		},
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const items = this.getInputData();
		const operation = this.getNodeParameter('operation', 0) as Operation;
		const fg = await clientFor(this);

		// Parameters without an expression are read once, `={{ $json.field }}` from the item.
		const params = new ItemParameters(this, items);
		if (operation === 'list') {
			return [await list(this, fg, items, params)];
		}

		const claimed: INodeExecutionData[] = [];
		const skipped: INodeExecutionData[] = [];
		// Both outputs exist only when the node's Status is literally "In Progress" (see `outputs`).
		const nodeParams = this.getNode().parameters;
		const twoOutputs = operation === 'set' && (nodeParams.status ?? 'inProgress') === 'inProgress';
		const results: Array<INodeExecutionData | undefined> = new Array(items.length);

		const fail = (itemIndex: number, error: NodeOperationError) => {
			if (!this.continueOnFail()) throw error;
			results[itemIndex] = errorItem(this, items[itemIndex], itemIndex, error);
		};

		// Read and check every item's parameters first; nothing is written when one is invalid.
		const pending: Pending[] = [];
		const fieldOf: string[] = [];
		for (let i = 0; i < items.length; i++) {
			try {
				const options = params.get('options', i, {}) as IDataObject;
				fieldOf[i] = (options.resultField as string) || DEFAULT_FIELD;
				const group = checkName(this, params.get('group', i), 'Group', i);
				const id = checkName(this, params.get('itemId', i), 'Item ID', i);
				if (operation === 'get') {
					pending.push({ itemIndex: i, group, request: { id, status: 'none' } });
					continue;
				}
				if (operation === 'unset') {
					pending.push({ itemIndex: i, group, request: { id, status: 'none' } });
					continue;
				}
				const status = params.get('status', i) as SetStatus;
				if (status === 'inProgress') {
					const timeoutMs = secondsToMs(this, params.get('timeout', i), 'Timeout', i);
					pending.push({
						itemIndex: i,
						group,
						request: {
							id,
							status: 'in_progress',
							timeoutMs,
							...(options.reclaimCompleted === true ? { reclaimCompleted: true } : {}),
						},
					});
				} else if (status === 'completed' || status === 'failed') {
					const owner = ownerFor(this, items[i], i, fieldOf[i], group, id, options.ownerToken);
					const req: SetRequest = { id, status, ...(owner ? { owner } : {}) };
					if (status === 'failed') {
						req.error = String(params.get('errorMessage', i, '') ?? '') || 'failed';
					} else if (params.get('expireCompleted', i, false) === true) {
						req.keepMs = secondsToMs(this, params.get('completedExpiry', i), 'Expire After', i);
					}
					pending.push({ itemIndex: i, group, request: req });
				} else {
					throw new NodeOperationError(
						this.getNode(),
						`Status must be In Progress, Completed or Failed, got ${JSON.stringify(status)}`,
						{ itemIndex: i },
					);
				}
			} catch (error) {
				fail(i, asNodeError(this, error, i));
			}
		}

		// One batched call per group (a node execution usually has one group): one round trip on Redis.
		const byGroup = new Map<string, Pending[]>();
		for (const p of pending) {
			const list = byGroup.get(p.group) ?? [];
			list.push(p);
			byGroup.set(p.group, list);
		}
		for (const [group, batch] of byGroup) {
			let states: ItemState[] | undefined;
			let out: ItemResult[] | undefined;
			try {
				if (operation === 'get') {
					states = await fg.getItems(
						group,
						batch.map((p) => p.request.id),
					);
				} else {
					out = await fg.setItems(
						group,
						batch.map((p) => p.request),
					);
				}
			} catch (error) {
				// The whole call failed (Redis unreachable, invalid input): every item of the batch fails.
				const message = `Item Tracker ${operation} failed for group "${group}": ${errorMessage(error)}`;
				for (const p of batch) {
					const e = new NodeOperationError(this.getNode(), message, {
						itemIndex: p.itemIndex,
						description: describeCode(errorCode(error)),
					});
					if (!this.continueOnFail()) throw e;
					results[p.itemIndex] = errorItem(this, items[p.itemIndex], p.itemIndex, e);
				}
				continue;
			}
			if (states) {
				batch.forEach((p, k) => {
					results[p.itemIndex] = withResult(
						items[p.itemIndex],
						fieldOf[p.itemIndex],
						clean({ group, ...states[k] }),
						p.itemIndex,
					);
				});
				continue;
			}
			for (const [k, p] of batch.entries()) {
				const r = (out as ItemResult[])[k];
				const i = p.itemIndex;
				const result = clean({
					group,
					...r,
					// For Completed / Failed: whether the change was checked against a claim's owner token.
					...(r.action === 'complete' || r.action === 'fail'
						? { ownerChecked: p.request.owner !== undefined }
						: {}),
				});
				if (r.ok || r.action === 'claim') {
					// A claim that was not granted is not an error: the item goes to the Skipped output.
					const item = withResult(items[i], fieldOf[i], result, i);
					if (r.action === 'claim' && !r.claimed && twoOutputs) skipped.push(item);
					else results[i] = item;
					continue;
				}
				const notOwner = r.code === 'ERR_NOT_OWNER';
				const message = notOwner
					? `Item "${r.id}" of group "${group}" is now owned by a newer claim: not marked ${p.request.status}`
					: `Could not set item "${r.id}" of group "${group}": ${r.message ?? r.code ?? 'refused'}`;
				const error = new NodeOperationError(this.getNode(), message, {
					itemIndex: i,
					description: notOwner
						? 'The claim this item came from timed out and another run claimed the item again. That run now decides its status; this result is discarded so it does not overwrite the newer one.'
						: undefined,
				});
				if (!this.continueOnFail()) throw error;
				results[i] = errorItem(this, items[i], i, error, { [fieldOf[i]]: result });
			}
		}
		for (const r of results) if (r) claimed.push(r);
		return twoOutputs ? [claimed, skipped] : [claimed];
	}
}

function checkName(ctx: IExecuteFunctions, value: unknown, field: string, itemIndex: number): string {
	const s = typeof value === 'number' || typeof value === 'bigint' ? String(value) : value;
	if (typeof s !== 'string' || s.length === 0) {
		throw new NodeOperationError(
			ctx.getNode(),
			`${field} is empty: give it a value or an expression that yields text${s === undefined || s === '' ? '' : ` (got ${typeof s})`}`,
			{ itemIndex },
		);
	}
	if (Buffer.byteLength(s, 'utf8') > MAX_ID_BYTES) {
		throw new NodeOperationError(ctx.getNode(), `${field} is longer than ${MAX_ID_BYTES} bytes`, { itemIndex });
	}
	return s;
}

/** The owner token for Set Completed / Failed: given, in the item, or in the item's lineage. */
function ownerFor(
	ctx: IExecuteFunctions,
	item: INodeExecutionData,
	itemIndex: number,
	field: string,
	group: string,
	id: string,
	given: unknown,
): string | undefined {
	if (typeof given === 'string' && given.trim() !== '') return given.trim();
	const matches = (r: IDataObject) =>
		r.group === group && r.id === id && typeof r.owner === 'string' && r.owner !== '';
	const own = item.json[field];
	if (own && typeof own === 'object' && !Array.isArray(own) && matches(own as IDataObject)) {
		return (own as IDataObject).owner as string;
	}
	return findUpstreamResult(ctx, itemIndex, '.itemTracker', DEFAULT_FIELD, matches)?.owner as
		| string
		| undefined;
}

async function list(
	ctx: IExecuteFunctions,
	fg: Awaited<ReturnType<typeof clientFor>>,
	items: INodeExecutionData[],
	params: ItemParameters,
): Promise<INodeExecutionData[]> {
	const out: INodeExecutionData[] = [];
	for (let i = 0; i < items.length; i++) {
		try {
			const group = checkName(ctx, params.get('group', i), 'Group', i);
			const status = params.get('listStatus', i, 'all') as
				| 'all'
				| 'in_progress'
				| 'abandoned'
				| 'completed'
				| 'failed';
			const returnAll = params.get('returnAll', i, false) as boolean;
			const limit = returnAll ? Infinity : (params.get('limit', i, 50) as number);
			const mode = params.get('listOutput', i, 'summary') as 'summary' | 'items';
			const page = 500;
			let offset = 0;
			let counts: IDataObject = {};
			const tracked: IDataObject[] = [];
			let nextOffset: number | undefined;
			for (;;) {
				const want = Math.min(page, limit - tracked.length);
				const r = await fg.listItems(group, { status, offset, limit: want });
				counts = { ...r.counts };
				for (const it of r.items) tracked.push(clean({ group, ...it }));
				nextOffset = r.nextOffset ?? undefined;
				if (nextOffset === undefined || tracked.length >= limit) break;
				offset = nextOffset;
			}
			if (mode === 'items') {
				for (const t of tracked) out.push({ json: t, pairedItem: { item: i } });
			} else {
				out.push({
					json: clean({ group, status, counts, items: tracked, nextOffset }),
					pairedItem: { item: i },
				});
			}
		} catch (error) {
			const e = asNodeError(ctx, error, i);
			if (!ctx.continueOnFail()) throw e;
			out.push(errorItem(ctx, items[i], i, e));
		}
	}
	return out;
}
