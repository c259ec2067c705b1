//! The file's layout and how a file is opened: pragmas, version check, tables.
//!
//! `application_id` marks a file as a flowguard store (so a path that points at some other
//! SQLite database, n8n's own for one, is refused instead of written into); `user_version` is
//! the layout's version. A file of a newer layout is refused with `ERR_UNSUPPORTED` and left as
//! it is; a file of an older one is migrated when opened, in one transaction (see [`migrate`]).
//!
//! Layout 2 keeps items in a table clustered on their key (`WITHOUT ROWID`) and without an index
//! on their expiry, so a claim writes one B-tree page instead of three; expired items are swept
//! in key order instead (`tracker::purge`). Layout 3 adds the Rate Limiter and Semaphore tables.
//! Layout 4 forgets the fences of names unused for 30 days (`fences`): a released lock keeps its
//! release time in `exp` (it was 0), and a semaphore's fence row says until when it is kept.
//! Layout 5 keeps an item's record as columns instead of one JSON text (the timeline stays
//! JSON): a row about half as long, so a claim fills fewer pages, a sweep walks fewer, and a
//! write encodes no record. Layout 6 keys an item's row by one byte string made of its namespace,
//! group and id (`item_key`), compared by one `memcmp` instead of three columns; and it adds the
//! items' expiry marks and the position of the sweep for expired items, shared by the processes
//! that write the file (`item_sweep`).

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::{storage_error, BUSY_TIMEOUT_MS};
use crate::error::{Error, ErrorCode, Result};

/// "FGST": the `application_id` of a flowguard store.
const APPLICATION_ID: i64 = 0x4647_5354;
/// The layout this build writes.
pub const VERSION: i64 = 6;

const TABLES: &str = "
CREATE TABLE meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO meta VALUES ('clock', 0);
-- Item Tracker: the record as JSON (the shape of tracker::Record), forgotten at exp.
CREATE TABLE items(ns TEXT NOT NULL, grp TEXT NOT NULL, id TEXT NOT NULL, exp INTEGER NOT NULL,
  rec TEXT NOT NULL, PRIMARY KEY(ns, grp, id)) WITHOUT ROWID;
-- Concurrency Lock: a row per lock name ever taken (it keeps the last fencing token); owner is
-- NULL when free.
CREATE TABLE locks(ns TEXT NOT NULL, name TEXT NOT NULL, owner TEXT, fence INTEGER NOT NULL,
  label TEXT, exp INTEGER NOT NULL, PRIMARY KEY(ns, name)) WITHOUT ROWID;
-- Dedup Queue: a row per shard that holds ids, with the queue's shard count (the same in every
-- row of a queue); waiting ids; claimed ids (with the due time of an enqueue made while claimed,
-- in again).
CREATE TABLE q_shards(ns TEXT NOT NULL, queue TEXT NOT NULL, shard INTEGER NOT NULL,
  shards INTEGER NOT NULL, PRIMARY KEY(ns, queue, shard)) WITHOUT ROWID;
CREATE TABLE q_waiting(ns TEXT NOT NULL, queue TEXT NOT NULL, shard INTEGER NOT NULL,
  id TEXT NOT NULL, due INTEGER NOT NULL, PRIMARY KEY(ns, queue, shard, id)) WITHOUT ROWID;
CREATE INDEX q_waiting_due ON q_waiting(ns, queue, shard, due, id);
CREATE TABLE q_claimed(ns TEXT NOT NULL, queue TEXT NOT NULL, shard INTEGER NOT NULL,
  id TEXT NOT NULL, deadline INTEGER NOT NULL, owner TEXT NOT NULL, again INTEGER,
  PRIMARY KEY(ns, queue, shard, id)) WITHOUT ROWID;
CREATE INDEX q_claimed_deadline ON q_claimed(ns, queue, shard, deadline, id);
-- Job State: values (exp NULL: no expiry) and idempotency keys (owner while pending, result
-- when done).
CREATE TABLE vals(ns TEXT NOT NULL, key TEXT NOT NULL, json TEXT NOT NULL, exp INTEGER,
  UNIQUE(ns, key));
