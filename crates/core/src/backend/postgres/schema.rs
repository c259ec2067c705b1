//! flowguard's tables in their own schema, created on first use and versioned.
//!
//! The schema (default `flowguard`) holds a `meta` table whose `version` row is the layout
//! version. Opening a client creates what is missing (in one transaction, under an advisory lock
//! so that processes starting together do not race on `CREATE`), and refuses a schema of a newer
//! version with `ERR_UNSUPPORTED`: this flowguard would misread its tables. An older version
//! would be migrated here (there is none yet).
//!
//! Every name, key and id column is `bytea`: flowguard's names are any UTF-8 (NUL included, which
//! `text` cannot hold), and `bytea` orders them by their bytes, as the other stores do. Times are
//! `int8` milliseconds by the database's clock (see `clock`).

use super::{Ctx, Fail, Postgres, Sql};
use crate::error::{Error, ErrorCode, Result};

/// The layout version this flowguard reads and writes.
pub const VERSION: i64 = 1;

/// The tables and indexes of [`VERSION`], `{s}` standing for the schema.
const TABLES: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS {s}.meta (key text PRIMARY KEY, value text NOT NULL)",
    // Concurrency Lock: one row per name, kept after a release so the fence keeps increasing.
    // `exp`: the lease's end (the release time once released).
    "CREATE TABLE IF NOT EXISTS {s}.locks (
       ns bytea NOT NULL, name bytea NOT NULL, owner text, fence int8 NOT NULL, label bytea,
       exp int8 NOT NULL, PRIMARY KEY (ns, name))",
    // The sweep of names unused for FENCE_KEEP_MS reads them by `exp`.
    "CREATE INDEX IF NOT EXISTS locks_exp ON {s}.locks (exp)",
    // Job State values; `exp` NULL: no expiry.
    "CREATE TABLE IF NOT EXISTS {s}.vals (
       ns bytea NOT NULL, key bytea NOT NULL, json text NOT NULL, exp int8, PRIMARY KEY (ns, key))",
    "CREATE INDEX IF NOT EXISTS vals_exp ON {s}.vals (exp) WHERE exp IS NOT NULL",
    // Job State idempotency keys: pending (owner) or done (result), until `exp`.
    "CREATE TABLE IF NOT EXISTS {s}.idem (
       ns bytea NOT NULL, key bytea NOT NULL, owner text, result text, exp int8 NOT NULL,
       PRIMARY KEY (ns, key))",
    "CREATE INDEX IF NOT EXISTS idem_exp ON {s}.idem (exp)",
    // Rate limiters: the TAT and the pause end (µs), `exp` (ms) when both are reached.
    "CREATE TABLE IF NOT EXISTS {s}.limiters (
       ns bytea NOT NULL, name bytea NOT NULL, tat int8 NOT NULL, until int8, exp int8 NOT NULL,
       PRIMARY KEY (ns, name))",
    "CREATE INDEX IF NOT EXISTS limiters_exp ON {s}.limiters (exp)",
    // Semaphores: a row per name (its last fence, kept until `keep`), a row per holder.
    "CREATE TABLE IF NOT EXISTS {s}.sems (
       ns bytea NOT NULL, name bytea NOT NULL, fence int8 NOT NULL, keep int8 NOT NULL, PRIMARY KEY (ns, name))",
    "CREATE INDEX IF NOT EXISTS sems_keep ON {s}.sems (keep)",
    "CREATE TABLE IF NOT EXISTS {s}.sem_holders (
       ns bytea NOT NULL, name bytea NOT NULL, owner text NOT NULL, fence int8 NOT NULL, label bytea,
       exp int8 NOT NULL, PRIMARY KEY (ns, name, owner))",
    "CREATE INDEX IF NOT EXISTS sem_holders_exp ON {s}.sem_holders (exp)",
    // Item Tracker records: a `Record`'s fields as columns (`s`: the stored status's code in
    // `STORED_STATUS` plus 8 times the record's maxAttempts, see `tracker::status_column`; `t`: the timeline as JSON, NULL when the record's fields imply it).
    // The primary key's index includes the status, lease end and expiry: `listItems` classes and
    // counts a group from the index alone (an index-only scan), without reading its rows. It
    // costs no HOT update: every write of a record sets its expiry from the write's time, and
    // the expiry is indexed (`items_exp`).
    "CREATE TABLE IF NOT EXISTS {s}.items (
       ns bytea NOT NULL, grp bytea NOT NULL, id bytea NOT NULL, s int2 NOT NULL, a int4 NOT NULL,
       o text, l int8 NOT NULL, c int8 NOT NULL, u int8 NOT NULL, d int8 NOT NULL, e bytea,
       x int8 NOT NULL, t text, PRIMARY KEY (ns, grp, id) INCLUDE (s, l, x))",
    // The sweep of expired records reads them by expiry (records kept forever are left out).
    "CREATE INDEX IF NOT EXISTS items_exp ON {s}.items (x) WHERE x < 99999999999999",
    // Dedup Queue: the shard count of a queue holding ids.
    "CREATE TABLE IF NOT EXISTS {s}.q_queues (
       ns bytea NOT NULL, queue bytea NOT NULL, shards int4 NOT NULL, PRIMARY KEY (ns, queue))",
    // An id of a shard: waiting (`owner` NULL; `due`, `first`) or claimed (`owner`, `deadline`;
    // `due` and `first` of an enqueue made while claimed, NULL without one).
    "CREATE TABLE IF NOT EXISTS {s}.q_ids (
       ns bytea NOT NULL, queue bytea NOT NULL, shard int4 NOT NULL, id bytea NOT NULL, due int8,
       first int8, owner text, deadline int8, PRIMARY KEY (ns, queue, shard, id),
       CHECK ((owner IS NULL) = (deadline IS NULL) AND (owner IS NOT NULL OR due IS NOT NULL)))",
    // A read takes a shard's waiting ids by due time and its expired claims by deadline.
    "CREATE INDEX IF NOT EXISTS q_ids_due ON {s}.q_ids (ns, queue, shard, due, id) WHERE owner IS NULL",
    "CREATE INDEX IF NOT EXISTS q_ids_deadline ON {s}.q_ids (ns, queue, shard, deadline, id)
       WHERE owner IS NOT NULL",
    // Dead letters: delivery counts of ids a read with maxDeliveries claimed (an ack drops them),
    // and the dead letters (`died`: ms; `n`: deliveries). A queue holding dead letters holds ids.
    "CREATE TABLE IF NOT EXISTS {s}.q_counts (
       ns bytea NOT NULL, queue bytea NOT NULL, shard int4 NOT NULL, id bytea NOT NULL, n int8 NOT NULL,
       PRIMARY KEY (ns, queue, shard, id))",
    "CREATE TABLE IF NOT EXISTS {s}.q_dead (
       ns bytea NOT NULL, queue bytea NOT NULL, shard int4 NOT NULL, id bytea NOT NULL, died int8 NOT NULL,
       n int8 NOT NULL, PRIMARY KEY (ns, queue, shard, id))",
    "CREATE INDEX IF NOT EXISTS q_dead_died ON {s}.q_dead (ns, queue, shard, died, id)",
];

