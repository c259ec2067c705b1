//! Item Tracker on the durable store: the record of an item is a row (its JSON in `rec`), read,
//! changed by the same rules as the in-memory store, and written back, all in one transaction.

use rusqlite::{params, Connection, OptionalExtension};

use super::{Durable, Fail, Sql};
use crate::backend::embedded::{finish, fresh, page, take};
use crate::backend::BoxFuture;
use crate::tracker::{
    not_owner, BatchClaim, BatchOutcome, ClaimBatch, ItemList, ItemOp, ItemState, ItemStatus, ListQuery,
    OpResult, Outcome, Record, TrackerBackend,
};

fn decode(id: &str, json: &str) -> Sql<Record> {
    serde_json::from_str(json).map_err(|e| Fail::Corrupt(format!("item {id:?}: {e}")))
}

/// The live record of `id` (one whose retention has not run out).
fn load(c: &Connection, ns: &str, group: &str, id: &str, now: i64) -> Sql<Option<Record>> {
    let json: Option<String> = c
        .prepare_cached("SELECT rec FROM items WHERE ns = ?1 AND grp = ?2 AND id = ?3 AND exp > ?4")?
        .query_row(params![ns, group, id, now], |r| r.get(0))
        .optional()?;
    json.map(|j| decode(id, &j)).transpose()
}

fn encode(rec: &Record) -> Sql<String> {
    serde_json::to_string(rec).map_err(|e| Fail::Corrupt(e.to_string()))
}

fn save(c: &Connection, ns: &str, group: &str, id: &str, rec: &Record) -> Sql<()> {
    save_json(c, ns, group, id, rec.x, &encode(rec)?)
}

fn save_json(c: &Connection, ns: &str, group: &str, id: &str, exp: i64, json: &str) -> Sql<()> {
    c.prepare_cached(
        "INSERT INTO items (ns, grp, id, exp, rec) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (ns, grp, id) DO UPDATE SET exp = excluded.exp, rec = excluded.rec",
    )?
    .execute(params![ns, group, id, exp, json])?;
    Ok(())
}

/// Writes the record of an id that has no row; false (nothing written) when it has one.
fn insert_new(c: &Connection, ns: &str, group: &str, id: &str, exp: i64, json: &str) -> Sql<bool> {
    let n = c
        .prepare_cached(
            "INSERT INTO items (ns, grp, id, exp, rec) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
        )?
        .execute(params![ns, group, id, exp, json])?;
    Ok(n == 1)
}

fn state(rec: Option<&Record>, id: &str, now: i64) -> ItemState {
    rec.map(|r| r.to_state(id, now)).unwrap_or_else(|| ItemState::unknown(id))
}

