//! Item Tracker on the embedded store.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;

use super::{guard, now_ms, Embedded};
use crate::error::Result;
use crate::tracker::{
    not_owner, Counts, ItemList, ItemOp, ItemState, ItemStatus, ListFilter, ListQuery, OpResult, Outcome, Record,
    TrackerBackend, Transition, MAX_TIMELINE,
};

#[derive(Default)]
pub struct TrackerTable {
    groups: HashMap<String, Group>,
    /// Writes since the last sweep of every group.
    writes: u64,
}

#[derive(Default)]
struct Group {
    items: HashMap<String, Record>,
    /// (record expiry, id), to forget expired records without scanning.
    expiry: BTreeSet<(i64, String)>,
}

const SWEEP_EVERY: u64 = 4096;

impl Group {
    fn purge(&mut self, now: i64) {
        while let Some((x, _)) = self.expiry.first() {
            if *x > now {
                break;
            }
            let (_, id) = self.expiry.pop_first().expect("first exists");
            self.items.remove(&id);
        }
    }

    /// Changes the record of `id` in place (a fresh one when there is none), keeps the expiry
    /// index in step, and returns the item's state after the change.
    fn update(&mut self, id: &str, now: i64, change: impl FnOnce(&mut Record)) -> ItemState {
        match self.items.get_mut(id) {
            Some(rec) => {
                let old_x = rec.x;
                change(rec);
                if rec.x != old_x {
                    self.expiry.remove(&(old_x, id.to_string()));
                    self.expiry.insert((rec.x, id.to_string()));
                }
                rec.to_state(id, now)
            }
            None => {
                let mut rec = fresh(now);
                change(&mut rec);
                let state = rec.to_state(id, now);
                self.expiry.insert((rec.x, id.to_string()));
                self.items.insert(id.to_string(), rec);
                state
            }
        }
    }

    fn remove(&mut self, id: &str) -> Option<Record> {
        let old = self.items.remove(id)?;
        self.expiry.remove(&(old.x, id.to_string()));
        Some(old)
    }
}

fn push(t: &mut Vec<Transition>, tr: Transition) {
    t.push(tr);
    if t.len() > MAX_TIMELINE {
        let extra = t.len() - MAX_TIMELINE;
        t.drain(..extra);
    }
}

/// Applies one operation at `now`. The same rules as the Redis script `tracker_apply.lua`.
fn apply_one(group_name: &str, g: &mut Group, op: &ItemOp, now: i64, retention_ms: u64) -> OpResult {
    let id = op.id();
    let result = |outcome, owner, item| OpResult { id: id.to_string(), action: op.action(), outcome, owner, item };
    let current = |g: &Group| match g.items.get(id) {
        Some(r) => r.to_state(id, now),
        None => ItemState::unknown(id),
    };
    match op {
        ItemOp::Claim { owner, lease_ms, reclaim_completed, .. } => {
            if let Some(r) = g.items.get(id) {
                match r.status_at(now) {
                    ItemStatus::InProgress => return result(Outcome::Busy(ItemStatus::InProgress), None, current(g)),
                    ItemStatus::Completed if !reclaim_completed => {
                        return result(Outcome::Busy(ItemStatus::Completed), None, current(g))
                    }
                    _ => {}
                }
            }
            let lease_end = now + *lease_ms as i64;
            let state = g.update(id, now, |rec| {
                if rec.s == "in_progress" {
                    push(&mut rec.t, Transition { at: rec.l, status: "abandoned".into(), attempt: rec.a, error: None });
                }
                rec.a += 1;
                rec.s = "in_progress".into();
                rec.o = Some(owner.clone());
                rec.l = lease_end;
                rec.u = now;
                rec.d = 0;
                rec.x = lease_end + retention_ms as i64;
                push(&mut rec.t, Transition { at: now, status: "in_progress".into(), attempt: rec.a, error: None });
            });
            result(Outcome::Done, Some(owner.clone()), state)
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
            let state = g.update(id, now, |rec| {
                rec.s = status.into();
                rec.l = 0;
                rec.u = now;
                rec.d = now;
                if let Some(e) = error {
                    rec.e = Some(e.clone());
                }
                rec.x = now + *keep_ms as i64;
                push(&mut rec.t, Transition { at: now, status: status.into(), attempt: rec.a, error: error.cloned() });
            });
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

fn fresh(now: i64) -> Record {
    Record { s: String::new(), a: 0, o: None, l: 0, c: now, u: now, d: 0, e: None, x: 0, t: Vec::new() }
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
        let mut live = Vec::new();
        let mut abandoned = Vec::new();
        let mut failed = Vec::new();
        let mut completed = Vec::new();
        for (id, r) in &g.items {
            match r.status_at(now) {
                ItemStatus::InProgress => live.push((r.l, id)),
                ItemStatus::Abandoned => abandoned.push((r.l, id)),
                ItemStatus::Failed => failed.push((r.x, id)),
                ItemStatus::Completed => completed.push((r.x, id)),
                ItemStatus::None => {}
            }
        }
        for v in [&mut live, &mut abandoned, &mut failed, &mut completed] {
            v.sort();
        }
        let counts = Counts {
            in_progress: live.len() as u64,
            abandoned: abandoned.len() as u64,
            completed: completed.len() as u64,
            failed: failed.len() as u64,
        };
        let chosen: Vec<&(i64, &String)> = match q.filter {
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
            .map(|(_, id)| g.items[*id].to_state(id, now))
            .collect();
        let end = q.offset + q.limit;
        ItemList { counts, items, next_offset: if end < total { Some(end) } else { None } }
    }
}

impl TrackerBackend for Embedded {
    fn apply(&self, group: &str, ops: &[ItemOp], retention_ms: u64) -> impl Future<Output = Result<Vec<OpResult>>> + Send {
        let out = guard(&self.namespace().tracker).apply(group, ops, retention_ms);
        async move { Ok(out) }
    }
    fn read(&self, group: &str, ids: &[String]) -> impl Future<Output = Result<Vec<ItemState>>> + Send {
        let out = guard(&self.namespace().tracker).read(group, ids);
        async move { Ok(out) }
    }
    fn list(&self, group: &str, query: ListQuery, _retention_ms: u64) -> impl Future<Output = Result<ItemList>> + Send {
        let out = guard(&self.namespace().tracker).list(group, query);
        async move { Ok(out) }
    }
}
