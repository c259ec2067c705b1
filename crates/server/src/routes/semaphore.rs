//! Semaphore routes: `/v1/semaphore/*`. Release and extend answer as the lock's do.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowguard_core::semaphore::PermitOptions;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::lock::{ExtendResult, FenceIn, OwnedIn, ReleaseResult};
use crate::app::App;
use crate::body::{opt_ms, opt_u64, Body};
use crate::error::Busy;
use crate::error::{busy, ApiError, ApiResult};
use crate::openapi::Errors;

/// The code of an acquire that found every permit held (409).
pub const SEMAPHORE_FULL: &str = "ERR_SEMAPHORE_FULL";

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcquireIn {
    #[schema(schema_with = crate::openapi::name)]
    name: String,
    /// How many holders at once.
    #[schema(required = true)]
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    permits: Option<u64>,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    timeout_ms: Option<Duration>,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    wait_ms: Option<Duration>,
    #[schema(schema_with = crate::openapi::text)]
    label: Option<String>,
    /// The key this permit counts toward (e.g. a customer id); with `perKey`, both or neither.
    /// Taken only if both the total (`permits`) and the key's count (`perKey`) allow it.
    #[serde(default)]
    #[schema(schema_with = crate::openapi::name)]
    key: Option<String>,
    /// The most holders of `key` at once (1 to 1000).
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    per_key: Option<u64>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PermitResult)]
pub struct PermitOut {
    name: String,
    acquired: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::openapi::owner)]
    owner: Option<String>,
    fence: u64,
    holders: u64,
    /// With a key: holders of that key now (ours included when acquired); 0 without one.
    key_holders: u64,
    remaining_ms: u64,
    waited_ms: u64,
    attempts: u32,
}

/// Take one of permits permits, waiting up to waitMs.
///
/// Takes one of `permits` permits: 200 with the owner token and fence, or 409
/// `ERR_SEMAPHORE_FULL` when all are still held after `waitMs`.
#[utoipa::path(
    post,
    path = "/v1/semaphore/acquire",
    tag = "semaphore",
    operation_id = "semaphore_acquire",
    request_body(content = inline(AcquireIn)),
    responses(
        (status = 200, description = "acquired", body = PermitOut),
        (status = 409, description = "ERR_SEMAPHORE_FULL: every permit held after waitMs", body = Busy<PermitOut>),
        Errors
    )
)]
pub async fn acquire(State(app): State<App>, Body(b): Body<AcquireIn>) -> ApiResult<Response> {
    if let Some(w) = b.wait_ms {
        app.limits.wait("waitMs", w)?;
    }
    let Some(permits) = b.permits else {
        return Err(ApiError::invalid("permits", "is required: how many holders at once"));
    };
    let opts = PermitOptions {
        permits,
        timeout: b.timeout_ms,
        wait: b.wait_ms,
        label: b.label,
        key: b.key,
        per_key: b.per_key,
    };
    let r = app.client.acquire_permit(&b.name, opts).await?;
    let out = PermitOut {
        name: r.name,
        acquired: r.acquired,
        owner: r.owner,
        fence: r.fence,
        holders: r.holders,
        key_holders: r.key_holders,
        remaining_ms: r.remaining_ms,
        waited_ms: r.waited_ms,
        attempts: r.attempts,
    };
    Ok(if out.acquired {
        Json(out).into_response()
    } else {
        busy(StatusCode::CONFLICT, SEMAPHORE_FULL, &out)
    })
}

/// Release the permit of owner.
///
/// Releases the permit of `owner`. Always 200 (`not_held` when it has none).
/// `timeoutMs` is refused (it is for extend).
#[utoipa::path(
    post,
    path = "/v1/semaphore/release",
    tag = "semaphore",
    operation_id = "semaphore_release",
    request_body(content = inline(OwnedIn)),
    responses(
        (status = 200, description = "done", body = ReleaseResult),
        Errors
    )
)]
pub async fn release(State(app): State<App>, Body(b): Body<OwnedIn>) -> ApiResult<Json<ReleaseResult>> {
    if b.timeout_ms.is_some() {
        return Err(ApiError::invalid("timeoutMs", "is for extend, not release"));
    }
    Ok(Json(app.client.release_permit(&b.name, &b.owner).await?.into()))
}

