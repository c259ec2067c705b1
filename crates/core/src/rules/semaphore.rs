//! The Semaphore's rules: what an acquisition decides (at most `permits` live holders, and with a
//! per-key limit at most `per_key` live holders of the caller's key, both in the same step; each
//! holder with its fencing token), the check of a release or an extension (only the owner's own
//! live permit), and an operator's release of the permit with a given fencing token. A lease
//! holds, a label is kept and a fence is kept as for the lock ([`lock::holds`], [`lock::label`],
//! [`lock::fence_kept_until`]).
//!
//! The per-key limit follows Trigger.dev's `concurrency: { perKey, total }`: a permit is taken
//! only when both the total and the key's count are below their limits; a permit without a key
//! counts toward the total only.
//!
//! The Redis scripts `semaphore_acquire.lua`, `semaphore_release.lua`,
//! `semaphore_release_fence.lua` and `semaphore_extend.lua` write the same rules in Lua (the fence
//! of a grant too: [`lock::next_fence`] with the Redis clock in µs as the floor).

use super::lock;
use crate::lock::{ExtendResult, Refusal, ReleaseResult};
use crate::semaphore::PermitAttempt;

/// What an acquisition decides: the caller's answer, and when it takes a permit the holder to
/// write (the new fence, the lease's end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acquire {
    pub attempt: PermitAttempt,
    /// `(fence, expires_at)` of the new holder; `None` when every permit is held.
    pub take: Option<(u64, i64)>,
}

/// The limits of one acquisition: `permits` in total, and with a key at most `per_key` holders
/// of that key (`None`: a permit without a key, counted toward the total only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub permits: u64,
    pub per_key: Option<u64>,
}

/// An acquisition at `now` of a name whose holders are `holders`: each its lease end and whether
/// it holds a permit of the caller's key (always `false` for a call without a key; leases that no
/// longer hold are not counted), and whose last fencing token is `last_fence` (0: never taken, or
/// forgotten; a grant's token is [`lock::next_fence`] of it and `fence_floor`). Refused when the live holders are `permits` or more, or the key's live holders are
/// `per_key` or more; a refusal's `remaining_ms` is the time until the first lease that would
/// make room ends: the key's first when the key is full (only a permit of the key frees its
/// place), else the first of all.
pub fn acquire(
    holders: impl IntoIterator<Item = (i64, bool)>,
    last_fence: u64,
    fence_floor: u64,
    limits: Limits,
    lease_ms: u64,
    now: i64,
) -> Acquire {
    let (mut n, mut first, mut k, mut key_first) = (0u64, None::<i64>, 0u64, None::<i64>);
    for (end, same_key) in holders.into_iter().filter(|&(e, _)| lock::holds(e, now)) {
        n += 1;
        first = Some(first.map_or(end, |f| f.min(end)));
        if same_key {
            k += 1;
            key_first = Some(key_first.map_or(end, |f| f.min(end)));
        }
    }
    let key_full = limits.per_key.is_some_and(|p| k >= p);
    if n >= limits.permits || key_full {
        let wait_for = if key_full { key_first } else { first };
        let remaining_ms = wait_for.map_or(0, |e| (e - now).max(0) as u64);
        let attempt =
            PermitAttempt { acquired: false, fence: last_fence, holders: n, key_holders: k, remaining_ms };
        return Acquire { attempt, take: None };
    }
    let fence = lock::next_fence(last_fence, fence_floor);
    let key_holders = if limits.per_key.is_some() { k + 1 } else { 0 };
    Acquire {
        attempt: PermitAttempt { acquired: true, fence, holders: n + 1, key_holders, remaining_ms: lease_ms },
        take: Some((fence, now + lease_ms as i64)),
    }
}

