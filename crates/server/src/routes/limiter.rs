//! Rate Limiter routes: `/v1/limiter/*`.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowguard_core::limiter::{LimitOptions, LimitResult, LimiterInfo, PauseFor};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::app::App;
use crate::body::{opt_ms, opt_u64, Body};
use crate::error::Busy;
use crate::error::{busy, ApiResult};
use crate::openapi::Errors;

/// The code of a refused take (429).
pub const RATE_LIMITED: &str = "ERR_RATE_LIMITED";

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TakeIn {
    #[schema(schema_with = crate::openapi::name)]
    name: String,
    /// Tokens per period.
    #[schema(required = true)]
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    limit: Option<u64>,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    period_ms: Option<Duration>,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    burst: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    cost: Option<u64>,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    max_wait_ms: Option<Duration>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = RateLimitResult)]
pub struct TakeOut {
    name: String,
    allowed: bool,
    cost: u64,
    remaining: u64,
    retry_after_ms: f64,
    reset_after_ms: f64,
    wait_ms: f64,
    slots_ms: Vec<f64>,
    decided_at: f64,
}

fn options(b: &TakeIn) -> ApiResult<LimitOptions> {
    let Some(limit) = b.limit else {
        return Err(crate::error::ApiError::invalid("limit", "is required: tokens per period"));
    };
    Ok(LimitOptions { limit, period: b.period_ms, burst: b.burst, cost: b.cost, max_wait: b.max_wait_ms })
}

fn answer(r: LimitResult) -> Response {
    let out = TakeOut {
        name: r.name,
        allowed: r.allowed,
        cost: r.cost,
        remaining: r.remaining,
        retry_after_ms: r.retry_after_ms,
        reset_after_ms: r.reset_after_ms,
        wait_ms: r.wait_ms,
        slots_ms: r.slots_ms,
        decided_at: r.decided_at,
    };
    if out.allowed {
        Json(out).into_response()
    } else {
        busy(StatusCode::TOO_MANY_REQUESTS, RATE_LIMITED, &out)
    }
}

/// Take tokens of a rate limiter (GCRA); with maxWaitMs, reserve them (slotsMs says when each is due).
///
/// Takes tokens (GCRA); with `maxWaitMs`, reserves them and says when each is due. Never waits:
/// 200, or 429 `ERR_RATE_LIMITED` with `retryAfterMs`.
#[utoipa::path(
    post,
    path = "/v1/limiter/take",
    tag = "limiter",
    operation_id = "limiter_take",
    request_body(content = inline(TakeIn)),
    responses(
        (status = 200, description = "allowed", body = TakeOut),
        (status = 429, description = "ERR_RATE_LIMITED: over the rate (retryAfterMs says when to try again)", body = Busy<TakeOut>),
        Errors
    )
)]
pub async fn take(State(app): State<App>, Body(b): Body<TakeIn>) -> ApiResult<Response> {
    let opts = options(&b)?;
    Ok(answer(app.client.rate_limit(&b.name, opts).await?))
}

/// Like take, then wait until the reserved tokens are due (maxWaitMs, at most the server's longest wait).
///
/// Like `take`, then waits until the reserved tokens are due (`maxWaitMs`, at most the server's
/// longest wait): 200 when the caller may go ahead, or 429 at once.
#[utoipa::path(
    post,
    path = "/v1/limiter/wait",
    tag = "limiter",
    operation_id = "limiter_wait",
    request_body(content = inline(TakeIn)),
    responses(
        (status = 200, description = "allowed", body = TakeOut),
        (status = 429, description = "ERR_RATE_LIMITED: the tokens are not due within maxWaitMs", body = Busy<TakeOut>),
        Errors
    )
)]
pub async fn wait(State(app): State<App>, Body(b): Body<TakeIn>) -> ApiResult<Response> {
    if let Some(w) = b.max_wait_ms {
        app.limits.wait("maxWaitMs", w)?;
    }
    let opts = options(&b)?;
    Ok(answer(app.client.rate_limit_wait(&b.name, opts).await?))
}

/// A `Retry-After` value as the upstream sent it: delta-seconds (a number or a string) or an
/// HTTP-date.
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
pub enum RetryAfterIn {
    Seconds(f64),
    Text(String),
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PauseIn {
    #[schema(schema_with = crate::openapi::name)]
    name: String,
    /// Pause until this time, ms since the epoch (a time in the past pauses nothing). Give this
    /// or retryAfter.
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    until_ms: Option<u64>,
    /// An HTTP `Retry-After` value as received: delta-seconds (a whole number of seconds, as a
    /// number or a string) or an HTTP-date (IMF-fixdate, RFC 850 or asctime). A date in the past
    /// pauses nothing. Give this or untilMs.
    retry_after: Option<RetryAfterIn>,
}

/// A rate limiter as read: in use or not, when it is full again, when its pause ends.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = RateLimiterInfo)]
pub struct InfoOut {
    name: String,
    active: bool,
    reset_after_ms: f64,
    /// While paused: when the pause ends, ms since the epoch on the backend's clock.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    paused_until: Option<f64>,
    pause_ms: f64,
    read_at: f64,
}

impl From<LimiterInfo> for InfoOut {
    fn from(i: LimiterInfo) -> InfoOut {
        InfoOut {
            name: i.name,
            active: i.active,
            reset_after_ms: i.reset_after_ms,
            paused_until: i.paused_until,
            pause_ms: i.pause_ms,
            read_at: i.read_at,
        }
    }
}

/// Pause a rate limiter until an upstream's Retry-After (as BullMQ's worker.rateLimit(ms)).
///
/// Every caller of the limiter is refused (429 `ERR_RATE_LIMITED`, `retryAfterMs` up to the
/// pause end) until the pause ends; `wait` waits for its end within `maxWaitMs`, else answers 429
/// at once. A pause never shortens a longer one; at most 365 days. Answers the limiter as read
/// after the pause.
#[utoipa::path(
    post,
    path = "/v1/limiter/pause",
    tag = "limiter",
    operation_id = "limiter_pause",
    request_body(content = inline(PauseIn)),
    responses(
        (status = 200, description = "the limiter after the pause", body = InfoOut),
        Errors
    )
)]
pub async fn pause(State(app): State<App>, Body(b): Body<PauseIn>) -> ApiResult<Json<InfoOut>> {
    let retry_after = b.retry_after.map(|v| match v {
        RetryAfterIn::Seconds(n) => n.to_string(),
        RetryAfterIn::Text(t) => t,
    });
    let pause = PauseFor::one_of(b.until_ms.map(|ms| ms.min(i64::MAX as u64) as i64), retry_after)?;
    Ok(Json(app.client.pause_rate_limit(&b.name, pause).await?.into()))
}
