//! Rate Limiter: at most `limit` per `period` per name, across processes, by GCRA (the generic
//! cell rate algorithm of redis-cell).
//!
//! A limiter keeps one number per name, its theoretical arrival time (TAT): the time at which it
//! would be empty again. Each token moves the TAT on by the emission interval `period / limit`;
//! a take is allowed while the TAT it leaves is at most `burst` intervals ahead of now. So at
//! most `burst + limit - 1` takes fall in any window of one `period` (with the default burst of
//! 1: at most `limit`, evenly spaced), and an idle name costs nothing: its record expires when the
//! TAT is reached, at which point it equals a fresh one.
//!
//! A take with `max_wait` reserves: when the tokens are due within `max_wait`, the TAT is moved
//! on at once and the result says when each token is due (`slots`), so callers queue in order
//! without polling and without ever exceeding the rate. Times are in microseconds on the
//! backend's clock (Redis `TIME` on Redis).
//!
//! A limiter can be paused ([`Client::pause_rate_limit`], as BullMQ's `worker.rateLimit(ms)`):
//! when an upstream answers 429 with `Retry-After`, every process sharing the limiter is refused
//! until then, with `retry_after_ms` up to the pause end (see [`crate::rules::limiter`]).

use std::time::Duration;

use crate::backend::BoxFuture;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::rules::limiter::{due, Pause, MAX_PAUSE_US};
use crate::validate;

/// The most tokens per period, burst, or tokens in one take.
pub const MAX_LIMIT: u64 = 1_000_000;

/// A limiter's rule, validated: the emission interval and the burst, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// `period / limit`, rounded up to a whole microsecond (never faster than asked).
    pub interval_us: u64,
    /// How many tokens may be taken at once after an idle time (at least 1).
    pub burst: u64,
}

/// What a backend reports for one take: whether it was allowed (or reserved), the backend's time,
/// the TAT before the take (never before a pause end) and the pause end when one is ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    pub allowed: bool,
    pub now_us: i64,
    pub tat_us: i64,
    pub pause_us: Option<i64>,
}

/// When a pause ends, as the caller gave it; the backend's clock makes it a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseEnd {
    /// At this time, µs since the epoch (an HTTP-date, or `until_ms`).
    At(i64),
    /// This many µs after the backend's now (delta-seconds).
    After(u64),
}

/// A pause as the caller asks it, before validation.
#[derive(Debug, Clone, PartialEq)]
pub enum PauseFor {
    /// Until this time, ms since the epoch (a time in the past pauses nothing).
    UntilMs(i64),
    /// An HTTP `Retry-After` value as received: delta-seconds or an HTTP-date.
    RetryAfter(String),
}

impl PauseFor {
    /// The pause of a call's two optional fields, of which exactly one must be given.
    pub fn one_of(until_ms: Option<i64>, retry_after: Option<String>) -> Result<PauseFor> {
        match (until_ms, retry_after) {
            (Some(ms), None) => Ok(PauseFor::UntilMs(ms)),
            (None, Some(v)) => Ok(PauseFor::RetryAfter(v)),
            (Some(_), Some(_)) => Err(Error::invalid_at(
                "retry_after",
                "and a time to pause until were both given; give one of them",
            )),
            (None, None) => Err(Error::invalid_at(
                "retry_after",
                "is required (or a time to pause until, ms since the epoch): the Retry-After value, seconds or an \
                 HTTP-date",
            )),
        }
    }
}

/// What a backend must do for the Rate Limiter: one atomic step.
pub trait LimiterBackend {
    /// Takes `cost` tokens of limiter `name` when the last of them is due within `max_wait_us`
    /// (0: now), moving its TAT on; else changes nothing.
    fn take<'a>(&'a self, name: &'a str, rule: Rule, cost: u64, max_wait_us: u64) -> BoxFuture<'a, Take>;
    /// Reads limiter `name` without changing it: the backend's time and the stored TAT (None when
    /// absent or reached).
    fn inspect_limiter<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Stored>;
    /// Pauses limiter `name` until `end` (by [`crate::rules::limiter::pause`]): the decision and
    /// the limiter as read after it.
    fn pause_limiter<'a>(&'a self, name: &'a str, end: PauseEnd) -> BoxFuture<'a, (Pause, Stored)>;
}

/// A limiter record as read by inspect: the backend's time, the TAT and the pause end (each None
/// when absent or reached).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    pub now_us: i64,
    pub tat_us: Option<i64>,
    pub pause_us: Option<i64>,
}

/// A limiter as inspect shows it. The rule is given by each take and not stored, so what a
/// limiter holds is how far its TAT runs ahead of now: the time until it is full again.
#[derive(Debug, Clone, PartialEq)]
pub struct LimiterInfo {
    pub name: String,
    /// Whether tokens were taken recently enough that the limiter is not full again yet.
    pub active: bool,
    /// Ms until the limiter is full again (its burst available) if nothing else is taken; during
    /// a pause at least until its end.
    pub reset_after_ms: f64,
    /// The read's time, ms since the epoch on the backend's clock (with a fraction).
    pub read_at: f64,
    /// While paused: when the pause ends, ms since the epoch on the backend's clock.
    pub paused_until: Option<f64>,
    /// Ms until the pause ends (0 when not paused).
    pub pause_ms: f64,
}