/// Applies one operation at `now`: the rules of the in-memory store's `apply_one`.
fn apply_one(
    c: &Connection,
    ns: &str,
    group: &str,
    op: &ItemOp,
    now: i64,
    retention_ms: u64,
) -> Sql<OpResult> {
    let id = op.id();
    let result =
        |outcome, owner, item| OpResult { id: id.to_string(), action: op.action(), outcome, owner, item };
    if let ItemOp::Claim { owner, lease_ms, .. } = op {
        // Most claims are of new ids: one insert that skips an existing row, without a read
        // first. An id that has a row (live or expired) goes on as below.
        let mut rec = fresh(now);
        take(&mut rec, owner, now, now + *lease_ms as i64, retention_ms);
        if insert_new(c, ns, group, id, rec.x, &encode(&rec)?)? {
            return Ok(result(Outcome::Done, Some(owner.clone()), rec.to_state(id, now)));
        }
    }
    let current = load(c, ns, group, id, now)?;
    Ok(match op {
        ItemOp::Claim { owner, lease_ms, reclaim_completed, .. } => {
            let busy = match current.as_ref().map(|r| r.status_at(now)) {
                Some(ItemStatus::InProgress) => Some(ItemStatus::InProgress),
                Some(ItemStatus::Completed) if !reclaim_completed => Some(ItemStatus::Completed),
                _ => None,
            };
            if let Some(s) = busy {
                return Ok(result(Outcome::Busy(s), None, state(current.as_ref(), id, now)));
            }
            let mut rec = current.unwrap_or_else(|| fresh(now));
            take(&mut rec, owner, now, now + *lease_ms as i64, retention_ms);
            save(c, ns, group, id, &rec)?;
            result(Outcome::Done, Some(owner.clone()), rec.to_state(id, now))
        }
        ItemOp::Complete { owner, keep_ms, .. } | ItemOp::Fail { owner, keep_ms, .. } => {
            if let Some(o) = owner {
                if current.as_ref().and_then(|r| r.o.as_ref()) != Some(o) {
                    let refused = Outcome::Refused(not_owner(group, id, current.as_ref()));
                    return Ok(result(refused, None, state(current.as_ref(), id, now)));
                }
            }
            let (status, error) = match op {
                ItemOp::Fail { error, .. } => ("failed", Some(error)),
                _ => ("completed", None),
            };
            let mut rec = current.unwrap_or_else(|| fresh(now));
            finish(&mut rec, status, error, now, *keep_ms);
            save(c, ns, group, id, &rec)?;
            result(Outcome::Done, None, rec.to_state(id, now))
        }
        ItemOp::Unset { .. } => {
            c.prepare_cached("DELETE FROM items WHERE ns = ?1 AND grp = ?2 AND id = ?3")?
                .execute(params![ns, group, id])?;
            result(Outcome::Done, None, state(current.as_ref(), id, now))
        }
    })
}

/// Ids inserted by one statement of a batch claim (bound as one JSON array, read by
/// `json_each`): one statement per chunk instead of one per id.
const CHUNK: usize = 1_024;

/// A batch claim. Most ids of a batch are usually new, and every new id gets the same record (a
/// fresh one, taken once), so that record is encoded once and the distinct ids are inserted in
/// chunks, each by one statement; when that statement found a row for some id of its chunk, it is
/// undone (a savepoint) and that chunk goes id by id, as [`claim_each`]. Repeats of an id in the
/// batch are decided after its first occurrence. Ids are visited in key order, so the inserts
/// walk the B-tree forward instead of jumping around it; outcomes stay in the caller's order.
fn claim_batch(c: &Connection, ns: &str, group: &str, b: BatchClaim<'_>, now: i64) -> Sql<ClaimBatch> {
    let mut batch = Batch::new(b, now)?;
    let mut order: Vec<usize> = (0..b.ids.len()).collect();
    order.sort_by(|&i, &j| b.ids[i].cmp(&b.ids[j]));
    let (mut first, mut repeats) = (Vec::with_capacity(order.len()), Vec::new());
    for (k, &i) in order.iter().enumerate() {
        if k > 0 && b.ids[order[k - 1]] == b.ids[i] {
            repeats.push(i);
        } else {
            first.push(i);
        }
    }
    let mut insert = c.prepare_cached(
        "INSERT INTO items (ns, grp, id, exp, rec) SELECT ?1, ?2, value, ?3, ?4 FROM json_each(?5) WHERE true
         ON CONFLICT DO NOTHING",
    )?;
    for chunk in first.chunks(CHUNK) {
        let ids: Vec<&str> = chunk.iter().map(|&i| b.ids[i].as_str()).collect();
        let list = serde_json::to_string(&ids).map_err(|e| Fail::Corrupt(e.to_string()))?;
        c.prepare_cached("SAVEPOINT chunk")?.execute([])?;
        let inserted = insert.execute(params![ns, group, batch.new_rec.x, batch.new_json, list])?;
        if inserted != chunk.len() {
            c.prepare_cached("ROLLBACK TO chunk")?.execute([])?;
        }
        c.prepare_cached("RELEASE chunk")?.execute([])?;
        if inserted != chunk.len() {
            claim_each(c, ns, group, &mut batch, chunk)?;
        }
    }
    for i in repeats {
        batch.decide(c, ns, group, i)?;
    }
    Ok(ClaimBatch {
        owner: b.owner.to_string(),
        lease_expires_at: batch.lease_end,
        outcomes: batch.outcomes,
        attempts: batch.attempts,
    })
}

