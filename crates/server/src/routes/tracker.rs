//! Item Tracker routes: `/v1/tracker/*`.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowguard_core::tracker::{self as core, ItemRequest, Outcome};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::app::App;
use crate::body::{
    json_text, keep, opt_bool, opt_keep, opt_ms, opt_u64, present_value, Body, KeepMs, Object,
};
use crate::error::Busy;
use crate::error::{busy, ApiResult, ITEM_BUSY};
use crate::openapi::Errors;
use crate::openapi::NotOwner;

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    pub at: i64,
    pub status: String,
    pub attempt: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemState {
    pub id: String,
    #[schema(schema_with = crate::openapi::item_status)]
    pub status: &'static str,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub created_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub updated_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub lease_expires_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub finished_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub expires_at: Option<i64>,
    pub timeline: Vec<Transition>,
    /// The `maxAttempts` of the latest claim, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub max_attempts: Option<u32>,
    /// The result its completion gave (any JSON value); absent when none was given, and after
    /// a new claim (a result belongs to the attempt that completed, as BullMQ's `returnvalue`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub result: Option<serde_json::Value>,
    /// The note its latest claim gave; absent when that claim gave none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub note: Option<String>,
}

impl From<core::ItemState> for ItemState {
    fn from(s: core::ItemState) -> Self {
        ItemState {
            id: s.id,
            status: s.status.as_str(),
            attempts: s.attempts,
            last_error: s.last_error,
            created_at: s.created_at,
            updated_at: s.updated_at,
            lease_expires_at: s.lease_expires_at,
            finished_at: s.finished_at,
            expires_at: s.expires_at,
            timeline: s
                .timeline
                .into_iter()
                .map(|t| Transition {
                    at: t.at,
                    status: t.status.into_owned(),
                    attempt: t.attempt,
                    error: t.error,
                })
                .collect(),
            max_attempts: s.max_attempts,
            // The core stores only JSON text it checked.
            result: s.result.and_then(|r| serde_json::from_str(&r).ok()),
            note: s.note,
        }
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimResult {
    pub id: String,
    pub claimed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::openapi::owner)]
    pub owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::openapi::busy_reason)]
    pub reason: Option<&'static str>,
    pub item: ItemState,
}

impl From<core::ClaimResult> for ClaimResult {
    fn from(r: core::ClaimResult) -> Self {
        ClaimResult {
            id: r.item.id.clone(),
            claimed: r.claimed,
            owner: r.owner,
            reason: r.reason.map(|s| s.as_str()),
            item: r.item.into(),
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimIn {
    #[schema(schema_with = crate::openapi::name)]
    group: String,
    #[schema(schema_with = crate::openapi::name)]
    id: String,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    timeout_ms: Option<Duration>,
    #[serde(default, deserialize_with = "opt_bool")]
    #[schema(schema_with = crate::openapi::flag)]
    reclaim_completed: Option<bool>,
    /// The attempts allowed: a failure of attempt maxAttempts or later makes the item dead.
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::max_attempts)]
    max_attempts: Option<u64>,
    /// A short text kept with the item until its next claim (at most 256 bytes), returned as
    /// the item's `note`.
    #[schema(schema_with = crate::openapi::note)]
    note: Option<String>,
}

/// Claim one item for timeoutMs.
///
/// Claims one item: 200 when claimed, 409 `ERR_ITEM_BUSY` (with the result) when it is in
/// progress under another live claim, completed, or dead (failed at its maxAttempts: revive it
/// with reviveItems).
#[utoipa::path(
    post,
    path = "/v1/tracker/claim",
    tag = "tracker",
    operation_id = "tracker_claim",
    request_body(content = inline(ClaimIn)),
    responses(
        (status = 200, description = "claimed", body = ClaimResult),
        (status = 409, description = "ERR_ITEM_BUSY: the item is in progress under another live claim, completed, or dead", body = Busy<ClaimResult>),
        Errors
    )
)]
pub async fn claim(State(app): State<App>, Body(b): Body<ClaimIn>) -> ApiResult<Response> {
    let req = ItemRequest {
        id: b.id,
        status: "in_progress".into(),
        timeout: b.timeout_ms,
        reclaim_completed: b.reclaim_completed.unwrap_or(false),
        max_attempts: attempts(b.max_attempts),
        note: b.note,
        ..Default::default()
    };
    let r = ClaimResult::from(core::ClaimResult::from(app.client.set_item(&b.group, req).await?));
    Ok(if r.claimed { Json(r).into_response() } else { busy(StatusCode::CONFLICT, ITEM_BUSY, &r) })
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimManyIn {
    #[schema(schema_with = crate::openapi::name)]
    group: String,
    #[schema(schema_with = crate::openapi::names)]
    ids: Vec<String>,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    timeout_ms: Option<Duration>,
    #[serde(default, deserialize_with = "opt_bool")]
    #[schema(schema_with = crate::openapi::flag)]
    reclaim_completed: Option<bool>,
    /// The attempts allowed: a failure of attempt maxAttempts or later makes the item dead.
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::max_attempts)]
    max_attempts: Option<u64>,
    /// A short text kept with the item until its next claim (at most 256 bytes), returned as
    /// the item's `note`.
    #[schema(schema_with = crate::openapi::note)]
    note: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimBatch {
    #[schema(schema_with = crate::openapi::owner)]
    owner: String,
    lease_expires_at: i64,
    claimed: usize,
    #[schema(schema_with = crate::openapi::batch_outcomes)]
    results: Vec<&'static str>,
    attempts: Vec<u32>,
}

