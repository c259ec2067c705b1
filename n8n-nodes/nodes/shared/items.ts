import type { IDataObject, IExecuteFunctions, INodeExecutionData, NodeOperationError } from 'n8n-workflow';

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
 * Finds a value that an upstream node of the given type left in the JSON of the item this item
 * descends from (n8n's paired-item lineage), for example the owner token of the claim that let
 * this item through, after intermediate nodes replaced the JSON.
 */
export function findUpstreamResult(
	ctx: IExecuteFunctions,
	itemIndex: number,
	nodeTypeSuffix: string,
	defaultField: string,
	matches: (r: IDataObject) => boolean,
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
		const options = (parent.parameters?.options ?? {}) as IDataObject;
		const field = typeof options.resultField === 'string' && options.resultField ? options.resultField : defaultField;
		try {
			const upstream = proxy.$(parent.name).item as INodeExecutionData | undefined;
			const r = upstream?.json?.[field];
			if (r && typeof r === 'object' && !Array.isArray(r) && matches(r as IDataObject)) {
				return r as IDataObject;
			}
		} catch {
			// No lineage to that node for this item (not run, or the pairing is ambiguous): try the next.
		}
	}
	return undefined;
}

/**
 * The output item of a failed input item when the node continues on fail: the input's JSON with
 * `error` set to the message (for "Continue (using regular output)"), and the error itself on the
 * item, which is what n8n uses to send it to the error output ("Continue (using error output)").
 */
export function errorItem(
	input: INodeExecutionData,
	itemIndex: number,
	error: NodeOperationError,
	extra: IDataObject = {},
): INodeExecutionData {
	return {
		json: { ...input.json, ...extra, error: error.message },
		error,
		pairedItem: { item: itemIndex },
	};
}
