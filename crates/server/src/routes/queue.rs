//! Dedup Queue routes: `/v1/queue/*`.

use std::time::Duration;

use axum::extract::State;
use axum::Json;
use flowguard_core::queue::{
    EnqueueOptions, EnqueueOutcome, ReadOptions, SettleOutcome, Settled, ShardSelect,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::app::App;
use crate::body::{opt_bool, opt_ms, opt_u64, Body};
use crate::error::ApiResult;
use crate::openapi::Errors;

/// One id or a list of ids.
#[derive(Deserialize, ToSchema)]
#[serde(untagged, expecting = "must be a string or an array of strings")]
pub enum Ids {
    One(String),
    Many(Vec<String>),
}

impl Ids {
    fn into_vec(self) -> Vec<String> {
        match self {
            Ids::One(s) => vec![s],
            Ids::Many(v) => v,
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnqueueIn {
    #[schema(schema_with = crate::openapi::name)]
    queue: String,
    ids: Ids,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::shards)]
    shards: Option<u64>,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    delay_ms: Option<Duration>,
    #[serde(default, deserialize_with = "opt_bool")]
    #[schema(schema_with = crate::openapi::flag)]
    debounce: Option<bool>,
    /// With debounce only: an id's due time is never moved past its first enqueue + this
    /// (Trigger.dev's maxDelay).
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    max_delay_ms: Option<Duration>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Enqueued {
    id: String,
    shard: u32,
    #[schema(schema_with = crate::openapi::enqueue_outcome)]
    outcome: &'static str,
    due_at: i64,
}

#[derive(Serialize, ToSchema)]
pub struct EnqueueResult {
    added: usize,
    duplicates: usize,
    debounced: usize,
    claimed: usize,
    /// Ids that are dead letters: left as they are (not enqueued) until requeued.
    dead: usize,
    items: Vec<Enqueued>,
}

/// Enqueue ids (deduplicated).
///
/// Enqueues ids. Safe to resend: an id already waiting is a `duplicate` (its due time kept).
/// With `debounce`, its due time moves to now + `delayMs` instead (`debounced`), and `maxDelayMs`
/// caps that at the id's first enqueue + `maxDelayMs` (Trigger.dev's maxDelay).
#[utoipa::path(
    post,
    path = "/v1/queue/enqueue",
    tag = "queue",
    operation_id = "queue_enqueue",
    request_body(content = inline(EnqueueIn)),
    responses(
        (status = 200, description = "done", body = EnqueueResult),
        Errors
    )
)]
pub async fn enqueue(State(app): State<App>, Body(b): Body<EnqueueIn>) -> ApiResult<Json<EnqueueResult>> {
    let ids = b.ids.into_vec();
    app.limits.batch("ids", ids.len())?;
    let opts = EnqueueOptions {
        shards: b.shards,
        delay: b.delay_ms,
        debounce: b.debounce.unwrap_or(false),
        max_delay: b.max_delay_ms,
    };
    let r = app.client.enqueue(&b.queue, ids, opts).await?;
    let count = |o: EnqueueOutcome| r.iter().filter(|e| e.outcome == o).count();
    Ok(Json(EnqueueResult {
        added: count(EnqueueOutcome::Added),
        duplicates: count(EnqueueOutcome::Duplicate),
        debounced: count(EnqueueOutcome::Debounced),
        claimed: count(EnqueueOutcome::Claimed),
        dead: count(EnqueueOutcome::Dead),
        items: r
            .into_iter()
            .map(|e| Enqueued { id: e.id, shard: e.shard, outcome: e.outcome.as_str(), due_at: e.due_at })
            .collect(),
    }))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadIn {
    #[schema(schema_with = crate::openapi::name)]
    queue: String,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::shards)]
    shards: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    shard: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    limit: Option<u64>,
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    visibility_timeout_ms: Option<Duration>,
    /// Move an id delivered this many times without an ack to the queue's dead letters instead
    /// of delivering it again (1 to 1000, SQS's maxReceiveCount). Only reads with it count.
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    max_deliveries: Option<u64>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueItem {
    id: String,
    shard: u32,
    due_at: i64,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueBatch {
    #[schema(schema_with = crate::openapi::owner)]
    owner: String,
    visible_until: i64,
    ids: Vec<String>,
    items: Vec<QueueItem>,
}

/// Claim up to limit due ids for visibilityTimeoutMs.
#[utoipa::path(
    post,
    path = "/v1/queue/readBatch",
    tag = "queue",
    operation_id = "queue_readBatch",
    request_body(content = inline(ReadIn)),
    responses(
        (status = 200, description = "done", body = QueueBatch),
        Errors
    )
)]
pub async fn read_batch(State(app): State<App>, Body(b): Body<ReadIn>) -> ApiResult<Json<QueueBatch>> {
    if let Some(limit) = b.limit {
        app.limits.batch("limit", limit as usize)?;
    }
    let opts = ReadOptions {
        shards: b.shards,
        shard: b.shard,
        limit: b.limit,
        visibility_timeout: b.visibility_timeout_ms,
        max_deliveries: b.max_deliveries,
    };
    let r = app.client.read_batch(&b.queue, opts).await?;
    Ok(Json(QueueBatch {
        owner: r.owner,
        visible_until: r.visible_until,
        ids: r.items.iter().map(|d| d.id.clone()).collect(),
        items: r
            .items
            .into_iter()
            .map(|d| QueueItem { id: d.id, shard: d.shard, due_at: d.due_at })
            .collect(),
    }))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettleIn {
    #[schema(schema_with = crate::openapi::name)]
    queue: String,
    #[schema(schema_with = crate::openapi::owner)]
    owner: String,
    ids: Ids,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::shards)]
    shards: Option<u64>,
    /// When the ids are due again (release only: ack refuses it).
    #[serde(default, deserialize_with = "opt_ms")]
    #[schema(schema_with = crate::openapi::millis)]
    delay_ms: Option<Duration>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueSettled {
    id: String,
    shard: u32,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::openapi::settle_reason)]
    reason: Option<&'static str>,
    requeued: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    due_at: Option<i64>,
}

