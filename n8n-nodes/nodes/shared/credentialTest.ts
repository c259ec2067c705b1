import type {
	ICredentialTestFunctions,
	ICredentialsDecrypted,
	INodeCredentialTestResult,
} from 'n8n-workflow';

import { AddonUnavailableError } from './addon';
import { openClient, postgresOptionsFromCredential, redisTargetFromCredential } from './client';
import { errorCode, errorMessage } from './errors';
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

/**
 * Runs `check`: OK, or the error's message after flowguard's code (`ERR_BACKEND_AUTH: …`, the
 * code a node's error has too; never a password: flowguard's messages hold none).
 */
async function probe(check: () => Promise<void>): Promise<INodeCredentialTestResult> {
	try {
		await check();
		return { status: 'OK', message: 'Connection successful (flowguard)' };
	} catch (error) {
		if (error instanceof AddonUnavailableError) return { status: 'Error', message: `${error.message}. ${error.description}` };
		const code = errorCode(error);
		return { status: 'Error', message: code ? `${code}: ${errorMessage(error)}` : errorMessage(error) };
	}
}

export { flowguardServerConnectionTest };

/** The nodes' `methods.credentialTest` in n8n-nodes-flowguard (the three credentials). */
export const credentialTest = { flowguardRedisConnectionTest, flowguardPostgresConnectionTest, flowguardServerConnectionTest };
