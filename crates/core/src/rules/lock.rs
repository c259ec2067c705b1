//! The Concurrency Lock's rules: whether a lease holds, what an acquisition decides (with its
//! fencing token), and the owner check of a release or an extension.
//!
//! The Redis scripts `lock_acquire.lua`, `lock_release.lua`, `lock_release_fence.lua` and
//! `lock_extend.lua` write the same rules in Lua (the fence of a grant too: [`next_fence`] with
//! the Redis clock in µs as the floor).
//!
//! A grant's fencing token is [`next_fence`]: one above the last, and at least the backend's
//! fence floor. A backend whose counter can be lost while tokens it handed out live on (Redis and
//! PostgreSQL, where a failover to a replica that missed the last grants, or a restore, sets the
//! counter back) passes its clock in µs: a grant is then above every token handed out before, as
//! long as the clock that grants is not behind by more than the time between the last lost grant
//! and the loss. The in-process stores pass [`NO_FLOOR`] (their tokens go 1, 2, 3…): their
//! counter is lost only with everything that holds a token of it (the in-memory store's with its
//! process, whose callers end with it), or not at all (the durable file is written before a grant
//! is answered, and has no replica to fail over to; restoring an older copy of it is the one case
//! that would hand tokens out again).

use crate::lock::{Attempt, ExtendResult, Refusal, ReleaseResult, FENCE_KEEP_MS};

/// Whether a lease that ends at `expires_at` still holds at `now`.
pub fn holds(expires_at: i64, now: i64) -> bool {
    expires_at > now
}

/// The label an acquisition keeps: an empty label is no label (as on Redis, where the lock's
/// value cannot tell them apart).
pub fn label(label: Option<&str>) -> Option<&str> {
    label.filter(|l| !l.is_empty())
}

/// Until when the fencing token of an acquisition at `now` for `lease_ms` is kept, so tokens
/// strictly increase across acquisitions of a name used at least once in that time.
pub fn fence_kept_until(now: i64, lease_ms: u64) -> i64 {
    now + lease_ms as i64 + FENCE_KEEP_MS as i64
}

/// The fence floor of the in-process stores: none, so their tokens are the last plus one.
pub const NO_FLOOR: u64 = 0;

/// The fencing token of a grant: one above `last` (the name's last token, 0 when never granted
/// or forgotten), and at least `floor` (the backend's clock in µs where a failover or a restore
/// can lose the counter, else [`NO_FLOOR`]). The lock's and the semaphore's grants both take it.
pub fn next_fence(last: u64, floor: u64) -> u64 {
    (last + 1).max(floor)
}

/// A lock's live holder, as a backend loaded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder<'a> {
    pub owner: &'a str,
    pub fence: u64,
    pub label: Option<&'a str>,
    pub expires_at: i64,
}

/// What an acquisition decides: the caller's answer, and when it takes the lock the holder to
/// write (the new fence, the lease's end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acquire {
    pub attempt: Attempt,
    /// `(fence, expires_at)` of the new holder; `None` when the lock is held.
    pub take: Option<(u64, i64)>,
}

/// An acquisition at `now` of a lock whose holder is `holder` (`None` when no lease holds it)
/// and whose last fencing token is `last_fence` (0: never acquired, or forgotten); a grant's
/// token is [`next_fence`] of it and `fence_floor`.
pub fn acquire(
    holder: Option<Holder<'_>>,
    last_fence: u64,
    fence_floor: u64,
    lease_ms: u64,
    label: Option<&str>,
    now: i64,
) -> Acquire {
    match holder.filter(|h| holds(h.expires_at, now)) {
        Some(h) => Acquire {
            attempt: Attempt {
                acquired: false,
                fence: h.fence,
                remaining_ms: (h.expires_at - now).max(0) as u64,
                holder: h.label.map(str::to_string),
            },
            take: None,
        },
        None => {
            let fence = next_fence(last_fence, fence_floor);
            Acquire {
                attempt: Attempt {
                    acquired: true,
                    fence,
                    remaining_ms: lease_ms,
                    holder: self::label(label).map(str::to_string),
                },
                take: Some((fence, now + lease_ms as i64)),
            }
        }
    }
}

/// The owner check of a release or an extension by `owner`, of a lock whose holder is `holder`
/// (`None` when no lease holds it).
pub fn check(holder: Option<Holder<'_>>, owner: &str, now: i64) -> Result<(), Refusal> {
    match holder.filter(|h| holds(h.expires_at, now)) {
        None => Err(Refusal::NotHeld),
        Some(h) if h.owner != owner => Err(Refusal::NotOwner),
        Some(_) => Ok(()),
    }
}

/// A release's answer: released when [`check`] passes (then the holder is removed).
pub fn release(holder: Option<Holder<'_>>, owner: &str, now: i64) -> ReleaseResult {
    match check(holder, owner, now) {
        Ok(()) => ReleaseResult { released: true, reason: None },
        Err(r) => ReleaseResult { released: false, reason: Some(r) },
    }
}

/// An operator's release of the grant with fencing token `fence` (the dashboard's "Release…"),
/// without its owner token: released when the live holder has that fence; refused with
/// `NotOwner` when another grant holds the lock now (it changed hands since it was shown), with
/// `NotHeld` when none does.
pub fn release_fence(holder: Option<Holder<'_>>, fence: u64, now: i64) -> ReleaseResult {
    match holder {
        Some(h) if holds(h.expires_at, now) && h.fence == fence => {
            ReleaseResult { released: true, reason: None }
        }
        Some(h) if holds(h.expires_at, now) => {
            ReleaseResult { released: false, reason: Some(Refusal::NotOwner) }
        }
        _ => ReleaseResult { released: false, reason: Some(Refusal::NotHeld) },
    }
}

/// An extension's answer: extended when [`check`] passes (then the lease ends `lease_ms` after
/// `now`); a refusal tells the holder's remaining lease (0 when none holds it).
pub fn extend(holder: Option<Holder<'_>>, owner: &str, lease_ms: u64, now: i64) -> ExtendResult {
    match (check(holder, owner, now), holder) {
        (Ok(()), _) => extended(lease_ms),
        (Err(Refusal::NotOwner), Some(h)) => ExtendResult {
            extended: false,
            remaining_ms: (h.expires_at - now).max(0) as u64,
            reason: Some(Refusal::NotOwner),
        },
        (Err(r), _) => ExtendResult { extended: false, remaining_ms: 0, reason: Some(r) },
    }
}

/// The answer of an extension that passed [`check`] (a fast statement that extended answers it).
pub fn extended(lease_ms: u64) -> ExtendResult {
    ExtendResult { extended: true, remaining_ms: lease_ms, reason: None }
}

#[cfg(test)]
#[path = "lock_tests.rs"]
mod tests;
