//! The Dedup Queue's fast statements (see `fast`): an enqueue of one id without debounce, a read
//! of a shard without `maxDeliveries`, and an ack, each in one statement, in the cases it covers; any
//! other case returns no row and the call runs its transaction (`queue`).
//!
//! [`ENQUEUE`] decides what [`rules::queue::enqueue`] decides with `Debounce::Off` for an id that
//! is absent (no row and no dead letter: [`Place::Absent`], written as waiting at now + the
//! delay), waiting ([`Place::Waiting`]: a duplicate, its due time kept, nothing written) or a
//! dead letter ([`Place::Dead`]: it stays one, nothing written). Left to the transaction: a
//! claimed id (its enqueue-again time or its expired claim is written by the rules), a queue
//! whose shard count is not the caller's or not recorded yet (the transaction records it or
//! refuses with `ERR_SHARD_MISMATCH`), and an id another call inserted after the statement's
//! snapshot (its `INSERT … ON CONFLICT DO NOTHING` inserts nothing).
//!
//! The queue's count row is held `FOR SHARE` as the transaction's `enter` holds it, so a count
//! is never recorded again while this enqueue's id is uncommitted. The reads of the id's row and
//! dead letter are of the statement's snapshot: a duplicate or a dead letter is answered as it
//! was then (no other call can have made the answer wrong before the statement began, and one
//! that changes it after is ordered after this enqueue). A new row's due time is the statement's
//! own clock: no row of the id existed, so no change of it can be later than that time.
//!
//! [`READ`] claims a shard's due ids as the transaction's `claim` does (a read without
//! `maxDeliveries`), in the case where the queue's recorded shard count is the caller's and the
//! shard has no expired claim in the statement's snapshot (the transaction first returns those to
//! waiting, [`rules::queue::back_at`]); with no count recorded it answers as for an empty queue,
//! as the transaction does. Left to the transaction: a shard with an expired claim, a queue
//! recorded with another count (refused while it holds ids, else empty). It claims as the
//! transaction's `CLAIM` does: the due ids (`due <= now`, [`rules::queue::deliverable`]) oldest
//! first, rows other calls hold skipped (`FOR UPDATE SKIP LOCKED`: it never waits for a row lock,
//! so no row it writes was changed after its clock), each claimed until now + the visibility
//! ([`rules::queue::lease`]).
//!
//! [`ACK`] acks ids of a shard as the transaction's `settle` does, in the case where every id is
//! claimed by the owner given, its claim live and not enqueued again meanwhile ([`rules::queue::
//! settle`] answers `Done { requeued: false }` for each and writes their removal), the queue's
//! count is the caller's, the shard has no expired claim (the transaction returns those to
//! waiting after an ack), and the queue holds other ids than these (so no ack can leave it
//! empty: the transaction then drops its count row). It locks the ids' rows (`FOR UPDATE`, in id
//! order, the caller's ids without repeats) and checks them as locked; when all pass, it deletes
//! them and their delivery counts, else it writes nothing and the transaction decides every id.
//! A row it waited for was checked after the wait: another call's change of owner, deadline or
//! enqueue-again time fails the check. The time is read after the locks (`k` counts `l` first),
//! as the transaction reads it: an ack that waited past its claim's deadline is refused
//! (`Expired`); with the time read first (as before) it was acked
//! (`time_after_lock_tests.rs`).
//!
//! [`rules::queue::enqueue`]: crate::rules::queue::enqueue
//! [`rules::queue::settle`]: crate::rules::queue::settle
//! [`rules::queue::back_at`]: crate::rules::queue::back_at
//! [`rules::queue::deliverable`]: crate::rules::queue::deliverable
//! [`rules::queue::lease`]: crate::rules::queue::lease
//! [`Place::Absent`]: crate::rules::queue::Place::Absent
//! [`Place::Waiting`]: crate::rules::queue::Place::Waiting
//! [`Place::Dead`]: crate::rules::queue::Place::Dead

use tokio_postgres::types::ToSql;

use super::{text, Fail, Postgres};
use crate::error::Result;
use crate::queue::{EnqueueOutcome, SettleOutcome, ShardClaim, ShardRef};
use crate::rules::queue;

