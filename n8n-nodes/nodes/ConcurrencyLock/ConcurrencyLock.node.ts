import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';

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

type Operation = 'get' | 'set' | 'unset' | 'extend';
type WhenLocked = 'error' | 'output' | 'wait';

const DEFAULT_FIELD = 'lock';
const ALREADY_EXECUTING = 'Already Executing';

interface Planned {
	itemIndex: number;
	key: string;
	name: string;
	timeoutMs?: number;
	waitMs?: number;
	whenLocked?: WhenLocked;
	owner?: string;
	label?: string;
}

export class ConcurrencyLock implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Concurrency Lock',
		name: 'concurrencyLock',
		icon: { light: 'file:concurrencyLock.svg', dark: 'file:concurrencyLock.dark.svg' },
		group: ['transform'],
		version: 1,
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
						name: 'Extend',
						value: 'extend',
						description: 'Give the lock this flow holds more time',
						action: 'Extend a lock',
					},
					{
						name: 'Get',
						value: 'get',
						description: 'Whether the lock is held, for how long, and its fencing token',
						action: 'Get a lock',
					},
					{
						name: 'Set',
						value: 'set',
						description: 'Take the lock',
						action: 'Set a lock',
					},
					{
						name: 'Unset',
						value: 'unset',
						description: 'Release the lock this flow took',
						action: 'Unset a lock',
					},
				],
				default: 'set',
			},
			{
				displayName: 'Lock Name',
				name: 'lockName',
				type: 'string',
				required: true,
				default: '',
				placeholder: 'e.g. {{ $workflow.name }}',
				description:
					'Name of the lock. Flows that must not run at the same time use the same name.',
			},
			{
				displayName: 'Timeout (Seconds)',
				name: 'timeout',
				type: 'number',
				typeOptions: { minValue: 0.001 },
				default: 600,
				description:
					'How long the lock lasts if the flow never unsets it (for example when it crashes). For Extend: the new time left.',
				displayOptions: { show: { operation: ['set', 'extend'] } },
			},
			{
				displayName: 'When Locked',
				name: 'whenLocked',
				type: 'options',
				options: [
					{
						name: 'Fail With "Already Executing"',
						value: 'error',
						description: 'Stop the flow with the error "Already Executing"',
					},
					{
						name: 'Route to Locked Output',
						value: 'output',
						description: 'Send the item to a second output, "Locked"',
					},
					{
						name: 'Wait',
						value: 'wait',
						description: 'Wait for the lock to be released, up to a maximum time, then fail',
					},
				],
				default: 'error',
				description: 'What to do when another run holds the lock',
				displayOptions: { show: { operation: ['set'] } },
			},
			{
				displayName: 'Max Wait (Seconds)',
				name: 'maxWait',
				type: 'number',
				typeOptions: { minValue: 0.001 },
				default: 60,
				description: 'The longest time to wait for the lock before failing with "Already Executing"',
				displayOptions: { show: { operation: ['set'], whenLocked: ['wait'] } },
			},
			{
				displayName: 'Owner Token',
				name: 'ownerToken',
				type: 'string',
				default: '',
				description:
					'Token that Set returned. Leave empty to use the token that the Set of this flow put in the item (found in the item, or through its lineage). Only the owner can unset or extend the lock.',
				displayOptions: { show: { operation: ['unset', 'extend'] } },
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
						displayName: 'Holder Label',
						name: 'label',
						type: 'string',
						default: '',
						description:
							'Shown to runs that find the lock held. Empty: the workflow name and execution ID.',
						displayOptions: { show: { '/operation': ['set'] } },
					},
					{
						displayName: 'Result Field',
						name: 'resultField',
						type: 'string',
						default: DEFAULT_FIELD,
						description:
							'Field of the output item that receives the result; the rest of the input item is kept',
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
		const nodeParams = this.getNode().parameters;
		const twoOutputs = operation === 'set' && nodeParams.whenLocked === 'output';

		const main: Array<INodeExecutionData | undefined> = new Array(items.length);
		const locked: INodeExecutionData[] = [];
		const fieldOf: string[] = [];

		const failItem = (i: number, error: NodeOperationError) => {
			if (!this.continueOnFail()) throw error;
			main[i] = errorItem(this, items[i], i, error);
		};

		// Read every item's parameters first (those without an expression once, see ItemParameters).
		const params = new ItemParameters(this, items);
		const plan: Planned[] = [];
		for (let i = 0; i < items.length; i++) {
			try {
				const options = params.get('options', i, {}) as IDataObject;
				fieldOf[i] = (options.resultField as string) || DEFAULT_FIELD;
				const name = checkName(this, params.get('lockName', i), i);
				const p: Planned = { itemIndex: i, key: '', name };
				if (operation === 'set') {
					p.timeoutMs = secondsToMs(this, params.get('timeout', i), 'Timeout', i);
					p.whenLocked = params.get('whenLocked', i, 'error') as WhenLocked;
					if (p.whenLocked === 'wait') {
						p.waitMs = secondsToMs(this, params.get('maxWait', i), 'Max Wait', i);
					}
					p.label = (options.label as string) || defaultLabel(this);
					p.key = JSON.stringify([name, p.timeoutMs, p.waitMs ?? 0, p.label]);
				} else if (operation === 'unset' || operation === 'extend') {
					p.owner = ownerFor(this, items[i], i, fieldOf[i], name, params.get('ownerToken', i, ''));
					if (!p.owner) {
						throw new NodeOperationError(
							this.getNode(),
							`No owner token for lock "${name}": ${operation === 'unset' ? 'Unset' : 'Extend'} needs the token that Set returned`,
							{
								itemIndex: i,
								description: `Put a Concurrency Lock "Set" for this lock before this node in the flow (its token travels in the item's "${fieldOf[i]}" field), or give the token in Owner Token, for example {{ $('Concurrency Lock').item.json.lock.owner }}.`,
							},
						);
					}
					if (operation === 'extend') {
						p.timeoutMs = secondsToMs(this, params.get('timeout', i), 'Timeout', i);
					}
					p.key = JSON.stringify([name, p.owner, p.timeoutMs ?? 0]);
				} else {
					p.key = name;
				}
				plan.push(p);
			} catch (error) {
				failItem(i, asNodeError(this, error, i));
			}
		}

		// Items naming the same lock with the same settings share one call: a flow whose trigger
		// emits many items takes its lock once, not once per item (which would lock itself out).
		const calls = new Map<string, Planned[]>();
		for (const p of plan) {
			const list = calls.get(p.key) ?? [];
			list.push(p);
			calls.set(p.key, list);
		}
		const settled = await Promise.all(
			[...calls.values()].map(async (group) => {
				const p = group[0];
				try {
					let r: IDataObject;
					switch (operation) {
						case 'set':
							r = clean(
								await fg.acquireLock(p.name, {
									timeoutMs: p.timeoutMs,
									...(p.waitMs ? { waitMs: p.waitMs } : {}),
									label: p.label,
								}),
							);
							break;
						case 'unset':
							r = clean({ name: p.name, ...(await fg.releaseLock(p.name, p.owner as string)) });
							break;
						case 'extend':
							r = clean({
								name: p.name,
								owner: p.owner,
								...(await fg.extendLock(p.name, p.owner as string, { timeoutMs: p.timeoutMs })),
							});
							break;
						default:
							r = clean(await fg.getLock(p.name));
					}
					return { group, r, error: undefined };
				} catch (error) {
					return { group, r: undefined, error };
				}
			}),
		);

		for (const { group, r, error } of settled) {
			for (const p of group) {
				const i = p.itemIndex;
				try {
					if (error !== undefined || !r) {
						throw new NodeOperationError(
							this.getNode(),
							`Concurrency Lock ${operation} of "${p.name}" failed: ${errorMessage(error)}`,
							{ itemIndex: i, description: describeCode(errorCode(error)) },
						);
					}
					if (operation === 'set' && r.acquired !== true) {
						const left = Math.ceil(Number(r.remainingMs ?? 0) / 1000);
						const holder = r.holder ? ` by ${String(r.holder)}` : '';
						if (p.whenLocked === 'output' && twoOutputs) {
							locked.push(withResult(items[i], fieldOf[i], r, i));
							continue;
						}
						throw new NodeOperationError(this.getNode(), ALREADY_EXECUTING, {
							itemIndex: i,
							description: `The lock "${p.name}" is held${holder} for another ${left} s${p.whenLocked === 'wait' ? ` (waited ${Math.round(Number(r.waitedMs ?? 0) / 1000)} s)` : ''}. Another run of this flow is executing.`,
						});
					}
					if (operation === 'extend' && r.extended !== true) {
						throw new NodeOperationError(
							this.getNode(),
							`Lock "${p.name}" could not be extended: this flow no longer holds it${r.reason ? ` (${String(r.reason)})` : ''}`,
							{
								itemIndex: i,
								description:
									'The lock timed out and may now be held by another run. Stop the work it protects; raise the Timeout of Set, or extend sooner.',
							},
						);
					}
					main[i] = withResult(items[i], fieldOf[i], r, i);
				} catch (e) {
					failItem(i, asNodeError(this, e, i));
				}
			}
		}

		const out = main.filter((x): x is INodeExecutionData => x !== undefined);
		return twoOutputs ? [out, locked] : [out];
	}
}

