//! The Item Tracker's fast statements (see `fast`): a claim, a completion or a failure of one
//! item in one statement, in the cases it covers; any other case runs the call's transaction
//! (`tracker`).
//!
//! - [`CLAIM`]: [`rules::tracker::claim`] says `Take` for an item without a kept record (a new
//!   id, or one whose record expired: [`rules::tracker::fresh`], then [`rules::tracker::take`]),
//!   and for a kept one that is abandoned (its lease ended), failed, or completed with
//!   `reclaimCompleted` ([`rules::tracker::take`]: the abandonment and the claim added to its
//!   timeline, the last [`MAX_TIMELINE`] kept). Left to the transaction: a record whose timeline
//!   is neither stored nor implied (damage, which the transaction reports).
//! - [`COMPLETE`], [`FAIL`]: [`rules::tracker::owns`] passes and [`rules::tracker::finish`]
//!   writes, for a kept record in progress (its lease live or ended) whose owner is the one given
//!   (or with no owner given); a failure at the claim's `maxAttempts` makes it dead
//!   ([`rules::tracker::failure`]). Left to the transaction: every refusal, and an item not in
//!   progress.
//!
//! When the claim writes nothing, it returns the record as its snapshot holds it and its time
//! ([`or_as_it_was`]), and the call runs the rule on them ([`rules::tracker::decide`]): a refusal
//! (an item in progress, dead, or completed without `reclaimCompleted`) is answered at once, with
//! the item's state, as the transaction answers it; any other decision goes to the transaction. A
//! refusal so answered held when the statement began: an item in progress at the statement's time
//! was in progress then (its lease ends later), and one completed or dead and kept now was so
//! then. So the rule stays in Rust, and a refused claim (a re-run's claim of a completed item)
//! costs one round trip, as a taken one. The completion and the failure do not (their refusals
//! are errors, and the same read costs their common case about a sixth more on the server:
//! pgbench, 4,200-5,300 against 5,300-6,400 statements/s).
//!
//! Each statement leaves a record changed after its time (`u`, or its timeline's last entry, is
//! later: it waited for that change) to the transaction, see `fast`. The timeline is kept as the
//! other paths keep it: NULL while the record's fields imply it
//! ([`rules::tracker::implied_timeline`]), else JSON (written here by `jsonb`, read by serde).
//!
//! [`rules::tracker::claim`]: crate::rules::tracker::claim
//! [`rules::tracker::fresh`]: crate::rules::tracker::fresh
//! [`rules::tracker::take`]: crate::rules::tracker::take
//! [`rules::tracker::owns`]: crate::rules::tracker::owns
//! [`rules::tracker::finish`]: crate::rules::tracker::finish
//! [`rules::tracker::failure`]: crate::rules::tracker::failure
//! [`rules::tracker::implied_timeline`]: crate::rules::tracker::implied_timeline
//! [`rules::tracker::decide`]: crate::rules::tracker::decide
//! [`MAX_TIMELINE`]: crate::tracker::MAX_TIMELINE

use tokio_postgres::types::ToSql;

use super::tracker::from_row;
use super::Postgres;
use crate::error::{Error, Result};
use crate::rules::tracker::{decide, kept, Decision};
use crate::tracker::{
    not_owner, status_column, ItemOp, ItemState, OpResult, Outcome, Record, KEEP_FOREVER_MS,
};

// The statements spell MAX_TIMELINE, NEVER and the status codes out (SQL text is static): keep
// them in step.
const _: () = assert!(crate::tracker::MAX_TIMELINE == 20 && crate::tracker::NEVER == 99_999_999_999_999);

