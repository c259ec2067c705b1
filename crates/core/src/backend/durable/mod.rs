//! The durable backend: the embedded store's four patterns kept in one SQLite file, so items,
//! locks, queued ids and values survive a restart or a crash of the process (`Flowguard.open({
//! path })`). Same rules, results and error codes as the in-memory embedded store.
//!
//! - One connection per file per process, shared by every client that opens the file (like the
//!   in-memory store, each key prefix is its own namespace); statements are prepared once and
//!   cached. Calls run inline on the calling thread: a transaction takes microseconds, and a
//!   call that completes at once resolves without a hop to another thread.
//! - Every call is one transaction; writes begin with `BEGIN IMMEDIATE`, so two processes that
//!   use the same file (`n8n start` and `n8n execute`) take turns on SQLite's file lock: claims,
//!   locks and queue reads stay exclusive across processes. A call never waits inside SQLite for
//!   another process's lock: it is retried after short random pauses (see
//!   `Durable::transaction`), and gets `ERR_TIMEOUT` after [`BUSY_TIMEOUT_MS`].
//! - Durability (WAL journal): by default (`synchronous=NORMAL`) a call that resolved is in the
//!   write-ahead log and survives a crash of the process (kill -9); with `durability: 'fsync'`
//!   (`synchronous=FULL`) every commit is also flushed to the disk, so it survives a power loss.
//! - Time comes from [`clock`]: wall time shared by the processes that use the file, that never
//!   runs backwards by more than a bound, and that a process whose clock is wrong cannot move
//!   (`ERR_CLOCK_SKEW`).

mod catalog;
mod checked_scan;
mod checkpoint;
mod clock;
#[cfg(test)]
mod damage;
mod fences;
mod file_access;
mod item_key;
mod item_record;
mod item_sweep;
mod limiter;
mod lock;
mod queue;
mod remembered;
mod schema;
mod semaphore;
mod state;
mod tracker;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode as SqliteCode};

pub(crate) use crate::backend::guard;
use crate::backend::{Backend, BoxFuture};
use crate::error::{At, Error, ErrorCode, Result};

/// How long a write waits for another process's transaction before `ERR_TIMEOUT`.
pub const BUSY_TIMEOUT_MS: u64 = 5_000;
/// Expired rows removed per write, at most: expired rows are invisible to every read, so they
/// can go a slice at a time and no call pauses for a sweep.
const PURGE_SLICE: i64 = 64;

/// What a resolved call survives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// A crash of the process (kill -9): committed to the write-ahead log (`synchronous=NORMAL`).
    #[default]
    Process,
    /// A power loss or OS crash too: every commit flushed to the disk (`synchronous=FULL`).
    Fsync,
}

impl Durability {
    /// The level named `process` or `fsync`; `at` names the option in an error.
    pub fn parse(at: impl At, s: &str) -> Result<Durability> {
        match s {
            "process" => Ok(Durability::Process),
            "fsync" => Ok(Durability::Fsync),
            other => Err(Error::invalid_at(
                at,
                format!("must be 'process' or 'fsync', got {:?}", crate::tracker::truncate(other, 40)),
            )),
        }
    }
}

/// One open file: its path (for errors) and the process's connection to it.
pub(crate) struct Db {
    path: PathBuf,
    conn: Mutex<Session>,
    /// The sweep for expired items (see `item_sweep`).
    sweep: Mutex<item_sweep::Sweep>,
    /// The sweeps for forgotten lock and semaphore names (see `fences`).
    fence_sweeps: Mutex<fences::FenceSweeps>,
    /// Declared after `conn`, so it outlives it (the connection's commit hook points into it).
    checkpoint: Arc<checkpoint::Checkpointer>,
    /// The clients open on it (see [`Db::release`]).
    clients: std::sync::atomic::AtomicUsize,
}

/// One client's hold on its file: let go at `close()`, or when the client is dropped unclosed.
struct Hold {
    db: Arc<Db>,
    closed: std::sync::atomic::AtomicBool,
}

impl Hold {
    fn release(&self) {
        if !self.closed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            self.db.release();
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.release();
    }
}

/// The process's connection to a file (`None` once the file's last client closed), with its
/// remembered clock.
struct Session {
    conn: Option<Connection>,
    clock: clock::Clock,
}

fn open_files() -> &'static Mutex<HashMap<PathBuf, Weak<Db>>> {
    static FILES: OnceLock<Mutex<HashMap<PathBuf, Weak<Db>>>> = OnceLock::new();
    FILES.get_or_init(|| Mutex::new(HashMap::new()))
}