/// Claim many items atomically under one owner token; compact result.
#[utoipa::path(
    post,
    path = "/v1/tracker/claimBatch",
    tag = "tracker",
    operation_id = "tracker_claimBatch",
    request_body(content = inline(ClaimManyIn)),
    responses(
        (status = 200, description = "done", body = ClaimBatch),
        Errors
    )
)]
pub async fn claim_batch(State(app): State<App>, Body(b): Body<ClaimManyIn>) -> ApiResult<Json<ClaimBatch>> {
    app.limits.batch("ids", b.ids.len())?;
    let reclaim = b.reclaim_completed.unwrap_or(false);
    let r = app
        .client
        .claim_batch(&b.group, &b.ids, b.timeout_ms, reclaim, attempts(b.max_attempts), b.note.as_deref())
        .await?;
    Ok(Json(ClaimBatch {
        owner: r.owner,
        lease_expires_at: r.lease_expires_at,
        claimed: r.outcomes.iter().filter(|o| **o == core::BatchOutcome::Claimed).count(),
        results: r.outcomes.iter().map(|o| o.as_str()).collect(),
        attempts: r.attempts,
    }))
}

/// Claim many items atomically; one ClaimResult per id.
#[utoipa::path(
    post,
    path = "/v1/tracker/claimMany",
    tag = "tracker",
    operation_id = "tracker_claimMany",
    request_body(content = inline(ClaimManyIn)),
    responses(
        (status = 200, description = "done", body = Vec<ClaimResult>),
        Errors
    )
)]
pub async fn claim_many(
    State(app): State<App>,
    Body(b): Body<ClaimManyIn>,
) -> ApiResult<Json<Vec<ClaimResult>>> {
    app.limits.batch("ids", b.ids.len())?;
    let reclaim = b.reclaim_completed.unwrap_or(false);
    let r = app
        .client
        .claim_many(&b.group, b.ids, b.timeout_ms, reclaim, attempts(b.max_attempts), b.note)
        .await?;
    Ok(Json(r.into_iter().map(ClaimResult::from).collect()))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FinishIn {
    #[schema(schema_with = crate::openapi::name)]
    group: String,
    #[schema(schema_with = crate::openapi::name)]
    id: String,
    #[schema(schema_with = crate::openapi::owner)]
    owner: Option<String>,
    #[serde(default, deserialize_with = "opt_keep")]
    #[schema(schema_with = crate::openapi::keep_ms)]
    keep_ms: Option<KeepMs>,
    /// Why the item failed (fail only: complete refuses it).
    #[schema(schema_with = crate::openapi::text)]
    reason: Option<String>,
    /// complete only (fail refuses it): a JSON value stored with the item, at most 4 KiB of its
    /// JSON text (else 400 ERR_INVALID_ARGUMENT on `result`), returned as the item's `result`
    /// until its next claim.
    #[serde(default, deserialize_with = "present_value")]
    #[schema(value_type = Option<Value>)]
    result: Option<serde_json::Value>,
}

async fn finish(app: &App, b: FinishIn, status: &str, error: Option<String>) -> ApiResult<Json<ItemState>> {
    let req = ItemRequest {
        id: b.id,
        status: status.into(),
        owner: b.owner,
        keep: keep(b.keep_ms),
        error,
        result: json_text(b.result),
        ..Default::default()
    };
    Ok(Json(app.client.set_item(&b.group, req).await?.item.into()))
}

/// Mark an item completed.
///
/// With owner: 412 ERR_NOT_OWNER when a newer claim owns it.
/// `reason` is refused (it is for fail).
#[utoipa::path(
    post,
    path = "/v1/tracker/complete",
    tag = "tracker",
    operation_id = "tracker_complete",
    request_body(content = inline(FinishIn)),
    responses(
        (status = 200, description = "done", body = ItemState),
        NotOwner,
        Errors
    )
)]
pub async fn complete(State(app): State<App>, Body(b): Body<FinishIn>) -> ApiResult<Json<ItemState>> {
    if b.reason.is_some() {
        return Err(crate::error::ApiError::invalid("reason", "is for fail, not complete"));
    }
    finish(&app, b, "completed", None).await
}