CREATE INDEX vals_exp ON vals(exp) WHERE exp IS NOT NULL;
CREATE TABLE idem(ns TEXT NOT NULL, key TEXT NOT NULL, owner TEXT, result TEXT,
  exp INTEGER NOT NULL, UNIQUE(ns, key));
CREATE INDEX idem_exp ON idem(exp);
";

/// Layout 3 adds the Rate Limiter and the Semaphore (an older file gets these tables).
const TABLES_V3: &str = "
-- Rate Limiter: the TAT (µs since the epoch) per name; a row whose exp (ms) has passed equals
-- no row.
CREATE TABLE limiters(ns TEXT NOT NULL, name TEXT NOT NULL, tat INTEGER NOT NULL,
  exp INTEGER NOT NULL, UNIQUE(ns, name));
CREATE INDEX limiters_exp ON limiters(exp);
-- Semaphore: a row per name ever taken (its last fencing token), a row per holder.
CREATE TABLE sem_fences(ns TEXT NOT NULL, name TEXT NOT NULL, fence INTEGER NOT NULL,
  PRIMARY KEY(ns, name)) WITHOUT ROWID;
CREATE TABLE sem_holders(ns TEXT NOT NULL, name TEXT NOT NULL, owner TEXT NOT NULL,
  fence INTEGER NOT NULL, label TEXT, exp INTEGER NOT NULL, UNIQUE(ns, name, owner));
CREATE INDEX sem_holders_exp ON sem_holders(exp);
";

/// Layout 4: a semaphore name's fence is kept until `keep` (ms since the epoch).
const TABLES_V4: &str = "ALTER TABLE sem_fences ADD COLUMN keep INTEGER NOT NULL DEFAULT 0;";

/// Layout 5: the items' records as columns (`s`: 0 new, 1 in progress, 2 completed, 3 failed;
/// `t`: the timeline as JSON); a file of layout 4 gets its records converted.
const TABLES_V5: &str = "
CREATE TABLE items5(ns TEXT NOT NULL, grp TEXT NOT NULL, id TEXT NOT NULL, exp INTEGER NOT NULL,
  s INTEGER NOT NULL, a INTEGER NOT NULL, o TEXT, l INTEGER NOT NULL, c INTEGER NOT NULL,
  u INTEGER NOT NULL, d INTEGER NOT NULL, e TEXT, t TEXT NOT NULL, PRIMARY KEY(ns, grp, id)) WITHOUT ROWID;
INSERT INTO items5 SELECT ns, grp, id, exp,
  CASE rec ->> '$.s' WHEN 'in_progress' THEN 1 WHEN 'completed' THEN 2 WHEN 'failed' THEN 3 ELSE 0 END,
  coalesce(rec ->> '$.a', 0), rec ->> '$.o', coalesce(rec ->> '$.l', 0), coalesce(rec ->> '$.c', 0),
  coalesce(rec ->> '$.u', 0), coalesce(rec ->> '$.d', 0), rec ->> '$.e', coalesce(rec -> '$.t', '[]')
  FROM items;
DROP TABLE items;
ALTER TABLE items5 RENAME TO items;
";

/// Layout 6: items keyed by one byte string (see `item_key`; the rows are copied over by
/// [`rekey_items`]), the items' expiry marks (unknown until a first pass of the sweep) and the
/// sweep's position (no row: at the start of the table).
const TABLES_V6: &str = "
CREATE TABLE items6(k BLOB NOT NULL PRIMARY KEY, exp INTEGER NOT NULL, s INTEGER NOT NULL,
  a INTEGER NOT NULL, o TEXT, l INTEGER NOT NULL, c INTEGER NOT NULL, u INTEGER NOT NULL,
  d INTEGER NOT NULL, e TEXT, t TEXT NOT NULL) WITHOUT ROWID;
