//! Item Tracker on the embedded store.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use super::batch_run::{BatchRun, NO_RUN};
use super::expiries::SLICE;
use super::expiry_buckets::ExpiryBuckets;
use super::named::Named;
use super::place_order::sort_places;
use super::ranked::RankedSet;
use super::{guard, now_ms, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::tracker::{
    expiry, not_owner, BatchClaim, BatchOutcome, ClaimBatch, Counts, ItemList, ItemOp, ItemState, ItemStatus,
    ListFilter, ListQuery, OpResult, Outcome, Record, TrackerBackend, Transition, MAX_TIMELINE,
};

/// Hash maps keyed by caller-given names: foldhash, seeded at random per process (fast, and no
/// predictable collisions for ids that come from outside).
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// An item id, shared by a group's record map and its indexes: one allocation per id.
type Id = Arc<str>;

#[derive(Default)]
pub struct TrackerTable {
    groups: Named<Group>,
    /// Every group's name, in no order: the sweep visits them in turn, one per
    /// [`SWEEP_EVERY`] writes, so groups nobody writes to again give their expired records back
    /// without any call visiting every group.
    ring: Vec<String>,
    /// The group the sweep visits next (a position in `ring`).
    cursor: usize,
    /// Writes so far.
    writes: u64,
}

struct Entry {
    rec: Record,
    /// The record's position in its bucket of `expiry` (the bucket of `rec.x`).
    at: u32,
    /// The position of the record's place in `run`, if it is there (see [`BatchRun::holds`]).
    run_at: u32,
}

#[derive(Default)]
struct Group {
    items: Map<Id, Entry>,
    /// Every record's expiry, to forget expired records without scanning.
    expiry: ExpiryBuckets<Id>,
    /// Per status, in `listItems` order: in progress by lease end, completed and failed by
    /// expiry, each ranked so a page or a count costs O(log n + page).
    by_status: [RankedSet<(i64, Id)>; 3],
    /// Places in `by_status` not inserted yet: a call collects its records' new places and
    /// inserts them at its end, sorted, a claim batch's ids in one pass ([`Group::flush`]).
    /// Empty between calls.
    pending: [Vec<(i64, Id)>; 3],
    /// In-progress places of the latest claim batch, not in `by_status[0]` yet: joined to it when
    /// a page is listed or the next batch opens its run ([`Group::merge_run`]).
    run: BatchRun,
    /// Whether new in-progress places at the run's score go to `run` (during a claim batch).
    batching: bool,
    /// The group's position in [`TrackerTable::ring`].
    ring_at: usize,
}

const SWEEP_EVERY: u64 = 16;

/// A record's status index and its position there.
fn slot(r: &Record) -> Option<(usize, i64)> {
    match &*r.s {
        "in_progress" => Some((0, r.l)),
        "completed" => Some((1, r.x)),
        "failed" => Some((2, r.x)),
        _ => None,
    }
}

/// How many keys of `set` have a score up to `t`.
fn up_to(set: &RankedSet<(i64, Id)>, t: i64) -> usize {
    set.count_while(|(at, _)| *at <= t)
}

impl Group {
    /// Forgets records whose expiry passed, at most `max` per call: clean-up in bounded slices,
    /// so a mass expiry never blocks the event loop in one call (later calls go on; writers pass
    /// at least twice what they write, so expired records cannot pile up in a group in use). A
    /// record left for a later call already counts as absent.
    fn purge(&mut self, now: i64, max: usize) {
        for id in self.expiry.due(now, max) {
            if let Some(old) = self.items.remove(&id) {
                self.unindex(&old, id);
            }
        }
    }

    fn unindex(&mut self, e: &Entry, id: Id) {
        if let Some((k, at)) = slot(&e.rec) {
            self.unplace(k, (at, id), e.run_at);
        }
    }

    /// Takes a record's place out of status index `k`: out of `run` when it is there (at
    /// `run_at`), else out of the ranked index (out of `pending` when not inserted yet: pending
    /// places go in first, so a call that changes one record many times stays linear).
    fn unplace(&mut self, k: usize, place: (i64, Id), run_at: u32) {
        if k == 0 && self.run.holds(run_at, &place.1) {
            if let Some(moved) = self.run.remove(run_at) {
                if let Some(m) = self.items.get_mut(moved) {
                    m.run_at = run_at;
                }
            }
            return;
        }
        if !self.by_status[k].remove(&place) {
            self.flush();
            self.by_status[k].remove(&place);
        }
    }

    /// Inserts the pending places, each index's sorted run at once (see
    /// [`RankedSet::extend_sorted`]).
    fn flush(&mut self) {
        for (set, pending) in self.by_status.iter_mut().zip(&mut self.pending) {
            if !pending.is_empty() {
                let mut run = std::mem::take(pending);
                sort_places(&mut run);
                set.extend_sorted(run);
            }
        }
    }

    /// Joins the run's places to the ranked index (sorted, in one pass), so that it holds every
    /// place again.
    fn merge_run(&mut self) {
        if !self.run.is_empty() {
            self.pending[0].extend(self.run.take());
            self.flush();
        }
    }

    /// Starts a claim batch's run at `score` (its lease end), after merging the previous one.
    fn open_run(&mut self, score: i64) {
        self.merge_run();
        self.run.open(score);
        self.batching = true;
    }

    /// Puts a new place: into the run during a claim batch (returns its position there), else
    /// into `pending`.
    fn place(&mut self, k: usize, s: i64, key: Id) -> u32 {
        if self.batching && k == 0 && s == self.run.score() {
            return self.run.push(key);
        }
        self.pending[k].push((s, key));
        NO_RUN
    }

    /// Takes a record out of its expiry bucket (time `x`, position `at`).
    fn unexpire(&mut self, x: i64, at: u32) {
        if let Some(moved) = self.expiry.remove(x, at) {
            if let Some(e) = self.items.get_mut(moved) {
                e.at = at;
            }
        }
    }

    /// Changes the record of `id` (see [`Group::change`]) and returns the item's state after
    /// the change.
    fn update(&mut self, id: &str, now: i64, change: impl FnOnce(&mut Record)) -> ItemState {
        self.change(id, now, change);
        self.get(id).map(|r| r.to_state(id, now)).unwrap_or_else(|| ItemState::unknown(id))
    }

    fn get(&self, id: &str) -> Option<&Record> {
        self.items.get(id).map(|e| &e.rec)
    }

    /// Changes the record of `id` in place (a fresh one when there is none) and keeps the
    /// indexes in step: the expiry index at once, the status index through `pending`.
    fn change(&mut self, id: &str, now: i64, change: impl FnOnce(&mut Record)) {
        let Some((key, e)) = self.items.get_key_value(id) else {
            return self.add(id, now, change);
        };
        let key = key.clone();
        let (old_x, old_at, old_slot) = (e.rec.x, e.at, slot(&e.rec));
        let e = self.items.get_mut(id).expect("found above");
        change(&mut e.rec);
        let (new_x, new_slot) = (e.rec.x, slot(&e.rec));
        let old_run_at = e.run_at;
        if old_slot != new_slot {
            e.run_at = NO_RUN;
        }
        if new_x != old_x {
            e.at = self.expiry.add(new_x, key.clone());
            self.unexpire(old_x, old_at);
        }
        if old_slot == new_slot {
            return;
        }
        if let Some((k, s)) = old_slot {
            self.unplace(k, (s, key.clone()), old_run_at);
        }
        if let Some((k, s)) = new_slot {
            let run_at = self.place(k, s, key.clone());
            if run_at != NO_RUN {
                self.items.get_mut(&key).expect("changed above").run_at = run_at;
            }
        }
    }

    /// Makes the record of `id`, which has none (see [`Group::change`]).
    fn add(&mut self, id: &str, now: i64, change: impl FnOnce(&mut Record)) {
        let mut rec = fresh(now);
        change(&mut rec);
        let key: Id = Arc::from(id);
        let at = self.expiry.add(rec.x, key.clone());
        let run_at = match slot(&rec) {
            Some((k, s)) => self.place(k, s, key.clone()),
            None => NO_RUN,
        };
        self.items.insert(key, Entry { rec, at, run_at });
    }

    /// The status and attempts of the live record of `id`, after forgetting it when it expired
    /// and a purge slice has not reached it yet (one lookup when it is live or absent).
    fn live(&mut self, id: &str, now: i64) -> Option<(ItemStatus, u32)> {
        let (x, status, a) = self.items.get(id).map(|e| (e.rec.x, e.rec.status_at(now), e.rec.a))?;
        if x <= now {
            self.remove(id);
            return None;
        }
        Some((status, a))
    }

    fn remove(&mut self, id: &str) -> Option<Record> {
        let (key, old) = self.items.remove_entry(id)?;
        self.unexpire(old.rec.x, old.at);
        self.unindex(&old, key);
        Some(old.rec)
    }

    /// One page and the counts, from the status indexes: the same as the Redis script
    /// `tracker_list.lua`. When a purge slice left expired records, the abandoned count leaves
    /// out leases that ended `retention_ms` ago (records that may have expired), and the page
    /// skips expired records. The batch run is merged first (work bounded by one batch).
    fn list(&mut self, now: i64, q: ListQuery, retention_ms: u64) -> ItemList {
        debug_assert!(self.pending.iter().all(Vec::is_empty), "calls flush their places");
        self.merge_run();
        let exact = !self.expiry.any_due(now);
        let [ip, done, failed] = &self.by_status;
        let ended = up_to(ip, now);
        let abandoned = if exact { ended } else { ended - up_to(ip, now - retention_ms as i64) };
        let (c_first, f_first) = (up_to(done, now), up_to(failed, now));
        let counts = Counts {
            in_progress: (ip.len() - ended) as u64,
            abandoned: abandoned as u64,
            completed: (done.len() - c_first) as u64,
            failed: (failed.len() - f_first) as u64,
        };
        let segments = [
            (ListFilter::InProgress, ip, ended, counts.in_progress),
            (ListFilter::Abandoned, ip, ended - abandoned, counts.abandoned),
            (ListFilter::Failed, failed, f_first, counts.failed),
            (ListFilter::Completed, done, c_first, counts.completed),
        ];
        let (mut skip, mut want) = (q.offset, q.limit);
        let mut items = Vec::new();
        for (filter, set, first, count) in segments {
            if want == 0 {
                break;
            }
            if q.filter != ListFilter::All && q.filter != filter {
                continue;
            }
            if skip >= count {
                skip -= count;
                continue;
            }
            let n = want.min(count - skip);
            for (_, id) in set.iter_from(first + skip as usize).take(n as usize) {
                if let Some(r) = self.get(id).filter(|r| r.x > now) {
                    items.push(r.to_state(id, now));
                }
            }
            want -= n;
            skip = 0;
        }
        let end = q.offset + q.limit;
        ItemList { counts, items, next_offset: if end < counts.of(q.filter) { Some(end) } else { None } }
    }
}

fn push(t: &mut Vec<Transition>, tr: Transition) {
    // Grow by one: most items keep a short timeline, and Vec's first growth would reserve 4.
    t.reserve_exact(1);
    t.push(tr);
    if t.len() > MAX_TIMELINE {
        let extra = t.len() - MAX_TIMELINE;
        t.drain(..extra);
    }
}

/// Applies one operation at `now`. The same rules as the Redis script `tracker_apply.lua`.
fn apply_one(group_name: &str, g: &mut Group, op: &ItemOp, now: i64, retention_ms: u64) -> OpResult {
    let id = op.id();
    let live = g.live(id, now);
    let result =
        |outcome, owner, item| OpResult { id: id.to_string(), action: op.action(), outcome, owner, item };
    let current = |g: &Group| match g.get(id) {
        Some(r) => r.to_state(id, now),
        None => ItemState::unknown(id),
    };
    match op {
        ItemOp::Claim { owner, lease_ms, reclaim_completed, .. } => {
            match live {
                Some((ItemStatus::InProgress, _)) => {
                    return result(Outcome::Busy(ItemStatus::InProgress), None, current(g))
                }
                Some((ItemStatus::Completed, _)) if !reclaim_completed => {
                    return result(Outcome::Busy(ItemStatus::Completed), None, current(g))
                }
                _ => {}
            }
            let lease_end = now + *lease_ms as i64;
            let claim = |rec: &mut Record| take(rec, owner, now, lease_end, retention_ms);
            if live.is_some() {
                g.change(id, now, claim);
            } else {
                g.add(id, now, claim);
            }
            result(Outcome::Done, Some(owner.clone()), current(g))
        }
        ItemOp::Complete { owner, keep_ms, .. } | ItemOp::Fail { owner, keep_ms, .. } => {
            if let Some(o) = owner {
                let rec = g.get(id);
                if rec.and_then(|r| r.o.as_ref()) != Some(o) {
                    return result(Outcome::Refused(not_owner(group_name, id, rec)), None, current(g));
                }
            }
            let (status, error) = match op {
                ItemOp::Fail { error, .. } => ("failed", Some(error)),
                _ => ("completed", None),
            };
            let state = g.update(id, now, |rec| finish(rec, status, error, now, *keep_ms));
            result(Outcome::Done, None, state)
        }
        ItemOp::Unset { .. } => {
            let old = g.remove(id);
            let state = match &old {
                Some(r) => r.to_state(id, now),
                None => ItemState::unknown(id),
            };
            result(Outcome::Done, None, state)
        }
    }
}

/// A completion's or failure's change to a record: the same rules as the Redis scripts.
pub(crate) fn finish(rec: &mut Record, status: &'static str, error: Option<&String>, now: i64, keep_ms: u64) {
    rec.s = status.into();
    rec.l = 0;
    rec.u = now;
    rec.d = now;
    if let Some(e) = error {
        rec.e = Some(e.clone());
    }
    rec.x = expiry(now, keep_ms);
    push(&mut rec.t, Transition { at: now, status: status.into(), attempt: rec.a, error: error.cloned() });
}

/// A claim's change to a record: the same rules as the Redis scripts.
pub(crate) fn take(rec: &mut Record, owner: &str, now: i64, lease_end: i64, retention_ms: u64) {
    if rec.s == "in_progress" {
        push(&mut rec.t, Transition { at: rec.l, status: "abandoned".into(), attempt: rec.a, error: None });
    }
    rec.a += 1;
    rec.s = "in_progress".into();
    rec.o = Some(owner.to_string());
    rec.l = lease_end;
    rec.u = now;
    rec.d = 0;
    rec.x = lease_end + retention_ms as i64;
    push(&mut rec.t, Transition { at: now, status: "in_progress".into(), attempt: rec.a, error: None });
}

pub(crate) fn fresh(now: i64) -> Record {
    Record { s: Cow::Borrowed(""), a: 0, o: None, l: 0, c: now, u: now, d: 0, e: None, x: 0, t: Vec::new() }
}

impl TrackerTable {
    /// The group, after a purge of up to `max(SLICE, 2 * writes)` records.
    fn group_mut(&mut self, group: &str, now: i64, writes: usize) -> &mut Group {
        self.writes += 1;
        if self.writes.is_multiple_of(SWEEP_EVERY) {
            self.sweep_one(now);
        }
        if !self.groups.contains_key(group) {
            let g = Group { ring_at: self.ring.len(), ..Group::default() };
            self.ring.push(group.to_string());
            self.groups.insert(group, g);
        }
        let g = self.groups.get_mut(group).expect("inserted above");
        g.purge(now, SLICE.max(2 * writes));
        g
    }

    /// Purges one slice of the next group in turn, and drops it once empty.
    fn sweep_one(&mut self, now: i64) {
        if self.ring.is_empty() {
            return;
        }
        self.cursor %= self.ring.len();
        let name = self.ring[self.cursor].clone();
        let Some(g) = self.groups.get_mut(&name) else { return };
        g.purge(now, SLICE);
        if g.items.is_empty() {
            // Its place in the ring goes to the last group, visited next.
            self.drop_group(&name);
        } else {
            self.cursor += 1;
        }
    }

    /// Removes a group and its place in the ring.
    fn drop_group(&mut self, name: &str) {
        let Some(g) = self.groups.remove(name) else { return };
        self.ring.swap_remove(g.ring_at);
        if let Some(moved) = self.ring.get(g.ring_at) {
            if let Some(m) = self.groups.get_mut(moved) {
                m.ring_at = g.ring_at;
            }
        }
    }

    pub fn apply(&mut self, group: &str, ops: &[ItemOp], retention_ms: u64) -> Vec<OpResult> {
        let now = now_ms();
        let g = self.group_mut(group, now, ops.len());
        let out = ops.iter().map(|op| apply_one(group, g, op, now, retention_ms)).collect();
        g.flush();
        if g.items.is_empty() {
            self.drop_group(group);
        }
        out
    }

    pub fn claim_batch(&mut self, group: &str, c: BatchClaim<'_>) -> ClaimBatch {
        let now = now_ms();
        let lease_end = now + c.lease_ms as i64;
        let g = self.group_mut(group, now, c.ids.len());
        g.items.reserve(c.ids.len());
        g.open_run(lease_end);
        let mut outcomes = Vec::with_capacity(c.ids.len());
        let mut attempts = Vec::with_capacity(c.ids.len());
        for id in c.ids {
            let take_it = |rec: &mut Record| take(rec, c.owner, now, lease_end, c.retention_ms);
            let (outcome, a) = match g.live(id, now) {
                None => {
                    // A new id: made at once, with no second lookup.
                    g.add(id, now, take_it);
                    (BatchOutcome::Claimed, 1)
                }
                Some((ItemStatus::InProgress, a)) => (BatchOutcome::InProgress, a),
                Some((ItemStatus::Completed, a)) if !c.reclaim_completed => (BatchOutcome::Completed, a),
                Some((_, a)) => {
                    g.change(id, now, take_it);
                    (BatchOutcome::Claimed, a + 1)
                }
            };
            attempts.push(a);
            outcomes.push(outcome);
        }
        g.batching = false;
        g.flush();
        if g.items.is_empty() {
            self.drop_group(group);
        }
        ClaimBatch { owner: c.owner.to_string(), lease_expires_at: lease_end, outcomes, attempts }
    }

    pub fn read(&mut self, group: &str, ids: &[String]) -> Vec<ItemState> {
        let now = now_ms();
        let g = self.groups.get_mut(group);
        match g {
            None => ids.iter().map(|id| ItemState::unknown(id)).collect(),
            Some(g) => {
                g.purge(now, SLICE);
                ids.iter()
                    .map(|id| match g.get(id).filter(|r| r.x > now) {
                        Some(r) => r.to_state(id, now),
                        None => ItemState::unknown(id),
                    })
                    .collect()
            }
        }
    }

    pub fn list(&mut self, group: &str, q: ListQuery, retention_ms: u64) -> ItemList {
        let now = now_ms();
        let Some(g) = self.groups.get_mut(group) else {
            return ItemList { counts: Counts::default(), items: Vec::new(), next_offset: None };
        };
        g.purge(now, SLICE);
        let out = g.list(now, q, retention_ms);
        if g.items.is_empty() {
            self.drop_group(group);
        }
        out
    }
}

/// One page of a group's items, from all its live records: in progress (by lease expiry),
/// abandoned (by lease expiry), failed, completed (by record expiry).
pub(crate) fn page<'a>(
    records: impl Iterator<Item = (&'a String, &'a Record)>,
    now: i64,
    q: ListQuery,
) -> ItemList {
    let mut live = Vec::new();
    let mut abandoned = Vec::new();
    let mut failed = Vec::new();
    let mut completed = Vec::new();
    for (id, r) in records {
        match r.status_at(now) {
            ItemStatus::InProgress => live.push((r.l, id, r)),
            ItemStatus::Abandoned => abandoned.push((r.l, id, r)),
            ItemStatus::Failed => failed.push((r.x, id, r)),
            ItemStatus::Completed => completed.push((r.x, id, r)),
            ItemStatus::None => {}
        }
    }
    for v in [&mut live, &mut abandoned, &mut failed, &mut completed] {
        v.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    }
    let counts = Counts {
        in_progress: live.len() as u64,
        abandoned: abandoned.len() as u64,
        completed: completed.len() as u64,
        failed: failed.len() as u64,
    };
    let chosen: Vec<&(i64, &String, &Record)> = match q.filter {
        ListFilter::All => live.iter().chain(&abandoned).chain(&failed).chain(&completed).collect(),
        ListFilter::InProgress => live.iter().collect(),
        ListFilter::Abandoned => abandoned.iter().collect(),
        ListFilter::Failed => failed.iter().collect(),
        ListFilter::Completed => completed.iter().collect(),
    };
    let total = chosen.len() as u64;
    let items = chosen
        .into_iter()
        .skip(q.offset as usize)
        .take(q.limit as usize)
        .map(|(_, id, r)| r.to_state(id, now))
        .collect();
    let end = q.offset + q.limit;
    ItemList { counts, items, next_offset: if end < total { Some(end) } else { None } }
}