/// Mark an item failed with a reason.
///
/// With owner: 412 ERR_NOT_OWNER when a newer claim owns it.
#[utoipa::path(
    post,
    path = "/v1/tracker/fail",
    tag = "tracker",
    operation_id = "tracker_fail",
    request_body(content = inline(FinishIn)),
    responses(
        (status = 200, description = "done", body = ItemState),
        NotOwner,
        Errors
    )
)]
pub async fn fail(State(app): State<App>, Body(mut b): Body<FinishIn>) -> ApiResult<Json<ItemState>> {
    if b.result.is_some() {
        return Err(crate::error::ApiError::invalid("result", "is for complete, not fail"));
    }
    let reason = b.reason.take().unwrap_or_default();
    // The core names the reason `error` (as setItems does); this call's body names it `reason`.
    finish(&app, b, "failed", Some(reason)).await.map_err(|mut e| {
        if e.field.as_deref() == Some("error") {
            e.field = Some("reason".into());
            e.message = e.message.replacen("error", "reason", 1);
        }
        e
    })
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestIn {
    #[schema(schema_with = crate::openapi::name)]
    id: String,
    #[schema(schema_with = crate::openapi::requested_status)]
    status: String,
    #[schema(schema_with = crate::openapi::owner)]
    owner: Option<String>,
    #[schema(schema_with = crate::openapi::text)]
    error: Option<String>,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    timeout_ms: Option<Duration>,
    #[serde(default, deserialize_with = "opt_keep")]
    #[schema(schema_with = crate::openapi::keep_ms)]
    keep_ms: Option<KeepMs>,
    #[serde(default, deserialize_with = "opt_bool")]
    #[schema(schema_with = crate::openapi::flag)]
    reclaim_completed: Option<bool>,
    /// The attempts allowed: a failure of attempt maxAttempts or later makes the item dead.
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::max_attempts)]
    max_attempts: Option<u64>,
    /// A claim's note (see claim's `note`).
    #[schema(schema_with = crate::openapi::note)]
    note: Option<String>,
    /// A completion's result (see complete's `result`).
    #[serde(default, deserialize_with = "present_value")]
    #[schema(value_type = Option<Value>)]
    result: Option<serde_json::Value>,
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetItemsIn {
    #[schema(schema_with = crate::openapi::name)]
    group: String,
    #[schema(value_type = Vec<RequestIn>)]
    requests: Vec<Object<RequestIn>>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemResult {
    id: String,
    #[schema(schema_with = crate::openapi::action)]
    action: &'static str,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    claimed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::openapi::busy_reason)]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::openapi::owner)]
    owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::openapi::code)]
    code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    message: Option<String>,
    item: ItemState,
}

