//! Dedup Queue on PostgreSQL: a storage adapter around [`rules::queue`]. One row of `q_ids` per
//! id of a shard, waiting (`owner` NULL: `due`, and `first`, the first-enqueue time a capped
//! debounce recorded) or claimed (`owner`, `deadline`: the visibility lease; `due` and `first`:
//! those of an enqueue made while it was claimed, the rules' `again`). Each call is one
//! transaction on one shard, whatever the number of ids (arrays bound as parameters, `unnest`):
//!
//! - enqueue: the queue's shard count checked (see [`enter`]); the rows of its ids locked in id
//!   order (`FOR UPDATE`, so two enqueues over the same ids never deadlock); the database's time;
//!   each id decided in the caller's order ([`rules::queue::enqueue`], a repeated id judged after
//!   the write before); at most one `INSERT` and one `UPDATE` of them.
//! - claim (a read of one shard): the count checked; the time; the shard's expired claims
//!   returned to waiting ([`reap`], `FOR UPDATE SKIP LOCKED`); then one statement claims the
//!   shard's due ids, oldest first, `FOR UPDATE SKIP LOCKED`: two readers of a shard never wait
//!   for each other and never take the same id, and an id an enqueue or an ack holds is left for
//!   the next read.
//! - ack / release: the rows locked in id order, [`rules::queue::settle`] per id, one `DELETE`
//!   and one `UPDATE`; then the shard's expired claims reaped (as on the other stores).
//! - peek, size: the count checked, expired claims reaped, one read.
//!
//! - dead letters ([`rules::queue::deliver`]): a read with `max_deliveries` claims its rows
//!   `FOR UPDATE SKIP LOCKED` by due time in rounds, reads their counts in `q_counts`, and per
//!   id claims it (its count written) or moves it to `q_dead` (its row deleted); an ack deletes
//!   the counts of the ids it acked. An enqueue looks in `q_dead` only for ids without a row.
//!
//! The shard count: a row of `q_queues` per queue holding ids, written by the enqueue that
//! finds none (or, when its ids are all gone, by the next enqueue with another count). Every
//! enqueue holds it `FOR SHARE` (enqueues of all shards run in parallel) and another count is
//! recorded only under `FOR UPDATE` (so after every enqueue under way ended) and only when no id
//! is left. An ack that leaves the queue without ids drops the row when no enqueue holds it; a
//! row left behind (two acks emptying the queue at once each saw the other's id) is harmless: a
//! count differs ([`shard_mismatch`]) only while the queue holds ids, and the catalog lists only
//! queues that do.
//!
//! [`rules::queue`]: crate::rules::queue
//! [`rules::queue::enqueue`]: crate::rules::queue::enqueue
//! [`rules::queue::settle`]: crate::rules::queue::settle
//! [`rules::queue::deliver`]: crate::rules::queue::deliver

use std::collections::HashMap;

use super::{text, transaction, Ctx, Fail, Postgres, Sql};
use crate::backend::BoxFuture;
use crate::queue::{
    shard_mismatch, Debounce, EnqueueOutcome, QueueBackend, SettleAction, SettleOutcome, ShardClaim,
    ShardDead, ShardRef, ShardSize,
};
use crate::rules::queue::{self, Deliver, EnqueueWrite, Place};

/// The queue's recorded shard count, and the same held `FOR SHARE` / `FOR UPDATE`.
pub(super) const COUNT: &str = "SELECT shards FROM {s}.q_queues WHERE ns = $1 AND queue = $2";
const COUNT_SHARED: &str = "SELECT shards FROM {s}.q_queues WHERE ns = $1 AND queue = $2 FOR SHARE";
const COUNT_LOCKED: &str = "SELECT shards FROM {s}.q_queues WHERE ns = $1 AND queue = $2 FOR UPDATE";
const COUNT_LOCKED_SKIP: &str =
    "SELECT shards FROM {s}.q_queues WHERE ns = $1 AND queue = $2 FOR UPDATE SKIP LOCKED";
const RECORD: &str = "INSERT INTO {s}.q_queues (ns, queue, shards) VALUES ($1, $2, $3)
    ON CONFLICT (ns, queue) DO NOTHING";
const RERECORD: &str = "UPDATE {s}.q_queues SET shards = $3 WHERE ns = $1 AND queue = $2";
/// Whether the queue holds any id, dead letters included (by the primary keys' `(ns, queue)` prefix).
pub(super) const HOLDS_IDS: &str = "SELECT EXISTS (SELECT 1 FROM {s}.q_ids WHERE ns = $1 AND queue = $2)
    OR EXISTS (SELECT 1 FROM {s}.q_dead WHERE ns = $1 AND queue = $2)";
/// The count's row dropped when the queue holds no id (run while holding it `FOR UPDATE`).
pub(super) const DROP: &str = "DELETE FROM {s}.q_queues WHERE ns = $1 AND queue = $2
    AND NOT EXISTS (SELECT 1 FROM {s}.q_ids WHERE ns = $1 AND queue = $2)
    AND NOT EXISTS (SELECT 1 FROM {s}.q_dead WHERE ns = $1 AND queue = $2)";

