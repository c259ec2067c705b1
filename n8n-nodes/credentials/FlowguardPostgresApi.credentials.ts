import type { ICredentialType, INodeProperties } from 'n8n-workflow';

/**
 * The PostgreSQL connection of the nodes' PostgreSQL backend: the fields of n8n's Postgres
 * credential, with libpq's SSL modes, the CA certificate, and the schema of flowguard's tables. It
 * is a type of this package so that its Test button runs flowguard's own connection test (n8n
 * looks the test of a credential type up among the nodes of the package that defines the type).
 */
export class FlowguardPostgresApi implements ICredentialType {
	name = 'flowguardPostgresApi';

	displayName = 'Flowguard Postgres';

	documentationUrl = 'https://github.com/flowguard/flowguard/tree/main/n8n-nodes#credentials';

	icon = { light: 'file:../nodes/ConcurrencyLock/concurrencyLock.svg', dark: 'file:../nodes/ConcurrencyLock/concurrencyLock.dark.svg' } as const;

	properties: INodeProperties[] = [
		{ displayName: 'Host', name: 'host', type: 'string', default: 'localhost' },
		{ displayName: 'Port', name: 'port', type: 'number', default: 5432 },
		{ displayName: 'Database', name: 'database', type: 'string', default: 'postgres' },
		{ displayName: 'User', name: 'user', type: 'string', default: 'postgres' },
		{ displayName: 'Password', name: 'password', type: 'string', typeOptions: { password: true }, default: '' },
		{
			displayName: 'SSL',
			name: 'sslMode',
			type: 'options',
			options: [
				{ name: 'Disable', value: 'disable', description: 'Never TLS' },
				{ name: 'Prefer', value: 'prefer', description: 'TLS when the server offers it, the certificate not checked (unless a CA is given)' },
				{ name: 'Require', value: 'require', description: 'Always TLS, the certificate not checked (unless a CA is given: then its chain)' },
				{ name: 'Verify CA', value: 'verify-ca', description: 'Always TLS, the certificate signed by the CA' },
				{ name: 'Verify Full', value: 'verify-full', description: 'Always TLS, the certificate signed by the CA and naming the host' },
			],
			default: 'prefer',
			description: "When to use TLS and what to check, as PostgreSQL's sslmode",
		},
		{
			displayName: 'CA Certificate',
			name: 'ca',
			type: 'string',
			typeOptions: { rows: 4 },
			displayOptions: { hide: { sslMode: ['disable'] } },
			default: '',
			placeholder: '-----BEGIN CERTIFICATE-----',
			description:
				"The certificate (PEM) of the authority that signed the server's certificate. Blank: Verify CA and Verify Full use the system's trust store.",
		},
		{
			displayName: 'Schema',
			name: 'schema',
			type: 'string',
			default: 'flowguard',
			description: "The schema of flowguard's tables, created on first use (lowercase letters, digits and _)",
		},
	];
}