impl From<core::OpResult> for ItemResult {
    fn from(r: core::OpResult) -> Self {
        let is_claim = r.action == core::Action::Claim;
        let (ok, reason, code, message) = match r.outcome {
            Outcome::Done => (true, None, None, None),
            Outcome::Busy(s) => (false, Some(s.as_str()), None, None),
            Outcome::Refused(e) => (false, None, Some(e.code.as_str()), Some(e.message)),
        };
        ItemResult {
            id: r.id,
            action: r.action.as_str(),
            ok,
            claimed: if is_claim { Some(ok) } else { None },
            reason,
            owner: r.owner,
            code,
            message,
            item: r.item.into(),
        }
    }
}

/// Apply a batch of changes to one group atomically; refusals are per-item results.
#[utoipa::path(
    post,
    path = "/v1/tracker/setItems",
    tag = "tracker",
    operation_id = "tracker_setItems",
    request_body(content = inline(SetItemsIn)),
    responses(
        (status = 200, description = "done (refusals per item)", body = Vec<ItemResult>),
        Errors
    )
)]
pub async fn set_items(
    State(app): State<App>,
    Body(b): Body<SetItemsIn>,
) -> ApiResult<Json<Vec<ItemResult>>> {
    app.limits.batch("requests", b.requests.len())?;
    let reqs = b
        .requests
        .into_iter()
        .map(|Object(r)| ItemRequest {
            id: r.id,
            status: r.status,
            owner: r.owner,
            error: r.error,
            timeout: r.timeout_ms,
            keep: keep(r.keep_ms),
            reclaim_completed: r.reclaim_completed.unwrap_or(false),
            max_attempts: attempts(r.max_attempts),
            note: r.note,
            result: json_text(r.result),
        })
        .collect();
    Ok(Json(app.client.set_items(&b.group, reqs).await?.into_iter().map(ItemResult::from).collect()))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ItemIn {
    #[schema(schema_with = crate::openapi::name)]
    group: String,
    #[schema(schema_with = crate::openapi::name)]
    id: String,
}

/// Read one item (status none when unknown).
#[utoipa::path(
    post,
    path = "/v1/tracker/getItem",
    tag = "tracker",
    operation_id = "tracker_getItem",
    request_body(content = inline(ItemIn)),
    responses(
        (status = 200, description = "done", body = ItemState),
        Errors
    )
)]
pub async fn get_item(State(app): State<App>, Body(b): Body<ItemIn>) -> ApiResult<Json<ItemState>> {
    Ok(Json(app.client.get_item(&b.group, &b.id).await?.into()))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ItemsIn {
    #[schema(schema_with = crate::openapi::name)]
    group: String,
    #[schema(schema_with = crate::openapi::names)]
    ids: Vec<String>,
}

/// Read many items.
#[utoipa::path(
    post,
    path = "/v1/tracker/getItems",
    tag = "tracker",
    operation_id = "tracker_getItems",
    request_body(content = inline(ItemsIn)),
    responses(
        (status = 200, description = "done", body = Vec<ItemState>),
        Errors
    )
)]
pub async fn get_items(State(app): State<App>, Body(b): Body<ItemsIn>) -> ApiResult<Json<Vec<ItemState>>> {
    app.limits.batch("ids", b.ids.len())?;
    Ok(Json(app.client.get_items(&b.group, b.ids).await?.into_iter().map(ItemState::from).collect()))
}

