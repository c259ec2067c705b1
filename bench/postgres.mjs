#!/usr/bin/env node
// flowguard on PostgreSQL against what a PostgreSQL shop writes by hand, side by side in one run
// against one database, each case's rounds interleaved with its contenders' (issue 27):
//   lock pair        acquireLock + releaseLock, one at a time
//                    vs node-postgres: INSERT … ON CONFLICT DO UPDATE … WHERE the lease ended
//                    RETURNING, then DELETE … WHERE owner (one statement each, the database's clock)
//                    vs node-postgres: pg_try_advisory_lock + pg_advisory_unlock (session locks on
//                    one dedicated connection: no lease, no fencing token, gone with the session)
//   acquireLock of a held lock, one attempt at a time (refused)
//                    vs node-postgres: the same INSERT … ON CONFLICT … WHERE the lease ended, finding it held
//   claim + complete claim + complete of one item at a time (owner-checked)
//                    vs node-postgres: INSERT … ON CONFLICT DO UPDATE (a lease, attempts + 1) WHERE
//                    not completed and not held RETURNING, then UPDATE … WHERE owner
//                    and the floor of any two-statement pair: two `SELECT 1` round trips
//   claimBatch       claimBatch of 10,000 ids in one call
//                    vs node-postgres: the same upsert over unnest($1::text[]) in one statement
//                    and three floors: the least a claim of new ids must do (a locked SELECT of
//                    the ids, then a plain INSERT of those it did not find, in one transaction; no
//                    claim rules at all), a plain INSERT of the new ids into the same
//                    table (its primary key checked, no ON CONFLICT), and a plain INSERT into a
//                    table without any index; and the floor of flowguard's own statements: its
//                    locked lookup and its insert of new ids (tracker.rs LOAD_LOCKED and
//                    INSERT_ALIKE) on its own items table, in one transaction, run by a PL/pgSQL
//                    function over ids it makes itself (sorted): the server's part alone, without
//                    the rules, the purge, or any client encoding or decoding
//   claimBatch, an id claimed in range
//                    the same, in a group where one id between the batch's first and last is
//                    claimed first (untimed): flowguard's lookup then probes each id (the case
//                    above, a new group, takes one probe of the range)
//   getItem          getItem of a completed item, one call at a time
//                    vs node-postgres: SELECT of the item's row by its key
//   extendLock       extendLock of a held lock by its owner, one call at a time (a heartbeat)
//                    vs node-postgres: UPDATE … SET exp = now + the lease WHERE name AND owner AND the
//                    lease runs, RETURNING (the same table as the lock pair's)
//   getLock          getLock of a held lock, one call at a time
//                    vs node-postgres: SELECT of the lock's row by its name while its lease runs
//   increment        increment of one counter by 1, one call at a time
//                    vs node-postgres: INSERT … ON CONFLICT DO UPDATE SET v = v + 1 RETURNING v
//   setState         setState of a small JSON value with a TTL, one call at a time
//                    vs node-postgres: INSERT … ON CONFLICT DO UPDATE of the value and its expiry
//   setState ifAbsent  setState with ifAbsent of one key, one call at a time: the first writes, every
//                    other keeps the value (a webhook's first delivery wins)
//                    vs node-postgres: INSERT … ON CONFLICT DO UPDATE … WHERE the value expired,
//                    finding it live (it does not return the kept value, which flowguard does)
//   rateLimit        rateLimit of one token, one call at a time (always allowed)
//                    vs node-postgres: a fixed-window counter (INSERT … ON CONFLICT DO UPDATE SET v = v + 1
//                    on the key of the current second; no spacing, no burst, no pause)
//   enqueue 1        enqueue of one id per call, awaited (the seed-003 webhook step)
//                    vs pg-boss `send` with `singletonKey` = the id on a `short` queue (one queued
//                    job per key: a duplicate is refused)
//   read 100 + ack   readBatch of 100 + ack of them
//                    vs pg-boss `fetch` of 100 + `complete` of them
// flowguard on Redis runs the same calls beside, for the same work on the other backend.
//
//   (cd bench && npm install) && npm run build && node bench/postgres.mjs [dir]
//
// `dir`: a built flowguard package to measure instead of this checkout. BENCH_BEFORE=<dir>: another
// built package (say main's release build) measured in the same run as `flowguard postgres (before)`,
// so a change is compared within one run. Starts a throwaway
// PostgreSQL (scripts/postgres.mjs: initdb in a temp dir, loopback, fsync off for every side
// alike) unless FLOWGUARD_TEST_POSTGRES_URL is set, and a redis-server unless REDIS_URL is set.
// BENCH_ROUNDS (default 5), BENCH_CASES (a regular expression: only the cases it matches); medians of ops/s; the ratio is flowguard on PostgreSQL ÷ the
// hand-written contender.
import { createRequire } from 'node:module'
import { randomBytes } from 'node:crypto'
import { loadavg } from 'node:os'
import { join, resolve } from 'node:path'
import { benchRedis } from './redis-server.mjs'
import { startPostgres } from '../scripts/postgres.mjs'

