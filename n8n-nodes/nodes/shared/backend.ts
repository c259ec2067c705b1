import type { IExecuteFunctions, INodeProperties } from 'n8n-workflow';

import { clientFor } from './client';
import { credentialTest as tests } from './credentialTest';
import { backendSelector, keyPrefixOption, memoryOnlyOption } from './descriptions';
import type { Calls } from './router';
import { serverClientFor } from './server';

/*
 * The backends of n8n-nodes-flowguard: Embedded and Redis through the native addon (loaded on first
 * use, see addon.ts), and the flowguard server over HTTP. This module is the package's seam: the
 * n8n Cloud package n8n-nodes-flowguard-server is built from the same sources with its own
 * backend.ts in its place (n8n-nodes/cloud/nodes/shared/backend.ts), which has the server backend
 * only, so that nothing it loads imports the addon.
 */

/** The Backend parameter: Embedded, Redis and PostgreSQL (the native addon), and the flowguard server. */
export const backendProperty = backendSelector(
	[
		{
			name: 'Embedded',
			value: 'embedded',
			description:
				"State kept in the file .n8n/flowguard.db beside n8n's database (in N8N_USER_FOLDER, else the home folder): it survives restarts; no setup. Not for queue mode.",
		},
		{
			name: 'Redis',
			value: 'redis',
			description: 'State kept in Redis, using a flowguard Redis credential. Works with queue mode.',
		},
		{
			name: 'PostgreSQL',
			value: 'postgres',
			description:
				"State kept in tables of its own schema in a PostgreSQL database (n8n's own will do), using a flowguard Postgres credential. Works with queue mode.",
		},
		{
			name: 'Flowguard Server',
			value: 'server',
			description:
				'State kept by a flowguard server (a sidecar beside n8n), called over HTTP: no native code is loaded in n8n. Works with queue mode.',
		},
	],
	'embedded',
);

/** The Key Prefix option (Embedded and Redis: a flowguard server has its own --prefix). */
export const keyPrefixOptions: INodeProperties[] = [keyPrefixOption];

/** The Keep State in Memory Only option (Embedded). */
export const memoryOnlyOptions: INodeProperties[] = [memoryOnlyOption];

/** The nodes' `methods.credentialTest`: the Test buttons of the three credentials. */
export const credentialTest = tests;

/** The client of the node's backend. The flowguard server backend never loads the native addon. */
export async function openCalls(ctx: IExecuteFunctions): Promise<Calls> {
	return ctx.getNodeParameter('backend', 0, 'embedded') === 'server' ? await serverClientFor(ctx) : await clientFor(ctx);
}
