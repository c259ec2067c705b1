//! Listing routes (what the dashboard shows): `/v1/tracker/listGroups`, `/v1/lock/list`,
//! `/v1/queue/list`, `/v1/limiter/list`, `/v1/semaphore/list`. Each takes `{cursor?, limit?}` and answers one page with the `cursor` of the
//! next (absent at the end). A page costs one bounded catalog call plus one read per name listed
//! (the group's counts, the lock's holder, the queue's sizes, the limiter's state, the
//! semaphore's holders), so `limit` is kept small.

use axum::extract::State;
use axum::Json;
use flowguard_core::catalog::{Kind, Page};
use flowguard_core::ErrorCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::app::App;
use crate::body::{opt_u64, Body};
use crate::error::{ApiError, ApiResult};
use crate::openapi::Errors;
use crate::routes::{lock::LockInfo, queue::QueueSize, semaphore::SemaphoreOut, tracker::Counts};

/// Default and largest page of a listing route.
pub const DEFAULT_LIST: u64 = 50;
pub const MAX_LIST: u64 = 100;

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListIn {
    #[schema(schema_with = crate::openapi::cursor)]
    cursor: Option<String>,
    #[schema(schema_with = crate::openapi::page_limit)]
    #[serde(default, deserialize_with = "opt_u64")]
    limit: Option<u64>,
}

async fn page(app: &App, kind: Kind, b: &ListIn) -> ApiResult<Page> {
    let limit = b.limit.unwrap_or(DEFAULT_LIST);
    if !(1..=MAX_LIST).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            format!("must be a whole number from 1 to {MAX_LIST}, got {limit}"),
        ));
    }
    Ok(app.client.list_names(kind, b.cursor.as_deref(), Some(limit)).await?)
}

#[derive(Serialize, ToSchema)]
pub struct GroupSummary {
    group: String,
    counts: Counts,
}

#[derive(Serialize, ToSchema)]
pub struct GroupList {
    groups: Vec<GroupSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    cursor: Option<String>,
}

/// List the groups that hold items, with their counts by status.
///
/// Tracker groups that hold records, with their counts by status.
#[utoipa::path(
    post,
    path = "/v1/tracker/listGroups",
    tag = "tracker",
    operation_id = "tracker_listGroups",
    request_body(content = inline(ListIn)),
    responses(
        (status = 200, description = "one page", body = GroupList),
        Errors
    )
)]
pub async fn groups(State(app): State<App>, Body(b): Body<ListIn>) -> ApiResult<Json<GroupList>> {
    let p = page(&app, Kind::Groups, &b).await?;
    let mut groups = Vec::with_capacity(p.entries.len());
    for e in p.entries {
        let c = app.client.list_items(&e.name, Some("all"), None, Some(1)).await?.counts;
        // A group whose records have all expired (and are not yet forgotten) holds nothing.
        if c.total() > 0 {
            groups.push(GroupSummary { group: e.name, counts: c.into() });
        }
    }
    Ok(Json(GroupList { groups, cursor: p.cursor }))
}

#[derive(Serialize, ToSchema)]
pub struct LockList {
    locks: Vec<LockInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    cursor: Option<String>,
}

