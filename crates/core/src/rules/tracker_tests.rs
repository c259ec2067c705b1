//! The tracker's rules over their whole small state space, against tables written out by hand.

use super::*;
use crate::tracker::ItemOp;

const NOW: i64 = 1_000_000;

/// Every stored status × lease (live: ends after now; ended: ends now) → the status read.
#[test]
fn status_table() {
    let table = [
        ("", 0, ItemStatus::None),
        ("", NOW + 1, ItemStatus::None),
        ("in_progress", NOW + 1, ItemStatus::InProgress),
        ("in_progress", NOW, ItemStatus::Abandoned),
        ("in_progress", NOW - 1, ItemStatus::Abandoned),
        ("completed", 0, ItemStatus::Completed),
        ("completed", NOW + 1, ItemStatus::Completed),
        ("failed", 0, ItemStatus::Failed),
        ("failed", NOW + 1, ItemStatus::Failed),
        ("dead", 0, ItemStatus::Dead),
        ("dead", NOW + 1, ItemStatus::Dead),
    ];
    for (stored, lease_end, want) in table {
        assert_eq!(status(stored, lease_end, NOW), want, "{stored:?} lease {lease_end}");
    }
}

/// A record is kept while its expiry is after now.
#[test]
fn kept_table() {
    assert!(kept(NOW + 1, NOW));
    assert!(!kept(NOW, NOW));
    assert!(!kept(NOW - 1, NOW));
}

/// Every status × reclaim_completed → the claim decision.
#[test]
fn claim_table() {
    use ItemStatus::*;
    let table = [
        (None, false, Claim::Take),
        (None, true, Claim::Take),
        (InProgress, false, Claim::InProgress),
        (InProgress, true, Claim::InProgress),
        (Abandoned, false, Claim::Take),
        (Abandoned, true, Claim::Take),
        (Completed, false, Claim::Completed),
        (Completed, true, Claim::Take),
        (Failed, false, Claim::Take),
        (Failed, true, Claim::Take),
        (Dead, false, Claim::Dead),
        (Dead, true, Claim::Dead),
    ];
    for (s, reclaim, want) in table {
        assert_eq!(claim(s, reclaim), want, "{s:?} reclaim {reclaim}");
    }
    let batch = [
        (Claim::Take, BatchOutcome::Claimed),
        (Claim::InProgress, BatchOutcome::InProgress),
        (Claim::Completed, BatchOutcome::Completed),
        (Claim::Dead, BatchOutcome::Dead),
    ];
    for (c, want) in batch {
        assert_eq!(c.batch(), want);
    }
}

/// Every owner token asked × owner of the record → whether the completion goes on.
#[test]
fn owner_table() {
    let table = [
        (None, None, true),
        (None, Some("a"), true),
        (Some("a"), None, false),
        (Some("a"), Some("a"), true),
        (Some("b"), Some("a"), false),
        (Some(""), None, false),
    ];
    for (asked, holder, want) in table {
        assert_eq!(owns(asked, holder), want, "asked {asked:?}, holder {holder:?}");
    }
}