#[derive(Clone)]
pub struct Durable {
    db: Arc<Db>,
    /// The key prefix: the namespace of every row this client reads and writes.
    ns: Arc<str>,
    hold: Arc<Hold>,
}

impl Durable {
    /// Opens (creating when absent) the store in file `path`, for key prefix `prefix`.
    pub fn open(given: &Path, prefix: &str, durability: Durability) -> Result<Durable> {
        let mut files = guard(open_files());
        files.retain(|_, w| w.strong_count() > 0);
        let known = given.canonicalize().ok().and_then(|p| files.get(&p).and_then(Weak::upgrade));
        // A file whose last client closed is opened afresh.
        let known = known.filter(|db| db.clients.load(std::sync::atomic::Ordering::Acquire) > 0);
        let db = match known {
            Some(db) => db,
            None => {
                let conn = schema::open(given)?;
                let key = given.canonicalize().unwrap_or_else(|_| given.to_path_buf());
                let checkpoint = checkpoint::Checkpointer::new(given);
                checkpoint.attach(&conn);
                let db = Arc::new(Db {
                    path: given.to_path_buf(),
                    conn: Mutex::new(Session { conn: Some(conn), clock: clock::Clock::default() }),
                    sweep: Mutex::default(),
                    fence_sweeps: Mutex::default(),
                    checkpoint,
                    clients: std::sync::atomic::AtomicUsize::new(0),
                });
                files.insert(key, Arc::downgrade(&db));
                db
            }
        };
        if durability == Durability::Fsync {
            // A file shared in one process gets the stricter level any of its clients asked for.
            let session = guard(&db.conn);
            if let Some(conn) = &session.conn {
                conn.pragma_update(None, "synchronous", "FULL").map_err(|e| db.error(e))?;
            }
        }
        db.clients.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let hold = Arc::new(Hold { db: db.clone(), closed: false.into() });
        Ok(Durable { db, ns: Arc::from(prefix), hold })
    }

    pub fn path(&self) -> &Path {
        &self.db.path
    }

    /// Runs `f` as one write transaction (`BEGIN IMMEDIATE`: the file's write lock is taken
    /// first, so concurrent processes serialize) at the store's time now.
    fn write_tx<'a, T: Send + 'a>(
        &'a self,
        f: impl Fn(&Connection, &str, i64) -> Sql<T> + Send + 'a,
    ) -> BoxFuture<'a, T> {
        self.transaction(true, f)
    }

    /// Runs `f` as one read transaction at the store's time now.
    fn read_tx<'a, T: Send + 'a>(
        &'a self,
        f: impl Fn(&Connection, &str, i64) -> Sql<T> + Send + 'a,
    ) -> BoxFuture<'a, T> {
        self.transaction(false, f)
    }

    /// The transaction is tried at once, on the calling thread, never waiting for another
    /// process: when the file is free (the usual case) the call completes in its first poll,
    /// with no hop to another thread. When another process holds the file's write lock, the
    /// call becomes pending and tries again after short randomized pauses, until
    /// [`BUSY_TIMEOUT_MS`] (`ERR_TIMEOUT`). The pauses stay short and even: SQLite's own busy
    /// handler sleeps up to 100 ms between tries, so a process that writes back to back could
    /// keep the lock through every try of a waiting one and starve it.
    fn transaction<'a, T: Send + 'a>(
        &'a self,
        write: bool,
        f: impl Fn(&Connection, &str, i64) -> Sql<T> + Send + 'a,
    ) -> BoxFuture<'a, T> {
        Box::pin(async move {
            let deadline = Instant::now() + Duration::from_millis(BUSY_TIMEOUT_MS);
            loop {
                match self.attempt(write, &f) {
                    Err(Fail::Db(e)) if is_busy(&e) && Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_micros(rand::random_range(200..=1_500))).await;
                    }
                    Err(e) => return Err(self.failure(e)),
                    Ok(out) => return Ok(out),
                }
            }
        })
    }

    /// One try of a transaction: done, failed, or `busy` with nothing written.
    fn attempt<T>(&self, write: bool, f: &impl Fn(&Connection, &str, i64) -> Sql<T>) -> Sql<T> {
        if self.hold.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Fail::Coded(closed()));
        }
        let mut session = guard(&self.db.conn);
        let Session { conn, clock } = &mut *session;
        // The file's last client closed while this call waited.
        let Some(conn) = conn.as_mut() else { return Err(Fail::Coded(closed())) };
        if !conn.is_autocommit() {
            // A caller panicked inside a transaction: drop what it left half done.
            let _ = conn.execute_batch("ROLLBACK");
        }
        let begin = if write { "BEGIN IMMEDIATE" } else { "BEGIN DEFERRED" };
        let mut run = || -> Sql<T> {
            conn.prepare_cached(begin)?.execute([])?;
            let now = if write { clock.advance(conn)? } else { clock.now(conn)? };
            let out = f(conn, &self.ns, now)?;
            conn.prepare_cached("COMMIT")?.execute([])?;
            Ok(out)
        };
        let out = run().inspect_err(|_| {
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
        });
        clock.settle(conn, out.is_ok());
        if write {
            guard(&self.db.sweep).settle(conn, out.is_ok());
        }
        out
    }

    fn failure(&self, e: Fail) -> Error {
        match e {
            Fail::Db(e) => self.db.error(e),
            Fail::Corrupt(what) => Error::new(
                ErrorCode::Storage,
                format!("the store file {} holds a damaged record ({what})", self.db.path.display()),
            ),
            Fail::Coded(e) => e,
            Fail::ClockSkew(off) => Error::new(
                ErrorCode::ClockSkew,
                format!(
                    "this process's clock is {:.1} s {} the time of the store file {} (kept by another process that \
                     wrote within the last {} s); the bound is {} s. Nothing was written: correct this host's or \
                     process's clock; the call can succeed once it agrees with the file",
                    off.unsigned_abs() as f64 / 1000.0,
                    if off > 0 { "ahead of" } else { "behind" },
                    self.db.path.display(),
                    clock::LIVE_MS / 1000,
                    clock::MAX_SKEW_MS as f64 / 1000.0,
                ),
            ),
            Fail::HostClockSkew(off) => Error::new(
                ErrorCode::ClockSkew,
                format!(
                    "this process's clock is {:.1} s ahead of its host's clock (the kernel's), and would move the \
                     time of the store file {} ahead; the bound is {} s. Nothing was written: a process started \
                     before the host's clock was set back keeps its clock, restart it",
                    off as f64 / 1000.0,
                    self.db.path.display(),
                    clock::MAX_SKEW_MS as f64 / 1000.0,
                ),
            ),
        }
    }
}