/// The end of the fast claim, after its write (`up`, which returns the record it wrote): that
/// record, or else the record as the statement's snapshot holds it (the call decides from it
/// whether to refuse, see [`Postgres::apply_fast`]); then whether it was written and the
/// statement's time (the completion and the failure end with the same two columns).
macro_rules! or_as_it_was {
    () => {
        "
SELECT up.*, true, k.now FROM up, k
UNION ALL
SELECT i.id, i.s, i.a, i.o, i.l, i.c, i.u, i.d, i.e, i.x, i.t, i.r, i.n, false, k.now FROM {s}.items i, k
WHERE i.ns = $1 AND i.grp = $2 AND i.id = $3 AND NOT EXISTS (SELECT 1 FROM up)"
    };
}

/// A claim: `$1` ns, `$2` group, `$3` id, `$4` owner, `$5` lease (ms), `$6` retention (ms), `$7`
/// the status column of `in_progress` with the claim's maxAttempts, `$8` note, `$9`
/// reclaimCompleted. The record written, or no row. Status codes (`s & 7`, see
/// `tracker::status_column`): 1 in progress, 2 completed, 3 failed, 4 dead.
pub(super) const CLAIM: &str = concat!(
    "WITH k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now),
up AS (INSERT INTO {s}.items AS i (ns, grp, id, s, a, o, l, c, u, d, e, x, t, r, n)
SELECT $1, $2, $3, $7, 1, $4, k.now + $5, k.now, k.now, 0, NULL, k.now + $5 + $6, NULL, NULL, $8 FROM k
ON CONFLICT (ns, grp, id) DO UPDATE SET
  s = EXCLUDED.s, o = EXCLUDED.o, l = EXCLUDED.l, u = EXCLUDED.u, d = 0, x = EXCLUDED.x, r = NULL, n = EXCLUDED.n,
  a = CASE WHEN i.x <= EXCLUDED.u THEN 1 ELSE i.a + 1 END,
  c = CASE WHEN i.x <= EXCLUDED.u THEN EXCLUDED.c ELSE i.c END,
  e = CASE WHEN i.x <= EXCLUDED.u THEN NULL ELSE i.e END,
  t = CASE WHEN i.x <= EXCLUDED.u THEN NULL ELSE (
    SELECT jsonb_agg(v ORDER BY p)::text
    FROM (SELECT
        CASE WHEN i.t IS NOT NULL THEN i.t::jsonb
        ELSE CASE WHEN i.a = 1 THEN jsonb_build_array(jsonb_build_object('t', i.c, 's', 'in_progress', 'a', 1))
             ELSE '[]'::jsonb END
          || CASE WHEN i.s & 7 IN (2, 3) THEN jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
               't', i.d, 's', CASE WHEN i.s & 7 = 2 THEN 'completed' ELSE 'failed' END, 'a', i.a,
               'e', CASE WHEN i.s & 7 = 3 THEN convert_from(i.e, 'UTF8') END)))
             ELSE '[]'::jsonb END
        END
        || CASE WHEN i.s & 7 = 1 THEN jsonb_build_array(jsonb_build_object('t', i.l, 's', 'abandoned', 'a', i.a))
           ELSE '[]'::jsonb END
        || jsonb_build_array(jsonb_build_object('t', EXCLUDED.u, 's', 'in_progress', 'a', i.a + 1)) AS f) w,
      jsonb_array_elements(w.f) WITH ORDINALITY AS z(v, p)
    WHERE p > jsonb_array_length(w.f) - 20) END
WHERE i.u <= EXCLUDED.u
  AND (i.t IS NULL OR (i.t::jsonb -> -1 ->> 't')::int8 <= EXCLUDED.u)
  AND (i.x <= EXCLUDED.u
    OR ((i.s & 7 = 1 AND i.l <= EXCLUDED.u OR i.s & 7 = 3 OR i.s & 7 = 2 AND $9)
      AND (i.t IS NOT NULL OR i.a = 1 OR i.a = 0 AND i.s & 7 IN (2, 3))))
RETURNING id, s, a, o, l, c, u, d, e, x, t, r, n)",
    or_as_it_was!()
);

