//! Rate Limiter routes: `/v1/limiter/*`.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowguard_core::limiter::{LimitOptions, LimitResult};
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