const require = createRequire(import.meta.url)
const pg = require('pg')
const { PgBoss } = requireBoss()
const dir = resolve(process.argv[2] ?? join(import.meta.dirname, '..'))
const { Flowguard } = require(join(dir, 'index.js'))
const before = process.env.BENCH_BEFORE ? require(join(resolve(process.env.BENCH_BEFORE), 'index.js')).Flowguard : null
const ROUNDS = Number(process.env.BENCH_ROUNDS || 5)

function requireBoss() {
  const m = require('pg-boss')
  return { PgBoss: m.PgBoss ?? m.default ?? m }
}

const cluster = process.env.FLOWGUARD_TEST_POSTGRES_URL ? null : await startPostgres()
const pgUrl = process.env.FLOWGUARD_TEST_POSTGRES_URL ?? cluster.url
const redis = await benchRedis('postgres-bench')
const tag = randomBytes(3).toString('hex')

// BENCH_PG_OPTIONS: PostgreSQL session settings for this build's client only (say
// `-c plan_cache_mode=force_custom_plan`), to measure a setting against the same build without it
// (BENCH_BEFORE=<the same dir>).
const thisUrl = process.env.BENCH_PG_OPTIONS ? `${pgUrl}?options=${encodeURIComponent(process.env.BENCH_PG_OPTIONS)}` : pgUrl
const fgPg = await Flowguard.open({ postgres: { url: thisUrl, schema: `fgbench_${tag}` } })
const fgRedis = await Flowguard.open({ url: redis.url, prefix: `pgb:${tag}:` })
const fgBefore = before && (await before.open({ postgres: { url: pgUrl, schema: `fgbench_${tag}_before` } }))
const pool = new pg.Pool({ connectionString: pgUrl, max: 10 })
const session = new pg.Client({ connectionString: pgUrl })
await session.connect()
await pool.query(`CREATE TABLE IF NOT EXISTS hand_locks (name text PRIMARY KEY, owner text NOT NULL, exp timestamptz NOT NULL)`)
await pool.query(`CREATE TABLE IF NOT EXISTS hand_items (grp text NOT NULL, id text NOT NULL, status text NOT NULL,
  owner text, attempts int NOT NULL, lease timestamptz, updated timestamptz NOT NULL, PRIMARY KEY (grp, id))`)
await pool.query(`CREATE TABLE IF NOT EXISTS hand_holders (name text NOT NULL, owner text NOT NULL, exp timestamptz NOT NULL,
  PRIMARY KEY (name, owner))`)
await pool.query(`CREATE TABLE IF NOT EXISTS hand_vals (key text PRIMARY KEY, v int8, json text, exp timestamptz)`)
await pool.query(`CREATE TABLE IF NOT EXISTS hand_heap (grp text NOT NULL, id text NOT NULL, status text NOT NULL,
  owner text, attempts int NOT NULL, lease timestamptz, updated timestamptz NOT NULL)`)
