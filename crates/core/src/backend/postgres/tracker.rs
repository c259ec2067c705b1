//! Item Tracker on PostgreSQL: an item's record is a row of `items` (a `Record`'s fields as
//! columns; the timeline as JSON only where the record's fields do not imply it, as the durable
//! store keeps it). Every write call is one transaction:
//!
//! 1. the rows of every id of the call are locked in one statement, in id order (one primary-key
//!    probe `FOR UPDATE` per id of the sorted ids, [`LOAD_LOCKED`]), so two calls over the same
//!    ids never deadlock;
//! 2. the database's time is read (after the locks; sent with step 1: one round trip);
//! 3. each operation, in the caller's order, is decided by [`rules::tracker`] over the records in
//!    memory (a repeated id sees the earlier operation's result);
//! 4. the changed records are written in at most three statements, whatever the batch's size
//!    (arrays, `unnest`): the new rows inserted (a plain `INSERT`, in id order, the ids the one
//!    array when the new records differ in nothing else, as a `claimBatch`'s do; a row another
//!    call inserted first, a unique violation, makes the transaction run again, see the module
//!    `postgres`),
//!    the locked rows updated, the unset ones deleted;
//! 5. a bounded slice of expired records is removed (see `Ctx::purge`), sent with step 4, after
//!    its writes (it would otherwise remove an expired record this call is writing again).
//!
//! [`rules::tracker`]: crate::rules::tracker

use std::collections::HashMap;

use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement};

use super::{read, text, transaction, Ctx, Fail, Params, Postgres, Purged, Sql};
use crate::backend::BoxFuture;
use crate::rules::tracker::{
    claim, decide, fresh, implied_timeline, kept, next_offset, take, write, Decision,
};
use crate::tracker::{
    from_status_column, not_owner, status_column, BatchClaim, ClaimBatch, Counts, ItemList, ItemOp,
    ItemState, ListFilter, ListQuery, OpResult, Outcome, Record, TrackerBackend,
};

/// The records of ids of a group, locked in id order until the transaction ends; the same
/// unlocked; the records of a group kept after a time. Each reads the columns `id, s, a, o, l, c,
/// u, d, e, x, t, r, n` (see [`from_row`]). Each id is looked up by the primary key in a `LATERAL`
/// subquery (one index probe per id, in the array's order), never by `id = ANY($3)`: see
/// `docs/postgres.md` "Plans that do not depend on the statistics". [`LOAD_LOCKED`]'s ids come
/// sorted by their bytes and without repeats (the caller's work), so the rows are locked in id
/// order; [`LOAD`]'s may repeat (a row then comes once per repeat). Every id is probed, even
/// where the group has no row near it: a guard that skipped the probes when the group has no row
/// between the batch's first and last id measured 1.35× on `claimBatch` of a new group, but its
/// range scan steps over every deleted, not yet vacuumed row in the range (unbounded after a
/// sweep of a million records), so it is not used.
pub(super) const LOAD_LOCKED: &str = "SELECT i.id, i.s, i.a, i.o, i.l, i.c, i.u, i.d, i.e, i.x, i.t, i.r, i.n
    FROM unnest($3::bytea[]) AS w(id),
    LATERAL (SELECT id, s, a, o, l, c, u, d, e, x, t, r, n FROM {s}.items
      WHERE ns = $1 AND grp = $2 AND id = w.id FOR UPDATE) i";
pub(super) const LOAD: &str = "SELECT i.id, i.s, i.a, i.o, i.l, i.c, i.u, i.d, i.e, i.x, i.t, i.r, i.n
    FROM unnest($3::bytea[]) AS w(id),
    LATERAL (SELECT id, s, a, o, l, c, u, d, e, x, t, r, n FROM {s}.items
      WHERE ns = $1 AND grp = $2 AND id = w.id OFFSET 0) i";
