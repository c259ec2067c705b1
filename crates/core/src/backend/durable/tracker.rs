//! Item Tracker on the durable store: the record of an item is a row (its fields as columns,
//! see `item_record`), read, changed by `rules::tracker` (as in the in-memory store), and written
//! back, all in one transaction.

use rusqlite::{params, Connection};

use super::item_record::{from_row, Encoded};
use super::{checked_scan, item_key, Durable, Fail, Sql};
use crate::backend::BoxFuture;
use crate::rules::tracker::{claim, decide, fresh, page, take, write, Claim, Decision};
use crate::tracker::{
    not_owner, BatchClaim, BatchOutcome, ClaimBatch, ItemList, ItemOp, ItemState, ItemStatus, ListQuery,
    OpResult, Outcome, Record, TrackerBackend,
};

/// A group of items: its name, and the start of its rows' keys (see `item_key`).
struct Group<'a> {
    name: &'a str,
    prefix: Vec<u8>,
}

impl<'a> Group<'a> {
    fn new(ns: &str, name: &'a str) -> Group<'a> {
        Group { name, prefix: item_key::group(ns, name) }
    }
    fn key(&self, id: &str) -> Vec<u8> {
        item_key::item(&self.prefix, id)
    }
}

/// The live record of `id` (one whose retention has not run out).
/// `key` is the item's key; `id` names it in an error.
fn load(c: &Connection, key: &[u8], id: &str, now: i64) -> Sql<Option<Record>> {
    let mut st =
        c.prepare_cached("SELECT exp, s, a, o, l, c, u, d, e, t, r, n FROM items WHERE k = ?1 AND exp > ?2")?;
    let mut rows = st.query(params![key, now])?;
    match rows.next()? {
        Some(r) => Ok(Some(from_row(id, r, 0)?)),
        None => Ok(None),
    }
}

/// A record ready to be bound as its columns (see `item_record`).
struct Stored<'r> {
    rec: &'r Record,
    enc: Encoded,
}

