//! Checks of names, durations and limits, shared by every backend. Each error names the field.

use std::fmt::Display;

use crate::error::{Error, Result};

/// Names (groups, item ids, lock names, keys) are 1..=1024 bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 1024;
/// The longest lease, TTL or wait flowguard accepts: 365 days.
pub const MAX_DURATION_MS: u64 = 365 * 24 * 3600 * 1000;
/// The longest reason or label kept with an item or lock.
pub const MAX_TEXT_BYTES: usize = 4096;
/// The most ids in one batch call.
pub const MAX_BATCH: usize = 100_000;

pub fn name(field: impl Display, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid(format!("{field} must be a non-empty string")));
    }
    if value.len() > MAX_NAME_BYTES {
        return Err(Error::invalid(format!(
            "{field} is {} bytes long; the limit is {MAX_NAME_BYTES} bytes",
            value.len()
        )));
    }
    Ok(())
}

pub fn text(field: impl Display, value: &str) -> Result<()> {
    if value.len() > MAX_TEXT_BYTES {
        return Err(Error::invalid(format!(
            "{field} is {} bytes long; the limit is {MAX_TEXT_BYTES} bytes",
            value.len()
        )));
    }
    Ok(())
}

/// A duration given in milliseconds as a JavaScript number: finite, > 0, at most 365 days.
/// Fractions are rounded up to whole milliseconds.
pub fn duration_ms(field: impl Display, value: f64) -> Result<u64> {
    if !value.is_finite() {
        return Err(Error::invalid(format!("{field} must be a finite number of milliseconds, got {value}")));
    }
    if value <= 0.0 {
        return Err(Error::invalid(format!("{field} must be greater than 0 milliseconds, got {value}")));
    }
    if value > MAX_DURATION_MS as f64 {
        return Err(Error::invalid(format!(
            "{field} is {value} ms; the limit is {MAX_DURATION_MS} ms (365 days)"
        )));
    }
    Ok(value.ceil() as u64)
}

/// Like [`duration_ms`] but 0 is allowed (for example "do not wait").
pub fn duration_ms_or_zero(field: impl Display, value: f64) -> Result<u64> {
    if value == 0.0 {
        return Ok(0);
    }
    duration_ms(field, value)
}

/// A whole number in `min..=max`.
pub fn integer(field: impl Display, value: f64, min: u64, max: u64) -> Result<u64> {
    if !value.is_finite() || value.fract() != 0.0 || value < min as f64 || value > max as f64 {
        return Err(Error::invalid(format!(
            "{field} must be a whole number from {min} to {max}, got {value}"
        )));
    }
    Ok(value as u64)
}

pub fn batch_len(field: impl Display, len: usize) -> Result<()> {
    if len > MAX_BATCH {
        return Err(Error::invalid(format!(
            "{field} holds {len} entries; the limit is {MAX_BATCH} per call"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration_ms("t", 1.2).unwrap(), 2);
        assert!(duration_ms("timeoutMs", 0.0).unwrap_err().message.contains("timeoutMs"));
        assert!(duration_ms("t", -1.0).is_err());
        assert!(duration_ms("t", f64::NAN).is_err());
        assert!(duration_ms("t", f64::INFINITY).is_err());
        assert!(duration_ms("t", 1e15).is_err());
        assert_eq!(duration_ms_or_zero("t", 0.0).unwrap(), 0);
    }

    #[test]
    fn names() {
        assert!(name("group", "").is_err());
        assert!(name("group", &"x".repeat(1024)).is_ok());
        assert!(name("group", &"x".repeat(1025)).unwrap_err().message.contains("group"));
    }
}
