//! Rate Limiter methods of `Flowguard`.

use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;

use super::client::Flowguard;
use super::from_js::{js_input, opt_ms, signed, whole, Arg, Field};
use super::promise;
use flowguard_core::limiter::{self as core, LimitOptions, PauseFor};

/// Options of `rateLimit` and `waitRateLimit`: the limiter's rule (callers of one name should
/// give the same) and what this call takes.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct RateLimitOptions {
    /// Tokens per period (1 to 1000000). Required.
    pub limit: f64,
    /// The period in ms. Default 1000.
    pub period_ms: Option<f64>,
    /// Tokens that may go at once after an idle time. Default 1: tokens are evenly spaced,
    /// `periodMs / limit` apart, and no window of `periodMs` holds more than `limit`. With a
    /// burst `b`, a window of `periodMs` holds at most `b + limit - 1`.
    pub burst: Option<f64>,
    /// Tokens this call takes. Default 1. At most `burst`, unless `maxWaitMs` is given.
    pub cost: Option<f64>,
    /// Reserve the tokens when the last of them is due within this many ms (default 0: only
    /// when allowed now). A reservation is final: the tokens count as taken at their slot times.
    pub max_wait_ms: Option<f64>,
}

js_input!(RateLimitOptions {
    limit = "limit",
    period_ms = "periodMs",
    burst = "burst",
    cost = "cost",
    max_wait_ms = "maxWaitMs",
});

#[napi(object)]
pub struct RateLimitResult {
    pub name: String,
    /// Whether the tokens were taken (now, or reserved for the times in `slotsMs`).
    pub allowed: bool,
    pub cost: u32,
    /// Tokens that could be taken at once now, after this call.
    pub remaining: f64,
    /// When not allowed: ms until the same call would be allowed without waiting.
    pub retry_after_ms: f64,
    /// Ms until the limiter is full again (its whole burst available), if nothing else is taken.
    pub reset_after_ms: f64,
    /// When allowed: ms from the decision until the last token is due (0: all are due now).
    pub wait_ms: f64,
    /// When allowed: for each token, ms from the decision until it is due, in order.
    pub slots_ms: Vec<f64>,
    /// The time of the decision, ms since the epoch on the backend's clock (Redis: its TIME).
    pub decided_at: f64,
}

fn limit_opts(o: RateLimitOptions) -> flowguard_core::Result<LimitOptions> {
    let at = |name| Field("options", name);
    let limit = whole(at("limit"), Some(o.limit))?.unwrap_or(0);
    Ok(LimitOptions {
        limit,
        period: opt_ms(at("periodMs"), o.period_ms)?,
        burst: whole(at("burst"), o.burst)?,
        cost: whole(at("cost"), o.cost)?,
        max_wait: opt_ms(at("maxWaitMs"), o.max_wait_ms)?,
    })
}

fn to_js(r: core::LimitResult) -> RateLimitResult {
    RateLimitResult {
        name: r.name,
        allowed: r.allowed,
        cost: r.cost as u32,
        remaining: r.remaining as f64,
        retry_after_ms: r.retry_after_ms,
        reset_after_ms: r.reset_after_ms,
        wait_ms: r.wait_ms,
        slots_ms: r.slots_ms,
        decided_at: r.decided_at,
    }
}

/// Options of `pauseRateLimit`: when the pause ends, exactly one of `untilMs` and `retryAfter`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct PauseRateLimitOptions {
    /// Pause until this time, ms since the epoch (a time in the past pauses nothing).
    pub until_ms: Option<f64>,
    /// An HTTP `Retry-After` value as received: delta-seconds (a whole number of seconds, as a
    /// string or a number) or an HTTP-date (IMF-fixdate, or the obsolete RFC 850 and asctime
    /// forms). A date in the past pauses nothing.
    pub retry_after: Option<Either<f64, String>>,
}

js_input!(PauseRateLimitOptions { until_ms = "untilMs", retry_after = "retryAfter" });

/// A rate limiter as read (`pauseRateLimit` answers with it after the pause).
#[napi(object)]
pub struct RateLimiterInfo {
    pub name: String,
    /// Whether the limiter is not full again yet (tokens taken recently) or is paused.
    pub active: bool,
    /// Ms until the limiter is full again (its whole burst available), if nothing else is taken;
    /// during a pause at least until its end.
    pub reset_after_ms: f64,
    /// While paused: when the pause ends, ms since the epoch on the backend's clock (Redis: its
    /// TIME); absent when not paused.
    pub paused_until: Option<f64>,
    /// Ms until the pause ends (0 when not paused).
    pub pause_ms: f64,
    /// The time of the read, ms since the epoch on the backend's clock.
    pub read_at: f64,
}

