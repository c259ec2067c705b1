//! Semaphore on the embedded store.

use std::collections::HashMap;

use super::expiries::{Expiries, SLICE};
use super::named::Named;
use super::{guard, now_ms, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::lock::{ExtendResult, ReleaseResult, FENCE_KEEP_MS};
use crate::rules::{lock, semaphore};
use crate::semaphore::{Holder, PerKey, PermitAttempt, SemaphoreBackend, SemaphoreInfo};

struct Held {
    fence: u64,
    label: Option<String>,
    /// The key the permit was taken under, if any.
    key: Option<String>,
    expires_at: i64,
}

#[derive(Default)]
pub struct SemaphoreTable {
    /// Holders per name, by owner token (expired ones are dropped when the name is used).
    held: Named<HashMap<String, Held>>,
    /// The last fencing token issued per name and until when it is kept: [`FENCE_KEEP_MS`] past
    /// the lease of each acquisition, as for locks.
    fences: HashMap<String, (u64, i64)>,
    /// Each name by when its fence is forgotten, for clean-up in bounded slices.
    forget: Expiries,
}

impl SemaphoreTable {
    /// Forgets, in one bounded slice, the names whose fence has outlived its keep time (those
    /// with a hold extended past it are kept until that hold ends, plus the keep time).
    fn sweep(&mut self, now: i64) {
        for name in self.forget.due(now, SLICE) {
            let last_end = self.held.get_mut(&name).and_then(|hs| {
                hs.retain(|_, h| lock::holds(h.expires_at, now));
                hs.values().map(|h| h.expires_at).max()
            });
            match last_end {
                Some(end) => {
                    let keep = end + FENCE_KEEP_MS as i64;
                    if let Some(f) = self.fences.get_mut(&name) {
                        f.1 = keep;
                    }
                    self.forget.moved(&name, None, Some(keep));
                }
                None => {
                    self.held.remove(&name);
                    self.fences.remove(&name);
                }
            }
        }
    }

    /// The live holders of `name`, dropping expired ones.
    fn live(&mut self, name: &str, now: i64) -> Option<&mut HashMap<String, Held>> {
        self.sweep(now);
        let hs = self.held.get_mut(name)?;
        hs.retain(|_, h| lock::holds(h.expires_at, now));
        Some(hs)
    }

    pub fn try_acquire(
        &mut self,
        name: &str,
        owner: &str,
        permits: u64,
        per_key: Option<PerKey<'_>>,
        lease_ms: u64,
        label: Option<&str>,
    ) -> PermitAttempt {
        let now = now_ms();
        let last = self.fences.get(name).map_or(0, |f| f.0);
        let key = per_key.map(|k| k.key);
        let held = self.live(name, now).into_iter().flat_map(|hs| {
            hs.values().map(move |h| (h.expires_at, key.is_some() && h.key.as_deref() == key))
        });
        let d =
            semaphore::acquire(held, last, lock::NO_FLOOR, PerKey::limits(per_key, permits), lease_ms, now);
        let Some((fence, expires_at)) = d.take else { return d.attempt };
        let before = self.fences.get(name).map(|f| f.1);
        let keep = lock::fence_kept_until(now, lease_ms).max(before.unwrap_or(i64::MIN));
        self.fences.insert(name.to_string(), (fence, keep));
        self.forget.moved(name, before, Some(keep));
        let hs = self.held.get_or_insert_with(name, HashMap::new);
        let label = lock::label(label).map(str::to_string);
        hs.insert(owner.to_string(), Held { fence, label, key: key.map(str::to_string), expires_at });
        d.attempt
    }

    pub fn release_fence(&mut self, name: &str, fence: u64) -> ReleaseResult {
        let now = now_ms();
        let Some(hs) = self.live(name, now) else { return semaphore::release_fence([], fence, now) };
        let r = semaphore::release_fence(hs.values().map(|h| (h.fence, h.expires_at)), fence, now);
        if r.released {
            hs.retain(|_, h| h.fence != fence);
        }
        r
    }

    pub fn release(&mut self, name: &str, owner: &str) -> ReleaseResult {
        let now = now_ms();
        let held = self.live(name, now).is_some_and(|hs| hs.contains_key(owner));
        let r = semaphore::release(held);
        if r.released {
            self.live(name, now).and_then(|hs| hs.remove(owner));
        }
        r
    }

    pub fn extend(&mut self, name: &str, owner: &str, lease_ms: u64) -> ExtendResult {
        let now = now_ms();
        let held = self.live(name, now).is_some_and(|hs| hs.contains_key(owner));
        let r = semaphore::extend(held, lease_ms);
        if let Some(h) = self.held.get_mut(name).and_then(|hs| hs.get_mut(owner)).filter(|_| r.extended) {
            h.expires_at = now + lease_ms as i64;
        }
        r
    }

    /// The semaphore names after `cursor` in order, each with whether a holder's lease has not
    /// ended at `now` (for the catalog; the holders of one name are at most its permits).
    pub(super) fn names_after<'a>(
        &'a self,
        cursor: Option<&'a str>,
        now: i64,
    ) -> impl Iterator<Item = (&'a str, bool)> {
        self.held.after(cursor).map(move |(k, hs)| (k, hs.values().any(|h| lock::holds(h.expires_at, now))))
    }

    pub fn inspect(&mut self, name: &str) -> SemaphoreInfo {
        let now = now_ms();
        let mut holders: Vec<Holder> = self
            .live(name, now)
            .map(|hs| {
                hs.values()
                    .map(|h| Holder {
                        fence: h.fence,
                        remaining_ms: (h.expires_at - now) as u64,
                        label: h.label.clone(),
                        key: h.key.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        holders.sort_by_key(|h| (h.remaining_ms, h.fence));
        SemaphoreInfo { name: name.to_string(), holders, fence: self.fences.get(name).map_or(0, |f| f.0) }
    }
}

impl SemaphoreBackend for Embedded {
    fn try_acquire_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        permits: u64,
        per_key: Option<PerKey<'a>>,
        lease_ms: u64,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, PermitAttempt> {
        let mut t = guard(&self.namespace().semaphores);
        ready(Ok(t.try_acquire(name, owner, permits, per_key, lease_ms, label)))
    }
    fn release_permit<'a>(&'a self, name: &'a str, owner: &'a str) -> BoxFuture<'a, ReleaseResult> {
        ready(Ok(guard(&self.namespace().semaphores).release(name, owner)))
    }
    fn release_permit_fence<'a>(&'a self, name: &'a str, fence: u64) -> BoxFuture<'a, ReleaseResult> {
        ready(Ok(guard(&self.namespace().semaphores).release_fence(name, fence)))
    }
    fn extend_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        lease_ms: u64,
    ) -> BoxFuture<'a, ExtendResult> {
        ready(Ok(guard(&self.namespace().semaphores).extend(name, owner, lease_ms)))
    }
    fn inspect_semaphore<'a>(&'a self, name: &'a str) -> BoxFuture<'a, SemaphoreInfo> {
        ready(Ok(guard(&self.namespace().semaphores).inspect(name)))
    }
}