/// One id's record (as [`LOAD`]'s columns, NULL when it has none) and the database's time `now`
/// after them: `getItem`'s one statement. [`LOAD`] and the clock pipelined are two statements in
/// one round trip; this is one (BENCHMARKS.md "PostgreSQL, eleventh session").
pub(super) const LOAD_ONE: &str = "SELECT i.id, i.s, i.a, i.o, i.l, i.c, i.u, i.d, i.e, i.x, i.t, i.r, i.n,
      floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now
    FROM (VALUES (1)) v LEFT JOIN {s}.items i ON i.ns = $1 AND i.grp = $2 AND i.id = $3";
/// One page of `listItems` and the group's counts, in one statement (one snapshot), at the
/// database's time `now` (read once, in `k`). It writes again the rule of
/// [`rules::tracker::page`] (with [`Record::status_at`], that is [`rules::tracker::status`]):
/// `list_tests.rs` (`list_items_equals_the_rule`) holds them equal.
///
/// - `k`: the time, read once; every other part reads it as the scalar `(SELECT now FROM k)`, a
///   parameter computed once, so the scans below can run in parallel workers (a join with `k`
///   cannot, and costs a join step per row).
/// - `n`: the count of each class of the group's kept records (`x > now`): one aggregate over
///   them. The classes, in `page`'s order, by the status code `s & 7`: 0 in progress (`1`,
///   `l > now`) and 1 abandoned (`1`, `l <= now`), both by their lease end `l`; 2 failed (`3`), 3
///   dead (`4`) and 4 completed (`2`), by their expiry `x`; ties by the id's bytes. A record of
///   none (code 0) has no class: neither counted nor listed. A status code no record has
///   (`from_row` refuses it) is class -1, counted as `bad`.
/// - `f`: the classes `$3` to `$4` the filter lists (one class, or 0 to 4 for all: the classes
///   chained in their order, as `page` chains them), each with the items listed before it; `b`:
///   the last of them that starts at or before the offset `$5`, where the page starts.
/// - `p`: the page: the kept records again, each as its id, class and sort key, from class `b`
///   on, ordered by class, key and id, `$5` less the items before it skipped, `$6` taken (the same
///   items as `page`'s `$5` skipped over all the filter's classes; a bounded sort keeps only the
///   page's offset within its class and `$6`). Its rows are read whole by the primary key, one
///   probe per id as [`LOAD`] does.
///
/// The group is read twice (the counts, then the page), each pass streamed: no pass keeps the
/// group's rows (the statement before this one kept them in a materialized CTE, written to a
/// temporary file past `work_mem`). Each pass reads only the primary key's index, which includes
/// `s`, `l` and `x` (an index-only scan, where the table's visibility map allows: after a
/// vacuum), and may run in parallel workers (BENCHMARKS.md "PostgreSQL, twelfth session").
///
/// Returns a row per record of the page in its order, or one row without a record (its columns
/// NULL) when the page is empty; each row has the record's columns (as [`LOAD`]: `id, s, a, o,
/// l, c, u, d, e, x, t, r, n`), then `now`, the five counts (in progress, abandoned, failed,
/// dead, completed) and `bad`.
///
/// [`rules::tracker::page`]: crate::rules::tracker::page
/// [`rules::tracker::status`]: crate::rules::tracker::status
pub(super) const LIST: &str =
    "WITH k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now),
    n AS (SELECT
        count(*) FILTER (WHERE i.s >= 0 AND i.s & 7 = 1 AND i.l > (SELECT now FROM k)) AS n0,
        count(*) FILTER (WHERE i.s >= 0 AND i.s & 7 = 1 AND i.l <= (SELECT now FROM k)) AS n1,
        count(*) FILTER (WHERE i.s >= 0 AND i.s & 7 = 3) AS n2,
        count(*) FILTER (WHERE i.s >= 0 AND i.s & 7 = 4) AS n3,
        count(*) FILTER (WHERE i.s >= 0 AND i.s & 7 = 2) AS n4,
        count(*) FILTER (WHERE i.s < 0 OR i.s & 7 > 4) AS bad
      FROM {s}.items i WHERE i.ns = $1 AND i.grp = $2 AND i.x > (SELECT now FROM k)),
    f AS (SELECT v.c, (sum(v.n) OVER (ORDER BY v.c) - v.n)::int8 AS before
      FROM n, LATERAL (VALUES (0, n.n0), (1, n.n1), (2, n.n2), (3, n.n3), (4, n.n4)) v(c, n)
      WHERE v.c BETWEEN $3 AND $4),
    b AS (SELECT c, before FROM f WHERE before <= $5::int8 ORDER BY c DESC LIMIT 1),
    p AS (SELECT g.id, g.c, g.key FROM (
        SELECT i.id,
          CASE WHEN i.s < 0 OR i.s & 7 > 4 THEN -1
            WHEN i.s & 7 = 1 THEN CASE WHEN i.l > (SELECT now FROM k) THEN 0 ELSE 1 END
            WHEN i.s & 7 = 3 THEN 2 WHEN i.s & 7 = 4 THEN 3 WHEN i.s & 7 = 2 THEN 4 END AS c,
          CASE WHEN i.s & 7 = 1 THEN i.l ELSE i.x END AS key
        FROM {s}.items i WHERE i.ns = $1 AND i.grp = $2 AND i.x > (SELECT now FROM k)) g
      WHERE g.c BETWEEN (SELECT c FROM b) AND $4
      ORDER BY g.c, g.key, g.id OFFSET $5::int8 - (SELECT before FROM b) LIMIT $6)
    SELECT r.id, r.s, r.a, r.o, r.l, r.c, r.u, r.d, r.e, r.x, r.t, r.r, r.n,
      k.now, n.n0, n.n1, n.n2, n.n3, n.n4, n.bad
    FROM k CROSS JOIN n LEFT JOIN (
      SELECT i.*, p.c AS class, p.key FROM p,
        LATERAL (SELECT id, s, a, o, l, c, u, d, e, x, t, r, n FROM {s}.items
          WHERE ns = $1 AND grp = $2 AND id = p.id OFFSET 0) i) r ON true
    ORDER BY r.class, r.key, r.id";
