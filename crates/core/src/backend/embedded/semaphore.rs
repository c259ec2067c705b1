//! Semaphore on the embedded store.

use std::collections::HashMap;

use super::{guard, now_ms, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::lock::{ExtendResult, Refusal, ReleaseResult};
use crate::semaphore::{Holder, PermitAttempt, SemaphoreBackend, SemaphoreInfo};

struct Held {
    fence: u64,
    label: Option<String>,
    expires_at: i64,
}

#[derive(Default)]
pub struct SemaphoreTable {
    /// Live holders per name, by owner token.
    held: HashMap<String, HashMap<String, Held>>,
    /// The last fencing token issued per name, for the life of the process.
    fences: HashMap<String, u64>,
    ops: u64,
}

const SWEEP_EVERY: u64 = 4096;

impl SemaphoreTable {
    /// The live holders of `name`, dropping expired ones (and, now and then, every empty name).
    fn live(&mut self, name: &str, now: i64) -> Option<&mut HashMap<String, Held>> {
        self.ops += 1;
        if self.ops.is_multiple_of(SWEEP_EVERY) {
            self.held.retain(|_, hs| {
                hs.retain(|_, h| h.expires_at > now);
                !hs.is_empty()
            });
        }
        let hs = self.held.get_mut(name)?;
        hs.retain(|_, h| h.expires_at > now);
        Some(hs)
    }

    pub fn try_acquire(
        &mut self,
        name: &str,
        owner: &str,
        permits: u64,
        lease_ms: u64,
        label: Option<&str>,
    ) -> PermitAttempt {
        let now = now_ms();
        let last = self.fences.get(name).copied().unwrap_or(0);
        if let Some(hs) = self.live(name, now).filter(|hs| hs.len() as u64 >= permits) {
            let first = hs.values().map(|h| h.expires_at).min().unwrap_or(now);
            return PermitAttempt {
                acquired: false,
                fence: last,
                holders: hs.len() as u64,
                remaining_ms: (first - now).max(0) as u64,
            };
        }
        let fence = last + 1;
        self.fences.insert(name.to_string(), fence);
        let hs = self.held.entry(name.to_string()).or_default();
        let label = label.filter(|l| !l.is_empty()).map(str::to_string);
        hs.insert(owner.to_string(), Held { fence, label, expires_at: now + lease_ms as i64 });
        PermitAttempt { acquired: true, fence, holders: hs.len() as u64, remaining_ms: lease_ms }
    }

    pub fn release(&mut self, name: &str, owner: &str) -> ReleaseResult {
        let now = now_ms();
        match self.live(name, now).and_then(|hs| hs.remove(owner)) {
            Some(_) => ReleaseResult { released: true, reason: None },
            None => ReleaseResult { released: false, reason: Some(Refusal::NotHeld) },
        }
    }

    pub fn extend(&mut self, name: &str, owner: &str, lease_ms: u64) -> ExtendResult {
        let now = now_ms();
        match self.live(name, now).and_then(|hs| hs.get_mut(owner)) {
            Some(h) => {
                h.expires_at = now + lease_ms as i64;
                ExtendResult { extended: true, remaining_ms: lease_ms, reason: None }
            }
            None => ExtendResult { extended: false, remaining_ms: 0, reason: Some(Refusal::NotHeld) },
        }
    }

    /// Names with a holder whose lease has not ended at `now`.
    pub(super) fn held_names(&self, now: i64) -> impl Iterator<Item = &str> {
        self.held
            .iter()
            .filter(move |(_, hs)| hs.values().any(|h| h.expires_at > now))
            .map(|(k, _)| k.as_str())
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
                    })
                    .collect()
            })
            .unwrap_or_default();
        holders.sort_by_key(|h| (h.remaining_ms, h.fence));
        SemaphoreInfo { name: name.to_string(), holders, fence: self.fences.get(name).copied().unwrap_or(0) }
    }
}

impl SemaphoreBackend for Embedded {
    fn try_acquire_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        permits: u64,
        lease_ms: u64,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, PermitAttempt> {
        ready(Ok(guard(&self.namespace().semaphores).try_acquire(name, owner, permits, lease_ms, label)))
    }
    fn release_permit<'a>(&'a self, name: &'a str, owner: &'a str) -> BoxFuture<'a, ReleaseResult> {
        ready(Ok(guard(&self.namespace().semaphores).release(name, owner)))
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
