import type {
	ICredentialTestFunctions,
	ICredentialsDecrypted,
	INodeCredentialTestResult,
} from 'n8n-workflow';

import { AddonUnavailableError } from './addon';
import { openClient, redisTargetFromCredential } from './client';
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
	try {
		const fg = await openClient({
			backend: 'redis',
			...redisTargetFromCredential(credential.data ?? {}),
			prefix: 'fg:',
		});
		await fg.getLock('flowguard:connection-test');
		return { status: 'OK', message: 'Connection successful (flowguard)' };
	} catch (error) {
		const message =
			error instanceof AddonUnavailableError ? `${error.message}. ${error.description}` : errorMessage(error);
		return { status: 'Error', message };
	}
}

export { flowguardServerConnectionTest };

/** The nodes' `methods.credentialTest` in n8n-nodes-flowguard (both credentials). */
export const credentialTest = { flowguardRedisConnectionTest, flowguardServerConnectionTest };
