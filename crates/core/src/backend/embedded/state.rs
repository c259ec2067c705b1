//! Job State on the embedded store: a storage adapter around [`crate::rules::state`] and
//! [`crate::rules::once`] (the Redis scripts `state_*.lua` and `key_*.lua` write the same rules
//! in Lua).

use std::collections::HashMap;

use super::expiries::{Expiries, SLICE};
use super::{guard, now_ms, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::rules::{once, state};
use crate::state::{Expiry, KeyClaim, Refusal, SetResult, StateBackend, StateValue};

struct Entry {
    json: String,
    expires_at: Option<i64>,
}

impl Entry {
    fn value(&self) -> state::Value<'_> {
        state::Value { json: &self.json, expires_at: self.expires_at }
    }
}

/// An idempotency key: pending under its owner, or done with its result.
enum Key {
    Pending { owner: String, expires_at: i64 },
    Done { json: String, expires_at: i64 },
}

impl Key {
    fn expires_at(&self) -> i64 {
        match self {
            Key::Pending { expires_at, .. } | Key::Done { expires_at, .. } => *expires_at,
        }
    }

    fn rule(&self) -> once::Key<'_> {
        match self {
            Key::Pending { owner, expires_at } => once::Key::Pending { owner, expires_at: *expires_at },
            Key::Done { json, expires_at } => once::Key::Done { json, expires_at: *expires_at },
        }
    }
}

#[derive(Default)]
pub struct StateTable {
    values: HashMap<String, Entry>,
    keys: HashMap<String, Key>,
    /// The expiries of `values` (those that expire) and of `keys`, for clean-up in slices.
    value_expiry: Expiries,
    key_expiry: Expiries,
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
        if self.values.get(key).is_some_and(|e| !state::live(e.expires_at, now)) {
            self.drop_value(key);
        }
        if self.keys.get(key).is_some_and(|k| !once::kept(k.expires_at(), now)) {
            self.drop_key(key);
        }
    }

    fn put_value(&mut self, key: &str, e: Entry) {
        let new = e.expires_at;
        let old = match self.values.get_mut(key) {
            Some(slot) => std::mem::replace(slot, e).expires_at,
            None => self.values.insert(key.to_string(), e).and_then(|o| o.expires_at),
        };
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
        let new = k.expires_at();
        let old = match self.keys.get_mut(key) {
            Some(slot) => Some(std::mem::replace(slot, k).expires_at()),
            None => self.keys.insert(key.to_string(), k).map(|o| o.expires_at()),
        };
        self.key_expiry.moved(key, old, Some(new));
    }

    fn drop_key(&mut self, key: &str) {
        if let Some(old) = self.keys.remove(key) {
            self.key_expiry.moved(key, Some(old.expires_at()), None);
        }
    }

    pub fn get(&mut self, keys: &[String]) -> Vec<Option<StateValue>> {
        let now = now_ms();
        self.sweep(now);
        keys.iter()
            .map(|k| {
                self.expire(k, now);
                self.values.get(k).map(|e| e.value().into())
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
        match state::set(self.values.get(key).map(Entry::value), expiry, if_absent, now)? {
            state::Set::Keep(v) => Ok(SetResult { written: false, current: v.into() }),
            state::Set::Write { expires_at } => {
                self.put_value(key, Entry { json: json.to_string(), expires_at });
                Ok(SetResult { written: true, current: StateValue { json: json.to_string(), expires_at } })
            }
        }
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
        let (next, expires_at) = state::increment(self.values.get(key).map(Entry::value), by, ttl_ms, now)?;
        self.put_value(key, Entry { json: next.to_string(), expires_at });
        Ok(next)
    }

    pub fn claim_key(&mut self, key: &str, owner: &str, lease_ms: u64) -> KeyClaim {
        let now = now_ms();
        self.tick(key, now);
        match once::claim(self.keys.get(key).map(Key::rule), lease_ms, now) {
            once::Claim::Done { json, expires_at } => {
                KeyClaim::Done { json: json.to_string(), expires_at: Some(expires_at) }
            }
            once::Claim::Pending { remaining_ms } => KeyClaim::Pending { remaining_ms },
            once::Claim::Take { expires_at } => {
                self.put_key(key, Key::Pending { owner: owner.to_string(), expires_at });
                KeyClaim::Claimed { owner: owner.to_string(), lease_ms }
            }
        }
    }

    pub fn complete_key(&mut self, key: &str, owner: &str, json: &str, ttl_ms: u64) -> bool {
        let now = now_ms();
        self.tick(key, now);
        match once::complete(self.keys.get(key).map(Key::rule), owner, ttl_ms, now) {
            Some(expires_at) => {
                self.put_key(key, Key::Done { json: json.to_string(), expires_at });
                true
            }
            None => false,
        }
    }

    pub fn release_key(&mut self, key: &str, owner: &str) -> bool {
        let now = now_ms();
        self.tick(key, now);
        let freed = once::release(self.keys.get(key).map(Key::rule), owner, now);
        if freed {
            self.drop_key(key);
        }
        freed
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
