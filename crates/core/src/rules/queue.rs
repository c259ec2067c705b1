//! The Dedup Queue's rules, over the facts of one id of one shard: what an enqueue decides (new,
//! duplicate, debounce, delay, kept for after a claim), which waiting ids a read claims and until
//! when (the visibility lease), what an ack or a release decides (only by the claim's owner,
//! only while the claim holds), and when an expired claim goes back to waiting (the reap).
//!
//! A debounce may be capped (`maxDelayMs`, Trigger.dev's `maxDelay`): an id's pending enqueue (the
//! id waiting, or enqueued again while claimed) then records its first-enqueue time, and a capped
//! debounce never moves its due time past that time plus the cap ([`capped`]). The record is kept
//! only for ids a capped debounce touched; it goes with the pending enqueue: a read that claims the
//! id drops it, and an enqueue again while claimed that goes back to waiting (ack, release or
//! expiry) keeps it.
//!
//! Dead letters (SQS's redrive policy `maxReceiveCount`, BullMQ's failed set): a read with
//! `max_deliveries` counts each delivery of the ids it claims, and an id it finds due that was
//! delivered that many times already (never acked: its claims expired, or were released) moves to
//! the shard's dead letters instead ([`deliver`]). Only such reads count or check; an ack drops the
//! count ([`keeps_count`]); a release and an expiry keep it. A dead letter is not delivered, and an
//! enqueue of it leaves it dead ([`Place::Dead`], outcome `dead`: SQS keeps a message in its DLQ
//! until it is redriven; BullMQ ignores a job id it still holds) until it is requeued
//! ([`requeue`]): waiting again, due now, its count dropped.
//!
//! The Redis scripts `queue_enqueue.lua`, `queue_enqueue_one.lua`, `queue_claim.lua`,
//! `queue_settle.lua` and the reap of `queue_common.lua` write the same rules in Lua.

use crate::queue::{Debounce, EnqueueOutcome, SettleAction, SettleOutcome};

/// A claim of one id, as a backend loaded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim<'a> {
    /// The visibility deadline: the claim holds while it is after now ([`live`]).
    pub deadline: i64,
    /// The owner token of the read that claimed it.
    pub owner: &'a str,
    /// The due time of an enqueue made while it was claimed: it is delivered again after the
    /// claim ends.
    pub again: Option<i64>,
}

/// Where one id of a shard is, as a backend loaded it (waiting and claimed ids are apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place<'a> {
    /// Not in the shard.
    Absent,
    /// Waiting, due at this time.
    Waiting(i64),
    /// Claimed (its claim may have expired and not been returned yet).
    Claimed(Claim<'a>),
    /// A dead letter (see the module's notes).
    Dead,
}

/// Whether a claim whose visibility deadline is `deadline` still holds at `now`. One that does
/// not cannot be acked or released: it goes back to waiting, due at [`back_at`]`(deadline,
/// again)`, and counts as waiting and due until it does (the reap).
pub fn live(deadline: i64, now: i64) -> bool {
    deadline > now
}

/// The due time of a claimed id that goes back to waiting at `at` (an expired claim: its
/// deadline; a release: now and its delay), or of an enqueue made while it was claimed
/// (`again`) when that is later.
pub fn back_at(at: i64, again: Option<i64>) -> i64 {
    again.map_or(at, |a| a.max(at))
}

/// The due time of ids an enqueue at `now` with `delay_ms` makes waiting.
pub fn due(now: i64, delay_ms: u64) -> i64 {
    now + delay_ms as i64
}

/// The due time `due` of a debounced enqueue capped at `max_ms` after the id's first enqueue at
/// `first`: the earlier of the two.
pub fn capped(due: i64, first: i64, max_ms: u64) -> i64 {
    due.min(first.saturating_add(max_ms as i64))
}

/// Whether a waiting id due at `due` may be claimed at `now`.
pub fn deliverable(due: i64, now: i64) -> bool {
    due <= now
}

/// The visibility deadline of the ids a read at `now` claims for `visibility_ms`: until then
/// only its owner token acks or releases them, and after it they are delivered again.
pub fn lease(now: i64, visibility_ms: u64) -> i64 {
    now + visibility_ms as i64
}

/// What an enqueue writes for one id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueWrite {
    /// Nothing.
    Keep,
    /// The id waits, due at this time (moved when it was waiting; when its claim had expired,
    /// that claim and its enqueue-again time are removed).
    Wait(i64),
    /// The id's live claim keeps this due time, to be delivered again after the claim ends.
    Again(i64),
}

