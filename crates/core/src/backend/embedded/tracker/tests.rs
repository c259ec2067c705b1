use super::group::{order, place_of};
use super::{TrackerTable, SWEEP_EVERY};
use crate::backend::embedded::expiries::SLICE;
use crate::backend::embedded::now_ms;
use crate::rules::tracker::page;
use crate::tracker::{BatchClaim, ItemOp, ListFilter, ListQuery, Record};

const DAY: u64 = 86_400_000;

/// Every record is in its expiry bucket at the position it keeps and in its status index or
/// (in progress at the run's score) in the batch run at the position it keeps; nothing else
/// is in the indexes; no place is left pending, no call left batching.
fn check_indexes(t: &TrackerTable) {
    for g in t.groups.values() {
        assert!(g.pending.iter().all(Vec::is_empty));
        assert!(!g.batching);
        assert_eq!(g.items.len(), g.expiry.len());
        assert_eq!(g.items.len(), g.run.len() + g.by_status.iter().map(|s| s.len()).sum::<usize>());
        for (n, id, e) in g.items.iter() {
            assert_eq!(g.items.find(id), Some(n), "slot of {id}");
            assert_eq!(g.expiry.at(e.rec.x, e.at), Some(&n), "expiry position of {id}");
            let (k, s) = place_of(&e.rec).expect("a stored record has a status");
            let place = (s, n);
            let set = &g.by_status[k];
            let below = set.count_while(|p| order(&g.items)(p, &place).is_lt());
            let in_set = set.iter_from(below).next() == Some(&place);
            let in_run = g.run.holds(e.run_at, n);
            assert!(in_set != in_run, "place of {id} in exactly one of the index and the run");
            assert!(!in_run || (k, s) == (0, g.run.score()), "run place of {id}");
        }
    }
}

/// Random claim batches and operations, some expiring within the test: the indexes stay in
/// step with the records, and pages equal those of a full scan of the records.
#[test]
fn indexes_follow_random_operations() {
    let mut rnd = crate::backend::embedded::seeded(99);
    let mut t = TrackerTable::default();
    for step in 0..1200 {
        let ids: Vec<String> = (0..rnd(40)).map(|_| format!("i{}", rnd(60))).collect();
        if rnd(2) == 0 {
            let claim = BatchClaim {
                ids: &ids,
                owner: "o",
                lease_ms: 1 + rnd(3) * 1000,
                reclaim_completed: rnd(2) == 0,
                retention_ms: rnd(4),
                max_attempts: None,
                note: None,
            };
            t.claim_batch("g", claim);
        } else {
            let ops: Vec<ItemOp> = ids
                .into_iter()
                .map(|id| match rnd(5) {
                    0 | 1 => ItemOp::Claim {
                        id,
                        owner: "o".into(),
                        lease_ms: 1 + rnd(2) * 1000,
                        reclaim_completed: rnd(2) == 0,
                        max_attempts: None,
                        note: None,
                    },
                    2 => ItemOp::Complete { id, owner: None, keep_ms: rnd(3) * DAY, result: None },
                    3 => ItemOp::Fail { id, owner: None, error: "e".into(), keep_ms: 1 + rnd(3) },
                    _ => ItemOp::Unset { id },
                })
                .collect();
            t.apply("g", &ops, rnd(3) * DAY);
        }
        check_indexes(&t);
        if rnd(8) == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let now = now_ms();
        let Some(g) = t.groups.get_mut("g") else { continue };
        g.purge(now, usize::MAX);
        check_indexes(&t);
        // Pages only now and then, so batch runs also meet later batches and operations
        // before a page merges them.
        if rnd(3) != 0 {
            continue;
        }
        let g = t.groups.get_mut("g").expect("checked above");
        let records: Vec<(String, Record)> =
            g.items.iter().map(|(_, id, e)| (id.to_string(), e.rec.record())).collect();
        let filter = [
            ListFilter::All,
            ListFilter::InProgress,
            ListFilter::Abandoned,
            ListFilter::Failed,
            ListFilter::Completed,
        ][rnd(5) as usize];
        let q = ListQuery { filter, offset: rnd(10), limit: 1 + rnd(30) };
        let want = page(records.iter().map(|(id, r)| (id, r)), now, q);
        let got = g.list(now, q, DAY);
        assert_eq!(got.counts, want.counts, "step {step}");
        assert_eq!(got.items, want.items, "step {step}");
        assert_eq!(got.next_offset, want.next_offset, "step {step}");
    }
}

/// 2.5 slices of records expire together: each call forgets one slice at most, and every
/// call already counts them as gone.
#[test]
fn purge_forgets_one_slice_per_call() {
    let mut t = TrackerTable::default();
    t.apply(
        "g",
        &[ItemOp::Claim {
            id: "live".into(),
            owner: "o".into(),
            lease_ms: 60_000,
            reclaim_completed: false,
            max_attempts: None,
            note: None,
        }],
        DAY,
    );
    let ids: Vec<String> = (0..2500).map(|i| format!("i{i}")).collect();
    let b = t.claim_batch(
        "g",
        BatchClaim {
            ids: &ids,
            owner: "o",
            lease_ms: 60_000,
            reclaim_completed: false,
            retention_ms: DAY,
            max_attempts: None,
            note: None,
        },
    );
    let ops: Vec<ItemOp> = ids
        .iter()
        .map(|id| ItemOp::Complete { id: id.clone(), owner: Some(b.owner.clone()), keep_ms: 1, result: None })
        .collect();
    t.apply("g", &ops, DAY);
    assert_eq!(t.groups["g"].items.len(), 2501);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let q = ListQuery { filter: ListFilter::All, offset: 0, limit: 10 };
    let mut left = Vec::new();
    for _ in 0..3 {
        let l = t.list("g", q, DAY);
        assert_eq!((l.counts.in_progress, l.counts.completed), (1, 0));
        assert_eq!(l.items.len(), 1);
        let g = &t.groups["g"];
        assert_eq!(g.items.len(), g.expiry.len());
        assert_eq!(g.items.len(), g.by_status.iter().map(|s| s.len()).sum::<usize>());
        left.push(g.items.len());
    }
    assert_eq!(left, vec![2501 - SLICE, 2501 - 2 * SLICE, 1]);
}