/// The new records, the changed ones, the removed ones (arrays of the records' columns). The new
/// records are inserted without `ON CONFLICT` (its speculative insertion costs more than twice a
/// plain insert per row: 340 against 135 ms for 10,000 rows, EXPLAIN ANALYZE): the transaction
/// found these ids without a row, so a unique violation means another call inserted one since,
/// and the transaction runs again ([`Fail::Race`]).
pub(super) const INSERT: &str = "INSERT INTO {s}.items (ns, grp, id, s, a, o, l, c, u, d, e, x, t, r, n)
    SELECT $1, $2, * FROM unnest($3::bytea[], $4::int2[], $5::int4[], $6::text[], $7::int8[],
      $8::int8[], $9::int8[], $10::int8[], $11::bytea[], $12::int8[], $13::text[], $14::text[], $15::text[])
";
/// [`INSERT`] of new records that differ in their ids only (a `claimBatch`'s new ids: one owner,
/// time and lease): the ids as the one array, every other column bound once. PostgreSQL then
/// reads one array instead of thirteen (each `unnest` argument is materialized first): 10,000
/// rows into a table of this shape in 53 ms against 78 (EXPLAIN ANALYZE, medians of 8, load 2).
/// Binary `COPY` of the same rows (in the transaction) is no faster: docs/postgres.md.
pub(super) const INSERT_ALIKE: &str = "INSERT INTO {s}.items (ns, grp, id, s, a, o, l, c, u, d, e, x, t, r, n)
    SELECT $1, $2, w.id, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15 FROM unnest($3::bytea[]) AS w(id)
";
pub(super) const UPDATE: &str = "UPDATE {s}.items SET s = v.s, a = v.a, o = v.o, l = v.l, c = v.c, u = v.u,
      d = v.d, e = v.e, x = v.x, t = v.t, r = v.r, n = v.n
    FROM unnest($3::bytea[], $4::int2[], $5::int4[], $6::text[], $7::int8[], $8::int8[], $9::int8[],
      $10::int8[], $11::bytea[], $12::int8[], $13::text[], $14::text[], $15::text[])
      AS v(id, s, a, o, l, c, u, d, e, x, t, r, n)
    WHERE items.ns = $1 AND items.grp = $2 AND items.id = v.id";
