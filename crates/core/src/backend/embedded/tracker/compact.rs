//! An item's record as the embedded store keeps it: its times and attempts as plain numbers, the
//! status as a small number, the owner token as its 16 bytes, and nothing else for the usual
//! item (claimed once, then completed: the timeline is implied by the record's own fields, see
//! [`implied_timeline`]). What an item has beyond that (a last error, an owner not of a token's
//! shape, a timeline that is not implied) is kept in one boxed extra. The update time is the
//! time of the timeline's last transition (every claim and finish adds one), kept in the extra
//! only where it is not. Every field reads back as
//! it was written: [`Compact::record`] gives the [`Record`] that [`Compact::new`] was given.

use std::borrow::Cow;

use crate::rules::tracker::implied_timeline;
use crate::token;
use crate::tracker::{Record, Transition};

// The stored statuses, by their code: the one numbering of the in-process stores.
use crate::tracker::STORED_STATUS as STATUS;

/// What a record has beyond the usual item.
#[derive(Default)]
struct Extra {
    /// The owner when it is not of a token's shape.
    owner: Option<Box<str>>,
    /// The last error.
    error: Option<Box<str>>,
    /// The timeline when the record's fields do not imply it.
    timeline: Option<Box<[Transition]>>,
    /// The update time when it is not the time of the timeline's last transition.
    updated: Option<i64>,
    /// The latest claim's `maxAttempts`, when it gave one.
    max_attempts: Option<u32>,
    /// The completion's result (JSON text), when it gave one.
    result: Option<Box<str>>,
    /// The latest claim's note, when it gave one.
    note: Option<Box<str>>,
}

/// Whether the record has an owner, and in which form.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OwnerForm {
    None,
    /// In `token`.
    Token,
    /// In the extra.
    Text,
}

pub(super) struct Compact {
    /// When the record is forgotten (ms).
    pub(super) x: i64,
    /// The lease end (ms) while in progress, else the finish time (0 for none): a record has
    /// one of them at a time (a claim clears the finish, a finish the lease).
    lease_or_finish: i64,
    c: i64,
    /// Attempts.
    pub(super) a: u32,
    /// The status's position in [`STATUS`].
    s: u8,
    owner: OwnerForm,
    token: [u8; token::TOKEN_LEN / 2],
    extra: Option<Box<Extra>>,
}

impl Compact {
    pub(super) fn new(r: &Record) -> Compact {
        let s = crate::tracker::stored_status_code(&r.s);
        debug_assert!(s.is_some(), "a stored status: {:?}", r.s);
        let mut extra = Extra {
            error: r.e.as_deref().map(Box::from),
            max_attempts: r.m,
            result: r.r.as_deref().map(Box::from),
            note: r.n.as_deref().map(Box::from),
            ..Extra::default()
        };
        let (owner, token) = match r.o.as_deref() {
            None => (OwnerForm::None, [0; token::TOKEN_LEN / 2]),
            Some(o) => match token::to_bytes(o) {
                Some(b) => (OwnerForm::Token, b),
                None => {
                    extra.owner = Some(o.into());
                    (OwnerForm::Text, [0; token::TOKEN_LEN / 2])
                }
            },
        };
        let in_progress = r.s == "in_progress";
        debug_assert!(if in_progress { r.d == 0 } else { r.l == 0 }, "a lease or a finish: {r:?}");
        if implied_timeline(r).as_ref() != Some(&r.t) {
            extra.timeline = Some(r.t.clone().into_boxed_slice());
        }
        if Some(r.u) != r.t.last().map(|t| t.at) {
            extra.updated = Some(r.u);
        }
        let empty = extra.owner.is_none()
            && extra.error.is_none()
            && extra.timeline.is_none()
            && extra.updated.is_none()
            && extra.max_attempts.is_none()
            && extra.result.is_none()
            && extra.note.is_none();
        Compact {
            x: r.x,
            lease_or_finish: if in_progress { r.l } else { r.d },
            c: r.c,
            a: r.a,
            s: s.unwrap_or(0),
            owner,
            token,
            extra: (!empty).then(|| Box::new(extra)),
        }
    }

