//! Semaphore routes: `/v1/semaphore/*`. Release and extend answer as the lock's do.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowguard_core::semaphore::PermitOptions;
use serde::{Deserialize, Serialize};

use super::lock::{ExtendResult, OwnedIn, ReleaseResult};
use crate::app::App;
use crate::body::{ms, opt_u64, Body};
use crate::error::{busy, ApiError, ApiResult};

/// The code of an acquire that found every permit held (409).
pub const SEMAPHORE_FULL: &str = "ERR_SEMAPHORE_FULL";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcquireIn {
    name: String,
    #[serde(default, deserialize_with = "opt_u64")]
    permits: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    timeout_ms: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    wait_ms: Option<u64>,
    label: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermitOut {
    name: String,
    acquired: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    fence: u64,
    holders: u64,
    remaining_ms: u64,
    waited_ms: u64,
    attempts: u32,
}

/// Takes one of `permits` permits: 200 with the owner token and fence, or 409
/// `ERR_SEMAPHORE_FULL` when all are still held after `waitMs`.
pub async fn acquire(State(app): State<App>, Body(b): Body<AcquireIn>) -> ApiResult<Response> {
    if let Some(w) = b.wait_ms {
        app.limits.wait("waitMs", w)?;
    }
    let Some(permits) = b.permits else {
        return Err(ApiError::invalid("permits", "is required: how many holders at once"));
    };
    let opts = PermitOptions { permits, timeout: ms(b.timeout_ms), wait: ms(b.wait_ms), label: b.label };
    let r = app.client.acquire_permit(&b.name, opts).await?;
    let out = PermitOut {
        name: r.name,
        acquired: r.acquired,
        owner: r.owner,
        fence: r.fence,
        holders: r.holders,
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

/// Releases the permit of `owner`. Always 200 (`not_held` when it has none).
pub async fn release(State(app): State<App>, Body(b): Body<OwnedIn>) -> ApiResult<Json<ReleaseResult>> {
    if b.timeout_ms.is_some() {
        return Err(ApiError::invalid("timeoutMs", "is for extend, not release"));
    }
    Ok(Json(app.client.release_permit(&b.name, &b.owner).await?.into()))
}

/// Extends a permit's lease: 200, or 412 `ERR_NOT_OWNER` when `owner` holds no permit now.
pub async fn extend(State(app): State<App>, Body(b): Body<OwnedIn>) -> ApiResult<Response> {
    let out: ExtendResult = app.client.extend_permit(&b.name, &b.owner, ms(b.timeout_ms)).await?.into();
    Ok(if out.extended {
        Json(out).into_response()
    } else {
        busy(StatusCode::PRECONDITION_FAILED, flowguard_core::ErrorCode::NotOwner.as_str(), &out)
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NameIn {
    name: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HolderOut {
    fence: u64,
    remaining_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SemaphoreOut {
    name: String,
    holders: Vec<HolderOut>,
    fence: u64,
}

impl From<flowguard_core::semaphore::SemaphoreInfo> for SemaphoreOut {
    fn from(i: flowguard_core::semaphore::SemaphoreInfo) -> Self {
        SemaphoreOut {
            name: i.name,
            holders: i
                .holders
                .into_iter()
                .map(|h| HolderOut { fence: h.fence, remaining_ms: h.remaining_ms, label: h.label })
                .collect(),
            fence: i.fence,
        }
    }
}

pub async fn get(State(app): State<App>, Body(b): Body<NameIn>) -> ApiResult<Json<SemaphoreOut>> {
    Ok(Json(app.client.get_semaphore(&b.name).await?.into()))
}