/// The records of ids `$3` (locked by [`LOAD_LOCKED`] first), found as it finds them.
pub(super) const DELETE: &str = "DELETE FROM {s}.items WHERE ctid = ANY(ARRAY(
    SELECT i.ctid FROM unnest($3::bytea[]) AS w(id),
      LATERAL (SELECT ctid FROM {s}.items WHERE ns = $1 AND grp = $2 AND id = w.id OFFSET 0) i))";

/// A record from a row of its columns (see [`LOAD`]).
pub(super) fn from_row(r: &Row) -> Sql<(String, Record)> {
    let id = text(r, 0)?.ok_or_else(|| Fail::Corrupt("an item without an id".into()))?;
    let code: i16 = r.try_get(1)?;
    let (s, m) = from_status_column(i64::from(code))
        .ok_or_else(|| Fail::Corrupt(format!("item {id:?}: status code {code}")))?;
    let mut rec = Record {
        s,
        m,
        a: r.try_get::<_, i32>(2)? as u32,
        o: r.try_get(3)?,
        l: r.try_get(4)?,
        c: r.try_get(5)?,
        u: r.try_get(6)?,
        d: r.try_get(7)?,
        e: text(r, 8)?,
        x: r.try_get(9)?,
        t: Vec::new(),
        r: r.try_get(11)?,
        n: r.try_get(12)?,
    };
    let t: Option<String> = r.try_get(10)?;
    rec.t = match t {
        Some(t) => {
            serde_json::from_str(&t).map_err(|e| Fail::Corrupt(format!("item {id:?}: timeline: {e}")))?
        }
        None => implied_timeline(&rec)
            .ok_or_else(|| Fail::Corrupt(format!("item {id:?}: no timeline after {} attempts", rec.a)))?,
    };
    Ok((id, rec))
}

/// One id of a call: its kept record, whether it has a row (kept or expired: locked), and
/// whether the call changed it.
struct Slot {
    rec: Option<Record>,
    has_row: bool,
    dirty: bool,
}

/// The records of a call's ids, locked, at the database's time: a slot per id, in id order
/// (sorted by their bytes, without repeats), and where each id of the call, in the call's order,
/// has its slot.
struct Locked<'i> {
    ids: Vec<&'i str>,
    slots: Vec<Slot>,
    at: Vec<usize>,
    now: i64,
}

