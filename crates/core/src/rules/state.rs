//! Job State's rules for values, over the facts of one key: whether a value is still there (its
//! expiry), what a set decides (its expiry, `ifAbsent`), and what an increment decides (the
//! counter as a counter stores it, the safe integer range, the TTL of a new counter). The
//! idempotency keys' rules are [`super::once`].
//!
//! The Redis scripts `state_set.lua`, `state_incr.lua` and `state_get.lua` write the same rules
//! in Lua (Redis drops expired values itself).

use crate::state::{Expiry, Refusal, StateValue, MAX_SAFE_INTEGER};

/// A key's value, as a backend loaded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value<'a> {
    pub json: &'a str,
    /// When it expires (ms since the epoch), if it does.
    pub expires_at: Option<i64>,
}

/// Whether a value that expires at `expires_at` (`None`: never) is still there at `now`: one
/// that is not counts as absent.
pub fn live(expires_at: Option<i64>, now: i64) -> bool {
    expires_at.is_none_or(|x| x > now)
}

/// The counter a value holds: `Ok(n)`, or a refusal when it is not an integer as a counter
/// stores it (the forms the Redis script accepts) or lies outside the safe integer range.
pub fn integer(json: &str) -> Result<i64, Refusal> {
    let digits = json.strip_prefix('-').unwrap_or(json);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (json == "0" || !digits.starts_with('0'));
    if !canonical {
        return Err(Refusal::NotInteger);
    }
    match json.parse::<i64>() {
        Ok(n) if n.abs() <= MAX_SAFE_INTEGER => Ok(n),
        _ => Err(Refusal::OutOfRange),
    }
}

impl From<Value<'_>> for StateValue {
    fn from(v: Value<'_>) -> Self {
        StateValue { json: v.json.to_string(), expires_at: v.expires_at }
    }
}

/// What a set decides when it is not refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Set<'a> {
    /// Nothing written: `ifAbsent` and the key holds this value (the answer).
    Keep(Value<'a>),
    /// Write the value, expiring at this time (`None`: never; an earlier expiry is cleared).
    Write { expires_at: Option<i64> },
}

/// A set at `now` with `expiry` and `if_absent` of a key whose value is `current` (`None`: none).
/// `current` is read only for `if_absent` (a store may skip loading it otherwise). An absolute
/// expiry that is not after `now` is refused before anything else.
pub fn set(
    current: Option<Value<'_>>,
    expiry: Expiry,
    if_absent: bool,
    now: i64,
) -> Result<Set<'_>, Refusal> {
    let expires_at = match expiry {
        Expiry::Never => None,
        Expiry::In(ms) => Some(now + ms as i64),
        Expiry::At(at) if (at as i64) <= now => return Err(Refusal::ExpiryPast),
        Expiry::At(at) => Some(at as i64),
    };
    if let Some(v) = current.filter(|v| if_absent && live(v.expires_at, now)) {
        return Ok(Set::Keep(v));
    }
    Ok(Set::Write { expires_at })
}

/// An increment at `now` by `by` of a key whose value is `current` (`None`: none, counted as 0),
/// with `ttl_ms` for a counter that has no expiry. Returns the new counter and its expiry (a
/// counter keeps the one it has); nothing is written on a refusal.
pub fn increment(
    current: Option<Value<'_>>,
    by: i64,
    ttl_ms: Option<u64>,
    now: i64,
) -> Result<(i64, Option<i64>), Refusal> {
    let (n, expires_at) = match current.filter(|v| live(v.expires_at, now)) {
        Some(v) => (integer(v.json)?, v.expires_at),
        None => (0, None),
    };
    let next = n + by;
    if next.abs() > MAX_SAFE_INTEGER {
        return Err(Refusal::OutOfRange);
    }
    Ok((next, expires_at.or_else(|| ttl_ms.map(|t| now + t as i64))))
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
