import type { INodeExecutionData, INodeProperties } from 'n8n-workflow';

import type { OperationContext } from '../../shared/router';
import { settle } from './settle';

export const option = {
	name: 'Release',
	value: 'release',
	description: 'Give claimed IDs back to the queue, to be read again (optionally after a delay)',
	action: 'Release items for a retry',
};

/** Release's Item ID and Receipt are shared with Ack (see settle.ts). */
export const description: INodeProperties[] = [];

/** The Delay option of Enqueue and Release. */
export const delayOption: INodeProperties = {
	displayName: 'Delay (Seconds)',
	name: 'delay',
	type: 'number',
	typeOptions: { minValue: 0 },
	default: 0,
	description:
		'Enqueue: make the IDs due this many seconds from now. Release: make them due again this many seconds from now.',
	displayOptions: { show: { '/operation': ['enqueue', 'release'] } },
};

export async function execute(op: OperationContext): Promise<INodeExecutionData[][]> {
	return await settle(op, 'release');
}
