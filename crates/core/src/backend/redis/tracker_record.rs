//! An Item Tracker record as the Redis scripts store it: packed (`struct.pack` in
//! `lua/tracker_head.lua`, which documents the layout), each fact once, and the timeline left out
//! when the record's own fields imply it.

use std::borrow::Cow;

use crate::error::{Error, Result};
// The timeline a record's own fields imply is stored as a count of 0 (`implied` in
// `lua/tracker_common.lua`); a finished record's finish time `d` is read as its last update `u`.
use crate::rules::tracker::implied_timeline as implied;
use crate::tracker::{Record, Transition, Word};

/// A stored record from its bytes.
pub(super) fn decode_record(raw: &[u8]) -> Result<Record> {
    Packed { raw, at: 0 }
        .record()
        .ok_or_else(|| Error::internal("an item record in Redis is truncated or malformed"))
}

/// An owner token as a record packs it (`owner` in `lua/tracker_head.lua`): 'h' and its 16 bytes
/// for a token of 32 lowercase hex digits (every token the tracker makes), else 't', its length
/// (u16) and its text. The scripts are handed tokens in this form and compare them as such.
pub(super) fn pack_owner(owner: &str) -> Vec<u8> {
    let hex = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let b = owner.as_bytes();
    if b.len() == 32 {
        let bin: Option<Vec<u8>> = b.chunks(2).map(|p| Some(hex(p[0])? << 4 | hex(p[1])?)).collect();
        if let Some(bin) = bin {
            return [&[b'h'][..], &bin].concat();
        }
    }
    let n = u16::try_from(b.len()).unwrap_or(u16::MAX);
    [&[b't'][..], &n.to_le_bytes(), &b[..n as usize]].concat()
}

/// A reader over a packed record.
struct Packed<'a> {
    raw: &'a [u8],
    at: usize,
}