/// The caller's view of an inspect.
pub fn info_of(name: &str, s: Stored) -> LimiterInfo {
    let pause = s.pause_us.filter(|p| *p > s.now_us);
    let ahead = s.tat_us.map_or(0, |t| t - s.now_us).max(pause.map_or(0, |p| p - s.now_us));
    LimiterInfo {
        name: name.to_string(),
        active: ahead > 0,
        reset_after_ms: ms(ahead),
        read_at: s.now_us as f64 / 1000.0,
        paused_until: pause.map(|p| p as f64 / 1000.0),
        pause_ms: pause.map_or(0.0, |p| ms(p - s.now_us)),
    }
}

/// Options of a take, before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitOptions {
    /// Tokens per period. Required.
    pub limit: u64,
    /// The period. Default 1 s.
    pub period: Option<Duration>,
    /// Tokens that may go at once after an idle time. Default 1 (evenly spaced).
    pub burst: Option<u64>,
    /// Tokens this call takes. Default 1. Without `max_wait` at most `burst`.
    pub cost: Option<u64>,
    /// Reserve the tokens when they are all due within this time (default 0: only when allowed now).
    pub max_wait: Option<Duration>,
}

/// The result of a take.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitResult {
    pub name: String,
    /// Whether the tokens were taken (now, or reserved for `slots`).
    pub allowed: bool,
    pub cost: u64,
    /// Tokens that could be taken at once now after this call.
    pub remaining: u64,
    /// When not allowed: ms until the same call would be allowed without waiting.
    pub retry_after_ms: f64,
    /// Ms until the limiter is full again (its burst available) if nothing else is taken.
    pub reset_after_ms: f64,
    /// When allowed: ms from the decision until the last token is due (0 when all are due now).
    pub wait_ms: f64,
    /// When allowed: for each token, ms from the decision until it is due (in order).
    pub slots_ms: Vec<f64>,
    /// The decision's time, ms since the epoch on the backend's clock (with a fraction).
    pub decided_at: f64,
}

fn ms(us: i64) -> f64 {
    us.max(0) as f64 / 1000.0
}

/// Checks options and returns the rule, cost and max wait (µs).
pub fn rule_of(opts: &LimitOptions) -> Result<(Rule, u64, u64)> {
    let limit = validate::range("limit", opts.limit, 1, MAX_LIMIT)?;
    let period_ms = validate::duration_or("period", opts.period, 1_000)?;
    let burst = validate::range("burst", opts.burst.unwrap_or(1), 1, MAX_LIMIT)?;
    let cost = validate::range("cost", opts.cost.unwrap_or(1), 0, validate::MAX_BATCH as u64)?;
    let max_wait_ms = match opts.max_wait {
        Some(v) => validate::duration_or_zero("max_wait", v)?,
        None => 0,
    };
    let interval_us = (period_ms * 1000).div_ceil(limit);
    let max_us = validate::MAX_DURATION_MS * 1000;
    if burst.saturating_mul(interval_us) > max_us {
        return Err(Error::invalid_at(
            "burst",
            format!("is {burst} tokens of {interval_us} µs each: more than 365 days; lower burst or period"),
        ));
    }
    if cost.saturating_mul(interval_us) > max_us {
        return Err(Error::invalid_at(
            "cost",
            format!("is {cost} tokens of {interval_us} µs each: more than 365 days; lower cost or period"),
        ));
    }
    if max_wait_ms == 0 && cost > burst {
        return Err(Error::invalid_at(
            "cost",
            format!(
                "is {cost} but burst is {burst}: more than burst tokens are never allowed at once; give a \
                 max wait to reserve them over time, or raise burst"
            ),
        ));
    }
    Ok((Rule { interval_us, burst }, cost, max_wait_ms * 1000))
}

/// The caller's view of a backend's take.
pub fn result_of(name: &str, rule: Rule, cost: u64, t: Take) -> LimitResult {
    let (iv, burst) = (rule.interval_us as i64, rule.burst as i64);
    let tat = if t.allowed { t.tat_us + cost as i64 * iv } else { t.tat_us };
    let remaining = if t.pause_us.is_some() { 0 } else { ((t.now_us + burst * iv - tat) / iv).max(0) as u64 };
    let due_last = due(t.tat_us + cost as i64 * iv - burst * iv, t.pause_us);
    let slots_ms = if t.allowed {
        (1..=cost as i64).map(|j| ms(due(t.tat_us + j * iv - burst * iv, t.pause_us) - t.now_us)).collect()
    } else {
        Vec::new()
    };
    LimitResult {
        name: name.to_string(),
        allowed: t.allowed,
        cost,
        remaining,
        retry_after_ms: if t.allowed { 0.0 } else { ms(due_last - t.now_us) },
        reset_after_ms: ms(tat - t.now_us),
        wait_ms: if t.allowed { ms(due_last - t.now_us) } else { 0.0 },
        slots_ms,
        decided_at: t.now_us as f64 / 1000.0,
    }
}

