//! The store's clock: wall time (ms since the epoch) that never runs backwards, across calls,
//! processes and restarts. The last time a write handed out is kept in the file (`meta.clock`);
//! a write uses max(system time, that) and stores it. So when the system clock steps back (NTP,
//! a VM restored), or two processes' clocks disagree, leases and due times taken earlier are never
//! in the future of a later call: a lease runs out at most later than its wall time, never early.
//!
//! The stored time is remembered with the file's data version after this connection's last
//! transaction (`SQLITE_FCNTL_DATA_VERSION`, which changes with every commit to the file, from
//! this connection or any other, in any process): while it is unchanged, nobody wrote since, so
//! the stored time is the remembered one and is not read again.

use std::ffi::c_void;

use rusqlite::{ffi, Connection};

use crate::backend::embedded::now_ms;

/// The remembered stored time of one connection.
#[derive(Default)]
pub(super) struct Clock {
    /// (data version after the last transaction, the stored time then); `None` when unknown.
    seen: Option<(u32, i64)>,
    /// The stored time as this transaction found or left it (valid once [`Clock::settle`] runs).
    pending: Option<i64>,
}

/// The data version of the connection's main database (see the module's comment).
pub(super) fn data_version(c: &Connection) -> Option<u32> {
    let mut v: u32 = 0;
    // SAFETY: the connection's live handle, a NUL-terminated name, and a pointer to a u32 as
    // SQLITE_FCNTL_DATA_VERSION asks for.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            c.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_DATA_VERSION,
            &mut v as *mut u32 as *mut c_void,
        )
    };
    (rc == ffi::SQLITE_OK).then_some(v)
}

impl Clock {
    /// The stored time, inside a transaction: the remembered one when nobody wrote since.
    fn last(&self, c: &Connection) -> rusqlite::Result<i64> {
        if let (Some((v, t)), Some(now)) = (self.seen, data_version(c)) {
            if v == now {
                return Ok(t);
            }
        }
        c.prepare_cached("SELECT v FROM meta WHERE k = 'clock'")?.query_row([], |r| r.get(0))
    }

    /// The time now, without moving the stored clock (inside a read transaction).
    pub(super) fn now(&mut self, c: &Connection) -> rusqlite::Result<i64> {
        let last = self.last(c)?;
        self.pending = Some(last);
        Ok(now_ms().max(last))
    }

    /// The time now, stored as the last time handed out (inside a write transaction).
    pub(super) fn advance(&mut self, c: &Connection) -> rusqlite::Result<i64> {
        let last = self.last(c)?;
        let now = now_ms().max(last);
        if now > last {
            c.prepare_cached("UPDATE meta SET v = ?1 WHERE k = 'clock'")?.execute([now])?;
        }
        self.pending = Some(now);
        Ok(now)
    }

    /// After a transaction: remembers the stored time when it committed (`ok`), else forgets it.
    pub(super) fn settle(&mut self, c: &Connection, ok: bool) {
        let pending = self.pending.take();
        self.seen = match (ok, pending, data_version(c)) {
            (true, Some(t), Some(v)) => Some((v, t)),
            _ => None,
        };
    }
}