#[derive(Serialize, ToSchema)]
pub struct SettleResult {
    done: usize,
    refused: usize,
    items: Vec<QueueSettled>,
}

fn settled(r: Vec<Settled>) -> SettleResult {
    let items: Vec<QueueSettled> = r
        .into_iter()
        .map(|s| QueueSettled {
            id: s.id,
            shard: s.shard,
            ok: matches!(s.outcome, SettleOutcome::Done { .. }),
            reason: s.outcome.reason(),
            requeued: matches!(s.outcome, SettleOutcome::Done { requeued: true }),
            due_at: s.due_at,
        })
        .collect();
    let done = items.iter().filter(|i| i.ok).count();
    SettleResult { done, refused: items.len() - done, items }
}

/// Acknowledge (remove) ids read with owner.
///
/// Acks ids read with `owner`. Safe to resend: an id already acked is `not_claimed`, nothing changes.
/// `delayMs` is refused (it is for release).
#[utoipa::path(
    post,
    path = "/v1/queue/ack",
    tag = "queue",
    operation_id = "queue_ack",
    request_body(content = inline(SettleIn)),
    responses(
        (status = 200, description = "done", body = SettleResult),
        Errors
    )
)]
pub async fn ack(State(app): State<App>, Body(b): Body<SettleIn>) -> ApiResult<Json<SettleResult>> {
    if b.delay_ms.is_some() {
        return Err(crate::error::ApiError::invalid("delayMs", "is for release, not ack"));
    }
    let ids = b.ids.into_vec();
    app.limits.batch("ids", ids.len())?;
    Ok(Json(settled(app.client.ack(&b.queue, &b.owner, ids, b.shards).await?)))
}

/// Release ids read with owner (due again after delayMs).
///
/// Releases ids read with `owner` (due again after `delayMs`). Safe to resend, like ack.
#[utoipa::path(
    post,
    path = "/v1/queue/release",
    tag = "queue",
    operation_id = "queue_release",
    request_body(content = inline(SettleIn)),
    responses(
        (status = 200, description = "done", body = SettleResult),
        Errors
    )
)]
pub async fn release(State(app): State<App>, Body(b): Body<SettleIn>) -> ApiResult<Json<SettleResult>> {
    let ids = b.ids.into_vec();
    app.limits.batch("ids", ids.len())?;
    Ok(Json(settled(app.client.release(&b.queue, &b.owner, ids, b.shards, b.delay_ms).await?)))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectIn {
    #[schema(schema_with = crate::openapi::name)]
    queue: String,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::shards)]
    shards: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    shard: Option<u64>,
    /// How many ids (peek only: size refuses it).
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    limit: Option<u64>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueEntry {
    id: String,
    shard: u32,
    due_at: i64,
    due: bool,
}

/// The first waiting ids by due time, without claiming.
#[utoipa::path(
    post,
    path = "/v1/queue/peek",
    tag = "queue",
    operation_id = "queue_peek",
    request_body(content = inline(SelectIn)),
    responses(
        (status = 200, description = "done", body = Vec<QueueEntry>),
        Errors
    )
)]
pub async fn peek(State(app): State<App>, Body(b): Body<SelectIn>) -> ApiResult<Json<Vec<QueueEntry>>> {
    if let Some(limit) = b.limit {
        app.limits.batch("limit", limit as usize)?;
    }
    let r = app.client.peek(&b.queue, ShardSelect { shards: b.shards, shard: b.shard }, b.limit).await?;
    Ok(Json(
        r.into_iter()
            .map(|w| QueueEntry { id: w.id, shard: w.shard, due_at: w.due_at, due: w.due })
            .collect(),
    ))
}

#[derive(Serialize, ToSchema)]
pub struct ShardSize {
    shard: u32,
    waiting: u64,
    due: u64,
    claimed: u64,
    again: u64,
    dead: u64,
}