INSERT INTO meta VALUES ('items_low', -9223372036854775808), ('items_pass_low', 9223372036854775807);
CREATE TABLE item_sweep(k INTEGER PRIMARY KEY CHECK (k = 0), at BLOB NOT NULL);
";

/// Copies the items of layout 5 (keyed by three columns) into `items6` under their one-column
/// keys, and puts that table in place.
fn rekey_items(conn: &Connection) -> rusqlite::Result<()> {
    {
        let mut read = conn.prepare("SELECT ns, grp, id, exp, s, a, o, l, c, u, d, e, t FROM items")?;
        let mut write =
            conn.prepare("INSERT INTO items6 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)")?;
        let mut rows = read.query([])?;
        while let Some(r) = rows.next()? {
            let (ns, grp, id): (String, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
            let key = super::item_key::item(&super::item_key::group(&ns, &grp), &id);
            let v = |i| r.get::<_, rusqlite::types::Value>(i);
            write.execute(rusqlite::params![
                key,
                v(3)?,
                v(4)?,
                v(5)?,
                v(6)?,
                v(7)?,
                v(8)?,
                v(9)?,
                v(10)?,
                v(11)?,
                v(12)?
            ])?;
        }
    }
    conn.execute_batch("DROP TABLE items; ALTER TABLE items6 RENAME TO items;")
}

/// Opens `path` (creating the file when absent), checks it is a flowguard store of a layout
/// this build knows, and creates the tables of a new file.
pub(super) fn open(path: &Path) -> Result<Connection> {
    let p = path.display();
    let fail = |e| storage_error(path, e);
    configure_sqlite();
    let flags =
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(fail)?;
    if conn.is_readonly(rusqlite::MAIN_DB).map_err(fail)? {
        if let Some(why) = super::file_access::reason(path) {
            return Err(super::cannot_use(path, &why));
        }
        return Err(Error::new(
            ErrorCode::Storage,
            format!("the store file {p} is read-only; it must be writable"),
        ));
    }
    conn.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS)).map_err(fail)?;
    conn.set_prepared_statement_cache_capacity(64);
    // A batch claim of 10,000 new items touches more pages than SQLite's default cache (2 MB)
    // holds; pages spilled from it mid-transaction are written to the log twice.
    conn.pragma_update(None, "cache_size", -16_384).map_err(fail)?;
    // Two processes opening a new file at once: switching it to WAL can report "busy" without
    // waiting in the busy handler, so the first steps are retried until the busy timeout.
    let deadline = std::time::Instant::now() + Duration::from_millis(BUSY_TIMEOUT_MS);
    loop {
        match init(&conn, path) {
            Err(Init::Busy(_)) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(Init::Busy(e)) => return Err(fail(e)),
            Err(Init::Failed(e)) => return Err(e),
            Ok(()) => {
                // From here on, a call never waits inside SQLite for another process's lock:
                // `Durable::transaction` retries a busy call without blocking its thread.
                conn.busy_timeout(Duration::ZERO).map_err(fail)?;
                return Ok(conn);
            }
        }
    }
}

/// Process-wide settings of the bundled SQLite, made once before its first connection opens
/// (they cannot change after): no statistics of its memory use, which SQLite would otherwise
/// update under a global mutex on every allocation and free. Nothing here reads them.
fn configure_sqlite() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: a documented configuration option with its documented int argument. Called
        // after SQLite was initialized (another user of rusqlite in this process opened a
        // connection first), it returns SQLITE_MISUSE and changes nothing, which is fine.
        unsafe {
            rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 0 as std::ffi::c_int);
        }
    });
}

enum Init {
    Busy(rusqlite::Error),
    Failed(Error),
}

fn busy(path: &Path) -> impl Fn(rusqlite::Error) -> Init + '_ {
    move |e| match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) =>
        {
            Init::Busy(e)
        }
        _ => Init::Failed(storage_error(path, e)),
    }
}

/// What a file holds, read before anything is written to it.
struct Found {
    app: i64,
    version: i64,
    tables: i64,
}

