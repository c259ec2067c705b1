//! The in-progress places of a group's latest claim batch, kept beside the ranked status index
//! until a page is listed or the next batch comes (then they are sorted and joined to the index
//! in one pass). A batch's places share their score (the batch's lease end), so the run is just
//! its ids, in the order claimed: adding one is a push, with no sort and no tree node. Most of
//! them leave again before anything lists the group (each item is completed or failed), and
//! removing one is O(1): the bucket's last id is swapped into its place, at the position its
//! record keeps (like [`super::expiry_buckets::ExpiryBuckets`]).
//!
//! A record keeps its position after the run was merged; [`BatchRun::holds`] tells a current
//! position from such a stale one by the id's allocation, which every index shares with the
//! record (an `ArcStr`: a reference-counted string behind one thin pointer), so merging needs no visit of the records.

use arcstr::ArcStr;

/// The position of a record whose place is not in a run.
pub const NO_RUN: u32 = u32::MAX;

#[derive(Default)]
pub struct BatchRun {
    score: i64,
    ids: Vec<ArcStr>,
}

impl BatchRun {
    pub fn score(&self) -> i64 {
        self.score
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Starts the next run, for places at `score` (the current one must have been taken).
    pub fn open(&mut self, score: i64) {
        debug_assert!(self.ids.is_empty(), "a run is taken before the next one opens");
        self.score = score;
    }

    /// Adds the place (score, `id`) and returns its position, which its record keeps.
    pub fn push(&mut self, id: ArcStr) -> u32 {
        self.ids.push(id);
        (self.ids.len() - 1) as u32
    }

    /// Whether the place of `id` is in the run at position `at` (false for a position kept from
    /// an earlier run).
    pub fn holds(&self, at: u32, id: &ArcStr) -> bool {
        self.ids.get(at as usize).is_some_and(|x| ArcStr::ptr_eq(x, id))
    }

    /// Removes the place at position `at`. Returns the id that moved into `at` (its record must
    /// keep `at` from now on), if any.
    pub fn remove(&mut self, at: u32) -> Option<&ArcStr> {
        self.ids.swap_remove(at as usize);
        if self.ids.len() <= self.ids.capacity() / 4 {
            // Give the memory back, amortized like the growth.
            self.ids.shrink_to(self.ids.len() * 2);
        }
        self.ids.get(at as usize)
    }

    /// Takes every place of the run, in no order.
    pub fn take(&mut self) -> impl Iterator<Item = (i64, ArcStr)> {
        let score = self.score;
        std::mem::take(&mut self.ids).into_iter().map(move |id| (score, id))
    }
}
