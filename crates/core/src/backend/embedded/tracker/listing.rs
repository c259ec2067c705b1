//! Reading a group: items by id, and pages of `listItems` with their counts.

use super::group::{Group, Place};
use super::TrackerTable;
use crate::backend::embedded::expiries::SLICE;
use crate::backend::embedded::now_ms;
use crate::backend::embedded::ranked::RankedSet;
use crate::rules::tracker::kept;
use crate::tracker::{Counts, ItemList, ItemState, ListFilter, ListQuery};

/// How many keys of `set` have a score up to `t`.
fn up_to(set: &RankedSet<Place>, t: i64) -> usize {
    set.count_while(|(at, _)| *at <= t)
}

impl Group {
    /// One page and the counts, from the status indexes: the same as the Redis script
    /// `tracker_list.lua`. When a purge slice left expired records, the abandoned count leaves
    /// out leases that ended `retention_ms` ago (records that may have expired), and the page
    /// skips expired records. The batch run is merged first (work bounded by one batch).
    pub(super) fn list(&mut self, now: i64, q: ListQuery, retention_ms: u64) -> ItemList {
        debug_assert!(self.pending.iter().all(Vec::is_empty), "calls flush their places");
        self.merge_run();
        let exact = !self.expiry.any_due(now);
        let [ip, done, failed, dead] = &self.by_status;
        let ended = up_to(ip, now);
        let abandoned = if exact { ended } else { ended - up_to(ip, now - retention_ms as i64) };
        let (c_first, f_first, d_first) = (up_to(done, now), up_to(failed, now), up_to(dead, now));
        let counts = Counts {
            in_progress: (ip.len() - ended) as u64,
            abandoned: abandoned as u64,
            completed: (done.len() - c_first) as u64,
            failed: (failed.len() - f_first) as u64,
            dead: (dead.len() - d_first) as u64,
        };
        let segments = [
            (ListFilter::InProgress, ip, ended, counts.in_progress),
            (ListFilter::Abandoned, ip, ended - abandoned, counts.abandoned),
            (ListFilter::Failed, failed, f_first, counts.failed),
            (ListFilter::Dead, dead, d_first, counts.dead),
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
            for &(_, slot) in set.iter_from(first + skip as usize).take(n as usize) {
                let r = self.items.get(slot).rec.record();
                if kept(r.x, now) {
                    items.push(r.to_state(self.items.id(slot), now));
                }
            }
            want -= n;
            skip = 0;
        }
        let end = q.offset + q.limit;
        ItemList { counts, items, next_offset: if end < counts.of(q.filter) { Some(end) } else { None } }
    }
}

impl TrackerTable {
    pub fn read(&mut self, group: &str, ids: &[String]) -> Vec<ItemState> {
        let now = now_ms();
        let g = self.groups.get_mut(group);
        match g {
            None => ids.iter().map(|id| ItemState::unknown(id)).collect(),
            Some(g) => {
                g.purge(now, SLICE);
                ids.iter()
                    .map(|id| match g.get(id).filter(|r| kept(r.x, now)) {
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