/// Release a permit by its fence, without the owner token.
///
/// For an operator freeing a permit a crashed run holds (the dashboard's **Release…**): releases
/// the live permit with fencing token `fence`. Always 200: `not_held` when no live permit has that
/// fence. The old holder's next release or extension is refused (`not_held`).
#[utoipa::path(
    post,
    path = "/v1/semaphore/forceRelease",
    tag = "semaphore",
    operation_id = "semaphore_forceRelease",
    request_body(content = inline(FenceIn)),
    responses(
        (status = 200, description = "done", body = ReleaseResult),
        Errors
    )
)]
pub async fn force_release(State(app): State<App>, Body(b): Body<FenceIn>) -> ApiResult<Json<ReleaseResult>> {
    Ok(Json(app.client.force_release_permit(&b.name, b.fence).await?.into()))
}

/// Extend a permit's lease to timeoutMs from now.
///
/// Extends a permit's lease: 200, or 412 `ERR_NOT_OWNER` when `owner` holds no permit now.
#[utoipa::path(
    post,
    path = "/v1/semaphore/extend",
    tag = "semaphore",
    operation_id = "semaphore_extend",
    request_body(content = inline(OwnedIn)),
    responses(
        (status = 200, description = "extended", body = ExtendResult),
        (status = 412, description = "ERR_NOT_OWNER: owner holds no permit now", body = Busy<ExtendResult>),
        Errors
    )
)]
pub async fn extend(State(app): State<App>, Body(b): Body<OwnedIn>) -> ApiResult<Response> {
    let out: ExtendResult = app.client.extend_permit(&b.name, &b.owner, b.timeout_ms).await?.into();
    Ok(if out.extended {
        Json(out).into_response()
    } else {
        busy(StatusCode::PRECONDITION_FAILED, flowguard_core::ErrorCode::NotOwner.as_str(), &out)
    })
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NameIn {
    #[schema(schema_with = crate::openapi::name)]
    name: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HolderOut {
    fence: u64,
    remaining_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    label: Option<String>,
    /// The key the permit was taken under (absent: without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    key: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = SemaphoreInfo)]
pub struct SemaphoreOut {
    name: String,
    holders: Vec<HolderOut>,
    fence: u64,
    /// Live holders per key (holders without a key are not counted here).
    keys: std::collections::BTreeMap<String, u64>,
}

impl From<flowguard_core::semaphore::SemaphoreInfo> for SemaphoreOut {
    fn from(i: flowguard_core::semaphore::SemaphoreInfo) -> Self {
        let keys = i.key_counts().into_iter().collect();
        SemaphoreOut {
            name: i.name,
            holders: i
                .holders
                .into_iter()
                .map(|h| HolderOut {
                    fence: h.fence,
                    remaining_ms: h.remaining_ms,
                    label: h.label,
                    key: h.key,
                })
                .collect(),
            fence: i.fence,
            keys,
        }
    }
}

/// The live holders of a semaphore (fence, remainingMs, label, key), its last fencing token and
/// the live holders per key.
#[utoipa::path(
    post,
    path = "/v1/semaphore/get",
    tag = "semaphore",
    operation_id = "semaphore_get",
    request_body(content = inline(NameIn)),
    responses(
        (status = 200, description = "done", body = SemaphoreOut),
        Errors
    )
)]
pub async fn get(State(app): State<App>, Body(b): Body<NameIn>) -> ApiResult<Json<SemaphoreOut>> {
    Ok(Json(app.client.get_semaphore(&b.name).await?.into()))
}
