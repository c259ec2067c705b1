//! Checks of names, durations and limits, shared by every backend. Each error carries the field.

use std::time::Duration;

use crate::error::{At, Error, Result};

/// Names (groups, item ids, lock names, keys) are 1..=1024 bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 1024;
/// The longest lease, TTL or wait flowguard accepts: 365 days.
pub const MAX_DURATION_MS: u64 = 365 * 24 * 3600 * 1000;
/// The longest reason or label kept with an item or lock.
pub const MAX_TEXT_BYTES: usize = 4096;
/// The most ids in one batch call.
pub const MAX_BATCH: usize = 100_000;

pub fn name(field: impl At, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid_at(field, "must be a non-empty string"));
    }
    if value.len() > MAX_NAME_BYTES {
        return Err(Error::invalid_at(
            field,
            format!("is {} bytes long; the limit is {MAX_NAME_BYTES} bytes", value.len()),
        ));
    }
    Ok(())
}

pub fn text(field: impl At, value: &str) -> Result<()> {
    if value.len() > MAX_TEXT_BYTES {
        return Err(Error::invalid_at(
            field,
            format!("is {} bytes long; the limit is {MAX_TEXT_BYTES} bytes", value.len()),
        ));
    }
    Ok(())
}

/// A duration given as a number of milliseconds, as JavaScript and JSON give it: finite and not
/// negative; a fraction is kept (to the nanosecond: a positive value too small for one is one), a
/// value past `Duration`'s range is `Duration::MAX` (the checks below then refuse it). The one
/// reading of a milliseconds number, for the addon and the server alike.
pub fn millis(field: impl At, value: f64) -> Result<Duration> {
    millis_reason(value).map_err(|why| Error::invalid_at(field, why))
}

/// [`millis`] with the reason for a refusal as text (for a shell that names the field itself).
pub fn millis_reason(value: f64) -> std::result::Result<Duration, String> {
    if !value.is_finite() {
        return Err(format!("must be a finite number of milliseconds, got {value}"));
    }
    if value < 0.0 {
        return Err(format!("must be greater than 0 milliseconds, got {value}"));
    }
    let d = Duration::try_from_secs_f64(value / 1000.0).unwrap_or(Duration::MAX);
    Ok(if d.is_zero() && value > 0.0 { Duration::from_nanos(1) } else { d })
}

/// A duration of more than 0 and at most 365 days, in whole milliseconds (a fraction of a
/// millisecond is rounded up).
pub fn duration(field: impl At, value: Duration) -> Result<u64> {
    if value.is_zero() {
        return Err(Error::invalid_at(field, "must be greater than 0 milliseconds, got 0"));
    }
    duration_or_zero(field, value)
}

/// Like [`duration`] but 0 is allowed (for example "do not wait").
pub fn duration_or_zero(field: impl At, value: Duration) -> Result<u64> {
    let nanos = value.as_nanos();
    let ms = nanos.div_ceil(1_000_000);
    if ms > MAX_DURATION_MS as u128 {
        return Err(Error::invalid_at(
            field,
            format!("is {} ms; the limit is {MAX_DURATION_MS} ms (365 days)", fmt_ms(value)),
        ));
    }
    Ok(ms as u64)
}

/// Milliseconds of `d` as a person reads them: whole when whole.
fn fmt_ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms.fract() == 0.0 {
        format!("{ms:.0}")
    } else {
        ms.to_string()
    }
}

/// A whole number in `min..=max`.
pub fn range(field: impl At, value: u64, min: u64, max: u64) -> Result<u64> {
    if value < min || value > max {
        return Err(Error::invalid_at(
            field,
            format!("must be a whole number from {min} to {max}, got {value}"),
        ));
    }
    Ok(value)
}

pub fn batch_len(field: impl At, len: usize) -> Result<()> {
    if len > MAX_BATCH {
        return Err(Error::invalid_at(
            field,
            format!("holds {len} entries; the limit is {MAX_BATCH} per call"),
        ));
    }
    Ok(())
}

/// A duration option: checked when given, `default` (ms) when not.
pub fn duration_or(field: impl At, value: Option<Duration>, default: u64) -> Result<u64> {
    match value {
        Some(v) => duration(field, v),
        None => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("t", Duration::from_micros(1200)).unwrap(), 2);
        assert_eq!(duration("t", Duration::from_millis(7)).unwrap(), 7);
        let e = duration("timeout", Duration::ZERO).unwrap_err();
        assert_eq!(e.field.unwrap().to_string(), "timeout");
        assert!(duration("t", Duration::from_millis(MAX_DURATION_MS + 1)).is_err());
        assert!(duration("t", Duration::MAX).is_err());
        assert_eq!(duration_or_zero("t", Duration::ZERO).unwrap(), 0);
        assert_eq!(duration_or("t", None, 5).unwrap(), 5);
    }

    #[test]
    fn names() {
        assert!(name("group", "").is_err());
        assert!(name("group", &"x".repeat(1024)).is_ok());
        assert!(name("group", &"x".repeat(1025)).unwrap_err().to_string().contains("group"));
    }

    #[test]
    fn ranges() {
        assert_eq!(range("limit", 5, 1, 10).unwrap(), 5);
        assert!(range("limit", 0, 1, 10).unwrap_err().to_string().contains("limit must be a whole number"));
    }
}
