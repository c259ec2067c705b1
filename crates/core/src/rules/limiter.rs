//! The Rate Limiter's rules: a take by GCRA (the generic cell rate algorithm of redis-cell, see
//! [`crate::limiter`]) and a pause (an upstream said "429, retry after": every take is refused
//! until the pause ends, as BullMQ's `worker.rateLimit(ms)` holds a queue's workers).
//!
//! A limiter's state is its TAT (theoretical arrival time, µs) and its pause end (µs), each
//! None when absent or reached. A pause moves the limiter's base time to its end: at the end
//! the limiter is as full as it would be then without the pause (its burst available when the
//! TAT is reached by then), and no token is due before it. A reservation (a take with a max wait)
//! made during a pause gets slots from the pause end on; one made before a pause keeps its slots.
//!
//! The Redis scripts `limiter_take.lua` and `limiter_pause.lua` write the same rules in Lua.

use crate::limiter::{PauseEnd, Rule, Take};
use crate::validate::MAX_DURATION_MS;

/// The longest pause, µs ahead of the backend's now (365 days, as every other duration).
pub const MAX_PAUSE_US: i64 = MAX_DURATION_MS as i64 * 1000;

/// The decision of one take on a limiter whose TAT is `stored` and whose pause ends at `paused`
/// (each None when absent or expired): the take and the TAT to store (None: store nothing).
pub fn decide(
    stored: Option<i64>,
    paused: Option<i64>,
    now_us: i64,
    rule: Rule,
    cost: u64,
    max_wait_us: u64,
) -> (Take, Option<i64>) {
    let pause_us = paused.filter(|p| *p > now_us);
    let tat = stored.map_or(now_us, |t| t.max(now_us)).max(pause_us.unwrap_or(now_us));
    let next = tat + (cost * rule.interval_us) as i64;
    let due = due(next - (rule.burst * rule.interval_us) as i64, pause_us);
    let allowed = due - now_us <= max_wait_us as i64;
    let take = Take { allowed, now_us, tat_us: tat, pause_us };
    (take, (allowed && cost > 0).then_some(next))
}

/// When a token whose GCRA time is `at` is due: never before the pause end.
pub fn due(at: i64, pause_us: Option<i64>) -> i64 {
    pause_us.map_or(at, |p| at.max(p))
}

/// What a pause decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pause {
    /// Store this pause end (µs): it is ahead of now and of the stored one.
    Store(i64),
    /// Nothing to store: the end is not ahead of now (a date in the past) or an existing pause
    /// lasts at least as long (a pause never shortens another).
    Keep,
    /// Refused: the end is more than [`MAX_PAUSE_US`] ahead of now (by this many µs).
    TooFar(i64),
}

/// A pause asked at `now_us` to end at `end`, on a limiter whose pause ends at `stored` (None
/// when absent or expired).
pub fn pause(stored: Option<i64>, now_us: i64, end: PauseEnd) -> Pause {
    let end = match end {
        PauseEnd::At(at) => at,
        PauseEnd::After(us) => now_us.saturating_add(us.min(i64::MAX as u64) as i64),
    };
    let ahead = end.saturating_sub(now_us);
    if ahead > MAX_PAUSE_US {
        Pause::TooFar(ahead)
    } else if ahead <= 0 || stored.is_some_and(|s| s >= end) {
        Pause::Keep
    } else {
        Pause::Store(end)
    }
}

#[cfg(test)]
#[path = "limiter_tests.rs"]
mod tests;
