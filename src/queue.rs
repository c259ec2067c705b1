//! Dedup Queue methods of `Flowguard`.

use napi::bindgen_prelude::*;
use napi::{Env, ValueType};
use napi_derive::napi;

use super::client::Flowguard;
use super::{args, js_error, promise};
use flowguard_core::queue::{self as core, EnqueueOptions, ReadOptions, SettleOutcome};

#[napi(object)]
#[allow(dead_code)]
pub struct QueueEnqueueOptions {
    /// The queue's shard count (1 to 1024). Default 1. Every producer and consumer of a queue
    /// must use the same count.
    pub shards: Option<f64>,
    /// Make the ids due this many ms from now. Default 0.
    pub delay_ms: Option<f64>,
    /// Move a waiting id's due time to now + `delayMs` on every enqueue (instead of keeping its
    /// first one), so it is read only once updates to it stop. Default false.
    pub debounce: Option<bool>,
}

#[napi(object)]
pub struct QueueEnqueued {
    pub id: String,
    pub shard: u32,
    /// `added`: new; `duplicate`: already waiting, due time kept; `debounced`: already waiting,
    /// due time moved; `claimed`: held by a reader now, delivered once more after its claim ends.
    #[napi(ts_type = "'added' | 'duplicate' | 'debounced' | 'claimed'")]
    pub outcome: String,
    /// When the id is due, in ms since the epoch (the backend's clock).
    pub due_at: f64,
}

#[napi(object)]
pub struct QueueEnqueueResult {
    pub added: u32,
    pub duplicates: u32,
    pub debounced: u32,
    pub claimed: u32,
    /// One entry per id given, in order.
    pub items: Vec<QueueEnqueued>,
}

#[napi(object)]
#[allow(dead_code)]
pub struct QueueReadOptions {
    pub shards: Option<f64>,
    /// Read only this shard (0 to shards - 1). Default: all shards.
    pub shard: Option<f64>,
    /// The most ids to claim (1 to 10000). Default 100.
    pub limit: Option<f64>,
    /// How long the ids are held before they become due again unless acked or released, in ms.
    /// Default 600000.
    pub visibility_timeout_ms: Option<f64>,
}

#[napi(object)]
pub struct QueueItem {
    pub id: String,
    pub shard: u32,
    /// When it became due, in ms since the epoch.
    pub due_at: f64,
}

#[napi(object)]
pub struct QueueBatch {
    /// The owner token (receipt) of this read: pass it to `ack` and `release`.
    pub owner: String,
    /// Until when the ids are held, in ms since the epoch (0 when the batch is empty).
    pub visible_until: f64,
    /// The claimed ids, oldest first.
    pub ids: Vec<String>,
    pub items: Vec<QueueItem>,
}

#[napi(object)]
pub struct QueueSettled {
    pub id: String,
    pub shard: u32,
    pub ok: bool,
    /// Why it was not acked or released: not claimed (any more), claimed by another read, or
    /// past its visibility timeout (it will be delivered again).
    #[napi(ts_type = "'not_claimed' | 'not_owner' | 'expired'")]
    pub reason: Option<String>,
    /// The id had been enqueued again while claimed, so it is waiting again.
    pub requeued: bool,
    /// When the id is due again, if it is waiting again after this call.
    pub due_at: Option<f64>,
}

#[napi(object)]
pub struct QueueSettleResult {
    /// How many ids were acked (or released).
    pub done: u32,
    /// How many were refused (see each item's `reason`).
    pub refused: u32,
    pub items: Vec<QueueSettled>,
}

#[napi(object)]
#[allow(dead_code)]
pub struct QueueAckOptions {
    pub shards: Option<f64>,
}

#[napi(object)]
#[allow(dead_code)]
pub struct QueueReleaseOptions {
    pub shards: Option<f64>,
    /// Make the ids due again this many ms from now. Default 0.
    pub delay_ms: Option<f64>,
}

#[napi(object)]
#[allow(dead_code)]
pub struct QueuePeekOptions {
    pub shards: Option<f64>,
    pub shard: Option<f64>,
    /// Default 100, at most 10000.
    pub limit: Option<f64>,
}

#[napi(object)]
pub struct QueueEntry {
    pub id: String,
    pub shard: u32,
    pub due_at: f64,
    /// Due now.
    pub due: bool,
}

#[napi(object)]
#[allow(dead_code)]
pub struct QueueSizeOptions {
    pub shards: Option<f64>,
    pub shard: Option<f64>,
}

#[napi(object)]
pub struct QueueShardSize {
    pub shard: u32,
    /// Ids waiting, due or not.
    pub waiting: f64,
    /// Of those, ids due now.
    pub due: f64,
    /// Ids held by a reader.
    pub claimed: f64,
    /// Claimed ids enqueued again, to be delivered after their claim ends.
    pub again: f64,
}

#[napi(object)]
pub struct QueueSize {
    pub waiting: f64,
    pub due: f64,
    pub claimed: f64,
    pub again: f64,
    pub shards: Vec<QueueShardSize>,
}

