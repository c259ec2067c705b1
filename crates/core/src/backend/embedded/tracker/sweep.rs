//! Groups made on first write, purged a slice at a time, swept in turn and dropped once empty.

use super::group::Group;
use super::{TrackerTable, SWEEP_EVERY};
use crate::backend::embedded::expiries::SLICE;

impl TrackerTable {
    /// The group, after a purge of up to `max(SLICE, 2 * writes)` records.
    pub(super) fn group_mut(&mut self, group: &str, now: i64, writes: usize) -> &mut Group {
        self.writes += 1;
        if self.writes.is_multiple_of(SWEEP_EVERY) {
            self.sweep_one(now);
        }
        if !self.groups.contains_key(group) {
            let g = Group { ring_at: self.ring.len(), ..Group::default() };
            self.ring.push(group.to_string());
            self.groups.insert(group, g);
        }
        let g = self.groups.get_mut(group).expect("inserted above");
        g.purge(now, SLICE.max(2 * writes));
        g
    }

    /// Purges one slice of the next group in turn, and drops it once empty.
    fn sweep_one(&mut self, now: i64) {
        if self.ring.is_empty() {
            return;
        }
        self.cursor %= self.ring.len();
        let name = self.ring[self.cursor].clone();
        let Some(g) = self.groups.get_mut(&name) else { return };
        g.purge(now, SLICE);
        if g.items.is_empty() {
            // Its place in the ring goes to the last group, visited next.
            self.drop_group(&name);
        } else {
            self.cursor += 1;
        }
    }

    /// Removes a group and its place in the ring.
    pub(super) fn drop_group(&mut self, name: &str) {
        let Some(g) = self.groups.remove(name) else { return };
        self.ring.swap_remove(g.ring_at);
        if let Some(moved) = self.ring.get(g.ring_at) {
            if let Some(m) = self.groups.get_mut(moved) {
                m.ring_at = g.ring_at;
            }
        }
    }
}
