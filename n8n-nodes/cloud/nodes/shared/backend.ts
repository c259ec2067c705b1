import type { IExecuteFunctions, INodeProperties } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { backendSelector } from './descriptions';
import type { Calls } from './router';
import { serverClientFor } from './server';
import { flowguardServerConnectionTest } from './serverTest';

/*
 * The backend of n8n-nodes-flowguard-server, the n8n Cloud package: the flowguard server, over
 * n8n's HTTP helper, only. Built in place of n8n-nodes/nodes/shared/backend.ts (the seam of the
 * full package n8n-nodes-flowguard, which adds the native addon's Embedded and Redis backends),
 * so that nothing this package loads imports the addon, Node's globals or any other package.
 */

/** The Backend parameter: one choice, the value the full package uses for the same backend. */
export const backendProperty = backendSelector(
	[
		{
			name: 'Flowguard Server',
			value: 'server',
			description:
				'State kept by a flowguard server, called over HTTP (this package has no native code). Works with queue mode.',
		},
	],
	'server',
);

/** A flowguard server has one key prefix for all its callers (its --prefix): no option. */
export const keyPrefixOptions: INodeProperties[] = [];

/** No Embedded backend here: no option. */
export const memoryOnlyOptions: INodeProperties[] = [];

/** The nodes' `methods.credentialTest`: the Test button of the flowguard Server credential. */
export const credentialTest = { flowguardServerConnectionTest };

/**
 * The client of the flowguard server of the node's credential. A workflow made with the full
 * package's Embedded or Redis backend fails here with what to change.
 */
export async function openCalls(ctx: IExecuteFunctions): Promise<Calls> {
	const backend = ctx.getNodeParameter('backend', 0, 'server');
	if (backend !== 'server') {
		throw new NodeOperationError(
			ctx.getNode(),
			`The ${JSON.stringify(backend)} backend is not in n8n-nodes-flowguard-server, which has the Flowguard Server backend only`,
			{
				description:
					'Set Backend to Flowguard Server and choose a flowguard Server credential, or, on a self-hosted n8n, install n8n-nodes-flowguard, which has the Embedded and Redis backends too.',
			},
		);
	}
	return await serverClientFor(ctx);
}