/// List the locks held now.
///
/// Locks held now, with holder label, time left and fence.
#[utoipa::path(
    post,
    path = "/v1/lock/list",
    tag = "lock",
    operation_id = "lock_list",
    request_body(content = inline(ListIn)),
    responses(
        (status = 200, description = "one page", body = LockList),
        Errors
    )
)]
pub async fn locks(State(app): State<App>, Body(b): Body<ListIn>) -> ApiResult<Json<LockList>> {
    let p = page(&app, Kind::Locks, &b).await?;
    let mut locks = Vec::with_capacity(p.entries.len());
    for e in p.entries {
        let i = app.client.get_lock(&e.name).await?;
        // Released or expired since it was listed: not held any more.
        if i.locked {
            locks.push(i.into());
        }
    }
    Ok(Json(LockList { locks, cursor: p.cursor }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueSummary {
    queue: String,
    /// The shard count the queue holds ids for (`shards` of its calls); `shards` below lists
    /// each shard's sizes, as `/v1/queue/size` does.
    shard_count: u32,
    #[serde(flatten)]
    size: QueueSize,
}

#[derive(Serialize, ToSchema)]
pub struct QueueList {
    queues: Vec<QueueSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    cursor: Option<String>,
}

/// List the queues that hold ids, with their sizes.
///
/// Queues that hold ids, with their shard count and the ids waiting, due, claimed and queued again
/// (in total and per shard).
#[utoipa::path(
    post,
    path = "/v1/queue/list",
    tag = "queue",
    operation_id = "queue_list",
    request_body(content = inline(ListIn)),
    responses(
        (status = 200, description = "one page", body = QueueList),
        Errors
    )
)]
pub async fn queues(State(app): State<App>, Body(b): Body<ListIn>) -> ApiResult<Json<QueueList>> {
    use flowguard_core::queue::ShardSelect;
    let p = page(&app, Kind::Queues, &b).await?;
    let mut queues = Vec::with_capacity(p.entries.len());
    for e in p.entries {
        let shards = e.shards.unwrap_or(1);
        let select = ShardSelect { shards: Some(shards as u64), shard: None };
        match app.client.queue_size(&e.name, select).await {
            Ok(s) => queues.push(QueueSummary { queue: e.name, shard_count: shards, size: s.into() }),
            // Emptied, and taken up again with another shard count, since it was listed.
            Err(err) if err.code == ErrorCode::InvalidArgument => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(Json(QueueList { queues, cursor: p.cursor }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimiterSummary {
    name: String,
    /// Ms until the limiter is full again (its burst available) if nothing else is taken.
    reset_after_ms: f64,
    /// While paused (`/v1/limiter/pause`): when the pause ends, ms since the epoch on the
    /// backend's clock.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    paused_until: Option<f64>,
    /// The read's time, ms since the epoch on the backend's clock.
    read_at: f64,
}

#[derive(Serialize, ToSchema)]
pub struct LimiterList {
    limiters: Vec<LimiterSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    cursor: Option<String>,
}

/// List the rate limiters in use.
///
/// Rate limiters in use (not full again yet, or paused), with the time until each is full and
/// the end of its pause. The rule (limit,
/// period, burst) is given by each take and not stored, so it is not listed.
#[utoipa::path(
    post,
    path = "/v1/limiter/list",
    tag = "limiter",
    operation_id = "limiter_list",
    request_body(content = inline(ListIn)),
    responses(
        (status = 200, description = "one page", body = LimiterList),
        Errors
    )
)]
pub async fn limiters(State(app): State<App>, Body(b): Body<ListIn>) -> ApiResult<Json<LimiterList>> {
    let p = page(&app, Kind::Limiters, &b).await?;
    let mut limiters = Vec::with_capacity(p.entries.len());
    for e in p.entries {
        let i = app.client.get_limiter(&e.name).await?;
        // Full again since it was listed: not in use any more.
        if i.active {
            limiters.push(LimiterSummary {
                name: i.name,
                reset_after_ms: i.reset_after_ms,
                paused_until: i.paused_until,
                read_at: i.read_at,
            });
        }
    }
    Ok(Json(LimiterList { limiters, cursor: p.cursor }))
}

#[derive(Serialize, ToSchema)]
pub struct SemaphoreList {
    semaphores: Vec<SemaphoreOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    cursor: Option<String>,
}

/// List the semaphores held now.
///
/// Semaphores with live holders, each holder with its label, time left and fence.
#[utoipa::path(
    post,
    path = "/v1/semaphore/list",
    tag = "semaphore",
    operation_id = "semaphore_list",
    request_body(content = inline(ListIn)),
    responses(
        (status = 200, description = "one page", body = SemaphoreList),
        Errors
    )
)]
pub async fn semaphores(State(app): State<App>, Body(b): Body<ListIn>) -> ApiResult<Json<SemaphoreList>> {
    let p = page(&app, Kind::Semaphores, &b).await?;
    let mut semaphores = Vec::with_capacity(p.entries.len());
    for e in p.entries {
        let i = app.client.get_semaphore(&e.name).await?;
        // Every holder released or expired since it was listed: not held any more.
        if !i.holders.is_empty() {
            semaphores.push(i.into());
        }
    }
    Ok(Json(SemaphoreList { semaphores, cursor: p.cursor }))
}
