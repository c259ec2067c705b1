import type { INodeExecutionData, INodeProperties } from 'n8n-workflow';

import type { OperationContext } from '../../shared/router';
import { settle } from './settle';

export const option = {
	name: 'Ack',
	value: 'ack',
	description: 'Remove IDs that were processed from the queue (only with the receipt of their read)',
	action: 'Ack processed items',
};

/** Ack's Item ID and Receipt are shared with Release (see settle.ts). */
export const description: INodeProperties[] = [];

export async function execute(op: OperationContext): Promise<INodeExecutionData[][]> {
	return await settle(op, 'ack');
}
