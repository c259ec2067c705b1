import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';
import type { QueueSettleResult } from 'flowguard';

import {
	asNodeError,
	backendProperty,
	clientFor,
	describeCode,
	errorCode,
	errorMessage,
	keyPrefixOption,
	secondsToMs,
	testRedisCredential,
} from '../shared/client';
import { clean, errorItem, findUpstream, withResult } from '../shared/items';
import { ItemParameters } from '../shared/params';

type Operation = 'enqueue' | 'readBatch' | 'ack' | 'release' | 'size';

const DEFAULT_FIELD = 'dedupQueue';
const MAX_ID_BYTES = 1024;
const MAX_SHARDS = 1024;
const MAX_BATCH = 10000;

type Fg = Awaited<ReturnType<typeof clientFor>>;

export class DedupQueue implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Dedup Queue',
		name: 'dedupQueue',
		icon: { light: 'file:dedupQueue.svg', dark: 'file:dedupQueue.dark.svg' },
		group: ['transform'],
		version: 1,
		usableAsTool: true,
		subtitle:
			'={{ ({ enqueue: "Enqueue", readBatch: "Read Batch", ack: "Ack", release: "Release", size: "Size" })[$parameter["operation"]] + ": " + $parameter["queue"] }}',
		description:
			'Queue IDs to process once: duplicates are not added again, a batch is claimed atomically, then acked or released',
		defaults: {
			name: 'Dedup Queue',
		},
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main],
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
						name: 'Ack',
						value: 'ack',
						description: 'Remove IDs that were processed from the queue (only with the receipt of their read)',
						action: 'Ack processed items',
					},
					{
						name: 'Enqueue',
						value: 'enqueue',
						description: 'Add IDs to the queue; an ID already waiting is not added again',
						action: 'Enqueue items',
					},
					{
						name: 'Read Batch',
						value: 'readBatch',
						description: 'Claim the oldest due IDs for a visibility timeout; one output item per ID',
						action: 'Read a batch of items',
					},
					{
						name: 'Release',
						value: 'release',
						description: 'Give claimed IDs back to the queue, to be read again (optionally after a delay)',
						action: 'Release items for a retry',
					},
					{
						name: 'Size',
						value: 'size',
						description: 'Count the waiting, due and claimed IDs, in total and per shard',
						action: 'Get the size of a queue',
					},
				],
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
			{
				displayName: 'Item IDs',
				name: 'ids',
				type: 'string',
				required: true,
				default: '',
				placeholder: 'e.g. {{ $json.productId }}',
				description:
					'ID to enqueue, usually an expression. An expression that yields an array enqueues each of its elements. All the IDs of an execution are enqueued in one call.',
				displayOptions: { show: { operation: ['enqueue'] } },
			},
			{
				displayName: 'Item ID',
				name: 'itemId',
				type: 'string',
				default: '',
				placeholder: 'e.g. {{ $json.productId }}',
				description:
					'ID to ack or release. Leave empty to use the ID of the Read Batch output item this item came from (found in the item, or through its lineage).',
				displayOptions: { show: { operation: ['ack', 'release'] } },
			},
			{
				displayName: 'Batch Size',
				name: 'batchSize',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: MAX_BATCH, numberPrecision: 0 },
				default: 100,
				description: 'The most IDs to claim (1 to 10000), oldest first',
				displayOptions: { show: { operation: ['readBatch'] } },
			},
			{
				displayName: 'Visibility Timeout (Seconds)',
				name: 'visibilityTimeout',
				type: 'number',
				typeOptions: { minValue: 0.001 },
				default: 600,
				description:
					'How long the IDs read stay claimed by this flow. IDs not acked or released by then become due again, so a flow that crashed loses nothing. Set it above the time the flow takes to process a batch.',
				displayOptions: { show: { operation: ['readBatch'] } },
			},
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				options: [
					{
						displayName: 'Debounce',
						name: 'debounce',
						type: 'boolean',
						default: false,
						description:
							'Whether enqueueing an ID that is already waiting moves its due time to now + Delay (instead of keeping its first one), so that it is read only once updates to it stop',
						displayOptions: { show: { '/operation': ['enqueue'] } },
					},
					{
						displayName: 'Delay (Seconds)',
						name: 'delay',
						type: 'number',
						typeOptions: { minValue: 0 },
						default: 0,
						description:
							'Enqueue: make the IDs due this many seconds from now. Release: make them due again this many seconds from now.',
						displayOptions: { show: { '/operation': ['enqueue', 'release'] } },
					},
					keyPrefixOption,
					{
						displayName: 'Only Shard',
						name: 'shard',
						type: 'number',
						typeOptions: { minValue: 0, maxValue: MAX_SHARDS - 1, numberPrecision: 0 },
						default: 0,
						description: 'Read or count only this shard (0 to Shards - 1). Without this option: all shards.',
						displayOptions: { show: { '/operation': ['readBatch', 'size'] } },
					},
					{
						displayName: 'Receipt',
						name: 'receipt',
						type: 'string',
						default: '',
						description:
							'The owner token of the read that claimed the ID. Leave empty to use the one of the Read Batch output item this item came from (its "owner" field, found in the item or through its lineage).',
						displayOptions: { show: { '/operation': ['ack', 'release'] } },
					},
					{
						displayName: 'Result Field',
						name: 'resultField',
						type: 'string',
						default: DEFAULT_FIELD,
						description:
							'Field of the output item that receives the result; the rest of the input item is kept',
						displayOptions: { show: { '/operation': ['enqueue', 'ack', 'release'] } },
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
		switch (operation) {
			case 'enqueue':
				return [await enqueue(this, params, fg, items)];
			case 'readBatch':
				return [await readBatch(this, params, fg, items)];
			case 'ack':
			case 'release':
				return [await settle(this, params, fg, items, operation)];
			case 'size':
				return [await size(this, params, fg, items)];
			default:
				throw new NodeOperationError(this.getNode(), `Unknown operation ${JSON.stringify(operation)}`);
		}
	}
}

