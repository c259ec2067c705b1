//! Job State on the embedded store. The same rules as the Redis scripts `state_*.lua`.

use std::collections::HashMap;

use super::expiries::{Expiries, SLICE};
use super::{guard, now_ms, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::state::{Expiry, KeyClaim, Refusal, SetResult, StateBackend, StateValue, MAX_SAFE_INTEGER};

struct Entry {
    json: String,
    expires_at: Option<i64>,
}

impl Entry {
    fn live(&self, now: i64) -> bool {
        self.expires_at.is_none_or(|x| x > now)
    }
}

/// An idempotency key: pending (owner set, no result) or done (result set).
struct Key {
    owner: Option<String>,
    result: Option<String>,
    expires_at: i64,
}

#[derive(Default)]
pub struct StateTable {
    values: HashMap<String, Entry>,
    keys: HashMap<String, Key>,
    /// The expiries of `values` (those that expire) and of `keys`, for clean-up in slices.
    value_expiry: Expiries,
    key_expiry: Expiries,
}

/// The counter a value holds: `Ok(n)`, or a refusal when it is not an integer as a counter
/// stores it (the forms the Redis script accepts) or lies outside the safe integer range.
pub(crate) fn integer(json: &str) -> std::result::Result<i64, Refusal> {
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

impl StateTable {
    /// Drops expired entries: the one asked for at once, others a bounded slice per call.
    fn tick(&mut self, key: &str, now: i64) {
        self.sweep(now);
        self.expire(key, now);
    }

    /// Drops up to [`SLICE`] expired values and as many keys.
    fn sweep(&mut self, now: i64) {
        for k in self.value_expiry.due(now, SLICE) {
            self.values.remove(&k);
        }
        for k in self.key_expiry.due(now, SLICE) {
            self.keys.remove(&k);
        }
    }

    /// Drops `key`'s value and idempotency key when expired.
    fn expire(&mut self, key: &str, now: i64) {
        if self.values.get(key).is_some_and(|e| !e.live(now)) {
            self.drop_value(key);
        }
        if self.keys.get(key).is_some_and(|k| k.expires_at <= now) {
            self.drop_key(key);
        }
    }

    fn put_value(&mut self, key: &str, e: Entry) {
        let new = e.expires_at;
        let old = self.values.insert(key.to_string(), e).and_then(|o| o.expires_at);
        self.value_expiry.moved(key, old, new);
    }

    fn drop_value(&mut self, key: &str) -> bool {
        match self.values.remove(key) {
            Some(old) => {
                self.value_expiry.moved(key, old.expires_at, None);
                true
            }
            None => false,
        }
    }

    fn put_key(&mut self, key: &str, k: Key) {
        let new = k.expires_at;
        let old = self.keys.insert(key.to_string(), k).map(|o| o.expires_at);
        self.key_expiry.moved(key, old, Some(new));
    }

    fn drop_key(&mut self, key: &str) {
        if let Some(old) = self.keys.remove(key) {
            self.key_expiry.moved(key, Some(old.expires_at), None);
        }
    }

    pub fn get(&mut self, keys: &[String]) -> Vec<Option<StateValue>> {
        let now = now_ms();
        self.sweep(now);
        keys.iter()
            .map(|k| {
                self.expire(k, now);
                self.values.get(k).map(|e| StateValue { json: e.json.clone(), expires_at: e.expires_at })
            })
            .collect()
    }

    pub fn set(
        &mut self,
        key: &str,
        json: &str,
        expiry: Expiry,
        if_absent: bool,
    ) -> std::result::Result<SetResult, Refusal> {
        let now = now_ms();
        self.tick(key, now);
        let expires_at = match expiry {
            Expiry::Never => None,
            Expiry::In(ms) => Some(now + ms as i64),
            Expiry::At(at) if (at as i64) <= now => return Err(Refusal::ExpiryPast),
            Expiry::At(at) => Some(at as i64),
        };
        if if_absent {
            if let Some(e) = self.values.get(key) {
                let current = StateValue { json: e.json.clone(), expires_at: e.expires_at };
                return Ok(SetResult { written: false, current });
            }
        }
        self.put_value(key, Entry { json: json.to_string(), expires_at });
        Ok(SetResult { written: true, current: StateValue { json: json.to_string(), expires_at } })
    }

    pub fn delete(&mut self, key: &str) -> bool {
        let now = now_ms();
        self.tick(key, now);
        self.drop_value(key)
    }

    pub fn increment(
        &mut self,
        key: &str,
        by: i64,
        ttl_ms: Option<u64>,
    ) -> std::result::Result<i64, Refusal> {
        let now = now_ms();
        self.tick(key, now);
        let (current, expires_at) = match self.values.get(key) {
            Some(e) => (integer(&e.json)?, e.expires_at),
            None => (0, None),
        };
        let next = current + by;
        if next.abs() > MAX_SAFE_INTEGER {
            return Err(Refusal::OutOfRange);
        }
        let expires_at = expires_at.or_else(|| ttl_ms.map(|t| now + t as i64));
        self.put_value(key, Entry { json: next.to_string(), expires_at });
        Ok(next)
    }

    pub fn claim_key(&mut self, key: &str, owner: &str, lease_ms: u64) -> KeyClaim {
        let now = now_ms();
        self.tick(key, now);
        match self.keys.get(key) {
            Some(Key { result: Some(json), expires_at, .. }) => {
                KeyClaim::Done { json: json.clone(), expires_at: Some(*expires_at) }
            }
            Some(k) => KeyClaim::Pending { remaining_ms: (k.expires_at - now).max(0) as u64 },
            None => {
                self.put_key(
                    key,
                    Key { owner: Some(owner.to_string()), result: None, expires_at: now + lease_ms as i64 },
                );
                KeyClaim::Claimed { owner: owner.to_string(), lease_ms }
            }
        }
    }

    pub fn complete_key(&mut self, key: &str, owner: &str, json: &str, ttl_ms: u64) -> bool {
        let now = now_ms();
        self.tick(key, now);
        match self.keys.get_mut(key) {
            Some(k) if k.result.is_none() && k.owner.as_deref() == Some(owner) => {
                let old = k.expires_at;
                k.owner = None;
                k.result = Some(json.to_string());
                k.expires_at = now + ttl_ms as i64;
                let new = k.expires_at;
                self.key_expiry.moved(key, Some(old), Some(new));
                true
            }
            _ => false,
        }
    }

    pub fn release_key(&mut self, key: &str, owner: &str) -> bool {
        let now = now_ms();
        self.tick(key, now);
        match self.keys.get(key) {
            Some(k) if k.result.is_none() && k.owner.as_deref() == Some(owner) => {
                self.drop_key(key);
                true
            }
            _ => false,
        }
    }
}

impl StateBackend for Embedded {
    fn get<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Vec<Option<StateValue>>> {
        ready(Ok(guard(&self.namespace().state).get(keys)))
    }
    fn set<'a>(
        &'a self,
        key: &'a str,
        json: &'a str,
        expiry: Expiry,
        if_absent: bool,
    ) -> BoxFuture<'a, std::result::Result<SetResult, Refusal>> {
        ready(Ok(guard(&self.namespace().state).set(key, json, expiry, if_absent)))
    }
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, bool> {
        ready(Ok(guard(&self.namespace().state).delete(key)))
    }
    fn increment<'a>(
        &'a self,
        key: &'a str,
        by: i64,
        ttl_ms: Option<u64>,
    ) -> BoxFuture<'a, std::result::Result<i64, Refusal>> {
        ready(Ok(guard(&self.namespace().state).increment(key, by, ttl_ms)))
    }
    fn claim_key<'a>(&'a self, key: &'a str, owner: &'a str, lease_ms: u64) -> BoxFuture<'a, KeyClaim> {
        ready(Ok(guard(&self.namespace().state).claim_key(key, owner, lease_ms)))
    }
    fn complete_key<'a>(
        &'a self,
        key: &'a str,
        owner: &'a str,
        json: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, bool> {
        ready(Ok(guard(&self.namespace().state).complete_key(key, owner, json, ttl_ms)))
    }
    fn release_key<'a>(&'a self, key: &'a str, owner: &'a str) -> BoxFuture<'a, bool> {
        ready(Ok(guard(&self.namespace().state).release_key(key, owner)))
    }
}

#[cfg(test)]
mod tests {
    use super::integer;
    use crate::state::Refusal;

    #[test]
    fn counters_parse_like_the_redis_script() {
        assert_eq!(integer("0"), Ok(0));
        assert_eq!(integer("-12"), Ok(-12));
        assert_eq!(integer("9007199254740991"), Ok(9_007_199_254_740_991));
        assert_eq!(integer("9007199254740992"), Err(Refusal::OutOfRange));
        assert_eq!(integer("99999999999999999999"), Err(Refusal::OutOfRange));
        for bad in ["", "-", "-0", "01", "1.0", "1e3", " 1", "\"1\"", "+1", "null"] {
            assert_eq!(integer(bad), Err(Refusal::NotInteger), "{bad:?}");
        }
    }
}
