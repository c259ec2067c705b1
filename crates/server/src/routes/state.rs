//! Job State routes: `/v1/state/*`. Values are plain JSON in the body, passed to the core as
//! their exact text (no number is rounded on the way).

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowguard_core::state::{KeyClaim, SetOptions, StateValue};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::app::App;
use crate::body::{opt_bool, opt_i64, opt_ms, opt_u64, Body};
use crate::error::Busy;
use crate::error::{busy, ApiError, ApiResult, KEY_PENDING};
use crate::openapi::Errors;
use crate::openapi::NotOwner;

fn raw(json: String) -> ApiResult<Box<RawValue>> {
    RawValue::from_string(json).map_err(|e| {
        ApiError::from(flowguard_core::Error::internal(format!("a stored value is not JSON: {e}")))
    })
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyIn {
    #[schema(schema_with = crate::openapi::name)]
    key: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeysIn {
    #[schema(schema_with = crate::openapi::names)]
    keys: Vec<String>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = StateEntry)]
pub struct Entry {
    key: String,
    found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    value: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    expires_at: Option<i64>,
}

fn entry(key: String, v: Option<StateValue>) -> ApiResult<Entry> {
    Ok(match v {
        Some(v) => Entry { key, found: true, value: Some(raw(v.json)?), expires_at: v.expires_at },
        None => Entry { key, found: false, value: None, expires_at: None },
    })
}

/// Read a value.
#[utoipa::path(
    post,
    path = "/v1/state/get",
    tag = "state",
    operation_id = "state_get",
    request_body(content = inline(KeyIn)),
    responses(
        (status = 200, description = "done", body = Entry),
        Errors
    )
)]
pub async fn get(State(app): State<App>, Body(b): Body<KeyIn>) -> ApiResult<Json<Entry>> {
    let v = app.client.get_state(vec![b.key.clone()]).await?.pop().flatten();
    Ok(Json(entry(b.key, v)?))
}

/// Read many values.
#[utoipa::path(
    post,
    path = "/v1/state/getMany",
    tag = "state",
    operation_id = "state_getMany",
    request_body(content = inline(KeysIn)),
    responses(
        (status = 200, description = "done", body = Vec<Entry>),
        Errors
    )
)]
pub async fn get_many(State(app): State<App>, Body(b): Body<KeysIn>) -> ApiResult<Json<Vec<Entry>>> {
    app.limits.batch("keys", b.keys.len())?;
    let values = app.client.get_state(b.keys.clone()).await?;
    Ok(Json(b.keys.into_iter().zip(values).map(|(k, v)| entry(k, v)).collect::<ApiResult<_>>()?))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetIn {
    #[schema(schema_with = crate::openapi::name)]
    key: String,
    #[schema(value_type = Value)]
    value: Box<RawValue>,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    ttl_ms: Option<Duration>,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::epoch_ms)]
    expires_at: Option<u64>,
    #[serde(default, deserialize_with = "opt_bool")]
    #[schema(schema_with = crate::openapi::flag)]
    if_absent: Option<bool>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetResult {
    written: bool,
    #[schema(value_type = Value)]
    value: Box<RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    expires_at: Option<i64>,
}

/// Write a JSON value with ttlMs or expiresAt, or only when absent.
///
/// Writes a value. Safe to resend (the same value is written again; with `ifAbsent` the second
/// call reports `written: false` and the value kept).
#[utoipa::path(
    post,
    path = "/v1/state/set",
    tag = "state",
    operation_id = "state_set",
    request_body(content = inline(SetIn)),
    responses(
        (status = 200, description = "done", body = SetResult),
        Errors
    )
)]
pub async fn set(State(app): State<App>, Body(b): Body<SetIn>) -> ApiResult<Json<SetResult>> {
    let opts =
        SetOptions { ttl: b.ttl_ms, expires_at: b.expires_at, if_absent: b.if_absent.unwrap_or(false) };
    let r = app.client.set_state(&b.key, b.value.get(), opts).await?;
    Ok(Json(SetResult { written: r.written, value: raw(r.current.json)?, expires_at: r.current.expires_at }))
}

#[derive(Serialize, ToSchema)]
pub struct Deleted {
    deleted: bool,
}

/// Delete a value.
///
/// Safe to resend.
#[utoipa::path(
    post,
    path = "/v1/state/delete",
    tag = "state",
    operation_id = "state_delete",
    request_body(content = inline(KeyIn)),
    responses(
        (status = 200, description = "done", body = Deleted),
        Errors
    )
)]
pub async fn delete(State(app): State<App>, Body(b): Body<KeyIn>) -> ApiResult<Json<Deleted>> {
    Ok(Json(Deleted { deleted: app.client.delete_state(&b.key).await? }))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IncrementIn {
    #[schema(schema_with = crate::openapi::name)]
    key: String,
    #[serde(default, deserialize_with = "opt_i64")]
    #[schema(schema_with = crate::openapi::whole_signed)]
    by: Option<i64>,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    ttl_ms: Option<Duration>,
}

#[derive(Serialize, ToSchema)]
pub struct Counter {
    value: i64,
}

/// Add by (default 1) to an integer counter.
///
/// Adds `by` (default 1). NOT safe to resend blindly: each call adds again.
#[utoipa::path(
    post,
    path = "/v1/state/increment",
    tag = "state",
    operation_id = "state_increment",
    request_body(content = inline(IncrementIn)),
    responses(
        (status = 200, description = "done", body = Counter),
        Errors
    )
)]
pub async fn increment(State(app): State<App>, Body(b): Body<IncrementIn>) -> ApiResult<Json<Counter>> {
    Ok(Json(Counter { value: app.client.increment(&b.key, b.by, b.ttl_ms).await? }))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimKeyIn {
    #[schema(schema_with = crate::openapi::name)]
    key: String,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    lease_ms: Option<Duration>,
    /// While another runner holds the key, wait up to this many ms for it to be released or
    /// completed (tried again with backoff). Default 0: answer at once.
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    wait_ms: Option<Duration>,
}

/// What a `claimKey` found.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeyStatus {
    /// Taken by this call: run the work, then completeKey or releaseKey.
    Claimed,
    /// Another runner holds the key.
    Pending,
    /// The work is done: its stored result is in `value`.
    Done,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = KeyClaim)]
