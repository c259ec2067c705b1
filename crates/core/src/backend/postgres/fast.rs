//! The one-statement fast paths: a call whose common case one statement can decide runs that
//! statement on its own, committed by itself (no `BEGIN`, no `COMMIT`: one round trip instead of
//! the transaction's four), as the Redis backend has `tracker_apply_fast.lua` beside
//! `tracker_apply.lua`. Each fast statement writes exactly what the rule (`crate::rules`) decides
//! for the cases it covers, reading the database's clock (`clock_timestamp()`) once, and returns
//! no row for every other case; the call then runs its transaction (the general path), which
//! decides it. So a fast statement never refuses nor answers for a case it does not cover.
//!
//! The fast statements (docs/postgres.md lists them): the Item Tracker's claim, completion and
//! failure of one item (`tracker_fast`), the Concurrency Lock's acquisition, release and
//! extension (`lock`), the Dedup Queue's enqueue of one id, read and ack (`queue_fast`), Job
//! State's set (with or without `ifAbsent`), delete and increment (`state_fast`), its idempotency
//! keys' claim, completion and release (`once_fast`), the Rate Limiter's take (`limiter_fast`)
//! and the Semaphore's release and extension (`semaphore_fast`).
//!
//! Where a lease's end decides (Job State's increment, the limiter's take, the keys' calls, the
//! lock's and the permit's release and extension, the queue's ack), the statement locks the rows
//! it decides from first and reads the clock after the lock, as the transaction does: a call
//! that waited for another call's lock past its lease's end is refused, as the rule refuses it
//! then (`time_after_lock_tests.rs`). The others read the clock first; when one waited for
//! another call's transaction on its row, its time is older than that call's, and each is safe
//! so: the tracker's statements leave a record changed after their time (`u`) to the general
//! path, so the times of a record's changes never go backwards; the lock's acquisition takes
//! only a lease that had ended by its (older) time, and writes a lease end no later than the
//! rule's; the queue's read never waits for a row (`SKIP LOCKED`); the enqueue writes only an id
//! that had no row; Job State's set overwrites whatever it finds.

use std::sync::atomic::{AtomicU32, Ordering};

use tokio_postgres::Row;

use super::{pg_error, Fail, Params, Postgres};
use crate::error::Result;

/// The purge of up to 64 rows of `table` whose `exp` (ms) passed, by the database's time read by
/// the statement itself (sent with a fast write, before its time is known), oldest first by the
/// table's index on `exp` (as `Purged::statement`).
macro_rules! purge_expired {
    ($table:literal) => {
        concat!(
            "DELETE FROM {s}.",
            $table,
            " WHERE ctid = ANY(ARRAY(SELECT ctid FROM {s}.",
            $table,
            "\n    WHERE exp <= (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8)",
            "\n    ORDER BY exp LIMIT 64 FOR UPDATE SKIP LOCKED))"
        )
    };
}
pub(super) use purge_expired;

/// `purge` on every [`PURGE_EVERY`]th turn of `turns` (a fast statement's count of writes): the
/// purge to send with this write, on its turn.
///
/// [`PURGE_EVERY`]: super::tracker_fast::PURGE_EVERY
pub(super) fn purge_on_turn(turns: &AtomicU32, purge: &'static str) -> Option<&'static str> {
    let turn = turns.fetch_add(1, Ordering::Relaxed);
    turn.is_multiple_of(super::tracker_fast::PURGE_EVERY).then_some(purge)
}

impl Postgres {
    /// Runs `sql` (`{s}`: the schema) on its own, and `then` (a statement without parameters,
    /// such as a purge) after it in the same round trip (both sent before either answer is read;
    /// each commits by itself). The rows of `sql`: none when it could not decide (counted as
    /// decided otherwise, see [`Postgres::decided`]).
    pub(super) async fn one_statement(
        &self,
        sql: &str,
        params: Params<'_>,
        then: Option<&str>,
    ) -> Result<Vec<Row>> {
        let rows = self.statement_alone(sql, params, then).await?;
        if !rows.is_empty() {
            self.decided();
        }
        Ok(rows)
    }

    /// Counts a call its fast statement decided (the tests read the count).
    pub(super) fn decided(&self) {
        self.fast_taken.fetch_add(1, Ordering::Relaxed);
    }

    /// [`Postgres::one_statement`], for a statement whose rows do not tell alone whether it
    /// decided: the caller counts with [`Postgres::decided`].
    pub(super) async fn statement_alone(
        &self,
        sql: &str,
        params: Params<'_>,
        then: Option<&str>,
    ) -> Result<Vec<Row>> {
        let conn = self.conn().await?;
        let run = async {
            let st = conn.prepare_cached(&sql.replace("{s}", &self.schema)).await?;
            match then {
                None => conn.query(&st, params).await,
                Some(then) => {
                    let then = conn.prepare_cached(&then.replace("{s}", &self.schema)).await?;
                    let (rows, _) =
                        futures_util::future::try_join(conn.query(&st, params), conn.execute(&then, &[]))
                            .await?;
                    Ok(rows)
                }
            }
        };
        // A statement committed by itself waits for a synchronous standby as a COMMIT does, past
        // its statement_timeout: bounded here as the transaction's COMMIT is (`Postgres::commit`),
        // the connection still in that wait out of the pool and closed; a little later than the
        // statement_timeout, so that the server ends a statement still running first
        // (`Postgres::fast_bound`).
        let rows = match tokio::time::timeout(self.fast_bound(), run).await {
            Ok(rows) => rows.map_err(pg_error)?,
            Err(_) => {
                drop(deadpool_postgres::Object::take(conn));
                return Err(self.failure(Fail::Unconfirmed));
            }
        };
        Ok(rows)
    }
}
