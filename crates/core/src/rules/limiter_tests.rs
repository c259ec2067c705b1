//! The Rate Limiter's rules against tables written out by hand: GCRA takes, and pauses.

use super::{decide, pause, Pause, MAX_PAUSE_US};
use crate::limiter::{result_of, PauseEnd, Rule};

const RULE: Rule = Rule { interval_us: 500_000, burst: 1 };
const S: i64 = 1_000_000;

#[test]
fn gcra_spaces_tokens_by_the_interval() {
    let (t, tat) = decide(None, None, 0, RULE, 1, 0);
    assert!(t.allowed);
    assert_eq!(tat, Some(500_000));
    let (t, tat2) = decide(tat, None, 100_000, RULE, 1, 0);
    assert!(!t.allowed);
    assert_eq!(tat2, None);
    let r = result_of("x", RULE, 1, t);
    assert_eq!(r.retry_after_ms, 400.0);
    let (t, _) = decide(tat, None, 500_000, RULE, 1, 0);
    assert!(t.allowed);
}

#[test]
fn reservations_give_each_token_its_slot() {
    let (t, tat) = decide(None, None, 0, RULE, 4, 2_000_000);
    assert!(t.allowed);
    assert_eq!(tat, Some(2_000_000));
    let r = result_of("x", RULE, 4, t);
    assert_eq!(r.slots_ms, vec![0.0, 500.0, 1000.0, 1500.0]);
    assert_eq!(r.wait_ms, 1500.0);
    // The next reservation queues behind it; one that does not fit changes nothing.
    let (t, _) = decide(tat, None, 0, RULE, 1, 2_000_000);
    assert_eq!(result_of("x", RULE, 1, t).slots_ms, vec![2000.0]);
    let (t, none) = decide(tat, None, 0, RULE, 1, 1_000_000);
    assert!(!t.allowed && none.is_none());
}

#[test]
fn burst_lets_tokens_go_at_once() {
    let rule = Rule { interval_us: 100, burst: 3 };
    let mut tat = None;
    for _ in 0..3 {
        let (t, next) = decide(tat, None, 1000, rule, 1, 0);
        assert!(t.allowed);
        tat = next;
    }
    let (t, _) = decide(tat, None, 1000, rule, 1, 0);
    assert!(!t.allowed);
    assert_eq!(result_of("x", rule, 1, t).remaining, 0);
}

/// Takes during and after a pause ending at 10 s, on a limiter of 1 token per 0.5 s with burst
/// 3, by (stored TAT, now, cost, max wait) → (allowed, retry after ms, slots ms, TAT stored,
/// remaining).
#[test]
fn a_pause_refuses_until_its_end() {
    let rule = Rule { interval_us: 500_000, burst: 3 };
    let p = Some(10 * S);
    type Row = (Option<i64>, i64, u64, u64, bool, f64, Vec<f64>, Option<i64>, u64);
    let table: Vec<Row> = vec![
        // Fresh limiter, paused: refused until the end, whatever the cost.
        (None, 0, 1, 0, false, 10_000.0, vec![], None, 0),
        (None, 4 * S, 3, 0, false, 6_000.0, vec![], None, 0),
        // A TAT past the pause end: its own GCRA time when later (burst 3: due at TAT - 1 s).
        (Some(12 * S), 4 * S, 1, 0, false, 7_000.0, vec![], None, 0),
        (Some(12 * S), 9 * S, 1, 0, false, 2_000.0, vec![], None, 0),
        // A max wait that reaches the end reserves: the burst goes at the end, then spaced.
        (None, 0, 4, 11 * S as u64, true, 0.0, vec![10_000.0, 10_000.0, 10_000.0, 10_500.0], Some(12 * S), 0),
        // One that does not reach it is refused at once.
        (None, 0, 1, 9 * S as u64, false, 10_000.0, vec![], None, 0),
        // At and after the end: the limiter as it would be without the pause (burst available).
        (None, 10 * S, 1, 0, true, 0.0, vec![0.0], Some(10 * S + 500_000), 2),
        (Some(5 * S), 11 * S, 3, 0, true, 0.0, vec![0.0, 0.0, 0.0], Some(11 * S + 1_500_000), 0),
        // Cost 0 asks whether a take would go: not during a pause; it stores nothing.
        (None, 0, 0, 0, false, 10_000.0, vec![], None, 0),
    ];
    for (i, (stored, now, cost, wait, allowed, retry, slots, tat, remaining)) in table.into_iter().enumerate()
    {
        let (t, next) = decide(stored, p, now, rule, cost, wait);
        let r = result_of("x", rule, cost, t);
        assert_eq!(
            (r.allowed, r.retry_after_ms, r.slots_ms, next, r.remaining),
            (allowed, retry, slots, tat, remaining),
            "row {i}"
        );
    }
}

/// Pauses by (stored end, now, asked end) → decision.
#[test]
fn a_pause_never_shortens_a_longer_one() {
    let table = [
        (None, 0, PauseEnd::At(5 * S), Pause::Store(5 * S)),
        (None, S, PauseEnd::After(5 * S as u64), Pause::Store(6 * S)),
        // A longer one is kept; a later end lengthens it.
        (Some(9 * S), 0, PauseEnd::At(5 * S), Pause::Keep),
        (Some(9 * S), 0, PauseEnd::At(9 * S), Pause::Keep),
        (Some(9 * S), 0, PauseEnd::After(10 * S as u64), Pause::Store(10 * S)),
        // A time in the past, or now, pauses nothing.
        (None, 7 * S, PauseEnd::At(3 * S), Pause::Keep),
        (None, 7 * S, PauseEnd::At(7 * S), Pause::Keep),
        (None, 7 * S, PauseEnd::After(0), Pause::Keep),
        // 365 days is the longest; past it nothing is stored.
        (None, S, PauseEnd::After(MAX_PAUSE_US as u64), Pause::Store(S + MAX_PAUSE_US)),
        (None, S, PauseEnd::After(MAX_PAUSE_US as u64 + 1), Pause::TooFar(MAX_PAUSE_US + 1)),
        (None, S, PauseEnd::At(S + MAX_PAUSE_US + 1), Pause::TooFar(MAX_PAUSE_US + 1)),
        (None, 0, PauseEnd::After(u64::MAX), Pause::TooFar(i64::MAX)),
    ];
    for (i, (stored, now, end, want)) in table.into_iter().enumerate() {
        assert_eq!(pause(stored, now, end), want, "row {i}");
    }
}
