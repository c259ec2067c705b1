import type { INodeCredentialDescription, INodeProperties } from 'n8n-workflow';

/** Backend selector shared by the nodes. */
export const backendProperty: INodeProperties = {
	displayName: 'Backend',
	name: 'backend',
	type: 'options',
	noDataExpression: true,
	options: [
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
			name: 'Flowguard Server',
			value: 'server',
			description:
				'State kept by a flowguard server (a sidecar beside n8n), called over HTTP: no native code is loaded in n8n. Works with queue mode.',
		},
	],
	default: 'embedded',
};

export const keyPrefixOption: INodeProperties = {
	displayName: 'Key Prefix',
	name: 'keyPrefix',
	type: 'string',
	default: 'fg:',
	description:
		'Prefix of every key flowguard writes (in Redis, and in the embedded store). Nodes that should see the same items or locks must use the same prefix.',
	// A flowguard server has one prefix for all its callers (its --prefix).
	displayOptions: { hide: { '/backend': ['server'] } },
};

/** Embedded only: keep the state in this n8n process's memory instead of the file in n8n's folder. */
export const memoryOnlyOption: INodeProperties = {
	displayName: 'Keep State in Memory Only',
	name: 'memoryOnly',
	type: 'boolean',
	default: false,
	description:
		"Whether the Embedded backend keeps its state in this n8n process's memory only instead of the file flowguard.db in n8n's folder: lost when n8n restarts, and not seen by n8n execute (another process)",
	displayOptions: { show: { '/backend': ['embedded'] } },
};

/** The Result Field option: where the node puts its result in the output item. */
export function resultFieldOption(defaultField: string, operations?: string[]): INodeProperties {
	return {
		displayName: 'Result Field',
		name: 'resultField',
		type: 'string',
		default: defaultField,
		description: 'Field of the output item that receives the result; the rest of the input item is kept',
		...(operations ? { displayOptions: { show: { '/operation': operations } } } : {}),
	};
}

/**
 * The version of the nodes. Their Redis backend takes its connection from this package's
 * flowguard Redis credential (its Test button runs flowguard's connection test).
 */
export const NODE_VERSION = { version: 2, defaultVersion: 2 };

/**
 * When the credential of the Redis backend applies. The nodes list their credentials inline,
 * `testedBy` included, as n8n's community-node lint reads them from the node class.
 */
export const REDIS_BACKEND: INodeCredentialDescription['displayOptions'] = { show: { backend: ['redis'] } };

/** When the credential of the flowguard server backend applies. */
export const SERVER_BACKEND: INodeCredentialDescription['displayOptions'] = { show: { backend: ['server'] } };