/// Claims the distinct ids `chunk` (in key order) one by one. Runs of ids alike are common (a
/// first run: all new; a re-run: mostly known), so after an insert that found a row the next id
/// is read first, and after a read that found none the next one is inserted first: each id costs
/// one B-tree step, apart from where a run changes.
fn claim_each(c: &Connection, ns: &str, group: &str, batch: &mut Batch<'_>, chunk: &[usize]) -> Sql<()> {
    let mut expect_new = true;
    for &i in chunk {
        if expect_new {
            let id = &batch.claim.ids[i];
            if insert_new(c, ns, group, id, batch.new_rec.x, &batch.new_json)? {
                continue;
            }
        }
        expect_new = batch.decide(c, ns, group, i)?;
    }
    Ok(())
}

/// A batch claim under way: the record of its new ids, and the outcomes so far.
struct Batch<'a> {
    claim: BatchClaim<'a>,
    now: i64,
    lease_end: i64,
    new_rec: Record,
    new_json: String,
    outcomes: Vec<BatchOutcome>,
    attempts: Vec<u32>,
}

impl<'a> Batch<'a> {
    fn new(claim: BatchClaim<'a>, now: i64) -> Sql<Batch<'a>> {
        let lease_end = now + claim.lease_ms as i64;
        let mut new_rec = fresh(now);
        take(&mut new_rec, claim.owner, now, lease_end, claim.retention_ms);
        let new_json = encode(&new_rec)?;
        let n = claim.ids.len();
        Ok(Batch {
            claim,
            now,
            lease_end,
            outcomes: vec![BatchOutcome::Claimed; n],
            attempts: vec![new_rec.a; n],
            new_rec,
            new_json,
        })
    }

    /// Reads id number `i` and claims it when the rules allow; true when it had no live
    /// record (so it got the new one).
    fn decide(&mut self, c: &Connection, ns: &str, group: &str, i: usize) -> Sql<bool> {
        let (b, now) = (self.claim, self.now);
        let id = &b.ids[i];
        let (outcome, a, got_new) = match load(c, ns, group, id, now)? {
            Some(r) if matches!(r.status_at(now), ItemStatus::InProgress) => {
                (BatchOutcome::InProgress, r.a, false)
            }
            Some(r) if matches!(r.status_at(now), ItemStatus::Completed) && !b.reclaim_completed => {
                (BatchOutcome::Completed, r.a, false)
            }
            Some(mut rec) => {
                take(&mut rec, b.owner, now, self.lease_end, b.retention_ms);
                save(c, ns, group, id, &rec)?;
                (BatchOutcome::Claimed, rec.a, false)
            }
            None => {
                // No live record (none, or one whose retention ran out): the new record.
                save_json(c, ns, group, id, self.new_rec.x, &self.new_json)?;
                (BatchOutcome::Claimed, self.new_rec.a, true)
            }
        };
        self.outcomes[i] = outcome;
        self.attempts[i] = a;
        Ok(got_new)
    }
}

fn list(c: &Connection, ns: &str, group: &str, q: ListQuery, now: i64) -> Sql<ItemList> {
    let mut st = c.prepare_cached("SELECT id, rec FROM items WHERE ns = ?1 AND grp = ?2 AND exp > ?3")?;
    let rows =
        st.query_map(params![ns, group, now], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
    let mut records = Vec::new();
    for row in rows {
        let (id, json) = row?;
        let rec = decode(&id, &json)?;
        records.push((id, rec));
    }
    Ok(page(records.iter().map(|(id, r)| (id, r)), now, q))
}

/// Items visited by one sweep for expired ones.
const SWEEP: usize = 256;

/// Where the sweep for expired items stands in this process: items written since the last
/// sweep, and the key it stopped after (`None`: at the start of the table).
#[derive(Default)]
pub(super) struct Sweep {
    debt: usize,
    after: Option<(String, String, String)>,
}

impl Durable {
    /// Removes expired items without an index on their expiry (which would cost every claim
    /// another page written): for every `SWEEP / 2` items written, the next [`SWEEP`] items in
    /// key order (after where the last sweep stopped, around the table) are visited and the
    /// expired ones deleted. So each write does a bounded share of the work, and since the
    /// sweep visits items twice as fast as they are written, it passes over every row while
    /// the table grows by at most half of it: expired rows cannot pile up. Expired rows are
    /// invisible to every read until then.
    fn sweep_items(&self, c: &Connection, now: i64, written: usize) -> Sql<()> {
        let mut sweep = super::guard(&self.db.sweep);
        sweep.debt += written;
        while sweep.debt >= SWEEP / 2 {
            sweep.debt -= SWEEP / 2;
            let (ns, grp, id) = sweep.after.clone().unwrap_or_default();
            // The key after which the next sweep starts: the last one visited by this one.
            let next: Option<(String, String, String)> = c
                .prepare_cached(
                    "SELECT ns, grp, id FROM items WHERE (ns, grp, id) > (?1, ?2, ?3)
                     ORDER BY ns, grp, id LIMIT 1 OFFSET ?4",
                )?
                .query_row(params![ns, grp, id, SWEEP as i64 - 1], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?;
            // The expired items of that key range, in one walk of it (the range ends at `next`,
            // or at the end of the table when fewer than SWEEP items are left).
            match &next {
                Some((ns2, grp2, id2)) => c
                    .prepare_cached(
                        "DELETE FROM items WHERE (ns, grp, id) > (?1, ?2, ?3) AND (ns, grp, id) <= (?4, ?5, ?6)
                           AND exp <= ?7",
                    )?
                    .execute(params![ns, grp, id, ns2, grp2, id2, now])?,
                None => c
                    .prepare_cached("DELETE FROM items WHERE (ns, grp, id) > (?1, ?2, ?3) AND exp <= ?4")?
                    .execute(params![ns, grp, id, now])?,
            };
            sweep.after = next;
        }
        Ok(())
    }
}

impl TrackerBackend for Durable {
    fn claim_batch<'a>(&'a self, group: &'a str, claim: BatchClaim<'a>) -> BoxFuture<'a, ClaimBatch> {
        self.write_tx(move |c, ns, now| {
            let out = claim_batch(c, ns, group, claim, now)?;
            self.sweep_items(c, now, claim.ids.len())?;
            Ok(out)
        })
    }
    fn apply<'a>(
        &'a self,
        group: &'a str,
        ops: &'a [ItemOp],
        retention_ms: u64,
    ) -> BoxFuture<'a, Vec<OpResult>> {
        self.write_tx(move |c, ns, now| {
            let out = ops
                .iter()
                .map(|op| apply_one(c, ns, group, op, now, retention_ms))
                .collect::<Sql<Vec<_>>>()?;
            self.sweep_items(c, now, ops.len())?;
            Ok(out)
        })
    }
    fn read<'a>(&'a self, group: &'a str, ids: &'a [String]) -> BoxFuture<'a, Vec<ItemState>> {
        self.read_tx(move |c, ns, now| {
            ids.iter().map(|id| Ok(state(load(c, ns, group, id, now)?.as_ref(), id, now))).collect()
        })
    }
    fn list<'a>(&'a self, group: &'a str, query: ListQuery, _retention_ms: u64) -> BoxFuture<'a, ItemList> {
        self.read_tx(move |c, ns, now| list(c, ns, group, query, now))
    }
}
