//! Rate Limiter on the embedded store: one TAT per name, dropped once reached.

use std::collections::HashMap;

use super::{guard, now_us, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::limiter::{decide, LimiterBackend, Rule, Stored, Take};

#[derive(Default)]
pub struct LimiterTable {
    tats: HashMap<String, i64>,
    ops: u64,
}

const SWEEP_EVERY: u64 = 4096;

impl LimiterTable {
    pub fn take(&mut self, name: &str, rule: Rule, cost: u64, max_wait_us: u64) -> Take {
        let now = now_us();
        self.ops += 1;
        if self.ops.is_multiple_of(SWEEP_EVERY) {
            // A reached TAT is the same as none: idle limiters cost nothing.
            self.tats.retain(|_, tat| *tat > now);
        }
        let (take, next) = decide(self.tats.get(name).copied(), now, rule, cost, max_wait_us);
        if let Some(next) = next {
            self.tats.insert(name.to_string(), next);
        }
        take
    }

    pub fn inspect(&self, name: &str) -> Stored {
        let now = now_us();
        Stored { now_us: now, tat_us: self.tats.get(name).copied().filter(|t| *t > now) }
    }

    /// Names whose TAT is still ahead of `now_us` (not full again yet).
    pub(super) fn active_names(&self, now_us: i64) -> impl Iterator<Item = &str> {
        self.tats.iter().filter(move |(_, t)| **t > now_us).map(|(k, _)| k.as_str())
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
