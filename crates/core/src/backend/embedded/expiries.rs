//! Names by expiry time, kept in step with a table's entries, so expired entries are dropped in
//! bounded slices ([`SLICE`] per call) instead of by scanning the table: when a million entries
//! expire at once, no call blocks the event loop for long, and the following calls go on.

use std::collections::BTreeSet;

/// The most expired entries one call drops from a table.
pub const SLICE: usize = 1000;

#[derive(Default)]
pub struct Expiries(BTreeSet<(i64, String)>);

impl Expiries {
    /// Moves `name` from expiry `old` to `new` (None: no entry, or one that never expires).
    pub fn moved(&mut self, name: &str, old: Option<i64>, new: Option<i64>) {
        if old == new {
            return;
        }
        if let Some(t) = old {
            self.0.remove(&(t, name.to_string()));
        }
        if let Some(t) = new {
            self.0.insert((t, name.to_string()));
        }
    }

    /// Takes up to `max` names whose expiry is at or before `now`, earliest first.
    pub fn due(&mut self, now: i64, max: usize) -> Vec<String> {
        let mut out = Vec::new();
        while out.len() < max {
            match self.0.first() {
                Some((t, _)) if *t <= now => {}
                _ => break,
            }
            if let Some((_, name)) = self.0.pop_first() {
                out.push(name);
            }
        }
        out
    }
}