    /// The stored status (`in_progress`, `completed`, `failed`, `dead`, or empty for none).
    pub(super) fn status(&self) -> &'static str {
        STATUS[self.s as usize]
    }

    /// The lease end (ms) while in progress, else 0.
    pub(super) fn lease_end(&self) -> i64 {
        if self.status() == "in_progress" {
            self.lease_or_finish
        } else {
            0
        }
    }

    /// The finish time (ms), 0 when not finished.
    fn finished(&self) -> i64 {
        if self.status() == "in_progress" {
            0
        } else {
            self.lease_or_finish
        }
    }

    /// The record as written.
    pub(super) fn record(&self) -> Record {
        let extra = self.extra.as_deref();
        let mut r = Record {
            s: Cow::Borrowed(self.status()),
            a: self.a,
            o: match self.owner {
                OwnerForm::None => None,
                OwnerForm::Token => Some(token::from_bytes(&self.token)),
                OwnerForm::Text => extra.and_then(|e| e.owner.as_deref()).map(str::to_string),
            },
            l: self.lease_end(),
            c: self.c,
            u: 0,
            d: self.finished(),
            e: extra.and_then(|e| e.error.as_deref()).map(str::to_string),
            x: self.x,
            t: Vec::new(),
            m: extra.and_then(|e| e.max_attempts),
            r: extra.and_then(|e| e.result.as_deref()).map(str::to_string),
            n: extra.and_then(|e| e.note.as_deref()).map(str::to_string),
        };
        r.t = match extra.and_then(|e| e.timeline.as_deref()) {
            Some(t) => t.to_vec(),
            None => implied_timeline(&r).unwrap_or_default(),
        };
        r.u = match extra.and_then(|e| e.updated) {
            Some(u) => u,
            None => r.t.last().map_or(0, |t| t.at),
        };
        r
    }

    /// Whether the record keeps a timeline of its own (not implied by its fields).
    #[cfg(test)]
    pub(super) fn keeps_timeline(&self) -> bool {
        self.extra.as_ref().is_some_and(|e| e.timeline.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::tracker::{finish, fresh, take, Take};

    /// Records of every shape read back as written: claimed once (in progress, completed,
    /// failed), finished unclaimed, claimed again after a failure or a lapsed lease (abandoned),
    /// finished twice, an owner not of a token's shape. Those claimed at most once and finished
    /// at most once keep no timeline of their own, and a completed one no extra at all.
    #[test]
    fn every_record_reads_back_and_the_usual_ones_keep_no_timeline() {
        let (t0, owner) = (1_764_000_000_000i64, token::new_token());
        let boom = "boom".to_string();
        let claimed = |n: u32| {
            let mut r = fresh(t0);
            for k in 0..n {
                take(&mut r, &owner, t0 + 10 * k as i64, t0 + 10 * k as i64 + 5, 1000, Take::default());
            }
            r
        };
        let done = |mut r: Record, status, error: Option<&String>| {
            finish(&mut r, status, error, t0 + 100, 5000);
            r
        };
        let retried = {
            let mut r = done(claimed(1), "failed", Some(&boom));
            take(&mut r, &owner, t0 + 200, t0 + 300, 1000, Take::default());
            done(r, "completed", None)
        };
        let mut twice = done(claimed(1), "failed", Some(&boom));
        finish(&mut twice, "completed", None, t0 + 200, 5000);
        let mut other_owner = done(claimed(1), "completed", None);
        other_owner.o = Some("not a token".into());
        let mut dead = claimed(2);
        dead.m = Some(2);
        finish(&mut dead, "dead", Some(&boom), t0 + 100, 5000);
        let mut limited = claimed(1);
        limited.m = Some(3);
        let mut noted = claimed(1);
        noted.n = Some("page 3".into());
        let mut with_result = done(claimed(1), "completed", None);
        with_result.r = Some(r#"{"rows":12}"#.into());
        // Not written by the rules: an update time other than the last transition's.
        let mut other_update = done(claimed(1), "completed", None);
        other_update.u += 1;
        // (record, whether it keeps a timeline of its own, whether it keeps an extra)
        let cases = [
            (claimed(1), false, false),
            (done(claimed(1), "completed", None), false, false),
            (done(claimed(1), "failed", Some(&boom)), false, true),
            (done(fresh(t0), "completed", None), false, false),
            (done(fresh(t0), "failed", Some(&boom)), false, true),
            (claimed(2), true, true),
            (done(claimed(3), "completed", None), true, true),
            (retried, true, true),
            (twice, true, true),
            (other_owner, false, true),
            (other_update, false, true),
            (dead, true, true),
            (limited, false, true),
            (noted, false, true),
            (with_result, false, true),
        ];
        for (i, (rec, timeline, extra)) in cases.iter().enumerate() {
            let c = Compact::new(rec);
            assert_eq!(&c.record(), rec, "case {i}");
            assert_eq!(c.keeps_timeline(), *timeline, "case {i}: timeline kept");
            assert_eq!(c.extra.is_some(), *extra, "case {i}: extra kept");
        }
        let abandoned = claimed(2);
        assert_eq!(abandoned.t[1].status, "abandoned", "a lapsed lease is in the cases");
    }

    /// A usual record takes 56 bytes (the general record took 144 and three allocations).
    #[test]
    fn a_record_is_small() {
        assert!(std::mem::size_of::<Compact>() <= 56, "{}", std::mem::size_of::<Compact>());
    }
}
