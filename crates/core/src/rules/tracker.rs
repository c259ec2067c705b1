//! The Item Tracker's rules: whether a record is still kept, an item's status at a time (the
//! lease), what a claim, a completion or failure (with the owner check), an unset and a revival
//! decide, the change each makes to a record (a failure at the claim's `maxAttempts` makes the
//! item dead), and the order of `listItems`.
//!
//! The Redis scripts `tracker_apply.lua`, `tracker_apply_fast.lua` and `tracker_claim.lua`
//! write the same rules in Lua.

use std::borrow::Cow;

use crate::tracker::{
    expiry, BatchOutcome, Counts, ItemList, ItemOp, ItemStatus, ListFilter, ListQuery, Record, Transition,
    MAX_TIMELINE,
};

/// Whether a record that expires at `expires` is still kept at `now`: one that is not counts as
/// absent (and is forgotten when a purge reaches it).
pub fn kept(expires: i64, now: i64) -> bool {
    expires > now
}

/// The status at `now` of a record stored as `stored` (`in_progress`, `completed`, `failed`,
/// `dead`, or empty for none) with a lease ending at `lease_end`: an in-progress item whose lease ran out
/// is abandoned.
pub fn status(stored: &str, lease_end: i64, now: i64) -> ItemStatus {
    match stored {
        "in_progress" if lease_end > now => ItemStatus::InProgress,
        "in_progress" => ItemStatus::Abandoned,
        "completed" => ItemStatus::Completed,
        "failed" => ItemStatus::Failed,
        "dead" => ItemStatus::Dead,
        _ => ItemStatus::None,
    }
}

/// What a claim decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Claim it: [`take`] its record (a fresh one when it has none).
    Take,
    /// Left alone: a live lease holds it.
    InProgress,
    /// Left alone: it is completed (and the claim does not re-claim completed items).
    Completed,
    /// Left alone: it is dead (until it is revived or unset; `reclaim_completed` does not
    /// reach it).
    Dead,
}

impl Claim {
    /// The outcome of a batch claim for this decision.
    pub fn batch(self) -> BatchOutcome {
        match self {
            Claim::Take => BatchOutcome::Claimed,
            Claim::InProgress => BatchOutcome::InProgress,
            Claim::Completed => BatchOutcome::Completed,
            Claim::Dead => BatchOutcome::Dead,
        }
    }
}

/// The claim decision for an item at `status` (its kept record's status at the claim's time,
/// [`ItemStatus::None`] when it has no kept record).
pub fn claim(status: ItemStatus, reclaim_completed: bool) -> Claim {
    match status {
        ItemStatus::InProgress => Claim::InProgress,
        ItemStatus::Completed if !reclaim_completed => Claim::Completed,
        ItemStatus::Dead => Claim::Dead,
        ItemStatus::None | ItemStatus::Abandoned | ItemStatus::Completed | ItemStatus::Failed => Claim::Take,
    }
}

/// The owner check of a completion or failure: `asked` is the owner token it gives (`None`: no
/// check), `holder` the owner of the item's kept record (`None` when it has no kept record or
/// the record has no owner). True when it may go on.
pub fn owns(asked: Option<&str>, holder: Option<&str>) -> bool {
    match asked {
        None => true,
        Some(o) => holder == Some(o),
    }
}

/// What one operation decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A claim that succeeds: [`write`] the record (a fresh one when it has none).
    Take,
    /// A claim left alone: the item is in progress under a live lease, completed, or dead; a
    /// revival left alone: the item is not dead (nor failed, when failed items are revived).
    Busy(ItemStatus),
    /// A completion or failure that goes on: [`write`] the record (a fresh one when it has none).
    Finish,
    /// A completion or failure refused by the owner check: nothing changes.
    NotOwner,
    /// An unset: the record is removed.
    Remove,
}

