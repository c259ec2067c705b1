//! The idempotency keys' rules over their whole small state space, against a table written out
//! by hand.

use super::*;

const NOW: i64 = 1_000_000;

/// Every key (none; pending under `a`, live or ended now; done, kept or ended now) × caller
/// (`a`, `b`) → claim (lease 1000 ms), complete (TTL 500 ms) and release.
#[test]
fn decision_table() {
    let pending = |expires_at| Some(Key::Pending { owner: "a", expires_at });
    let done = |expires_at| Some(Key::Done { json: "{\"r\":1}", expires_at });
    let take = Claim::Take { expires_at: NOW + 1_000 };
    let result = Claim::Done { json: "{\"r\":1}", expires_at: NOW + 300 };
    type Row = (Option<Key<'static>>, &'static str, Claim<'static>, Option<i64>, bool);
    // key, caller, claim, complete (kept until), release
    let table: [Row; 10] = [
        (None, "a", take, None, false),
        (None, "b", take, None, false),
        (pending(NOW + 300), "a", Claim::Pending { remaining_ms: 300 }, Some(NOW + 500), true),
        (pending(NOW + 300), "b", Claim::Pending { remaining_ms: 300 }, None, false),
        (pending(NOW), "a", take, None, false),
        (pending(NOW), "b", take, None, false),
        (done(NOW + 300), "a", result, None, false),
        (done(NOW + 300), "b", result, None, false),
        (done(NOW), "a", take, None, false),
        (done(NOW), "b", take, None, false),
    ];
    for (key, caller, claimed, completed, released) in table {
        assert_eq!(claim(key, 1_000, NOW), claimed, "{key:?}");
        assert_eq!(complete(key, caller, 500, NOW), completed, "{key:?} {caller}");
        assert_eq!(release(key, caller, NOW), released, "{key:?} {caller}");
        assert_eq!(holds(key, caller, NOW), released, "{key:?} {caller}");
    }
}
