//! Item operations (claim, complete, fail, unset) on one group, in one call.

use super::group::Group;
use super::TrackerTable;
use crate::backend::embedded::now_ms;
use crate::rules::tracker::{decide, write, Decision};
use crate::tracker::{not_owner, ItemOp, ItemState, OpResult, Outcome};

/// Applies one operation at `now`: loads the item, decides by [`decide`], writes.
fn apply_one(group_name: &str, g: &mut Group, op: &ItemOp, now: i64, retention_ms: u64) -> OpResult {
    let id = op.id();
    let result =
        |outcome, owner, item| OpResult { id: id.to_string(), action: op.action(), outcome, owner, item };
    let current = |g: &Group| match g.get(id) {
        Some(r) => r.to_state(id, now),
        None => ItemState::unknown(id),
    };
    let rec = g.live_record(id, now);
    let existed = rec.is_some();
    match decide(op, rec.as_ref(), now) {
        Decision::Busy(s) => result(Outcome::Busy(s), None, current(g)),
        Decision::NotOwner => {
            result(Outcome::Refused(not_owner(group_name, id, g.get(id).as_ref())), None, current(g))
        }
        Decision::Remove => {
            let old = g.remove(id);
            let state = match &old {
                Some(r) => r.to_state(id, now),
                None => ItemState::unknown(id),
            };
            result(Outcome::Done, None, state)
        }
        d @ (Decision::Take | Decision::Finish) => {
            let change = |rec: &mut _| write(op, rec, now, retention_ms);
            if existed {
                g.change(id, now, change);
            } else {
                g.add(id, now, change);
            }
            let owner = match (d, op) {
                (Decision::Take, ItemOp::Claim { owner, .. }) => Some(owner.clone()),
                _ => None,
            };
            result(Outcome::Done, owner, current(g))
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
