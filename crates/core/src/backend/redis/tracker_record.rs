//! An Item Tracker record as the Redis scripts store it: packed (`struct.pack` in
//! `lua/tracker_head.lua`, which documents the layout), or JSON as versions before the packed
//! form wrote it. Both are read; the scripts write every record they change back packed.

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::tracker::{Record, Transition, Word};

/// A stored record from its bytes.
pub(super) fn decode_record(raw: &[u8]) -> Result<Record> {
    match raw.first() {
        Some(b'{') => serde_json::from_slice::<Record>(raw)
            .map_err(|e| Error::internal(format!("an item record in Redis could not be read: {e}"))),
        Some(b'P') => Packed { raw, at: 1 }
            .record()
            .ok_or_else(|| Error::internal("an item record in Redis is truncated")),
        _ => Err(Error::internal("an item record in Redis has an unknown form")),
    }
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
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn status(&mut self) -> Option<Word> {
        Some(Cow::Borrowed(match self.take(1)?[0] {
            b'p' => "in_progress",
            b'c' => "completed",
            b'f' => "failed",
            b'a' => "abandoned",
            _ => return None,
        }))
    }
    /// Length-prefixed text.
    fn text(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        Some(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
    /// A flag ('-' none, 'e' some), then length-prefixed text (empty text is some).
    fn opt_text(&mut self) -> Option<Option<String>> {
        let some = match self.take(1)?[0] {
            b'-' => false,
            b'e' => true,
            _ => return None,
        };
        let t = self.text()?;
        Some(some.then_some(t))
    }
    fn record(mut self) -> Option<Record> {
        let s = self.status()?;
        let a = self.u32()?;
        let (l, c, u, d, x) = (self.i64()?, self.i64()?, self.i64()?, self.i64()?, self.i64()?);
        let o = Some(self.text()?).filter(|o| !o.is_empty());
        let e = self.opt_text()?;
        let n = self.u16()?;
        let mut t = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let at = self.i64()?;
            let status = self.status()?;
            let attempt = self.u32()?;
            t.push(Transition { at, status, attempt, error: self.opt_text()? });
        }
        (self.at == self.raw.len()).then_some(Record { s, a, o, l, c, u, d, e, x, t })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs a record as the scripts do (the layout of `lua/tracker_head.lua`).
    fn pack(r: &Record) -> Vec<u8> {
        let code = |s: &str| match s {
            "in_progress" => b'p',
            "completed" => b'c',
            "failed" => b'f',
            _ => b'a',
        };
        let text = |out: &mut Vec<u8>, t: &str| {
            out.extend((t.len() as u32).to_le_bytes());
            out.extend(t.as_bytes());
        };
        let opt_text = |out: &mut Vec<u8>, t: &Option<String>| {
            out.push(if t.is_some() { b'e' } else { b'-' });
            text(out, t.as_deref().unwrap_or(""));
        };
        let mut out = vec![b'P', code(&r.s)];
        out.extend(r.a.to_le_bytes());
        for v in [r.l, r.c, r.u, r.d, r.x] {
            out.extend(v.to_le_bytes());
        }
        text(&mut out, r.o.as_deref().unwrap_or(""));
        opt_text(&mut out, &r.e);
        out.extend((r.t.len() as u16).to_le_bytes());
        for tr in &r.t {
            out.extend(tr.at.to_le_bytes());
            out.push(code(&tr.status));
            out.extend(tr.attempt.to_le_bytes());
            opt_text(&mut out, &tr.error);
        }
        out
    }

    fn sample() -> Record {
        let tr = |at, status: &'static str, attempt, error: Option<&str>| Transition {
            at,
            status: Cow::Borrowed(status),
            attempt,
            error: error.map(str::to_string),
        };
        Record {
            s: Cow::Borrowed("failed"),
            a: 2,
            o: Some("tok:en with spaces, \"quotes\" and ünïcode".into()),
            l: 0,
            c: 1_700_000_000_000,
            u: 1_700_000_100_000,
            d: 1_700_000_100_000,
            e: Some("boom\n{not json}".into()),
            x: crate::tracker::NEVER,
            t: vec![
                tr(1_700_000_000_000, "in_progress", 1, None),
                tr(1_700_000_030_000, "abandoned", 1, None),
                tr(1_700_000_050_000, "in_progress", 2, None),
                tr(1_700_000_100_000, "failed", 2, Some("boom\n{not json}")),
            ],
        }
    }

    #[test]
    fn packed_and_json_records_read_the_same() {
        let mut empty_reason = sample();
        empty_reason.e = Some(String::new());
        empty_reason.t[3].error = Some(String::new());
        let mut unowned = sample();
        unowned.o = None;
        unowned.e = None;
        for r in [sample(), empty_reason, unowned] {
            assert_eq!(decode_record(&pack(&r)).unwrap(), r);
            assert_eq!(decode_record(serde_json::to_string(&r).unwrap().as_bytes()).unwrap(), r);
        }
    }

    #[test]
    fn truncated_or_unknown_records_are_errors_not_panics() {
        let full = pack(&sample());
        for n in 0..full.len() {
            assert!(decode_record(&full[..n]).is_err(), "{n} bytes of {}", full.len());
        }
        let mut longer = full.clone();
        longer.push(0);
        assert!(decode_record(&longer).is_err());
        assert!(decode_record(b"Xanything").is_err());
    }
}
