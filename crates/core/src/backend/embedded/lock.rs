//! Concurrency Lock on the embedded store.

use std::collections::HashMap;

use super::expiries::{Expiries, SLICE};

use super::named::Named;
use super::{guard, now_ms, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::lock::{Attempt, ExtendResult, LockBackend, LockInfo, ReleaseResult};
use crate::rules::lock;

struct Held {
    owner: String,
    fence: u64,
    label: Option<String>,
    expires_at: i64,
}

impl Held {
    fn holder(&self) -> lock::Holder<'_> {
        lock::Holder {
            owner: &self.owner,
            fence: self.fence,
            label: self.label.as_deref(),
            expires_at: self.expires_at,
        }
    }
}

#[derive(Default)]
pub struct LockTable {
    held: Named<Held>,
    /// The last fencing token issued per lock name and until when it is kept: [`FENCE_KEEP_MS`](crate::lock::FENCE_KEEP_MS)
    /// past the lease of each acquisition, so tokens strictly increase across acquisitions,
    /// releases and expiries of a name used at least once in that time (as on Redis).
    fences: HashMap<String, (u64, i64)>,
    /// When each lease ends and each fence is forgotten, for clean-up in bounded slices.
    lease_expiry: Expiries,
    fence_expiry: Expiries,
}

impl LockTable {
    fn drop_held(&mut self, name: &str) {
        if let Some(h) = self.held.remove(name) {
            self.lease_expiry.moved(name, Some(h.expires_at), None);
        }
    }

    /// The live holder of `name`, dropping an expired one.
    fn live(&mut self, name: &str, now: i64) -> Option<&mut Held> {
        for gone in self.lease_expiry.due(now, SLICE) {
            self.held.remove(&gone);
        }
        for gone in self.fence_expiry.due(now, SLICE) {
            self.fences.remove(&gone);
        }
        if self.held.get(name).is_some_and(|h| !lock::holds(h.expires_at, now)) {
            self.drop_held(name);
        }
        self.held.get_mut(name)
    }

    pub fn try_acquire(&mut self, name: &str, owner: &str, lease_ms: u64, label: Option<&str>) -> Attempt {
        let now = now_ms();
        let last = self.fences.get(name).map_or(0, |f| f.0);
        let holder = self.live(name, now).map(|h| h.holder());
        let d = lock::acquire(holder, last, lock::NO_FLOOR, lease_ms, label, now);
        let Some((fence, expires_at)) = d.take else { return d.attempt };
        let keep_until = lock::fence_kept_until(now, lease_ms);
        let old_until = self.fences.insert(name.to_string(), (fence, keep_until)).map(|f| f.1);
        self.fence_expiry.moved(name, old_until, Some(keep_until));
        self.lease_expiry.moved(name, None, Some(expires_at));
        let label = lock::label(label).map(str::to_string);
        self.held.insert(name, Held { owner: owner.to_string(), fence, label, expires_at });
        d.attempt
    }

    pub fn release(&mut self, name: &str, owner: &str) -> ReleaseResult {
        let now = now_ms();
        let holder = self.live(name, now).map(|h| h.holder());
        let r = lock::release(holder, owner, now);
        if r.released {
            self.drop_held(name);
        }
        r
    }

    pub fn release_fence(&mut self, name: &str, fence: u64) -> ReleaseResult {
        let now = now_ms();
        let holder = self.live(name, now).map(|h| h.holder());
        let r = lock::release_fence(holder, fence, now);
        if r.released {
            self.drop_held(name);
        }
        r
    }

    pub fn extend(&mut self, name: &str, owner: &str, lease_ms: u64) -> ExtendResult {
        let now = now_ms();
        let holder = self.live(name, now).map(|h| h.holder());
        let r = lock::extend(holder, owner, lease_ms, now);
        if r.extended {
            if let Some(h) = self.held.get_mut(name) {
                let old = std::mem::replace(&mut h.expires_at, now + lease_ms as i64);
                self.lease_expiry.moved(name, Some(old), Some(now + lease_ms as i64));
            }
        }
        r
    }

    pub fn inspect(&mut self, name: &str) -> LockInfo {
        let now = now_ms();
        match self.live(name, now) {
            Some(h) => LockInfo {
                name: name.to_string(),
                locked: true,
                remaining_ms: (h.expires_at - now) as u64,
                fence: h.fence,
                holder: h.label.clone(),
            },
            None => LockInfo {
                name: name.to_string(),
                locked: false,
                remaining_ms: 0,
                fence: self.fences.get(name).map_or(0, |f| f.0),
                holder: None,
            },
        }
    }
}

impl LockBackend for Embedded {
    fn try_acquire<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        lease_ms: u64,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, Attempt> {
        ready(Ok(guard(&self.namespace().locks).try_acquire(name, owner, lease_ms, label)))
    }
    fn release<'a>(&'a self, name: &'a str, owner: &'a str) -> BoxFuture<'a, ReleaseResult> {
        ready(Ok(guard(&self.namespace().locks).release(name, owner)))
    }
    fn release_fence<'a>(&'a self, name: &'a str, fence: u64) -> BoxFuture<'a, ReleaseResult> {
        ready(Ok(guard(&self.namespace().locks).release_fence(name, fence)))
    }
    fn extend<'a>(&'a self, name: &'a str, owner: &'a str, lease_ms: u64) -> BoxFuture<'a, ExtendResult> {
        ready(Ok(guard(&self.namespace().locks).extend(name, owner, lease_ms)))
    }
    fn inspect<'a>(&'a self, name: &'a str) -> BoxFuture<'a, LockInfo> {
        ready(Ok(guard(&self.namespace().locks).inspect(name)))
    }
}

impl LockTable {
    /// The lock names after `cursor` in order, each with whether it is held at `now` (for the
    /// catalog; an expired lease not swept yet is not).
    pub(super) fn names_after<'a>(
        &'a self,
        cursor: Option<&'a str>,
        now: i64,
    ) -> impl Iterator<Item = (&'a str, bool)> {
        self.held.after(cursor).map(move |(k, h)| (k, lock::holds(h.expires_at, now)))
    }
}
