//! Job State: a small durable memory for jobs. JSON values with a TTL or an absolute expiry,
//! atomic integer counters, and idempotency keys.
//!
//! Values cross the core as JSON text (JavaScript turns values into it and back); the core checks
//! that the text is JSON and at most [`MAX_VALUE_BYTES`] long before anything is written. A
//! counter is a value whose JSON is an integer, so `get` of a counter gives a number.
//!
//! Idempotency keys live apart from values: `claim_key` takes a key for one runner (a pending
//! marker with the runner's owner token and a lease), `complete_key` stores the runner's result
//! for a given time, `release_key` frees the key when the runner failed. All three are atomic and
//! owner-checked, so a runner whose lease ran out never overwrites or frees a newer runner's key.

use crate::backend::BoxFuture;
use std::time::Duration;

use crate::client::Client;
use crate::error::{At, Error, ErrorCode, FieldPath, Result};
use crate::tracker::truncate;
use crate::{token, validate};

/// The longest JSON text a value (or a stored idempotent result) may have: 1 MiB.
pub const MAX_VALUE_BYTES: usize = 1024 * 1024;
/// The largest magnitude of a counter and of an increment: JavaScript's `Number.MAX_SAFE_INTEGER`.
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;
/// The latest absolute expiry accepted: the largest JavaScript Date (ms since the epoch).
pub const MAX_EPOCH_MS: u64 = 8_640_000_000_000_000;

/// When a value expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Never (a set without expiry also clears an earlier one).
    Never,
    /// This many ms after the write.
    In(u64),
    /// At this time (ms since the epoch, by the backend's clock); it must be in the future.
    At(u64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateValue {
    pub json: String,
    /// When it expires (ms since the epoch), if it does.
    pub expires_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetResult {
    /// False only for `if_absent` when the key held a value.
    pub written: bool,
    /// The value the key holds now (the new one, or the existing one that was kept).
    pub current: StateValue,
}

/// The state of an idempotency key as `claim_key` found or made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyClaim {
    /// The key was free: this caller runs the work and must complete or release the key.
    Claimed { owner: String, lease_ms: u64 },
    /// Another runner holds the key; its lease ends in `remaining_ms`.
    Pending { remaining_ms: u64 },
    /// The work was done: its stored result.
    Done { json: String, expires_at: Option<i64> },
}

/// Reasons a backend refuses a state write; the core words the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `expiresAt` is not in the future by the backend's clock.
    ExpiryPast,
    /// The key holds a value that is not an integer.
    NotInteger,
    /// The counter would leave the safe integer range.
    OutOfRange,
}

pub fn refusal_error(key: &str, r: Refusal) -> Error {
    let key = truncate(key, 80);
    match r {
        Refusal::ExpiryPast => {
            Error::invalid_at("expires_at", format!("is not in the future; nothing was written to {key:?}"))
        }
        Refusal::NotInteger => Error::invalid(format!(
            "key {key:?} holds a value that is not an integer, so it cannot be incremented"
        )),
        Refusal::OutOfRange => Error::invalid(format!(
            "incrementing {key:?} would leave the safe integer range (±{MAX_SAFE_INTEGER}); nothing was written"
        )),
    }
}

/// What a backend must do for Job State. Each method is one atomic step.
pub trait StateBackend {
    /// Reads values (None: absent or expired).
    fn get<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Vec<Option<StateValue>>>;
    /// Writes a value; with `if_absent`, only when the key holds none. An [`Expiry::At`] that is not
    /// in the future is refused with [`Refusal::ExpiryPast`].
    fn set<'a>(
        &'a self,
        key: &'a str,
        json: &'a str,
        expiry: Expiry,
        if_absent: bool,
    ) -> BoxFuture<'a, std::result::Result<SetResult, Refusal>>;
    /// Deletes a value; true when there was one.
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, bool>;
    /// Adds `by` to an integer counter (absent counts as 0) and returns the new value. `ttl_ms`
    /// is applied when the key has no expiry (a new counter, or one without).
    fn increment<'a>(
        &'a self,
        key: &'a str,
        by: i64,
        ttl_ms: Option<u64>,
    ) -> BoxFuture<'a, std::result::Result<i64, Refusal>>;
    fn claim_key<'a>(&'a self, key: &'a str, owner: &'a str, lease_ms: u64) -> BoxFuture<'a, KeyClaim>;
    /// Stores the result and ends the pending marker, only while `owner` holds the key.
    fn complete_key<'a>(
        &'a self,
        key: &'a str,
        owner: &'a str,
        json: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, bool>;
    /// Frees a pending key, only while `owner` holds it.
    fn release_key<'a>(&'a self, key: &'a str, owner: &'a str) -> BoxFuture<'a, bool>;
}