impl Found {
    fn read(conn: &Connection) -> rusqlite::Result<Found> {
        Ok(Found {
            app: conn.pragma_query_value(None, "application_id", |r| r.get(0))?,
            version: conn.pragma_query_value(None, "user_version", |r| r.get(0))?,
            tables: conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?,
        })
    }

    /// An empty file (new, or made by another process opening it at the same time).
    fn is_empty(&self) -> bool {
        self.app == 0 && self.version == 0 && self.tables == 0
    }

    /// Refuses a file that is not a flowguard store of a layout this build reads.
    fn check(&self, path: &Path) -> Result<()> {
        let p = path.display();
        if self.is_empty() {
            return Ok(());
        }
        if self.app != APPLICATION_ID {
            return Err(Error::new(
                ErrorCode::Storage,
                format!("{p} is an SQLite database of another program, not a flowguard store; give flowguard a file of its own"),
            ));
        }
        if self.version > VERSION {
            return Err(Error::new(
                ErrorCode::Unsupported,
                format!(
                    "the store file {p} was written by a newer flowguard (layout {}; this one reads up to \
                     {VERSION}); upgrade flowguard, the file was left as it is",
                    self.version
                ),
            ));
        }
        Ok(())
    }
}

/// The file identified first, by reads only (another program's database, or a newer layout, is
/// refused before anything is written into it: not even its journal mode changes); then WAL
/// mode, and the layout checked again (another process may have created it meanwhile) and
/// created or migrated in one write transaction.
fn init(conn: &Connection, path: &Path) -> std::result::Result<(), Init> {
    let p = path.display();
    Found::read(conn).map_err(busy(path))?.check(path).map_err(Init::Failed)?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)).map_err(busy(path))?;
    if !mode.eq_ignore_ascii_case("wal") {
        if let Some(why) = super::file_access::reason(path) {
            return Err(Init::Failed(super::cannot_use(path, &why)));
        }
        return Err(Init::Failed(Error::new(
            ErrorCode::Storage,
            format!("the store file {p} cannot use a write-ahead log (journal mode {mode})"),
        )));
    }
    conn.pragma_update(None, "synchronous", "NORMAL").map_err(busy(path))?;
    conn.execute_batch("BEGIN IMMEDIATE").map_err(busy(path))?;
    match check_or_create(conn, path) {
        Ok(()) => conn.execute_batch("COMMIT").map_err(busy(path)),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(Init::Failed(e))
        }
    }
}

fn check_or_create(conn: &Connection, path: &Path) -> Result<()> {
    let fail = |e| storage_error(path, e);
    let found = Found::read(conn).map_err(fail)?;
    found.check(path)?;
    if found.is_empty() {
        conn.execute_batch(TABLES).map_err(fail)?;
        conn.execute_batch(TABLES_V3).map_err(fail)?;
        conn.execute_batch(TABLES_V4).map_err(fail)?;
        conn.execute_batch(TABLES_V5).map_err(fail)?;
        conn.execute_batch(TABLES_V6).map_err(fail)?;
        rekey_items(conn).map_err(fail)?;
        conn.pragma_update(None, "application_id", APPLICATION_ID).map_err(fail)?;
        conn.pragma_update(None, "user_version", VERSION).map_err(fail)?;
        return Ok(());
    }
    if found.version < VERSION {
        return migrate(conn, found.version).map_err(fail);
    }
    Ok(())
}