/// The decision for `op` on an item whose record, as loaded, is `rec` (`None` when it has none;
/// a record no longer [`kept`] at `now` counts as none).
pub fn decide(op: &ItemOp, rec: Option<&Record>, now: i64) -> Decision {
    let rec = rec.filter(|r| kept(r.x, now));
    match op {
        ItemOp::Claim { reclaim_completed, .. } => {
            match claim(rec.map_or(ItemStatus::None, |r| r.status_at(now)), *reclaim_completed) {
                Claim::Take => Decision::Take,
                Claim::InProgress => Decision::Busy(ItemStatus::InProgress),
                Claim::Completed => Decision::Busy(ItemStatus::Completed),
                Claim::Dead => Decision::Busy(ItemStatus::Dead),
            }
        }
        ItemOp::Revive { failed, .. } => match rec.map_or(ItemStatus::None, |r| r.status_at(now)) {
            ItemStatus::Dead => Decision::Finish,
            ItemStatus::Failed if *failed => Decision::Finish,
            other => Decision::Busy(other),
        },
        ItemOp::Complete { owner, .. } | ItemOp::Fail { owner, .. } => {
            if owns(owner.as_deref(), rec.and_then(|r| r.o.as_deref())) {
                Decision::Finish
            } else {
                Decision::NotOwner
            }
        }
        ItemOp::Unset { .. } => Decision::Remove,
    }
}

/// The change `op` makes to a record when [`decide`] says [`Decision::Take`] or
/// [`Decision::Finish`] (an unset removes the record instead: nothing to write).
pub fn write(op: &ItemOp, rec: &mut Record, now: i64, retention_ms: u64) {
    match op {
        ItemOp::Claim { owner, lease_ms, max_attempts, note, .. } => {
            let claim = Take { max_attempts: *max_attempts, note: note.as_deref() };
            take(rec, owner, now, now + *lease_ms as i64, retention_ms, claim)
        }
        ItemOp::Complete { keep_ms, result, .. } => {
            finish(rec, "completed", None, now, *keep_ms);
            rec.r = result.clone();
        }
        ItemOp::Fail { error, keep_ms, .. } => finish(rec, failure(rec), Some(error), now, *keep_ms),
        ItemOp::Unset { .. } => {}
        ItemOp::Revive { reset_attempts, .. } => revive(rec, now, *reset_attempts),
    }
}

/// The status a failure gives a record: `dead` when its latest claim gave a `maxAttempts` and
/// this attempt reached it, else `failed`.
pub fn failure(rec: &Record) -> &'static str {
    match rec.m {
        Some(m) if rec.a >= m => "dead",
        _ => "failed",
    }
}

/// A revival's change to a dead (or failed) record: it becomes failed, so claimable, with its
/// last error, update and finish times and expiry kept and a `revived` transition added; its attempts start
/// again at 0 with `reset_attempts`, else they are kept (so an item revived after its last
/// allowed attempt gets one more before it is dead again, as a BullMQ job retried by
/// `retryJobs`).
pub fn revive(rec: &mut Record, now: i64, reset_attempts: bool) {
    if reset_attempts {
        rec.a = 0;
    }
    rec.s = "failed".into();
    push(&mut rec.t, Transition { at: now, status: "revived".into(), attempt: rec.a, error: None });
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

/// A completion's or failure's change to a record. Its note is kept (it tells what the latest
/// claim was); its result is cleared (a completion then sets the one it gives, see [`write`]).
pub fn finish(rec: &mut Record, status: &'static str, error: Option<&String>, now: i64, keep_ms: u64) {
    rec.s = status.into();
    rec.l = 0;
    rec.u = now;
    rec.d = now;
    if let Some(e) = error {
        rec.e = Some(e.clone());
    }
    rec.x = expiry(now, keep_ms);
    rec.r = None;
    push(&mut rec.t, Transition { at: now, status: status.into(), attempt: rec.a, error: error.cloned() });
}

/// What a claim gives beside its owner and lease: its attempt budget and its note.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Take<'a> {
    /// `maxAttempts`: none when the claim gives none.
    pub max_attempts: Option<u32>,
    /// The claim's note: none when the claim gives none.
    pub note: Option<&'a str>,
}

/// A claim's change to a record: a lease that was still recorded as in progress is abandoned
/// (at its end), the attempt counted, the new owner, lease, attempt budget (`maxAttempts`) and
/// note set (none when the claim gives none: a note belongs to one claim), and the result of an
/// earlier completion cleared: a result belongs to the attempt that completed, as BullMQ's
/// `returnvalue`, which `Job.retry('completed')` deletes when the job runs again (Inngest, which
/// keeps the last output, was not followed: an item claimed again would show a result its
/// running attempt did not give).
pub fn take(rec: &mut Record, owner: &str, now: i64, lease_end: i64, retention_ms: u64, claim: Take<'_>) {
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
    rec.m = claim.max_attempts;
    rec.n = claim.note.map(str::to_string);
    rec.r = None;
    push(&mut rec.t, Transition { at: now, status: "in_progress".into(), attempt: rec.a, error: None });
}

