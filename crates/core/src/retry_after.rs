//! An HTTP `Retry-After` value (RFC 9110, section 10.2.3) as a pause end: delta-seconds (a
//! whole number of seconds, after the backend's now) or an HTTP-date (IMF-fixdate, and the
//! obsolete RFC 850 and asctime forms a recipient must accept, parsed by `httpdate`, the crate
//! hyper uses; RFC 850's two-digit years 70-99 are 19xx, 00-69 20xx).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::limiter::PauseEnd;
use crate::rules::limiter::MAX_PAUSE_US;

/// The most of a given value an error message repeats.
const SHOWN_CHARS: usize = 64;

/// The value as an error message repeats it: at most [`SHOWN_CHARS`] characters.
pub fn shown(value: &str) -> String {
    match value.char_indices().nth(SHOWN_CHARS) {
        Some((i, _)) => format!("{}…", &value[..i]),
        None => value.to_string(),
    }
}

/// Reads a `Retry-After` value (spaces and tabs around it ignored). A date in the past is a
/// time like any other (the pause rule makes it pause nothing).
pub fn parse(value: &str) -> Result<PauseEnd> {
    let v = value.trim_matches([' ', '\t']);
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        let max_s = MAX_PAUSE_US / 1_000_000;
        return match v.parse::<u64>() {
            Ok(s) if s <= max_s as u64 => Ok(PauseEnd::After(s * 1_000_000)),
            _ => Err(Error::invalid_at(
                "retry_after",
                format!("is {:?}: more than {max_s} seconds (365 days), the longest pause", shown(value)),
            )),
        };
    }
    match httpdate::parse_http_date(v) {
        Ok(t) => Ok(PauseEnd::At(epoch_us(t))),
        Err(_) => Err(Error::invalid_at(
            "retry_after",
            format!(
                "is {:?}: neither delta-seconds (a whole number of seconds, such as \"120\") nor an HTTP-date \
                 (such as \"Sun, 06 Nov 1994 08:49:37 GMT\")",
                shown(value)
            ),
        )),
    }
}

/// A time as µs since the epoch (0 for a time before it).
fn epoch_us(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros().min(i64::MAX as u128) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    /// 1994-11-06T08:49:37Z, µs since the epoch.
    const NOV_1994: i64 = 784_111_777_000_000;

    #[test]
    fn reads_seconds_and_the_three_date_forms() {
        let table = [
            ("120", PauseEnd::After(120_000_000)),
            ("0", PauseEnd::After(0)),
            (" 7\t", PauseEnd::After(7_000_000)),
            ("31536000", PauseEnd::After(31_536_000_000_000)),
            // IMF-fixdate, RFC 850, asctime (RFC 9110's three examples).
            ("Sun, 06 Nov 1994 08:49:37 GMT", PauseEnd::At(NOV_1994)),
            ("Sunday, 06-Nov-94 08:49:37 GMT", PauseEnd::At(NOV_1994)),
            ("Sun Nov  6 08:49:37 1994", PauseEnd::At(NOV_1994)),
            ("Wed, 01 Jan 2200 00:00:00 GMT", PauseEnd::At(7_258_118_400_000_000)),
        ];
        for (value, want) in table {
            assert_eq!(parse(value).unwrap(), want, "{value:?}");
        }
    }

    #[test]
    fn refuses_what_is_neither_naming_the_value() {
        for value in [
            "",
            " ",
            "-1",
            "1.5",
            "+3",
            "1e3",
            "soon",
            "Sun, 06 Nov 1994 08:49:37 CET",
            "31536001",
            "99999999999999999999999",
        ] {
            let e = parse(value).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArgument, "{value:?}");
            assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("retry_after"), "{value:?}");
            assert!(e.message.contains(&format!("{value:?}")), "{value:?}: {}", e.message);
        }
        let long = "x".repeat(1000);
        assert!(parse(&long).unwrap_err().message.len() < 400);
    }
}
