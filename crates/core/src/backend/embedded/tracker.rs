//! Item Tracker on the embedded store.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use super::{guard, now_ms, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::tracker::{
    expiry, not_owner, BatchClaim, BatchOutcome, ClaimBatch, Counts, ItemList, ItemOp, ItemState, ItemStatus,
    ListFilter, ListQuery, OpResult, Outcome, Record, TrackerBackend, Transition, MAX_TIMELINE,
};

/// Hash maps keyed by caller-given names: foldhash, seeded at random per process (fast, and no
/// predictable collisions for ids that come from outside).
type Map<V> = HashMap<String, V, foldhash::fast::RandomState>;

#[derive(Default)]
pub struct TrackerTable {
    groups: Map<Group>,
    /// Writes since the last sweep of every group.
    writes: u64,
}

#[derive(Default)]
struct Group {
    items: Map<Record>,
    /// Ids by record expiry, to forget expired records without scanning. Every record has an
    /// entry at its current expiry; entries left behind when a record's expiry changed or it was
    /// removed are skipped when their time comes (and dropped by `compact` when too many).
    expiry: BTreeMap<i64, Vec<String>>,
    /// How many entries of `expiry` are left behind.
    stale: usize,
}

const SWEEP_EVERY: u64 = 4096;

impl Group {
    fn purge(&mut self, now: i64) {
        while let Some(entry) = self.expiry.first_entry() {
            if *entry.key() > now {
                break;
            }
            let x = *entry.key();
            for id in entry.remove() {
                if matches!(self.items.get(&id), Some(r) if r.x == x) {
                    self.items.remove(&id);
                } else {
                    self.stale = self.stale.saturating_sub(1);
                }
            }
        }
        if self.stale > 1024 && self.stale > 2 * self.items.len() {
            self.compact();
        }
    }

    /// Rebuilds the expiry index from the records.
    fn compact(&mut self) {
        let mut expiry: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for (id, r) in &self.items {
            expiry.entry(r.x).or_default().push(id.clone());
        }
        self.expiry = expiry;
        self.stale = 0;
    }

    fn index(&mut self, x: i64, id: &str) {
        self.expiry.entry(x).or_default().push(id.to_string());
    }

    /// Changes the record of `id` in place (a fresh one when there is none), keeps the expiry
    /// index in step, and returns the item's state after the change.
    fn update(&mut self, id: &str, now: i64, change: impl FnOnce(&mut Record)) -> ItemState {
        self.update_quiet(id, now, change);
        self.items.get(id).map(|r| r.to_state(id, now)).unwrap_or_else(|| ItemState::unknown(id))
    }

    /// [`Group::update`] without building the state.
    fn update_quiet(&mut self, id: &str, now: i64, change: impl FnOnce(&mut Record)) {
        match self.items.get_mut(id) {
            Some(rec) => {
                let old_x = rec.x;
                change(rec);
                let x = rec.x;
                if x != old_x {
                    self.stale += 1;
                    self.index(x, id);
                }
            }
            None => {
                let mut rec = fresh(now);
                change(&mut rec);
                self.index(rec.x, id);
                self.items.insert(id.to_string(), rec);
            }
        }
    }

