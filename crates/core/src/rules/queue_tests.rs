//! The queue's rules over their whole small state space, against tables written out by hand.

use super::*;

const NOW: i64 = 1_000;
/// The due time of ids an enqueue at NOW makes waiting (a delay of 50 ms).
const DUE: i64 = 1_050;
/// A live claim's deadline; an expired claim's deadline is NOW (a claim ends at its deadline).
const LIVE: i64 = 1_300;
/// Enqueue-again times: before NOW + 50 (and before an expired claim's deadline), and after.
const EARLY: i64 = 900;
const LATE: i64 = 1_100;

fn claim(deadline: i64, again: Option<i64>) -> Place<'static> {
    Place::Claimed(Claim { deadline, owner: "a", again })
}

#[test]
fn live_back_at_due_deliverable_lease() {
    assert!(live(NOW + 1, NOW));
    assert!(!live(NOW, NOW));
    assert!(!live(NOW - 1, NOW));
    assert_eq!(back_at(NOW, None), NOW);
    assert_eq!(back_at(NOW, Some(EARLY)), NOW);
    assert_eq!(back_at(NOW, Some(LATE)), LATE);
    assert_eq!(due(NOW, 50), DUE);
    assert_eq!(due(NOW, 0), NOW);
    assert!(deliverable(NOW - 1, NOW));
    assert!(deliverable(NOW, NOW));
    assert!(!deliverable(NOW + 1, NOW));
    assert_eq!(lease(NOW, 30_000), NOW + 30_000);
}

/// Every place (absent; waiting, due or not; claimed, live or expired, with no enqueue-again
/// time, an early one or a late one) × debounce → the answer and the write.
#[test]
fn enqueue_table() {
    use EnqueueOutcome::*;
    use EnqueueWrite::*;
    // place, debounce, outcome, due answered, write
    let table = [
        (Place::Absent, false, Added, DUE, Wait(DUE)),
        (Place::Absent, true, Added, DUE, Wait(DUE)),
        (Place::Waiting(EARLY), false, Duplicate, EARLY, Keep),
        (Place::Waiting(EARLY), true, Debounced, DUE, Wait(DUE)),
        (Place::Waiting(LATE), false, Duplicate, LATE, Keep),
        (Place::Waiting(LATE), true, Debounced, DUE, Wait(DUE)),
        (claim(LIVE, None), false, Claimed, DUE, Again(DUE)),
        (claim(LIVE, None), true, Claimed, DUE, Again(DUE)),
        (claim(LIVE, Some(EARLY)), false, Claimed, EARLY, Keep),
        (claim(LIVE, Some(EARLY)), true, Claimed, DUE, Again(DUE)),
        (claim(LIVE, Some(LATE)), false, Claimed, LATE, Keep),
        (claim(LIVE, Some(LATE)), true, Claimed, DUE, Again(DUE)),
        // An expired claim is judged as the waiting id it goes back to (due at its deadline or
        // its later enqueue-again time).
        (claim(NOW, None), false, Duplicate, NOW, Wait(NOW)),
        (claim(NOW, None), true, Debounced, DUE, Wait(DUE)),
        (claim(NOW, Some(EARLY)), false, Duplicate, NOW, Wait(NOW)),
        (claim(NOW, Some(EARLY)), true, Debounced, DUE, Wait(DUE)),
        (claim(NOW, Some(LATE)), false, Duplicate, LATE, Wait(LATE)),
        (claim(NOW, Some(LATE)), true, Debounced, DUE, Wait(DUE)),
    ];
    // Without a cap a recorded first-enqueue time is kept, unused.
    for (place, debounce, outcome, due, write) in table {
        let debounce = if debounce { Debounce::On { max_delay_ms: None } } else { Debounce::Off };
        for first in [None, Some(990)] {
            check(place, debounce, first, Enqueue { outcome, due, write, first });
        }
    }
}

fn check(place: Place<'_>, debounce: Debounce, first: Option<i64>, want: Enqueue) {
    assert_eq!(enqueue(place, debounce, first, DUE, NOW), want, "{place:?} {debounce:?} {first:?}");
}

#[test]
fn capped_is_the_earlier_time() {
    assert_eq!(capped(DUE, NOW, 30), NOW + 30);
    assert_eq!(capped(DUE, NOW, 50), DUE);
    assert_eq!(capped(DUE, NOW, 100), DUE);
    assert_eq!(capped(DUE, 500, 30), 530);
    assert_eq!(capped(DUE, i64::MAX - 1, 30), DUE);
}

/// A capped debounce: every place × the first-enqueue time recorded (none: this enqueue starts
/// the count; one whose cap is before the debounced due time; one whose cap is after; one whose
/// cap has passed) → the answer, the write and the first-enqueue time recorded after it. The
/// outcomes and writes are those of an uncapped debounce; only the due time is bounded.
#[test]
fn capped_enqueue_table() {
    use EnqueueOutcome::*;
    use EnqueueWrite::*;
    const CAP: Debounce = Debounce::On { max_delay_ms: Some(30) };
    /// First-enqueue times: the cap (first + 30) is before DUE, after it, or already past.
    const SOON: i64 = 990; // cap 1_020
    const FAR: i64 = 1_040; // cap 1_070
    const OLD: i64 = 500; // cap 530
    let places = [
        (Place::Absent, Added, false),
        (Place::Waiting(EARLY), Debounced, false),
        (Place::Waiting(LATE), Debounced, false),
        (claim(LIVE, None), Claimed, true),
        (claim(LIVE, Some(EARLY)), Claimed, true),
        (claim(LIVE, Some(LATE)), Claimed, true),
        (claim(NOW, None), Debounced, false),
        (claim(NOW, Some(LATE)), Debounced, false),
    ];
    // first recorded, due answered, first recorded after
    let firsts = [
        (None, NOW + 30, Some(NOW)),
        (Some(SOON), 1_020, Some(SOON)),
        (Some(FAR), DUE, Some(FAR)),
        (Some(OLD), 530, Some(OLD)),
    ];
    for (place, outcome, again) in places {
        for (first, due, after) in firsts {
            let write = if again { Again(due) } else { Wait(due) };
            check(place, CAP, first, Enqueue { outcome, due, write, first: after });
        }
    }
}

