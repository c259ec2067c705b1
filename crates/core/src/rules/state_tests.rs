//! The state rules over their whole small state space, against tables written out by hand.

use super::*;

const NOW: i64 = 1_000_000;

/// Values: none; live with no expiry; live until NOW + 100; expired (at NOW).
const NONE: Option<Value<'static>> = None;
const FOREVER: Option<Value<'static>> = Some(Value { json: "7", expires_at: None });
const UNTIL: Option<Value<'static>> = Some(Value { json: "7", expires_at: Some(NOW + 100) });
const ENDED: Option<Value<'static>> = Some(Value { json: "7", expires_at: Some(NOW) });

#[test]
fn live_table() {
    assert!(live(None, NOW));
    assert!(live(Some(NOW + 1), NOW));
    assert!(!live(Some(NOW), NOW));
    assert!(!live(Some(NOW - 1), NOW));
}

#[test]
fn counters_parse_like_the_redis_script() {
    assert_eq!(integer("0"), Ok(0));
    assert_eq!(integer("-12"), Ok(-12));
    assert_eq!(integer("9007199254740991"), Ok(9_007_199_254_740_991));
    assert_eq!(integer("-9007199254740991"), Ok(-9_007_199_254_740_991));
    assert_eq!(integer("9007199254740992"), Err(Refusal::OutOfRange));
    assert_eq!(integer("99999999999999999999"), Err(Refusal::OutOfRange));
    for bad in ["", "-", "-0", "01", "1.0", "1e3", " 1", "\"1\"", "+1", "null"] {
        assert_eq!(integer(bad), Err(Refusal::NotInteger), "{bad:?}");
    }
}

/// Every value (none, live forever, live until later, expired) × expiry (never; in 10 ms; at
/// now, refused; at a later time) × ifAbsent → the decision.
#[test]
fn set_table() {
    const NEVER: Expiry = Expiry::Never;
    const IN: Expiry = Expiry::In(10);
    const PAST: Expiry = Expiry::At(NOW as u64);
    const AT: Expiry = Expiry::At(NOW as u64 + 500);
    let w = |expires_at| Ok(Set::Write { expires_at });
    let keep = |v: Option<Value<'static>>| Ok(Set::Keep(v.expect("a value")));
    let past = Err(Refusal::ExpiryPast);
    type Row = (Option<Value<'static>>, Expiry, bool, Result<Set<'static>, Refusal>);
    let table: [Row; 32] = [
        (NONE, NEVER, false, w(None)),
        (NONE, NEVER, true, w(None)),
        (NONE, IN, false, w(Some(NOW + 10))),
        (NONE, IN, true, w(Some(NOW + 10))),
        (NONE, PAST, false, past),
        (NONE, PAST, true, past),
        (NONE, AT, false, w(Some(NOW + 500))),
        (NONE, AT, true, w(Some(NOW + 500))),
        (FOREVER, NEVER, false, w(None)),
        (FOREVER, NEVER, true, keep(FOREVER)),
        (FOREVER, IN, false, w(Some(NOW + 10))),
        (FOREVER, IN, true, keep(FOREVER)),
        (FOREVER, PAST, false, past),
        (FOREVER, PAST, true, past),
        (FOREVER, AT, false, w(Some(NOW + 500))),
        (FOREVER, AT, true, keep(FOREVER)),
        (UNTIL, NEVER, false, w(None)),
        (UNTIL, NEVER, true, keep(UNTIL)),
        (UNTIL, IN, false, w(Some(NOW + 10))),
        (UNTIL, IN, true, keep(UNTIL)),
        (UNTIL, PAST, false, past),
        (UNTIL, PAST, true, past),
        (UNTIL, AT, false, w(Some(NOW + 500))),
        (UNTIL, AT, true, keep(UNTIL)),
        (ENDED, NEVER, false, w(None)),
        (ENDED, NEVER, true, w(None)),
        (ENDED, IN, false, w(Some(NOW + 10))),
        (ENDED, IN, true, w(Some(NOW + 10))),
        (ENDED, PAST, false, past),
        (ENDED, PAST, true, past),
        (ENDED, AT, false, w(Some(NOW + 500))),
        (ENDED, AT, true, w(Some(NOW + 500))),
    ];
    for (current, expiry, if_absent, want) in table {
        assert_eq!(set(current, expiry, if_absent, NOW), want, "{current:?} {expiry:?} {if_absent}");
    }
    // An absolute expiry one ms ahead is taken.
    assert_eq!(set(NONE, Expiry::At(NOW as u64 + 1), false, NOW), w(Some(NOW + 1)));
}

/// Every value (none; a counter live forever, until later, expired; not an integer, live or
/// expired; a counter at the edge of the range) × TTL (none, 10 ms) → the new counter and its
/// expiry, or the refusal.
#[test]
fn increment_table() {
    const MAX: i64 = MAX_SAFE_INTEGER;
    let v = |json, expires_at| Some(Value { json, expires_at });
    let max = format!("{MAX}");
    let min = format!("-{MAX}");
    type Row<'a> = (Option<Value<'a>>, i64, Option<u64>, Result<(i64, Option<i64>), Refusal>);
    let table: [Row<'_>; 20] = [
        (NONE, 3, None, Ok((3, None))),
        (NONE, 3, Some(10), Ok((3, Some(NOW + 10)))),
        (NONE, -3, None, Ok((-3, None))),
        (FOREVER, 3, None, Ok((10, None))),
        (FOREVER, 3, Some(10), Ok((10, Some(NOW + 10)))),
        (UNTIL, 3, None, Ok((10, Some(NOW + 100)))),
        (UNTIL, 3, Some(10), Ok((10, Some(NOW + 100)))),
        (ENDED, 3, None, Ok((3, None))),
        (ENDED, 3, Some(10), Ok((3, Some(NOW + 10)))),
        (v("\"x\"", None), 3, None, Err(Refusal::NotInteger)),
        (v("\"x\"", None), 3, Some(10), Err(Refusal::NotInteger)),
        (v("1.5", Some(NOW + 100)), 3, None, Err(Refusal::NotInteger)),
        (v("\"x\"", Some(NOW)), 3, None, Ok((3, None))),
        (v("\"x\"", Some(NOW)), 3, Some(10), Ok((3, Some(NOW + 10)))),
        (v(&max, None), 0, None, Ok((MAX, None))),
        (v(&max, None), 1, None, Err(Refusal::OutOfRange)),
        (v(&max, None), -1, None, Ok((MAX - 1, None))),
        (v(&min, None), -1, None, Err(Refusal::OutOfRange)),
        (v("9007199254740992", None), -1, None, Err(Refusal::OutOfRange)),
        (NONE, MAX, Some(10), Ok((MAX, Some(NOW + 10)))),
    ];
    for (current, by, ttl, want) in table {
        assert_eq!(increment(current, by, ttl, NOW), want, "{current:?} by {by} ttl {ttl:?}");
    }
}