/// The rows of ids `$4` of a shard (sorted by their bytes, without repeats: the caller's work),
/// locked in that order (columns: id, due, first, owner, deadline); each id looked up by the
/// primary key, never by `id = ANY($4)` (as the tracker's `LOAD_LOCKED`: `docs/postgres.md`
/// "Plans that do not depend on the statistics").
pub(super) const LOAD_LOCKED: &str = "SELECT q.id, q.due, q.first, q.owner, q.deadline
    FROM unnest($4::bytea[]) AS w(id),
    LATERAL (SELECT id, due, first, owner, deadline FROM {s}.q_ids
      WHERE ns = $1 AND queue = $2 AND shard = $3 AND id = w.id FOR UPDATE) q";
const INSERT: &str = "INSERT INTO {s}.q_ids (ns, queue, shard, id, due, first, owner, deadline)
    SELECT $1, $2, $3, * FROM unnest($4::bytea[], $5::int8[], $6::int8[], $7::text[], $8::int8[])
    ON CONFLICT (ns, queue, shard, id) DO NOTHING";
pub(super) const UPDATE: &str = "UPDATE {s}.q_ids SET due = v.due, first = v.first, owner = v.owner, deadline = v.deadline
    FROM unnest($4::bytea[], $5::int8[], $6::int8[], $7::text[], $8::int8[]) AS v(id, due, first, owner, deadline)
    WHERE q_ids.ns = $1 AND q_ids.queue = $2 AND q_ids.shard = $3 AND q_ids.id = v.id";
pub(super) const DELETE: &str = "DELETE FROM {s}.q_ids WHERE ctid = ANY(ARRAY(
    SELECT q.ctid FROM unnest($4::bytea[]) AS w(id),
      LATERAL (SELECT ctid FROM {s}.q_ids WHERE ns = $1 AND queue = $2 AND shard = $3 AND id = w.id OFFSET 0) q))";

/// The shard's claims whose deadline is `$4` or before (no longer live), rows other calls hold
/// skipped (columns: id, deadline, due, first).
pub(super) const EXPIRED: &str = "SELECT id, deadline, due, first FROM {s}.q_ids
    WHERE ns = $1 AND queue = $2 AND shard = $3 AND owner IS NOT NULL AND deadline <= $4
    ORDER BY deadline, id FOR UPDATE SKIP LOCKED";
pub(super) const BACK: &str = "UPDATE {s}.q_ids SET due = v.due, owner = NULL, deadline = NULL
    FROM unnest($4::bytea[], $5::int8[]) AS v(id, due)
    WHERE q_ids.ns = $1 AND q_ids.queue = $2 AND q_ids.shard = $3 AND q_ids.id = v.id";
/// Claims up to `$5` waiting ids due by `$4`, oldest first, for owner `$6` until `$7`, skipping
/// rows other calls hold; returns each with the due time it had. The ids are chosen once, in a
/// materialized CTE (a subquery joined to the UPDATE may be run again by the plan, and with SKIP
/// LOCKED each run can lock other rows), and updated by the rows' addresses (`ctid = ANY`: a TID
/// scan, whatever the plan guesses of the CTE's size; `id = ANY` let a generic plan walk the
/// shard, see `docs/postgres.md` "Plans that do not depend on the statistics").
pub(super) const CLAIM: &str = "WITH c AS MATERIALIZED (
      SELECT ctid, id, due FROM {s}.q_ids
      WHERE ns = $1 AND queue = $2 AND shard = $3 AND owner IS NULL AND due <= $4
      ORDER BY due, id LIMIT $5 FOR UPDATE SKIP LOCKED),
    u AS (UPDATE {s}.q_ids SET owner = $6, deadline = $7, due = NULL, first = NULL
      WHERE ctid = ANY(ARRAY(SELECT ctid FROM c)))
    SELECT id, due FROM c";
/// Up to `$5` waiting ids due by `$4`, oldest first, locked, rows other calls hold skipped (a
/// counting read decides each before claiming it).
pub(super) const DUE_LOCKED: &str = "SELECT id, due FROM {s}.q_ids
    WHERE ns = $1 AND queue = $2 AND shard = $3 AND owner IS NULL AND due <= $4
    ORDER BY due, id LIMIT $5 FOR UPDATE SKIP LOCKED";
/// The delivery counts of ids `$4`. Here and below, ids `$4` are looked up one by one by the
/// primary key (`LATERAL`), never by `id = ANY($4)`, as [`LOAD_LOCKED`].
pub(super) const COUNTS: &str = "SELECT q.id, q.n FROM unnest($4::bytea[]) AS w(id),
    LATERAL (SELECT id, n FROM {s}.q_counts WHERE ns = $1 AND queue = $2 AND shard = $3 AND id = w.id OFFSET 0) q";