/// The end of [`COMPLETE`] and [`FAIL`]: the record they change (kept, in progress, of the
/// owner given, not changed after now, its timeline stored or implied) and what they return.
macro_rules! finished {
    () => {
        "
FROM k
WHERE i.ns = $1 AND i.grp = $2 AND i.id = $3 AND i.s & 7 = 1 AND i.x > k.now AND ($4::text IS NULL OR i.o = $4)
  AND i.u <= k.now AND (i.t IS NULL AND i.a = 1 OR (i.t::jsonb -> -1 ->> 't')::int8 <= k.now)
RETURNING i.id, i.s, i.a, i.o, i.l, i.c, i.u, i.d, i.e, i.x, i.t, i.r, i.n, true, k.now"
    };
}

/// A completion: `$1` ns, `$2` group, `$3` id, `$4` owner (NULL: no check), `$5` keep (ms, at
/// most [`KEEP_FOREVER_MS`]), `$6` result. The record written, or no row.
pub(super) const COMPLETE: &str = concat!(
    "WITH k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now)
UPDATE {s}.items AS i SET s = i.s - (i.s & 7) + 2, l = 0, u = k.now, d = k.now,
  x = LEAST(k.now + $5, 99999999999999), r = $6,
  t = CASE WHEN i.t IS NULL THEN NULL ELSE (
    SELECT jsonb_agg(v ORDER BY p)::text
    FROM (SELECT i.t::jsonb || jsonb_build_array(jsonb_build_object('t', k.now, 's', 'completed', 'a', i.a)) AS f) w,
      jsonb_array_elements(w.f) WITH ORDINALITY AS z(v, p)
    WHERE p > jsonb_array_length(w.f) - 20) END",
    finished!()
);

/// A failure: `$1` ns, `$2` group, `$3` id, `$4` owner (NULL: no check), `$5` keep (ms, at most
/// [`KEEP_FOREVER_MS`]), `$6` the error (bytes), `$7` the same as text. Failed, or dead when
/// the claim gave a maxAttempts (`s >> 3`) and this attempt reached it; a dead record's timeline
/// is never implied, so it is stored. The record written, or no row.
pub(super) const FAIL: &str = concat!(
    "WITH k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now)
UPDATE {s}.items AS i SET s = i.s - (i.s & 7) + CASE WHEN i.s >> 3 > 0 AND i.a >= i.s >> 3 THEN 4 ELSE 3 END,
  l = 0, u = k.now, d = k.now, e = $6, x = LEAST(k.now + $5, 99999999999999), r = NULL,
  t = CASE WHEN i.t IS NULL AND NOT (i.s >> 3 > 0 AND i.a >= i.s >> 3) THEN NULL ELSE (
    SELECT jsonb_agg(v ORDER BY p)::text
    FROM (SELECT coalesce(i.t::jsonb, jsonb_build_array(jsonb_build_object('t', i.c, 's', 'in_progress', 'a', 1)))
        || jsonb_build_array(jsonb_build_object('t', k.now,
             's', CASE WHEN i.s >> 3 > 0 AND i.a >= i.s >> 3 THEN 'dead' ELSE 'failed' END, 'a', i.a, 'e', $7::text)) AS f) w,
      jsonb_array_elements(w.f) WITH ORDINALITY AS z(v, p)
    WHERE p > jsonb_array_length(w.f) - 20) END",
    finished!()
);

/// One fast write in this many also purges (see [`PURGE`]).
pub(super) const PURGE_EVERY: u32 = 8;

/// Removes up to 64 expired records (as `Purged::Items`, the time read by the statement itself:
/// sent with every [`PURGE_EVERY`]th fast statement, before its time is known). `x < NEVER` lets
/// it use the partial index on `x`, and `ORDER BY x` keeps it there (see `Purged::statement`).
pub(super) const PURGE: &str = "DELETE FROM {s}.items WHERE ctid = ANY(ARRAY(SELECT ctid FROM {s}.items
    WHERE x <= (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8) AND x < 99999999999999
    ORDER BY x LIMIT 64 FOR UPDATE SKIP LOCKED))";