impl<'a> Packed<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let out = self.raw.get(self.at..end)?;
        self.at = end;
        Some(out)
    }
    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    /// A time in 6 bytes.
    fn u48(&mut self) -> Option<i64> {
        let mut b = [0u8; 8];
        b[..6].copy_from_slice(self.take(6)?);
        Some(i64::from_le_bytes(b))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn status(&mut self) -> Option<Word> {
        Some(Cow::Borrowed(match self.byte()? {
            b'p' => "in_progress",
            b'c' => "completed",
            b'f' => "failed",
            b'x' => "dead",
            b'a' => "abandoned",
            b'r' => "revived",
            _ => return None,
        }))
    }
    /// Length-prefixed text (u32 length).
    fn text(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        Some(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
    /// A flag ('-' none, 'e' some), then, when some, length-prefixed text (empty text is some).
    fn error(&mut self) -> Option<Option<String>> {
        match self.byte()? {
            b'-' => Some(None),
            b'e' => Some(Some(self.text()?)),
            _ => None,
        }
    }
    /// An owner: '-' none, 'h' a hex token as 16 bytes, 't' u16 length and the text.
    fn owner(&mut self) -> Option<Option<String>> {
        match self.byte()? {
            b'-' => Some(None),
            b'h' => {
                const DIGITS: &[u8; 16] = b"0123456789abcdef";
                let bin = self.take(16)?;
                Some(Some(
                    bin.iter()
                        .flat_map(|b| [DIGITS[(b >> 4) as usize] as char, DIGITS[(b & 15) as usize] as char])
                        .collect(),
                ))
            }
            b't' => {
                let n = self.u16()? as usize;
                Some(Some(String::from_utf8_lossy(self.take(n)?).into_owned()))
            }
            _ => None,
        }
    }
    fn record(mut self) -> Option<Record> {
        let s = self.status()?;
        if s == "abandoned" || s == "revived" {
            return None;
        }
        let a = self.u32()?;
        let (c, u, x) = (self.u48()?, self.u48()?, self.u48()?);
        // In progress: the lease end follows, and nothing is finished; else the lease is over and
        // the record was finished when it was last updated.
        let (l, d) = if s == "in_progress" { (self.u48()?, 0) } else { (0, u) };
        // The latest claim's maxAttempts, only when it gave one.
        let m = if self.raw.get(self.at) == Some(&b'm') {
            self.at += 1;
            Some(self.u32()?)
        } else {
            None
        };
        let o = self.owner()?;
        let e = self.error()?;
        // The latest claim's note and the completion's result, only when given.
        let note = if self.raw.get(self.at) == Some(&b'n') {
            self.at += 1;
            let len = self.u16()? as usize;
            Some(String::from_utf8_lossy(self.take(len)?).into_owned())
        } else {
            None
        };
        let result = if self.raw.get(self.at) == Some(&b'r') {
            self.at += 1;
            Some(self.text()?)
        } else {
            None
        };
        let n = self.byte()?;
        let mut r =
            Record { s, a, o, l, c, u, d, e, x, t: Vec::with_capacity(n as usize), m, r: result, n: note };
        for _ in 0..n {
            let at = self.i64()?;
            let status = self.status()?;
            let attempt = self.u32()?;
            r.t.push(Transition { at, status, attempt, error: self.error_entry()? });
        }
        if n == 0 {
            r.t = implied(&r)?;
        }
        (self.at == self.raw.len()).then_some(r)
    }
    /// A timeline entry's error: as [`Packed::error`], with the length written also for none.
    fn error_entry(&mut self) -> Option<Option<String>> {
        let some = match self.byte()? {
            b'-' => false,
            b'e' => true,
            _ => return None,
        };
        let t = self.text()?;
        Some(some.then_some(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs a record as the scripts do (`pack_rec` of `lua/tracker_common.lua`).
    fn pack(r: &Record) -> Vec<u8> {
        let code = |s: &str| match s {
            "in_progress" => b'p',
            "completed" => b'c',
            "failed" => b'f',
            "dead" => b'x',
            "revived" => b'r',
            _ => b'a',
        };
        let u48 = |out: &mut Vec<u8>, v: i64| out.extend(&v.to_le_bytes()[..6]);
        let mut out = vec![code(&r.s)];
        out.extend(r.a.to_le_bytes());
        for v in [r.c, r.u, r.x] {
            u48(&mut out, v);
        }
        if r.s == "in_progress" {
            u48(&mut out, r.l);
        }
        if let Some(m) = r.m {
            out.push(b'm');
            out.extend(m.to_le_bytes());
        }
        match r.o.as_deref() {
            None => out.push(b'-'),
            Some(o)
                if o.len() == 32 && o.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
            {
                out.push(b'h');
                out.extend((0..16).map(|i| u8::from_str_radix(&o[i * 2..i * 2 + 2], 16).unwrap()));
            }
            Some(o) => {
                out.push(b't');
                out.extend((o.len() as u16).to_le_bytes());
                out.extend(o.as_bytes());
            }
        }
        match &r.e {
            None => out.push(b'-'),
            Some(e) => {
                out.push(b'e');
                out.extend((e.len() as u32).to_le_bytes());
                out.extend(e.as_bytes());
            }
        }
        if let Some(n) = &r.n {
            out.push(b'n');
            out.extend((n.len() as u16).to_le_bytes());
            out.extend(n.as_bytes());
        }
        if let Some(v) = &r.r {
            out.push(b'r');
            out.extend((v.len() as u32).to_le_bytes());
            out.extend(v.as_bytes());
        }
        if implied(r).as_ref() == Some(&r.t) {
            out.push(0);
            return out;
        }
        out.push(r.t.len() as u8);
        for tr in &r.t {
            out.extend(tr.at.to_le_bytes());
            out.push(code(&tr.status));
            out.extend(tr.attempt.to_le_bytes());
            out.push(if tr.error.is_some() { b'e' } else { b'-' });
            let e = tr.error.as_deref().unwrap_or("");
            out.extend((e.len() as u32).to_le_bytes());
            out.extend(e.as_bytes());
        }
        out
    }

    const T0: i64 = 1_700_000_000_000;
    const OWNER: &str = "0123456789abcdef00ff10e0a5c3d2b1";

    fn tr(at: i64, status: &'static str, attempt: u32, error: Option<&str>) -> Transition {
        Transition { at, status: Cow::Borrowed(status), attempt, error: error.map(str::to_string) }
    }

    /// A record as the tracker writes it: `finished` (completed or failed) at `T0 + 100_000`.
    fn record(s: &'static str, a: u32, e: Option<&str>, t: Vec<Transition>) -> Record {
        let leased = s == "in_progress";
        let u = if leased { T0 } else { T0 + 100_000 };
        Record {
            s: Cow::Borrowed(s),
            a,
            o: Some(OWNER.into()),
            l: if leased { T0 + 60_000 } else { 0 },
            c: T0,
            u,
            d: if leased { 0 } else { u },
            e: e.map(str::to_string),
            x: if leased { T0 + 60_000 + 86_400_000 } else { crate::tracker::NEVER },
            t,
            m: None,
            r: None,
            n: None,
        }
    }

    /// Records of every shape: the first attempt in progress, completed and failed (timelines
    /// implied), a retry with an abandoned lease and a failure (stored), records finished without
    /// a claim, owners of every kind, an empty reason.
    fn samples() -> Vec<Record> {
        let f = T0 + 100_000;
        let mut out = vec![
            record("in_progress", 1, None, vec![tr(T0, "in_progress", 1, None)]),
            record("completed", 1, None, vec![tr(T0, "in_progress", 1, None), tr(f, "completed", 1, None)]),
            record(
                "failed",
                1,
                Some("boom"),
                vec![tr(T0, "in_progress", 1, None), tr(f, "failed", 1, Some("boom"))],
            ),
            record(
                "failed",
                2,
                Some("boom\n{not json}"),
                vec![
                    tr(T0, "in_progress", 1, None),
                    tr(T0 + 30_000, "abandoned", 1, None),
                    tr(T0 + 50_000, "in_progress", 2, None),
                    tr(f, "failed", 2, Some("boom\n{not json}")),
                ],
            ),
            // Completed twice by its owner: three entries, stored.
            record(
                "completed",
                1,
                None,
                vec![
                    tr(T0, "in_progress", 1, None),
                    tr(T0 + 5, "completed", 1, None),
                    tr(f, "completed", 1, None),
                ],
            ),
        ];
        let mut unclaimed = record("completed", 0, None, vec![tr(f, "completed", 0, None)]);
        unclaimed.o = None;
        unclaimed.c = f;
        out.push(unclaimed);
        let mut empty_reason = record("failed", 0, Some(""), vec![tr(f, "failed", 0, Some(""))]);
        empty_reason.o = Some("tok:en with spaces, \"quotes\" and ünïcode".into());
        out.push(empty_reason);
        let mut retried = record(
            "in_progress",
            2,
            Some("x"),
            vec![tr(T0, "failed", 0, Some("x")), tr(T0, "in_progress", 1, None)],
        );
        retried.o = Some(OWNER.to_uppercase());
        out.push(retried);
        // Claimed with a maxAttempts, then dead at it, then revived.
        let mut limited = record("in_progress", 1, None, vec![tr(T0, "in_progress", 1, None)]);
        limited.m = Some(3);
        out.push(limited);
        let dead_timeline = vec![tr(T0, "in_progress", 1, None), tr(f, "dead", 1, Some("boom"))];
        let mut dead = record("dead", 1, Some("boom"), dead_timeline.clone());
        dead.m = Some(1);
        out.push(dead);
        let mut revived = record("failed", 1, Some("boom"), dead_timeline);
        revived.t.push(tr(f + 5, "revived", 1, None));
        revived.m = Some(1);
        out.push(revived);
        // A claim's note (also one of 'r' and 'n' bytes), a completion's result beside it.
        let mut noted = record("in_progress", 1, None, vec![tr(T0, "in_progress", 1, None)]);
        noted.n = Some("rn page 3".into());
        out.push(noted.clone());
        let mut with_result =
            record("completed", 1, None, vec![tr(T0, "in_progress", 1, None), tr(f, "completed", 1, None)]);
        with_result.n = Some(String::new());
        with_result.r = Some(r#"{"rows":[1,2],"n":"r"}"#.into());
        out.push(with_result);
        let mut result_only = record("completed", 2, Some("x"), vec![tr(T0, "completed", 2, None)]);
        result_only.r = Some("114".into());
        out.push(result_only);
        out
    }

    #[test]
    fn every_field_round_trips() {
        for r in samples() {
            assert_eq!(decode_record(&pack(&r)).unwrap(), r, "{r:?}");
        }
    }

    #[test]
    fn a_first_attempt_stores_no_timeline_and_a_retry_stores_all_of_it() {
        let s = samples();
        // In progress: status, attempts, 4 times, hex owner as 16 bytes, no error, count 0.
        assert_eq!(pack(&s[0]).len(), 1 + 4 + 4 * 6 + 17 + 1 + 1);
        // Completed: no lease end.
        let done = pack(&s[1]);
        assert_eq!(done.len(), 1 + 4 + 3 * 6 + 17 + 1 + 1);
        assert_eq!(*done.last().unwrap(), 0, "implied timeline");
        assert_eq!(*pack(&s[2]).last().unwrap(), 0, "a first failure implies its timeline too");
        for r in &s[3..5] {
            let p = pack(r);
            let n = p.iter().rposition(|&b| b == r.t.len() as u8).unwrap();
            assert!(n > 0 && p.len() > 40 + 18 * r.t.len(), "{r:?} stores its {} entries", r.t.len());
        }
    }

    #[test]
    fn owner_tokens_pack_as_16_bytes_and_other_text_as_itself() {
        let p = pack_owner(OWNER);
        assert_eq!(p.len(), 17);
        assert_eq!(p[0], b'h');
        assert_eq!(p[1..3], [0x01, 0x23]);
        assert_eq!(p[16], 0xb1);
        for other in ["", "0123456789ABCDEF00FF10E0A5C3D2B1", "0123456789abcdef00ff10e0a5c3d2b", "ünïcode"]
        {
            let p = pack_owner(other);
            assert_eq!(p[0], b't', "{other:?}");
            assert_eq!(&p[3..], other.as_bytes());
        }
        // As the records hold them: what the scripts compare is what they stored.
        for r in samples() {
            let packed = pack(&r);
            if let Some(o) = &r.o {
                let owner = pack_owner(o);
                assert!(packed.windows(owner.len()).any(|w| w == owner), "{o:?}");
            }
        }
    }

    #[test]
    fn truncated_or_unknown_records_are_errors_not_panics() {
        for r in samples() {
            let full = pack(&r);
            for n in 0..full.len() {
                assert!(decode_record(&full[..n]).is_err(), "{n} bytes of {}", full.len());
            }
            let mut longer = full.clone();
            longer.push(0);
            assert!(decode_record(&longer).is_err());
        }
        assert!(decode_record(b"Xanything").is_err());
        // A JSON record (no longer a form the scripts write or read).
        assert!(decode_record(br#"{"s":"completed"}"#).is_err());
        // A count of 0 where no timeline is implied (attempt 2 in progress).
        let mut bad = pack(&samples()[0]);
        bad[1] = 2;
        assert!(decode_record(&bad).is_err());
    }
}
