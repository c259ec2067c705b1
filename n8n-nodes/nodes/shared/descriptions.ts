import type { INodeCredentialDescription, INodeProperties, INodePropertyOptions } from 'n8n-workflow';

/** The Backend parameter of the nodes, with the backends of the package (backend.ts). */
export function backendSelector(options: INodePropertyOptions[], defaultBackend: string): INodeProperties {
	return { displayName: 'Backend', name: 'backend', type: 'options', noDataExpression: true, options, default: defaultBackend };
}

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

/** When the credential of the flowguard server backend applies. */
export const SERVER_BACKEND: INodeCredentialDescription['displayOptions'] = { show: { backend: ['server'] } };
