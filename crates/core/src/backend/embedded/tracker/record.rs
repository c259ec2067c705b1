//! The changes a claim, a completion or a failure makes to a record: the same rules as the Redis
//! scripts (shared with the durable store).

use std::borrow::Cow;

use crate::tracker::{expiry, Record, Transition, MAX_TIMELINE};

fn push(t: &mut Vec<Transition>, tr: Transition) {
    // Grow by one: most items keep a short timeline, and Vec's first growth would reserve 4.
    t.reserve_exact(1);
    t.push(tr);
    if t.len() > MAX_TIMELINE {
        let extra = t.len() - MAX_TIMELINE;
        t.drain(..extra);
    }
}

/// A completion's or failure's change to a record: the same rules as the Redis scripts.
pub(crate) fn finish(rec: &mut Record, status: &'static str, error: Option<&String>, now: i64, keep_ms: u64) {
    rec.s = status.into();
    rec.l = 0;
    rec.u = now;
    rec.d = now;
    if let Some(e) = error {
        rec.e = Some(e.clone());
    }
    rec.x = expiry(now, keep_ms);
    push(&mut rec.t, Transition { at: now, status: status.into(), attempt: rec.a, error: error.cloned() });
}

/// A claim's change to a record: the same rules as the Redis scripts.
pub(crate) fn take(rec: &mut Record, owner: &str, now: i64, lease_end: i64, retention_ms: u64) {
    if rec.s == "in_progress" {
        push(&mut rec.t, Transition { at: rec.l, status: "abandoned".into(), attempt: rec.a, error: None });
    }
    rec.a += 1;
    rec.s = "in_progress".into();
    rec.o = Some(owner.to_string());
    rec.l = lease_end;
    rec.u = now;
    rec.d = 0;
    rec.x = lease_end + retention_ms as i64;
    push(&mut rec.t, Transition { at: now, status: "in_progress".into(), attempt: rec.a, error: None });
}

pub(crate) fn fresh(now: i64) -> Record {
    Record { s: Cow::Borrowed(""), a: 0, o: None, l: 0, c: now, u: now, d: 0, e: None, x: 0, t: Vec::new() }
}
