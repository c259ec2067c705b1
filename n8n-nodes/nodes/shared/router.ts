import type { Flowguard } from 'flowguard';
import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { openCalls } from './backend';
import { ItemParameters } from './params';

/** The calls the nodes make: the addon's client (Embedded, Redis) or the flowguard server's. */
export type Calls = Pick<
	Flowguard,
	| 'setItems'
	| 'getItems'
	| 'listItems'
	| 'reviveItems'
	| 'acquireLock'
	| 'releaseLock'
	| 'extendLock'
	| 'getLock'
	| 'acquirePermit'
	| 'releasePermit'
	| 'extendPermit'
	| 'getSemaphore'
	| 'enqueue'
	| 'readBatch'
	| 'ack'
	| 'release'
	| 'queueSize'
	| 'deadLetters'
	| 'requeueDead'
	| 'rateLimit'
	| 'waitRateLimit'
	| 'pauseRateLimit'
>;

/** What an operation's `execute` gets: the n8n context, the input items, their parameters and the client. */
export interface OperationContext {
	ctx: IExecuteFunctions;
	items: INodeExecutionData[];
	/** Parameters without an expression are read once, `={{ $json.field }}` from the item. */
	params: ItemParameters;
	fg: Calls;
}

export type OperationExecute = (op: OperationContext) => Promise<INodeExecutionData[][]>;

/** A node's `execute`: runs the operation the node is set to, with the client of its backend. */
export async function route(
	ctx: IExecuteFunctions,
	operations: Readonly<Record<string, OperationExecute>>,
): Promise<INodeExecutionData[][]> {
	const items = ctx.getInputData();
	const operation = ctx.getNodeParameter('operation', 0) as string;
	const fg = await openCalls(ctx);
	const execute = Object.prototype.hasOwnProperty.call(operations, operation) ? operations[operation] : undefined;
	if (!execute) {
		throw new NodeOperationError(ctx.getNode(), `Unknown operation ${JSON.stringify(operation)}`);
	}
	return await execute({ ctx, items, params: new ItemParameters(ctx, items), fg });
}
