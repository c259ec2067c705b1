//! The Item Tracker's records by expiry time, one bucket per time. The ids of one claim batch
//! share their expiry, so adding one is a push onto one bucket (no ordered insert and no id
//! comparisons, unlike [`super::expiries::Expiries`]); removing one swaps the bucket's last id
//! into its place, at the position its record keeps. Expired ids leave the earliest buckets a
//! slice at a time, so clean-up stays bounded per call.

use std::collections::BTreeMap;

pub struct ExpiryBuckets<K>(BTreeMap<i64, Vec<K>>);

impl<K> Default for ExpiryBuckets<K> {
    fn default() -> Self {
        ExpiryBuckets(BTreeMap::new())
    }
}

impl<K> ExpiryBuckets<K> {
    /// Adds `key` at time `t` and returns its position, which its record keeps for
    /// [`ExpiryBuckets::remove`].
    pub fn add(&mut self, t: i64, key: K) -> u32 {
        let b = self.0.entry(t).or_default();
        b.push(key);
        (b.len() - 1) as u32
    }

    /// Removes the key at position `at` of time `t`. Returns the key that moved into `at` (its
    /// record must keep `at` from now on), if any.
    pub fn remove(&mut self, t: i64, at: u32) -> Option<&K> {
        let b = self.0.get_mut(&t)?;
        b.swap_remove(at as usize);
        if b.is_empty() {
            // Give the memory back: a bucket left empty goes.
            self.0.remove(&t);
            return None;
        }
        let b = self.0.get_mut(&t)?;
        if b.len() <= b.capacity() / 4 {
            // Amortized like the growth: at least three quarters of the pushes since the last
            // resize were removed before this copy.
            b.shrink_to(b.len() * 2);
        }
        b.get(at as usize)
    }

    /// Takes up to `max` keys whose time is at or before `now`, earliest time first (each from
    /// the end of its bucket, so the others keep their positions).
    pub fn due(&mut self, now: i64, max: usize) -> Vec<K> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(mut e) = self.0.first_entry() else { break };
            if *e.key() > now {
                break;
            }
            let b = e.get_mut();
            let n = (max - out.len()).min(b.len());
            out.extend(b.drain(b.len() - n..));
            if b.is_empty() {
                e.remove();
            }
        }
        out
    }

    /// Whether some key's time is at or before `now` (a slice left it for later calls).
    pub fn any_due(&self, now: i64) -> bool {
        self.0.first_key_value().is_some_and(|(t, _)| *t <= now)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
impl<K> ExpiryBuckets<K> {
    /// The key at position `at` of time `t`.
    pub fn at(&self, t: i64, at: u32) -> Option<&K> {
        self.0.get(&t)?.get(at as usize)
    }
}