/// Whether `e` says another connection holds the lock this one needs.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(SqliteCode::DatabaseBusy | SqliteCode::DatabaseLocked))
}

/// Why a transaction failed: the database, a damaged row, or a coded refusal of the call.
pub(crate) enum Fail {
    Db(rusqlite::Error),
    Corrupt(String),
    Coded(Error),
    /// This process's clock is this far (ms, positive: ahead) from the file's (see `clock`).
    ClockSkew(i64),
    /// This process's clock is this far (ms) ahead of its host's (see `clock`).
    HostClockSkew(i64),
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Db(e)
    }
}

pub(crate) type Sql<T> = std::result::Result<T, Fail>;

/// A call on a client after its `close()`.
fn closed() -> Error {
    Error::new(ErrorCode::Closed, "this client was closed: open a new one with Flowguard.open")
}

impl Db {
    fn error(&self, e: rusqlite::Error) -> Error {
        storage_error(&self.path, e)
    }

    /// A client let go of the file: after the last one, the file is closed in this process.
    fn release(&self) {
        let files = guard(open_files());
        if self.clients.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            drop(files);
            self.shut();
        }
    }

    /// Closes the file in this process as SQLite closes a file cleanly: the background
    /// checkpoint's connection first, then the connection of the calls, which (when no other
    /// connection, here or in another process, has the file open) copies the log into the file
    /// and removes the `-wal` and `-shm` files. Closing twice is harmless.
    fn shut(&self) {
        self.checkpoint.stop();
        let conn = guard(&self.conn).conn.take();
        drop(conn);
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.shut();
    }
}