    fn remove(&mut self, id: &str) -> Option<Record> {
        let old = self.items.remove(id)?;
        self.stale += 1;
        Some(old)
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
    let result =
        |outcome, owner, item| OpResult { id: id.to_string(), action: op.action(), outcome, owner, item };
    let current = |g: &Group| match g.items.get(id) {
        Some(r) => r.to_state(id, now),
        None => ItemState::unknown(id),
    };
    match op {
        ItemOp::Claim { owner, lease_ms, reclaim_completed, .. } => {
            if let Some(r) = g.items.get(id) {
                match r.status_at(now) {
                    ItemStatus::InProgress => {
                        return result(Outcome::Busy(ItemStatus::InProgress), None, current(g))
                    }
                    ItemStatus::Completed if !reclaim_completed => {
                        return result(Outcome::Busy(ItemStatus::Completed), None, current(g))
                    }
                    _ => {}
                }
            }
            let lease_end = now + *lease_ms as i64;
            g.update(id, now, |rec| take(rec, owner, now, lease_end, retention_ms));
            result(Outcome::Done, Some(owner.clone()), current(g))
        }
        ItemOp::Complete { owner, keep_ms, .. } | ItemOp::Fail { owner, keep_ms, .. } => {
            if let Some(o) = owner {
                let rec = g.items.get(id);
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
    fn group_mut(&mut self, group: &str, now: i64) -> &mut Group {
        self.writes += 1;
        if self.writes.is_multiple_of(SWEEP_EVERY) {
            self.groups.retain(|_, g| {
                g.purge(now);
                !g.items.is_empty()
            });
        }
        if !self.groups.contains_key(group) {
            self.groups.insert(group.to_string(), Group::default());
        }
        let g = self.groups.get_mut(group).expect("inserted above");
        g.purge(now);
        g
    }

    pub fn apply(&mut self, group: &str, ops: &[ItemOp], retention_ms: u64) -> Vec<OpResult> {
        let now = now_ms();
        let g = self.group_mut(group, now);
        let out = ops.iter().map(|op| apply_one(group, g, op, now, retention_ms)).collect();
        if g.items.is_empty() {
            self.groups.remove(group);
        }
        out
    }

    pub fn claim_batch(&mut self, group: &str, c: BatchClaim<'_>) -> ClaimBatch {
        let now = now_ms();
        let lease_end = now + c.lease_ms as i64;
        let g = self.group_mut(group, now);
        g.items.reserve(c.ids.len());
        let mut outcomes = Vec::with_capacity(c.ids.len());
        let mut attempts = Vec::with_capacity(c.ids.len());
        for id in c.ids {
            let (outcome, a) = match g.items.get(id.as_str()) {
                Some(r) => match r.status_at(now) {
                    ItemStatus::InProgress => (BatchOutcome::InProgress, r.a),
                    ItemStatus::Completed if !c.reclaim_completed => (BatchOutcome::Completed, r.a),
                    _ => (BatchOutcome::Claimed, 0),
                },
                None => (BatchOutcome::Claimed, 0),
            };
            if outcome == BatchOutcome::Claimed {
                let mut a = 0;
                g.update_quiet(id, now, |rec| {
                    take(rec, c.owner, now, lease_end, c.retention_ms);
                    a = rec.a;
                });
                attempts.push(a);
            } else {
                attempts.push(a);
            }
            outcomes.push(outcome);
        }
        if g.items.is_empty() {
            self.groups.remove(group);
        }
        ClaimBatch { owner: c.owner.to_string(), lease_expires_at: lease_end, outcomes, attempts }
    }

    pub fn read(&mut self, group: &str, ids: &[String]) -> Vec<ItemState> {
        let now = now_ms();
        let g = self.groups.get_mut(group);
        match g {
            None => ids.iter().map(|id| ItemState::unknown(id)).collect(),
            Some(g) => {
                g.purge(now);
                ids.iter()
                    .map(|id| match g.items.get(id) {
                        Some(r) => r.to_state(id, now),
                        None => ItemState::unknown(id),
                    })
                    .collect()
            }
        }
    }

    pub fn list(&mut self, group: &str, q: ListQuery) -> ItemList {
        let now = now_ms();
        let Some(g) = self.groups.get_mut(group) else {
            return ItemList { counts: Counts::default(), items: Vec::new(), next_offset: None };
        };
        g.purge(now);
        page(g.items.iter(), now, q)
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
    fn list<'a>(&'a self, group: &'a str, query: ListQuery, _retention_ms: u64) -> BoxFuture<'a, ItemList> {
        ready(Ok(guard(&self.namespace().tracker).list(group, query)))
    }
}

impl TrackerTable {
    /// The names of the groups that hold records (for the catalog).
    pub(super) fn group_names(&self) -> impl Iterator<Item = &str> {
        self.groups.iter().filter(|(_, g)| !g.items.is_empty()).map(|(k, _)| k.as_str())
    }
}