const COUNTS_SET: &str = "INSERT INTO {s}.q_counts (ns, queue, shard, id, n)
    SELECT $1, $2, $3, * FROM unnest($4::bytea[], $5::int8[])
    ON CONFLICT (ns, queue, shard, id) DO UPDATE SET n = excluded.n";
pub(super) const COUNTS_DROP: &str = "DELETE FROM {s}.q_counts WHERE ctid = ANY(ARRAY(
    SELECT q.ctid FROM unnest($4::bytea[]) AS w(id),
      LATERAL (SELECT ctid FROM {s}.q_counts WHERE ns = $1 AND queue = $2 AND shard = $3 AND id = w.id OFFSET 0) q))";
const CLAIM_IDS: &str = "UPDATE {s}.q_ids SET owner = $5, deadline = $6, due = NULL, first = NULL
    WHERE ctid = ANY(ARRAY(SELECT q.ctid FROM unnest($4::bytea[]) AS w(id),
      LATERAL (SELECT ctid FROM {s}.q_ids WHERE ns = $1 AND queue = $2 AND shard = $3 AND id = w.id OFFSET 0) q))";
const DEAD_ADD: &str = "INSERT INTO {s}.q_dead (ns, queue, shard, id, died, n)
    SELECT $1, $2, $3, v.id, $6, v.n FROM unnest($4::bytea[], $5::int8[]) AS v(id, n)";
/// Which of ids `$4` are dead letters.
pub(super) const DEAD_OF: &str = "SELECT q.id FROM unnest($4::bytea[]) AS w(id),
    LATERAL (SELECT id FROM {s}.q_dead WHERE ns = $1 AND queue = $2 AND shard = $3 AND id = w.id OFFSET 0) q";
/// The shard's first `$4` dead letters by the time they died.
pub(super) const DEAD_LIST: &str = "SELECT id, n, died FROM {s}.q_dead
    WHERE ns = $1 AND queue = $2 AND shard = $3 ORDER BY died, id LIMIT $4";
pub(super) const DEAD_COUNT: &str =
    "SELECT count(*) FROM {s}.q_dead WHERE ns = $1 AND queue = $2 AND shard = $3";
const DEAD_TAKE: &str = "DELETE FROM {s}.q_dead WHERE ctid = ANY(ARRAY(
    SELECT q.ctid FROM unnest($4::bytea[]) AS w(id),
      LATERAL (SELECT ctid FROM {s}.q_dead WHERE ns = $1 AND queue = $2 AND shard = $3 AND id = w.id OFFSET 0) q))
    RETURNING id";
const REQUEUE_WAIT: &str = "INSERT INTO {s}.q_ids (ns, queue, shard, id, due)
    SELECT $1, $2, $3, v, $5 FROM unnest($4::bytea[]) AS v ON CONFLICT (ns, queue, shard, id) DO NOTHING";
/// The shard's first `$4` waiting ids by due time.
pub(super) const PEEK: &str = "SELECT id, due FROM {s}.q_ids
    WHERE ns = $1 AND queue = $2 AND shard = $3 AND owner IS NULL ORDER BY due, id LIMIT $4";
/// The shard's counts: waiting, of those due by `$4`, claimed, of those enqueued again.
pub(super) const SIZE: &str = "SELECT count(*) FILTER (WHERE owner IS NULL),
      count(*) FILTER (WHERE owner IS NULL AND due <= $4), count(*) FILTER (WHERE owner IS NOT NULL),
      count(*) FILTER (WHERE owner IS NOT NULL AND due IS NOT NULL)
    FROM {s}.q_ids WHERE ns = $1 AND queue = $2 AND shard = $3";

/// One id of a shard as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stored {
    Absent,
    /// A dead letter (no row in `q_ids`; a row in `q_dead`).
    Dead,
    /// Due at `due`; `first`: the pending enqueue's first-enqueue time (capped debounces only).
    Waiting {
        due: i64,
        first: Option<i64>,
    },
    /// Claimed by `owner` until `deadline`; `again`/`first`: an enqueue made meanwhile.
    Claimed {
        deadline: i64,
        owner: String,
        again: Option<i64>,
        first: Option<i64>,
    },
}

impl Stored {
    /// Where the id is, as the rules read it, and its pending enqueue's first-enqueue time.
    fn place(&self) -> (Place<'_>, Option<i64>) {
        match self {
            Stored::Absent => (Place::Absent, None),
            Stored::Dead => (Place::Dead, None),
            Stored::Waiting { due, first } => (Place::Waiting(*due), *first),
            Stored::Claimed { deadline, owner, again, first } => {
                (Place::Claimed(queue::Claim { deadline: *deadline, owner, again: *again }), *first)
            }
        }
    }

    /// The claim, when claimed.
    fn claim(&self) -> Option<queue::Claim<'_>> {
        match self.place().0 {
            Place::Claimed(c) => Some(c),
            _ => None,
        }
    }
}

