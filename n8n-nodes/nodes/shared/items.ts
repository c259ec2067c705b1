import type { IDataObject, IExecuteFunctions, INodeExecutionData, NodeOperationError } from 'n8n-workflow';

import type { FieldNames } from './errors';
import { nodeError } from './errors';

/** Output item that keeps the input item's JSON and adds the node's result under `field`. */
export function withResult(
	input: INodeExecutionData,
	field: string,
	result: IDataObject,
	itemIndex: number,
	extra: IDataObject = {},
): INodeExecutionData {
	return {
		json: { ...input.json, [field]: result, ...extra },
		...(input.binary ? { binary: input.binary } : {}),
		pairedItem: { item: itemIndex },
	};
}

/** Drops undefined values, so that the output JSON holds only what is known. */
export function clean<T extends object>(o: T): IDataObject {
	const out: IDataObject = {};
	for (const [k, v] of Object.entries(o)) {
		if (v !== undefined) out[k] = v as IDataObject[string];
	}
	return out;
}

/**
 * Finds what an upstream node of the given type left in the JSON of the item this item descends
 * from (n8n's paired-item lineage), for example the owner token of the claim that let this item
 * through, after intermediate nodes replaced the JSON. `pick` gets that ancestor item's JSON and
 * the upstream node's parameters, and returns the value it looks for (or undefined to go on).
 */
export function findUpstream(
	ctx: IExecuteFunctions,
	itemIndex: number,
	nodeTypeSuffix: string,
	pick: (json: IDataObject, parameters: IDataObject) => IDataObject | undefined,
): IDataObject | undefined {
	let parents;
	try {
		parents = ctx.getParentNodes(ctx.getNode().name, { includeNodeParameters: true });
	} catch {
		return undefined;
	}
	const proxy = ctx.getWorkflowDataProxy(itemIndex);
	for (const parent of parents) {
		if (parent.disabled || !parent.type.endsWith(nodeTypeSuffix)) continue;
		try {
			const upstream = proxy.$(parent.name).item as INodeExecutionData | undefined;
			if (!upstream?.json) continue;
			const found = pick(upstream.json, (parent.parameters ?? {}) as IDataObject);
			if (found) return found;
		} catch {
			// No lineage to that node for this item (not run, or the pairing is ambiguous): try the next.
		}
	}
	return undefined;
}

/**
 * Finds the result object (in the field named by the upstream node's Result Field option, or
 * `defaultField`) that an upstream node of the given type left in this item's lineage.
 */
export function findUpstreamResult(
	ctx: IExecuteFunctions,
	itemIndex: number,
	nodeTypeSuffix: string,
	defaultField: string,
	matches: (r: IDataObject) => boolean,
): IDataObject | undefined {
	return findUpstream(ctx, itemIndex, nodeTypeSuffix, (json, parameters) => {
		const options = (parameters.options ?? {}) as IDataObject;
		const field = typeof options.resultField === 'string' && options.resultField ? options.resultField : defaultField;
		const r = json[field];
		return r && typeof r === 'object' && !Array.isArray(r) && matches(r as IDataObject) ? (r as IDataObject) : undefined;
	});
}

/**
 * The output item of a failed input item when the node continues on fail.
 * "Continue (using error output)": the error is set on the item, which is what n8n routes to the
 * error output (n8n then gives it the input item's JSON and `error`).
 * "Continue (using regular output)": the input item's JSON with `error` set to the message and the
 * node's result, so the flow can go on with the item's data. (n8n would replace the JSON of an
 * item carrying an error object with `{ error }` alone, so none is set here.)
 */
export function errorItem(
	ctx: IExecuteFunctions,
	input: INodeExecutionData,
	itemIndex: number,
	error: NodeOperationError,
	extra: IDataObject = {},
): INodeExecutionData {
	if (ctx.getNode().onError === 'continueErrorOutput') {
		return { json: { ...extra, error: error.message }, error, pairedItem: { item: itemIndex } };
	}
	return {
		json: { ...input.json, ...extra, error: error.message },
		pairedItem: { item: itemIndex },
	};
}

/**
 * The output of a node execution, item by item in input order, and the one place where an item
 * fails: `fail` throws unless the node continues on fail, in which case the item's slot gets the
 * error item. Every output item is paired with its input item.
 */
export class ItemOutputs {
	private readonly slots: INodeExecutionData[][];

	constructor(
		private readonly ctx: IExecuteFunctions,
		private readonly items: INodeExecutionData[],
		/** Display names of the parameters behind the flowguard call's fields (see `nodeError`). */
		private readonly fields: FieldNames = {},
	) {
		this.slots = items.map(() => []);
	}

	/** Adds output items for input item `itemIndex`. */
	put(itemIndex: number, ...out: INodeExecutionData[]): void {
		this.slots[itemIndex].push(...out);
	}

	/** Adds the node's result for input item `itemIndex` (its JSON kept, the result under `field`). */
	result(itemIndex: number, field: string, result: IDataObject): INodeExecutionData {
		const out = withResult(this.items[itemIndex], field, result, itemIndex);
		this.put(itemIndex, out);
		return out;
	}

	/** Fails input item `itemIndex`: throws, or (continue on fail) outputs its error item with `extra`. */
	fail(itemIndex: number, error: unknown, extra: IDataObject = {}, context?: string): void {
		const e = nodeError(this.ctx, error, itemIndex, this.fields, context);
		if (!this.ctx.continueOnFail()) throw e;
		this.slots[itemIndex] = [errorItem(this.ctx, this.items[itemIndex], itemIndex, e, extra)];
	}

	/** Runs `fn` for each input item; what it throws fails that item only (see `fail`). */
	async each(fn: (itemIndex: number) => void | Promise<void>): Promise<void> {
		for (let i = 0; i < this.items.length; i++) {
			try {
				// Awaited only when it is asynchronous: planning thousands of items stays one synchronous loop.
				const pending = fn(i);
				if (pending) await pending;
			} catch (error) {
				this.fail(i, error);
			}
		}
	}

	/** The output items, in input order. */
	list(): INodeExecutionData[] {
		return this.slots.flat();
	}
}