#[cfg(test)]
mod tests {
    use super::{SemaphoreTable, FENCE_KEEP_MS, SLICE};

    /// Names whose fence has outlived its keep time go a slice per call; a name with a live
    /// hold stays, with its fence.
    #[test]
    fn forgotten_names_go_one_slice_per_call() {
        let mut t = SemaphoreTable::default();
        for i in 0..2500 {
            assert!(t.try_acquire(&format!("s{i}"), "o", 1, None, 1, None).acquired);
        }
        assert!(t.try_acquire("held", "o", 1, None, 60_000, None).acquired);
        // Age every fence past its keep time, as 30 days would.
        let past = super::now_ms() - 1;
        let names: Vec<String> = t.fences.keys().filter(|n| *n != "held").cloned().collect();
        for n in &names {
            let f = t.fences.get_mut(n).expect("fence");
            t.forget.moved(n, Some(f.1), Some(past));
            f.1 = past;
        }
        let mut left = Vec::new();
        for _ in 0..3 {
            t.inspect("held");
            left.push(t.fences.len());
        }
        assert_eq!(left, vec![2501 - SLICE, 2501 - 2 * SLICE, 1]);
        assert_eq!(t.held.len(), 1);
        let info = t.inspect("held");
        assert_eq!((info.holders.len(), info.fence), (1, 1));
        assert!(t.fences["held"].1 >= super::now_ms() + FENCE_KEEP_MS as i64);
    }
}