fn pause_of(o: PauseRateLimitOptions) -> flowguard_core::Result<PauseFor> {
    let until_ms = signed(Field("options", "untilMs"), o.until_ms)?;
    // A number of seconds is read as the header's text would be: "1.5" or "-1" is refused.
    let retry_after = o.retry_after.map(|v| match v {
        Either::A(secs) => secs.to_string(),
        Either::B(text) => text,
    });
    PauseFor::one_of(until_ms, retry_after)
}

fn info_to_js(i: core::LimiterInfo) -> RateLimiterInfo {
    RateLimiterInfo {
        name: i.name,
        active: i.active,
        reset_after_ms: i.reset_after_ms,
        paused_until: i.paused_until,
        pause_ms: i.pause_ms,
        read_at: i.read_at,
    }
}

/// `rateLimit` (`wait` false) or `waitRateLimit`.
fn take<'e>(
    env: &'e Env,
    client: &flowguard_core::Client,
    name: Arg<'e, String>,
    options: Arg<'e, RateLimitOptions>,
    wait: bool,
) -> Result<PromiseRaw<'e, RateLimitResult>> {
    let parsed = (|| Ok((name.get("name")?, limit_opts(options.get("options")?)?)))();
    let client = client.clone();
    promise(env, async move {
        let (name, opts) = parsed?;
        let r = if wait {
            client.rate_limit_wait(&name, opts).await?
        } else {
            client.rate_limit(&name, opts).await?
        };
        Ok(to_js(r))
    })
}

#[napi]
impl Flowguard {
    /// Takes tokens of rate limiter `name` (GCRA): allowed or not, with the time to wait and the
    /// tokens left. With `maxWaitMs`, reserves them when they are due within it and says when
    /// (`waitMs`, `slotsMs`); never waits itself. A refusal is a result, not an error.
    #[napi]
    pub fn rate_limit<'e>(
        &self,
        env: &'e Env,
        name: Arg<'e, String>,
        options: Arg<'e, RateLimitOptions>,
    ) -> Result<PromiseRaw<'e, RateLimitResult>> {
        take(env, &self.client, name, options, false)
    }

    /// Like `rateLimit`, then waits until the reserved tokens are due: resolves when the caller
    /// may go ahead (`allowed: true`), or at once with `allowed: false` when they are not due
    /// within `maxWaitMs`.
    #[napi]
    pub fn wait_rate_limit<'e>(
        &self,
        env: &'e Env,
        name: Arg<'e, String>,
        options: Arg<'e, RateLimitOptions>,
    ) -> Result<PromiseRaw<'e, RateLimitResult>> {
        take(env, &self.client, name, options, true)
    }

    /// Pauses rate limiter `name` for every process sharing it, as BullMQ's
    /// `worker.rateLimit(ms)` does: obey an upstream's 429 with its `Retry-After`. Until the
    /// pause ends, `rateLimit` is refused with `retryAfterMs` up to its end, and `waitRateLimit`
    /// waits for its end when that is within `maxWaitMs` (else it is refused at once). A pause
    /// never shortens a longer one; at most 365 days. Resolves with the limiter as read after.
    #[napi]
    pub fn pause_rate_limit<'e>(
        &self,
        env: &'e Env,
        name: Arg<'e, String>,
        options: Arg<'e, PauseRateLimitOptions>,
    ) -> Result<PromiseRaw<'e, RateLimiterInfo>> {
        let parsed = (|| Ok((name.get("name")?, pause_of(options.get("options")?)?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (name, pause) = parsed?;
            Ok(info_to_js(client.pause_rate_limit(&name, pause).await?))
        })
    }

    /// Reads rate limiter `name` without taking tokens: whether it is in use, when it is full
    /// again, and when its pause ends.
    #[napi]
    pub fn get_rate_limit<'e>(
        &self,
        env: &'e Env,
        name: Arg<'e, String>,
    ) -> Result<PromiseRaw<'e, RateLimiterInfo>> {
        let parsed = name.get("name");
        let client = self.client.clone();
        promise(env, async move { Ok(info_to_js(client.get_limiter(&parsed?).await?)) })
    }
}