// ---------------------------------------------------------------- parameters

function checkText(ctx: IExecuteFunctions, value: unknown, field: string, itemIndex: number): string {
	const s = typeof value === 'number' || typeof value === 'bigint' ? String(value) : value;
	if (typeof s !== 'string' || s.length === 0) {
		throw new NodeOperationError(
			ctx.getNode(),
			`${field} is empty: give it a value or an expression that yields text${s === undefined || s === '' ? '' : ` (got ${Array.isArray(s) ? 'an array' : typeof s})`}`,
			{ itemIndex },
		);
	}
	if (Buffer.byteLength(s, 'utf8') > MAX_ID_BYTES) {
		throw new NodeOperationError(ctx.getNode(), `${field} is longer than ${MAX_ID_BYTES} bytes`, { itemIndex });
	}
	return s;
}

function wholeNumber(
	ctx: IExecuteFunctions,
	value: unknown,
	field: string,
	min: number,
	max: number,
	itemIndex: number,
): number {
	const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
	if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
		throw new NodeOperationError(
			ctx.getNode(),
			`${field} must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`,
			{ itemIndex },
		);
	}
	return n;
}

interface QueueRef {
	queue: string;
	shards: number;
}

function queueRef(ctx: IExecuteFunctions, params: ItemParameters, itemIndex: number): QueueRef {
	return {
		queue: checkText(ctx, params.get('queue', itemIndex), 'Queue Name', itemIndex),
		shards: wholeNumber(ctx, params.get('shards', itemIndex, 1), 'Shards', 1, MAX_SHARDS, itemIndex),
	};
}

/** The Only Shard option, checked against Shards; undefined without the option. */
function onlyShard(ctx: IExecuteFunctions, options: IDataObject, shards: number, itemIndex: number): number | undefined {
	if (options.shard === undefined || options.shard === '' || options.shard === null) return undefined;
	return wholeNumber(ctx, options.shard, 'Only Shard', 0, shards - 1, itemIndex);
}

function failure(ctx: IExecuteFunctions, what: string, error: unknown, itemIndex: number): NodeOperationError {
	return new NodeOperationError(ctx.getNode(), `${what}: ${errorMessage(error)}`, {
		itemIndex,
		description: describeCode(errorCode(error)),
	});
}