/// The ids of a call, locked, at the database's time: each one's row as loaded (whether it has
/// one) and as the call left it.
struct Locked {
    slots: HashMap<String, (bool, Stored)>,
    now: i64,
}

/// The shard a transaction works on.
struct Shard<'c, 't, 'x> {
    c: &'c Ctx<'t, 'x>,
    at: ShardRef<'c>,
    shard: i32,
}

impl Shard<'_, '_, '_> {
    fn queue(&self) -> &[u8] {
        self.at.queue.as_bytes()
    }

    /// Locks the rows of `ids` (in id order) and reads the time after the lock, in one round trip
    /// (see `clock`).
    async fn load(&self, ids: &[String]) -> Sql<Locked> {
        let mut wanted: Vec<&[u8]> = ids.iter().map(|id| id.as_bytes()).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let (rows, now) =
            self.c.query_then_now(LOAD_LOCKED, &[&self.c.ns(), &self.queue(), &self.shard, &wanted]).await?;
        let mut slots = HashMap::with_capacity(wanted.len());
        for r in &rows {
            let id = text(r, 0)?.ok_or_else(|| Fail::Corrupt("a queued id that is NULL".into()))?;
            let (due, first): (Option<i64>, Option<i64>) = (r.try_get(1)?, r.try_get(2)?);
            let (owner, deadline): (Option<String>, Option<i64>) = (r.try_get(3)?, r.try_get(4)?);
            let stored = match (owner, deadline, due) {
                (Some(owner), Some(deadline), again) => Stored::Claimed { deadline, owner, again, first },
                (None, None, Some(due)) => Stored::Waiting { due, first },
                _ => return Err(Fail::Corrupt(format!("queued id {id:?}: neither waiting nor claimed"))),
            };
            slots.insert(id, (true, stored));
        }
        for id in ids {
            slots.entry(id.clone()).or_insert((false, Stored::Absent));
        }
        Ok(Locked { slots, now })
    }

    /// Marks the absent ids of `slots` that are dead letters (one read, only when some are absent).
    async fn find_dead(&self, slots: &mut HashMap<String, (bool, Stored)>) -> Sql<()> {
        let absent: Vec<&[u8]> =
            slots.iter().filter(|(_, (_, s))| *s == Stored::Absent).map(|(id, _)| id.as_bytes()).collect();
        if absent.is_empty() {
            return Ok(());
        }
        let rows = self.c.query(DEAD_OF, &[&self.c.ns(), &self.queue(), &self.shard, &absent]).await?;
        for r in &rows {
            let id = text(r, 0)?.ok_or_else(|| Fail::Corrupt("a dead letter that is NULL".into()))?;
            if let Some(slot) = slots.get_mut(&id) {
                slot.1 = Stored::Dead;
            }
        }
        Ok(())
    }

    /// Writes the slots that differ from what was loaded: one `INSERT` of the new rows (a row
    /// another call inserted first makes the transaction run again), one `UPDATE` of the
    /// changed ones, one `DELETE` of the removed ones. Returns whether any row was deleted.
    async fn save(&self, changed: Vec<(String, bool, Stored)>) -> Sql<bool> {
        let (mut inserts, mut updates, mut deletes) = (Columns::default(), Columns::default(), Vec::new());
        for (id, had_row, stored) in &changed {
            match (stored, had_row) {
                (Stored::Absent, true) => deletes.push(id.as_bytes()),
                (Stored::Absent, false) | (Stored::Dead, _) => {}
                (s, false) => inserts.push(id, s),
                (s, true) => updates.push(id, s),
            }
        }
        let (ns, q) = (self.c.ns(), self.queue());
        if !inserts.ids.is_empty() {
            let n = self.c.execute(INSERT, &inserts.params(&ns, &q, &self.shard)).await?;
            if n != inserts.ids.len() as u64 {
                return Err(Fail::Race);
            }
        }
        if !updates.ids.is_empty() {
            self.c.execute(UPDATE, &updates.params(&ns, &q, &self.shard)).await?;
        }
        if !deletes.is_empty() {
            self.c.execute(DELETE, &[&ns, &q, &self.shard, &deletes]).await?;
        }
        Ok(!deletes.is_empty())
    }

    /// Returns the shard's expired claims to waiting, due at [`queue::back_at`] (rows other calls
    /// hold are left to them: an enqueue or an ack of an expired claim decides it by the rules).
    async fn reap(&self, now: i64) -> Sql<()> {
        let (ns, q) = (self.c.ns(), self.queue());
        let rows = self.c.query(EXPIRED, &[&ns, &q, &self.shard, &now]).await?;
        if rows.is_empty() {
            return Ok(());
        }
        let (mut ids, mut dues) = (Vec::with_capacity(rows.len()), Vec::with_capacity(rows.len()));
        for r in &rows {
            let deadline: i64 = r.try_get(1)?;
            debug_assert!(!queue::live(deadline, now));
            ids.push(r.try_get::<_, Vec<u8>>(0)?);
            dues.push(queue::back_at(deadline, r.try_get(2)?));
        }
        self.c.execute(BACK, &[&ns, &q, &self.shard, &ids, &dues]).await?;
        Ok(())
    }
}

