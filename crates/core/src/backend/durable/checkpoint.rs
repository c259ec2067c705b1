//! Checkpoints (copying the write-ahead log back into the database file) off the calling thread.
//!
//! SQLite checkpoints by default inside the commit that lets the log pass 1,000 pages, on the
//! thread of that call, and with `synchronous=NORMAL` a checkpoint flushes the log and the file
//! to the disk: two fsyncs that the unlucky call waits for. Here the commit only wakes a thread
//! of this file (with a connection of its own) that checkpoints in the background, without
//! blocking writers (`PASSIVE`). The log restarts from its beginning once a checkpoint has
//! copied all of it, which a steady stream of writes can keep from happening; so a commit that
//! finds the log at [`HARD_PAGES`] checkpoints inline, as SQLite would: the log stays bounded.
#![allow(unsafe_code)] // SQLite's WAL hook on the raw handle.

use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use rusqlite::{ffi, Connection, OpenFlags};

use super::guard;

/// Pages in the log after a commit that wake the background checkpoint.
const SOFT_PAGES: c_int = 250;
/// Pages in the log after a commit that make the commit checkpoint inline (about 4 MB). The
/// log is kept short: SQLite finds a page's latest frame by a hash probe that walks every frame
/// of that page in the log, so a page written by every commit (a lock's row) costs each commit
/// more the longer the log runs.
const HARD_PAGES: c_int = 1_000;
/// Pages the log grows by between two wake-ups of the background checkpoint: one per commit
/// would keep it checkpointing back to back, taking the file's locks against the writer.
const WAKE_STEP: c_int = 125;

/// The background checkpoint of one open file.
pub(super) struct Checkpointer {
    path: PathBuf,
    /// Set by a commit that found the log past [`SOFT_PAGES`], cleared by the thread.
    due: Mutex<bool>,
    wake: Condvar,
    started: std::sync::Once,
    /// The log's pages at the last wake-up.
    asked_at: std::sync::atomic::AtomicI32,
    /// Set when the file closes: the thread closes its connection and ends.
    stopped: std::sync::atomic::AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Checkpointer {
    pub(super) fn new(path: &Path) -> Arc<Checkpointer> {
        Arc::new(Checkpointer {
            path: path.to_path_buf(),
            due: Mutex::new(false),
            wake: Condvar::new(),
            started: std::sync::Once::new(),
            asked_at: std::sync::atomic::AtomicI32::new(0),
            stopped: std::sync::atomic::AtomicBool::new(false),
            thread: Mutex::new(None),
        })
    }

    /// Makes the commits of `conn` hand their checkpoints to this checkpointer. `conn` must
    /// be closed before `self` is dropped (`Db` declares its connection first).
    pub(super) fn attach(self: &Arc<Self>, conn: &Connection) {
        // SAFETY: the hook's argument points into `self`, which outlives the connection (see
        // above); the callback only touches that and the connection it is called for.
        unsafe {
            ffi::sqlite3_wal_hook(conn.handle(), Some(on_commit), Arc::as_ptr(self) as *mut c_void);
        }
    }

    fn request(self: &Arc<Self>) {
        self.started.call_once(|| {
            let weak = Arc::downgrade(self);
            #[cfg(test)]
            STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let thread =
                std::thread::Builder::new().name("flowguard-checkpoint".into()).spawn(move || run(weak));
            *guard(&self.thread) = thread.ok();
        });
        *guard(&self.due) = true;
        self.wake.notify_one();
    }
}

/// For tests: how many checkpoint threads were started in this process.
#[cfg(test)]
static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(test)]
pub(super) fn started() -> usize {
    STARTED.load(std::sync::atomic::Ordering::Relaxed)
}

impl Checkpointer {
    /// Ends the thread and waits until it has closed its connection: the file's last connection
    /// in this process closing after it can then remove the log (see `Db::shut`).
    pub(super) fn stop(&self) {
        {
            // Set under the lock the thread waits with, so the wake-up cannot be missed.
            let _due = guard(&self.due);
            self.stopped.store(true, std::sync::atomic::Ordering::Release);
        }
        self.wake.notify_one();
        let thread = guard(&self.thread).take();
        if let Some(t) = thread {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

unsafe extern "C" fn on_commit(
    arg: *mut c_void,
    db: *mut ffi::sqlite3,
    _name: *const c_char,
    pages: c_int,
) -> c_int {
    if pages >= HARD_PAGES {
        // SAFETY: called by SQLite with its connection, after the commit, as its own
        // autocheckpoint does.
        unsafe {
            ffi::sqlite3_wal_checkpoint_v2(
                db,
                std::ptr::null(),
                ffi::SQLITE_CHECKPOINT_PASSIVE,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
        }
    } else if pages >= SOFT_PAGES {
        // SAFETY: `arg` is the checkpointer of `attach`, alive while the connection is. The
        // Arc is borrowed, not taken: its count is left as it was.
        let cp = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(arg as *const Checkpointer) });
        let cp: &Arc<Checkpointer> = &cp;
        use std::sync::atomic::Ordering::Relaxed;
        let asked = cp.asked_at.load(Relaxed);
        // A log that restarted since (fewer pages than at the last wake-up) wakes it too.
        if pages < asked || pages >= asked + WAKE_STEP {
            cp.asked_at.store(pages, Relaxed);
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cp.request()));
        }
    }
    ffi::SQLITE_OK
}

/// The thread: checkpoints whenever a commit asks, until the file is closed in this process.
fn run(weak: Weak<Checkpointer>) {
    let mut conn: Option<Connection> = None;
    loop {
        let Some(cp) = weak.upgrade() else { return };
        let stopped = || cp.stopped.load(std::sync::atomic::Ordering::Acquire);
        let due = {
            let flag = guard(&cp.due);
            let (mut flag, _) = cp
                .wake
                .wait_timeout_while(flag, Duration::from_secs(1), |due| !*due && !stopped())
                .unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *flag)
        };
        if stopped() {
            return;
        }
        if !due {
            continue;
        }
        if conn.is_none() {
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            conn = Connection::open_with_flags(&cp.path, flags).ok();
        }
        if let Some(c) = &conn {
            // A failed or partial checkpoint is retried by a later commit; the log is kept.
            let _ = c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        }
    }
}