// ---------------------------------------------------------------- Enqueue

interface EnqueuePlan {
	itemIndex: number;
	ids: string[];
	/** The expression gave one ID (not an array): the result names that ID. */
	single: boolean;
}

async function enqueue(
	ctx: IExecuteFunctions,
	params: ItemParameters,
	fg: Fg,
	items: INodeExecutionData[],
): Promise<INodeExecutionData[]> {
	const results: Array<INodeExecutionData | undefined> = new Array(items.length);
	const fieldOf: string[] = [];
	const fail = (i: number, error: NodeOperationError) => {
		if (!ctx.continueOnFail()) throw error;
		results[i] = errorItem(ctx, items[i], i, error);
	};

	// Items of the same queue (and settings) go to one call: one atomic step per shard on Redis.
	const calls = new Map<string, { ref: QueueRef; delayMs: number; debounce: boolean; plans: EnqueuePlan[] }>();
	for (let i = 0; i < items.length; i++) {
		try {
			const options = params.get('options', i, {}) as IDataObject;
			fieldOf[i] = (options.resultField as string) || DEFAULT_FIELD;
			const ref = queueRef(ctx, params, i);
			const raw = params.get('ids', i);
			const single = !Array.isArray(raw);
			const ids = (single ? [raw] : (raw as unknown[])).map((v, k) =>
				checkText(ctx, v, single ? 'Item IDs' : `Item IDs[${k}]`, i),
			);
			const delayMs = secondsToMs(ctx, options.delay ?? 0, 'Delay', i, { allowZero: true });
			const debounce = options.debounce === true;
			const key = JSON.stringify([ref.queue, ref.shards, delayMs, debounce]);
			const call = calls.get(key) ?? { ref, delayMs, debounce, plans: [] };
			call.plans.push({ itemIndex: i, ids, single });
			calls.set(key, call);
		} catch (error) {
			fail(i, asNodeError(ctx, error, i));
		}
	}

	for (const { ref, delayMs, debounce, plans } of calls.values()) {
		const all = plans.flatMap((p) => p.ids);
		let r;
		try {
			r = await fg.enqueue(ref.queue, all, {
				shards: ref.shards,
				...(delayMs > 0 ? { delayMs } : {}),
				...(debounce ? { debounce } : {}),
			});
		} catch (error) {
			// The whole call failed (Redis unreachable, invalid input): every item of it fails.
			for (const p of plans) fail(p.itemIndex, failure(ctx, `Enqueue to queue "${ref.queue}" failed`, error, p.itemIndex));
			continue;
		}
		let offset = 0;
		for (const p of plans) {
			const mine = r.items.slice(offset, offset + p.ids.length);
			offset += p.ids.length;
			const count = (o: string) => mine.filter((e) => e.outcome === o).length;
			const result: IDataObject = p.single
				? { queue: ref.queue, ...mine[0] }
				: {
						queue: ref.queue,
						added: count('added'),
						duplicates: count('duplicate'),
						debounced: count('debounced'),
						claimed: count('claimed'),
						items: mine.map((e) => ({ ...e })),
					};
			results[p.itemIndex] = withResult(items[p.itemIndex], fieldOf[p.itemIndex], result, p.itemIndex);
		}
	}
	return results.filter((x): x is INodeExecutionData => x !== undefined);
}

// ---------------------------------------------------------------- Read Batch

/**
 * One read per input item (usually the single item of a trigger). Each claimed ID becomes an
 * output item `{ id, queue, shard, owner, dueAt, visibleUntil }` paired with that input item, so
 * that a later Ack or Release finds the receipt (`owner`) in it. An empty batch outputs no item:
 * the rest of the branch does not run.
 */
