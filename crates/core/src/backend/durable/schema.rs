//! The file's layout and how a file is opened: pragmas, version check, tables.
//!
//! `application_id` marks a file as a flowguard store (so a path that points at some other
//! SQLite database, n8n's own for one, is refused instead of written into); `user_version` is
//! the layout's version. There is one layout, version 1: a flowguard file of any other version
//! (written by a development build before the first release, or by a later flowguard) is refused
//! with `ERR_UNSUPPORTED` and left byte for byte as it is. Nothing is migrated.
//!
//! Items are kept in a table clustered on one byte-string key made of their namespace, group and
//! id (`item_key`, `WITHOUT ROWID`), with no index on their expiry: a claim writes one B-tree
//! page, and expired items are swept in key order instead (`item_sweep`, whose position and
//! expiry marks are shared by the processes that write the file). An item's record is kept as
//! columns, compactly (see `tracker`): the owner token as its 16 bytes, and no timeline where the
//! record's own fields imply it. Lock and semaphore names unused for 30 days are forgotten
//! (`fences`): a released lock keeps its release time in `exp`, and a semaphore's fence row says
//! until when it is kept.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::{storage_error, BUSY_TIMEOUT_MS};
use crate::error::{Error, ErrorCode, Result};

/// "FGST": the `application_id` of a flowguard store.
const APPLICATION_ID: i64 = 0x4647_5354;
/// The layout this build reads and writes, the only one.
pub const VERSION: i64 = 1;

const TABLES: &str = "
CREATE TABLE meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID;
-- The clock, and the items' expiry marks (see item_sweep: unknown until a first pass).
INSERT INTO meta VALUES ('clock', 0), ('items_low', -9223372036854775808),
  ('items_pass_low', 9223372036854775807);
-- Item Tracker: a row per item, keyed by item_key (namespace, group, id), forgotten at exp. s:
-- 0 new, 1 in progress, 2 completed, 3 failed; a: attempts; o: owner token (16 bytes, or its
-- text when not of the token's shape); l: lease end; c, u, d: created, updated, finished at;
-- e: last error; t: the timeline as JSON, NULL when it is the one the other fields imply.
CREATE TABLE items(k BLOB NOT NULL PRIMARY KEY, exp INTEGER NOT NULL, s INTEGER NOT NULL,
  a INTEGER NOT NULL, o BLOB, l INTEGER NOT NULL, c INTEGER NOT NULL, u INTEGER NOT NULL,
  d INTEGER NOT NULL, e TEXT, t TEXT) WITHOUT ROWID;
-- The position of the sweep of expired items (no row: at the start of the table).
CREATE TABLE item_sweep(k INTEGER PRIMARY KEY CHECK (k = 0), at BLOB NOT NULL);
-- Concurrency Lock: a row per lock name taken in the last 30 days (it keeps the last fencing
-- token); owner is NULL when free, and exp is then the release time.
CREATE TABLE locks(ns TEXT NOT NULL, name TEXT NOT NULL, owner TEXT, fence INTEGER NOT NULL,
  label TEXT, exp INTEGER NOT NULL, PRIMARY KEY(ns, name)) WITHOUT ROWID;
-- Dedup Queue: a row per shard that holds ids, with the queue's shard count (the same in every
-- row of a queue); waiting ids; claimed ids (with the due time of an enqueue made while claimed,
-- in again). first / again_first: the first-enqueue time of the waiting id / of the enqueue made
-- while claimed, only for ids a capped debounce touched (NULL otherwise).
CREATE TABLE q_shards(ns TEXT NOT NULL, queue TEXT NOT NULL, shard INTEGER NOT NULL,
  shards INTEGER NOT NULL, PRIMARY KEY(ns, queue, shard)) WITHOUT ROWID;
CREATE TABLE q_waiting(ns TEXT NOT NULL, queue TEXT NOT NULL, shard INTEGER NOT NULL,
  id TEXT NOT NULL, due INTEGER NOT NULL, first INTEGER, PRIMARY KEY(ns, queue, shard, id)) WITHOUT ROWID;