#[derive(Serialize, ToSchema)]
pub struct QueueSize {
    waiting: u64,
    due: u64,
    claimed: u64,
    again: u64,
    dead: u64,
    shards: Vec<ShardSize>,
}

/// Counts per shard and in total.
///
/// `limit` is refused (it is for peek).
#[utoipa::path(
    post,
    path = "/v1/queue/size",
    tag = "queue",
    operation_id = "queue_size",
    request_body(content = inline(SelectIn)),
    responses(
        (status = 200, description = "done", body = QueueSize),
        Errors
    )
)]
pub async fn size(State(app): State<App>, Body(b): Body<SelectIn>) -> ApiResult<Json<QueueSize>> {
    if b.limit.is_some() {
        return Err(crate::error::ApiError::invalid("limit", "is for peek, not size"));
    }
    Ok(Json(app.client.queue_size(&b.queue, ShardSelect { shards: b.shards, shard: b.shard }).await?.into()))
}

impl From<flowguard_core::queue::QueueSize> for QueueSize {
    fn from(s: flowguard_core::queue::QueueSize) -> Self {
        QueueSize {
            waiting: s.waiting,
            due: s.due,
            claimed: s.claimed,
            again: s.again,
            dead: s.dead,
            shards: s
                .shards
                .into_iter()
                .map(|x| ShardSize {
                    shard: x.shard,
                    waiting: x.waiting,
                    due: x.due,
                    claimed: x.claimed,
                    again: x.again,
                    dead: x.dead,
                })
                .collect(),
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeadIn {
    #[schema(schema_with = crate::openapi::name)]
    queue: String,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::shards)]
    shards: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    shard: Option<u64>,
    /// Skip this many (the previous page's nextOffset). Default 0, at most 100000.
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    offset: Option<u64>,
    /// 1 to 1000. Default 100.
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::whole)]
    limit: Option<u64>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetter {
    id: String,
    shard: u32,
    /// How many times it was delivered without an ack.
    deliveries: u64,
    /// When it died (ms since the epoch, the backend's clock).
    died_at: i64,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeadPage {
    items: Vec<DeadLetter>,
    /// The offset of the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_offset: Option<u64>,
}

/// One page of the queue's dead letters, oldest death first.
///
/// The ids a read with `maxDeliveries` found delivered that many times without an ack.
#[utoipa::path(
    post,
    path = "/v1/queue/deadLetters",
    tag = "queue",
    operation_id = "queue_deadLetters",
    request_body(content = inline(DeadIn)),
    responses(
        (status = 200, description = "done", body = DeadPage),
        Errors
    )
)]
pub async fn dead_letters(State(app): State<App>, Body(b): Body<DeadIn>) -> ApiResult<Json<DeadPage>> {
    if let Some(limit) = b.limit {
        app.limits.batch("limit", limit as usize)?;
    }
    let page = app
        .client
        .dead_letters(&b.queue, ShardSelect { shards: b.shards, shard: b.shard }, b.offset, b.limit)
        .await?;
    Ok(Json(DeadPage {
        next_offset: page.next_offset,
        items: page
            .items
            .into_iter()
            .map(|d| DeadLetter { id: d.id, shard: d.shard, deliveries: d.deliveries, died_at: d.died_at })
            .collect(),
    }))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequeueIn {
    #[schema(schema_with = crate::openapi::name)]
    queue: String,
    ids: Ids,
    #[serde(default, deserialize_with = "opt_u64")]
    #[schema(schema_with = crate::openapi::shards)]
    shards: Option<u64>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Requeued {
    id: String,
    shard: u32,
    /// `requeued`: it was a dead letter and waits again, due now, its deliveries reset;
    /// `not_dead`: it was no dead letter (nothing changed).
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    due_at: Option<i64>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequeueResult {
    requeued: usize,
    not_dead: usize,
    items: Vec<Requeued>,
}

/// Put dead letters back as waiting (deliveries reset).
///
/// Per id `requeued` or `not_dead`. Safe to resend: a second call finds them `not_dead`.
#[utoipa::path(
    post,
    path = "/v1/queue/requeueDead",
    tag = "queue",
    operation_id = "queue_requeueDead",
    request_body(content = inline(RequeueIn)),
    responses(
        (status = 200, description = "done", body = RequeueResult),
        Errors
    )
)]
pub async fn requeue_dead(
    State(app): State<App>,
    Body(b): Body<RequeueIn>,
) -> ApiResult<Json<RequeueResult>> {
    let ids = b.ids.into_vec();
    app.limits.batch("ids", ids.len())?;
    let items: Vec<Requeued> = app
        .client
        .requeue_dead(&b.queue, ids, b.shards)
        .await?
        .into_iter()
        .map(|r| Requeued {
            id: r.id,
            shard: r.shard,
            outcome: if r.requeued { "requeued" } else { "not_dead" },
            due_at: r.due_at,
        })
        .collect();
    let requeued = items.iter().filter(|i| i.due_at.is_some()).count();
    Ok(Json(RequeueResult { requeued, not_dead: items.len() - requeued, items }))
}
