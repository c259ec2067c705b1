import type { IDataObject, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { findUpstreamResult } from '../../shared/items';
import type { OperationContext } from '../../shared/router';
import type { LockInput } from './calls';
import { DEFAULT_FIELD } from './calls';

export const ownerTokenProperty = {
	displayName: 'Owner Token',
	name: 'ownerToken',
	type: 'string' as const,
	default: '',
	description:
		'Token that Set returned. Leave empty to use the token that the Set of this flow put in the item (found in the item, or through its lineage). Only the owner can unset or extend the lock.',
	displayOptions: { show: { operation: ['unset', 'extend'] } },
};

/**
 * The owner token for Unset and Extend: the Owner Token parameter, else the token the Set of this
 * lock left in the item or in its lineage. Throws when there is none.
 */
export function ownerOf({ ctx, items, params }: OperationContext, input: LockInput, verb: 'Unset' | 'Extend'): string {
	const { itemIndex: i, field, name } = input;
	const given = params.get('ownerToken', i, '');
	if (typeof given === 'string' && given.trim() !== '') return given.trim();
	const matches = (r: IDataObject) => r.name === name && typeof r.owner === 'string' && r.owner !== '';
	const item: INodeExecutionData = items[i];
	const own = item.json[field];
	if (own && typeof own === 'object' && !Array.isArray(own) && matches(own as IDataObject)) {
		return (own as IDataObject).owner as string;
	}
	const found = findUpstreamResult(ctx, i, '.concurrencyLock', DEFAULT_FIELD, matches)?.owner;
	if (typeof found === 'string') return found;
	throw new NodeOperationError(ctx.getNode(), `No owner token for lock "${name}": ${verb} needs the token that Set returned`, {
		itemIndex: i,
		description: `Put a Concurrency Lock "Set" for this lock before this node in the flow (its token travels in the item's "${field}" field), or give the token in Owner Token, for example {{ $('Concurrency Lock').item.json.lock.owner }}.`,
	});
}