/// Rows as arrays, one per column, to bind to an `unnest`.
#[derive(Default)]
struct Columns<'r> {
    ids: Vec<&'r [u8]>,
    due: Vec<Option<i64>>,
    first: Vec<Option<i64>>,
    owner: Vec<Option<&'r str>>,
    deadline: Vec<Option<i64>>,
}

impl<'r> Columns<'r> {
    fn push(&mut self, id: &'r str, s: &'r Stored) {
        let (due, first, owner, deadline) = match s {
            Stored::Absent | Stored::Dead => {
                unreachable!("an absent id is deleted, not written; a dead one kept")
            }
            Stored::Waiting { due, first } => (Some(*due), *first, None, None),
            Stored::Claimed { deadline, owner, again, first } => {
                (*again, *first, Some(owner.as_str()), Some(*deadline))
            }
        };
        self.ids.push(id.as_bytes());
        self.due.push(due);
        self.first.push(first);
        self.owner.push(owner);
        self.deadline.push(deadline);
    }

    fn params<'p>(
        &'p self,
        ns: &'p &'p [u8],
        q: &'p &'p [u8],
        shard: &'p i32,
    ) -> [&'p (dyn tokio_postgres::types::ToSql + Sync); 8] {
        [ns, q, shard, &self.ids, &self.due, &self.first, &self.owner, &self.deadline]
    }
}

/// What the shard-count check lets a call do.
#[derive(PartialEq, Eq)]
enum Entry {
    /// Work on the shard.
    Go,
    /// The queue holds no id (no count recorded, or one recorded by ids since gone): a call that
    /// only reads or settles answers as for an empty shard, without reading it (an enqueue of
    /// another count may be under way, and its ids are not this caller's to see).
    Empty,
}

/// Checks the caller's shard count against the queue's (see the module's notes). An enqueue
/// (`enqueue`) holds the count `FOR SHARE`, records it when there is none, and records its own
/// when the queue's ids are all gone; other calls read it.
async fn enter(c: &Ctx<'_, '_>, at: ShardRef<'_>, enqueue: bool) -> Sql<Entry> {
    let (ns, q, mine) = (c.ns(), at.queue.as_bytes(), at.shards as i32);
    let count = |r: Option<tokio_postgres::Row>| r.map(|r| r.try_get::<_, i32>(0)).transpose();
    let mismatch = |stored: i32| Fail::Coded(shard_mismatch(at, stored as u64));
    let holds_ids = async || -> Sql<bool> {
        Ok(c.query_opt(HOLDS_IDS, &[&ns, &q]).await?.map_or(Ok(false), |r| r.try_get(0))?)
    };
    if !enqueue {
        return match count(c.query_opt(COUNT, &[&ns, &q]).await?)? {
            Some(n) if n == mine => Ok(Entry::Go),
            Some(n) if holds_ids().await? => Err(mismatch(n)),
            _ => Ok(Entry::Empty),
        };
    }
    match count(c.query_opt(COUNT_SHARED, &[&ns, &q]).await?)? {
        Some(n) if n == mine => Ok(Entry::Go),
        Some(n) if holds_ids().await? => Err(mismatch(n)),
        Some(_) => {
            // Every enqueue under way holds the row FOR SHARE: once locked, their ids are
            // committed (and seen) or they wait for this one.
            match count(c.query_opt(COUNT_LOCKED, &[&ns, &q]).await?)? {
                Some(n) if n == mine => Ok(Entry::Go),
                Some(n) if holds_ids().await? => Err(mismatch(n)),
                Some(_) => {
                    c.execute(RERECORD, &[&ns, &q, &mine]).await?;
                    Ok(Entry::Go)
                }
                // Dropped meanwhile: run again.
                None => Err(Fail::Race),
            }
        }
        None if c.execute(RECORD, &[&ns, &q, &mine]).await? == 1 => Ok(Entry::Go),
        None => Err(Fail::Race),
    }
}

/// [`enter`] for a call that does not enqueue, and the database's time, sent together (the
/// driver pipelines them: one round trip; nothing is locked before the clock is read).
async fn entered_at(c: &Ctx<'_, '_>, at: ShardRef<'_>) -> Sql<(Entry, i64)> {
    futures_util::future::try_join(enter(c, at, false), c.now()).await
}

/// After an ack removed ids: when the queue looks empty, its count's row is dropped, unless an
/// enqueue holds it (then that enqueue's ids keep the queue in use).
async fn leave(c: &Ctx<'_, '_>, at: ShardRef<'_>) -> Sql<()> {
    let (ns, q) = (c.ns(), at.queue.as_bytes());
    let holds: bool = c.query_opt(HOLDS_IDS, &[&ns, &q]).await?.map_or(Ok(true), |r| r.try_get(0))?;
    if !holds && c.query_opt(COUNT_LOCKED_SKIP, &[&ns, &q]).await?.is_some() {
        c.execute(DROP, &[&ns, &q]).await?;
    }
    Ok(())
}