impl Postgres {
    /// `op` on an item of `group` by its fast statement, when one covers the op and its case;
    /// `None`: the transaction decides it.
    pub(super) async fn apply_fast(
        &self,
        group: &str,
        op: &ItemOp,
        retention_ms: u64,
    ) -> Result<Option<OpResult>> {
        let (ns, g, id) = (self.ns.as_bytes(), group.as_bytes(), op.id().as_bytes());
        // A fast statement writes at most one new record; a purge of up to 64 every
        // PURGE_EVERY of them keeps ahead (as the lock's sweep, `lock::SWEEP_EVERY`).
        let turn = self.fast_writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let purge = turn.is_multiple_of(PURGE_EVERY).then_some(PURGE);
        let rows = match op {
            ItemOp::Claim { owner, lease_ms, reclaim_completed, max_attempts, note, .. } => {
                let s = status_column("in_progress", *max_attempts)
                    .ok_or_else(|| Error::internal("no status column for in_progress"))?
                    as i16;
                let (lease, retention) = (*lease_ms as i64, retention_ms as i64);
                let params: [&(dyn ToSql + Sync); 9] =
                    [&ns, &g, &id, owner, &lease, &retention, &s, note, reclaim_completed];
                self.statement_alone(CLAIM, &params, purge).await?
            }
            ItemOp::Complete { owner, keep_ms, result, .. } => {
                let keep = (*keep_ms).min(KEEP_FOREVER_MS) as i64;
                let params: [&(dyn ToSql + Sync); 6] = [&ns, &g, &id, owner, &keep, result];
                self.statement_alone(COMPLETE, &params, purge).await?
            }
            ItemOp::Fail { owner, error, keep_ms, .. } => {
                let keep = (*keep_ms).min(KEEP_FOREVER_MS) as i64;
                let params: [&(dyn ToSql + Sync); 7] = [&ns, &g, &id, owner, &keep, &error.as_bytes(), error];
                self.statement_alone(FAIL, &params, purge).await?
            }
            ItemOp::Unset { .. } | ItemOp::Revive { .. } => return Ok(None),
        };
        let Some(row) = rows.first() else { return Ok(None) };
        let read = |row: &tokio_postgres::Row| -> super::Sql<(String, Record, bool, i64)> {
            let (id, rec) = from_row(row)?;
            Ok((id, rec, row.try_get(13)?, row.try_get(14)?))
        };
        let (id, rec, written, now) = read(row).map_err(|f| self.failure(f))?;
        let result =
            |outcome, owner, item| OpResult { id: id.clone(), action: op.action(), outcome, owner, item };
        if written {
            self.decided();
            // Every fast statement sets the record's update time to its time.
            let item = rec.to_state(&id, rec.u);
            let owner = match op {
                ItemOp::Claim { owner, .. } => Some(owner.clone()),
                _ => None,
            };
            return Ok(Some(result(Outcome::Done, owner, item)));
        }
        // Not written: the record as the statement's snapshot held it, at the statement's time.
        // A refusal the rule gives there is the answer (the record was so when the statement
        // began: an item in progress, completed or dead stays so until a later time, and a
        // record kept at `now` was kept then); any other decision is the transaction's.
        let current = Some(rec).filter(|r| kept(r.x, now));
        let refusal = match decide(op, current.as_ref(), now) {
            Decision::Busy(s) => Outcome::Busy(s),
            Decision::NotOwner => Outcome::Refused(not_owner(group, &id, current.as_ref())),
            Decision::Take | Decision::Finish | Decision::Remove => return Ok(None),
        };
        self.decided();
        let item = current.as_ref().map_or_else(|| ItemState::unknown(&id), |r| r.to_state(&id, now));
        Ok(Some(result(refusal, None, item)))
    }
}