/// Every record (none; or stored status × lease live/ended × record kept/expired × owner `a`
/// or none) × every operation (claim, claim re-claiming completed items, complete and fail with
/// no owner / owner `a` / owner `b`, unset) → the decision.
///
/// T take, P busy in progress, C busy completed, F finish, N not owner, R remove.
#[test]
fn decision_table() {
    const TABLE: &str = "
        # record                        claim claim! done done/a done/b fail fail/a fail/b unset
        none                             T T F N N F N N R
        in_progress live  kept    a      P P F F N F F N R
        in_progress live  kept    -      P P F N N F N N R
        in_progress ended kept    a      T T F F N F F N R
        in_progress ended kept    -      T T F N N F N N R
        in_progress live  expired a      T T F N N F N N R
        in_progress live  expired -      T T F N N F N N R
        in_progress ended expired a      T T F N N F N N R
        in_progress ended expired -      T T F N N F N N R
        completed   live  kept    a      C T F F N F F N R
        completed   live  kept    -      C T F N N F N N R
        completed   ended kept    a      C T F F N F F N R
        completed   ended kept    -      C T F N N F N N R
        completed   live  expired a      T T F N N F N N R
        completed   live  expired -      T T F N N F N N R
        completed   ended expired a      T T F N N F N N R
        completed   ended expired -      T T F N N F N N R
        failed      live  kept    a      T T F F N F F N R
        failed      live  kept    -      T T F N N F N N R
        failed      ended kept    a      T T F F N F F N R
        failed      ended kept    -      T T F N N F N N R
        failed      live  expired a      T T F N N F N N R
        failed      live  expired -      T T F N N F N N R
        failed      ended expired a      T T F N N F N N R
        failed      ended expired -      T T F N N F N N R
    ";
    let ops = |id: &str| {
        let id = id.to_string();
        let done = |owner: Option<&str>| ItemOp::Complete {
            id: id.clone(),
            owner: owner.map(String::from),
            keep_ms: 5,
            result: None,
        };
        let fail = |owner: Option<&str>| ItemOp::Fail {
            id: id.clone(),
            owner: owner.map(String::from),
            error: "e".into(),
            keep_ms: 5,
        };
        let claim = |reclaim_completed| ItemOp::Claim {
            id: id.clone(),
            owner: "z".into(),
            lease_ms: 5,
            reclaim_completed,
            max_attempts: None,
            note: None,
        };
        [
            claim(false),
            claim(true),
            done(None),
            done(Some("a")),
            done(Some("b")),
            fail(None),
            fail(Some("a")),
            fail(Some("b")),
            ItemOp::Unset { id: id.clone() },
        ]
    };
    let mut rows = 0;
    let mut seen = std::collections::HashSet::new();
    for line in TABLE.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (rec, want) = if words[0] == "none" {
            (None, &words[1..])
        } else {
            let mut r = fresh(NOW - 100);
            r.s = match words[0] {
                "in_progress" => "in_progress",
                "completed" => "completed",
                "failed" => "failed",
                other => panic!("status {other}"),
            }
            .into();
            r.l = if words[1] == "live" { NOW + 1 } else { NOW };
            r.x = if words[2] == "kept" { NOW + 1 } else { NOW };
            r.o = (words[3] == "a").then(|| "a".to_string());
            (Some(r), &words[4..])
        };
        assert!(seen.insert(words[..words.len() - want.len()].join(" ")), "a row twice: {line}");
        let ops = ops("i");
        assert_eq!(want.len(), ops.len(), "{line}");
        for (op, want) in ops.iter().zip(want) {
            let want = match *want {
                "T" => Decision::Take,
                "P" => Decision::Busy(ItemStatus::InProgress),
                "C" => Decision::Busy(ItemStatus::Completed),
                "F" => Decision::Finish,
                "N" => Decision::NotOwner,
                "R" => Decision::Remove,
                other => panic!("decision {other}"),
            };
            assert_eq!(decide(op, rec.as_ref(), NOW), want, "{line}: {op:?}");
        }
        rows += 1;
    }
    // none, and 3 statuses × 2 leases × 2 retentions × 2 owners: every combination once.
    assert_eq!(rows, 1 + 3 * 2 * 2 * 2);
}

fn tr(at: i64, status: &'static str, attempt: u32, error: Option<&str>) -> Transition {
    Transition { at, status: status.into(), attempt, error: error.map(String::from) }
}

/// A claim of an item with no record: attempt 1, in progress under the new owner and lease,
/// kept `retention` past the lease.
#[test]
fn take_of_a_new_item() {
    let mut r = fresh(NOW);
    let op = ItemOp::Claim {
        id: "i".into(),
        owner: "o".into(),
        lease_ms: 50,
        reclaim_completed: false,
        max_attempts: None,
        note: None,
    };
    write(&op, &mut r, NOW, 1_000);
    let want = Record {
        s: "in_progress".into(),
        a: 1,
        o: Some("o".into()),
        l: NOW + 50,
        c: NOW,
        u: NOW,
        d: 0,
        e: None,
        x: NOW + 1_050,
        t: vec![tr(NOW, "in_progress", 1, None)],
        m: None,
        r: None,
        n: None,
    };
    assert_eq!(r, want);
}

/// A re-claim of an abandoned item records the abandonment at the old lease's end; a re-claim
/// of a failed item clears its finish time and keeps its last error.
#[test]
fn take_after_abandoned_and_after_failed() {
    let mut r = fresh(NOW - 100);
    take(&mut r, "a", NOW - 100, NOW - 10, 1_000, Take::default());
    take(&mut r, "b", NOW, NOW + 50, 1_000, Take::default());
    assert_eq!((r.a, r.o.as_deref(), r.l, r.x), (2, Some("b"), NOW + 50, NOW + 1_050));
    assert_eq!(
        r.t,
        vec![
            tr(NOW - 100, "in_progress", 1, None),
            tr(NOW - 10, "abandoned", 1, None),
            tr(NOW, "in_progress", 2, None)
        ]
    );
    let fail = ItemOp::Fail { id: "i".into(), owner: Some("b".into()), error: "boom".into(), keep_ms: 70 };
    write(&fail, &mut r, NOW + 1, 1_000);
    assert_eq!((&*r.s, r.l, r.d, r.x, r.e.as_deref()), ("failed", 0, NOW + 1, NOW + 71, Some("boom")));
    take(&mut r, "c", NOW + 2, NOW + 60, 1_000, Take::default());
    assert_eq!((&*r.s, r.a, r.d, r.e.as_deref()), ("in_progress", 3, 0, Some("boom")));
    assert_eq!(r.t.last(), Some(&tr(NOW + 2, "in_progress", 3, None)), "no abandonment after a failure");
}

