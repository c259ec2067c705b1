//! Item operations (claim, complete, fail, unset) on one group, in one call.

use super::group::Group;
use super::record::{finish, take};
use super::TrackerTable;
use crate::backend::embedded::now_ms;
use crate::tracker::{not_owner, ItemOp, ItemState, ItemStatus, OpResult, Outcome, Record};

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

impl TrackerTable {
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
}
