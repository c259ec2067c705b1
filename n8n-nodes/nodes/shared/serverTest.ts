import type {
	ICredentialTestFunctions,
	ICredentialsDecrypted,
	INodeCredentialTestResult,
} from 'n8n-workflow';

import { errorMessage } from './errors';
import type { Transport } from './server';
import { answerError, ServerClient, serverUrl, toAnswer, unreachable } from './server';

/**
 * The Test button of the flowguard Server credential (`testedBy: 'flowguardServerConnectionTest'`):
 * GET /readyz (the server answers and its store is ready), then an authenticated read, as the
 * nodes make it (the token). Never loads the native addon.
 */
export async function flowguardServerConnectionTest(
	this: ICredentialTestFunctions,
	credential: ICredentialsDecrypted,
): Promise<INodeCredentialTestResult> {
	const data = credential.data ?? {};
	let url: string;
	try {
		url = serverUrl(data);
	} catch (error) {
		return { status: 'Error', message: errorMessage(error) };
	}
	const token = typeof data.token === 'string' ? data.token : '';
	// The test runs outside a node: n8n's ICredentialTestFunctions offers the legacy request helper only.
	const send: Transport = async (method, path, body, timeoutMs) =>
		toAnswer(
			// eslint-disable-next-line @n8n/community-nodes/no-deprecated-workflow-functions
			await this.helpers.request({
				method,
				uri: `${url}${path}`,
				json: true,
				simple: false,
				resolveWithFullResponse: true,
				timeout: timeoutMs,
				headers: { authorization: `Bearer ${token}` },
				...(body ? { body } : {}),
			}),
		);
	try {
		let ready;
		try {
			ready = await send('GET', '/readyz', undefined, 10_000);
		} catch (error) {
			throw unreachable(url, error);
		}
		if (ready.status !== 200) {
			const e = answerError(ready);
			return { status: 'Error', message: `The flowguard server at ${url} is not ready: ${e.message}` };
		}
		await new ServerClient(send, url).getLock('flowguard:connection-test');
		return { status: 'OK', message: 'Connection successful (flowguard server)' };
	} catch (error) {
		return { status: 'Error', message: errorMessage(error) };
	}
}