async fn enqueue(
    c: &Ctx<'_, '_>,
    at: ShardRef<'_>,
    ids: &[String],
    delay_ms: u64,
    debounce: Debounce,
) -> Sql<Vec<(EnqueueOutcome, i64)>> {
    enter(c, at, true).await?;
    let s = Shard { c, at, shard: at.shard as i32 };
    let Locked { mut slots, now } = s.load(ids).await?;
    s.find_dead(&mut slots).await?;
    let due = queue::due(now, delay_ms);
    let mut out = Vec::with_capacity(ids.len());
    let mut changed: Vec<&str> = Vec::new();
    for id in ids {
        let (_, stored) = slots.get_mut(id.as_str()).expect("every id was loaded");
        let (place, first) = stored.place();
        let d = queue::enqueue(place, debounce, first, due, now);
        match d.write {
            EnqueueWrite::Keep => {}
            // An expired claim goes, with its enqueue-again time.
            EnqueueWrite::Wait(t) => *stored = Stored::Waiting { due: t, first: d.first },
            EnqueueWrite::Again(t) => {
                if let Stored::Claimed { again, first, .. } = stored {
                    (*again, *first) = (Some(t), d.first);
                }
            }
        }
        if d.write != EnqueueWrite::Keep {
            changed.push(id);
        }
        out.push((d.outcome, d.due));
    }
    s.save(take_changed(&mut slots, changed)).await?;
    Ok(out)
}

/// The slots of `ids` (each once), with whether each had a row.
fn take_changed(slots: &mut HashMap<String, (bool, Stored)>, ids: Vec<&str>) -> Vec<(String, bool, Stored)> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some((had_row, stored)) = slots.remove(id) {
            out.push((id.to_string(), had_row, stored));
        }
    }
    out
}

async fn claim(
    c: &Ctx<'_, '_>,
    at: ShardRef<'_>,
    owner: &str,
    limit: u64,
    visibility_ms: u64,
    max_deliveries: Option<u64>,
) -> Sql<ShardClaim> {
    let (entry, now) = entered_at(c, at).await?;
    let deadline = queue::lease(now, visibility_ms);
    if entry == Entry::Empty || limit == 0 {
        return Ok(ShardClaim { visible_until: deadline, items: Vec::new() });
    }
    let s = Shard { c, at, shard: at.shard as i32 };
    s.reap(now).await?;
    if let Some(max) = max_deliveries {
        return claim_counted(&s, owner, limit, max, now, deadline).await;
    }
    let (ns, q) = (c.ns(), s.queue());
    let rows = c.query(CLAIM, &[&ns, &q, &s.shard, &now, &(limit as i64), &owner, &deadline]).await?;
    let mut items = Vec::with_capacity(rows.len());
    for r in &rows {
        let id = text(r, 0)?.ok_or_else(|| Fail::Corrupt("a queued id that is NULL".into()))?;
        let due: i64 = r.try_get(1)?;
        debug_assert!(queue::deliverable(due, now));
        items.push((id, due));
    }
    items.sort_unstable_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    Ok(ShardClaim { visible_until: deadline, items })
}

/// A read with `max_deliveries` (see the module's notes): rounds of due rows, each decided by
/// [`queue::deliver`], until the batch is full, the shard has no due id, or `limit` ids died.
async fn claim_counted(
    s: &Shard<'_, '_, '_>,
    owner: &str,
    limit: u64,
    max: u64,
    now: i64,
    deadline: i64,
) -> Sql<ShardClaim> {
    let (c, ns, q) = (s.c, s.c.ns(), s.queue());
    let (mut items, mut died) = (Vec::new(), 0u64);
    while (items.len() as u64) < limit && died < limit {
        let ask = (limit - items.len() as u64).min(limit - died);
        let rows = c.query(DUE_LOCKED, &[&ns, &q, &s.shard, &now, &(ask as i64)]).await?;
        let mut due = Vec::with_capacity(rows.len());
        for r in &rows {
            let id = text(r, 0)?.ok_or_else(|| Fail::Corrupt("a queued id that is NULL".into()))?;
            due.push((id, r.try_get::<_, i64>(1)?));
        }
        let keys: Vec<&[u8]> = due.iter().map(|(id, _)| id.as_bytes()).collect();
        let mut counts: HashMap<String, i64> = HashMap::new();
        for r in &c.query(COUNTS, &[&ns, &q, &s.shard, &keys]).await? {
            let id = text(r, 0)?.ok_or_else(|| Fail::Corrupt("a counted id that is NULL".into()))?;
            counts.insert(id, r.try_get(1)?);
        }
        let (mut take, mut take_n, mut dead, mut dead_n) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (id, due_at) in &due {
            let count = counts.get(id).copied().unwrap_or(0).max(0) as u64;
            match queue::deliver(count, max) {
                Deliver::Claim(n) => {
                    take.push(id.as_bytes());
                    take_n.push(n as i64);
                    items.push((id.clone(), *due_at));
                }
                Deliver::Dead => {
                    dead.push(id.as_bytes());
                    dead_n.push(count as i64);
                    died += 1;
                }
            }
        }
        if !take.is_empty() {
            c.execute(CLAIM_IDS, &[&ns, &q, &s.shard, &take, &owner, &deadline]).await?;
            c.execute(COUNTS_SET, &[&ns, &q, &s.shard, &take, &take_n]).await?;
        }
        if !dead.is_empty() {
            c.execute(DELETE, &[&ns, &q, &s.shard, &dead]).await?;
            c.execute(COUNTS_DROP, &[&ns, &q, &s.shard, &dead]).await?;
            c.execute(DEAD_ADD, &[&ns, &q, &s.shard, &dead, &dead_n, &now]).await?;
        }
        if (due.len() as u64) < ask {
            break;
        }
    }
    Ok(ShardClaim { visible_until: deadline, items })
}