// The partial index above spells `NEVER` out (SQL text is static): keep them in step.
const _: () = assert!(crate::tracker::NEVER == 99_999_999_999_999);

/// Makes sure the schema is there at [`VERSION`].
pub(super) async fn ensure(store: &Postgres) -> Result<()> {
    let found: i64 = super::transaction!(store, |c| create(&c)).map_err(|e| {
        if e.code == ErrorCode::BackendAuth {
            Error::new(
                ErrorCode::BackendAuth,
                format!(
                    "{} (flowguard creates schema {} and its tables on first use: grant CREATE on the database, \
                     or create the schema for this user)",
                    e.message, store.schema
                ),
            )
        } else {
            e
        }
    })?;
    if found > VERSION {
        return Err(Error::new(
            ErrorCode::Unsupported,
            format!(
                "PostgreSQL schema {} has layout version {found}, written by a newer flowguard; this one reads \
                 version {VERSION}. Nothing was changed: upgrade flowguard, or give another schema",
                store.schema
            ),
        ));
    }
    Ok(())
}

/// Creates what is missing and returns the version found (or written).
async fn create(c: &Ctx<'_, '_>) -> Sql<i64> {
    // One creator at a time per schema (CREATE … IF NOT EXISTS races with itself).
    let key = format!("flowguard schema {}", c.schema);
    c.query_opt("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", &[&key]).await?;
    let exists = c.query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&c.schema]).await?.is_some();
    if !exists {
        c.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {}", c.schema)).await?;
    }
    let meta = c
        .query_opt("SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'meta'", &[&c.schema])
        .await?
        .is_some();
    if meta {
        let v = c.query_opt("SELECT value FROM {s}.meta WHERE key = 'version'", &[]).await?;
        let v: Option<String> = v.map(|r| r.get(0));
        match v.as_deref().map(str::parse::<i64>) {
            // Made already (the usual open), or by a newer flowguard.
            Some(Ok(v)) => {
                if v == VERSION {
                    add_columns(c).await?;
                }
                return Ok(v);
            }
            Some(Err(_)) => return Err(Fail::Corrupt("meta.version is not a number".into())),
            None => {}
        }
    }
    for sql in TABLES {
        c.batch_execute(&sql.replace("{s}", c.schema)).await?;
    }
    add_columns(c).await?;
    c.execute(
        "INSERT INTO {s}.meta (key, value) VALUES ('version', $1) ON CONFLICT (key) DO NOTHING",
        &[&VERSION.to_string()],
    )
    .await?;
    Ok(VERSION)
}

/// Nullable columns added to layout 1 after its first schemas were made, added when absent (a
/// flowguard before them names its columns and never reads them): `sem_holders.k`, the key a
/// permit was taken under (NULL: without one); `items.r`, the result a completion gave (JSON
/// text), and `items.n`, the note of the latest claim (NULL: none given).
const ADDED_COLUMNS: &[(&str, &str, &str)] =
    &[("sem_holders", "k", "bytea"), ("items", "r", "text"), ("items", "n", "text")];

async fn add_columns(c: &Ctx<'_, '_>) -> Sql<()> {
    for (table, column, ty) in ADDED_COLUMNS {
        let has = c
            .query_opt(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 AND column_name = $3",
                &[&c.schema, table, column],
            )
            .await?
            .is_some();
        if !has {
            c.batch_execute(&format!(
                "ALTER TABLE {}.{table} ADD COLUMN IF NOT EXISTS {column} {ty}",
                c.schema
            ))
            .await?;
        }
    }
    Ok(())
}
