import path from 'node:path';

/** The file of the Embedded backend's state, in n8n's folder beside n8n's own database.sqlite. */
export const STATE_FILE = 'flowguard.db';

/**
 * n8n's folder, where n8n keeps its SQLite database, settings and community nodes:
 * `$N8N_USER_FOLDER/.n8n`, else `~/.n8n`, else `.n8n` in the working directory. This is how n8n
 * 2.x computes it (`getN8nFolder` of @n8n/config); a community node cannot load n8n's own modules,
 * so it computes the same.
 */
export function n8nFolder(env: NodeJS.ProcessEnv = process.env): string {
	const home = env.N8N_USER_FOLDER ?? (process.platform === 'win32' ? env.USERPROFILE : env.HOME) ?? process.cwd();
	return path.join(home, '.n8n');
}

/** Where the Embedded backend keeps its state unless told to keep it in memory. */
export function embeddedStatePath(env: NodeJS.ProcessEnv = process.env): string {
	return path.join(n8nFolder(env), STATE_FILE);
}