/// A database error as a coded error that names the file and says what to do.
pub(crate) fn storage_error(path: &Path, e: rusqlite::Error) -> Error {
    let p = path.display();
    let code = e.sqlite_error_code();
    if matches!(
        code,
        Some(
            SqliteCode::CannotOpen
                | SqliteCode::PermissionDenied
                | SqliteCode::ReadOnly
                | SqliteCode::SystemIoFailure
        )
    ) {
        if let Some(why) = file_access::reason(path) {
            return cannot_use(path, &why);
        }
    }
    match code {
        Some(SqliteCode::DatabaseBusy | SqliteCode::DatabaseLocked) => Error::new(
            ErrorCode::Timeout,
            format!("the store file {p} stayed locked by another process for {BUSY_TIMEOUT_MS} ms; nothing was written"),
        ),
        Some(SqliteCode::ReadOnly) => {
            Error::new(ErrorCode::Storage, format!("the store file {p} is read-only; nothing was written"))
        }
        Some(SqliteCode::DiskFull) => Error::new(
            ErrorCode::Storage,
            format!("the disk of the store file {p} is full; this call wrote nothing, earlier calls are kept"),
        ),
        Some(SqliteCode::NotADatabase | SqliteCode::DatabaseCorrupt) => Error::new(
            ErrorCode::Storage,
            format!("the store file {p} is corrupt or not a flowguard store ({e}); move it away to start afresh"),
        ),
        Some(SqliteCode::CannotOpen) => Error::new(
            ErrorCode::Storage,
            format!("cannot open the store file {p}: its directory does not exist or is not accessible"),
        ),
        Some(SqliteCode::PermissionDenied) => {
            Error::new(ErrorCode::Storage, format!("no permission to use the store file {p}"))
        }
        _ => Error::new(ErrorCode::Storage, format!("the store file {p} could not be used: {e}")),
    }
}

/// The store file at `path` cannot be used, for reason `why` (see `file_access`).
pub(crate) fn cannot_use(path: &Path, why: &str) -> Error {
    Error::new(ErrorCode::Storage, format!("cannot use the store file {}: {why}", path.display()))
}

/// Removes up to [`PURGE_SLICE`] rows of `table` whose expiry column `exp` is at or before `now`.
/// The expiry is checked again on the row itself, not only in the index that finds it: a damaged
/// index record cannot delete a live row.
fn purge(c: &Connection, table: &str, now: i64) -> rusqlite::Result<()> {
    let sql = format!(
        "DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} WHERE exp <= ?1 LIMIT {PURGE_SLICE})
           AND exp <= ?1"
    );
    c.prepare_cached(&sql)?.execute([now])?;
    Ok(())
}

impl Backend for Durable {
    fn kind(&self) -> &'static str {
        "durable"
    }

    /// Lets go of the file: calls in flight finish, later calls fail with `ERR_CLOSED`; after
    /// the file's last client in this process, the file is closed (see [`Db::shut`]).
    fn close(&self) {
        self.hold.release();
    }
}

#[cfg(test)]
mod tests {
    use super::{damage, Durability, Durable};
    use crate::backend::Backend;
    use crate::error::ErrorCode;
    use crate::tracker::{ItemOp, TrackerBackend};

    /// Enough claims for the log to pass the background checkpoint's mark (its thread and
    /// connection started).
    async fn write(d: &Durable) {
        let before = super::checkpoint::started();
        for n in 0..30 {
            let ops: Vec<ItemOp> = (0..500)
                .map(|i| ItemOp::Claim {
                    id: format!("item-{n}-{i:04}"),
                    owner: "o".into(),
                    lease_ms: 60_000,
                    reclaim_completed: false,
                    max_attempts: None,
                    note: None,
                })
                .collect();
            d.apply("g", &ops, 86_400_000).await.unwrap();
        }
        assert!(super::checkpoint::started() > before, "the background checkpoint ran");
    }