const boss = new PgBoss({ connectionString: pgUrl, schema: `pgboss_${tag}`, max: 10, supervise: false, schedule: false })
boss.on('error', (e) => console.error('pg-boss:', e.message))
await boss.start()

const LOCK = `INSERT INTO hand_locks (name, owner, exp) VALUES ($1, $2, clock_timestamp() + interval '60 seconds')
  ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, exp = EXCLUDED.exp WHERE hand_locks.exp <= clock_timestamp()
  RETURNING owner`
const UNLOCK = `DELETE FROM hand_locks WHERE name = $1 AND owner = $2`
const INCR = `INSERT INTO hand_vals (key, v) VALUES ($1, 1) ON CONFLICT (key) DO UPDATE SET v = hand_vals.v + 1 RETURNING v`
const PUT = `INSERT INTO hand_vals (key, json, exp) VALUES ($1, $2, clock_timestamp() + interval '600 seconds')
  ON CONFLICT (key) DO UPDATE SET json = EXCLUDED.json, exp = EXCLUDED.exp`
const WINDOW = `INSERT INTO hand_vals (key, v, exp) VALUES ($1 || ':' || floor(extract(epoch FROM clock_timestamp())), 1,
  clock_timestamp() + interval '2 seconds') ON CONFLICT (key) DO UPDATE SET v = hand_vals.v + 1 RETURNING v AS n`
const HELD = `SELECT owner, exp FROM hand_locks WHERE name = $1 AND exp > clock_timestamp()`
const PUT_IF_ABSENT = `INSERT INTO hand_vals (key, json, exp) VALUES ($1, $2, clock_timestamp() + interval '600 seconds')
  ON CONFLICT (key) DO UPDATE SET json = EXCLUDED.json, exp = EXCLUDED.exp WHERE hand_vals.exp <= clock_timestamp()
  RETURNING exp`
const EXTEND = `UPDATE hand_locks SET exp = clock_timestamp() + interval '600 seconds'
  WHERE name = $1 AND owner = $2 AND exp > clock_timestamp() RETURNING exp`
const SEM_TAKE = `INSERT INTO hand_holders (name, owner, exp) SELECT $1, $2, clock_timestamp() + interval '60 seconds'
  WHERE (SELECT count(*) FROM hand_holders WHERE name = $1 AND exp > clock_timestamp()) < $3 RETURNING exp`
const SEM_GIVE = `DELETE FROM hand_holders WHERE name = $1 AND owner = $2 AND exp > clock_timestamp()`
const ITEM = `SELECT status, attempts, owner, lease, updated FROM hand_items WHERE grp = $1 AND id = $2`
const CLAIM = `INSERT INTO hand_items AS t (grp, id, status, owner, attempts, lease, updated)
  SELECT $1, x, 'in_progress', $3, 1, clock_timestamp() + interval '600 seconds', clock_timestamp() FROM unnest($2::text[]) AS x
  ON CONFLICT (grp, id) DO UPDATE SET status = 'in_progress', owner = EXCLUDED.owner, attempts = t.attempts + 1,
    lease = EXCLUDED.lease, updated = EXCLUDED.updated
  WHERE t.status <> 'completed' AND NOT (t.status = 'in_progress' AND t.lease > clock_timestamp())
  RETURNING id, attempts`
const INSERT = (table) => `INSERT INTO ${table} (grp, id, status, owner, attempts, lease, updated)
  SELECT $1, x, 'in_progress', $3, 1, clock_timestamp() + interval '600 seconds', clock_timestamp() FROM unnest($2::text[]) AS x`
const COMPLETE = `UPDATE hand_items SET status = 'completed', lease = NULL, updated = clock_timestamp()
  WHERE grp = $1 AND id = $2 AND owner = $3 RETURNING attempts`

