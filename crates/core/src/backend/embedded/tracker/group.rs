//! A group's records and their indexes: the expiry buckets, the status indexes in `listItems`
//! order, and the batch run of the latest claim batch, kept in step with every change.

use std::cmp::Ordering;

use crate::backend::embedded::batch_run::{BatchRun, NO_RUN};
use crate::backend::embedded::expiry_buckets::ExpiryBuckets;
use crate::backend::embedded::id_slots::IdSlots;
use crate::backend::embedded::place_order::sort_places;
use crate::backend::embedded::ranked::RankedSet;
use crate::rules::tracker::status;
use crate::rules::tracker::{fresh, kept};
use crate::tracker::{ItemStatus, Record};

use super::compact::Compact;

/// A place in a status index: its score and its record's slot in [`Group::items`], ordered by
/// the score and then the record's id ([`order`]).
pub(super) type Place = (i64, u32);

pub(super) struct Entry {
    pub(super) rec: Compact,
    /// The record's position in its bucket of `expiry` (the bucket of `rec.x`).
    pub(super) at: u32,
    /// The position of the record's place in `run`, if it is there (see [`BatchRun::holds`]).
    pub(super) run_at: u32,
}

/// The records of a group, by id, each in a slot whose number the indexes hold.
pub(super) type Records = IdSlots<Entry>;

#[derive(Default)]
pub(super) struct Group {
    pub(super) items: Records,
    /// Every record's slot by expiry, to forget expired records without scanning.
    pub(super) expiry: ExpiryBuckets<u32>,
    /// Per status, in `listItems` order: in progress by lease end, completed, failed and dead by
    /// expiry, each ranked so a page or a count costs O(log n + page). A record's place leaves
    /// its index before its slot is freed (the order reads the slot's id).
    pub(super) by_status: [RankedSet<Place>; 4],
    /// Places in `by_status` not inserted yet: a call collects its records' new places and
    /// inserts them at its end, sorted, a claim batch's ids in one pass ([`Group::flush`]).
    /// Empty between calls.
    pub(super) pending: [Vec<Place>; 4],
    /// In-progress places of the latest claim batch, not in `by_status[0]` yet: joined to it when
    /// a page is listed or the next batch opens its run ([`Group::merge_run`]).
    pub(super) run: BatchRun,
    /// Whether new in-progress places at the run's score go to `run` (during a claim batch).
    pub(super) batching: bool,
    /// The group's position in [`TrackerTable::ring`].
    pub(super) ring_at: usize,
}

/// The order of the status indexes: by score, then by the records' ids (as Redis orders a
/// sorted set's members of one score).
pub(super) fn order(items: &Records) -> impl Fn(&Place, &Place) -> Ordering + '_ {
    |a, b| a.0.cmp(&b.0).then_with(|| items.id_bytes(a.1).cmp(items.id_bytes(b.1)))
}

/// A record's status index and its score there.
pub(super) fn place_of(r: &Compact) -> Option<(usize, i64)> {
    match r.status() {
        "in_progress" => Some((0, r.lease_end())),
        "completed" => Some((1, r.x)),
        "failed" => Some((2, r.x)),
        "dead" => Some((3, r.x)),
        _ => None,
    }
}

impl Group {
    /// Forgets records whose expiry passed, at most `max` per call: clean-up in bounded slices,
    /// so a mass expiry never blocks the event loop in one call (later calls go on; writers pass
    /// at least twice what they write, so expired records cannot pile up in a group in use). A
    /// record left for a later call already counts as absent.
    pub(super) fn purge(&mut self, now: i64, max: usize) {
        for n in self.expiry.due(now, max) {
            self.unindex(n);
            self.items.remove(n);
        }
    }

    /// Takes the place of the record in slot `n` out of its status index.
    fn unindex(&mut self, n: u32) {
        let e = self.items.get(n);
        if let Some((k, at)) = place_of(&e.rec) {
            self.unplace(k, (at, n), e.run_at);
        }
    }

    /// Takes a record's place out of status index `k`: out of `run` when it is there (at
    /// `run_at`), else out of the ranked index (out of `pending` when not inserted yet: pending
    /// places go in first, so a call that changes one record many times stays linear).
    fn unplace(&mut self, k: usize, place: Place, run_at: u32) {
        if k == 0 && self.run.holds(run_at, place.1) {
            if let Some(moved) = self.run.remove(run_at) {
                self.items.get_mut(moved).run_at = run_at;
            }
            return;
        }
        if !self.by_status[k].remove_by(&place, &order(&self.items)) {
            self.flush();
            self.by_status[k].remove_by(&place, &order(&self.items));
        }
    }

