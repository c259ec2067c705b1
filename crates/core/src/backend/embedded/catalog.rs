//! Catalog on the embedded store: a page of names in name order. The tables keep names in hash
//! maps, so a page costs one pass over the names of its kind (not over items or ids) and keeps
//! only the page's names.

use std::collections::BinaryHeap;

use super::{guard, now_ms, now_us, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::catalog::{CatalogBackend, Entry, Kind, Page};

/// The `limit` smallest names after `cursor`, in order, and the cursor of the rest.
pub(crate) fn page<'n>(
    names: impl Iterator<Item = (&'n str, Option<u32>)>,
    cursor: Option<&str>,
    limit: u64,
) -> Page {
    let limit = limit.max(1) as usize;
    // A max-heap of the smallest names seen so far: the largest one leaves when a smaller comes.
    let mut heap: BinaryHeap<(&'n str, Option<u32>)> = BinaryHeap::with_capacity(limit + 1);
    let mut more = false;
    for (name, shards) in names {
        if cursor.is_some_and(|c| name <= c) {
            continue;
        }
        heap.push((name, shards));
        if heap.len() > limit {
            heap.pop();
            more = true;
        }
    }
    let entries: Vec<Entry> =
        heap.into_sorted_vec().into_iter().map(|(n, shards)| Entry { name: n.to_string(), shards }).collect();
    let cursor = if more { entries.last().map(|e| e.name.clone()) } else { None };
    Page { entries, cursor }
}

impl CatalogBackend for Embedded {
    fn list_names<'a>(&'a self, kind: Kind, cursor: Option<&'a str>, limit: u64) -> BoxFuture<'a, Page> {
        let ns = self.namespace();
        ready(Ok(match kind {
            Kind::Groups => page(guard(&ns.tracker).group_names().map(|n| (n, None)), cursor, limit),
            Kind::Locks => page(guard(&ns.locks).held_names(now_ms()).map(|n| (n, None)), cursor, limit),
            Kind::Queues => page(guard(&ns.queues).queue_names().map(|(n, s)| (n, Some(s))), cursor, limit),
            Kind::Limiters => {
                page(guard(&ns.limiters).active_names(now_us()).map(|n| (n, None)), cursor, limit)
            }
            Kind::Semaphores => {
                page(guard(&ns.semaphores).held_names(now_ms()).map(|n| (n, None)), cursor, limit)
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &Page) -> Vec<&str> {
        p.entries.iter().map(|e| e.name.as_str()).collect()
    }

    #[test]
    fn pages_follow_the_name_order() {
        let all = ["d", "a", "c", "e", "b"];
        let p = page(all.iter().map(|n| (*n, None)), None, 2);
        assert_eq!((names(&p), p.cursor.as_deref()), (vec!["a", "b"], Some("b")));
        let p = page(all.iter().map(|n| (*n, None)), Some("b"), 2);
        assert_eq!((names(&p), p.cursor.as_deref()), (vec!["c", "d"], Some("d")));
        let p = page(all.iter().map(|n| (*n, None)), Some("d"), 2);
        assert_eq!((names(&p), p.cursor.as_deref()), (vec!["e"], None));
        let p = page(all.iter().map(|n| (*n, None)), Some("c"), 2);
        assert_eq!(
            (names(&p), p.cursor.as_deref()),
            (vec!["d", "e"], None),
            "a full last page has no cursor"
        );
    }
}