async fn settle(
    c: &Ctx<'_, '_>,
    at: ShardRef<'_>,
    owner: &str,
    ids: &[String],
    action: SettleAction,
) -> Sql<Vec<(SettleOutcome, Option<i64>)>> {
    if enter(c, at, false).await? == Entry::Empty {
        return Ok(ids.iter().map(|_| (SettleOutcome::NotClaimed, None)).collect());
    }
    let s = Shard { c, at, shard: at.shard as i32 };
    let Locked { mut slots, now } = s.load(ids).await?;
    let mut out = Vec::with_capacity(ids.len());
    let mut changed: Vec<&str> = Vec::new();
    for id in ids {
        let (_, stored) = slots.get_mut(id.as_str()).expect("every id was loaded");
        let (outcome, due) = queue::settle(stored.claim(), owner, action, now);
        if let SettleOutcome::Done { .. } = outcome {
            // The first-enqueue time of an enqueue made while claimed goes with it.
            let first = match stored {
                Stored::Claimed { first, .. } => *first,
                _ => None,
            };
            *stored = match due {
                Some(due) => Stored::Waiting { due, first },
                None => Stored::Absent,
            };
            changed.push(id);
        }
        out.push((outcome, due));
    }
    if !queue::keeps_count(action) && !changed.is_empty() {
        let acked: Vec<&[u8]> = changed.iter().map(|id| id.as_bytes()).collect();
        c.execute(COUNTS_DROP, &[&c.ns(), &s.queue(), &s.shard, &acked]).await?;
    }
    let emptied = s.save(take_changed(&mut slots, changed)).await?;
    // Then the shard's expired claims go back to waiting, as on the other stores (an expired
    // claim the call was refused, e.g. acked by another owner, among them; found by the model test).
    s.reap(now).await?;
    if emptied {
        leave(c, at).await?;
    }
    Ok(out)
}

async fn peek(c: &Ctx<'_, '_>, at: ShardRef<'_>, limit: u64) -> Sql<(i64, Vec<(String, i64)>)> {
    let (entry, now) = entered_at(c, at).await?;
    if entry == Entry::Empty || limit == 0 {
        return Ok((now, Vec::new()));
    }
    let s = Shard { c, at, shard: at.shard as i32 };
    s.reap(now).await?;
    let rows = c.query(PEEK, &[&c.ns(), &s.queue(), &s.shard, &(limit as i64)]).await?;
    let items = rows
        .iter()
        .map(|r| {
            let id = text(r, 0)?.ok_or_else(|| Fail::Corrupt("a queued id that is NULL".into()))?;
            Ok((id, r.try_get(1)?))
        })
        .collect::<Sql<Vec<_>>>()?;
    Ok((now, items))
}

async fn size(c: &Ctx<'_, '_>, at: ShardRef<'_>) -> Sql<ShardSize> {
    let mut size = ShardSize { shard: at.shard, ..Default::default() };
    let (entry, now) = entered_at(c, at).await?;
    if entry == Entry::Empty {
        return Ok(size);
    }
    let s = Shard { c, at, shard: at.shard as i32 };
    s.reap(now).await?;
    let r = c.query_opt(SIZE, &[&c.ns(), &s.queue(), &s.shard, &now]).await?;
    let r = r.ok_or_else(|| Fail::Corrupt("a count read no row".into()))?;
    let n = |i: usize| r.try_get::<_, i64>(i).map(|v| v as u64);
    (size.waiting, size.due, size.claimed, size.again) = (n(0)?, n(1)?, n(2)?, n(3)?);
    let d = c.query_opt(DEAD_COUNT, &[&c.ns(), &s.queue(), &s.shard]).await?;
    size.dead = d.map_or(Ok(0), |r| r.try_get::<_, i64>(0))? as u64;
    Ok(size)
}