impl<'i> Locked<'i> {
    /// Locks the rows of `ids` (in id order) and reads the time.
    async fn load(c: &Ctx<'_, '_>, group: &str, ids: impl Iterator<Item = &'i str>) -> Sql<Locked<'i>> {
        let mut sorted: Vec<(&str, usize)> = ids.enumerate().map(|(i, id)| (id, i)).collect();
        sorted.sort_unstable();
        let mut locked = Locked { ids: Vec::new(), slots: Vec::new(), at: vec![0; sorted.len()], now: 0 };
        for (id, i) in sorted {
            if locked.ids.last() != Some(&id) {
                locked.ids.push(id);
            }
            locked.at[i] = locked.ids.len() - 1;
        }
        let wanted: Vec<&[u8]> = locked.ids.iter().map(|id| id.as_bytes()).collect();
        let (rows, now) = c.query_then_now(LOAD_LOCKED, &[&c.ns(), &group.as_bytes(), &wanted]).await?;
        locked.slots = locked.ids.iter().map(|_| Slot { rec: None, has_row: false, dirty: false }).collect();
        for r in &rows {
            let (id, rec) = from_row(r)?;
            let k = locked
                .ids
                .binary_search(&id.as_str())
                .map_err(|_| Fail::Corrupt(format!("item {id:?}: a row of an id not asked for")))?;
            locked.slots[k] = Slot { rec: Some(rec).filter(|r| kept(r.x, now)), has_row: true, dirty: false };
        }
        locked.now = now;
        Ok(locked)
    }

    /// The slot of the call's `i`th id.
    fn slot(&mut self, i: usize) -> &mut Slot {
        &mut self.slots[self.at[i]]
    }

    /// Writes the changed records (new rows inserted, locked rows updated, unset ones deleted),
    /// then removes a slice of expired records, all sent together in that order: each statement
    /// is prepared first, so it is sent on its future's first poll, `try_join4` polls them in
    /// order, and PostgreSQL runs them in the order sent. The purge must come last: its `SKIP
    /// LOCKED` skips the rows other calls hold, not this call's, so sent before a write it could
    /// delete an expired record this call locked and is writing again (the write then finds no
    /// row, and the record is lost).
    async fn save_and_purge(&self, c: &Ctx<'_, '_>, group: &str, now: i64) -> Sql<()> {
        let (mut inserts, mut updates, mut deletes) = (Columns::default(), Columns::default(), Vec::new());
        for (id, slot) in self.ids.iter().zip(&self.slots).filter(|(_, s)| s.dirty) {
            match (&slot.rec, slot.has_row) {
                (Some(rec), false) => inserts.push(id, rec)?,
                (Some(rec), true) => updates.push(id, rec)?,
                (None, true) => deletes.push(id.as_bytes()),
                (None, false) => {}
            }
        }
        let (ns, g) = (c.ns(), group.as_bytes());
        let (insert_sql, insert_params) = inserts.insert(&ns, &g);
        let insert = prepared(c, insert_sql, !inserts.ids.is_empty()).await?;
        let update = prepared(c, UPDATE, !updates.ids.is_empty()).await?;
        let delete = prepared(c, DELETE, !deletes.is_empty()).await?;
        let purge = c.prepare(Purged::Items.statement()).await?;
        let update_params = updates.params(&ns, &g);
        let delete_params: [&(dyn ToSql + Sync); 3] = [&ns, &g, &deletes];
        futures_util::future::try_join4(
            async {
                run(c, insert.as_ref(), &insert_params).await.map_err(|e| {
                    if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                        // Another call inserted some of these ids after this one found them absent.
                        Fail::Race
                    } else {
                        Fail::Pg(e)
                    }
                })
            },
            async { run(c, update.as_ref(), &update_params).await.map_err(Fail::Pg) },
            async { run(c, delete.as_ref(), &delete_params).await.map_err(Fail::Pg) },
            async { run(c, Some(&purge), &[&now]).await.map_err(Fail::Pg) },
        )
        .await?;
        Ok(())
    }
}

/// `sql` prepared when `needed`.
async fn prepared(c: &Ctx<'_, '_>, sql: &str, needed: bool) -> Sql<Option<Statement>> {
    Ok(if needed { Some(c.prepare(sql).await?) } else { None })
}

/// Runs a prepared statement, if any (sent on the first poll: nothing is awaited before).
async fn run(
    c: &Ctx<'_, '_>,
    st: Option<&Statement>,
    params: Params<'_>,
) -> Result<(), tokio_postgres::Error> {
    match st {
        Some(st) => c.run_execute(st, params).await.map(|_| ()),
        None => Ok(()),
    }
}

/// Records as arrays, one per column, to bind to an `unnest`.
#[derive(Default)]
struct Columns<'r> {
    ids: Vec<&'r [u8]>,
    s: Vec<i16>,
    a: Vec<i32>,
    o: Vec<Option<&'r str>>,
    l: Vec<i64>,
    c: Vec<i64>,
    u: Vec<i64>,
    d: Vec<i64>,
    e: Vec<Option<&'r [u8]>>,
    x: Vec<i64>,
    t: Vec<Option<String>>,
    r: Vec<Option<&'r str>>,
    n: Vec<Option<&'r str>>,
}

impl<'r> Columns<'r> {
    fn push(&mut self, id: &'r str, r: &'r Record) -> Sql<()> {
        let code = status_column(&r.s, r.m).ok_or_else(|| Fail::Corrupt(format!("status {:?}", r.s)))?;
        let t = match implied_timeline(r) {
            Some(t) if t == r.t => None,
            _ => Some(serde_json::to_string(&r.t).map_err(|e| Fail::Corrupt(e.to_string()))?),
        };
        self.ids.push(id.as_bytes());
        self.s.push(code as i16);
        self.a.push(r.a as i32);
        self.o.push(r.o.as_deref());
        self.l.push(r.l);
        self.c.push(r.c);
        self.u.push(r.u);
        self.d.push(r.d);
        self.e.push(r.e.as_deref().map(str::as_bytes));
        self.x.push(r.x);
        self.t.push(t);
        self.r.push(r.r.as_deref());
        self.n.push(r.n.as_deref());
        Ok(())
    }

