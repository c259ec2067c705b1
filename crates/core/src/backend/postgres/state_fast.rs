//! Job State's fast statements (see `fast`): a set (with or without `ifAbsent`), a delete and an
//! increment of one key in one statement each, in the cases each covers; any other case runs the call's
//! transaction (`state`).
//!
//! - [`SET`]: [`rules::state::set`] without `ifAbsent` reads no value and writes one, expiring
//!   as the expiry says at the statement's time: never, `In(ms)` after it, or `At(t)` when `t` is
//!   after it. Left to the transaction: an `At` not after it (refused there, `ExpiryPast`). The
//!   time is read before the write, as the transaction reads it before its upsert.
//! - [`SET_IF_ABSENT`]: [`rules::state::set`] with `ifAbsent`: a live value is kept (returned,
//!   nothing written); none, or an expired one, is written as [`SET`] writes it. The row is locked
//!   first and the time read after the lock, as the transaction does. Left to the transaction:
//!   an `At` not after the time (refused before anything else), and a key another call inserted
//!   while the statement ran.
//! - [`DELETE`]: always decides. The row's removal and its time read after it (as the
//!   transaction reads it): whether a live value was there ([`rules::state::live`]).
//! - [`INCREMENT`]: [`rules::state::increment`] for a key without a live value (the counter
//!   starts at `by`) or with a live counter in the form a counter stores
//!   ([`rules::state::integer`]: `0`, or up to 16 digits without a leading zero, with an optional
//!   `-`), the result within the safe integer range; the counter keeps its expiry, and one without
//!   (a new one too) expires the TTL after the time when a TTL is given. Left to the transaction: every refusal (not an integer, out of range), and a
//!   key whose row another call inserted while the statement ran. The row is locked first and
//!   the time read after the lock, as the transaction does (`FOR UPDATE`, then the clock).
//!
//! Each writes at most one row; every [`PURGE_EVERY`]th is sent with a purge of up to 64 expired
//! values ([`PURGE`], one round trip), as the transaction purges on each of its writes.
//!
//! [`rules::state::set`]: crate::rules::state::set
//! [`rules::state::live`]: crate::rules::state::live
//! [`rules::state::increment`]: crate::rules::state::increment
//! [`rules::state::integer`]: crate::rules::state::integer
//! [`PURGE_EVERY`]: super::tracker_fast::PURGE_EVERY

use tokio_postgres::types::ToSql;

use super::fast::{purge_expired, purge_on_turn};
use super::Postgres;
use crate::error::Result;
use crate::rules::state::live;
use crate::state::{Expiry, SetResult, StateValue, MAX_SAFE_INTEGER};

// INCREMENT spells MAX_SAFE_INTEGER out (SQL text is static): keep them in step.
const _: () = assert!(MAX_SAFE_INTEGER == 9_007_199_254_740_991);

/// A set without `ifAbsent`. `$4`: the expiry's kind (0 never, 1 `In`, 2 `At`), `$5` its ms.
/// Returns the expiry written, or no row (an `At` not after the time).
pub(super) const SET: &str =
    "WITH k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now),
  e AS (SELECT CASE $4::int2 WHEN 1 THEN k.now + $5::int8 WHEN 2 THEN $5::int8 END AS exp FROM k
    WHERE $4::int2 <> 2 OR $5::int8 > k.now)
INSERT INTO {s}.vals AS v (ns, key, json, exp) SELECT $1, $2, $3, e.exp FROM e
ON CONFLICT (ns, key) DO UPDATE SET json = excluded.json, exp = excluded.exp
RETURNING v.exp";