    /// Inserts the pending places, each index's sorted run at once (see
    /// [`RankedSet::extend_sorted_by`]).
    pub(super) fn flush(&mut self) {
        let items = &self.items;
        for (set, pending) in self.by_status.iter_mut().zip(&mut self.pending) {
            if !pending.is_empty() {
                let mut run = std::mem::take(pending);
                sort_places(&mut run, |n| items.id_bytes(n));
                set.extend_sorted_by(run, &order(items));
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
    fn place(&mut self, k: usize, s: i64, n: u32) -> u32 {
        if self.batching && k == 0 && s == self.run.score() {
            return self.run.push(n);
        }
        self.pending[k].push((s, n));
        NO_RUN
    }

    /// Takes a record out of its expiry bucket (time `x`, position `at`).
    fn unexpire(&mut self, x: i64, at: u32) {
        if let Some(&moved) = self.expiry.remove(x, at) {
            self.items.get_mut(moved).at = at;
        }
    }

    /// The record of `id`, read back (kept or not).
    pub(super) fn get(&self, id: &str) -> Option<Record> {
        self.items.find(id).map(|n| self.items.get(n).rec.record())
    }

    /// Changes the record of `id` in place (a fresh one when there is none) and keeps the
    /// indexes in step: the expiry index at once, the status index through `pending`.
    pub(super) fn change(&mut self, id: &str, now: i64, change: impl FnOnce(&mut Record)) {
        let Some(n) = self.items.find(id) else {
            return self.add(id, now, change);
        };
        let e = self.items.get_mut(n);
        let (old_x, old_at, old_place) = (e.rec.x, e.at, place_of(&e.rec));
        let mut rec = e.rec.record();
        change(&mut rec);
        e.rec = Compact::new(&rec);
        let (new_x, new_place) = (e.rec.x, place_of(&e.rec));
        let old_run_at = e.run_at;
        if old_place != new_place {
            e.run_at = NO_RUN;
        }
        if new_x != old_x {
            e.at = self.expiry.add(new_x, n);
            self.unexpire(old_x, old_at);
        }
        if old_place == new_place {
            return;
        }
        if let Some((k, s)) = old_place {
            self.unplace(k, (s, n), old_run_at);
        }
        if let Some((k, s)) = new_place {
            let run_at = self.place(k, s, n);
            if run_at != NO_RUN {
                self.items.get_mut(n).run_at = run_at;
            }
        }
    }

    /// Makes the record of `id`, which has none (see [`Group::change`]).
    pub(super) fn add(&mut self, id: &str, now: i64, change: impl FnOnce(&mut Record)) {
        let mut rec = fresh(now);
        change(&mut rec);
        let rec = Compact::new(&rec);
        let (x, place) = (rec.x, place_of(&rec));
        let n = self.items.insert(id, Entry { rec, at: 0, run_at: NO_RUN });
        let at = self.expiry.add(x, n);
        let run_at = match place {
            Some((k, s)) => self.place(k, s, n),
            None => NO_RUN,
        };
        let e = self.items.get_mut(n);
        (e.at, e.run_at) = (at, run_at);
    }

    /// The status and attempts of the kept record of `id`, after forgetting it when it expired
    /// and a purge slice has not reached it yet (one lookup when it is kept or absent).
    pub(super) fn live(&mut self, id: &str, now: i64) -> Option<(ItemStatus, u32)> {
        let n = self.items.find(id)?;
        let e = &self.items.get(n).rec;
        let (x, status, a) = (e.x, status(e.status(), e.lease_end(), now), e.a);
        if !kept(x, now) {
            self.remove_slot(n);
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
        let n = self.items.find(id)?;
        Some(self.remove_slot(n))
    }

    /// Forgets the record in slot `n`: out of its indexes first, then out of its slot.
    fn remove_slot(&mut self, n: u32) -> Record {
        let e = self.items.get(n);
        self.unexpire(e.rec.x, e.at);
        self.unindex(n);
        self.items.remove(n).rec.record()
    }
}