    /// The statement that inserts these records, with its parameters: [`INSERT_ALIKE`] when
    /// they differ in their ids only, else [`INSERT`].
    fn insert<'p>(
        &'p self,
        ns: &'p &'p [u8],
        g: &'p &'p [u8],
    ) -> (&'static str, [&'p (dyn ToSql + Sync); 15]) {
        fn alike<T: PartialEq>(v: &[T]) -> bool {
            v.windows(2).all(|w| w[0] == w[1])
        }
        let one = !self.ids.is_empty()
            && alike(&self.s)
            && alike(&self.a)
            && alike(&self.o)
            && alike(&self.l)
            && alike(&self.c)
            && alike(&self.u)
            && alike(&self.d)
            && alike(&self.e)
            && alike(&self.x)
            && alike(&self.t)
            && alike(&self.r)
            && alike(&self.n);
        if !one {
            return (INSERT, self.params(ns, g));
        }
        let params: [&'p (dyn ToSql + Sync); 15] = [
            ns, g, &self.ids, &self.s[0], &self.a[0], &self.o[0], &self.l[0], &self.c[0], &self.u[0],
            &self.d[0], &self.e[0], &self.x[0], &self.t[0], &self.r[0], &self.n[0],
        ];
        (INSERT_ALIKE, params)
    }

    fn params<'p>(
        &'p self,
        ns: &'p &'p [u8],
        g: &'p &'p [u8],
    ) -> [&'p (dyn tokio_postgres::types::ToSql + Sync); 15] {
        [
            ns, g, &self.ids, &self.s, &self.a, &self.o, &self.l, &self.c, &self.u, &self.d, &self.e,
            &self.x, &self.t, &self.r, &self.n,
        ]
    }
}

fn state(rec: Option<&Record>, id: &str, now: i64) -> ItemState {
    rec.map(|r| r.to_state(id, now)).unwrap_or_else(|| ItemState::unknown(id))
}

pub(super) async fn apply(
    c: &Ctx<'_, '_>,
    group: &str,
    ops: &[ItemOp],
    retention_ms: u64,
) -> Sql<Vec<OpResult>> {
    let mut locked = Locked::load(c, group, ops.iter().map(ItemOp::id)).await?;
    let now = locked.now;
    let mut out = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let id = op.id();
        let slot = locked.slot(i);
        let result =
            |outcome, owner, item| OpResult { id: id.to_string(), action: op.action(), outcome, owner, item };
        let current = slot.rec.as_ref();
        out.push(match decide(op, current, now) {
            Decision::Busy(s) => result(Outcome::Busy(s), None, state(current, id, now)),
            Decision::NotOwner => {
                result(Outcome::Refused(not_owner(group, id, current)), None, state(current, id, now))
            }
            Decision::Remove => {
                let before = state(current, id, now);
                slot.rec = None;
                slot.dirty = true;
                result(Outcome::Done, None, before)
            }
            d @ (Decision::Take | Decision::Finish) => {
                let rec = slot.rec.get_or_insert_with(|| fresh(now));
                write(op, rec, now, retention_ms);
                slot.dirty = true;
                let owner = match (d, op) {
                    (Decision::Take, ItemOp::Claim { owner, .. }) => Some(owner.clone()),
                    _ => None,
                };
                result(Outcome::Done, owner, rec.to_state(id, now))
            }
        });
    }
    locked.save_and_purge(c, group, now).await?;
    Ok(out)
}

