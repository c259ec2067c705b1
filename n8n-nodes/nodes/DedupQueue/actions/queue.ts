import type { IDataObject } from 'n8n-workflow';

import type { FieldNames } from '../../shared/errors';
import { toNumber, toText } from '../../shared/convert';
import type { ItemParameters } from '../../shared/params';

export const DEFAULT_FIELD = 'dedupQueue';

/** The limits the core checks, shown in the editor's number fields. */
export const MAX_SHARDS = 1024;
export const MAX_BATCH = 10000;

/** The node's parameters behind the fields of the queue calls (`ids` is Item ID for Ack and Release). */
export const FIELDS: FieldNames = {
	queue: 'Queue Name',
	shards: 'Shards',
	shard: 'Only Shard',
	ids: 'Item IDs',
	limit: 'Batch Size',
	visibilityTimeoutMs: 'Visibility Timeout',
	delayMs: 'Delay',
	maxDelayMs: 'Max Delay',
	maxDeliveries: 'Max Deliveries',
	owner: 'Receipt',
};

export interface QueueRef {
	queue: string;
	shards: number;
}

/** The item's Queue Name and Shards, as the core takes them (the core checks them). */
export function queueRef(params: ItemParameters, itemIndex: number): QueueRef {
	return {
		queue: toText(params.get('queue', itemIndex)) as string,
		shards: toNumber(params.get('shards', itemIndex, 1)) as number,
	};
}

/** The Only Shard option (the core checks it against Shards); undefined without the option. */
export function onlyShard(options: IDataObject): { shard?: number } {
	if (options.shard === undefined || options.shard === '' || options.shard === null) return {};
	return { shard: toNumber(options.shard) as number };
}