/// One id or an array of ids.
fn ids(v: &Unknown, field: &str) -> flowguard_core::Result<Vec<String>> {
    match v.get_type().map_err(|e| flowguard_core::Error::internal(format!("cannot read {field}: {e}")))? {
        ValueType::String => Ok(vec![args::string(v, field)?]),
        _ => args::strings(v, field),
    }
}

fn num(o: &Object, name: &str) -> flowguard_core::Result<Option<f64>> {
    args::opt_number(&args::prop(o, name)?, name)
}

fn settle_result(items: Vec<core::Settled>) -> QueueSettleResult {
    let items: Vec<QueueSettled> = items
        .into_iter()
        .map(|s| QueueSettled {
            id: s.id,
            shard: s.shard,
            ok: matches!(s.outcome, SettleOutcome::Done { .. }),
            reason: s.outcome.reason().map(str::to_string),
            requeued: matches!(s.outcome, SettleOutcome::Done { requeued: true }),
            due_at: s.due_at.map(|v| v as f64),
        })
        .collect();
    let done = items.iter().filter(|i| i.ok).count() as u32;
    QueueSettleResult { done, refused: items.len() as u32 - done, items }
}

#[napi]
impl Flowguard {
    /// Enqueues one id or many: each to shard `fnv1a(id) % shards`, one atomic step per shard.
    /// An id already waiting is not added again.
    #[napi(
        ts_args_type = "queue: string, ids: string | string[], options?: QueueEnqueueOptions",
        ts_return_type = "Promise<QueueEnqueueResult>"
    )]
    pub fn enqueue<'e>(
        &self,
        env: &'e Env,
        queue: Unknown<'e>,
        ids_arg: Unknown<'e>,
        options: Option<Unknown<'e>>,
    ) -> Result<PromiseRaw<'e, QueueEnqueueResult>> {
        let parsed = (|| {
            let opts = match args::opt_object(options.as_ref(), "options")? {
                None => EnqueueOptions::default(),
                Some(o) => EnqueueOptions {
                    shards: num(&o, "shards")?,
                    delay_ms: num(&o, "delayMs")?,
                    debounce: args::opt_bool(&args::prop(&o, "debounce")?, "debounce")?.unwrap_or(false),
                },
            };
            Ok((args::string(&queue, "queue")?, ids(&ids_arg, "ids")?, opts))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (queue, ids, opts) = parsed?;
            let items = client.enqueue(&queue, ids, opts).await?;
            let count = |o: core::EnqueueOutcome| items.iter().filter(|e| e.outcome == o).count() as u32;
            Ok(QueueEnqueueResult {
                added: count(core::EnqueueOutcome::Added),
                duplicates: count(core::EnqueueOutcome::Duplicate),
                debounced: count(core::EnqueueOutcome::Debounced),
                claimed: count(core::EnqueueOutcome::Claimed),
                items: items
                    .into_iter()
                    .map(|e| QueueEnqueued {
                        id: e.id,
                        shard: e.shard,
                        outcome: e.outcome.as_str().to_string(),
                        due_at: e.due_at as f64,
                    })
                    .collect(),
            })
        })
    }

    /// Atomically claims up to `limit` due ids, oldest first, for the visibility timeout. Two
    /// reads never hold the same id; ids not acked or released in time become due again.
    #[napi(
        ts_args_type = "queue: string, options?: QueueReadOptions",
        ts_return_type = "Promise<QueueBatch>"
    )]
    pub fn read_batch<'e>(
        &self,
        env: &'e Env,
        queue: Unknown<'e>,
        options: Option<Unknown<'e>>,
    ) -> Result<PromiseRaw<'e, QueueBatch>> {
        let parsed = (|| {
            let opts = match args::opt_object(options.as_ref(), "options")? {
                None => ReadOptions::default(),
                Some(o) => ReadOptions {
                    shards: num(&o, "shards")?,
                    shard: num(&o, "shard")?,
                    limit: num(&o, "limit")?,
                    visibility_timeout_ms: num(&o, "visibilityTimeoutMs")?,
                },
            };
            Ok((args::string(&queue, "queue")?, opts))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (queue, opts) = parsed?;
            let b = client.read_batch(&queue, opts).await?;
            Ok(QueueBatch {
                owner: b.owner,
                visible_until: b.visible_until as f64,
                ids: b.items.iter().map(|d| d.id.clone()).collect(),
                items: b
                    .items
                    .into_iter()
                    .map(|d| QueueItem { id: d.id, shard: d.shard, due_at: d.due_at as f64 })
                    .collect(),
            })
        })
    }

    /// Acks ids read with owner token `owner`: they leave the queue (an id enqueued again while
    /// claimed waits again). Ids not held by `owner` are refused per item.
    #[napi(
        ts_args_type = "queue: string, owner: string, ids: string | string[], options?: QueueAckOptions",
        ts_return_type = "Promise<QueueSettleResult>"
    )]
    pub fn ack<'e>(
        &self,
        env: &'e Env,
        queue: Unknown<'e>,
        owner: Unknown<'e>,
        ids_arg: Unknown<'e>,
        options: Option<Unknown<'e>>,
    ) -> Result<PromiseRaw<'e, QueueSettleResult>> {
        let parsed = (|| {
            let shards = match args::opt_object(options.as_ref(), "options")? {
                None => None,
                Some(o) => num(&o, "shards")?,
            };
            Ok((
                args::string(&queue, "queue")?,
                args::string(&owner, "owner")?,
                ids(&ids_arg, "ids")?,
                shards,
            ))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (queue, owner, ids, shards) = parsed?;
            Ok(settle_result(client.ack(&queue, &owner, ids, shards).await?))
        })
    }

    /// Releases ids read with owner token `owner`: they become due again (after `delayMs`).
    #[napi(
        ts_args_type = "queue: string, owner: string, ids: string | string[], options?: QueueReleaseOptions",
        ts_return_type = "Promise<QueueSettleResult>"
    )]
    pub fn release<'e>(
        &self,
        env: &'e Env,
        queue: Unknown<'e>,
        owner: Unknown<'e>,
        ids_arg: Unknown<'e>,
        options: Option<Unknown<'e>>,
    ) -> Result<PromiseRaw<'e, QueueSettleResult>> {
        let parsed = (|| {
            let (shards, delay) = match args::opt_object(options.as_ref(), "options")? {
                None => (None, None),
                Some(o) => (num(&o, "shards")?, num(&o, "delayMs")?),
            };
            Ok((
                args::string(&queue, "queue")?,
                args::string(&owner, "owner")?,
                ids(&ids_arg, "ids")?,
                shards,
                delay,
            ))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (queue, owner, ids, shards, delay) = parsed?;
            Ok(settle_result(client.release(&queue, &owner, ids, shards, delay).await?))
        })
    }

    /// The next waiting ids by due time, without claiming them.
    #[napi(
        ts_args_type = "queue: string, options?: QueuePeekOptions",
        ts_return_type = "Promise<QueueEntry[]>"
    )]
    pub fn peek<'e>(
        &self,
        env: &'e Env,
        queue: Unknown<'e>,
        options: Option<Unknown<'e>>,
    ) -> Result<PromiseRaw<'e, Vec<QueueEntry>>> {
        let parsed = (|| {
            let (shards, shard, limit) = match args::opt_object(options.as_ref(), "options")? {
                None => (None, None, None),
                Some(o) => (num(&o, "shards")?, num(&o, "shard")?, num(&o, "limit")?),
            };
            Ok((args::string(&queue, "queue")?, shards, shard, limit))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (queue, shards, shard, limit) = parsed?;
            Ok(client
                .peek(&queue, shards, shard, limit)
                .await?
                .into_iter()
                .map(|w| QueueEntry { id: w.id, shard: w.shard, due_at: w.due_at as f64, due: w.due })
                .collect())
        })
    }

    /// Counts of waiting (and due), claimed and enqueued-again ids, in total and per shard.
    #[napi(ts_args_type = "queue: string, options?: QueueSizeOptions", ts_return_type = "Promise<QueueSize>")]
    pub fn queue_size<'e>(
        &self,
        env: &'e Env,
        queue: Unknown<'e>,
        options: Option<Unknown<'e>>,
    ) -> Result<PromiseRaw<'e, QueueSize>> {
        let parsed = (|| {
            let (shards, shard) = match args::opt_object(options.as_ref(), "options")? {
                None => (None, None),
                Some(o) => (num(&o, "shards")?, num(&o, "shard")?),
            };
            Ok((args::string(&queue, "queue")?, shards, shard))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (queue, shards, shard) = parsed?;
            let s = client.queue_size(&queue, shards, shard).await?;
            Ok(QueueSize {
                waiting: s.waiting as f64,
                due: s.due as f64,
                claimed: s.claimed as f64,
                again: s.again as f64,
                shards: s
                    .shards
                    .into_iter()
                    .map(|x| QueueShardSize {
                        shard: x.shard,
                        waiting: x.waiting as f64,
                        due: x.due as f64,
                        claimed: x.claimed as f64,
                        again: x.again as f64,
                    })
                    .collect(),
            })
        })
    }

    /// The shard of `id` in a queue of `shards` shards: `fnv1a(id) % shards`, as the npm
    /// package `fnv1a` computes it.
    #[napi(ts_args_type = "id: string, shards: number", ts_return_type = "number")]
    pub fn shard_of(env: &Env, id: Unknown, shards: Unknown) -> Result<u32> {
        let r = (|| {
            let id = args::string(&id, "id")?;
            let n = args::opt_number(&shards, "shards")?
                .ok_or_else(|| flowguard_core::Error::invalid("shards must be a number"))?;
            let n = flowguard_core::validate::integer("shards", n, 1, core::MAX_SHARDS)? as u32;
            Ok::<_, flowguard_core::Error>(core::shard_of(&id, n))
        })();
        r.map_err(|e| js_error(env, &e))
    }
}