/// Options of a set, before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetOptions {
    /// Expire this long after the write.
    pub ttl: Option<Duration>,
    /// Expire at this time, in ms since the epoch (1 to [`MAX_EPOCH_MS`]); not with `ttl`.
    pub expires_at: Option<u64>,
    pub if_absent: bool,
}

/// Checks that `json` is one JSON value of at most [`MAX_VALUE_BYTES`].
pub fn check_json(field: impl At, json: &str) -> Result<()> {
    if json.len() > MAX_VALUE_BYTES {
        return Err(Error::invalid_at(
            field,
            format!("is {} bytes of JSON; the limit is {MAX_VALUE_BYTES} bytes (1 MiB)", json.len()),
        ));
    }
    match serde_json::from_str::<serde::de::IgnoredAny>(json) {
        Ok(_) => Ok(()),
        Err(e) => Err(Error::invalid_at(field, format!("is not valid JSON: {e}")).with_source(e)),
    }
}

fn expiry(ttl: Option<Duration>, expires_at: Option<u64>) -> Result<Expiry> {
    match (ttl, expires_at) {
        (Some(_), Some(_)) => Err(Error::invalid_at("expires_at", "cannot be given together with a ttl")),
        (Some(v), None) => Ok(Expiry::In(validate::duration("ttl", v)?)),
        (None, Some(v)) => Ok(Expiry::At(validate::range("expires_at", v, 1, MAX_EPOCH_MS)?)),
        (None, None) => Ok(Expiry::Never),
    }
}

impl Client {
    pub async fn get_state(&self, keys: Vec<String>) -> Result<Vec<Option<StateValue>>> {
        let at = FieldPath::new("keys");
        validate::batch_len(&at, keys.len())?;
        for (i, k) in keys.iter().enumerate() {
            validate::name((&at, i), k)?;
        }
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        self.backend().get(&keys).await
    }

    pub async fn set_state(&self, key: &str, json: &str, opts: SetOptions) -> Result<SetResult> {
        validate::name("key", key)?;
        check_json("value", json)?;
        let exp = expiry(opts.ttl, opts.expires_at)?;
        self.backend().set(key, json, exp, opts.if_absent).await?.map_err(|r| refusal_error(key, r))
    }

    pub async fn delete_state(&self, key: &str) -> Result<bool> {
        validate::name("key", key)?;
        self.backend().delete(key).await
    }

    /// Adds `by` (default 1; a negative number subtracts; at most [`MAX_SAFE_INTEGER`] either
    /// way) and returns the new value.
    pub async fn increment(&self, key: &str, by: Option<i64>, ttl: Option<Duration>) -> Result<i64> {
        validate::name("key", key)?;
        let by = by.unwrap_or(1);
        if by.unsigned_abs() > MAX_SAFE_INTEGER as u64 {
            return Err(Error::invalid_at(
                "by",
                format!("must be a whole number from -{MAX_SAFE_INTEGER} to {MAX_SAFE_INTEGER}, got {by}"),
            ));
        }
        let ttl = match ttl {
            Some(v) => Some(validate::duration("ttl", v)?),
            None => None,
        };
        self.backend().increment(key, by, ttl).await?.map_err(|r| refusal_error(key, r))
    }

    /// Takes idempotency key `key` for `lease` when it is free.
    pub async fn claim_key(&self, key: &str, lease: Option<Duration>) -> Result<KeyClaim> {
        validate::name("key", key)?;
        let lease_ms = validate::duration_or("lease", lease, DEFAULT_KEY_LEASE_MS)?;
        self.backend().claim_key(key, &token::new_token(), lease_ms).await
    }