/// What an enqueue decides for one id: the caller's answer (the outcome and the id's due time),
/// what to write, and the first-enqueue time recorded for the id's pending enqueue after it (the
/// one given, or this enqueue's time when a capped debounce found none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueue {
    pub outcome: EnqueueOutcome,
    pub due: i64,
    pub write: EnqueueWrite,
    pub first: Option<i64>,
}

/// An enqueue at `now` of an id at `place` whose pending enqueue recorded `first` (see the
/// module's notes), with `debounce`, where ids it makes waiting are due at `due` ([`due`]). A
/// capped debounce counts from `first`, or from now when none is recorded, and records it. An
/// expired claim is judged as the waiting id it goes back to; an id repeated within a call is
/// judged again after the write of the one before.
pub fn enqueue(place: Place<'_>, debounce: Debounce, first: Option<i64>, due: i64, now: i64) -> Enqueue {
    let (debounce, first, due) = match debounce {
        Debounce::Off => (false, first, due),
        Debounce::On { max_delay_ms: None } => (true, first, due),
        Debounce::On { max_delay_ms: Some(max) } => {
            let f = first.unwrap_or(now);
            (true, Some(f), capped(due, f, max))
        }
    };
    let (outcome, due, write) = match place {
        Place::Claimed(c) if live(c.deadline, now) => match c.again {
            Some(a) if !debounce => (EnqueueOutcome::Claimed, a, EnqueueWrite::Keep),
            _ => (EnqueueOutcome::Claimed, due, EnqueueWrite::Again(due)),
        },
        Place::Claimed(_) | Place::Waiting(_) if debounce => {
            (EnqueueOutcome::Debounced, due, EnqueueWrite::Wait(due))
        }
        Place::Claimed(c) => {
            let back = back_at(c.deadline, c.again);
            (EnqueueOutcome::Duplicate, back, EnqueueWrite::Wait(back))
        }
        Place::Waiting(old) => (EnqueueOutcome::Duplicate, old, EnqueueWrite::Keep),
        // A dead letter stays dead: no due time, no first-enqueue time.
        Place::Dead => {
            return Enqueue { outcome: EnqueueOutcome::Dead, due: 0, write: EnqueueWrite::Keep, first: None }
        }
        Place::Absent => (EnqueueOutcome::Added, due, EnqueueWrite::Wait(due)),
    };
    Enqueue { outcome, due, write, first }
}

/// An ack or a release at `now` by `owner` of an id whose claim is `claim` (`None`: not claimed).
/// Returns the caller's answer, the outcome and the due time when the id waits again. On
/// [`SettleOutcome::Done`] the claim (with its enqueue-again time) is removed and, with a due
/// time, the id waits; on a refusal nothing is written.
pub fn settle(
    claim: Option<Claim<'_>>,
    owner: &str,
    action: SettleAction,
    now: i64,
) -> (SettleOutcome, Option<i64>) {
    let c = match claim {
        None => return (SettleOutcome::NotClaimed, None),
        Some(c) if c.owner != owner => return (SettleOutcome::NotOwner, None),
        Some(c) if !live(c.deadline, now) => return (SettleOutcome::Expired, None),
        Some(c) => c,
    };
    let requeued = c.again.is_some();
    let due = match action {
        SettleAction::Ack => c.again,
        SettleAction::Release { delay_ms } => Some(back_at(due(now, delay_ms), c.again)),
    };
    (SettleOutcome::Done { requeued }, due)
}

/// What a read with `max_deliveries` does with a due id delivered `count` times before (0 when
/// no count is kept for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deliver {
    /// Claim it; its count becomes this.
    Claim(u64),
    /// Move it to the dead letters (it keeps its count, the deliveries it had).
    Dead,
}

/// A due id delivered `count` times, read with `max_deliveries` (at least 1): delivered again
/// while `count < max_deliveries`, else a dead letter (SQS: a message received
/// `maxReceiveCount` times goes to the DLQ on its next receive).
pub fn deliver(count: u64, max_deliveries: u64) -> Deliver {
    if count >= max_deliveries {
        Deliver::Dead
    } else {
        Deliver::Claim(count + 1)
    }
}

/// Whether an id settled with `action` keeps its delivery count: a release does (it was
/// delivered and not processed), an ack drops it (processed; an enqueue made while claimed is a
/// new message, counted from 0).
pub fn keeps_count(action: SettleAction) -> bool {
    matches!(action, SettleAction::Release { .. })
}

/// A requeue at `now` of an id that is a dead letter (`dead`): its due time when it waits again
/// (now; its count dropped), or `None` when it is no dead letter (nothing written).
pub fn requeue(dead: bool, now: i64) -> Option<i64> {
    dead.then_some(now)
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