// flowguard's statements for a claimBatch of new ids (crates/core/src/backend/postgres/tracker.rs
// LOAD_LOCKED and INSERT_ALIKE; status 1: in_progress) on its items table under another key
// prefix, run on the server: ids b-0 … b-(n-1) of group g, sorted by their bytes.
await pool.query(`CREATE OR REPLACE FUNCTION hand_fg_claim(s text, g bytea, n int, o text, now int8) RETURNS int8
  LANGUAGE plpgsql AS $f$
  DECLARE
    w bytea[] := ARRAY(SELECT convert_to('b-' || i, 'UTF8') FROM generate_series(0, n - 1) i ORDER BY 1);
    found int8;
    inserted int8;
  BEGIN
    EXECUTE format('SELECT count(*) FROM unnest($3::bytea[]) AS w(id),
      LATERAL (SELECT id, s, a, o, l, c, u, d, e, x, t, r, n FROM %I.items
        WHERE ns = $1 AND grp = $2 AND id = w.id FOR UPDATE) i
      WHERE EXISTS (SELECT FROM %I.items WHERE ns = $1 AND grp = $2
        AND id BETWEEN ($3::bytea[])[1] AND ($3::bytea[])[cardinality($3::bytea[])])', s, s)
      INTO found USING 'hand:'::bytea, g, w;
    EXECUTE format('INSERT INTO %I.items (ns, grp, id, s, a, o, l, c, u, d, e, x, t, r, n)
      SELECT $1, $2, w.id, 1, 1, $4, $5, $6, $6, 0, NULL, $7, NULL, NULL, NULL FROM unnest($3::bytea[]) AS w(id)', s)
      USING 'hand:'::bytea, g, w, o, now + 600000, now, now + 600000 + 86400000;
    GET DIAGNOSTICS inserted = ROW_COUNT;
    RETURN inserted - found;
  END $f$`)

/** A plain INSERT of n new ids into `table` in one statement (a floor for claimBatch). */
const insertInto = (table) => async (n) => {
  const list = ids(n, 'b')
  const g = uniq('g')
  return timed(async () => {
    const r = await pool.query(INSERT(table), [g, list, randomBytes(16).toString('hex')])
    if (r.rowCount !== n) throw new Error(`inserted ${r.rowCount}`)
  })
}

/** Seconds `fn` takes. */
async function timed(fn) {
  const t0 = process.hrtime.bigint()
  await fn()
  return Number(process.hrtime.bigint() - t0) / 1e9
}

const chunks = (xs, n) => Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, i * n + n))
const ids = (n, p) => Array.from({ length: n }, (_, i) => `${p}-${i}`)
let seq = 0
const uniq = (p) => `${p}-${tag}-${seq++}`

/** A new lock name, held for 10 minutes by flowguard (untimed). */
async function heldLock(fg) {
  const name = uniq('l')
  await fg.acquireLock(name, { timeoutMs: 600000 })
  return name
}

/** A new group of n items, each claimed and completed by flowguard (untimed). */
async function completedItems(fg, n) {
  const g = uniq('g')
  const all = ids(n, 'i')
  const b = await fg.claimBatch(g, all)
  await fg.setItems(g, all.map((id) => ({ id, status: 'completed', owner: b.owner })))
  return { g, all }
}

/** The same in the hand-written table (untimed). */
async function handCompletedItems(n, owner) {
  const g = uniq('g')
  const all = ids(n, 'i')
  await pool.query(CLAIM, [g, all, owner])
  await pool.query(`UPDATE hand_items SET status = 'completed', lease = NULL WHERE grp = $1`, [g])
  return { g, all }
}