impl<'r> Stored<'r> {
    fn new(rec: &'r Record) -> Sql<Stored<'r>> {
        Ok(Stored { rec, enc: Encoded::new(rec)? })
    }
}

/// Writes the record of `id`, over any row it has.
fn save(c: &Connection, key: &[u8], rec: &Stored<'_>) -> Sql<()> {
    let r = rec.rec;
    c.prepare_cached(
        "INSERT INTO items (k, exp, s, a, o, l, c, u, d, e, t, r, n)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
         ON CONFLICT (k) DO UPDATE SET exp = excluded.exp, s = excluded.s, a = excluded.a,
           o = excluded.o, l = excluded.l, c = excluded.c, u = excluded.u, d = excluded.d, e = excluded.e,
           t = excluded.t, r = excluded.r, n = excluded.n",
    )?
    .execute(params![key, r.x, rec.enc.s, r.a, rec.enc.o, r.l, r.c, r.u, r.d, r.e, rec.enc.t, r.r, r.n])?;
    Ok(())
}

/// Writes the record of an id that has no row; false (nothing written) when it has one.
fn insert_new(c: &Connection, key: &[u8], rec: &Stored<'_>) -> Sql<bool> {
    let r = rec.rec;
    let n = c
        .prepare_cached(
            "INSERT INTO items (k, exp, s, a, o, l, c, u, d, e, t, r, n)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) ON CONFLICT DO NOTHING",
        )?
        .execute(params![
            key, r.x, rec.enc.s, r.a, rec.enc.o, r.l, r.c, r.u, r.d, r.e, rec.enc.t, r.r, r.n
        ])?;
    Ok(n == 1)
}

fn state(rec: Option<&Record>, id: &str, now: i64) -> ItemState {
    rec.map(|r| r.to_state(id, now)).unwrap_or_else(|| ItemState::unknown(id))
}

/// Applies one operation at `now`: loads the row, decides by [`decide`], writes. `earliest`
/// comes down to the expiry of a record written.
fn apply_one(
    c: &Connection,
    g: &Group<'_>,
    op: &ItemOp,
    now: i64,
    retention_ms: u64,
    earliest: &mut i64,
) -> Sql<OpResult> {
    let id = op.id();
    let key = g.key(id);
    let result =
        |outcome, owner, item| OpResult { id: id.to_string(), action: op.action(), outcome, owner, item };
    if let ItemOp::Claim { owner, .. } = op {
        // Most claims are of new ids: one insert that skips an existing row, without a read
        // first (when the rules take an item that has no record). An id that has a row (live
        // or expired) goes on as below.
        if decide(op, None, now) == Decision::Take {
            let mut rec = fresh(now);
            write(op, &mut rec, now, retention_ms);
            if insert_new(c, &key, &Stored::new(&rec)?)? {
                *earliest = (*earliest).min(rec.x);
                return Ok(result(Outcome::Done, Some(owner.clone()), rec.to_state(id, now)));
            }
        }
    }
    let current = load(c, &key, id, now)?;
    Ok(match decide(op, current.as_ref(), now) {
        Decision::Busy(s) => result(Outcome::Busy(s), None, state(current.as_ref(), id, now)),
        Decision::NotOwner => {
            let refused = Outcome::Refused(not_owner(g.name, id, current.as_ref()));
            result(refused, None, state(current.as_ref(), id, now))
        }
        Decision::Remove => {
            c.prepare_cached("DELETE FROM items WHERE k = ?1")?.execute(params![key])?;
            result(Outcome::Done, None, state(current.as_ref(), id, now))
        }
        d @ (Decision::Take | Decision::Finish) => {
            let mut rec = current.unwrap_or_else(|| fresh(now));
            write(op, &mut rec, now, retention_ms);
            save(c, &key, &Stored::new(&rec)?)?;
            *earliest = (*earliest).min(rec.x);
            let owner = match (d, op) {
                (Decision::Take, ItemOp::Claim { owner, .. }) => Some(owner.clone()),
                _ => None,
            };
            result(Outcome::Done, owner, rec.to_state(id, now))
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
/// Returns the claim with the earliest expiry of the records written.
fn claim_batch(c: &Connection, g: &Group<'_>, b: BatchClaim<'_>, now: i64) -> Sql<(ClaimBatch, i64)> {
    let mut batch = Batch::new(b, now)?;
    // (id, position) pairs sorted: equal ids keep the caller's order, so a repeat comes after
    // its first occurrence; the ids sit beside their positions (no indirection while sorting).
    let mut order: Vec<(&str, usize)> = b.ids.iter().enumerate().map(|(i, id)| (id.as_str(), i)).collect();
    order.sort_unstable();
    let (mut first, mut repeats) = (Vec::with_capacity(order.len()), Vec::new());
    for (k, &(id, i)) in order.iter().enumerate() {
        if k > 0 && order[k - 1].0 == id {
            repeats.push(i);
        } else {
            first.push(i);
        }
    }
    let mut insert = c.prepare_cached(
        "INSERT INTO items (k, exp, s, a, o, l, c, u, d, e, t, r, n)
         SELECT CAST(?1 || value AS BLOB), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13 FROM json_each(?14)
         WHERE true ON CONFLICT DO NOTHING",
    )?;
    for chunk in first.chunks(CHUNK) {
        if !batch.new_taken {
            claim_each(c, g, &mut batch, chunk)?;
            continue;
        }
        let ids: Vec<&str> = chunk.iter().map(|&i| b.ids[i].as_str()).collect();
        let list = serde_json::to_string(&ids).map_err(|e| Fail::Corrupt(e.to_string()))?;
        c.prepare_cached("SAVEPOINT chunk")?.execute([])?;
        let (r, e) = (&batch.new_rec, &batch.new_enc);
        let inserted = insert
            .execute(params![g.prefix, r.x, e.s, r.a, e.o, r.l, r.c, r.u, r.d, r.e, e.t, r.r, r.n, list])?;
        if inserted != chunk.len() {
            c.prepare_cached("ROLLBACK TO chunk")?.execute([])?;
        }
        c.prepare_cached("RELEASE chunk")?.execute([])?;
        if inserted != chunk.len() {
            claim_each(c, g, &mut batch, chunk)?;
        }
    }
    for i in repeats {
        batch.decide(c, &g.key(&b.ids[i]), i)?;
    }
    let claimed = ClaimBatch {
        owner: b.owner.to_string(),
        lease_expires_at: batch.lease_end,
        outcomes: batch.outcomes,
        attempts: batch.attempts,
    };
    Ok((claimed, batch.earliest))
}

/// Claims the distinct ids `chunk` (in key order) one by one. Runs of ids alike are common (a
/// first run: all new; a re-run: mostly known), so after an insert that found a row the next id
/// is read first, and after a read that found none the next one is inserted first: each id costs
/// one B-tree step, apart from where a run changes.
fn claim_each(c: &Connection, g: &Group<'_>, batch: &mut Batch<'_>, chunk: &[usize]) -> Sql<()> {
    let mut expect_new = batch.new_taken;
    for &i in chunk {
        let key = g.key(&batch.claim.ids[i]);
        if expect_new && insert_new(c, &key, &batch.stored())? {
            continue;
        }
        expect_new = batch.decide(c, &key, i)?;
    }
    Ok(())
}

/// A batch claim under way: the record of its new ids, and the outcomes so far.
struct Batch<'a> {
    claim: BatchClaim<'a>,
    now: i64,
    lease_end: i64,
    new_rec: Record,
    /// The new record's columns, encoded once.
    new_enc: Encoded,
    outcomes: Vec<BatchOutcome>,
    attempts: Vec<u32>,
    /// The earliest expiry of the records written (the new record's, or earlier).
    earliest: i64,
    /// Whether the rules claim an id that has no record (so it may be inserted without a read).
    new_taken: bool,
}

impl<'a> Batch<'a> {
    fn new(claim: BatchClaim<'a>, now: i64) -> Sql<Batch<'a>> {
        let lease_end = now + claim.lease_ms as i64;
        let mut new_rec = fresh(now);
        take(&mut new_rec, claim.owner, now, lease_end, claim.retention_ms, claim.given());
        let new_enc = Encoded::new(&new_rec)?;
        let n = claim.ids.len();
        Ok(Batch {
            claim,
            now,
            lease_end,
            outcomes: vec![BatchOutcome::Claimed; n],
            attempts: vec![new_rec.a; n],
            earliest: new_rec.x,
            new_taken: crate::rules::tracker::claim(ItemStatus::None, claim.reclaim_completed) == Claim::Take,
            new_rec,
            new_enc,
        })
    }

    /// The new record, to bind.
    fn stored(&self) -> Stored<'_> {
        Stored { rec: &self.new_rec, enc: self.new_enc.clone() }
    }

    /// Reads id number `i` (whose key is `key`) and claims it when the rules allow (see
    /// [`claim`]); true when it had no live record and got the new one.
    fn decide(&mut self, c: &Connection, key: &[u8], i: usize) -> Sql<bool> {
        let (b, now) = (self.claim, self.now);
        let id = &b.ids[i];
        let current = load(c, key, id, now)?;
        let decision =
            claim(current.as_ref().map_or(ItemStatus::None, |r| r.status_at(now)), b.reclaim_completed);
        let (a, got_new) = match (decision, current) {
            (Claim::Take, Some(mut rec)) => {
                take(&mut rec, b.owner, now, self.lease_end, b.retention_ms, b.given());
                save(c, key, &Stored::new(&rec)?)?;
                self.earliest = self.earliest.min(rec.x);
                (rec.a, false)
            }
            (Claim::Take, None) => {
                // No live record (none, or one whose retention ran out): the new record.
                save(c, key, &self.stored())?;
                (self.new_rec.a, true)
            }
            (_, rec) => (rec.map_or(0, |r| r.a), false),
        };
        let outcome = decision.batch();
        self.outcomes[i] = outcome;
        self.attempts[i] = a;
        Ok(got_new)
    }
}

/// The group's live records, in key order.
///
/// The scan has only the group's start in the SQL: its end and the keys' order are checked in
/// Rust (see `checked_scan`), so a damaged page fails the call instead of shortening the list.
/// The retention (`exp`) is checked here too, after the order.
fn list(c: &Connection, g: &Group<'_>, q: ListQuery, now: i64) -> Sql<ItemList> {
    let mut st = c.prepare_cached(
        "SELECT k, exp, s, a, o, l, c, u, d, e, t, r, n FROM items WHERE k > ?1 ORDER BY k",
    )?;
    let end = item_key::after_all(&g.prefix);
    let mut records = Vec::new();
    checked_scan::scan(
        st.query(params![g.prefix])?,
        |r| r.get::<_, Vec<u8>>(0),
        |key| *key < end,
        || format!("group {:?}", g.name),
        |key, r| {
            if r.get::<_, i64>(1)? <= now {
                return Ok(true);
            }
            let id = match key.strip_prefix(g.prefix.as_slice()).map(std::str::from_utf8) {
                Some(Ok(id)) => id.to_string(),
                _ => return Err(Fail::Corrupt(format!("item key {key:?} in group {:?}", g.name))),
            };
            let rec = from_row(&id, r, 1)?;
            records.push((id, rec));
            Ok(true)
        },
    )?;
    Ok(page(records.iter().map(|(id, r)| (id, r)), now, q))
}

impl TrackerBackend for Durable {
    fn claim_batch<'a>(&'a self, group: &'a str, claim: BatchClaim<'a>) -> BoxFuture<'a, ClaimBatch> {
        self.write_tx(move |c, ns, now| {
            let (out, earliest) = claim_batch(c, &Group::new(ns, group), claim, now)?;
            self.sweep_items(c, now, claim.ids.len(), earliest)?;
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
            let (g, mut earliest) = (Group::new(ns, group), i64::MAX);
            let out = ops
                .iter()
                .map(|op| apply_one(c, &g, op, now, retention_ms, &mut earliest))
                .collect::<Sql<Vec<_>>>()?;
            self.sweep_items(c, now, ops.len(), earliest)?;
            Ok(out)
        })
    }
    fn read<'a>(&'a self, group: &'a str, ids: &'a [String]) -> BoxFuture<'a, Vec<ItemState>> {
        self.read_tx(move |c, ns, now| {
            let g = Group::new(ns, group);
            ids.iter().map(|id| Ok(state(load(c, &g.key(id), id, now)?.as_ref(), id, now))).collect()
        })
    }
    fn list<'a>(&'a self, group: &'a str, query: ListQuery, _retention_ms: u64) -> BoxFuture<'a, ItemList> {
        self.read_tx(move |c, ns, now| list(c, &Group::new(ns, group), query, now))
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::durable::damage;
    use crate::backend::durable::{Durability, Durable};
    use crate::tracker::{ItemOp, ListFilter, ListQuery, TrackerBackend};

    const ITEMS: usize = 3_000;

    fn ids() -> Vec<String> {
        (0..ITEMS).map(|i| format!("item-{i:05}")).collect()
    }

    /// A file made before the result and note columns (its items' table without `r` and `n`)
    /// gets them when opened: its items read back as before, with no result nor note, and a
    /// completion's result and a claim's note are stored and read back.
    #[tokio::test]
    async fn a_file_without_the_result_and_note_columns_gets_them_on_open() {
        let path = damage::temp("old-items.db");
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        let claim = |id: &str, note: Option<&str>| ItemOp::Claim {
            id: id.into(),
            owner: crate::token::new_token(),
            lease_ms: 60_000,
            reclaim_completed: false,
            max_attempts: None,
            note: note.map(String::from),
        };
        d.apply("g", &[claim("old", None)], 86_400_000).await.unwrap();
        drop(d);
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("ALTER TABLE items DROP COLUMN r; ALTER TABLE items DROP COLUMN n").unwrap();
        drop(c);
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        let old = &d.read("g", &["old".into()]).await.unwrap()[0];
        assert_eq!((old.attempts, old.result.as_deref(), old.note.as_deref()), (1, None, None));
        d.apply("g", &[claim("new", Some("page 3"))], 86_400_000).await.unwrap();
        let done =
            ItemOp::Complete { id: "old".into(), owner: None, keep_ms: 60_000, result: Some("[1,2]".into()) };
        d.apply("g", &[done], 86_400_000).await.unwrap();
        let got = d.read("g", &["old".into(), "new".into()]).await.unwrap();
        assert_eq!(got[0].result.as_deref(), Some("[1,2]"));
        assert_eq!(got[1].note.as_deref(), Some("page 3"));
        damage::remove(&path);
    }

    /// Damaged pages in the middle of a file of 3,000 items: listing the group either returns
    /// all 3,000 or fails with ERR_STORAGE naming the file, never a short list. (SQLite ends a
    /// range scan without an error when the record at its end is damaged.)
    #[tokio::test]
    async fn a_damaged_page_fails_a_list_instead_of_shortening_it() {
        let path = damage::temp("items.db");
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        for chunk in ids().chunks(500) {
            let claims: Vec<ItemOp> = chunk
                .iter()
                .map(|id| ItemOp::Claim {
                    id: id.clone(),
                    owner: "o".into(),
                    lease_ms: 3_600_000,
                    reclaim_completed: false,
                    max_attempts: None,
                    note: None,
                })
                .collect();
            d.apply("g", &claims, 86_400_000).await.unwrap();
        }
        drop(d);
        let failed = damage::failures(&path, damage::middle, async |at, d| {
            let query = ListQuery { filter: ListFilter::All, offset: 0, limit: 10_000 };
            let list = d.list("g", query, 86_400_000).await?;
            let got = (list.counts.total() as usize, list.items.len());
            assert_eq!(got, (ITEMS, ITEMS), "damage at byte {at}: a short list, no error");
            // A lookup by id cannot tell an item whose key bytes were damaged from an absent
            // one; what it finds damaged fails.
            d.read("g", &ids()).await.map(|_| ())
        })
        .await;
        assert!(failed > 0, "some damage was found (else this test tells nothing)");
    }
}