/// A completion keeps the owner and attempts, ends the lease, and keeps the record `keep_ms`
/// (forever at most); the timeline keeps its newest [`MAX_TIMELINE`] entries.
#[test]
fn finish_and_the_timeline_cap() {
    let mut r = fresh(NOW);
    for k in 0..MAX_TIMELINE as i64 {
        take(&mut r, "o", NOW + k, NOW + k + 100, 10, Take::default());
    }
    let done = ItemOp::Complete {
        id: "i".into(),
        owner: None,
        keep_ms: crate::tracker::KEEP_FOREVER_MS,
        result: None,
    };
    write(&done, &mut r, NOW + 500, 10);
    assert_eq!(
        (&*r.s, r.o.as_deref(), r.l, r.d, r.x),
        ("completed", Some("o"), 0, NOW + 500, crate::tracker::NEVER)
    );
    assert_eq!(r.t.len(), MAX_TIMELINE);
    assert_eq!(r.t.last(), Some(&tr(NOW + 500, "completed", MAX_TIMELINE as u32, None)));
    let unset = ItemOp::Unset { id: "i".into() };
    let before = r.clone();
    write(&unset, &mut r, NOW + 600, 10);
    assert_eq!(r, before, "an unset writes nothing");
}

/// A claim sets the record's attempt budget (none clears it); a failure is dead once the
/// attempts reach it, failed before it and always failed without one.
#[test]
fn failure_table() {
    // (maxAttempts of the latest claim, attempts) -> the failure's status
    let table = [
        (None, 0, "failed"),
        (None, 1, "failed"),
        (None, 1_000, "failed"),
        (Some(1), 0, "failed"),
        (Some(1), 1, "dead"),
        (Some(3), 2, "failed"),
        (Some(3), 3, "dead"),
        (Some(3), 4, "dead"),
    ];
    for (m, a, want) in table {
        let mut r = fresh(NOW);
        r.m = m;
        r.a = a;
        assert_eq!(failure(&r), want, "max {m:?} attempts {a}");
    }
    let claim = |max_attempts| ItemOp::Claim {
        id: "i".into(),
        owner: "o".into(),
        lease_ms: 50,
        reclaim_completed: false,
        max_attempts,
        note: None,
    };
    let fail = ItemOp::Fail { id: "i".into(), owner: None, error: "boom".into(), keep_ms: 100 };
    let mut r = fresh(NOW);
    write(&claim(Some(1)), &mut r, NOW, 1_000);
    assert_eq!(r.m, Some(1));
    write(&fail, &mut r, NOW + 1, 1_000);
    assert_eq!((&*r.s, r.a, r.e.as_deref(), r.x), ("dead", 1, Some("boom"), NOW + 101));
    assert_eq!(r.t.last(), Some(&tr(NOW + 1, "dead", 1, Some("boom"))));
    assert_eq!(implied_timeline(&r), None, "a dead record stores its timeline");
    // A claim without maxAttempts clears the budget: its failure is failed.
    let mut r = fresh(NOW);
    write(&claim(Some(1)), &mut r, NOW, 1_000);
    r.s = "failed".into();
    write(&claim(None), &mut r, NOW + 1, 1_000);
    assert_eq!(r.m, None);
    write(&fail, &mut r, NOW + 2, 1_000);
    assert_eq!(r.s, "failed");
}

