//! Reading a group: items by id, and pages of `listItems` with their counts.

use super::group::{Group, Id};
use super::TrackerTable;
use crate::backend::embedded::expiries::SLICE;
use crate::backend::embedded::now_ms;
use crate::backend::embedded::ranked::RankedSet;
use crate::tracker::{Counts, ItemList, ItemState, ItemStatus, ListFilter, ListQuery, Record};

/// How many keys of `set` have a score up to `t`.
fn up_to(set: &RankedSet<(i64, Id)>, t: i64) -> usize {
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

impl TrackerTable {
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