/// The timeline a record's own fields imply, which the stores leave out of a record when it is
/// the record's timeline (most items: claimed once, then completed or failed): the first claim
/// (at the record's creation `c`) and, once finished, the completion or failure (at its finish
/// `d`, with the last error when failed); a record finished without a claim, that finish alone.
/// `None` for any other record (claimed more than once, never claimed and not finished): its
/// timeline is stored. Used by the embedded, durable and Redis stores (`implied` in
/// `lua/tracker_common.lua` writes the same rule).
pub fn implied_timeline(r: &Record) -> Option<Vec<Transition>> {
    let claimed = Transition { at: r.c, status: Cow::Borrowed("in_progress"), attempt: 1, error: None };
    let finished = |attempt| {
        let error = if r.s == "failed" { r.e.clone() } else { None };
        Transition { at: r.d, status: r.s.clone(), attempt, error }
    };
    match (r.a, &*r.s) {
        (1, "in_progress") => Some(vec![claimed]),
        (1, "completed" | "failed") => Some(vec![claimed, finished(1)]),
        (0, "completed" | "failed") => Some(vec![finished(0)]),
        _ => None,
    }
}

/// The record of an item that has none, before a [`write`].
pub fn fresh(now: i64) -> Record {
    Record {
        s: Cow::Borrowed(""),
        a: 0,
        o: None,
        l: 0,
        c: now,
        u: now,
        d: 0,
        e: None,
        x: 0,
        t: Vec::new(),
        m: None,
        r: None,
        n: None,
    }
}

/// One page of a group's items, from all its kept records: in progress (by lease expiry),
/// abandoned (by lease expiry), failed, dead, completed (by record expiry).
pub fn page<'a>(records: impl Iterator<Item = (&'a String, &'a Record)>, now: i64, q: ListQuery) -> ItemList {
    let mut live = Vec::new();
    let mut abandoned = Vec::new();
    let mut failed = Vec::new();
    let mut dead = Vec::new();
    let mut completed = Vec::new();
    for (id, r) in records {
        match r.status_at(now) {
            ItemStatus::InProgress => live.push((r.l, id, r)),
            ItemStatus::Abandoned => abandoned.push((r.l, id, r)),
            ItemStatus::Failed => failed.push((r.x, id, r)),
            ItemStatus::Dead => dead.push((r.x, id, r)),
            ItemStatus::Completed => completed.push((r.x, id, r)),
            ItemStatus::None => {}
        }
    }
    for v in [&mut live, &mut abandoned, &mut failed, &mut dead, &mut completed] {
        v.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    }
    let counts = Counts {
        in_progress: live.len() as u64,
        abandoned: abandoned.len() as u64,
        completed: completed.len() as u64,
        failed: failed.len() as u64,
        dead: dead.len() as u64,
    };
    let chosen: Vec<&(i64, &String, &Record)> = match q.filter {
        ListFilter::All => {
            live.iter().chain(&abandoned).chain(&failed).chain(&dead).chain(&completed).collect()
        }
        ListFilter::InProgress => live.iter().collect(),
        ListFilter::Abandoned => abandoned.iter().collect(),
        ListFilter::Failed => failed.iter().collect(),
        ListFilter::Dead => dead.iter().collect(),
        ListFilter::Completed => completed.iter().collect(),
    };
    let total = chosen.len() as u64;
    let items = chosen
        .into_iter()
        .skip(q.offset as usize)
        .take(q.limit as usize)
        .map(|(_, id, r)| r.to_state(id, now))
        .collect();
    ItemList { counts, items, next_offset: next_offset(q, total) }
}

/// The offset of the page after `q`'s, when the `total` items its filter lists go past it.
pub fn next_offset(q: ListQuery, total: u64) -> Option<u64> {
    let end = q.offset.saturating_add(q.limit);
    (end < total).then_some(end)
}

#[cfg(test)]
#[path = "tracker_tests.rs"]
mod tests;