const cases = {
  'lock pair, one at a time': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const name = uniq('l')
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const l = await fg.acquireLock(name, { timeoutMs: 60000 })
          await fg.releaseLock(name, l.owner)
        }
      })
    },
    async 'pg INSERT ON CONFLICT + DELETE'(n) {
      const name = uniq('l')
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const owner = randomBytes(16).toString('hex')
          const r = await pool.query(LOCK, [name, owner])
          if (r.rowCount !== 1) throw new Error('hand lock not acquired')
          await pool.query(UNLOCK, [name, owner])
        }
      })
    },
    async 'pg advisory lock + unlock'(n) {
      const key = seq++
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const r = await session.query('SELECT pg_try_advisory_lock($1) AS ok', [key])
          if (!r.rows[0].ok) throw new Error('advisory lock not acquired')
          await session.query('SELECT pg_advisory_unlock($1)', [key])
        }
      })
    },
  },
  // A busy lock (a run already going: the caller skips), one attempt at a time.
  'acquireLock of a held lock, one at a time': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const name = await heldLock(fg)
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const l = await fg.acquireLock(name, { timeoutMs: 60000 })
          if (l.acquired) throw new Error('a held lock acquired')
        }
      })
    },
    async 'pg INSERT ON CONFLICT (refused)'(n) {
      const name = uniq('l')
      await pool.query(LOCK, [name, randomBytes(16).toString('hex')])
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const r = await pool.query(LOCK, [name, randomBytes(16).toString('hex')])
          if (r.rowCount !== 0) throw new Error('hand lock taken while held')
        }
      })
    },
  },
  'claim + complete, one at a time': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const g = uniq('g')
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const c = await fg.claim(g, `i${i}`)
          await fg.complete(g, `i${i}`, { owner: c.owner })
        }
      })
    },
    async 'pg upsert + UPDATE'(n) {
      const g = uniq('g')
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const owner = randomBytes(16).toString('hex')
          const c = await pool.query(CLAIM, [g, [`i${i}`], owner])
          if (c.rowCount !== 1) throw new Error('hand claim refused')
          const d = await pool.query(COMPLETE, [g, `i${i}`, owner])
          if (d.rowCount !== 1) throw new Error('hand complete refused')
        }
      })
    },
    async 'floor: two SELECT 1 round trips'(n) {
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          await pool.query('SELECT 1')
          await pool.query('SELECT 1')
        }
      })
    },
  },
  // A re-run: every item is completed already, each claim is refused (flowguard answers with the
  // item's state; the hand-written upsert only finds that nothing was claimed).
  'claim refused (completed), one at a time': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const { g, all } = await completedItems(fg, n)
      return timed(async () => {
        for (const id of all) {
          const c = await fg.claim(g, id)
          if (c.claimed || c.reason !== 'completed') throw new Error(`claim of a completed item: ${JSON.stringify(c)}`)
        }
      })
    },
    async 'pg upsert (refused)'(n) {
      const owner = randomBytes(16).toString('hex')
      const { g, all } = await handCompletedItems(n, owner)
      return timed(async () => {
        for (const id of all) {
          const c = await pool.query(CLAIM, [g, [id], owner])
          if (c.rowCount !== 0) throw new Error('hand claim of a completed item taken')
        }
      })
    },
  },
  // Reads (a workflow asking where an item or a lock stands): one call each, awaited.
  'getItem, one at a time': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const { g, all } = await completedItems(fg, n)
      return timed(async () => {
        for (const id of all) {
          const s = await fg.getItem(g, id)
          if (s.status !== 'completed') throw new Error(`getItem: ${JSON.stringify(s)}`)
        }
      })
    },
    async 'pg SELECT by key'(n) {
      const { g, all } = await handCompletedItems(n, randomBytes(16).toString('hex'))
      return timed(async () => {
        for (const id of all) {
          const r = await pool.query(ITEM, [g, id])
          if (r.rows[0]?.status !== 'completed') throw new Error('hand item not found')
        }
      })
    },
  },
  'extendLock, one at a time': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const name = uniq('l')
      const { owner } = await fg.acquireLock(name, { timeoutMs: 600000 })
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const r = await fg.extendLock(name, owner, { timeoutMs: 600000 })
          if (!r.extended) throw new Error(`extendLock: ${JSON.stringify(r)}`)
        }
      })
    },
    async 'pg UPDATE by owner'(n) {
      const [name, owner] = [uniq('l'), randomBytes(16).toString('hex')]
      await pool.query(LOCK, [name, owner])
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const r = await pool.query(EXTEND, [name, owner])
          if (r.rowCount !== 1) throw new Error('hand extend refused')
        }
      })
    },
  },
  'getLock, one at a time': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const name = await heldLock(fg)
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const l = await fg.getLock(name)
          if (!l.locked) throw new Error(`getLock: ${JSON.stringify(l)}`)
        }
      })
    },
    async 'pg SELECT by key'(n) {
      const name = uniq('l')
      await pool.query(LOCK, [name, randomBytes(16).toString('hex')])
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const r = await pool.query(HELD, [name])
          if (r.rowCount !== 1) throw new Error('hand lock not held')
        }
      })
    },
  },
  // Job State: a counter per workflow run, a value per step.
  'increment, one at a time': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const key = uniq('c')
      return timed(async () => {
        for (let i = 1; i <= n; i++) {
          if ((await fg.increment(key, 1)) !== i) throw new Error('increment miscounted')
        }
      })
    },
    async 'pg upsert v + 1'(n) {
      const key = uniq('c')
      return timed(async () => {
        for (let i = 1; i <= n; i++) {
          const r = await pool.query(INCR, [key])
          if (Number(r.rows[0].v) !== i) throw new Error('hand increment miscounted')
        }
      })
    },
  },
  'setState, one at a time': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const key = uniq('s')
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const r = await fg.setState(key, { step: i, ok: true }, { ttlMs: 600000 })
          if (!r.written) throw new Error('setState not written')
        }
      })
    },
    async 'pg upsert'(n) {
      const key = uniq('s')
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          await pool.query(PUT, [key, JSON.stringify({ step: i, ok: true })])
        }
      })
    },
  },
  'setState ifAbsent, one at a time': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const key = uniq('s')
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const r = await fg.setState(key, { step: i, ok: true }, { ttlMs: 600000, ifAbsent: true })
          if (r.written !== (i === 0)) throw new Error(`setState ifAbsent: ${JSON.stringify(r)}`)
        }
      })
    },
    async 'pg upsert where expired'(n) {
      const key = uniq('s')
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const r = await pool.query(PUT_IF_ABSENT, [key, JSON.stringify({ step: i, ok: true })])
          if (r.rowCount !== (i === 0 ? 1 : 0)) throw new Error('hand set if absent')
        }
      })
    },
  },
  // Rate Limiter: a take per item, as an n8n flow calls it before each request (limit high
  // enough that every take is allowed).
  'rateLimit, one at a time': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const name = uniq('r')
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const r = await fg.rateLimit(name, { limit: 1000000, periodMs: 1000, burst: 1000000 })
          if (!r.allowed) throw new Error('rateLimit refused')
        }
      })
    },
    async 'pg fixed-window counter upsert'(n) {
      const name = uniq('r')
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const r = await pool.query(WINDOW, [name])
          if (Number(r.rows[0].n) > 1000000) throw new Error('hand window full')
        }
      })
    },
  },
  'claimBatch of 10,000': {
    n: 10000,
    flowguard: (fg) => async (n) => {
      const list = ids(n, 'b')
      const g = uniq('g')
      return timed(async () => {
        const r = await fg.claimBatch(g, list)
        if (r.claimed !== n) throw new Error(`claimed ${r.claimed}`)
      })
    },
    async 'pg upsert over unnest'(n) {
      const list = ids(n, 'b')
      const g = uniq('g')
      return timed(async () => {
        const r = await pool.query(CLAIM, [g, list, randomBytes(16).toString('hex')])
        if (r.rowCount !== n) throw new Error(`claimed ${r.rowCount}`)
      })
    },
    async 'floor: pg SELECT of the ids, then INSERT of the absent ones'(n) {
      const list = ids(n, 'b')
      const g = uniq('g')
      const client = await pool.connect()
      try {
        return await timed(async () => {
          await client.query('BEGIN')
          const found = await client.query('SELECT id FROM hand_items WHERE grp = $1 AND id = ANY($2::text[]) FOR UPDATE', [g, list])
          const have = new Set(found.rows.map((r) => r.id))
          const r = await client.query(INSERT('hand_items'), [g, list.filter((id) => !have.has(id)), randomBytes(16).toString('hex')])
          await client.query('COMMIT')
          if (r.rowCount !== n) throw new Error(`inserted ${r.rowCount}`)
        })
      } finally {
        client.release()
      }
    },
    async "floor: flowguard's lookup + insert on the server, its table, no rules"(n) {
      const g = uniq('g')
      const client = await pool.connect()
      try {
        return await timed(async () => {
          await client.query('BEGIN')
          const r = await client.query('SELECT hand_fg_claim($1, $2, $3, $4, $5) AS n',
            [`fgbench_${tag}`, Buffer.from(g), n, randomBytes(16).toString('hex'), Date.now()])
          await client.query('COMMIT')
          if (Number(r.rows[0].n) !== n) throw new Error(`claimed ${r.rows[0].n}`)
        })
      } finally {
        client.release()
      }
    },
    'floor: pg INSERT of new ids, primary key only': insertInto('hand_items'),
    'floor: pg INSERT into a table without indexes': insertInto('hand_heap'),
  },
  'claimBatch of 10,000, an id claimed in range': {
    n: 10000,
    flowguard: (fg) => async (n) => {
      const list = ids(n, 'b')
      const g = uniq('g')
      // 'b-5000a' sorts between 'b-5000' and 'b-5001'.
      await fg.claimBatch(g, ['b-5000a'])
      return timed(async () => {
        const r = await fg.claimBatch(g, list)
        if (r.claimed !== n) throw new Error(`claimed ${r.claimed}`)
      })
    },
  },
  // A semaphore of 3 permits: acquire + release, one pair at a time (the name's first acquisition
  // untimed). The hand-written one is what a careful node-postgres user writes: a transaction
  // that takes an advisory lock on the name, counts the live holders in a statement after it and
  // inserts when one is free, then a DELETE by owner.
  'semaphore pair, one at a time': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const name = uniq('s')
      const first = await fg.acquirePermit(name, { permits: 3 })
      await fg.releasePermit(name, first.owner)
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const p = await fg.acquirePermit(name, { permits: 3, timeoutMs: 60000 })
          if (!p.acquired) throw new Error('permit refused')
          const r = await fg.releasePermit(name, p.owner)
          if (!r.released) throw new Error('permit not released')
        }
      })
    },
    async 'pg transaction (advisory lock, count, INSERT) + DELETE'(n) {
      const name = uniq('s')
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const owner = randomBytes(16).toString('hex')
          const db = await pool.connect()
          let got
          try {
            await db.query('BEGIN')
            await db.query('SELECT pg_advisory_xact_lock(hashtext($1))', [name])
            got = await db.query(SEM_TAKE, [name, owner, 3])
            await db.query('COMMIT')
          } catch (e) {
            await db.query('ROLLBACK')
            throw e
          } finally {
            db.release()
          }
          if (got.rowCount !== 1) throw new Error('hand permit refused')
          const r = await pool.query(SEM_GIVE, [name, owner])
          if (r.rowCount !== 1) throw new Error('hand permit not released')
        }
      })
    },
  },
  'enqueue 1, awaited': {
    n: 1000,
    flowguard: (fg) => async (n) => {
      const q = uniq('q')
      return timed(async () => {
        for (let i = 0; i < n; i++) await fg.enqueue(q, `e-${i}`)
      })
    },
    async 'pg-boss send singletonKey'(n) {
      const q = uniq('q').replace(/-/g, '_')
      await boss.createQueue(q, { policy: 'short' })
      return timed(async () => {
        for (let i = 0; i < n; i++) {
          const id = await boss.send(q, { id: `e-${i}` }, { singletonKey: `e-${i}` })
          if (id === null) throw new Error('pg-boss refused a new key')
        }
      })
    },
  },
  'read 100 + ack': {
    n: 5000,
    flowguard: (fg) => async (n) => {
      const q = uniq('q')
      await fg.enqueue(q, ids(n, 'r'))
      return timed(async () => {
        for (let done = 0; done < n;) {
          const b = await fg.readBatch(q, { limit: 100 })
          await fg.ack(q, b.owner, b.ids)
          done += b.ids.length
        }
      })
    },
    async 'pg-boss fetch + complete'(n) {
      const q = uniq('q').replace(/-/g, '_')
      await boss.createQueue(q, { policy: 'short' })
      for (const c of chunks(ids(n, 'r'), 1000)) await boss.insert(c.map((id) => ({ name: q, data: { id }, singletonKey: id })))
      return timed(async () => {
        for (let done = 0; done < n;) {
          const jobs = await boss.fetch(q, { batchSize: 100 })
          if (!jobs || jobs.length === 0) throw new Error(`pg-boss gave nothing after ${done}`)
          await boss.complete(q, jobs.map((j) => j.id))
          done += jobs.length
        }
      })
    },
  },
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const loads = [loadavg()[0]]
const rows = []
const only = process.env.BENCH_CASES ? new RegExp(process.env.BENCH_CASES) : null
for (const [name, spec] of Object.entries(cases).filter(([k]) => !only || only.test(k))) {
  // The flowguard calls run on each flowguard client: this build on PostgreSQL, the build before
  // (BENCH_BEFORE) on PostgreSQL, this build on Redis.
  const { flowguard, n, ...contenders } = spec
  const c = {
    n,
    'flowguard postgres': flowguard(fgPg),
    ...(fgBefore ? { 'flowguard postgres (before)': flowguard(fgBefore) } : {}),
    ...contenders,
    'flowguard redis': flowguard(fgRedis),
  }
  const sides = Object.keys(c).filter((k) => k !== 'n')
  const rates = Object.fromEntries(sides.map((s) => [s, []]))
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? sides : [...sides].reverse()
    for (const s of order) rates[s].push(c.n / (await c[s](c.n)))
  }
  loads.push(loadavg()[0])
  const fg = median(rates['flowguard postgres'])
  for (const s of sides) {
    const m = median(rates[s])
    const ratio = s === 'flowguard postgres' ? '' : (fg / m).toFixed(2)
    rows.push(`| ${name} | ${s} | ${m.toFixed(0)} | ${ratio} | ${Math.min(...rates[s]).toFixed(0)} – ${Math.max(...rates[s]).toFixed(0)} |`)
  }
  process.stderr.write(`${name} done\n`)
}

console.log(`flowguard at ${dir}; PostgreSQL ${(await pool.query('SHOW server_version')).rows[0].server_version}, ` +
  `node-postgres ${require('pg/package.json').version}, pg-boss ${require('pg-boss/package.json').version}; ` +
  `${fgBefore ? `before: ${resolve(process.env.BENCH_BEFORE)}; ` : ''}${ROUNDS} rounds, medians; 1-minute load ${loads.map((l) => l.toFixed(1)).join(', ')}`)
console.log('\n| case | contender | ops/s | flowguard postgres ÷ this | min – max |\n|---|---|---:|---:|---|')
for (const r of rows) console.log(r)

await boss.stop({ graceful: false, wait: true })
await session.end()
await pool.end()
await fgPg.close()
await fgRedis.close()
await fgBefore?.close()
redis.stop()
cluster?.stop()
