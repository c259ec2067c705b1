//! Job State's idempotency keys' fast statements (see `fast`): a claim, a completion and a release
//! of one key in one statement each, in the cases each covers; any other case runs the call's
//! transaction (`state`). Each locks the key's row first (`FOR UPDATE`) and reads the time after
//! the lock, as the transaction does (`IDEM_LOCKED`, then the clock), and reads a row as
//! `state::rule_key` does: done when it holds a result, else pending when it has an owner, else
//! no key.
//!
//! - [`CLAIM`]: [`rules::once::claim`]: a kept done key answers its result and expiry, a kept
//!   pending one the rest of its lease, nothing written; a key not kept (absent, expired, or a row
//!   with neither owner nor result) is taken: the locked row updated, or an absent one inserted,
//!   pending for the caller until the time + the lease. Left to the transaction: a key whose row
//!   another call inserted while the statement ran (the insert finds it and writes nothing).
//! - [`COMPLETE`]: always decides (the call runs no transaction). When the caller holds the key
//!   ([`rules::once::holds`]: pending, its owner, kept), the result is stored until the time + the
//!   TTL ([`rules::once::complete`]) and the key's waiters woken: `pg_notify` on the schema's
//!   channel with the payload of `Ctx::notify(Topic::Key, key)` (`notify::payload`), sent by the
//!   same statement only when it wrote (as the lock's `RELEASE_FAST`); else nothing is written.
//! - [`RELEASE`]: always decides (no transaction). When the caller holds the key ([`rules::once::release`]), its
//!   row is deleted and the waiters woken as by [`COMPLETE`]; else nothing is written.
//!
//! Every [`PURGE_EVERY`]th fast claim is sent with a purge of up to 64 expired keys ([`PURGE`], one
//! round trip), as the transaction purges on each claim that takes a key.
//!
//! [`rules::once::claim`]: crate::rules::once::claim
//! [`rules::once::holds`]: crate::rules::once::holds
//! [`rules::once::complete`]: crate::rules::once::complete
//! [`rules::once::release`]: crate::rules::once::release
//! [`PURGE_EVERY`]: super::tracker_fast::PURGE_EVERY

use tokio_postgres::types::ToSql;

use super::fast::{purge_expired, purge_on_turn};
use super::{notify, Postgres};
use crate::error::Result;
use crate::state::KeyClaim;
use crate::wakeup::Topic;

/// A claim for the owner `$3` and the lease `$4` (ms). `r`: the row, locked; `k`: the time, read
/// after the lock; `c`: whether the row is a kept key (`live`), done or pending; then the take,
/// an `UPDATE` of the locked row or an insert of an absent one (nothing when another call
/// inserted it meanwhile), only when no key is kept. Returns the answer's kind (0 claimed, 1
/// pending, 2 done), the result, the expiry and the time, or no row.
pub(super) const CLAIM: &str = "WITH r AS (SELECT owner, result, exp FROM {s}.idem WHERE ns = $1 AND key = $2 FOR UPDATE),
  k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now, z.n AS found
    FROM (SELECT count(*) AS n FROM r) z),
  c AS (SELECT k.now, k.found, r.result, r.exp,
      (r.result IS NOT NULL OR r.owner IS NOT NULL) AND r.exp > k.now AS live FROM k LEFT JOIN r ON true),
  u AS (UPDATE {s}.idem v SET owner = $3, result = NULL, exp = c.now + $4::int8 FROM c
    WHERE NOT c.live AND c.found = 1 AND v.ns = $1 AND v.key = $2 RETURNING 1),
  i AS (INSERT INTO {s}.idem (ns, key, owner, result, exp) SELECT $1, $2, $3, NULL, c.now + $4::int8 FROM c
    WHERE c.found = 0 ON CONFLICT (ns, key) DO NOTHING RETURNING 1)
SELECT CASE WHEN NOT c.live THEN 0::int2 WHEN c.result IS NULL THEN 1::int2 ELSE 2::int2 END, c.result, c.exp, c.now
FROM c WHERE c.live OR EXISTS (SELECT FROM u) OR EXISTS (SELECT FROM i)";