/// An enqueue of one id: `$1` ns, `$2` queue, `$3` shard, `$4` id, `$5` the caller's shard
/// count, `$6` the delay (ms). One row (outcome: 0 added, 1 duplicate, 2 dead; the due time, 0
/// for a dead letter), or none. Each CTE is `MATERIALIZED`: each runs once, whatever the plan.
pub(super) const ENQUEUE: &str = "WITH k AS MATERIALIZED (
      SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now),
    q AS MATERIALIZED (SELECT 1 FROM {s}.q_queues WHERE ns = $1 AND queue = $2 AND shards = $5 FOR SHARE),
    w AS MATERIALIZED (SELECT due, owner FROM {s}.q_ids WHERE ns = $1 AND queue = $2 AND shard = $3 AND id = $4),
    d AS MATERIALIZED (SELECT 1 FROM {s}.q_dead WHERE ns = $1 AND queue = $2 AND shard = $3 AND id = $4),
    i AS (INSERT INTO {s}.q_ids (ns, queue, shard, id, due)
      SELECT $1, $2, $3, $4, k.now + $6 FROM k, q
      WHERE NOT EXISTS (SELECT 1 FROM w) AND NOT EXISTS (SELECT 1 FROM d)
      ON CONFLICT (ns, queue, shard, id) DO NOTHING RETURNING due)
    SELECT 0::int2, due FROM i
    UNION ALL SELECT 1::int2, w.due FROM w, q WHERE w.owner IS NULL AND w.due IS NOT NULL
    UNION ALL SELECT 2::int2, 0::int8 FROM d, q WHERE NOT EXISTS (SELECT 1 FROM w)";

/// A read: `$1` ns, `$2` queue, `$3` shard, `$4` the caller's shard count, `$5` the limit, `$6`
/// the owner, `$7` the visibility (ms). Rows: one with a NULL id and the statement's time (the
/// statement decided: none without it), and one per id claimed (id, the due time it had).
pub(super) const READ: &str = "WITH k AS MATERIALIZED (
      SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now),
    q AS MATERIALIZED (SELECT shards FROM {s}.q_queues WHERE ns = $1 AND queue = $2),
    x AS MATERIALIZED (SELECT 1 FROM {s}.q_ids, k
      WHERE ns = $1 AND queue = $2 AND shard = $3 AND owner IS NOT NULL AND deadline <= k.now LIMIT 1),
    go AS MATERIALIZED (SELECT k.now FROM k WHERE (SELECT shards FROM q) = $4 AND NOT EXISTS (SELECT 1 FROM x)),
    c AS MATERIALIZED (SELECT ctid, id, due FROM {s}.q_ids
      WHERE ns = $1 AND queue = $2 AND shard = $3 AND owner IS NULL AND due <= (SELECT now FROM go)
      ORDER BY due, id LIMIT $5 FOR UPDATE SKIP LOCKED),
    u AS (UPDATE {s}.q_ids SET owner = $6, deadline = (SELECT now FROM go) + $7, due = NULL, first = NULL
      WHERE ctid = ANY(ARRAY(SELECT ctid FROM c)))
    SELECT NULL::bytea, k.now FROM k WHERE EXISTS (SELECT 1 FROM go) OR NOT EXISTS (SELECT 1 FROM q)
    UNION ALL SELECT id, due FROM c";

/// An ack: `$1` ns, `$2` queue, `$3` shard, `$4` the caller's shard count, `$5` the ids (sorted
/// by their bytes, without repeats), `$6` the owner. One row (the statement's time) when it acked
/// them all, else none and nothing written.
pub(super) const ACK: &str = "WITH l AS MATERIALIZED (SELECT r.ctid, r.owner, r.deadline, r.due
      FROM unnest($5::bytea[]) AS w(id),
      LATERAL (SELECT ctid, owner, deadline, due FROM {s}.q_ids
        WHERE ns = $1 AND queue = $2 AND shard = $3 AND id = w.id FOR UPDATE) r),
    k AS MATERIALIZED (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now
      FROM (SELECT count(*) FROM l) z),
    q AS MATERIALIZED (SELECT 1 FROM {s}.q_queues WHERE ns = $1 AND queue = $2 AND shards = $4),
    x AS MATERIALIZED (SELECT 1 FROM {s}.q_ids, k
      WHERE ns = $1 AND queue = $2 AND shard = $3 AND owner IS NOT NULL AND deadline <= k.now LIMIT 1),
    go AS MATERIALIZED (SELECT k.now FROM k
      WHERE EXISTS (SELECT 1 FROM q) AND NOT EXISTS (SELECT 1 FROM x)
        AND (SELECT count(*) FROM l WHERE owner = $6 AND deadline > k.now AND due IS NULL) = cardinality($5::bytea[])
        AND (SELECT count(*) FROM (SELECT 1 FROM {s}.q_ids WHERE ns = $1 AND queue = $2
          LIMIT cardinality($5::bytea[]) + 1) h) > cardinality($5::bytea[])),
    d AS (DELETE FROM {s}.q_ids WHERE ctid = ANY(ARRAY(SELECT ctid FROM l)) AND EXISTS (SELECT 1 FROM go)),
    n AS (DELETE FROM {s}.q_counts WHERE ctid = ANY(ARRAY(
      SELECT r.ctid FROM unnest($5::bytea[]) AS w(id),
        LATERAL (SELECT ctid FROM {s}.q_counts WHERE ns = $1 AND queue = $2 AND shard = $3 AND id = w.id OFFSET 0) r))
      AND EXISTS (SELECT 1 FROM go))
    SELECT now FROM go";

