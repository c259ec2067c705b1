//! Rate Limiter on the embedded store: one TAT per name, dropped once reached.

use super::expiries::{Expiries, SLICE};
use super::named::Named;
use super::{guard, now_us, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::limiter::{decide, LimiterBackend, Rule, Stored, Take};

#[derive(Default)]
pub struct LimiterTable {
    tats: Named<i64>,
    /// Each name by its TAT: a reached TAT is the same as none, so names are dropped then, in
    /// bounded slices per call (idle limiters cost nothing, and no call scans them all).
    reached: Expiries,
}

impl LimiterTable {
    pub fn take(&mut self, name: &str, rule: Rule, cost: u64, max_wait_us: u64) -> Take {
        let now = now_us();
        for gone in self.reached.due(now, SLICE) {
            self.tats.remove(&gone);
        }
        let old = self.tats.get(name).copied();
        let (take, next) = decide(old, now, rule, cost, max_wait_us);
        if let Some(next) = next {
            self.tats.insert(name, next);
            self.reached.moved(name, old, Some(next));
        }
        take
    }

    pub fn inspect(&self, name: &str) -> Stored {
        let now = now_us();
        Stored { now_us: now, tat_us: self.tats.get(name).copied().filter(|t| *t > now) }
    }

    /// The limiter names after `cursor` in order, each with whether its TAT is still ahead of
    /// `now_us` (not full again yet; for the catalog).
    pub(super) fn names_after<'a>(
        &'a self,
        cursor: Option<&'a str>,
        now_us: i64,
    ) -> impl Iterator<Item = (&'a str, bool)> {
        self.tats.after(cursor).map(move |(k, t)| (k, *t > now_us))
    }
}

impl LimiterBackend for Embedded {
    fn take<'a>(&'a self, name: &'a str, rule: Rule, cost: u64, max_wait_us: u64) -> BoxFuture<'a, Take> {
        ready(Ok(guard(&self.namespace().limiters).take(name, rule, cost, max_wait_us)))
    }

    fn inspect_limiter<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Stored> {
        ready(Ok(guard(&self.namespace().limiters).inspect(name)))
    }
}

#[cfg(test)]
mod tests {
    use super::{LimiterTable, SLICE};
    use crate::limiter::Rule;

    /// 2.5 slices of names reach their TAT together: each take forgets one slice at most, and a
    /// name still ahead is kept.
    #[test]
    fn reached_names_go_one_slice_per_call() {
        let mut t = LimiterTable::default();
        let slow = Rule { interval_us: 3_600_000_000, burst: 1 };
        assert!(t.take("kept", slow, 1, 0).allowed);
        // 2500 names whose TAT has just been reached.
        let past = super::now_us() - 1;
        for i in 0..2500 {
            let name = format!("n{i}");
            t.tats.insert(&name, past);
            t.reached.moved(&name, None, Some(past));
        }
        let mut left = Vec::new();
        for _ in 0..3 {
            // A take of cost 0 stores nothing.
            t.take("other", slow, 0, 0);
            left.push(t.tats.len());
        }
        assert_eq!(left, vec![2501 - SLICE, 2501 - 2 * SLICE, 1]);
        assert!(t.inspect("kept").tat_us.is_some());
    }
}
