import type { IAuthenticateGeneric, ICredentialType, INodeProperties } from 'n8n-workflow';

/**
 * The flowguard server backend of the nodes: the URL of a flowguard-server (crates/server) and its
 * bearer token. The nodes call the server over n8n's own HTTP helper, so they work where the
 * native addon cannot be loaded. Its Test button (the nodes' `flowguardServerConnectionTest`)
 * checks /readyz and then an authenticated call.
 */
export class FlowguardServerApi implements ICredentialType {
	name = 'flowguardServerApi';

	displayName = 'Flowguard Server API';

	documentationUrl = 'https://github.com/flowguard/flowguard/tree/main/n8n-nodes#credentials';

	icon = { light: 'file:../nodes/ConcurrencyLock/concurrencyLock.svg', dark: 'file:../nodes/ConcurrencyLock/concurrencyLock.dark.svg' } as const;

	properties: INodeProperties[] = [
		{
			displayName: 'Server URL',
			name: 'url',
			type: 'string',
			default: 'http://flowguard:8080',
			placeholder: 'e.g. http://flowguard:8080',
			description: 'Base URL of the flowguard server, without /v1',
		},
		{
			displayName: 'Token',
			name: 'token',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			description:
				'The bearer token the server was started with (--token or FLOWGUARD_TOKEN). Leave empty for a server on loopback started without a token.',
		},
	];

	authenticate: IAuthenticateGeneric = {
		type: 'generic',
		properties: {
			headers: { Authorization: '=Bearer {{$credentials.token}}' },
		},
	};
}
