//! The lock's rules over their whole small state space, against a table written out by hand.

use super::*;

const NOW: i64 = 1_000_000;
const LEASE: u64 = 1_000;

#[test]
fn holds_label_and_fence_keep() {
    assert!(holds(NOW + 1, NOW));
    assert!(!holds(NOW, NOW));
    assert_eq!(label(None), None);
    assert_eq!(label(Some("")), None);
    assert_eq!(label(Some("x")), Some("x"));
    assert_eq!(fence_kept_until(NOW, LEASE), NOW + 1_000 + 30 * 86_400_000);
}

/// A grant's fence: one above the last, and at least the floor (the backend's clock in µs where a
/// failover can lose the counter: a counter set back is then still passed by the clock).
#[test]
fn next_fence_table() {
    const US: u64 = 1_800_000_000_000_000;
    // last, floor, fence
    let table = [
        (0, NO_FLOOR, 1),
        (7, NO_FLOOR, 8),
        // Never granted (or forgotten, or lost by a failover): the clock.
        (0, US, US),
        // A counter behind the clock (set back by a failover): the clock.
        (45, US, US),
        (US - 2, US, US),
        // A counter at or past the clock (grants in the same µs, or a clock set back): one above.
        (US - 1, US, US),
        (US, US, US + 1),
        (US + 10, US, US + 11),
    ];
    for (last, floor, fence) in table {
        assert_eq!(next_fence(last, floor), fence, "last {last}, floor {floor}");
    }
}

/// An acquisition takes its fence from [`next_fence`] with the floor given; a refusal reports the
/// holder's fence whatever the floor.
#[test]
fn acquire_takes_the_floor() {
    const US: u64 = 1_800_000_000_000_000;
    let live = Holder { owner: "a", fence: 7, label: None, expires_at: NOW + 300 };
    let ended = Holder { expires_at: NOW, ..live };
    // holder, last, floor, (acquired, fence)
    let table = [
        (None, 0, US, (true, US)),
        (None, 59, US, (true, US)),
        (Some(ended), 7, US, (true, US)),
        (Some(ended), US + 3, US, (true, US + 4)),
        (Some(live), 7, US, (false, 7)),
    ];
    for (holder, last, floor, (acquired, fence)) in table {
        let d = acquire(holder, last, floor, LEASE, None, NOW);
        assert_eq!((d.attempt.acquired, d.attempt.fence), (acquired, fence), "{holder:?} last {last}");
        assert_eq!(d.take, acquired.then_some((fence, NOW + LEASE as i64)), "{holder:?} last {last}");
    }
}

/// Every holder (none; `a` with a live lease; `a` whose lease ended now) × caller (`a`, `b`)
/// × acquire, release, extend → the answer and what is written.
#[test]
fn decision_table() {
    let live = Holder { owner: "a", fence: 7, label: Some("L"), expires_at: NOW + 300 };
    let ended = Holder { expires_at: NOW, ..live };
    type Row = (
        Option<Holder<'static>>,
        u64,
        &'static str,
        (bool, u64, u64, Option<&'static str>),
        Option<(u64, i64)>,
    );
    // holder, last fence, caller, acquire (acquired, fence, remaining, holder label), written
    let acquire_table: [Row; 6] = [
        (None, 3, "a", (true, 4, LEASE, Some("new")), Some((4, NOW + 1_000))),
        (None, 3, "b", (true, 4, LEASE, Some("new")), Some((4, NOW + 1_000))),
        (Some(live), 7, "a", (false, 7, 300, Some("L")), None),
        (Some(live), 7, "b", (false, 7, 300, Some("L")), None),
        (Some(ended), 7, "a", (true, 8, LEASE, Some("new")), Some((8, NOW + 1_000))),
        (Some(ended), 7, "b", (true, 8, LEASE, Some("new")), Some((8, NOW + 1_000))),
    ];
    for (holder, last, _caller, (acquired, fence, remaining_ms, label), take) in acquire_table {
        let want = Attempt { acquired, fence, remaining_ms, holder: label.map(String::from) };
        assert_eq!(
            acquire(holder, last, NO_FLOOR, LEASE, Some("new"), NOW),
            Acquire { attempt: want, take },
            "{holder:?}"
        );
    }
    use Refusal::*;
    // holder, caller, release (released, reason), extend (extended, remaining, reason)
    let table = [
        (None, "a", (false, Some(NotHeld)), (false, 0, Some(NotHeld))),
        (None, "b", (false, Some(NotHeld)), (false, 0, Some(NotHeld))),
        (Some(live), "a", (true, None), (true, LEASE, None)),
        (Some(live), "b", (false, Some(NotOwner)), (false, 300, Some(NotOwner))),
        (Some(ended), "a", (false, Some(NotHeld)), (false, 0, Some(NotHeld))),
        (Some(ended), "b", (false, Some(NotHeld)), (false, 0, Some(NotHeld))),
    ];
    for (holder, caller, (released, reason), (extended, remaining_ms, why)) in table {
        assert_eq!(release(holder, caller, NOW), ReleaseResult { released, reason }, "{holder:?} {caller}");
        let want = ExtendResult { extended, remaining_ms, reason: why.clone() };
        assert_eq!(extend(holder, caller, LEASE, NOW), want, "{holder:?} {caller}");
        assert_eq!(check(holder, caller, NOW), why.map_or(Ok(()), Err), "{holder:?} {caller}");
    }
}

/// A release by fence: the live grant with that fence only.
#[test]
fn release_by_fence() {
    use Refusal::*;
    let live = Holder { owner: "a", fence: 7, label: None, expires_at: NOW + 300 };
    let ended = Holder { expires_at: NOW, ..live };
    let table = [
        (None, 7, false, Some(NotHeld)),
        (Some(live), 7, true, None),
        (Some(live), 6, false, Some(NotOwner)),
        (Some(live), 8, false, Some(NotOwner)),
        (Some(ended), 7, false, Some(NotHeld)),
    ];
    for (holder, fence, released, reason) in table {
        assert_eq!(
            release_fence(holder, fence, NOW),
            ReleaseResult { released, reason },
            "{holder:?} {fence}"
        );
    }
}

/// An empty label is kept as none.
#[test]
fn an_empty_label_is_none() {
    assert_eq!(acquire(None, 0, NO_FLOOR, LEASE, Some(""), NOW).attempt.holder, None);
}