async fn claim_batch(c: &Ctx<'_, '_>, group: &str, b: BatchClaim<'_>) -> Sql<ClaimBatch> {
    let mut locked = Locked::load(c, group, b.ids.iter().map(String::as_str)).await?;
    let now = locked.now;
    let lease_end = now + b.lease_ms as i64;
    let (mut outcomes, mut attempts) = (Vec::with_capacity(b.ids.len()), Vec::with_capacity(b.ids.len()));
    for i in 0..b.ids.len() {
        let slot = locked.slot(i);
        let decision = claim(
            slot.rec.as_ref().map_or(crate::tracker::ItemStatus::None, |r| r.status_at(now)),
            b.reclaim_completed,
        );
        let a = match decision {
            crate::rules::tracker::Claim::Take => {
                let rec = slot.rec.get_or_insert_with(|| fresh(now));
                take(rec, b.owner, now, lease_end, b.retention_ms, b.given());
                slot.dirty = true;
                rec.a
            }
            _ => slot.rec.as_ref().map_or(0, |r| r.a),
        };
        outcomes.push(decision.batch());
        attempts.push(a);
    }
    locked.save_and_purge(c, group, now).await?;
    Ok(ClaimBatch { owner: b.owner.to_string(), lease_expires_at: lease_end, outcomes, attempts })
}

async fn read(c: &Ctx<'_, '_>, group: &str, ids: &[String]) -> Sql<Vec<ItemState>> {
    if let [id] = ids {
        return read_one(c, group, id).await.map(|s| vec![s]);
    }
    let wanted: Vec<&[u8]> = ids.iter().map(|id| id.as_bytes()).collect();
    let (rows, now) = c.query_then_now(LOAD, &[&c.ns(), &group.as_bytes(), &wanted]).await?;
    let mut found = HashMap::with_capacity(rows.len());
    for r in &rows {
        let (id, rec) = from_row(r)?;
        if kept(rec.x, now) {
            found.insert(id, rec);
        }
    }
    Ok(ids.iter().map(|id| state(found.get(id), id, now)).collect())
}

/// [`read`] of one id, by [`LOAD_ONE`].
async fn read_one(c: &Ctx<'_, '_>, group: &str, id: &str) -> Sql<ItemState> {
    let row = c.query_opt(LOAD_ONE, &[&c.ns(), &group.as_bytes(), &id.as_bytes()]).await?;
    let row = row.ok_or_else(|| Fail::Corrupt("the record's read returned no row".into()))?;
    let now: i64 = row.try_get(13)?;
    let found: Option<&[u8]> = row.try_get(0)?;
    if found.is_none() {
        return Ok(ItemState::unknown(id));
    }
    let (_, rec) = from_row(&row)?;
    Ok(state(Some(&rec).filter(|r| kept(r.x, now)), id, now))
}

/// The classes of [`LIST`] a filter lists, first and last (see `LIST`).
fn classes(filter: ListFilter) -> (i32, i32) {
    match filter {
        ListFilter::All => (0, 4),
        ListFilter::InProgress => (0, 0),
        ListFilter::Abandoned => (1, 1),
        ListFilter::Failed => (2, 2),
        ListFilter::Dead => (3, 3),
        ListFilter::Completed => (4, 4),
    }
}

/// A count of [`LIST`]'s row.
fn count(r: &Row, i: usize) -> Sql<u64> {
    let n: i64 = r.try_get(i)?;
    u64::try_from(n).map_err(|_| Fail::Corrupt(format!("a count of {n}")))
}

/// One page of a group's items, as [`rules::tracker::page`] gives it from the group's kept
/// records, by the one statement [`LIST`].
///
/// [`rules::tracker::page`]: crate::rules::tracker::page
async fn list(c: &Ctx<'_, '_>, group: &str, q: ListQuery) -> Sql<ItemList> {
    list_by(c, LIST, group, q, None).await
}

