//! The Semaphore's rules: what an acquisition decides (at most `permits` live holders, each
//! with its fencing token), and the check of a release or an extension (only the owner's own
//! live permit). A lease holds, a label is kept and a fence is kept as for the lock
//! ([`lock::holds`], [`lock::label`], [`lock::fence_kept_until`]).
//!
//! The Redis scripts `semaphore_acquire.lua`, `semaphore_release.lua` and
//! `semaphore_extend.lua` write the same rules in Lua.

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

/// An acquisition at `now` of one of `permits` permits of a name whose holders' leases end at
/// `ends` (leases that no longer hold are not counted) and whose last fencing token is
/// `last_fence` (0: never taken, or forgotten).
pub fn acquire(
    ends: impl IntoIterator<Item = i64>,
    last_fence: u64,
    permits: u64,
    lease_ms: u64,
    now: i64,
) -> Acquire {
    let (mut n, mut first) = (0u64, None::<i64>);
    for end in ends.into_iter().filter(|&e| lock::holds(e, now)) {
        n += 1;
        first = Some(first.map_or(end, |f| f.min(end)));
    }
    if n >= permits {
        let remaining_ms = first.map_or(0, |e| (e - now).max(0) as u64);
        return Acquire {
            attempt: PermitAttempt { acquired: false, fence: last_fence, holders: n, remaining_ms },
            take: None,
        };
    }
    let fence = last_fence + 1;
    Acquire {
        attempt: PermitAttempt { acquired: true, fence, holders: n + 1, remaining_ms: lease_ms },
        take: Some((fence, now + lease_ms as i64)),
    }
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
            let want = Acquire { attempt: PermitAttempt { acquired, fence, holders, remaining_ms }, take };
            assert_eq!(acquire(ends.iter().copied(), 5, permits, 1_000, NOW), want, "{ends:?} of {permits}");
        }
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
