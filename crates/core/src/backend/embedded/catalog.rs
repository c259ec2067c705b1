//! Catalog on the embedded store: a page of names in name order. Each table keeps its names in
//! order beside its entries ([`super::named::Named`]), so a page is a seek to the cursor and a walk
//! over the page's names: it costs O(log n + page), not a pass over every name of its kind. Names not listed now (an expired
//! lease or rate not swept yet, a group without records) are skipped, at most [`MAX_SKIPPED`] per
//! page: then the page ends early with a cursor.

use super::{guard, now_ms, now_us, Embedded, Namespace};
use crate::backend::{ready, BoxFuture};
use crate::catalog::{CatalogBackend, Entry, Kind, Page};

/// The most names one page walks past without listing them.
pub(crate) const MAX_SKIPPED: usize = 1000;

/// The first `limit` listed names of `names` (in order, each with its shard count and whether it
/// is listed now), and the cursor of the rest.
fn page<'n>(names: impl Iterator<Item = (&'n str, Option<u32>, bool)>, limit: u64) -> Page {
    let limit = limit.max(1) as usize;
    let mut entries = Vec::new();
    let mut skipped = 0;
    for (name, shards, listed) in names {
        if entries.len() == limit {
            // There is more: the next page starts after the last name of this one.
            let cursor = entries.last().map(|e: &Entry| e.name.clone());
            return Page { entries, cursor };
        }
        if listed {
            entries.push(Entry { name: name.to_string(), shards });
        } else {
            skipped += 1;
            if skipped == MAX_SKIPPED {
                return Page { entries, cursor: Some(name.to_string()) };
            }
        }
    }
    Page { entries, cursor: None }
}

/// A page of `kind`'s names after `cursor`, and how many names it walked (for the tests).
fn list_page(ns: &Namespace, kind: Kind, cursor: Option<&str>, limit: u64) -> (Page, usize) {
    let mut walked = 0;
    let count = |_: &(&str, Option<u32>, bool)| walked += 1;
    let p = match kind {
        Kind::Groups => {
            let t = guard(&ns.tracker);
            page(t.names_after(cursor).map(|(n, l)| (n, None, l)).inspect(count), limit)
        }
        Kind::Locks => {
            let t = guard(&ns.locks);
            page(t.names_after(cursor, now_ms()).map(|(n, l)| (n, None, l)).inspect(count), limit)
        }
        Kind::Queues => {
            let t = guard(&ns.queues);
            page(t.names_after(cursor).map(|(n, s)| (n, Some(s), true)).inspect(count), limit)
        }
        Kind::Limiters => {
            let t = guard(&ns.limiters);
            page(t.names_after(cursor, now_us()).map(|(n, l)| (n, None, l)).inspect(count), limit)
        }
        Kind::Semaphores => {
            let t = guard(&ns.semaphores);
            page(t.names_after(cursor, now_ms()).map(|(n, l)| (n, None, l)).inspect(count), limit)
        }
    };
    (p, walked)
}

