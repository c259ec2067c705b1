//! Job State's idempotency keys (`once`): what a claim decides (take a free key for a lease,
//! wait for a pending one, answer a done one's result), and the owner check of a completion
//! (the result stored for its TTL) or a release (the key freed).
//!
//! The Redis scripts `key_claim.lua`, `key_complete.lua` and `key_release.lua` write the same
//! rules in Lua (Redis drops expired keys itself).

/// Whether a key that expires at `expires_at` is still there at `now` (one that is not counts as
/// free): as a tracker record is kept.
pub use super::tracker::kept;

/// An idempotency key, as a backend loaded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key<'a> {
    /// Claimed by `owner`, its work under way; the lease ends at `expires_at`.
    Pending { owner: &'a str, expires_at: i64 },
    /// The work is done: its result, kept until `expires_at`.
    Done { json: &'a str, expires_at: i64 },
}

impl Key<'_> {
    fn expires_at(self) -> i64 {
        match self {
            Key::Pending { expires_at, .. } | Key::Done { expires_at, .. } => expires_at,
        }
    }
}

/// What a claim decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim<'a> {
    /// The key was free: write it pending for the caller, its lease ending at `expires_at`.
    Take { expires_at: i64 },
    /// Another runner's lease holds it for `remaining_ms` more.
    Pending { remaining_ms: u64 },
    /// The work was done: its stored result and when that is forgotten.
    Done { json: &'a str, expires_at: i64 },
}

/// A claim at `now` for `lease_ms` of a key stored as `key` (`None`: no key).
pub fn claim(key: Option<Key<'_>>, lease_ms: u64, now: i64) -> Claim<'_> {
    match key.filter(|k| kept(k.expires_at(), now)) {
        Some(Key::Done { json, expires_at }) => Claim::Done { json, expires_at },
        Some(Key::Pending { expires_at, .. }) => {
            Claim::Pending { remaining_ms: (expires_at - now).max(0) as u64 }
        }
        None => Claim::Take { expires_at: now + lease_ms as i64 },
    }
}

/// Whether `owner` holds the key stored as `key` pending at `now`: only then may it complete or
/// release it.
pub fn holds(key: Option<Key<'_>>, owner: &str, now: i64) -> bool {
    matches!(key, Some(Key::Pending { owner: o, expires_at }) if o == owner && kept(expires_at, now))
}

/// A completion at `now` by `owner`, keeping the result for `ttl_ms`: when the owner check
/// passes ([`holds`]), the key is done and kept until the time returned; else nothing changes.
pub fn complete(key: Option<Key<'_>>, owner: &str, ttl_ms: u64, now: i64) -> Option<i64> {
    holds(key, owner, now).then(|| now + ttl_ms as i64)
}

/// A release at `now` by `owner`: when the owner check passes ([`holds`]), the key is freed
/// (true); else nothing changes.
pub fn release(key: Option<Key<'_>>, owner: &str, now: i64) -> bool {
    holds(key, owner, now)
}

#[cfg(test)]
#[path = "once_tests.rs"]
mod tests;
