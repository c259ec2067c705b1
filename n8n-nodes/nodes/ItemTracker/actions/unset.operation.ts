import type { INodeExecutionData, INodeProperties } from 'n8n-workflow';

import type { OperationContext } from '../../shared/router';
import { trackItems } from './requests';

export const option = {
	name: 'Unset',
	value: 'unset',
	description: 'Forget an item',
	action: 'Unset an item',
};

/** Unset has no parameters of its own (Group, Item ID and the options are the node's). */
export const description: INodeProperties[] = [];

export async function execute(op: OperationContext): Promise<INodeExecutionData[][]> {
	return await trackItems(op, 'unset', ({ id }) => ({ id, status: 'none' }));
}