/// Every status × whether failed items are revived too → the revival's decision; a revival
/// makes the record failed with its attempts (or 0), error, times and expiry kept.
#[test]
fn revive_table() {
    use ItemStatus::*;
    let table = [
        ("", false, Decision::Busy(None)),
        ("in_progress", false, Decision::Busy(InProgress)),
        ("completed", true, Decision::Busy(Completed)),
        ("failed", false, Decision::Busy(Failed)),
        ("failed", true, Decision::Finish),
        ("dead", false, Decision::Finish),
        ("dead", true, Decision::Finish),
    ];
    for (stored, failed, want) in table {
        let mut r = fresh(NOW);
        r.s = stored.into();
        r.l = NOW + 10;
        r.x = NOW + 100;
        let op = ItemOp::Revive { id: "i".into(), failed, reset_attempts: false };
        let rec = (!stored.is_empty()).then_some(&r);
        assert_eq!(decide(&op, rec, NOW), want, "{stored:?} failed {failed}");
    }
    let mut dead = fresh(NOW);
    dead.m = Some(2);
    for k in 0..2 {
        take(&mut dead, "o", NOW + k, NOW + k + 5, 1_000, Take { max_attempts: Some(2), ..Take::default() });
        let status = failure(&dead);
        finish(&mut dead, status, Some(&"boom".to_string()), NOW + k + 1, 100);
    }
    assert_eq!(dead.s, "dead");
    let before = dead.clone();
    let mut kept = dead.clone();
    revive(&mut kept, NOW + 50, false);
    assert_eq!((&*kept.s, kept.a, kept.u, kept.d, kept.x), ("failed", 2, before.u, before.d, before.x));
    assert_eq!((kept.e.as_deref(), kept.m), (Some("boom"), Some(2)));
    assert_eq!(kept.t.last(), Some(&tr(NOW + 50, "revived", 2, Option::None)));
    let mut reset = dead;
    revive(&mut reset, NOW + 50, true);
    assert_eq!((&*reset.s, reset.a), ("failed", 0));
}

/// A claim's note and a completion's result through one item's life: the claim sets its note
/// (and a claim without one clears it), the completion stores its result and keeps the note, a
/// failure stores no result, and a new claim clears the result (BullMQ's `returnvalue`).
#[test]
fn a_note_belongs_to_a_claim_and_a_result_to_a_completion() {
    let claim = |note: Option<&str>| ItemOp::Claim {
        id: "i".into(),
        owner: "o".into(),
        lease_ms: 50,
        reclaim_completed: true,
        max_attempts: Option::None,
        note: note.map(String::from),
    };
    let complete = |result: Option<&str>| ItemOp::Complete {
        id: "i".into(),
        owner: Option::None,
        keep_ms: 100,
        result: result.map(String::from),
    };
    let fail = ItemOp::Fail { id: "i".into(), owner: Option::None, error: "boom".into(), keep_ms: 100 };
    let mut r = fresh(NOW);
    let mut step = |op: &ItemOp, at: i64| {
        write(op, &mut r, NOW + at, 1_000);
        (r.n.clone(), r.r.clone(), r.to_state("i", NOW + at))
    };
    let (n, res, st) = step(&claim(Some("page 3")), 0);
    assert_eq!((n.as_deref(), res, st.note.as_deref()), (Some("page 3"), Option::None, Some("page 3")));
    let (n, res, st) = step(&complete(Some(r#"{"rows":12}"#)), 1);
    assert_eq!((n.as_deref(), res.as_deref()), (Some("page 3"), Some(r#"{"rows":12}"#)));
    assert_eq!(st.result.as_deref(), Some(r#"{"rows":12}"#));
    let (n, res, _) = step(&claim(Option::None), 2);
    assert_eq!((n, res), (Option::None, Option::None), "a claim clears the result, and its note is its own");
    let (_, res, _) = step(&claim(Some("again")), 3);
    assert_eq!(res, Option::None);
    let (n, res, _) = step(&fail, 4);
    assert_eq!((n.as_deref(), res), (Some("again"), Option::None));
    let (_, res, _) = step(&complete(Option::None), 5);
    assert_eq!(res, Option::None, "a completion without a result stores none");
}

/// A result past 4 KiB of JSON text, text that is not JSON, and a note past 256 bytes are
/// refused with a coded error naming the field and the limit.
#[test]
fn results_and_notes_are_bounded() {
    use crate::tracker::{check_note, check_result, MAX_NOTE_BYTES, MAX_RESULT_BYTES};
    let big = format!("\"{}\"", "x".repeat(MAX_RESULT_BYTES - 1));
    let e = check_result("options.result", &big).unwrap_err();
    assert_eq!(
        (e.code.as_str(), e.field.map(|f| f.to_string())),
        ("ERR_INVALID_ARGUMENT", Some("options.result".into()))
    );
    assert!(e.message.contains("4096"), "{}", e.message);
    assert!(check_result("result", &big[1..]).is_err(), "not JSON");
    assert!(check_result("result", &format!("\"{}\"", "x".repeat(MAX_RESULT_BYTES - 2))).is_ok());
    let e = check_note("options.note", &"n".repeat(MAX_NOTE_BYTES + 1)).unwrap_err();
    assert_eq!(e.field.map(|f| f.to_string()), Some("options.note".into()));
    assert!(e.message.contains("256"), "{}", e.message);
    assert!(check_note("note", &"n".repeat(MAX_NOTE_BYTES)).is_ok());
}
