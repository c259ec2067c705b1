//! Rate Limiter on the embedded store: one TAT and pause end per name, dropped once both are
//! reached.

use super::expiries::{Expiries, SLICE};
use super::named::Named;
use super::{guard, now_us, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::limiter::{LimiterBackend, PauseEnd, Rule, Stored, Take};
use crate::rules::limiter::{decide, pause, Pause};

/// A limiter: its TAT and its pause end (0: none), µs.
#[derive(Debug, Clone, Copy, Default)]
struct Record {
    tat: i64,
    pause: i64,
}

impl Record {
    /// When the record equals none: both times reached.
    fn end(self) -> i64 {
        self.tat.max(self.pause)
    }
}

#[derive(Default)]
pub struct LimiterTable {
    limiters: Named<Record>,
    /// Each name by its end: a reached record is the same as none, so names are dropped then, in
    /// bounded slices per call (idle limiters cost nothing, and no call scans them all).
    reached: Expiries,
}

impl LimiterTable {
    /// Drops a slice of reached names, and returns the record of `name` (None when absent).
    fn load(&mut self, name: &str, now: i64) -> Option<Record> {
        for gone in self.reached.due(now, SLICE) {
            self.limiters.remove(&gone);
        }
        self.limiters.get(name).copied()
    }

    fn store(&mut self, name: &str, old: Option<Record>, new: Record) {
        self.limiters.insert(name, new);
        self.reached.moved(name, old.map(Record::end), Some(new.end()));
    }

    pub fn take(&mut self, name: &str, rule: Rule, cost: u64, max_wait_us: u64) -> Take {
        let now = now_us();
        let old = self.load(name, now);
        let (take, next) = decide(old.map(|r| r.tat), old.map(|r| r.pause), now, rule, cost, max_wait_us);
        if let Some(tat) = next {
            self.store(name, old, Record { tat, ..old.unwrap_or_default() });
        }
        take
    }

    pub fn pause(&mut self, name: &str, end: PauseEnd) -> (Pause, Stored) {
        let now = now_us();
        let old = self.load(name, now);
        let decision = pause(old.map(|r| r.pause).filter(|p| *p > now), now, end);
        if let Pause::Store(until) = decision {
            self.store(name, old, Record { pause: until, ..old.unwrap_or_default() });
        }
        (decision, self.stored(name, now))
    }

    pub fn inspect(&self, name: &str) -> Stored {
        self.stored(name, now_us())
    }

    fn stored(&self, name: &str, now: i64) -> Stored {
        let r = self.limiters.get(name).copied();
        Stored {
            now_us: now,
            tat_us: r.map(|r| r.tat).filter(|t| *t > now),
            pause_us: r.map(|r| r.pause).filter(|p| *p > now),
        }
    }

    /// The limiter names after `cursor` in order, each with whether its TAT or pause end is still
    /// ahead of `now_us` (not full again yet, or paused; for the catalog).
    pub(super) fn names_after<'a>(
        &'a self,
        cursor: Option<&'a str>,
        now_us: i64,
    ) -> impl Iterator<Item = (&'a str, bool)> {
        self.limiters.after(cursor).map(move |(k, r)| (k, r.end() > now_us))
    }
}

impl LimiterBackend for Embedded {
    fn take<'a>(&'a self, name: &'a str, rule: Rule, cost: u64, max_wait_us: u64) -> BoxFuture<'a, Take> {
        ready(Ok(guard(&self.namespace().limiters).take(name, rule, cost, max_wait_us)))
    }

    fn inspect_limiter<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Stored> {
        ready(Ok(guard(&self.namespace().limiters).inspect(name)))
    }

    fn pause_limiter<'a>(&'a self, name: &'a str, end: PauseEnd) -> BoxFuture<'a, (Pause, Stored)> {
        ready(Ok(guard(&self.namespace().limiters).pause(name, end)))
    }
}

#[cfg(test)]
mod tests {
    use super::{LimiterTable, Record, SLICE};
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
            t.store(&name, None, Record { tat: past, pause: 0 });
        }
        let mut left = Vec::new();
        for _ in 0..3 {
            // A take of cost 0 stores nothing.
            t.take("other", slow, 0, 0);
            left.push(t.limiters.len());
        }
        assert_eq!(left, vec![2501 - SLICE, 2501 - 2 * SLICE, 1]);
        assert!(t.inspect("kept").tat_us.is_some());
    }
}