impl TrackerBackend for Embedded {
    fn claim_batch<'a>(&'a self, group: &'a str, claim: BatchClaim<'a>) -> BoxFuture<'a, ClaimBatch> {
        ready(Ok(guard(&self.namespace().tracker).claim_batch(group, claim)))
    }
    fn apply<'a>(
        &'a self,
        group: &'a str,
        ops: &'a [ItemOp],
        retention_ms: u64,
    ) -> BoxFuture<'a, Vec<OpResult>> {
        ready(Ok(guard(&self.namespace().tracker).apply(group, ops, retention_ms)))
    }
    fn read<'a>(&'a self, group: &'a str, ids: &'a [String]) -> BoxFuture<'a, Vec<ItemState>> {
        ready(Ok(guard(&self.namespace().tracker).read(group, ids)))
    }
    fn list<'a>(&'a self, group: &'a str, query: ListQuery, retention_ms: u64) -> BoxFuture<'a, ItemList> {
        ready(Ok(guard(&self.namespace().tracker).list(group, query, retention_ms)))
    }
}

impl TrackerTable {
    /// The group names after `cursor` in order, each with whether it holds records (for the
    /// catalog).
    pub(super) fn names_after<'a>(
        &'a self,
        cursor: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a str, bool)> {
        self.groups.after(cursor).map(|(k, g)| (k, !g.items.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::{now_ms, page, slot, TrackerTable, SLICE, SWEEP_EVERY};
    use crate::tracker::{BatchClaim, ItemOp, ListFilter, ListQuery, Record};

    const DAY: u64 = 86_400_000;

    /// Every record is in its expiry bucket at the position it keeps and in its status index or
    /// (in progress at the run's score) in the batch run at the position it keeps; nothing else
    /// is in the indexes; no place is left pending, no call left batching.
    fn check_indexes(t: &TrackerTable) {
        for g in t.groups.values() {
            assert!(g.pending.iter().all(Vec::is_empty));
            assert!(!g.batching);
            assert_eq!(g.items.len(), g.expiry.len());
            assert_eq!(g.items.len(), g.run.len() + g.by_status.iter().map(|s| s.len()).sum::<usize>());
            for (id, e) in &g.items {
                assert_eq!(g.expiry.at(e.rec.x, e.at), Some(id), "expiry position of {id}");
                let (k, s) = slot(&e.rec).expect("a stored record has a status");
                let place = (s, id.clone());
                let set = &g.by_status[k];
                let in_set = set.iter_from(set.count_below(&place)).next() == Some(&place);
                let in_run = g.run.holds(e.run_at, id);
                assert!(in_set != in_run, "place of {id} in exactly one of the index and the run");
                assert!(!in_run || (k, s) == (0, g.run.score()), "run place of {id}");
            }
        }
    }

    /// Random claim batches and operations, some expiring within the test: the indexes stay in
    /// step with the records, and pages equal those of a full scan of the records.
    #[test]
    fn indexes_follow_random_operations() {
        let mut rnd = crate::backend::embedded::seeded(99);
        let mut t = TrackerTable::default();
        for step in 0..1200 {
            let ids: Vec<String> = (0..rnd(40)).map(|_| format!("i{}", rnd(60))).collect();
            if rnd(2) == 0 {
                let claim = BatchClaim {
                    ids: &ids,
                    owner: "o",
                    lease_ms: 1 + rnd(3) * 1000,
                    reclaim_completed: rnd(2) == 0,
                    retention_ms: rnd(4),
                };
                t.claim_batch("g", claim);
            } else {
                let ops: Vec<ItemOp> = ids
                    .into_iter()
                    .map(|id| match rnd(5) {
                        0 | 1 => ItemOp::Claim {
                            id,
                            owner: "o".into(),
                            lease_ms: 1 + rnd(2) * 1000,
                            reclaim_completed: rnd(2) == 0,
                        },
                        2 => ItemOp::Complete { id, owner: None, keep_ms: rnd(3) * DAY },
                        3 => ItemOp::Fail { id, owner: None, error: "e".into(), keep_ms: 1 + rnd(3) },
                        _ => ItemOp::Unset { id },
                    })
                    .collect();
                t.apply("g", &ops, rnd(3) * DAY);
            }
            check_indexes(&t);
            if rnd(8) == 0 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            let now = now_ms();
            let Some(g) = t.groups.get_mut("g") else { continue };
            g.purge(now, usize::MAX);
            check_indexes(&t);
            // Pages only now and then, so batch runs also meet later batches and operations
            // before a page merges them.
            if rnd(3) != 0 {
                continue;
            }
            let g = t.groups.get_mut("g").expect("checked above");
            let records: Vec<(String, Record)> =
                g.items.iter().map(|(id, e)| (id.to_string(), e.rec.clone())).collect();
            let filter = [
                ListFilter::All,
                ListFilter::InProgress,
                ListFilter::Abandoned,
                ListFilter::Failed,
                ListFilter::Completed,
            ][rnd(5) as usize];
            let q = ListQuery { filter, offset: rnd(10), limit: 1 + rnd(30) };
            let want = page(records.iter().map(|(id, r)| (id, r)), now, q);
            let got = g.list(now, q, DAY);
            assert_eq!(got.counts, want.counts, "step {step}");
            assert_eq!(got.items, want.items, "step {step}");
            assert_eq!(got.next_offset, want.next_offset, "step {step}");
        }
    }

    /// 2.5 slices of records expire together: each call forgets one slice at most, and every
    /// call already counts them as gone.
    #[test]
    fn purge_forgets_one_slice_per_call() {
        let mut t = TrackerTable::default();
        t.apply(
            "g",
            &[ItemOp::Claim {
                id: "live".into(),
                owner: "o".into(),
                lease_ms: 60_000,
                reclaim_completed: false,
            }],
            DAY,
        );
        let ids: Vec<String> = (0..2500).map(|i| format!("i{i}")).collect();
        let b = t.claim_batch(
            "g",
            BatchClaim {
                ids: &ids,
                owner: "o",
                lease_ms: 60_000,
                reclaim_completed: false,
                retention_ms: DAY,
            },
        );
        let ops: Vec<ItemOp> = ids
            .iter()
            .map(|id| ItemOp::Complete { id: id.clone(), owner: Some(b.owner.clone()), keep_ms: 1 })
            .collect();
        t.apply("g", &ops, DAY);
        assert_eq!(t.groups["g"].items.len(), 2501);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let q = ListQuery { filter: ListFilter::All, offset: 0, limit: 10 };
        let mut left = Vec::new();
        for _ in 0..3 {
            let l = t.list("g", q, DAY);
            assert_eq!((l.counts.in_progress, l.counts.completed), (1, 0));
            assert_eq!(l.items.len(), 1);
            let g = &t.groups["g"];
            assert_eq!(g.items.len(), g.expiry.len());
            assert_eq!(g.items.len(), g.by_status.iter().map(|s| s.len()).sum::<usize>());
            left.push(g.items.len());
        }
        assert_eq!(left, vec![2501 - SLICE, 2501 - 2 * SLICE, 1]);
    }

    /// Groups nobody writes to again are swept in turn, one per SWEEP_EVERY writes elsewhere:
    /// their expired records go and the groups with them; the ring stays in step with the map.
    #[test]
    fn idle_groups_are_swept_in_turn() {
        let mut t = TrackerTable::default();
        // Kept 300 ms: long enough that no sweep during the setup finds them expired.
        let done = |id: &str| ItemOp::Complete { id: id.into(), owner: None, keep_ms: 300 };
        for g in 0..20 {
            t.apply(&format!("idle{g}"), &[done("a"), done("b")], DAY);
        }
        let keep = ItemOp::Claim {
            id: "live".into(),
            owner: "o".into(),
            lease_ms: 60_000,
            reclaim_completed: false,
        };
        t.apply("busy", &[keep], DAY);
        assert_eq!(t.groups.len(), 21);
        std::thread::sleep(std::time::Duration::from_millis(310));
        let mut sizes = Vec::new();
        for i in 0..(21 * SWEEP_EVERY as usize) {
            t.read("busy", &["live".to_string()]);
            t.apply("busy", &[ItemOp::Unset { id: format!("x{i}") }], DAY);
            if (i + 1) % (5 * SWEEP_EVERY as usize) == 0 {
                sizes.push(t.groups.len());
            }
            assert_eq!(t.ring.len(), t.groups.len());
            for (at, name) in t.ring.iter().enumerate() {
                assert_eq!(t.groups[name].ring_at, at);
            }
        }
        // At most a group per SWEEP_EVERY writes (5 sweeps in the first 5 * SWEEP_EVERY
        // writes): never all at once, but some already.
        assert!(sizes[0] >= 21 - 5 && sizes[0] < 21, "{sizes:?}");
        assert_eq!(t.groups.keys().collect::<Vec<_>>(), vec!["busy"]);
    }

    /// Pages come from the ranked indexes in the documented order, with exact counts.
    #[test]
    fn pages_in_order() {
        let mut t = TrackerTable::default();
        let ids: Vec<String> = (0..50).map(|i| format!("i{i:02}")).collect();
        let mut ops = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            ops.push(ItemOp::Claim {
                id: id.clone(),
                owner: "o".into(),
                lease_ms: 60_000 + i as u64,
                reclaim_completed: false,
            });
        }
        t.apply("g", &ops, DAY);
        let finish: Vec<ItemOp> = ids[..20]
            .iter()
            .enumerate()
            .map(|(i, id)| {
                if i % 2 == 0 {
                    ItemOp::Complete { id: id.clone(), owner: None, keep_ms: DAY - i as u64 }
                } else {
                    ItemOp::Fail { id: id.clone(), owner: None, error: "e".into(), keep_ms: DAY + i as u64 }
                }
            })
            .collect();
        t.apply("g", &finish, DAY);
        let mut seen = Vec::new();
        let mut offset = 0;
        loop {
            let l = t.list("g", ListQuery { filter: ListFilter::All, offset, limit: 7 }, DAY);
            assert_eq!((l.counts.in_progress, l.counts.completed, l.counts.failed), (30, 10, 10));
            seen.extend(l.items.iter().map(|s| s.id.clone()));
            match l.next_offset {
                Some(o) => offset = o,
                None => break,
            }
        }
        let mut want: Vec<String> = ids[20..].to_vec();
        want.extend((1..20).step_by(2).map(|i| ids[i].clone()));
        want.extend((0..20).step_by(2).rev().map(|i| ids[i].clone()));
        assert_eq!(seen, want);
    }
}
