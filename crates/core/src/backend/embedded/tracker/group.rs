//! A group's records and their indexes: the expiry buckets, the status indexes in `listItems`
//! order, and the batch run of the latest claim batch, kept in step with every change.

use arcstr::ArcStr;
use std::collections::HashMap;

use crate::backend::embedded::batch_run::{BatchRun, NO_RUN};
use crate::backend::embedded::expiry_buckets::ExpiryBuckets;
use crate::backend::embedded::place_order::sort_places;
use crate::backend::embedded::ranked::RankedSet;
use crate::rules::tracker::status;
use crate::rules::tracker::{fresh, kept};
use crate::tracker::{ItemStatus, Record};

use super::compact::Compact;

/// Hash maps keyed by caller-given names: foldhash, seeded at random per process (fast, and no
/// predictable collisions for ids that come from outside).
pub(super) type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// An item id, shared by a group's record map and its indexes: one allocation per id.
pub(super) type Id = ArcStr;

pub(super) struct Entry {
    pub(super) rec: Compact,
    /// The record's position in its bucket of `expiry` (the bucket of `rec.x`).
    pub(super) at: u32,
    /// The position of the record's place in `run`, if it is there (see [`BatchRun::holds`]).
    pub(super) run_at: u32,
}

#[derive(Default)]
pub(super) struct Group {
    pub(super) items: Map<Id, Entry>,
    /// Every record's expiry, to forget expired records without scanning.
    pub(super) expiry: ExpiryBuckets<Id>,
    /// Per status, in `listItems` order: in progress by lease end, completed and failed by
    /// expiry, each ranked so a page or a count costs O(log n + page).
    pub(super) by_status: [RankedSet<(i64, Id)>; 3],
    /// Places in `by_status` not inserted yet: a call collects its records' new places and
    /// inserts them at its end, sorted, a claim batch's ids in one pass ([`Group::flush`]).
    /// Empty between calls.
    pub(super) pending: [Vec<(i64, Id)>; 3],
    /// In-progress places of the latest claim batch, not in `by_status[0]` yet: joined to it when
    /// a page is listed or the next batch opens its run ([`Group::merge_run`]).
    pub(super) run: BatchRun,
    /// Whether new in-progress places at the run's score go to `run` (during a claim batch).
    pub(super) batching: bool,
    /// The group's position in [`TrackerTable::ring`].
    pub(super) ring_at: usize,
}

/// A record's status index and its position there.
pub(super) fn slot(r: &Compact) -> Option<(usize, i64)> {
    match r.status() {
        "in_progress" => Some((0, r.lease_end())),
        "completed" => Some((1, r.x)),
        "failed" => Some((2, r.x)),
        _ => None,
    }
}

impl Group {
    /// Forgets records whose expiry passed, at most `max` per call: clean-up in bounded slices,
    /// so a mass expiry never blocks the event loop in one call (later calls go on; writers pass
    /// at least twice what they write, so expired records cannot pile up in a group in use). A
    /// record left for a later call already counts as absent.
    pub(super) fn purge(&mut self, now: i64, max: usize) {
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
    pub(super) fn flush(&mut self) {
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
    pub(super) fn merge_run(&mut self) {
        if !self.run.is_empty() {
            self.pending[0].extend(self.run.take());
            self.flush();
        }
    }

    /// Starts a claim batch's run at `score` (its lease end), after merging the previous one.
    pub(super) fn open_run(&mut self, score: i64) {
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

    /// The record of `id`, read back (kept or not).
    pub(super) fn get(&self, id: &str) -> Option<Record> {
        self.items.get(id).map(|e| e.rec.record())
    }

    /// Changes the record of `id` in place (a fresh one when there is none) and keeps the
    /// indexes in step: the expiry index at once, the status index through `pending`.
    pub(super) fn change(&mut self, id: &str, now: i64, change: impl FnOnce(&mut Record)) {
        let Some((key, e)) = self.items.get_key_value(id) else {
            return self.add(id, now, change);
        };
        let key = key.clone();
        let (old_x, old_at, old_slot) = (e.rec.x, e.at, slot(&e.rec));
        let e = self.items.get_mut(id).expect("found above");
        let mut rec = e.rec.record();
        change(&mut rec);
        e.rec = Compact::new(&rec);
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
    pub(super) fn add(&mut self, id: &str, now: i64, change: impl FnOnce(&mut Record)) {
        let mut rec = fresh(now);
        change(&mut rec);
        let rec = Compact::new(&rec);
        let key: Id = ArcStr::from(id);
        let at = self.expiry.add(rec.x, key.clone());
        let run_at = match slot(&rec) {
            Some((k, s)) => self.place(k, s, key.clone()),
            None => NO_RUN,
        };
        self.items.insert(key, Entry { rec, at, run_at });
    }

    /// The status and attempts of the kept record of `id`, after forgetting it when it expired
    /// and a purge slice has not reached it yet (one lookup when it is kept or absent).
    pub(super) fn live(&mut self, id: &str, now: i64) -> Option<(ItemStatus, u32)> {
        let (x, status, a) =
            self.items.get(id).map(|e| (e.rec.x, status(e.rec.status(), e.rec.lease_end(), now), e.rec.a))?;
        if !kept(x, now) {
            self.remove(id);
            return None;
        }
        Some((status, a))
    }

    /// The kept record of `id` (see [`Group::live`]).
    pub(super) fn live_record(&mut self, id: &str, now: i64) -> Option<Record> {
        self.live(id, now)?;
        self.get(id)
    }

    pub(super) fn remove(&mut self, id: &str) -> Option<Record> {
        let (key, old) = self.items.remove_entry(id)?;
        self.unexpire(old.rec.x, old.at);
        self.unindex(&old, key);
        Some(old.rec.record())
    }
}