/// A set with `ifAbsent`: `$3` the JSON, `$4` the expiry's kind (0 never, 1 `In`, 2 `At`), `$5`
/// its ms. `r`: the row, locked; `k`: the time, read after the lock; `c`: whether it holds a live
/// value; `e`: the expiry to write when it does not (none when an `At` is not after the time);
/// then an `UPDATE` of the locked row or an insert of an absent one (nothing when another call
/// inserted it meanwhile). Returns `written`, the kept JSON (NULL when written), the expiry and
/// the time; or no row.
pub(super) const SET_IF_ABSENT: &str =
    "WITH r AS (SELECT json, exp FROM {s}.vals WHERE ns = $1 AND key = $2 FOR UPDATE),
  k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now, z.n AS found
    FROM (SELECT count(*) AS n FROM r) z),
  c AS (SELECT k.now, k.found, r.json, r.exp, r.json IS NOT NULL AND (r.exp IS NULL OR r.exp > k.now) AS live,
      $4::int2 <> 2 OR $5::int8 > k.now AS valid FROM k LEFT JOIN r ON true),
  e AS (SELECT c.now, c.found, CASE $4::int2 WHEN 1 THEN c.now + $5::int8 WHEN 2 THEN $5::int8 END AS exp
    FROM c WHERE c.valid AND NOT c.live),
  u AS (UPDATE {s}.vals v SET json = $3, exp = e.exp FROM e
    WHERE e.found = 1 AND v.ns = $1 AND v.key = $2 RETURNING 1),
  i AS (INSERT INTO {s}.vals (ns, key, json, exp) SELECT $1, $2, $3, e.exp FROM e WHERE e.found = 0
    ON CONFLICT (ns, key) DO NOTHING RETURNING 1)
SELECT true, NULL::text, e.exp, e.now FROM e WHERE EXISTS (SELECT FROM u) OR EXISTS (SELECT FROM i)
UNION ALL SELECT false, c.json, c.exp, c.now FROM c WHERE c.valid AND c.live";

/// A delete: the removed row's expiry and the time after it, or no row (no value was there).
pub(super) const DELETE: &str = "DELETE FROM {s}.vals WHERE ns = $1 AND key = $2
RETURNING exp, floor(extract(epoch FROM clock_timestamp()) * 1000)::int8";

/// An increment by `$3`, `$4` the TTL (ms) of a new counter (NULL: none). `r`: the row, locked;
/// `k`: the time, read after the lock; `d`: the decision, a row only when the rule writes (the
/// counter's next value and expiry); then the write, an `UPDATE` of the locked row or an insert of
/// an absent one (nothing when another call inserted it meanwhile). Returns the next value, its
/// expiry and the time, or no row.
pub(super) const INCREMENT: &str = "WITH r AS (SELECT json, exp FROM {s}.vals WHERE ns = $1 AND key = $2 FOR UPDATE),
  k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now, z.n AS found
    FROM (SELECT count(*) AS n FROM r) z),
  c AS (SELECT k.now, k.found, r.json, r.exp,
      r.json IS NOT NULL AND (r.exp IS NULL OR r.exp > k.now) AS live FROM k LEFT JOIN r ON true),
  d AS (SELECT c.now, c.found, n.next,
      CASE WHEN c.live AND c.exp IS NOT NULL THEN c.exp WHEN $4::int8 IS NULL THEN NULL ELSE c.now + $4::int8 END AS exp
    FROM c, LATERAL (SELECT CASE WHEN c.live THEN c.json::int8 + $3::int8 ELSE $3::int8 END AS next) n
    WHERE (NOT c.live OR c.json ~ '^(0|-?[1-9][0-9]{0,15})$') AND abs(n.next) <= 9007199254740991),
  u AS (UPDATE {s}.vals v SET json = d.next::text, exp = d.exp FROM d
    WHERE d.found = 1 AND v.ns = $1 AND v.key = $2 RETURNING 1),
  i AS (INSERT INTO {s}.vals (ns, key, json, exp) SELECT $1, $2, d.next::text, d.exp FROM d WHERE d.found = 0
    ON CONFLICT (ns, key) DO NOTHING RETURNING 1)
SELECT d.next, d.exp, d.now FROM d WHERE EXISTS (SELECT FROM u) OR EXISTS (SELECT FROM i)";

/// Up to 64 expired values, by the database's time (sent after a fast write).
pub(super) const PURGE: &str = purge_expired!("vals");