/// An operator's release (the dashboard's "Release…") of the permit with fencing token `fence`,
/// without its owner token, among holders given as (fence, lease end): released when a live
/// holder has that fence (then it is removed), else `NotHeld` (released, expired, or never).
pub fn release_fence(holders: impl IntoIterator<Item = (u64, i64)>, fence: u64, now: i64) -> ReleaseResult {
    release(holders.into_iter().any(|(f, end)| f == fence && lock::holds(end, now)))
}

/// A release's answer, by whether the owner holds a live permit (then it is removed).
pub fn release(held: bool) -> ReleaseResult {
    if held {
        ReleaseResult { released: true, reason: None }
    } else {
        ReleaseResult { released: false, reason: Some(Refusal::NotHeld) }
    }
}

/// An extension's answer, by whether the owner holds a live permit (then its lease ends
/// `lease_ms` after now).
pub fn extend(held: bool, lease_ms: u64) -> ExtendResult {
    if held {
        ExtendResult { extended: true, remaining_ms: lease_ms, reason: None }
    } else {
        ExtendResult { extended: false, remaining_ms: 0, reason: Some(Refusal::NotHeld) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;

    /// Holders (none; one live; one ended now; two live; one live and one ended) × permits
    /// (1, 2) → the answer and what is written.
    #[test]
    fn acquire_table() {
        const LIVE: i64 = NOW + 300;
        const LATER: i64 = NOW + 500;
        // ends, permits, (acquired, fence, holders, remaining), written
        type Row = (&'static [i64], u64, (bool, u64, u64, u64), Option<(u64, i64)>);
        let keyless = |permits| Limits { permits, per_key: None };
        let table: [Row; 10] = [
            (&[], 1, (true, 6, 1, 1_000), Some((6, NOW + 1_000))),
            (&[], 2, (true, 6, 1, 1_000), Some((6, NOW + 1_000))),
            (&[LIVE], 1, (false, 5, 1, 300), None),
            (&[LIVE], 2, (true, 6, 2, 1_000), Some((6, NOW + 1_000))),
            (&[NOW], 1, (true, 6, 1, 1_000), Some((6, NOW + 1_000))),
            (&[NOW], 2, (true, 6, 1, 1_000), Some((6, NOW + 1_000))),
            (&[LATER, LIVE], 1, (false, 5, 2, 300), None),
            (&[LATER, LIVE], 2, (false, 5, 2, 300), None),
            (&[NOW, LATER], 1, (false, 5, 1, 500), None),
            (&[NOW, LATER], 2, (true, 6, 2, 1_000), Some((6, NOW + 1_000))),
        ];
        for (ends, permits, (acquired, fence, holders, remaining_ms), take) in table {
            let attempt = PermitAttempt { acquired, fence, holders, key_holders: 0, remaining_ms };
            let want = Acquire { attempt, take };
            let got =
                acquire(ends.iter().map(|&e| (e, false)), 5, lock::NO_FLOOR, keyless(permits), 1_000, NOW);
            assert_eq!(got, want, "{ends:?} of {permits}");
        }
    }

    /// Holders (lease end, of the caller's key) × (total, per key) → the answer and what is
    /// written: both limits in one decision, the key's count only of live holders of that key.
    #[test]
    fn per_key_table() {
        const A: i64 = NOW + 300;
        const B: i64 = NOW + 500;
        // holders, permits, per key, (acquired, holders, key holders, remaining)
        type Row = (&'static [(i64, bool)], u64, u64, (bool, u64, u64, u64));
        let table: [Row; 11] = [
            // Nothing held: taken, the first of its key.
            (&[], 10, 2, (true, 1, 1, 1_000)),
            // One of the key held, room for two: taken.
            (&[(A, true)], 10, 2, (true, 2, 2, 1_000)),
            // The key full: refused though the total has room; waits for the key's first end.
            (&[(B, false), (A, true), (B, true)], 10, 2, (false, 3, 2, 300)),
            (&[(A, false), (B, true), (B, true)], 10, 2, (false, 3, 2, 500)),
            // Other keys' (or keyless) holders do not count toward the key.
            (&[(A, false), (A, false), (B, true)], 10, 2, (true, 4, 2, 1_000)),
            // The total full, the key not: refused, waits for the first end of all.
            (&[(A, false), (B, true)], 2, 2, (false, 2, 1, 300)),
            // Both full: waits for the key's first end (only it frees the key).
            (&[(A, false), (B, true)], 2, 1, (false, 2, 1, 500)),
            // An ended holder of the key frees its place.
            (&[(NOW, true), (A, true)], 10, 2, (true, 2, 2, 1_000)),
            (&[(NOW, true), (NOW - 5, true)], 10, 1, (true, 1, 1, 1_000)),
            // per key 1: one at a time per key.
            (&[(A, true)], 10, 1, (false, 1, 1, 300)),
            (&[(A, false)], 10, 1, (true, 2, 1, 1_000)),
        ];
        for (held, permits, per_key, (acquired, holders, key_holders, remaining_ms)) in table {
            let fence = if acquired { 6 } else { 5 };
            let attempt = PermitAttempt { acquired, fence, holders, key_holders, remaining_ms };
            let take = acquired.then_some((6, NOW + 1_000));
            let limits = Limits { permits, per_key: Some(per_key) };
            let got = acquire(held.iter().copied(), 5, lock::NO_FLOOR, limits, 1_000, NOW);
            assert_eq!(got, Acquire { attempt, take }, "{held:?}, {permits} total, {per_key} per key");
        }
    }

    /// A grant's fence is [`lock::next_fence`] of the last and the floor (the backend's clock in
    /// µs where a failover can lose the counter); a refusal reports the last fence.
    #[test]
    fn acquire_takes_the_floor() {
        const US: u64 = 1_800_000_000_000_000;
        let one = Limits { permits: 1, per_key: None };
        // holders, last, floor, (acquired, fence)
        type Row = (&'static [i64], u64, u64, (bool, u64));
        let table: [Row; 5] = [
            (&[], 0, US, (true, US)),
            (&[], 70, US, (true, US)),
            (&[NOW], US + 5, US, (true, US + 6)),
            (&[NOW + 300], 70, US, (false, 70)),
            (&[], 70, lock::NO_FLOOR, (true, 71)),
        ];
        for (ends, last, floor, (acquired, fence)) in table {
            let d = acquire(ends.iter().map(|&e| (e, false)), last, floor, one, 1_000, NOW);
            assert_eq!((d.attempt.acquired, d.attempt.fence), (acquired, fence), "{ends:?} last {last}");
            assert_eq!(d.take, acquired.then_some((fence, NOW + 1_000)), "{ends:?} last {last}");
        }
    }

    #[test]
    fn release_fence_table() {
        let held = [(7, NOW + 10), (9, NOW), (11, NOW + 1)];
        assert_eq!(release_fence(held, 7, NOW), ReleaseResult { released: true, reason: None });
        assert_eq!(release_fence(held, 11, NOW), ReleaseResult { released: true, reason: None });
        let not_held = ReleaseResult { released: false, reason: Some(Refusal::NotHeld) };
        // Ended, never issued, none held.
        assert_eq!(release_fence(held, 9, NOW), not_held);
        assert_eq!(release_fence(held, 8, NOW), not_held);
        assert_eq!(release_fence([], 7, NOW), not_held);
    }

    #[test]
    fn release_and_extend_table() {
        assert_eq!(release(true), ReleaseResult { released: true, reason: None });
        assert_eq!(release(false), ReleaseResult { released: false, reason: Some(Refusal::NotHeld) });
        assert_eq!(extend(true, 70), ExtendResult { extended: true, remaining_ms: 70, reason: None });
        let refused = ExtendResult { extended: false, remaining_ms: 0, reason: Some(Refusal::NotHeld) };
        assert_eq!(extend(false, 70), refused);
    }
}
