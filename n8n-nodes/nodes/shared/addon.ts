import type * as FlowguardModule from 'flowguard';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The flowguard package is loaded when a node first runs, not when n8n loads this package: a
 * missing native binary (no build for the platform, or its optional platform package not
 * installed) must not keep n8n from loading the package and its other nodes. Only our nodes fail,
 * when run, with an error naming the platform and what to do.
 */

/** The platforms flowguard ships a binary for: the suffix of its platform package `flowguard-<suffix>`. */
export const SUPPORTED_PLATFORMS = [
	'linux-x64-gnu',
	'linux-x64-musl',
	'linux-arm64-gnu',
	'linux-arm64-musl',
	'darwin-x64',
	'darwin-arm64',
	'win32-x64-msvc',
];

function libc(): 'gnu' | 'musl' {
	try {
		const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)
			?.header;
		return header?.glibcVersionRuntime ? 'gnu' : 'musl';
	} catch {
		return 'gnu';
	}
}

/** This process's platform as flowguard's platform packages name it: `linux-x64-musl`, `darwin-arm64`, … */
export function platformName(): string {
	const { platform, arch } = process;
	if (platform === 'linux') return `${platform}-${arch}-${libc()}`;
	if (platform === 'win32') return `${platform}-${arch}-msvc`;
	return `${platform}-${arch}`;
}

/** The error our nodes and the credential test give when flowguard cannot be loaded. */
export class AddonUnavailableError extends Error {
	readonly code = 'ERR_ADDON_UNAVAILABLE';
	constructor(
		message: string,
		/** What to do about it. */
		readonly description: string,
	) {
		super(message);
		this.name = 'AddonUnavailableError';
	}
}

/** What the loader said, up to its first sentence: napi-rs's loader goes on to advise `npm i`
 * again, which does not fix a platform package left out; the description says what does. */
function firstSentence(error: unknown): string {
	const text = (error instanceof Error ? error.message : String(error)).split('\n')[0];
	const end = text.indexOf('. ');
	return end === -1 ? text : text.slice(0, end + 1);
}

function unavailable(error: unknown): AddonUnavailableError {
	const platform = platformName();
	const where = `${platform}, Node ${process.version}`;
	try {
		require.resolve('flowguard');
	} catch {
		return new AddonUnavailableError(
			`The package "flowguard" (the native core of these nodes) is not installed (${where})`,
			'n8n-nodes-flowguard depends on it: install n8n-nodes-flowguard again through Settings → Community Nodes, or run npm install flowguard in the folder n8n-nodes-flowguard is installed in (~/.n8n/nodes).',
		);
	}
	let version = '';
	try {
		const manifest = path.join(path.dirname(require.resolve('flowguard')), 'package.json');
		version = String((JSON.parse(fs.readFileSync(manifest, 'utf8')) as { version?: unknown }).version ?? '');
	} catch {
		// No readable package.json next to the entry point: the advice below goes without a version.
	}
	const pkg = `flowguard-${platform}`;
	if (!SUPPORTED_PLATFORMS.includes(platform)) {
		return new AddonUnavailableError(
			`flowguard has no native binary for this platform (${where})`,
			`Binaries exist for ${SUPPORTED_PLATFORMS.join(', ')}. Run n8n on one of them (the official n8n Docker image is linux-x64-musl or linux-arm64-musl), or build flowguard from source for ${platform}. The other nodes of this n8n are not affected.`,
		);
	}
	return new AddonUnavailableError(
		`flowguard could not load its native binary for this platform (${where}): ${firstSentence(error)}`,
		`The binary comes in the platform package ${pkg}, an optional dependency of flowguard, which was not installed here (npm leaves optional dependencies out with --omit=optional, or when the install ran on another platform). Install it next to flowguard, in the folder n8n-nodes-flowguard is installed in: npm install ${pkg}${version ? '@' + version : ''}. The other nodes of this n8n are not affected.`,
	);
}

let loaded: typeof FlowguardModule | undefined;

/**
 * The flowguard module, loaded on first use. A failed load is not remembered: once the binary is
 * installed, the next run loads it.
 */
export async function loadFlowguard(): Promise<typeof FlowguardModule> {
	if (loaded) return loaded;
	try {
		loaded = await import('flowguard');
	} catch (error) {
		throw unavailable(error);
	}
	return loaded;
}