    fn side(path: &std::path::Path, ext: &str) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("{}{ext}", path.display()))
    }

    /// After the last client of a file closes, and nothing else has it open, its log is copied
    /// into it and the -wal and -shm files are gone; the closed clients' calls fail with
    /// ERR_CLOSED, and the file opens again with what was written.
    #[tokio::test]
    async fn closing_the_last_client_removes_the_log() {
        let path = damage::temp("close.db");
        let (a, b) = (
            Durable::open(&path, "fg:", Durability::Process).unwrap(),
            Durable::open(&path, "other:", Durability::Process).unwrap(),
        );
        write(&a).await;
        assert!(side(&path, "-wal").exists());
        a.close();
        a.close();
        let e = a.read("g", &["item-0-0000".into()]).await.expect_err("a closed client's call fails");
        assert_eq!(e.code, ErrorCode::Closed, "{e}");
        assert!(side(&path, "-wal").exists(), "b still has the file open");
        b.read("g", &["x".into()]).await.unwrap();
        b.close();
        for ext in ["-wal", "-shm"] {
            assert!(!side(&path, ext).exists(), "{ext} left after the last close");
        }
        let again = Durable::open(&path, "fg:", Durability::Process).unwrap();
        let got = again.read("g", &["item-5-0499".into()]).await.unwrap();
        assert_eq!(got[0].status, crate::tracker::ItemStatus::InProgress);
        drop(again);
        assert!(!side(&path, "-wal").exists(), "a client dropped unclosed closes the file too");
        damage::remove(&path);
    }

    /// Another connection (as another process would) has the file open: closing this process's
    /// last client leaves the log to it, and it reads and writes on.
    #[tokio::test]
    async fn closing_while_another_connection_has_the_file_open_keeps_the_log() {
        let path = damage::temp("shared.db");
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        write(&d).await;
        let other = rusqlite::Connection::open(&path).unwrap();
        let n: i64 = other.query_row("SELECT count(*) FROM items", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 15_000);
        d.close();
        assert!(side(&path, "-wal").exists(), "the log stays while another connection has the file");
        other.execute("UPDATE meta SET v = v WHERE k = 'clock'", []).unwrap();
        let n: i64 = other.query_row("SELECT count(*) FROM items", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 15_000);
        drop(other);
        assert!(!side(&path, "-wal").exists(), "the last connection removed it");
        damage::remove(&path);
    }

    /// The statements a connection runs, by their SQL (for counting).
    static STATEMENTS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

    fn traced(event: rusqlite::trace::TraceEvent<'_>) {
        if let rusqlite::trace::TraceEvent::Stmt(_, sql) = event {
            super::guard(&STATEMENTS).push(sql.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }

    /// The statements `d`'s connection runs during `calls` (a count per SQL text), with each
    /// call in a millisecond of its own (the clock moves at every write, the most it writes).
    async fn count(d: &Durable, calls: usize, mut call: impl AsyncFnMut(usize)) -> Vec<(usize, String)> {
        {
            let session = super::guard(&d.db.conn);
            let conn = session.conn.as_ref().unwrap();
            conn.trace_v2(rusqlite::trace::TraceEventCodes::SQLITE_TRACE_STMT, Some(traced));
        }
        super::guard(&STATEMENTS).clear();
        for i in 0..calls {
            std::thread::sleep(std::time::Duration::from_millis(2));
            call(i).await;
        }
        let mut by: std::collections::BTreeMap<String, usize> = Default::default();
        for s in super::guard(&STATEMENTS).drain(..) {
            *by.entry(s).or_default() += 1;
        }
        by.into_iter().map(|(s, n)| (n, s)).collect()
    }

    /// Statements per write, each call in a millisecond of its own (the clock moves at every
    /// write, the most it writes): a single claim runs BEGIN, its upsert, the clock's one
    /// statement and COMMIT; a lock's acquire and release two statements and the clock's. The
    /// clock writes its boot id only when it changes (here once, at the first write), and the
    /// liveness mark about once per second.
    #[tokio::test]
    async fn statements_per_write() {
        use crate::lock::LockBackend;
        let path = damage::temp("count.db");
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        let calls = 200;
        let claims = count(&d, calls, async |i| {
            let op = ItemOp::Claim {
                id: format!("c{i}"),
                owner: "o".into(),
                lease_ms: 60_000,
                reclaim_completed: false,
                max_attempts: None,
                note: None,
            };
            d.apply("g", &[op], 86_400_000).await.unwrap();
        })
        .await;
        let locks = count(&d, calls, async |i| {
            let a = d.try_acquire("l", "o", 60_000, None).await.unwrap();
            assert!(a.acquired, "{i}");
            d.release("l", "o").await.unwrap();
        })
        .await;
        let (mut boot_writes, mut clock_writes) = (0, 0);
        for (what, by, writes) in [("single claim", &claims, 1), ("lock acquire + release", &locks, 2)] {
            let total: usize = by.iter().map(|(n, _)| n).sum();
            eprintln!("{what}: {:.2} statements per call", total as f64 / calls as f64);
            for (n, sql) in by {
                eprintln!("  {:6.2}  {}", *n as f64 / calls as f64, &sql[..sql.len().min(110)]);
            }
            let clock: usize = by
                .iter()
                .filter(|(_, s)| s.starts_with("INSERT INTO meta VALUES ('clock'"))
                .map(|(n, _)| n)
                .sum();
            assert!(clock <= writes * calls, "{what}: at most one clock statement per write ({clock})");
            clock_writes += clock;
            boot_writes += by
                .iter()
                .filter(|(_, s)| s.starts_with("INSERT") && s.contains("'clock_boot'"))
                .map(|(n, _)| n)
                .sum::<usize>();
            // BEGIN, COMMIT and the call's own statements, the clock's, a sweep's or a mark's share.
            let budget = calls * writes * 3 + clock + calls / 10;
            assert!(total <= budget, "{what}: {total} statements for {calls} calls");
        }
        assert!(clock_writes >= calls, "the clock moved ({clock_writes})");
        assert!(
            boot_writes <= 1,
            "the boot id is written when it changes, not at every write ({boot_writes})"
        );
        drop(d);
        damage::remove(&path);
    }
}