    /// Takes idempotency key `key` for `lease`, waiting up to `wait` while another caller holds
    /// it: tried again with backoff (woken by its release or completion where the backend
    /// announces them, see [`crate::wakeup`]) until it is claimed or done, or `wait` has passed
    /// (then `Pending`). Also returns the number of tries.
    pub async fn claim_key_waiting(
        &self,
        key: &str,
        lease: Option<Duration>,
        wait: Duration,
    ) -> Result<(KeyClaim, u32)> {
        validate::name("key", key)?;
        let lease_ms = validate::duration_or("lease", lease, DEFAULT_KEY_LEASE_MS)?;
        let wait_ms = validate::duration_or_zero("wait", wait)?;
        let owner = token::new_token();
        let (claim, _, attempts) = crate::lock::retry(
            wait_ms,
            || self.backend().subscribe(crate::wakeup::Topic::Key, key),
            || self.backend().claim_key(key, &owner, lease_ms),
            |c| match c {
                KeyClaim::Pending { remaining_ms } => (false, *remaining_ms),
                _ => (true, 0),
            },
        )
        .await?;
        Ok((claim, attempts))
    }

    /// Stores the result of the work done under `owner` for `ttl`. Refused with
    /// `ERR_NOT_OWNER` when the key is no longer held by `owner` (its lease ran out).
    pub async fn complete_key(
        &self,
        key: &str,
        owner: &str,
        json: &str,
        ttl: Option<Duration>,
    ) -> Result<()> {
        validate::name("key", key)?;
        token::check_token("owner", owner)?;
        check_json("result", json)?;
        let ttl = validate::duration_or("ttl", ttl, DEFAULT_RESULT_TTL_MS)?;
        if self.backend().complete_key(key, owner, json, ttl).await? {
            Ok(())
        } else {
            Err(Error::new(
                ErrorCode::NotOwner,
                format!(
                    "idempotency key {:?} is no longer held by this owner token (its lease ran out); the result was not stored",
                    truncate(key, 80)
                ),
            ))
        }
    }

    /// Frees a pending idempotency key held by `owner`; false when it was not (any more).
    pub async fn release_key(&self, key: &str, owner: &str) -> Result<bool> {
        validate::name("key", key)?;
        token::check_token("owner", owner)?;
        self.backend().release_key(key, owner).await
    }
}

/// Default lease of a pending idempotency key: 10 minutes.
pub const DEFAULT_KEY_LEASE_MS: u64 = 600_000;
/// Default time an idempotent result is kept: 24 hours.
pub const DEFAULT_RESULT_TTL_MS: u64 = 24 * 3600 * 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_checks() {
        check_json("value", "{\"a\":[1,2,null]}").unwrap();
        check_json("value", "\"text\"").unwrap();
        check_json("value", "12").unwrap();
        assert!(check_json("value", "").is_err());
        assert!(check_json("value", "{a:1}").unwrap_err().to_string().contains("value"));
        assert!(check_json("value", "1 2").is_err());
        assert!(check_json("value", "NaN").is_err());
        let big = format!("\"{}\"", "x".repeat(MAX_VALUE_BYTES));
        assert!(check_json("value", &big).unwrap_err().to_string().contains("1 MiB"));
        let fits = format!("\"{}\"", "x".repeat(MAX_VALUE_BYTES - 2));
        check_json("value", &fits).unwrap();
    }

    #[test]
    fn expiry_options() {
        assert_eq!(expiry(None, None).unwrap(), Expiry::Never);
        assert_eq!(expiry(Some(Duration::from_micros(1500)), None).unwrap(), Expiry::In(2));
        assert_eq!(expiry(None, Some(1_000_000_000_000)).unwrap(), Expiry::At(1_000_000_000_000));
        assert!(expiry(Some(Duration::from_millis(1)), Some(1_000_000_000_000)).is_err());
        assert!(expiry(None, Some(0)).is_err());
        assert!(expiry(Some(Duration::ZERO), None).is_err());
    }
}
