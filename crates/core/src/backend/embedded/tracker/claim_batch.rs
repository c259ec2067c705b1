//! A claim batch: many ids claimed for one owner and one lease, their places in one batch run.

use super::TrackerTable;
use crate::backend::embedded::now_ms;
use crate::rules::tracker::{claim, take, Claim};
use crate::tracker::{BatchClaim, ClaimBatch, ItemStatus, Record};

impl TrackerTable {
    pub fn claim_batch(&mut self, group: &str, c: BatchClaim<'_>) -> ClaimBatch {
        let now = now_ms();
        let lease_end = now + c.lease_ms as i64;
        let g = self.group_mut(group, now, c.ids.len());
        g.items.reserve(c.ids.len());
        g.open_run(lease_end);
        let mut outcomes = Vec::with_capacity(c.ids.len());
        let mut attempts = Vec::with_capacity(c.ids.len());
        for id in c.ids {
            let given = c.given();
            let take_it = |rec: &mut Record| take(rec, c.owner, now, lease_end, c.retention_ms, given);
            let live = g.live(id, now);
            let decision = claim(live.map_or(ItemStatus::None, |(s, _)| s), c.reclaim_completed);
            let a = match (decision, live) {
                (Claim::Take, None) => {
                    // A new id: made at once, with no second lookup.
                    g.add(id, now, take_it);
                    1
                }
                (Claim::Take, Some((_, a))) => {
                    g.change(id, now, take_it);
                    a + 1
                }
                (_, l) => l.map_or(0, |(_, a)| a),
            };
            attempts.push(a);
            outcomes.push(decision.batch());
        }
        g.batching = false;
        g.flush();
        if g.items.is_empty() {
            self.drop_group(group);
        }
        ClaimBatch { owner: c.owner.to_string(), lease_expires_at: lease_end, outcomes, attempts }
    }
}
