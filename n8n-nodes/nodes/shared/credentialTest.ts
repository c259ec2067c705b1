import type {
	ICredentialTestFunctions,
	ICredentialsDecrypted,
	INodeCredentialTestResult,
} from 'n8n-workflow';

import { AddonUnavailableError } from './addon';
import { openClient, postgresOptionsFromCredential, redisTargetFromCredential } from './client';
import { errorMessage } from './errors';
import { flowguardServerConnectionTest } from './serverTest';

/**
 * The Test button of the Redis credential (`testedBy: 'flowguardRedisConnectionTest'`): connects
 * the way the nodes do, with flowguard, and runs one harmless read, which proves the connection,
 * the authentication and the scripts.
 */
export async function flowguardRedisConnectionTest(
	this: ICredentialTestFunctions,
	credential: ICredentialsDecrypted,
): Promise<INodeCredentialTestResult> {
	return await probe(async () => {
		const fg = await openClient({ backend: 'redis', ...redisTargetFromCredential(credential.data ?? {}), prefix: 'fg:' });
		await fg.getLock('flowguard:connection-test');
	});
}

/**
 * The Test button of the Postgres credential (`testedBy: 'flowguardPostgresConnectionTest'`):
 * opens the client the way the nodes do (connecting, with TLS per the SSL mode, and creating or
 * checking flowguard's schema) and runs one harmless read.
 */
export async function flowguardPostgresConnectionTest(
	this: ICredentialTestFunctions,
	credential: ICredentialsDecrypted,
): Promise<INodeCredentialTestResult> {
	return await probe(async () => {
		const fg = await openClient({ backend: 'postgres', postgres: postgresOptionsFromCredential(credential.data ?? {}), prefix: 'fg:' });
		await fg.getLock('flowguard:connection-test');
	});
}

/** Runs `check`: OK, or the error's message (never a password: flowguard's messages hold none). */
async function probe(check: () => Promise<void>): Promise<INodeCredentialTestResult> {
	try {
		await check();
		return { status: 'OK', message: 'Connection successful (flowguard)' };
	} catch (error) {
		const message =
			error instanceof AddonUnavailableError ? `${error.message}. ${error.description}` : errorMessage(error);
		return { status: 'Error', message };
	}
}

export { flowguardServerConnectionTest };

/** The nodes' `methods.credentialTest` in n8n-nodes-flowguard (the three credentials). */
export const credentialTest = { flowguardRedisConnectionTest, flowguardPostgresConnectionTest, flowguardServerConnectionTest };