impl Postgres {
    /// An ack of `ids` (none repeated) by [`ACK`]; `None`: the transaction decides it.
    pub(super) async fn ack_fast(
        &self,
        at: ShardRef<'_>,
        owner: &str,
        ids: &[String],
    ) -> Result<Option<Vec<(SettleOutcome, Option<i64>)>>> {
        let mut sorted: Vec<&[u8]> = ids.iter().map(|id| id.as_bytes()).collect();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != ids.len() {
            return Ok(None);
        }
        let (ns, q, shard, shards) =
            (self.ns.as_bytes(), at.queue.as_bytes(), at.shard as i32, at.shards as i32);
        let params: [&(dyn ToSql + Sync); 6] = [&ns, &q, &shard, &shards, &sorted, &owner];
        let rows = self.one_statement(ACK, &params, None).await?;
        Ok((!rows.is_empty()).then(|| vec![(SettleOutcome::Done { requeued: false }, None); ids.len()]))
    }

    /// A read of up to `limit` (at least 1) ids of a shard by [`READ`] (without
    /// `maxDeliveries`); `None`: the transaction decides it.
    pub(super) async fn claim_fast(
        &self,
        at: ShardRef<'_>,
        owner: &str,
        limit: u64,
        visibility_ms: u64,
    ) -> Result<Option<ShardClaim>> {
        let (ns, q) = (self.ns.as_bytes(), at.queue.as_bytes());
        let (shard, shards, limit, visibility) =
            (at.shard as i32, at.shards as i32, limit as i64, visibility_ms as i64);
        let params: [&(dyn ToSql + Sync); 7] = [&ns, &q, &shard, &shards, &limit, &owner, &visibility];
        let rows = self.one_statement(READ, &params, None).await?;
        let read = || -> super::Sql<Option<ShardClaim>> {
            let (mut now, mut items) = (None, Vec::with_capacity(rows.len()));
            for r in &rows {
                match text(r, 0)? {
                    None => now = Some(r.try_get::<_, i64>(1)?),
                    Some(id) => items.push((id, r.try_get::<_, i64>(1)?)),
                }
            }
            let Some(now) = now else {
                return match items.is_empty() {
                    true => Ok(None),
                    false => Err(Fail::Corrupt("the fast read claimed ids without deciding".into())),
                };
            };
            items.sort_unstable_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
            Ok(Some(ShardClaim { visible_until: queue::lease(now, visibility_ms), items }))
        };
        read().map_err(|f| self.failure(f))
    }

    /// An enqueue of `id` (without debounce) by [`ENQUEUE`]; `None`: the transaction decides it.
    pub(super) async fn enqueue_fast(
        &self,
        at: ShardRef<'_>,
        id: &str,
        delay_ms: u64,
    ) -> Result<Option<(EnqueueOutcome, i64)>> {
        let (ns, q, id) = (self.ns.as_bytes(), at.queue.as_bytes(), id.as_bytes());
        let (shard, shards, delay) = (at.shard as i32, at.shards as i32, delay_ms as i64);
        let params: [&(dyn ToSql + Sync); 6] = [&ns, &q, &shard, &id, &shards, &delay];
        let rows = self.one_statement(ENQUEUE, &params, None).await?;
        let Some(row) = rows.first() else { return Ok(None) };
        let read = |row: &tokio_postgres::Row| -> super::Sql<(EnqueueOutcome, i64)> {
            let outcome = match row.try_get::<_, i16>(0)? {
                0 => EnqueueOutcome::Added,
                1 => EnqueueOutcome::Duplicate,
                2 => EnqueueOutcome::Dead,
                n => return Err(Fail::Corrupt(format!("the fast enqueue's outcome {n}"))),
            };
            Ok((outcome, row.try_get(1)?))
        };
        read(row).map(Some).map_err(|f| self.failure(f))
    }
}