CREATE INDEX q_waiting_due ON q_waiting(ns, queue, shard, due, id);
CREATE TABLE q_claimed(ns TEXT NOT NULL, queue TEXT NOT NULL, shard INTEGER NOT NULL,
  id TEXT NOT NULL, deadline INTEGER NOT NULL, owner TEXT NOT NULL, again INTEGER, again_first INTEGER,
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
-- Rate Limiter: the TAT (µs since the epoch) per name; a row whose exp (ms) has passed equals
-- no row.
CREATE TABLE limiters(ns TEXT NOT NULL, name TEXT NOT NULL, tat INTEGER NOT NULL,
  exp INTEGER NOT NULL, UNIQUE(ns, name));
CREATE INDEX limiters_exp ON limiters(exp);
-- Semaphore: a row per name taken in the last 30 days (its last fencing token, kept until
-- `keep`, ms since the epoch), a row per holder.
CREATE TABLE sem_fences(ns TEXT NOT NULL, name TEXT NOT NULL, fence INTEGER NOT NULL,
  keep INTEGER NOT NULL, PRIMARY KEY(ns, name)) WITHOUT ROWID;
CREATE TABLE sem_holders(ns TEXT NOT NULL, name TEXT NOT NULL, owner TEXT NOT NULL,
  fence INTEGER NOT NULL, label TEXT, exp INTEGER NOT NULL, UNIQUE(ns, name, owner));
CREATE INDEX sem_holders_exp ON sem_holders(exp);
";

/// Tables added to layout 1 after its first files were written, made when absent on every open
/// (a file without them is read as one whose rows there are all absent; a flowguard before them
/// ignores them).
const ADDED: &str = "
-- Rate Limiter pauses: the pause end (µs since the epoch) per paused name; a row whose exp (ms)
-- has passed equals no row. The name's limiters row is kept at least as long (for the catalog).
CREATE TABLE IF NOT EXISTS limiter_pauses(ns TEXT NOT NULL, name TEXT NOT NULL,
  until INTEGER NOT NULL, exp INTEGER NOT NULL, UNIQUE(ns, name));
CREATE INDEX IF NOT EXISTS limiter_pauses_exp ON limiter_pauses(exp);
-- Dedup Queue dead letters: delivery counts (n) of ids a read with maxDeliveries claimed (an
-- ack drops them), and the dead letters (died: ms since the epoch; n: deliveries). A shard that
-- holds dead letters keeps its q_shards row.
CREATE TABLE IF NOT EXISTS q_counts(ns TEXT NOT NULL, queue TEXT NOT NULL, shard INTEGER NOT NULL,
  id TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY(ns, queue, shard, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS q_dead(ns TEXT NOT NULL, queue TEXT NOT NULL, shard INTEGER NOT NULL,
  id TEXT NOT NULL, died INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY(ns, queue, shard, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS q_dead_died ON q_dead(ns, queue, shard, died, id);
";

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
#[allow(unsafe_code)]
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
    /// The three facts in one statement, so from one snapshot of the file: read one by one, they
    /// could straddle another opener's commit of a new file's layout and show its tables without
    /// its application id (a new file taken for another program's database).
    fn read(conn: &Connection) -> rusqlite::Result<Found> {
        conn.query_row(
            "SELECT (SELECT application_id FROM pragma_application_id),
                    (SELECT user_version FROM pragma_user_version),
                    (SELECT count(*) FROM sqlite_master)",
            [],
            |r| Ok(Found { app: r.get(0)?, version: r.get(1)?, tables: r.get(2)? }),
        )
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
        if self.version != VERSION {
            return Err(Error::new(
                ErrorCode::Unsupported,
                format!(
                    "the store file {p} has layout version {}, and this flowguard reads only layout version \
                     {VERSION}; the file was left as it is (open it with the flowguard that wrote it, or give \
                     this one a new file)",
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
/// created in one write transaction.
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
        conn.pragma_update(None, "application_id", APPLICATION_ID).map_err(fail)?;
        conn.pragma_update(None, "user_version", VERSION).map_err(fail)?;
    }
    conn.execute_batch(ADDED).map_err(fail)?;
    add_column(conn, "sem_holders", "k", "TEXT").map_err(fail)?;
    add_column(conn, "items", "r", "TEXT").map_err(fail)?;
    add_column(conn, "items", "n", "TEXT").map_err(fail)?;
    Ok(())
}

/// Adds a nullable column to a table of layout 1 when absent (made on every open, inside the
/// open's write transaction; a flowguard before it names its columns and never reads it).
/// Semaphore holders: `k`, the key a permit was taken under (NULL: without one). Items: `r`, the
/// result a completion gave (JSON text), and `n`, the note of the latest claim (NULL: none given;
/// most rows, which so take no byte more).
fn add_column(conn: &Connection, table: &str, column: &str, ty: &str) -> rusqlite::Result<()> {
    let has: bool = conn.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info(?1) WHERE name = ?2",
        [table, column],
        |r| r.get(0),
    )?;
    if !has {
        conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {ty}"))?;
    }
    Ok(())
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

    fn open_err(path: &Path) -> Error {
        match Durable::open(path, "fg:", Durability::Process) {
            Ok(_) => panic!("{} opened", path.display()),
            Err(e) => e,
        }
    }

    /// Threads opening one new file at the same moment (a barrier), round after round: each
    /// open succeeds, none takes the half-made file for another program's database. (Its first
    /// look at the file was three reads, each its own snapshot: one could see the tables another
    /// opener had just committed but not yet their application id, read before that commit.)
    #[test]
    fn openers_of_one_new_file_at_once_all_open_it() {
        const OPENERS: usize = 8;
        for round in 0..40 {
            let path = temp(&format!("race{round}.db"));
            let barrier = std::sync::Barrier::new(OPENERS);
            std::thread::scope(|s| {
                let opens: Vec<_> = (0..OPENERS)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            open(&path).map(drop)
                        })
                    })
                    .collect();
                for o in opens {
                    let r = o.join().unwrap();
                    assert!(r.is_ok(), "round {round}: {:?}", r.err());
                }
            });
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

    /// A flowguard file of any layout but this one's (0, the development builds' 2 to 6 before the
    /// first release, a later flowguard's) is refused with ERR_UNSUPPORTED naming the file, its
    /// layout and the one read, and is left byte for byte as it was, with no log beside it.
    #[test]
    fn a_file_of_another_layout_is_refused_and_left_byte_for_byte() {
        for version in [0, 2, 5, 6, VERSION + 7] {
            let path = temp(&format!("v{version}.db"));
            drop(Durable::open(&path, "fg:", Durability::Process).unwrap());
            let c = Connection::open(&path).unwrap();
            c.pragma_update(None, "user_version", version).unwrap();
            c.execute_batch("INSERT INTO locks VALUES ('fg:', 'kept', NULL, 7, NULL, 0)").unwrap();
            drop(c);
            let before = std::fs::read(&path).unwrap();
            let e = open_err(&path);
            assert_eq!(e.code, ErrorCode::Unsupported, "{e}");
            assert_eq!(e.code.as_str(), "ERR_UNSUPPORTED");
            assert!(e.message.contains(&path.display().to_string()), "{e}");
            let versions =
                format!("layout version {version}, and this flowguard reads only layout version 1");
            assert!(e.message.contains(&versions), "{e}");
            assert!(
                std::fs::read(&path).unwrap() == before,
                "layout {version}: the file is byte for byte as it was"
            );
            for side in ["-wal", "-journal"] {
                let mut p = path.clone().into_os_string();
                p.push(side);
                assert!(!Path::new(&p).exists(), "layout {version}: no {side} file is left beside it");
            }
        }
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