/// An expiry as [`SET`]'s and [`SET_IF_ABSENT`]'s `$4` and `$5`: its kind (0 never, 1 `In`, 2
/// `At`) and its ms.
fn expiry_params(expiry: Expiry) -> (i16, i64) {
    match expiry {
        Expiry::Never => (0, 0),
        Expiry::In(ms) => (1, i64::try_from(ms).unwrap_or(i64::MAX)),
        Expiry::At(at) => (2, i64::try_from(at).unwrap_or(i64::MAX)),
    }
}

impl Postgres {
    /// The purge to send with this fast write, on its turn.
    fn vals_purge(&self) -> Option<&'static str> {
        purge_on_turn(&self.state_writes, PURGE)
    }

    /// A set without `ifAbsent` by [`SET`]; `None`: the transaction decides it.
    pub(super) async fn set_fast(&self, key: &str, json: &str, expiry: Expiry) -> Result<Option<SetResult>> {
        let (kind, ms) = expiry_params(expiry);
        let params: [&(dyn ToSql + Sync); 5] = [&self.ns.as_bytes(), &key.as_bytes(), &json, &kind, &ms];
        let rows = self.one_statement(SET, &params, self.vals_purge()).await?;
        let Some(row) = rows.first() else { return Ok(None) };
        let expires_at: Option<i64> = row.try_get(0).map_err(|e| self.failure(e.into()))?;
        Ok(Some(SetResult { written: true, current: StateValue { json: json.to_string(), expires_at } }))
    }

    /// A set with `ifAbsent` by [`SET_IF_ABSENT`]; `None`: the transaction decides it.
    pub(super) async fn set_if_absent_fast(
        &self,
        key: &str,
        json: &str,
        expiry: Expiry,
    ) -> Result<Option<SetResult>> {
        let (kind, ms) = expiry_params(expiry);
        let params: [&(dyn ToSql + Sync); 5] = [&self.ns.as_bytes(), &key.as_bytes(), &json, &kind, &ms];
        let rows = self.one_statement(SET_IF_ABSENT, &params, self.vals_purge()).await?;
        let Some(row) = rows.first() else { return Ok(None) };
        let read = |row: &tokio_postgres::Row| -> std::result::Result<SetResult, tokio_postgres::Error> {
            let (written, kept, expires_at): (bool, Option<String>, Option<i64>) =
                (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            let json = if written { json.to_string() } else { kept.unwrap_or_default() };
            Ok(SetResult { written, current: StateValue { json, expires_at } })
        };
        Ok(Some(read(row).map_err(|e| self.failure(e.into()))?))
    }

    /// A delete by [`DELETE`] (it always decides): whether a live value was there.
    pub(super) async fn delete_fast(&self, key: &str) -> Result<bool> {
        let params: [&(dyn ToSql + Sync); 2] = [&self.ns.as_bytes(), &key.as_bytes()];
        let rows = self.statement_alone(DELETE, &params, self.vals_purge()).await?;
        self.decided();
        let Some(row) = rows.first() else { return Ok(false) };
        let read =
            |row: &tokio_postgres::Row| -> std::result::Result<(Option<i64>, i64), tokio_postgres::Error> {
                Ok((row.try_get(0)?, row.try_get(1)?))
            };
        let (exp, now) = read(row).map_err(|e| self.failure(e.into()))?;
        Ok(live(exp, now))
    }

    /// An increment by [`INCREMENT`]: the next value; `None`: the transaction decides it.
    pub(super) async fn increment_fast(
        &self,
        key: &str,
        by: i64,
        ttl_ms: Option<u64>,
    ) -> Result<Option<i64>> {
        let ttl = ttl_ms.map(|t| i64::try_from(t).unwrap_or(i64::MAX));
        let params: [&(dyn ToSql + Sync); 4] = [&self.ns.as_bytes(), &key.as_bytes(), &by, &ttl];
        let rows = self.one_statement(INCREMENT, &params, self.vals_purge()).await?;
        let Some(row) = rows.first() else { return Ok(None) };
        Ok(Some(row.try_get(0).map_err(|e| self.failure(e.into()))?))
    }
}
