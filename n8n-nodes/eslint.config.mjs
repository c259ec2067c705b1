// n8n's community-node lint (@n8n/node-cli), with the n8n Cloud checks left out and the rules
// that a package built on a native addon cannot meet turned off, each with its reason.
import { configWithoutCloudSupport } from '@n8n/node-cli/eslint';

export default [
	...configWithoutCloudSupport,
	{
		// cloud/ and .cloud-package/: the n8n Cloud package, linted in its staged folder with n8n's
		// unmodified config (scripts/cloud-package.mjs --lint).
		ignores: ['e2e/**', 'examples/**', 'scripts/**', 'node_modules/**', 'dist/**', '.n8n-e2e/**', '.n8n-local/**', 'cloud/**', '.cloud-package/**'],
	},
	{
		files: ['package.json'],
		rules: {
			// The nodes are thin: all the work is done by the `flowguard` native core (Rust, napi-rs),
			// which must be a runtime dependency. n8n's installer keeps plain dependencies.
			'@n8n/community-nodes/no-runtime-dependencies': 'off',
			// The project has no public contact address yet: set author.email before publishing to npm.
			'@n8n/community-nodes/valid-author': 'off',
		},
	},
	{
		files: ['nodes/**/*.ts'],
		rules: {
			// `flowguard` (the native core) is not on the n8n Cloud import allowlist: this package is
			// for self-hosted n8n.
			'@n8n/community-nodes/no-restricted-imports': 'off',
			// The nodes reuse n8n's built-in `redis` credential type on purpose, so that people who
			// already have a Redis credential need no new setup.
			'@n8n/community-nodes/no-credential-reuse': 'off',
			// Same reason: n8n's own credential type is named `redis`, without the `Api` suffix that
			// this rule expects of a package's own credential types.
			'n8n-nodes-base/node-class-description-credentials-name-unsuffixed': 'off',
		},
	},
];