async fn dead_letters(c: &Ctx<'_, '_>, at: ShardRef<'_>, limit: u64) -> Sql<Vec<ShardDead>> {
    if enter(c, at, false).await? == Entry::Empty {
        return Ok(Vec::new());
    }
    let q = at.queue.as_bytes();
    let rows = c.query(DEAD_LIST, &[&c.ns(), &q, &(at.shard as i32), &(limit as i64)]).await?;
    rows.iter()
        .map(|r| {
            Ok(ShardDead {
                id: text(r, 0)?.ok_or_else(|| Fail::Corrupt("a dead letter that is NULL".into()))?,
                deliveries: r.try_get::<_, i64>(1)?.max(0) as u64,
                died_at: r.try_get(2)?,
            })
        })
        .collect()
}

async fn requeue_dead(c: &Ctx<'_, '_>, at: ShardRef<'_>, ids: &[String]) -> Sql<Vec<Option<i64>>> {
    let (entry, now) = entered_at(c, at).await?;
    if entry == Entry::Empty {
        return Ok(ids.iter().map(|_| None).collect());
    }
    let (ns, q, shard) = (c.ns(), at.queue.as_bytes(), at.shard as i32);
    let keys: Vec<&[u8]> = ids.iter().map(|id| id.as_bytes()).collect();
    let mut gone = std::collections::HashSet::new();
    for r in &c.query(DEAD_TAKE, &[&ns, &q, &shard, &keys]).await? {
        gone.insert(text(r, 0)?.ok_or_else(|| Fail::Corrupt("a dead letter that is NULL".into()))?);
    }
    let back: Vec<&[u8]> = gone.iter().map(|id| id.as_bytes()).collect();
    if !back.is_empty() {
        c.execute(COUNTS_DROP, &[&ns, &q, &shard, &back]).await?;
        c.execute(REQUEUE_WAIT, &[&ns, &q, &shard, &back, &now]).await?;
    }
    // Each id requeued once (a repeated id is no dead letter the second time).
    Ok(ids.iter().map(|id| queue::requeue(gone.remove(id), now)).collect())
}

impl QueueBackend for Postgres {
    fn enqueue<'a>(
        &'a self,
        at: ShardRef<'a>,
        ids: &'a [String],
        delay_ms: u64,
        debounce: Debounce,
    ) -> BoxFuture<'a, Vec<(EnqueueOutcome, i64)>> {
        Box::pin(async move {
            // One id without debounce: its fast statement first (`queue_fast`).
            if let ([id], Debounce::Off) = (ids, debounce) {
                if let Some(r) = self.enqueue_fast(at, id, delay_ms).await? {
                    return Ok(vec![r]);
                }
            }
            transaction!(self, |c| enqueue(&c, at, ids, delay_ms, debounce))
        })
    }
    fn claim<'a>(
        &'a self,
        at: ShardRef<'a>,
        owner: &'a str,
        limit: u64,
        visibility_ms: u64,
        max_deliveries: Option<u64>,
    ) -> BoxFuture<'a, ShardClaim> {
        Box::pin(async move {
            // Without maxDeliveries: its fast statement first (`queue_fast`).
            if max_deliveries.is_none() && limit > 0 {
                if let Some(r) = self.claim_fast(at, owner, limit, visibility_ms).await? {
                    return Ok(r);
                }
            }
            transaction!(self, |c| claim(&c, at, owner, limit, visibility_ms, max_deliveries))
        })
    }
    fn settle<'a>(
        &'a self,
        at: ShardRef<'a>,
        owner: &'a str,
        ids: &'a [String],
        action: SettleAction,
    ) -> BoxFuture<'a, Vec<(SettleOutcome, Option<i64>)>> {
        Box::pin(async move {
            // An ack: its fast statement first (`queue_fast`).
            if action == SettleAction::Ack && !ids.is_empty() {
                if let Some(r) = self.ack_fast(at, owner, ids).await? {
                    return Ok(r);
                }
            }
            transaction!(self, |c| settle(&c, at, owner, ids, action))
        })
    }
    fn peek<'a>(&'a self, at: ShardRef<'a>, limit: u64) -> BoxFuture<'a, (i64, Vec<(String, i64)>)> {
        Box::pin(async move { transaction!(self, |c| peek(&c, at, limit)) })
    }
    fn size<'a>(&'a self, at: ShardRef<'a>) -> BoxFuture<'a, ShardSize> {
        Box::pin(async move { transaction!(self, |c| size(&c, at)) })
    }
    fn dead_letters<'a>(&'a self, at: ShardRef<'a>, limit: u64) -> BoxFuture<'a, Vec<ShardDead>> {
        Box::pin(async move { transaction!(self, |c| dead_letters(&c, at, limit)) })
    }
    fn requeue_dead<'a>(&'a self, at: ShardRef<'a>, ids: &'a [String]) -> BoxFuture<'a, Vec<Option<i64>>> {
        Box::pin(async move { transaction!(self, |c| requeue_dead(&c, at, ids)) })
    }
}
