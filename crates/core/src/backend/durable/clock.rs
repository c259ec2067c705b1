//! The store's clock: wall time (ms since the epoch) that never runs backwards, across calls,
//! processes and restarts. The last time a write handed out is kept in the file (`meta.clock`);
//! a write uses max(system time, that) and stores it. So when the system clock steps back (NTP,
//! a VM restored), or two processes' clocks disagree, leases and due times taken earlier are never
//! in the future of a later call: a lease runs out at most later than its wall time, never early.

use rusqlite::Connection;

use crate::backend::embedded::now_ms;

fn last(c: &Connection) -> rusqlite::Result<i64> {
    c.prepare_cached("SELECT v FROM meta WHERE k = 'clock'")?.query_row([], |r| r.get(0))
}

/// The time now, without moving the stored clock (inside a read transaction).
pub(super) fn now(c: &Connection) -> rusqlite::Result<i64> {
    Ok(now_ms().max(last(c)?))
}

/// The time now, stored as the last time handed out (inside a write transaction).
pub(super) fn advance(c: &Connection) -> rusqlite::Result<i64> {
    let last = last(c)?;
    let now = now_ms().max(last);
    if now > last {
        c.prepare_cached("UPDATE meta SET v = ?1 WHERE k = 'clock'")?.execute([now])?;
    }
    Ok(now)
}
