//! The in-progress places of a group's latest claim batch, kept beside the ranked status index
//! until a page is listed or the next batch comes (then they are sorted and joined to the index
//! in one pass). A batch's places share their score (the batch's lease end), so the run is just
//! its ids, in the order claimed: adding one is a push, with no sort and no tree node. Most of
//! them leave again before anything lists the group (each item is completed or failed), and
//! removing one is O(1): the bucket's last id is swapped into its place, at the position its
//! record keeps (like [`super::expiry_buckets::ExpiryBuckets`]).
//!
//! A place is its record's slot (the group's records are addressed by slot). A record keeps its
//! position after the run was merged; [`BatchRun::holds`] tells a current position from such a
//! stale one by the slot found there (a slot is in the run at most once, and the record in it
//! keeps its current position), so merging needs no visit of the records.

/// The position of a record whose place is not in a run.
pub const NO_RUN: u32 = u32::MAX;

#[derive(Default)]
pub struct BatchRun {
    score: i64,
    slots: Vec<u32>,
}

impl BatchRun {
    pub fn score(&self) -> i64 {
        self.score
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Starts the next run, for places at `score` (the current one must have been taken).
    pub fn open(&mut self, score: i64) {
        debug_assert!(self.slots.is_empty(), "a run is taken before the next one opens");
        self.score = score;
    }

    /// Adds the place (score, `slot`) and returns its position, which its record keeps.
    pub fn push(&mut self, slot: u32) -> u32 {
        self.slots.push(slot);
        (self.slots.len() - 1) as u32
    }

    /// Whether the place of `slot` is in the run at position `at` (false for a position kept
    /// from an earlier run).
    pub fn holds(&self, at: u32, slot: u32) -> bool {
        self.slots.get(at as usize) == Some(&slot)
    }

    /// Removes the place at position `at`. Returns the slot that moved into `at` (its record
    /// must keep `at` from now on), if any.
    pub fn remove(&mut self, at: u32) -> Option<u32> {
        self.slots.swap_remove(at as usize);
        if self.slots.len() <= self.slots.capacity() / 4 {
            // Give the memory back, amortized like the growth.
            self.slots.shrink_to(self.slots.len() * 2);
        }
        self.slots.get(at as usize).copied()
    }

    /// Takes every place of the run, in no order.
    pub fn take(&mut self) -> impl Iterator<Item = (i64, u32)> {
        let score = self.score;
        std::mem::take(&mut self.slots).into_iter().map(move |slot| (score, slot))
    }
}