/// Brings a file of layout `from` to [`VERSION`], inside the caller's write transaction (a
/// crash leaves the file as it was).
fn migrate(conn: &Connection, from: i64) -> rusqlite::Result<()> {
    if from < 2 {
        // Layout 1 kept items in a rowid table with two indexes (key, expiry).
        conn.execute_batch(
            "CREATE TABLE items2(ns TEXT NOT NULL, grp TEXT NOT NULL, id TEXT NOT NULL,
               exp INTEGER NOT NULL, rec TEXT NOT NULL, PRIMARY KEY(ns, grp, id)) WITHOUT ROWID;
             INSERT INTO items2 SELECT ns, grp, id, exp, rec FROM items;
             DROP TABLE items;
             ALTER TABLE items2 RENAME TO items;",
        )?;
    }
    if from < 3 {
        conn.execute_batch(TABLES_V3)?;
    }
    if from < 4 {
        // Names kept until now are kept FENCE_KEEP_MS from the upgrade on: released locks (exp
        // 0 before) count from now, and every semaphore name's fence is kept that long.
        conn.execute_batch(TABLES_V4)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        conn.execute("UPDATE locks SET exp = ?1 WHERE owner IS NULL", [now])?;
        conn.execute("UPDATE sem_fences SET keep = ?1", [now + crate::lock::FENCE_KEEP_MS as i64])?;
    }
    if from < 5 {
        conn.execute_batch(TABLES_V5)?;
    }
    if from < 6 {
        conn.execute_batch(TABLES_V6)?;
        rekey_items(conn)?;
    }
    conn.pragma_update(None, "user_version", VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::durable::{Durability, Durable};

    fn temp(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("fg-schema-{}-{}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    /// The items table of layouts 2 to 4 (a record as JSON), in place of the current one, and
    /// without what layout 6 added.
    const OLD_ITEMS: &str = "DROP TABLE items;
        CREATE TABLE items(ns TEXT NOT NULL, grp TEXT NOT NULL, id TEXT NOT NULL, exp INTEGER NOT NULL,
          rec TEXT NOT NULL, PRIMARY KEY(ns, grp, id)) WITHOUT ROWID;
        DELETE FROM meta WHERE k IN ('items_low', 'items_pass_low'); DROP TABLE item_sweep;";

    /// The key of item `id` of group `g` in namespace `fg:`.
    fn key(id: &str) -> Vec<u8> {
        super::super::item_key::item(&super::super::item_key::group("fg:", "g"), id)
    }

    /// A file of layout 5 gets its items under one-column keys (every field kept), the expiry
    /// marks (unknown: the first writes sweep) and the sweep's position; its items read and are
    /// swept as before.
    #[tokio::test]
    async fn a_file_of_layout_5_gets_one_column_keys_and_the_items_expiry_marks() {
        use crate::tracker::{ItemOp, ItemStatus, TrackerBackend};
        let path = temp("v5.db");
        drop(open(&path).unwrap());
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "DELETE FROM meta WHERE k IN ('items_low', 'items_pass_low'); DROP TABLE item_sweep;
             DROP TABLE items;
             CREATE TABLE items(ns TEXT NOT NULL, grp TEXT NOT NULL, id TEXT NOT NULL, exp INTEGER NOT NULL,
               s INTEGER NOT NULL, a INTEGER NOT NULL, o TEXT, l INTEGER NOT NULL, c INTEGER NOT NULL,
               u INTEGER NOT NULL, d INTEGER NOT NULL, e TEXT, t TEXT NOT NULL, PRIMARY KEY(ns, grp, id)) WITHOUT ROWID;
             PRAGMA user_version = 5;
             INSERT INTO items VALUES ('fg:', 'g', 'old', 1, 2, 1, NULL, 0, 0, 0, 0, NULL, '[]');
             INSERT INTO items VALUES ('fg:', 'g', 'live', 4000000000000, 3, 2, 'ab', 0, 10, 20, 20, 'boom',
               '[{\"t\":20,\"s\":\"failed\",\"a\":2,\"e\":\"boom\"}]');
             INSERT INTO items VALUES ('fg:', 'g' || char(0) || 'x', 'other', 4000000000000, 2, 1, NULL, 0, 0, 0, 0, NULL, '[]');",
        )
        .unwrap();
        drop(c);
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        let c = Connection::open(&path).unwrap();
        let v: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        let low: i64 = c.query_row("SELECT v FROM meta WHERE k = 'items_low'", [], |r| r.get(0)).unwrap();
        assert_eq!((v, low), (VERSION, i64::MIN));
        let claims: Vec<ItemOp> = (0..200)
            .map(|i| ItemOp::Claim {
                id: format!("n{i}"),
                owner: "o".into(),
                lease_ms: 1000,
                reclaim_completed: false,
            })
            .collect();
        d.apply("g", &claims, 86_400_000).await.unwrap();
        let old: i64 =
            c.query_row("SELECT count(*) FROM items WHERE k = ?1", [key("old")], |r| r.get(0)).unwrap();
        assert_eq!(old, 0, "the expired item of the old file is swept");
        let live = &d.read("g", &["live".to_string()]).await.unwrap()[0];
        assert_eq!(
            (live.status, live.attempts, live.last_error.as_deref()),
            (ItemStatus::Failed, 2, Some("boom"))
        );
        assert_eq!(
            (live.created_at, live.updated_at, live.expires_at),
            (Some(10), Some(20), Some(4_000_000_000_000))
        );
        assert_eq!(live.timeline.len(), 1);
        let other = &d.read("g\u{0}x", &["other".to_string()]).await.unwrap()[0];
        assert_eq!(other.status, ItemStatus::Completed, "a group whose name holds a 0 byte keeps its item");
        assert_eq!(other.expires_at, Some(4_000_000_000_000));
    }

    fn open_err(path: &Path) -> Error {
        match Durable::open(path, "fg:", Durability::Process) {
            Ok(_) => panic!("{} opened", path.display()),
            Err(e) => e,
        }
    }

    #[test]
    fn a_new_file_gets_the_layout_and_reopens() {
        let path = temp("new.db");
        Durable::open(&path, "fg:", Durability::Process).unwrap();
        let c = Connection::open(&path).unwrap();
        let v: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        let app: i64 = c.pragma_query_value(None, "application_id", |r| r.get(0)).unwrap();
        assert_eq!((v, app), (VERSION, APPLICATION_ID));
        drop(c);
        check_or_create(&open(&path).unwrap(), &path).unwrap();
    }

    #[test]
    fn a_file_of_layout_1_is_migrated_with_its_items() {
        let path = temp("v1.db");
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID;
             INSERT INTO meta VALUES ('clock', 0);
             CREATE TABLE items(ns TEXT NOT NULL, grp TEXT NOT NULL, id TEXT NOT NULL, exp INTEGER NOT NULL,
               rec TEXT NOT NULL, UNIQUE(ns, grp, id));
             CREATE INDEX items_exp ON items(exp);
             CREATE TABLE locks(ns TEXT NOT NULL, name TEXT NOT NULL, owner TEXT, fence INTEGER NOT NULL,
               label TEXT, exp INTEGER NOT NULL, PRIMARY KEY(ns, name)) WITHOUT ROWID;
             INSERT INTO items VALUES ('fg:', 'g', 'a', 9007199254740991, '{}');
             PRAGMA application_id = 1179079508;
             PRAGMA user_version = 1;",
        )
        .unwrap();
        drop(c);
        drop(open(&path).unwrap());
        let c = Connection::open(&path).unwrap();
        let v: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(v, VERSION);
        let (k, s, t): (Vec<u8>, i64, String) =
            c.query_row("SELECT k, s, t FROM items", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
        assert_eq!((k, s, t.as_str()), (key("a"), 0, "[]"));
        let indexes: i64 = c
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'items'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(indexes, 0, "layout 2 keeps no index beside the items' key");
        let pacing: i64 = c
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name IN ('limiters', 'sem_fences', 'sem_holders')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(pacing, 3, "layout 3's tables are added on the way");
    }

    #[test]
    fn a_file_of_a_newer_layout_is_refused_and_left_alone() {
        let path = temp("newer.db");
        drop(open(&path).unwrap());
        let c = Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", VERSION + 1).unwrap();
        drop(c);
        let e = open_err(&path);
        assert_eq!(e.code, ErrorCode::Unsupported, "{e}");
        assert!(e.message.contains(&path.display().to_string()), "{e}");
        let c = Connection::open(&path).unwrap();
        let v: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(v, VERSION + 1);
    }

    #[test]
    fn a_file_of_layout_2_gets_the_tables_of_layout_3() {
        let path = temp("v1.db");
        drop(open(&path).unwrap());
        let c = Connection::open(&path).unwrap();
        c.execute_batch(OLD_ITEMS).unwrap();
        c.execute_batch(
            "DROP TABLE limiters; DROP TABLE sem_fences; DROP TABLE sem_holders; PRAGMA user_version = 2",
        )
        .unwrap();
        c.execute_batch("INSERT INTO locks VALUES ('fg:', 'kept', NULL, 7, NULL, 0)").unwrap();
        drop(c);
        drop(open(&path).unwrap());
        let c = Connection::open(&path).unwrap();
        let v: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(v, VERSION);
        let n: i64 = c
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name IN ('limiters', 'sem_fences', 'sem_holders')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 3);
        let fence: i64 =
            c.query_row("SELECT fence FROM locks WHERE name = 'kept'", [], |r| r.get(0)).unwrap();
        assert_eq!(fence, 7, "the rows of layout 2 are kept");
    }

    #[test]
    fn a_file_of_layout_3_keeps_its_fences_for_the_keep_time_from_the_upgrade() {
        let path = temp("v3.db");
        drop(open(&path).unwrap());
        let c = Connection::open(&path).unwrap();
        c.execute_batch(OLD_ITEMS).unwrap();
        c.execute_batch(
            "ALTER TABLE sem_fences DROP COLUMN keep; PRAGMA user_version = 3;
             INSERT INTO locks VALUES ('fg:', 'released', NULL, 5, NULL, 0);
             INSERT INTO sem_fences VALUES ('fg:', 'sem', 9);",
        )
        .unwrap();
        drop(c);
        let before =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        drop(open(&path).unwrap());
        let c = Connection::open(&path).unwrap();
        let v: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(v, VERSION);
        let (fence, exp): (i64, i64) = c
            .query_row("SELECT fence, exp FROM locks WHERE name = 'released'", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(fence, 5);
        assert!(exp >= before && exp < before + 60_000, "a released lock counts from the upgrade: {exp}");
        let (fence, keep): (i64, i64) = c
            .query_row("SELECT fence, keep FROM sem_fences WHERE name = 'sem'", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(fence, 9);
        let keep_ms = crate::lock::FENCE_KEEP_MS as i64;
        assert!(keep >= before + keep_ms && keep < before + keep_ms + 60_000, "{keep}");
    }

    /// Layout 4 kept an item's record as JSON; layout 5 keeps its fields as columns. Every
    /// field of a record comes through the migration, and the item reads as before it.
    #[tokio::test]
    async fn a_file_of_layout_4_gets_its_item_records_as_columns() {
        use crate::tracker::{ItemStatus, TrackerBackend};
        let path = temp("v4.db");
        drop(open(&path).unwrap());
        let far = 4_000_000_000_000i64;
        let failed = format!(
            r#"{{"s":"failed","a":2,"o":"0123456789abcdef0123456789abcdef","l":0,"c":1000,"u":3000,"d":3000,
                "e":"boom","x":{far},"t":[{{"t":1000,"s":"in_progress","a":1}},{{"t":2000,"s":"abandoned","a":1}},
                {{"t":2500,"s":"in_progress","a":2}},{{"t":3000,"s":"failed","a":2,"e":"boom"}}]}}"#
        );
        let running =
            format!(r#"{{"s":"in_progress","a":1,"o":"ab","l":{far},"c":5,"u":5,"x":{far},"t":[]}}"#);
        let c = Connection::open(&path).unwrap();
        c.execute_batch(OLD_ITEMS).unwrap();
        c.execute_batch("PRAGMA user_version = 4").unwrap();
        for (id, rec) in [("f", &failed), ("r", &running)] {
            c.execute("INSERT INTO items VALUES ('fg:', 'g', ?1, ?2, ?3)", rusqlite::params![id, far, rec])
                .unwrap();
        }
        drop(c);
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        let got = d.read("g", &["f".to_string(), "r".to_string()]).await.unwrap();
        let (f, r) = (&got[0], &got[1]);
        assert_eq!((f.status, f.attempts, f.last_error.as_deref()), (ItemStatus::Failed, 2, Some("boom")));
        assert_eq!(
            (f.created_at, f.updated_at, f.finished_at, f.expires_at),
            (Some(1000), Some(3000), Some(3000), Some(far))
        );
        let steps: Vec<(i64, &str, u32)> = f.timeline.iter().map(|t| (t.at, &*t.status, t.attempt)).collect();
        assert_eq!(
            steps,
            [(1000, "in_progress", 1), (2000, "abandoned", 1), (2500, "in_progress", 2), (3000, "failed", 2)]
        );
        assert_eq!(f.timeline[3].error.as_deref(), Some("boom"));
        assert_eq!(
            (r.status, r.attempts, r.lease_expires_at, r.finished_at),
            (ItemStatus::InProgress, 1, Some(far), None)
        );
        drop(d);
        let c = Connection::open(&path).unwrap();
        let v: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(v, VERSION);
        let (s, o): (i64, String) = c
            .query_row("SELECT s, o FROM items WHERE k = ?1", [key("r")], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!((s, o.as_str()), (1, "ab"));
    }

    #[test]
    fn another_programs_database_is_refused_and_left_alone() {
        let path = temp("other.db");
        let c = Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE execution_entity(id INTEGER PRIMARY KEY)").unwrap();
        drop(c);
        let before = std::fs::read(&path).unwrap();
        let e = open_err(&path);
        assert_eq!(e.code, ErrorCode::Storage, "{e}");
        assert!(e.message.contains("another program"), "{e}");
        assert!(std::fs::read(&path).unwrap() == before, "the file is byte for byte as it was");
        for side in ["-wal", "-shm", "-journal"] {
            let mut p = path.clone().into_os_string();
            p.push(side);
            assert!(!Path::new(&p).exists(), "no {side} file is left beside it");
        }
        let c = Connection::open(&path).unwrap();
        let mode: String = c.pragma_query_value(None, "journal_mode", |r| r.get(0)).unwrap();
        assert_eq!(mode, "delete", "its journal mode is not changed");
        let n: i64 = c.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1, "no table was added");
    }

    #[test]
    fn a_corrupt_file_and_a_missing_directory_are_coded_errors_naming_the_path() {
        let path = temp("corrupt.db");
        std::fs::write(&path, vec![0x5a; 8192]).unwrap();
        let e = open_err(&path);
        assert_eq!(e.code, ErrorCode::Storage, "{e}");
        assert!(e.message.contains(&path.display().to_string()) && e.message.contains("corrupt"), "{e}");

        let path = temp("x").with_file_name("no-such-dir").join("state.db");
        let e = open_err(&path);
        assert_eq!(e.code, ErrorCode::Storage, "{e}");
        assert!(e.message.contains(&path.display().to_string()), "{e}");
        assert!(e.message.contains("does not exist"), "{e}");
    }

    /// The message of a path SQLite cannot open names the reason the file system gives.
    #[test]
    fn a_directory_and_a_path_under_a_file_are_refused_with_their_reason() {
        let dir = temp("x").with_file_name("a-dir.db");
        std::fs::create_dir_all(&dir).unwrap();
        let e = open_err(&dir);
        assert_eq!(e.code, ErrorCode::Storage, "{e}");
        assert!(e.message.contains(&dir.display().to_string()), "{e}");
        assert!(e.message.contains("is a directory"), "{e}");

        let file = temp("plain-file");
        std::fs::write(&file, b"not a directory").unwrap();
        for path in [file.join("state.db"), file.join("sub").join("state.db")] {
            let e = open_err(&path);
            assert_eq!(e.code, ErrorCode::Storage, "{e}");
            assert!(e.message.contains(&path.display().to_string()), "{e}");
            let why = format!("its parent {} is not a directory", file.display());
            assert!(e.message.contains(&why), "{e}");
        }
    }
}