pub struct KeyClaimResult {
    status: KeyStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::openapi::owner)]
    owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    lease_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    remaining_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    value: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    expires_at: Option<i64>,
    /// How many times the key was tried (1 without `waitMs`).
    attempts: u32,
}

/// Take an idempotency key: claimed (run the work), done (stored result), or 409 ERR_KEY_PENDING while another runner holds it.
///
/// Takes an idempotency key: 200 `claimed` (run the work, then completeKey or releaseKey), 200
/// `done` with the stored result, or 409 `ERR_KEY_PENDING` while another runner holds it.
#[utoipa::path(
    post,
    path = "/v1/state/claimKey",
    tag = "state",
    operation_id = "state_claimKey",
    request_body(content = inline(ClaimKeyIn)),
    responses(
        (status = 200, description = "claimed or done", body = KeyClaimResult),
        (status = 409, description = "ERR_KEY_PENDING: another runner holds the key (status pending, remainingMs)", body = Busy<KeyClaimResult>),
        Errors
    )
)]
pub async fn claim_key(State(app): State<App>, Body(b): Body<ClaimKeyIn>) -> ApiResult<Response> {
    let (claim, attempts) = match b.wait_ms {
        Some(wait) => app.client.claim_key_waiting(&b.key, b.lease_ms, wait).await?,
        None => (app.client.claim_key(&b.key, b.lease_ms).await?, 1),
    };
    let with = |status| KeyClaimResult {
        status,
        owner: None,
        lease_ms: None,
        remaining_ms: None,
        value: None,
        expires_at: None,
        attempts,
    };
    Ok(match claim {
        KeyClaim::Claimed { owner, lease_ms } => {
            Json(KeyClaimResult { owner: Some(owner), lease_ms: Some(lease_ms), ..with(KeyStatus::Claimed) })
                .into_response()
        }
        KeyClaim::Done { json, expires_at } => {
            Json(KeyClaimResult { value: Some(raw(json)?), expires_at, ..with(KeyStatus::Done) })
                .into_response()
        }
        KeyClaim::Pending { remaining_ms } => busy(
            StatusCode::CONFLICT,
            KEY_PENDING,
            &KeyClaimResult { remaining_ms: Some(remaining_ms), ..with(KeyStatus::Pending) },
        ),
    })
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompleteKeyIn {
    #[schema(schema_with = crate::openapi::name)]
    key: String,
    #[schema(schema_with = crate::openapi::owner)]
    owner: String,
    #[schema(value_type = Value)]
    value: Box<RawValue>,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    ttl_ms: Option<Duration>,
}

#[derive(Serialize, ToSchema)]
pub struct Stored {
    stored: bool,
}

/// Store the work's result under owner.
///
/// Stores the result of the work under `owner`; 412 `ERR_NOT_OWNER` when the key is no longer
/// held with it (its lease ran out, or a resent call after the first stored the result: claimKey
/// then answers `done`).
#[utoipa::path(
    post,
    path = "/v1/state/completeKey",
    tag = "state",
    operation_id = "state_completeKey",
    request_body(content = inline(CompleteKeyIn)),
    responses(
        (status = 200, description = "stored", body = Stored),
        NotOwner,
        Errors
    )
)]
pub async fn complete_key(State(app): State<App>, Body(b): Body<CompleteKeyIn>) -> ApiResult<Json<Stored>> {
    app.client.complete_key(&b.key, &b.owner, b.value.get(), b.ttl_ms).await?;
    Ok(Json(Stored { stored: true }))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleaseKeyIn {
    #[schema(schema_with = crate::openapi::name)]
    key: String,
    #[schema(schema_with = crate::openapi::owner)]
    owner: String,
}

#[derive(Serialize, ToSchema)]
pub struct Released {
    released: bool,
}

/// Free a pending key held with owner.
///
/// Frees a pending key held with `owner`. Safe to resend: the second call reports `released: false`.
#[utoipa::path(
    post,
    path = "/v1/state/releaseKey",
    tag = "state",
    operation_id = "state_releaseKey",
    request_body(content = inline(ReleaseKeyIn)),
    responses(
        (status = 200, description = "done", body = Released),
        Errors
    )
)]
pub async fn release_key(State(app): State<App>, Body(b): Body<ReleaseKeyIn>) -> ApiResult<Json<Released>> {
    Ok(Json(Released { released: app.client.release_key(&b.key, &b.owner).await? }))
}
