import type { ICredentialType, INodeProperties } from 'n8n-workflow';

/**
 * The Redis connection of the nodes' Redis backend (version 2 of the nodes; version 1 uses n8n's
 * own Redis credential type). The fields are those of n8n's Redis credential. It is a type of
 * this package so that its Test button runs flowguard's own connection test: n8n looks the test
 * of a credential type up among the nodes of the package that defines the type, so n8n's Redis
 * credential is always tested by n8n's Redis node.
 */
export class FlowguardRedisApi implements ICredentialType {
	name = 'flowguardRedisApi';

	displayName = 'Flowguard Redis';

	documentationUrl = 'https://github.com/flowguard/flowguard/tree/main/n8n-nodes#credentials';

	icon = { light: 'file:../nodes/ConcurrencyLock/concurrencyLock.svg', dark: 'file:../nodes/ConcurrencyLock/concurrencyLock.dark.svg' } as const;

	properties: INodeProperties[] = [
		{ displayName: 'Password', name: 'password', type: 'string', typeOptions: { password: true }, default: '' },
		{ displayName: 'User', name: 'user', type: 'string', default: '', hint: 'Leave blank for password-only auth' },
		{ displayName: 'Host', name: 'host', type: 'string', default: 'localhost' },
		{ displayName: 'Port', name: 'port', type: 'number', default: 6379 },
		{ displayName: 'Database Number', name: 'database', type: 'number', default: 0 },
		{ displayName: 'SSL', name: 'ssl', type: 'boolean', default: false },
		{
			displayName: 'Disable TLS Verification (Insecure)',
			name: 'disableTlsVerification',
			type: 'boolean',
			displayOptions: { show: { ssl: [true] } },
			default: false,
			description: 'Whether to skip the check of the TLS certificate of the server',
		},
		{
			displayName: 'Redis Cluster',
			name: 'cluster',
			type: 'boolean',
			default: false,
			description:
				'Whether Host is a node of a Redis Cluster: each call then goes to the primary of its keys\' slot, and the cluster\'s failovers are followed (Database Number is not used)',
		},
		{
			displayName: 'More Cluster Nodes',
			name: 'clusterNodes',
			type: 'string',
			displayOptions: { show: { cluster: [true] } },
			default: '',
			placeholder: 'redis-2:6379, redis-3:6379',
			description: 'Other nodes of the cluster (host:port, comma-separated), tried when Host cannot be reached',
		},
	];
}
