//! Concurrency Lock routes: `/v1/lock/*`.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowguard_core::lock::{self as core, AcquireOptions};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::app::App;
use crate::body::{opt_ms, Body};
use crate::error::Busy;
use crate::error::{busy, ApiResult, LOCK_HELD};
use crate::openapi::Errors;

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcquireIn {
    #[schema(schema_with = crate::openapi::name)]
    name: String,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    timeout_ms: Option<Duration>,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    wait_ms: Option<Duration>,
    #[schema(schema_with = crate::openapi::text)]
    label: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LockResult {
    name: String,
    acquired: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::openapi::owner)]
    owner: Option<String>,
    fence: u64,
    remaining_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    holder: Option<String>,
    waited_ms: u64,
    attempts: u32,
}

/// Acquire a lock, waiting up to waitMs.
///
/// Acquires a lock: 200 with the owner token and fence, or 409 `ERR_LOCK_HELD` with the holder,
/// its `remainingMs` and fence when it is still held after `waitMs`.
#[utoipa::path(
    post,
    path = "/v1/lock/acquire",
    tag = "lock",
    operation_id = "lock_acquire",
    request_body(content = inline(AcquireIn)),
    responses(
        (status = 200, description = "acquired", body = LockResult),
        (status = 409, description = "ERR_LOCK_HELD: held by another after waitMs", body = Busy<LockResult>),
        Errors
    )
)]
pub async fn acquire(State(app): State<App>, Body(b): Body<AcquireIn>) -> ApiResult<Response> {
    if let Some(w) = b.wait_ms {
        app.limits.wait("waitMs", w)?;
    }
    let opts = AcquireOptions { timeout: b.timeout_ms, wait: b.wait_ms, label: b.label };
    let r: core::LockResult = app.client.acquire_lock(&b.name, opts).await?;
    let out = LockResult {
        name: r.name,
        acquired: r.acquired,
        owner: r.owner,
        fence: r.fence,
        remaining_ms: r.remaining_ms,
        holder: r.holder,
        waited_ms: r.waited_ms,
        attempts: r.attempts,
    };
    Ok(if out.acquired { Json(out).into_response() } else { busy(StatusCode::CONFLICT, LOCK_HELD, &out) })
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OwnedIn {
    #[schema(schema_with = crate::openapi::name)]
    pub(super) name: String,
    #[schema(schema_with = crate::openapi::owner)]
    pub(super) owner: String,
    /// The new lease, from now (extend only: release refuses it).
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    pub(super) timeout_ms: Option<Duration>,
}

#[derive(Serialize, ToSchema)]
pub struct ReleaseResult {
    released: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::openapi::refusal)]
    reason: Option<&'static str>,
}

/// Release a lock held with owner.
///
/// Releases a lock held with `owner`. Always 200: a resent release finds the lock `not_held`
/// (or held by another: `not_owner`), and changes nothing.
/// `timeoutMs` is refused (it is for extend).
#[utoipa::path(
    post,
    path = "/v1/lock/release",
    tag = "lock",
    operation_id = "lock_release",
    request_body(content = inline(OwnedIn)),
    responses(
        (status = 200, description = "done", body = ReleaseResult),
        Errors
    )
)]
pub async fn release(State(app): State<App>, Body(b): Body<OwnedIn>) -> ApiResult<Json<ReleaseResult>> {
    if b.timeout_ms.is_some() {
        return Err(crate::error::ApiError::invalid("timeoutMs", "is for extend, not release"));
    }
    Ok(Json(app.client.release_lock(&b.name, &b.owner).await?.into()))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FenceIn {
    #[schema(schema_with = crate::openapi::name)]
    pub(super) name: String,
    /// The fencing token of the grant to release, as `/v1/lock/get` or `/v1/lock/list` shows it
    /// (of the permit to release, as `/v1/semaphore/get` shows it).
    #[schema(schema_with = crate::openapi::whole)]
    pub(super) fence: u64,
}

/// Release a lock by its fence, without the owner token.
///
/// For an operator freeing a lock a crashed run holds (the dashboard's **Release…**): releases the
/// lock if the grant holding it now has fencing token `fence`. Always 200: a lock taken again
/// since is left alone (`released: false`, `not_owner`), a free one is `not_held`. The old
/// holder's next release or extension is refused (`not_held`).
#[utoipa::path(
    post,
    path = "/v1/lock/forceRelease",
    tag = "lock",
    operation_id = "lock_forceRelease",
    request_body(content = inline(FenceIn)),
    responses(
        (status = 200, description = "done", body = ReleaseResult),
        Errors
    )
)]
pub async fn force_release(State(app): State<App>, Body(b): Body<FenceIn>) -> ApiResult<Json<ReleaseResult>> {
    Ok(Json(app.client.force_release_lock(&b.name, b.fence).await?.into()))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtendResult {
    pub(super) extended: bool,
    remaining_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::openapi::refusal)]
    reason: Option<&'static str>,
}

impl From<core::ReleaseResult> for ReleaseResult {
    fn from(r: core::ReleaseResult) -> Self {
        ReleaseResult { released: r.released, reason: r.reason.map(|x| x.as_str()) }
    }
}

impl From<core::ExtendResult> for ExtendResult {
    fn from(r: core::ExtendResult) -> Self {
        ExtendResult {
            extended: r.extended,
            remaining_ms: r.remaining_ms,
            reason: r.reason.map(|x| x.as_str()),
        }
    }
}

/// Extend a lock's lease to timeoutMs from now.
///
/// Extends a lock's lease to `timeoutMs` from now: 200, or 412 `ERR_NOT_OWNER` (with the result)
/// when the lock is no longer held with this owner token.
#[utoipa::path(
    post,
    path = "/v1/lock/extend",
    tag = "lock",
    operation_id = "lock_extend",
    request_body(content = inline(OwnedIn)),
    responses(
        (status = 200, description = "extended", body = ExtendResult),
        (status = 412, description = "ERR_NOT_OWNER: the lock is not held with this owner token", body = Busy<ExtendResult>),
        Errors
    )
)]
pub async fn extend(State(app): State<App>, Body(b): Body<OwnedIn>) -> ApiResult<Response> {
    let out: ExtendResult = app.client.extend_lock(&b.name, &b.owner, b.timeout_ms).await?.into();
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
pub struct LockInfo {
    name: String,
    locked: bool,
    remaining_ms: u64,
    fence: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    holder: Option<String>,
}

/// Inspect a lock.
#[utoipa::path(
    post,
    path = "/v1/lock/get",
    tag = "lock",
    operation_id = "lock_get",
    request_body(content = inline(NameIn)),
    responses(
        (status = 200, description = "done", body = LockInfo),
        Errors
    )
)]
pub async fn get(State(app): State<App>, Body(b): Body<NameIn>) -> ApiResult<Json<LockInfo>> {
    Ok(Json(app.client.get_lock(&b.name).await?.into()))
}

impl From<core::LockInfo> for LockInfo {
    fn from(i: core::LockInfo) -> Self {
        LockInfo {
            name: i.name,
            locked: i.locked,
            remaining_ms: i.remaining_ms,
            fence: i.fence,
            holder: i.holder,
        }
    }
}
