//! The Rate Limiter's fast statement (see `fast`): a take in one statement, in the cases it
//! covers; any other case runs the call's transaction (`limiter`).
//!
//! [`TAKE`]: [`rules::limiter::decide`] (GCRA) over the limiter's row, locked first, with the
//! time (µs) read after the lock, as the transaction does (`FOR UPDATE`, then the clock): the TAT
//! is the stored one, now, or the pause end, whichever is latest; the take is allowed when its
//! token is due (never before the pause end) within the wait allowed; an allowed take with a cost
//! stores the TAT moved on by the cost (an `UPDATE` of the locked row, its `exp` never moved back,
//! or an insert of an absent one). Every take is covered but one: an absent limiter another call
//! inserted while the statement ran (its insert finds the row: no row is returned, and the
//! transaction decides). The costs in µs (`cost × interval`, `burst × interval`) are computed as
//! the rule computes them; a take whose products do not fit goes to the transaction.
//!
//! Every [`PURGE_EVERY`](super::tracker_fast::PURGE_EVERY)th take is sent with a purge of up to 64 limiters whose `exp` passed
//! ([`PURGE`], one round trip), as the transaction purges on each take.
//!
//! [`rules::limiter::decide`]: crate::rules::limiter::decide

use tokio_postgres::types::ToSql;

use super::fast::{purge_expired, purge_on_turn};
use super::Postgres;
use crate::error::Result;
use crate::limiter::{Rule, Take};

/// A take. `$3`: the cost in µs, `$4`: the burst in µs, `$5`: the wait allowed in µs. `r`: the
/// row, locked; `k`: the time (µs), read after the lock; `c`: the pause end still ahead; `t`: the
/// TAT the take starts from; `d`: the decision (the TAT after it, `next`, and whether it is
/// allowed); then the write when an allowed take has a cost. Returns whether it was allowed, the
/// time, the TAT it started from and the pause end, or no row (see the module).
pub(super) const TAKE: &str = "WITH r AS (SELECT tat, until FROM {s}.limiters WHERE ns = $1 AND name = $2 FOR UPDATE),
  k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::int8 AS now, z.n AS found
    FROM (SELECT count(*) AS n FROM r) z),
  c AS (SELECT k.now, k.found, r.tat, CASE WHEN r.until > k.now THEN r.until END AS pause FROM k LEFT JOIN r ON true),
  t AS (SELECT c.now, c.found, c.pause, GREATEST(COALESCE(c.tat, c.now), c.now, COALESCE(c.pause, c.now)) AS tat FROM c),
  d AS (SELECT t.now, t.found, t.pause, t.tat, t.tat + $3::int8 AS next,
      GREATEST(t.tat + $3::int8 - $4::int8, COALESCE(t.pause, t.tat + $3::int8 - $4::int8)) - t.now <= $5::int8
        AS allowed
    FROM t),
  u AS (UPDATE {s}.limiters l SET tat = d.next, exp = GREATEST(l.exp, (d.next + 999) / 1000) FROM d
    WHERE d.allowed AND $3::int8 > 0 AND d.found = 1 AND l.ns = $1 AND l.name = $2 RETURNING 1),
  i AS (INSERT INTO {s}.limiters (ns, name, tat, until, exp) SELECT $1, $2, d.next, NULL, (d.next + 999) / 1000 FROM d
    WHERE d.allowed AND $3::int8 > 0 AND d.found = 0 ON CONFLICT (ns, name) DO NOTHING RETURNING 1)
SELECT d.allowed, d.now, d.tat, d.pause FROM d
WHERE NOT (d.allowed AND $3::int8 > 0) OR EXISTS (SELECT FROM u) OR EXISTS (SELECT FROM i)";

/// Up to 64 limiters whose `exp` (ms) passed, by the database's time (sent after a fast take).
pub(super) const PURGE: &str = purge_expired!("limiters");

impl Postgres {
    /// A take by [`TAKE`]; `None`: the transaction decides it.
    pub(super) async fn take_fast(
        &self,
        name: &str,
        rule: Rule,
        cost: u64,
        max_wait_us: u64,
    ) -> Result<Option<Take>> {
        let us = |n: u64| n.checked_mul(rule.interval_us).and_then(|v| i64::try_from(v).ok());
        let (Some(cost_us), Some(burst_us), Ok(wait_us)) =
            (us(cost), us(rule.burst), i64::try_from(max_wait_us))
        else {
            return Ok(None);
        };
        let purge = purge_on_turn(&self.limiter_takes, PURGE);
        let params: [&(dyn ToSql + Sync); 5] =
            [&self.ns.as_bytes(), &name.as_bytes(), &cost_us, &burst_us, &wait_us];
        let rows = self.one_statement(TAKE, &params, purge).await?;
        let Some(row) = rows.first() else { return Ok(None) };
        let read = |row: &tokio_postgres::Row| -> std::result::Result<Take, tokio_postgres::Error> {
            Ok(Take {
                allowed: row.try_get(0)?,
                now_us: row.try_get(1)?,
                tat_us: row.try_get(2)?,
                pause_us: row.try_get(3)?,
            })
        };
        Ok(Some(read(row).map_err(|e| self.failure(e.into()))?))
    }
}