/// A completion by the owner `$3`, storing the result `$4` for the TTL `$5` (ms); `$6` the
/// channel, `$7` the payload. `r`: the row, locked; `k`: the time, read after the lock; `u`: the
/// write when the owner holds the key. A row when it completed (the waiters woken); none: not held.
pub(super) const COMPLETE: &str = "WITH r AS (SELECT owner, result, exp FROM {s}.idem WHERE ns = $1 AND key = $2 FOR UPDATE),
  k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now FROM (SELECT count(*) FROM r) z),
  u AS (UPDATE {s}.idem v SET owner = NULL, result = $4, exp = k.now + $5::int8 FROM k, r
    WHERE r.result IS NULL AND r.owner = $3 AND r.exp > k.now AND v.ns = $1 AND v.key = $2 RETURNING 1)
SELECT pg_notify($6, $7)::text FROM u";

/// A release by the owner `$3`; `$4` the channel, `$5` the payload. As [`COMPLETE`], the row
/// deleted. A row when it released (the waiters woken); none: not held.
pub(super) const RELEASE: &str = "WITH r AS (SELECT owner, result, exp FROM {s}.idem WHERE ns = $1 AND key = $2 FOR UPDATE),
  k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now FROM (SELECT count(*) FROM r) z),
  d AS (DELETE FROM {s}.idem v USING k, r
    WHERE r.result IS NULL AND r.owner = $3 AND r.exp > k.now AND v.ns = $1 AND v.key = $2 RETURNING 1)
SELECT pg_notify($4, $5)::text FROM d";

/// Up to 64 expired keys, by the database's time (sent after a fast claim).
pub(super) const PURGE: &str = purge_expired!("idem");

impl Postgres {
    /// A claim by [`CLAIM`]; `None`: the transaction decides it.
    pub(super) async fn claim_key_fast(
        &self,
        key: &str,
        owner: &str,
        lease_ms: u64,
    ) -> Result<Option<KeyClaim>> {
        let lease = lease_ms as i64;
        let params: [&(dyn ToSql + Sync); 4] = [&self.ns.as_bytes(), &key.as_bytes(), &owner, &lease];
        let rows = self.one_statement(CLAIM, &params, purge_on_turn(&self.key_claims, PURGE)).await?;
        let Some(row) = rows.first() else { return Ok(None) };
        let read = |row: &tokio_postgres::Row| -> std::result::Result<KeyClaim, tokio_postgres::Error> {
            let kind: i16 = row.try_get(0)?;
            Ok(match kind {
                0 => KeyClaim::Claimed { owner: owner.to_string(), lease_ms },
                1 => {
                    let (exp, now): (i64, i64) = (row.try_get(2)?, row.try_get(3)?);
                    KeyClaim::Pending { remaining_ms: (exp - now).max(0) as u64 }
                }
                _ => KeyClaim::Done { json: row.try_get(1)?, expires_at: Some(row.try_get(2)?) },
            })
        };
        Ok(Some(read(row).map_err(|e| self.failure(e.into()))?))
    }

    /// A completion by [`COMPLETE`] (it always decides): whether the owner held the key.
    pub(super) async fn complete_key_fast(
        &self,
        key: &str,
        owner: &str,
        json: &str,
        ttl_ms: u64,
    ) -> Result<bool> {
        let (ttl, payload) = (ttl_ms as i64, notify::payload(Topic::Key, &self.ns, key));
        let params: [&(dyn ToSql + Sync); 7] =
            [&self.ns.as_bytes(), &key.as_bytes(), &owner, &json, &ttl, &self.schema, &payload];
        let rows = self.statement_alone(COMPLETE, &params, None).await?;
        self.decided();
        Ok(!rows.is_empty())
    }

    /// A release by [`RELEASE`] (it always decides): whether the owner held the key.
    pub(super) async fn release_key_fast(&self, key: &str, owner: &str) -> Result<bool> {
        let payload = notify::payload(Topic::Key, &self.ns, key);
        let params: [&(dyn ToSql + Sync); 5] =
            [&self.ns.as_bytes(), &key.as_bytes(), &owner, &self.schema, &payload];
        let rows = self.statement_alone(RELEASE, &params, None).await?;
        self.decided();
        Ok(!rows.is_empty())
    }
}
