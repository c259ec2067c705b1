import type { INodeExecutionData, INodeProperties } from 'n8n-workflow';

import type { OperationContext } from '../../shared/router';
import { trackItems } from './requests';

export const option = {
	name: 'Get',
	value: 'get',
	description: 'Get the status, attempts, last error and timeline of an item',
	action: 'Get an item',
};

/** Get has no parameters of its own (Group, Item ID and the options are the node's). */
export const description: INodeProperties[] = [];

export async function execute(op: OperationContext): Promise<INodeExecutionData[][]> {
	return await trackItems(op, 'get', ({ id }) => ({ id, status: 'none' }));
}
