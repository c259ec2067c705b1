//! Item Tracker on the embedded store.
//!
//! - [`compact`]: a record as the store keeps it (compact, no timeline where implied);
//! - [`group`]: a group's records and their indexes, kept in step with every change;
//! - [`apply`]: item operations (claim, complete, fail, unset);
//! - [`claim_batch`]: many ids claimed at once;
//! - [`listing`]: reading items and pages of `listItems`;
//! - [`sweep`]: groups purged a slice at a time, swept in turn, dropped once empty.

mod apply;
mod claim_batch;
mod compact;
mod group;
mod listing;
mod sweep;
#[cfg(test)]
mod tests;

use super::named::Named;
use super::{guard, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::tracker::{
    BatchClaim, ClaimBatch, ItemList, ItemOp, ItemState, ListQuery, OpResult, TrackerBackend,
};
use group::Group;

#[derive(Default)]
pub struct TrackerTable {
    groups: Named<Group>,
    /// Every group's name, in no order: the sweep visits them in turn, one per
    /// [`SWEEP_EVERY`] writes, so groups nobody writes to again give their expired records back
    /// without any call visiting every group.
    ring: Vec<String>,
    /// The group the sweep visits next (a position in `ring`).
    cursor: usize,
    /// Writes so far.
    writes: u64,
}

const SWEEP_EVERY: u64 = 16;

impl TrackerBackend for Embedded {
    fn claim_batch<'a>(&'a self, group: &'a str, claim: BatchClaim<'a>) -> BoxFuture<'a, ClaimBatch> {
        ready(Ok(guard(&self.namespace().tracker).claim_batch(group, claim)))
    }
    fn apply<'a>(
        &'a self,
        group: &'a str,
        ops: &'a [ItemOp],
        retention_ms: u64,
    ) -> BoxFuture<'a, Vec<OpResult>> {
        ready(Ok(guard(&self.namespace().tracker).apply(group, ops, retention_ms)))
    }
    fn read<'a>(&'a self, group: &'a str, ids: &'a [String]) -> BoxFuture<'a, Vec<ItemState>> {
        ready(Ok(guard(&self.namespace().tracker).read(group, ids)))
    }
    fn list<'a>(&'a self, group: &'a str, query: ListQuery, retention_ms: u64) -> BoxFuture<'a, ItemList> {
        ready(Ok(guard(&self.namespace().tracker).list(group, query, retention_ms)))
    }
}

impl TrackerTable {
    /// The group names after `cursor` in order, each with whether it holds records (for the
    /// catalog).
    pub(super) fn names_after<'a>(
        &'a self,
        cursor: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a str, bool)> {
        self.groups.after(cursor).map(|(k, g)| (k, !g.items.is_empty()))
    }
}
