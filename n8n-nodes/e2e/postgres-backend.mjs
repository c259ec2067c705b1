// The PostgreSQL side of the n8n end-to-end suite (run by run-e2e.mjs): a throwaway PostgreSQL
// cluster of its own (../../scripts/postgres.mjs, Debian's postgresql: initdb in a temp dir, a free
// loopback port, TCP connections authenticated with a run-unique password), the "Flowguard Postgres"
// credentials the seed flows' PostgreSQL copies use (and one with a wrong password), and what the
// checks read from the database with psql: the state the nodes left in flowguard's tables.

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';

import { startPostgres } from '../../scripts/postgres.mjs';

export const PG_CRED = { id: 'fgE2ePostgres001', name: 'flowguard e2e Postgres', type: 'flowguardPostgresApi' };
export const PG_BAD_CRED = { id: 'fgE2ePostgresBad', name: 'flowguard e2e Postgres (wrong password)', type: 'flowguardPostgresApi' };
/** The schema of flowguard's tables (the credential's Schema field): not the default, so that it is the credential's. */
const SCHEMA = 'flowguard_e2e';

/**
 * Starts the cluster. Resolves to undefined (after a failed check saying why) when it cannot
 * start; else to { password, wrongPassword, data (the credential's fields), credentials (for
 * `n8n import:credentials`), store (the checks' reads), stop }.
 */
export async function postgresSide({ check, log, prefix }) {
	const password = `e2e-pg-pw-${randomBytes(6).toString('hex')}`;
	let cluster;
	try {
		cluster = await startPostgres({ password });
	} catch (e) {
		check('a throwaway PostgreSQL starts for the Postgres half (scripts/postgres.mjs; apt-get install postgresql)', false, e.message.slice(0, 600));
		return undefined;
	}
	log(`PostgreSQL on 127.0.0.1:${cluster.port} (${cluster.dir})`);
	const data = { host: '127.0.0.1', port: cluster.port, database: 'postgres', user: 'flowguard', password, sslMode: 'disable', schema: SCHEMA };
	const wrongPassword = `e2e-pg-wrong-${randomBytes(6).toString('hex')}`;

	/** Rows of `sql` (psql, unaligned, `|` between the columns), as arrays of strings. */
	const psql = (sql) => {
		const r = spawnSync(
			path.join(cluster.bin, 'psql'),
			['-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-h', '127.0.0.1', '-p', String(cluster.port), '-U', 'flowguard', '-d', 'postgres', '-c', sql],
			{ encoding: 'utf8', env: { ...process.env, PGPASSWORD: password } },
		);
		if (r.status !== 0) throw new Error(`psql failed: ${r.stderr}`);
		return r.stdout.split('\n').filter(Boolean).map((l) => l.split('|'));
	};
	/** A text literal of SQL, as bytea (flowguard's name columns are bytea). */
	const bytes = (s) => `convert_to('${String(s).replaceAll("'", "''")}', 'UTF8')`;
	const ns = `ns = ${bytes(prefix)}`;
	const guard = (fn) => {
		try {
			return fn();
		} catch (e) {
			return { ok: false, detail: e.message };
		}
	};

	const store = {
		tool: 'psql',
		/** The project loop's items: the 5 projects' rows in the items table of the schema. */
		loopState: () =>
			guard(() => {
				const rows = psql(`select convert_from(id, 'UTF8') from ${SCHEMA}.items where ${ns} and grp = ${bytes('weekly-projects')} order by 1`);
				const got = rows.map((r) => r[0]).join(',');
				return { ok: got === 'acme,globex,hooli,initech,umbrella', detail: `${SCHEMA}.items: ${got}`, where: `PostgreSQL, ${SCHEMA}.items` };
			}),
		/** The lock `name` is a row of the locks table, released (no owner), with fencing token `fence`. */
		lockState: (name, fence) =>
			guard(() => {
				const rows = psql(`select owner is null, fence from ${SCHEMA}.locks where ${ns} and name = ${bytes(name)}`);
				return { ok: rows.length === 1 && rows[0][0] === 't' && Number(rows[0][1]) === fence, detail: `${SCHEMA}.locks: ${JSON.stringify(rows)}`, where: `PostgreSQL, ${SCHEMA}.locks` };
			}),
		/** The lock `name` is held: its row has an owner and a lease not yet over (on the database's clock). */
		lockHeld: (name) =>
			guard(() => {
				const rows = psql(
					`select owner from ${SCHEMA}.locks where ${ns} and name = ${bytes(name)} and owner is not null and exp > (extract(epoch from clock_timestamp()) * 1000)::int8`,
				);
				return { ok: rows.length === 1, detail: `${SCHEMA}.locks held: ${JSON.stringify(rows)}`, where: `PostgreSQL, ${SCHEMA}.locks` };
			}),
		/** The ids of `queue` waiting (no owner), sorted, and the count of waiting and claimed: "w/c". */
		queueWaiting: (queue) =>
			guard(() => {
				const rows = psql(`select convert_from(id, 'UTF8') from ${SCHEMA}.q_ids where ${ns} and queue = ${bytes(queue)} and owner is null order by 1`);
				return { ok: true, ids: rows.map((r) => r[0]).join(','), where: `PostgreSQL, ${SCHEMA}.q_ids (owner NULL)` };
			}),
		queueLeft: (queue) =>
			guard(() => {
				const [[w, c]] = psql(
					`select count(*) filter (where owner is null), count(*) filter (where owner is not null) from ${SCHEMA}.q_ids where ${ns} and queue = ${bytes(queue)}`,
				);
				return { ok: true, left: `${w}/${c}`, where: `PostgreSQL, ${SCHEMA}.q_ids` };
			}),
		/** The due time (ms) of waiting id `id` of `queue`. */
		dueOf: (queue, id) =>
			guard(() => {
				const rows = psql(`select due from ${SCHEMA}.q_ids where ${ns} and queue = ${bytes(queue)} and id = ${bytes(id)} and owner is null`);
				return { ok: rows.length === 1, due: Number(rows[0]?.[0] ?? -1), where: `PostgreSQL, ${SCHEMA}.q_ids` };
			}),
	};

	return {
		password,
		wrongPassword,
		data,
		credentials: [
			{ ...PG_CRED, data },
			{ ...PG_BAD_CRED, data: { ...data, password: wrongPassword } },
		],
		store,
		stop: () => {
			if (cluster) cluster.stop();
			cluster = undefined;
		},
	};
}
