import type { ICredentialType, INodeProperties } from 'n8n-workflow';

/**
 * The Redis connection of the nodes' Redis backend. The fields are those of n8n's Redis
 * credential (and Cluster and Sentinel choices). It is a type of
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
		{ displayName: 'Host', name: 'host', type: 'string', displayOptions: { show: { sentinel: [false] } }, default: 'localhost' },
		{ displayName: 'Port', name: 'port', type: 'number', displayOptions: { show: { sentinel: [false] } }, default: 6379 },
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
			displayOptions: { show: { sentinel: [false] } },
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
		{
			displayName: 'Redis Sentinel',
			name: 'sentinel',
			type: 'boolean',
			displayOptions: { show: { cluster: [false] } },
			default: false,
			description:
				'Whether Redis is managed by Sentinel: the sentinels are asked for the current primary, and asked again after a failover. User, Password, Database Number and SSL are those of the data nodes (SSL also reaches the sentinels over TLS).',
		},
		{
			displayName: 'Master Name',
			name: 'sentinelMasterName',
			type: 'string',
			displayOptions: { show: { sentinel: [true] } },
			default: 'mymaster',
			required: true,
			description: 'The name the sentinels monitor the primary under (the NAME of sentinel monitor NAME HOST PORT QUORUM)',
		},
		{
			displayName: 'Sentinel Nodes',
			name: 'sentinelNodes',
			type: 'string',
			displayOptions: { show: { sentinel: [true] } },
			default: '',
			required: true,
			placeholder: 'sentinel-1:26379, sentinel-2:26379, sentinel-3:26379',
			description: 'The sentinels (host:port, comma-separated; the port defaults to 26379). One is enough, more survive the loss of some.',
		},
		{
			displayName: 'Sentinel User',
			name: 'sentinelUser',
			type: 'string',
			displayOptions: { show: { sentinel: [true] } },
			default: '',
			hint: 'Leave blank when the sentinels need no user',
		},
		{
			displayName: 'Sentinel Password',
			name: 'sentinelPassword',
			type: 'string',
			typeOptions: { password: true },
			displayOptions: { show: { sentinel: [true] } },
			default: '',
			description: 'The sentinels\' own password (requirepass of the sentinels), when they have one',
		},
		{
			displayName: 'Replica Confirmations',
			name: 'sentinelReplicaAcks',
			type: 'number',
			typeOptions: { minValue: 0, maxValue: 64 },
			displayOptions: { show: { sentinel: [true] } },
			default: 0,
			description:
				'How many replicas must hold each call before it is answered (Redis WAIT). 0: answered once the primary ran it, and a failover can lose the last writes (replication is asynchronous). Set it to the number of replicas to keep every answered write through a failover; with fewer replicas up, calls fail until they are back.',
		},
	];
}