/// A `maxAttempts` as the core takes it (the core checks its range: a number past u32 stays past it).
fn attempts(v: Option<u64>) -> Option<u32> {
    v.map(|m| u32::try_from(m).unwrap_or(u32::MAX))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviveIn {
    #[schema(schema_with = crate::openapi::name)]
    group: String,
    #[schema(schema_with = crate::openapi::names)]
    ids: Vec<String>,
    /// Revive failed items too (with resetAttempts: a new attempt budget). Default false.
    #[serde(default, deserialize_with = "opt_bool")]
    #[schema(schema_with = crate::openapi::flag)]
    failed: Option<bool>,
    /// Start the attempts again at 0 (BullMQ's resetAttemptsMade). Default false: kept.
    #[serde(default, deserialize_with = "opt_bool")]
    #[schema(schema_with = crate::openapi::flag)]
    reset_attempts: Option<bool>,
}

/// Make dead items claimable again (BullMQ's retryJobs).
///
/// In one atomic step, each dead id (and failed id, with `failed`) becomes failed with its
/// attempts (or 0, with `resetAttempts`), last error and timeline kept and a `revived` transition
/// added. Per id an ItemResult (action `revive`): `ok` when revived, else `reason` is its status.
#[utoipa::path(
    post,
    path = "/v1/tracker/reviveItems",
    tag = "tracker",
    operation_id = "tracker_reviveItems",
    request_body(content = inline(ReviveIn)),
    responses(
        (status = 200, description = "done (per id: revived or left alone)", body = Vec<ItemResult>),
        Errors
    )
)]
pub async fn revive_items(
    State(app): State<App>,
    Body(b): Body<ReviveIn>,
) -> ApiResult<Json<Vec<ItemResult>>> {
    app.limits.batch("ids", b.ids.len())?;
    let (failed, reset) = (b.failed.unwrap_or(false), b.reset_attempts.unwrap_or(false));
    let r = app.client.revive_items(&b.group, b.ids, failed, reset).await?;
    Ok(Json(r.into_iter().map(ItemResult::from).collect()))
}

#[derive(Serialize, ToSchema)]
pub struct Unset {
    existed: bool,
}

/// Forget an item.
///
/// Forgets an item. Safe to resend: a second call finds no record (`existed: false`).
#[utoipa::path(
    post,
    path = "/v1/tracker/unsetItem",
    tag = "tracker",
    operation_id = "tracker_unsetItem",
    request_body(content = inline(ItemIn)),
    responses(
        (status = 200, description = "done", body = Unset),
        Errors
    )
)]
pub async fn unset_item(State(app): State<App>, Body(b): Body<ItemIn>) -> ApiResult<Json<Unset>> {
    let req = ItemRequest { id: b.id, status: "none".into(), ..Default::default() };
    let r = app.client.set_item(&b.group, req).await?;
    Ok(Json(Unset { existed: r.item.status != core::ItemStatus::None }))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListIn {
    #[schema(schema_with = crate::openapi::name)]
    group: String,
    #[schema(schema_with = crate::openapi::list_filter)]
    status: Option<String>,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    offset: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::item_page_limit)]
    limit: Option<u64>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    in_progress: u64,
    abandoned: u64,
    completed: u64,
    failed: u64,
    dead: u64,
    total: u64,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemList {
    counts: Counts,
    items: Vec<ItemState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    next_offset: Option<u64>,
}

/// One page of a group's items, with counts by status.
#[utoipa::path(
    post,
    path = "/v1/tracker/listItems",
    tag = "tracker",
    operation_id = "tracker_listItems",
    request_body(content = inline(ListIn)),
    responses(
        (status = 200, description = "done", body = ItemList),
        Errors
    )
)]
pub async fn list_items(State(app): State<App>, Body(b): Body<ListIn>) -> ApiResult<Json<ItemList>> {
    let l = app.client.list_items(&b.group, b.status.as_deref(), b.offset, b.limit).await?;
    Ok(Json(ItemList {
        counts: l.counts.into(),
        items: l.items.into_iter().map(ItemState::from).collect(),
        next_offset: l.next_offset,
    }))
}

impl From<core::Counts> for Counts {
    fn from(c: core::Counts) -> Self {
        Counts {
            in_progress: c.in_progress,
            abandoned: c.abandoned,
            completed: c.completed,
            failed: c.failed,
            dead: c.dead,
            total: c.total(),
        }
    }
}