async function readBatch(
	ctx: IExecuteFunctions,
	params: ItemParameters,
	fg: Fg,
	items: INodeExecutionData[],
): Promise<INodeExecutionData[]> {
	const out: INodeExecutionData[] = [];
	for (let i = 0; i < items.length; i++) {
		try {
			const options = params.get('options', i, {}) as IDataObject;
			const ref = queueRef(ctx, params, i);
			const limit = wholeNumber(ctx, params.get('batchSize', i, 100), 'Batch Size', 1, MAX_BATCH, i);
			const visibilityTimeoutMs = secondsToMs(ctx, params.get('visibilityTimeout', i), 'Visibility Timeout', i);
			const shard = onlyShard(ctx, options, ref.shards, i);
			let batch;
			try {
				batch = await fg.readBatch(ref.queue, {
					shards: ref.shards,
					limit,
					visibilityTimeoutMs,
					...(shard !== undefined ? { shard } : {}),
				});
			} catch (error) {
				throw failure(ctx, `Read Batch of queue "${ref.queue}" failed`, error, i);
			}
			for (const it of batch.items) {
				out.push({
					json: {
						id: it.id,
						queue: ref.queue,
						shard: it.shard,
						owner: batch.owner,
						dueAt: it.dueAt,
						visibleUntil: batch.visibleUntil,
					},
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

// ---------------------------------------------------------------- Ack / Release

interface SettlePlan {
	itemIndex: number;
	id: string;
}

/** The Read Batch output `{ id, queue, owner }` this item is, or descends from. */
function readRecord(
	ctx: IExecuteFunctions,
	item: INodeExecutionData,
	itemIndex: number,
	queue: string,
	id: string | undefined,
): IDataObject | undefined {
	const matches = (j: IDataObject) =>
		j.queue === queue &&
		typeof j.id === 'string' &&
		(id === undefined || j.id === id) &&
		typeof j.owner === 'string' &&
		j.owner !== '';
	if (matches(item.json)) return item.json;
	return findUpstream(ctx, itemIndex, '.dedupQueue', (json, parameters) =>
		parameters.operation === 'readBatch' && matches(json) ? json : undefined,
	);
}

const REFUSAL: Record<string, { message: string; description: string }> = {
	not_owner: {
		message: 'is held by another read',
		description:
			'The receipt is not the one of the read that holds this ID now (its visibility timeout passed and another read claimed it, or the receipt is wrong). That read acks or releases it.',
	},
	not_claimed: {
		message: 'is not claimed',
		description: 'It was acked or released already, its claim ended, or it was never read.',
	},
	expired: {
		message: 'was claimed by a read whose visibility timeout has passed',
		description:
			'It will be delivered again by a later read. Set the Visibility Timeout of Read Batch above the time the flow takes to process a batch.',
	},
};

async function settle(
	ctx: IExecuteFunctions,
	params: ItemParameters,
	fg: Fg,
	items: INodeExecutionData[],
	operation: 'ack' | 'release',
): Promise<INodeExecutionData[]> {
	const verb = operation === 'ack' ? 'acked' : 'released';
	const results: Array<INodeExecutionData | undefined> = new Array(items.length);
	const fieldOf: string[] = [];
	const fail = (i: number, error: NodeOperationError, extra: IDataObject = {}) => {
		if (!ctx.continueOnFail()) throw error;
		results[i] = errorItem(ctx, items[i], i, error, extra);
	};

	// One call per queue and receipt (and settings): the IDs of one read are settled together.
	const calls = new Map<string, { ref: QueueRef; owner: string; delayMs: number; plans: SettlePlan[] }>();
	for (let i = 0; i < items.length; i++) {
		try {
			const options = params.get('options', i, {}) as IDataObject;
			fieldOf[i] = (options.resultField as string) || DEFAULT_FIELD;
			const ref = queueRef(ctx, params, i);
			const given = params.get('itemId', i, '');
			const givenId = given === '' || given === undefined || given === null ? undefined : checkText(ctx, given, 'Item ID', i);
			const receipt = typeof options.receipt === 'string' ? options.receipt.trim() : '';
			const record = givenId !== undefined && receipt !== '' ? undefined : readRecord(ctx, items[i], i, ref.queue, givenId);
			const id = givenId ?? (record?.id as string | undefined);
			if (id === undefined) {
				throw new NodeOperationError(
					ctx.getNode(),
					`No Item ID to ${operation} in queue "${ref.queue}": the item does not come from a Read Batch of that queue`,
					{
						itemIndex: i,
						description:
							'Put a Dedup Queue "Read Batch" of this queue before this node (its output items carry id, queue and owner), or give the Item ID, for example {{ $json.id }}, and the Receipt.',
					},
				);
			}
			const owner = receipt || (record?.owner as string | undefined);
			if (!owner) {
				throw new NodeOperationError(
					ctx.getNode(),
					`No receipt for ID "${id}" of queue "${ref.queue}": ${operation === 'ack' ? 'Ack' : 'Release'} needs the owner token of the read that claimed it`,
					{
						itemIndex: i,
						description:
							'The receipt travels in the "owner" field of the Read Batch output items, and is found through the item\'s lineage when an intermediate node replaced the item. You can also give it in Options → Receipt.',
					},
				);
			}
			const delayMs =
				operation === 'release' ? secondsToMs(ctx, options.delay ?? 0, 'Delay', i, { allowZero: true }) : 0;
			const key = JSON.stringify([ref.queue, ref.shards, owner, delayMs]);
			const call = calls.get(key) ?? { ref, owner, delayMs, plans: [] };
			call.plans.push({ itemIndex: i, id });
			calls.set(key, call);
		} catch (error) {
			fail(i, asNodeError(ctx, error, i));
		}
	}

	for (const { ref, owner, delayMs, plans } of calls.values()) {
		const ids = plans.map((p) => p.id);
		let r: QueueSettleResult;
		try {
			r =
				operation === 'ack'
					? await fg.ack(ref.queue, owner, ids, { shards: ref.shards })
					: await fg.release(ref.queue, owner, ids, {
							shards: ref.shards,
							...(delayMs > 0 ? { delayMs } : {}),
						});
		} catch (error) {
			for (const p of plans) {
				fail(
					p.itemIndex,
					failure(ctx, `${operation === 'ack' ? 'Ack' : 'Release'} in queue "${ref.queue}" failed`, error, p.itemIndex),
				);
			}
			continue;
		}
		for (const [k, p] of plans.entries()) {
			const s = r.items[k];
			const i = p.itemIndex;
			const result = clean({ queue: ref.queue, ...s });
			if (s.ok) {
				results[i] = withResult(items[i], fieldOf[i], result, i);
				continue;
			}
			const why = REFUSAL[s.reason ?? ''] ?? { message: `was refused (${s.reason ?? 'unknown reason'})`, description: '' };
			const others = r.done > 0 ? ` The other ${r.done} ID(s) of this call were ${verb}.` : '';
			fail(
				i,
				new NodeOperationError(ctx.getNode(), `ID "${s.id}" of queue "${ref.queue}" ${why.message}: not ${verb}`, {
					itemIndex: i,
					description: `${why.description}${others}`.trim() || undefined,
				}),
				{ [fieldOf[i]]: result },
			);
		}
	}
	return results.filter((x): x is INodeExecutionData => x !== undefined);
}

// ---------------------------------------------------------------- Size

async function size(
	ctx: IExecuteFunctions,
	params: ItemParameters,
	fg: Fg,
	items: INodeExecutionData[],
): Promise<INodeExecutionData[]> {
	const out: INodeExecutionData[] = [];
	for (let i = 0; i < items.length; i++) {
		try {
			const options = params.get('options', i, {}) as IDataObject;
			const ref = queueRef(ctx, params, i);
			const shard = onlyShard(ctx, options, ref.shards, i);
			let s;
			try {
				s = await fg.queueSize(ref.queue, { shards: ref.shards, ...(shard !== undefined ? { shard } : {}) });
			} catch (error) {
				throw failure(ctx, `Size of queue "${ref.queue}" failed`, error, i);
			}
			out.push({
				json: clean({
					queue: ref.queue,
					...(shard !== undefined ? { shard } : {}),
					waiting: s.waiting,
					due: s.due,
					claimed: s.claimed,
					again: s.again,
					shards: s.shards.map((x) => ({ ...x })),
				}),
				pairedItem: { item: i },
			});
		} catch (error) {
			const e = asNodeError(ctx, error, i);
			if (!ctx.continueOnFail()) throw e;
			out.push(errorItem(ctx, items[i], i, e));
		}
	}
	return out;
}