impl Client {
    /// Takes tokens of limiter `name`: allowed or not, with the time to wait and the tokens left.
    /// With `max_wait`, reserves them when they are due within it (see the module docs); never
    /// sleeps.
    pub async fn rate_limit(&self, name: &str, opts: LimitOptions) -> Result<LimitResult> {
        validate::name("name", name)?;
        let (rule, cost, max_wait_us) = rule_of(&opts)?;
        let t = self.backend().take(name, rule, cost, max_wait_us).await?;
        Ok(result_of(name, rule, cost, t))
    }

    /// Like [`Client::rate_limit`], then sleeps until the last reserved token is due: it returns
    /// when the call may go ahead (`allowed`), or at once when the tokens are not due within
    /// `max_wait`.
    pub async fn rate_limit_wait(&self, name: &str, opts: LimitOptions) -> Result<LimitResult> {
        let r = self.rate_limit(name, opts).await?;
        if r.allowed && r.wait_ms > 0.0 {
            tokio::time::sleep(Duration::from_micros((r.wait_ms * 1000.0).ceil() as u64)).await;
        }
        Ok(r)
    }

    /// Reads limiter `name` without taking tokens: whether it is in use, when it is full again
    /// and when its pause ends.
    pub async fn get_limiter(&self, name: &str) -> Result<LimiterInfo> {
        validate::name("name", name)?;
        Ok(info_of(name, self.backend().inspect_limiter(name).await?))
    }

    /// Pauses limiter `name` for every process sharing it (as BullMQ's `worker.rateLimit(ms)`):
    /// until the pause ends every take is refused with `retry_after_ms` up to its end, and a take
    /// with a max wait reserves from its end on. A pause never shortens a longer one, and a time
    /// in the past pauses nothing. Returns the limiter as read after the pause.
    pub async fn pause_rate_limit(&self, name: &str, pause: PauseFor) -> Result<LimiterInfo> {
        validate::name("name", name)?;
        let (field, given, end) = match &pause {
            PauseFor::UntilMs(ms) => {
                if *ms < 0 {
                    return Err(Error::invalid_at(
                        "until_ms",
                        format!("is {ms}: must be a time in ms since the epoch, 0 or more"),
                    ));
                }
                ("until_ms", ms.to_string(), PauseEnd::At(ms.saturating_mul(1000)))
            }
            PauseFor::RetryAfter(v) => {
                ("retry_after", format!("{:?}", crate::retry_after::shown(v)), crate::retry_after::parse(v)?)
            }
        };
        let (decision, stored) = self.backend().pause_limiter(name, end).await?;
        if let Pause::TooFar(ahead) = decision {
            return Err(Error::invalid_at(
                field,
                format!(
                    "is {given}: a pause of {} ms; the limit is {} ms (365 days)",
                    ahead / 1000,
                    MAX_PAUSE_US / 1000
                ),
            ));
        }
        Ok(info_of(name, stored))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inspect_shows_the_time_until_full() {
        let i = info_of("x", Stored { now_us: 1_000, tat_us: Some(501_000), pause_us: None });
        assert_eq!((i.active, i.reset_after_ms, i.read_at, i.paused_until), (true, 500.0, 1.0, None));
        let i = info_of("x", Stored { now_us: 1_000, tat_us: None, pause_us: None });
        assert_eq!((i.active, i.reset_after_ms), (false, 0.0));
    }

    #[test]
    fn inspect_shows_the_pause_end() {
        let i = info_of("x", Stored { now_us: 1_000, tat_us: Some(501_000), pause_us: Some(2_001_000) });
        assert_eq!(
            (i.active, i.reset_after_ms, i.paused_until, i.pause_ms),
            (true, 2000.0, Some(2001.0), 2000.0)
        );
        // A pause end reached is no pause.
        let i = info_of("x", Stored { now_us: 1_000, tat_us: None, pause_us: Some(1_000) });
        assert_eq!((i.active, i.paused_until, i.pause_ms), (false, None, 0.0));
    }

    #[test]
    fn a_pause_is_one_of_until_and_retry_after() {
        assert_eq!(PauseFor::one_of(Some(5), None), Ok(PauseFor::UntilMs(5)));
        assert_eq!(PauseFor::one_of(None, Some("7".into())), Ok(PauseFor::RetryAfter("7".into())));
        for (until, retry) in [(Some(5), Some("7".to_string())), (None, None)] {
            let e = PauseFor::one_of(until, retry).unwrap_err();
            assert_eq!(e.field.map(|f| f.to_string()).as_deref(), Some("retry_after"));
        }
    }

    #[test]
    fn options_are_checked() {
        let o = |limit, cost| LimitOptions { limit, cost: Some(cost), ..Default::default() };
        assert!(rule_of(&o(0, 1)).unwrap_err().to_string().contains("limit"));
        assert!(rule_of(&o(2, 2)).unwrap_err().to_string().contains("burst"));
        let (rule, cost, wait) = rule_of(&o(3, 1)).unwrap();
        assert_eq!((rule.interval_us, rule.burst, cost, wait), (333_334, 1, 1, 0));
    }
}