/// Every claim (none; `a`'s, live or expired, with no enqueue-again time, an early one or a late
/// one) × caller (`a`, `b`) × ack, release after 50 ms → the answer (the outcome and the due time
/// when the id waits again).
#[test]
fn settle_table() {
    use SettleOutcome::*;
    const ACK: SettleAction = SettleAction::Ack;
    const RELEASE: SettleAction = SettleAction::Release { delay_ms: 50 };
    let done = |requeued| Done { requeued };
    let c = |deadline, again| Some(Claim { deadline, owner: "a", again });
    type Row = (Option<Claim<'static>>, &'static str, SettleAction, SettleOutcome, Option<i64>);
    let table: [Row; 28] = [
        (None, "a", ACK, NotClaimed, None),
        (None, "a", RELEASE, NotClaimed, None),
        (None, "b", ACK, NotClaimed, None),
        (None, "b", RELEASE, NotClaimed, None),
        (c(LIVE, None), "a", ACK, done(false), None),
        (c(LIVE, None), "a", RELEASE, done(false), Some(DUE)),
        (c(LIVE, None), "b", ACK, NotOwner, None),
        (c(LIVE, None), "b", RELEASE, NotOwner, None),
        (c(LIVE, Some(EARLY)), "a", ACK, done(true), Some(EARLY)),
        (c(LIVE, Some(EARLY)), "a", RELEASE, done(true), Some(DUE)),
        (c(LIVE, Some(EARLY)), "b", ACK, NotOwner, None),
        (c(LIVE, Some(EARLY)), "b", RELEASE, NotOwner, None),
        (c(LIVE, Some(LATE)), "a", ACK, done(true), Some(LATE)),
        (c(LIVE, Some(LATE)), "a", RELEASE, done(true), Some(LATE)),
        (c(LIVE, Some(LATE)), "b", ACK, NotOwner, None),
        (c(LIVE, Some(LATE)), "b", RELEASE, NotOwner, None),
        // Expired: refused for its owner; another owner is told it does not own it.
        (c(NOW, None), "a", ACK, Expired, None),
        (c(NOW, None), "a", RELEASE, Expired, None),
        (c(NOW, None), "b", ACK, NotOwner, None),
        (c(NOW, None), "b", RELEASE, NotOwner, None),
        (c(NOW, Some(EARLY)), "a", ACK, Expired, None),
        (c(NOW, Some(EARLY)), "a", RELEASE, Expired, None),
        (c(NOW, Some(EARLY)), "b", ACK, NotOwner, None),
        (c(NOW, Some(EARLY)), "b", RELEASE, NotOwner, None),
        (c(NOW, Some(LATE)), "a", ACK, Expired, None),
        (c(NOW, Some(LATE)), "a", RELEASE, Expired, None),
        (c(NOW, Some(LATE)), "b", ACK, NotOwner, None),
        (c(NOW, Some(LATE)), "b", RELEASE, NotOwner, None),
    ];
    for (claim, owner, action, outcome, due) in table {
        assert_eq!(settle(claim, owner, action, NOW), (outcome, due), "{claim:?} {owner} {action:?}");
    }
}

/// A release with no delay waits due now; a claim that ends one ms after now still holds.
#[test]
fn settle_edges() {
    let c = Claim { deadline: NOW + 1, owner: "a", again: None };
    let release_now = SettleAction::Release { delay_ms: 0 };
    assert_eq!(settle(Some(c), "a", release_now, NOW), (SettleOutcome::Done { requeued: false }, Some(NOW)));
}

/// A read with max_deliveries: delivered while the count is below the cap, dead from it on.
#[test]
fn deliver_counts_up_to_the_cap_then_dead_letters() {
    assert_eq!(deliver(0, 1), Deliver::Claim(1));
    assert_eq!(deliver(1, 1), Deliver::Dead);
    assert_eq!(deliver(0, 3), Deliver::Claim(1));
    assert_eq!(deliver(2, 3), Deliver::Claim(3));
    assert_eq!(deliver(3, 3), Deliver::Dead);
    // A count above the cap (a later read asked for fewer deliveries): dead as well.
    assert_eq!(deliver(7, 3), Deliver::Dead);
}

/// An ack drops the delivery count; a release keeps it.
#[test]
fn only_a_release_keeps_the_count() {
    assert!(!keeps_count(SettleAction::Ack));
    assert!(keeps_count(SettleAction::Release { delay_ms: 0 }));
    assert!(keeps_count(SettleAction::Release { delay_ms: 500 }));
}

/// An enqueue of a dead letter leaves it dead, whatever the debounce; a requeue makes only a dead
/// letter waiting, due now.
#[test]
fn a_dead_letter_stays_dead_until_requeued() {
    for debounce in
        [Debounce::Off, Debounce::On { max_delay_ms: None }, Debounce::On { max_delay_ms: Some(5) }]
    {
        assert_eq!(
            enqueue(Place::Dead, debounce, None, DUE, NOW),
            Enqueue { outcome: EnqueueOutcome::Dead, due: 0, write: EnqueueWrite::Keep, first: None }
        );
    }
    assert_eq!(requeue(true, NOW), Some(NOW));
    assert_eq!(requeue(false, NOW), None);
}
