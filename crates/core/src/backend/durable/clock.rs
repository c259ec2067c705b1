//! The store's clock: wall time (ms since the epoch) that never runs backwards, across calls,
//! processes and restarts. The last time a write handed out is kept in the file (`meta.clock`);
//! a write uses max(system time, that) and stores it. So when the system clock steps back (NTP,
//! a VM restored), or two processes' clocks disagree, leases and due times taken earlier are never
//! in the future of a later call: a lease runs out at most later than its wall time, never early.
//!
//! The stored time is remembered between transactions (see `remembered`), so it is read again
//! only after a commit by someone else.

use rusqlite::Connection;

use super::remembered::Remembered;
use crate::backend::embedded::now_ms;

/// The remembered stored time of one connection.
#[derive(Default)]
pub(super) struct Clock(Remembered<i64>);

fn stored(c: &Connection) -> rusqlite::Result<i64> {
    c.prepare_cached("SELECT v FROM meta WHERE k = 'clock'")?.query_row([], |r| r.get(0))
}

impl Clock {
    /// The time now, without moving the stored clock (inside a read transaction).
    pub(super) fn now(&mut self, c: &Connection) -> rusqlite::Result<i64> {
        Ok(now_ms().max(self.0.get(c, stored)?))
    }

    /// The time now, stored as the last time handed out (inside a write transaction).
    pub(super) fn advance(&mut self, c: &Connection) -> rusqlite::Result<i64> {
        let last = self.0.get(c, stored)?;
        let now = now_ms().max(last);
        if now > last {
            c.prepare_cached("UPDATE meta SET v = ?1 WHERE k = 'clock'")?.execute([now])?;
            self.0.set(now);
        }
        Ok(now)
    }

    /// After a transaction: remembers the stored time when it committed (`ok`), else forgets it.
    pub(super) fn settle(&mut self, c: &Connection, ok: bool) {
        self.0.settle(c, ok);
    }
}