/// Groups nobody writes to again are swept in turn, one per SWEEP_EVERY writes elsewhere:
/// their expired records go and the groups with them; the ring stays in step with the map.
#[test]
fn idle_groups_are_swept_in_turn() {
    let mut t = TrackerTable::default();
    // Kept 300 ms: long enough that no sweep during the setup finds them expired.
    let done = |id: &str| ItemOp::Complete { id: id.into(), owner: None, keep_ms: 300, result: None };
    for g in 0..20 {
        t.apply(&format!("idle{g}"), &[done("a"), done("b")], DAY);
    }
    let keep = ItemOp::Claim {
        id: "live".into(),
        owner: "o".into(),
        lease_ms: 60_000,
        reclaim_completed: false,
        max_attempts: None,
        note: None,
    };
    t.apply("busy", &[keep], DAY);
    assert_eq!(t.groups.len(), 21);
    std::thread::sleep(std::time::Duration::from_millis(310));
    let mut sizes = Vec::new();
    for i in 0..(21 * SWEEP_EVERY as usize) {
        t.read("busy", &["live".to_string()]);
        t.apply("busy", &[ItemOp::Unset { id: format!("x{i}") }], DAY);
        if (i + 1) % (5 * SWEEP_EVERY as usize) == 0 {
            sizes.push(t.groups.len());
        }
        assert_eq!(t.ring.len(), t.groups.len());
        for (at, name) in t.ring.iter().enumerate() {
            assert_eq!(t.groups[name].ring_at, at);
        }
    }
    // At most a group per SWEEP_EVERY writes (5 sweeps in the first 5 * SWEEP_EVERY
    // writes): never all at once, but some already.
    assert!(sizes[0] >= 21 - 5 && sizes[0] < 21, "{sizes:?}");
    assert_eq!(t.groups.keys().collect::<Vec<_>>(), vec!["busy"]);
}

/// Pages come from the ranked indexes in the documented order, with exact counts.
#[test]
fn pages_in_order() {
    let mut t = TrackerTable::default();
    let ids: Vec<String> = (0..50).map(|i| format!("i{i:02}")).collect();
    let mut ops = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        ops.push(ItemOp::Claim {
            id: id.clone(),
            owner: "o".into(),
            lease_ms: 60_000 + i as u64,
            reclaim_completed: false,
            max_attempts: None,
            note: None,
        });
    }
    t.apply("g", &ops, DAY);
    let finish: Vec<ItemOp> = ids[..20]
        .iter()
        .enumerate()
        .map(|(i, id)| {
            if i % 2 == 0 {
                ItemOp::Complete { id: id.clone(), owner: None, keep_ms: DAY - i as u64, result: None }
            } else {
                ItemOp::Fail { id: id.clone(), owner: None, error: "e".into(), keep_ms: DAY + i as u64 }
            }
        })
        .collect();
    t.apply("g", &finish, DAY);
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let l = t.list("g", ListQuery { filter: ListFilter::All, offset, limit: 7 }, DAY);
        assert_eq!((l.counts.in_progress, l.counts.completed, l.counts.failed), (30, 10, 10));
        seen.extend(l.items.iter().map(|s| s.id.clone()));
        match l.next_offset {
            Some(o) => offset = o,
            None => break,
        }
    }
    let mut want: Vec<String> = ids[20..].to_vec();
    want.extend((1..20).step_by(2).map(|i| ids[i].clone()));
    want.extend((0..20).step_by(2).rev().map(|i| ids[i].clone()));
    assert_eq!(seen, want);
}

/// Items claimed in one batch and completed with their owner, as a loop does, keep no timeline
/// in the store, and still read back their status, attempts, finish time and the
/// timeline of a claim and a completion.
#[test]
fn a_completed_item_keeps_no_timeline() {
    let mut t = TrackerTable::default();
    let ids: Vec<String> = (0..100).map(|i| format!("order-{i}")).collect();
    let owner = crate::token::new_token();
    let claim = BatchClaim {
        ids: &ids,
        owner: &owner,
        lease_ms: 60_000,
        retention_ms: DAY,
        reclaim_completed: false,
        max_attempts: None,
        note: None,
    };
    t.claim_batch("g", claim);
    let done: Vec<ItemOp> = ids
        .iter()
        .map(|id| ItemOp::Complete { id: id.clone(), owner: Some(owner.clone()), keep_ms: DAY, result: None })
        .collect();
    for r in t.apply("g", &done, DAY) {
        assert_eq!(r.outcome, crate::tracker::Outcome::Done, "{}", r.id);
    }
    let g = t.groups.get_mut("g").expect("a group with items");
    assert!(g.items.iter().all(|(_, _, e)| !e.rec.keeps_timeline()));
    let item = &t.read("g", &ids[..1])[0];
    assert_eq!((item.status, item.attempts), (crate::tracker::ItemStatus::Completed, 1));
    let steps: Vec<&str> = item.timeline.iter().map(|t| &*t.status).collect();
    assert_eq!(steps, ["in_progress", "completed"]);
    assert_eq!(item.finished_at, Some(item.timeline[1].at));
    check_indexes(&t);
}