function defaultLabel(ctx: IExecuteFunctions): string {
	const wf = ctx.getWorkflow();
	let executionId = '';
	try {
		executionId = ctx.getExecutionId() ?? '';
	} catch {
		executionId = '';
	}
	return `${wf.name ?? wf.id ?? 'workflow'}${executionId ? ` (execution ${executionId})` : ''}`;
}

function checkName(ctx: IExecuteFunctions, value: unknown, itemIndex: number): string {
	const s = typeof value === 'number' ? String(value) : value;
	if (typeof s !== 'string' || s.length === 0) {
		throw new NodeOperationError(ctx.getNode(), 'Lock Name is empty: give it a value or an expression that yields text', {
			itemIndex,
		});
	}
	if (Buffer.byteLength(s, 'utf8') > 1024) {
		throw new NodeOperationError(ctx.getNode(), 'Lock Name is longer than 1024 bytes', { itemIndex });
	}
	return s;
}

function ownerFor(
	ctx: IExecuteFunctions,
	item: INodeExecutionData,
	itemIndex: number,
	field: string,
	name: string,
	given: unknown,
): string | undefined {
	if (typeof given === 'string' && given.trim() !== '') return given.trim();
	const matches = (r: IDataObject) => r.name === name && typeof r.owner === 'string' && r.owner !== '';
	const own = item.json[field];
	if (own && typeof own === 'object' && !Array.isArray(own) && matches(own as IDataObject)) {
		return (own as IDataObject).owner as string;
	}
	return findUpstreamResult(ctx, itemIndex, '.concurrencyLock', DEFAULT_FIELD, matches)?.owner as
		| string
		| undefined;
}