/// [`list`] by `sql`: [`LIST`], or (for the tests) [`LIST`] with its clock replaced by `$7`,
/// the time `now` given.
pub(super) async fn list_by(
    c: &Ctx<'_, '_>,
    sql: &str,
    group: &str,
    q: ListQuery,
    now: Option<i64>,
) -> Sql<ItemList> {
    let (first, last) = classes(q.filter);
    // `offset` is at most 2^32 - 1 and `limit` at most MAX_LIST_LIMIT (`list_items` checks them).
    let offset = i64::try_from(q.offset).unwrap_or(i64::MAX);
    let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
    let (ns, g) = (c.ns(), group.as_bytes());
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&ns, &g, &first, &last, &offset, &limit];
    if let Some(now) = &now {
        params.push(now);
    }
    let rows = c.query(sql, &params).await?;
    let head = rows.first().ok_or_else(|| Fail::Corrupt("the list read no row".into()))?;
    let now: i64 = head.try_get(13)?;
    let counts = Counts {
        in_progress: count(head, 14)?,
        abandoned: count(head, 15)?,
        failed: count(head, 16)?,
        dead: count(head, 17)?,
        completed: count(head, 18)?,
    };
    let bad = count(head, 19)?;
    if bad > 0 {
        return Err(Fail::Corrupt(format!("{bad} items of the group with a status code no record has")));
    }
    let mut items = Vec::with_capacity(rows.len());
    for r in &rows {
        // The one row of an empty page has no record.
        if r.try_get::<_, Option<&[u8]>>(0)?.is_some() {
            let (id, rec) = from_row(r)?;
            items.push(rec.to_state(&id, now));
        }
    }
    Ok(ItemList { counts, items, next_offset: next_offset(q, counts.of(q.filter)) })
}

impl TrackerBackend for Postgres {
    fn claim_batch<'a>(&'a self, group: &'a str, claim: BatchClaim<'a>) -> BoxFuture<'a, ClaimBatch> {
        Box::pin(async move { transaction!(self, |c| claim_batch(&c, group, claim)) })
    }
    fn apply<'a>(
        &'a self,
        group: &'a str,
        ops: &'a [ItemOp],
        retention_ms: u64,
    ) -> BoxFuture<'a, Vec<OpResult>> {
        Box::pin(async move {
            // One operation: its fast statement first, when one covers it (`tracker_fast`).
            if let [op] = ops {
                if let Some(r) = self.apply_fast(group, op, retention_ms).await? {
                    return Ok(vec![r]);
                }
            }
            transaction!(self, |c| apply(&c, group, ops, retention_ms))
        })
    }
    fn read<'a>(&'a self, group: &'a str, ids: &'a [String]) -> BoxFuture<'a, Vec<ItemState>> {
        Box::pin(async move { read!(self, |c| read(&c, group, ids)) })
    }
    fn list<'a>(&'a self, group: &'a str, query: ListQuery, _retention_ms: u64) -> BoxFuture<'a, ItemList> {
        Box::pin(async move { read!(self, |c| list(&c, group, query)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::tracker::Take;

    /// A new record as a claim writes it.
    fn claimed() -> Record {
        let mut r = fresh(1_000);
        take(&mut r, "o1", 1_000, 61_000, 86_400_000, Take { max_attempts: None, note: None });
        r
    }

    /// The statement that inserts new records `a` and `b`.
    fn insert_of(a: &Record, b: &Record) -> &'static str {
        let mut cols = Columns::default();
        assert!(cols.push("a", a).is_ok());
        assert!(cols.push("b", b).is_ok());
        let (ns, g): (&[u8], &[u8]) = (b"ns", b"g");
        cols.insert(&ns, &g).0
    }

    #[test]
    fn new_records_differing_in_their_ids_only_are_inserted_by_one_array() {
        assert_eq!(insert_of(&claimed(), &claimed()), INSERT_ALIKE);
        // A record that differs in any other column is inserted column by column.
        let changes: [fn(&mut Record); 13] = [
            |r| r.s = "completed".into(),
            |r| r.m = Some(3),
            |r| r.a = 2,
            |r| r.o = Some("o2".into()),
            |r| r.l += 1,
            |r| r.c += 1,
            |r| r.u += 1,
            |r| r.d = 5,
            |r| r.e = Some("boom".into()),
            |r| r.x += 1,
            |r| r.t.push(r.t[0].clone()),
            |r| r.r = Some("1".into()),
            |r| r.n = Some("note".into()),
        ];
        for (k, change) in changes.iter().enumerate() {
            let mut other = claimed();
            change(&mut other);
            assert_eq!(insert_of(&claimed(), &other), INSERT, "change {k}");
        }
    }
}