impl CatalogBackend for Embedded {
    fn list_names<'a>(&'a self, kind: Kind, cursor: Option<&'a str>, limit: u64) -> BoxFuture<'a, Page> {
        ready(Ok(list_page(self.namespace(), kind, cursor, limit).0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::Rule;
    use crate::queue::ShardRef;
    use crate::tracker::ItemOp;

    fn names(p: &Page) -> Vec<&str> {
        p.entries.iter().map(|e| e.name.as_str()).collect()
    }

    #[test]
    fn pages_follow_the_name_order() {
        let ns = Namespace::default();
        for n in ["d", "a", "c", "e", "b"] {
            assert!(guard(&ns.locks).try_acquire(n, "o", 60_000, None).acquired);
        }
        let at = |cursor, limit| list_page(&ns, Kind::Locks, cursor, limit).0;
        let p = at(None, 2);
        assert_eq!((names(&p), p.cursor.as_deref()), (vec!["a", "b"], Some("b")));
        let p = at(Some("b"), 2);
        assert_eq!((names(&p), p.cursor.as_deref()), (vec!["c", "d"], Some("d")));
        let p = at(Some("d"), 2);
        assert_eq!((names(&p), p.cursor.as_deref()), (vec!["e"], None));
        let p = at(Some("c"), 2);
        assert_eq!(
            (names(&p), p.cursor.as_deref()),
            (vec!["d", "e"], None),
            "a full last page has no cursor"
        );
        let p = at(Some("bb"), 1);
        assert_eq!((names(&p), p.cursor.as_deref()), (vec!["c"], Some("c")), "a cursor need not be a name");
    }

    const N: usize = 5000;

    /// `N` names of every kind in one namespace.
    fn full() -> Namespace {
        let ns = Namespace::default();
        for i in 0..N {
            let name = format!("n{i:05}");
            assert!(guard(&ns.locks).try_acquire(&name, "o", 60_000, None).acquired);
            assert!(guard(&ns.semaphores).try_acquire(&name, "o", 2, None, 60_000, None).acquired);
            guard(&ns.limiters).take(&name, Rule { interval_us: 60_000_000, burst: 10 }, 1, 0);
            let at = ShardRef { queue: &name, shards: 1, shard: 0 };
            guard(&ns.queues).enqueue(at, &["x".to_string()], 0, crate::queue::Debounce::Off).unwrap();
            let claim = ItemOp::Claim {
                id: "x".into(),
                owner: "o".into(),
                lease_ms: 60_000,
                reclaim_completed: false,
                max_attempts: None,
                note: None,
            };
            guard(&ns.tracker).apply(&name, &[claim], 60_000);
        }
        ns
    }

    /// Structural: a page walks its own names and one more, wherever the cursor is, for every
    /// kind; paging from the start lists every name once, in order.
    #[test]
    fn a_page_walks_only_its_own_names() {
        let ns = full();
        for kind in [Kind::Groups, Kind::Locks, Kind::Queues, Kind::Limiters, Kind::Semaphores] {
            for cursor in [None, Some("n02500"), Some("n04990")] {
                let (p, walked) = list_page(&ns, kind, cursor, 20);
                assert!(walked <= 21, "{kind:?} from {cursor:?}: walked {walked} names for a page of 20");
                assert_eq!(p.entries.len(), if cursor == Some("n04990") { 9 } else { 20 }, "{kind:?}");
            }
            let mut all = Vec::new();
            let mut cursor = None;
            loop {
                let (p, walked) = list_page(&ns, kind, cursor.as_deref(), 100);
                assert!(walked <= 101, "{kind:?}: walked {walked}");
                all.extend(p.entries.into_iter().map(|e| e.name));
                cursor = p.cursor;
                if cursor.is_none() {
                    break;
                }
            }
            assert_eq!(all.len(), N, "{kind:?}");
            assert!(all.windows(2).all(|w| w[0] < w[1]), "{kind:?}: in order, each once");
        }
    }

    /// Names not listed now are walked past, [`MAX_SKIPPED`] at most per page.
    #[test]
    fn a_page_skips_a_bounded_number_of_unlisted_names() {
        let ns = Namespace::default();
        assert!(guard(&ns.locks).try_acquire("b", "o", 60_000, None).acquired);
        // Leases that end together after the last acquire (each acquire drops expired ones).
        for i in 0..2 * MAX_SKIPPED + 10 {
            assert!(guard(&ns.locks).try_acquire(&format!("a{i:05}"), "o", 300, None).acquired);
        }
        std::thread::sleep(std::time::Duration::from_millis(350));
        let (p, walked) = list_page(&ns, Kind::Locks, None, 10);
        assert_eq!((p.entries.len(), walked), (0, MAX_SKIPPED));
        let (p, _) = list_page(&ns, Kind::Locks, p.cursor.as_deref(), 10);
        let (p, walked) = list_page(&ns, Kind::Locks, p.cursor.as_deref(), 10);
        assert_eq!((names(&p), p.cursor.as_deref(), walked), (vec!["b"], None, 11));
    }
}
