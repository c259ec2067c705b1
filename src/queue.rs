//! Dedup Queue methods of `Flowguard`.

use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;

use super::client::Flowguard;
use super::from_js::{js_input, one_or_many, opt, opt_ms, whole, Arg, Field};
use super::{js_error, now_or_promise, promise};
use flowguard_core::queue::{self as core, EnqueueOptions, ReadOptions, SettleOutcome, ShardSelect};

/// Options of `enqueue`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct QueueEnqueueOptions {
    /// The queue's shard count (1 to 1024). Default 1. Every producer and consumer of a queue
    /// must use the same count.
    pub shards: Option<f64>,
    /// Make the ids due this many ms from now. Default 0.
    pub delay_ms: Option<f64>,
    /// Move a waiting id's due time to now + `delayMs` on every enqueue (instead of keeping its
    /// first one), so it is read only once updates to it stop. Default false.
    pub debounce: Option<bool>,
    /// With `debounce` only: never move an id's due time past its first enqueue + this many ms
    /// (more than 0, at most 365 days; Trigger.dev's `maxDelay`), so an id enqueued again and
    /// again is still read. Counted from the first enqueue with `maxDelayMs` since the id
    /// entered the waiting set. Default: no cap.
    pub max_delay_ms: Option<f64>,
}

js_input!(QueueEnqueueOptions {
    shards = "shards",
    delay_ms = "delayMs",
    debounce = "debounce",
    max_delay_ms = "maxDelayMs"
});

/// Options of `readBatch`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct QueueReadOptions {
    /// The queue's shard count (1 to 1024). Default 1.
    pub shards: Option<f64>,
    /// Read only this shard (0 to shards - 1). Default: all shards.
    pub shard: Option<f64>,
    /// The most ids to claim (1 to 10000). Default 100.
    pub limit: Option<f64>,
    /// How long the ids are held before they become due again unless acked or released, in ms.
    /// Default 600000.
    pub visibility_timeout_ms: Option<f64>,
    /// Move an id delivered this many times without an ack (its claims expired or were
    /// released) to the queue's dead letters instead of delivering it again (1 to 1000; SQS's
    /// `maxReceiveCount`). Only reads with it count deliveries. Default: none.
    pub max_deliveries: Option<f64>,
}

js_input!(QueueReadOptions {
    shards = "shards",
    shard = "shard",
    limit = "limit",
    visibility_timeout_ms = "visibilityTimeoutMs",
    max_deliveries = "maxDeliveries"
});

/// `readBatch`'s result as the native side gives it to lib/queue-results.js (a JavaScript array,
/// no object per id; index.d.ts has `QueueBatch`): the owner token, until when the ids are held,
/// the ids, per id its shard and when it became due (ms since the epoch), and the shards that
/// could not be read (None: every shard answered).
type BatchCompact = (String, f64, Vec<String>, Float64Array, Option<Vec<u32>>);

/// Options of `ack`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct QueueAckOptions {
    /// The queue's shard count (1 to 1024). Default 1.
    pub shards: Option<f64>,
}

js_input!(QueueAckOptions { shards = "shards" });

/// Options of `release`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct QueueReleaseOptions {
    /// The queue's shard count (1 to 1024). Default 1.
    pub shards: Option<f64>,
    /// Make the ids due again this many ms from now. Default 0.
    pub delay_ms: Option<f64>,
}

js_input!(QueueReleaseOptions { shards = "shards", delay_ms = "delayMs" });

/// Options of `peek`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct QueuePeekOptions {
    /// The queue's shard count (1 to 1024). Default 1.
    pub shards: Option<f64>,
    /// Only this shard (0 to shards - 1). Default: all shards.
    pub shard: Option<f64>,
    /// Default 100, at most 10000.
    pub limit: Option<f64>,
}

js_input!(QueuePeekOptions { shards = "shards", shard = "shard", limit = "limit" });

#[napi(object)]
pub struct QueueEntry {
    pub id: String,
    pub shard: u32,
    pub due_at: f64,
    /// Due now.
    pub due: bool,
}

/// Options of `queueSize`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct QueueSizeOptions {
    /// The queue's shard count (1 to 1024). Default 1.
    pub shards: Option<f64>,
    /// Only this shard (0 to shards - 1). Default: all shards.
    pub shard: Option<f64>,
}

js_input!(QueueSizeOptions { shards = "shards", shard = "shard" });

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
    /// Dead letters: ids a read with `maxDeliveries` found delivered that many times.
    pub dead: f64,
}

#[napi(object)]
pub struct QueueSize {
    pub waiting: f64,
    pub due: f64,
    pub claimed: f64,
    pub again: f64,
    pub dead: f64,
    pub shards: Vec<QueueShardSize>,
}

/// Options of `deadLetters`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct QueueDeadOptions {
    /// The queue's shard count (1 to 1024). Default 1.
    pub shards: Option<f64>,
    /// Only this shard (0 to shards - 1). Default: all shards.
    pub shard: Option<f64>,
    /// Skip this many (0 to 100000; pass the previous page's `nextOffset`). Default 0.
    pub offset: Option<f64>,
    /// The most to list (1 to 1000). Default 100.
    pub limit: Option<f64>,
}

js_input!(QueueDeadOptions { shards = "shards", shard = "shard", offset = "offset", limit = "limit" });

#[napi(object)]
pub struct QueueDeadLetter {
    pub id: String,
    pub shard: u32,
    /// How many times it was delivered without an ack.
    pub deliveries: f64,
    /// When it died, in ms since the epoch (the backend's clock).
    pub died_at: f64,
}

#[napi(object)]
pub struct QueueDeadPage {
    /// Oldest death first.
    pub items: Vec<QueueDeadLetter>,
    /// The offset of the next page; absent on the last.
    pub next_offset: Option<f64>,
}

/// Options of `requeueDead`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct QueueRequeueOptions {
    /// The queue's shard count (1 to 1024). Default 1.
    pub shards: Option<f64>,
}

js_input!(QueueRequeueOptions { shards = "shards" });

#[napi(object)]
pub struct QueueRequeued {
    pub id: String,
    pub shard: u32,
    /// `requeued`: it was a dead letter and waits again, due now, its deliveries reset;
    /// `not_dead`: it was no dead letter (nothing changed).
    #[napi(ts_type = "'requeued' | 'not_dead'")]
    pub outcome: String,
    /// When it is due, when requeued.
    pub due_at: Option<f64>,
}

#[napi(object)]
pub struct QueueRequeueResult {
    pub requeued: u32,
    pub not_dead: u32,
    /// One entry per id given, in order.
    pub items: Vec<QueueRequeued>,
}

/// A whole-number option (shards, shard, limit).
fn count(name: &'static str, v: Option<f64>) -> flowguard_core::Result<Option<u64>> {
    whole(Field("options", name), v)
}

/// A duration option in ms.
fn duration(name: &'static str, v: Option<f64>) -> flowguard_core::Result<Option<std::time::Duration>> {
    opt_ms(Field("options", name), v)
}

/// The code of an enqueue outcome in the compact result (lib/queue-results.js `ENQUEUED`).
fn enqueue_code(o: core::EnqueueOutcome) -> f64 {
    match o {
        core::EnqueueOutcome::Added => 0.0,
        core::EnqueueOutcome::Duplicate => 1.0,
        core::EnqueueOutcome::Debounced => 2.0,
        core::EnqueueOutcome::Claimed => 3.0,
        core::EnqueueOutcome::Dead => 4.0,
    }
}

/// An ack's or release's result as numbers, per id in the order given: the outcome's code (0
/// done, 1 done and requeued, 2 not claimed, 3 not owner, 4 expired: lib/queue-results.js
/// `SETTLED`), the shard, and when the id is due again (NaN: it is not waiting again).
fn settle_numbers(items: Vec<core::Settled>) -> Float64Array {
    let mut out = Vec::with_capacity(3 * items.len());
    for s in items {
        out.push(match s.outcome {
            SettleOutcome::Done { requeued: false } => 0.0,
            SettleOutcome::Done { requeued: true } => 1.0,
            SettleOutcome::NotClaimed => 2.0,
            SettleOutcome::NotOwner => 3.0,
            SettleOutcome::Expired => 4.0,
        });
        out.push(s.shard as f64);
        out.push(s.due_at.map_or(f64::NAN, |v| v as f64));
    }
    Float64Array::new(out)
}

#[napi]
impl Flowguard {
    /// Enqueues one id or many: each to shard `fnv1a(id) % shards`, one atomic step per shard.
    /// An id already waiting is not added again. index.js's `enqueue` builds the result from the
    /// numbers this returns, per id given: the outcome's code, the shard, the due time (the value
    /// itself when done at once, else a Promise of it).
    #[napi(js_name = "_enqueue", skip_typescript)]
    pub fn enqueue<'e>(
        &self,
        env: &'e Env,
        queue: Arg<'e, String>,
        ids: Arg<'e, Either<String, Vec<String>>>,
        options: Option<Arg<'e, QueueEnqueueOptions>>,
    ) -> Result<Unknown<'e>> {
        let parsed = (|| {
            let (queue, ids) = (queue.get("queue")?, one_or_many(ids.get("ids")?));
            let opts = match opt(&options, "options")? {
                None => EnqueueOptions::default(),
                Some(o) => EnqueueOptions {
                    shards: count("shards", o.shards)?,
                    delay: duration("delayMs", o.delay_ms)?,
                    debounce: o.debounce.unwrap_or(false),
                    max_delay: duration("maxDelayMs", o.max_delay_ms)?,
                },
            };
            Ok((queue, ids, opts))
        })();
        let client = self.client.clone();
        now_or_promise(env, async move {
            let (queue, ids, opts) = parsed?;
            let items = client.enqueue(&queue, ids, opts).await?;
            let mut out = Vec::with_capacity(3 * items.len());
            for e in items {
                out.push(enqueue_code(e.outcome));
                out.push(e.shard as f64);
                out.push(e.due_at as f64);
            }
            Ok(Float64Array::new(out))
        })
    }

    /// Atomically claims up to `limit` due ids, oldest first, for the visibility timeout. Two
    /// reads never hold the same id; ids not acked or released in time become due again.
    /// index.js's `readBatch` builds the result (see [`BatchCompact`]).
    #[napi(js_name = "_readBatch", skip_typescript)]
    pub fn read_batch<'e>(
        &self,
        env: &'e Env,
        queue: Arg<'e, String>,
        options: Option<Arg<'e, QueueReadOptions>>,
    ) -> Result<Unknown<'e>> {
        let parsed = (|| {
            let queue = queue.get("queue")?;
            let opts = match opt(&options, "options")? {
                None => ReadOptions::default(),
                Some(o) => ReadOptions {
                    shards: count("shards", o.shards)?,
                    shard: count("shard", o.shard)?,
                    limit: count("limit", o.limit)?,
                    visibility_timeout: duration("visibilityTimeoutMs", o.visibility_timeout_ms)?,
                    max_deliveries: count("maxDeliveries", o.max_deliveries)?,
                },
            };
            Ok((queue, opts))
        })();
        let client = self.client.clone();
        now_or_promise(env, async move {
            let (queue, opts) = parsed?;
            let b = client.read_batch(&queue, opts).await?;
            let mut numbers = Vec::with_capacity(2 * b.items.len());
            let mut ids = Vec::with_capacity(b.items.len());
            for d in b.items {
                numbers.push(d.shard as f64);
                numbers.push(d.due_at as f64);
                ids.push(d.id);
            }
            let failed = (!b.failed_shards.is_empty()).then_some(b.failed_shards);
            let batch: BatchCompact =
                (b.owner, b.visible_until as f64, ids, Float64Array::new(numbers), failed);
            Ok(batch)
        })
    }

    /// Acks ids read with owner token `owner`: they leave the queue (an id enqueued again while
    /// claimed waits again). Ids not held by `owner` are refused per item.
    #[napi(js_name = "_ack", skip_typescript)]
    pub fn ack<'e>(
        &self,
        env: &'e Env,
        queue: Arg<'e, String>,
        owner: Arg<'e, String>,
        ids: Arg<'e, Either<String, Vec<String>>>,
        options: Option<Arg<'e, QueueAckOptions>>,
    ) -> Result<Unknown<'e>> {
        let parsed = (|| {
            let (queue, owner, ids) =
                (queue.get("queue")?, owner.get("owner")?, one_or_many(ids.get("ids")?));
            let shards = match opt(&options, "options")? {
                None => None,
                Some(o) => count("shards", o.shards)?,
            };
            Ok((queue, owner, ids, shards))
        })();
        let client = self.client.clone();
        now_or_promise(env, async move {
            let (queue, owner, ids, shards) = parsed?;
            Ok(settle_numbers(client.ack(&queue, &owner, ids, shards).await?))
        })
    }

    /// Releases ids read with owner token `owner`: they become due again (after `delayMs`).
    #[napi(js_name = "_release", skip_typescript)]
    pub fn release<'e>(
        &self,
        env: &'e Env,
        queue: Arg<'e, String>,
        owner: Arg<'e, String>,
        ids: Arg<'e, Either<String, Vec<String>>>,
        options: Option<Arg<'e, QueueReleaseOptions>>,
    ) -> Result<Unknown<'e>> {
        let parsed = (|| {
            let (queue, owner, ids) =
                (queue.get("queue")?, owner.get("owner")?, one_or_many(ids.get("ids")?));
            let (shards, delay) = match opt(&options, "options")? {
                None => (None, None),
                Some(o) => (count("shards", o.shards)?, duration("delayMs", o.delay_ms)?),
            };
            Ok((queue, owner, ids, shards, delay))
        })();
        let client = self.client.clone();
        now_or_promise(env, async move {
            let (queue, owner, ids, shards, delay) = parsed?;
            Ok(settle_numbers(client.release(&queue, &owner, ids, shards, delay).await?))
        })
    }

    /// The next waiting ids by due time, without claiming them.
    #[napi]
    pub fn peek<'e>(
        &self,
        env: &'e Env,
        queue: Arg<'e, String>,
        options: Option<Arg<'e, QueuePeekOptions>>,
    ) -> Result<PromiseRaw<'e, Vec<QueueEntry>>> {
        let parsed = (|| {
            let queue = queue.get("queue")?;
            let (select, limit) = match opt(&options, "options")? {
                None => (ShardSelect::default(), None),
                Some(o) => (
                    ShardSelect { shards: count("shards", o.shards)?, shard: count("shard", o.shard)? },
                    count("limit", o.limit)?,
                ),
            };
            Ok((queue, select, limit))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (queue, select, limit) = parsed?;
            Ok(client
                .peek(&queue, select, limit)
                .await?
                .into_iter()
                .map(|w| QueueEntry { id: w.id, shard: w.shard, due_at: w.due_at as f64, due: w.due })
                .collect())
        })
    }

    /// Counts of waiting (and due), claimed and enqueued-again ids, in total and per shard.
    #[napi]
    pub fn queue_size<'e>(
        &self,
        env: &'e Env,
        queue: Arg<'e, String>,
        options: Option<Arg<'e, QueueSizeOptions>>,
    ) -> Result<PromiseRaw<'e, QueueSize>> {
        let parsed = (|| {
            let queue = queue.get("queue")?;
            let select = match opt(&options, "options")? {
                None => ShardSelect::default(),
                Some(o) => {
                    ShardSelect { shards: count("shards", o.shards)?, shard: count("shard", o.shard)? }
                }
            };
            Ok((queue, select))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (queue, select) = parsed?;
            let s = client.queue_size(&queue, select).await?;
            Ok(QueueSize {
                waiting: s.waiting as f64,
                due: s.due as f64,
                claimed: s.claimed as f64,
                again: s.again as f64,
                dead: s.dead as f64,
                shards: s
                    .shards
                    .into_iter()
                    .map(|x| QueueShardSize {
                        shard: x.shard,
                        waiting: x.waiting as f64,
                        due: x.due as f64,
                        claimed: x.claimed as f64,
                        again: x.again as f64,
                        dead: x.dead as f64,
                    })
                    .collect(),
            })
        })
    }

    /// One page of the queue's dead letters (ids a read with `maxDeliveries` found delivered
    /// that many times), oldest death first.
    #[napi]
    pub fn dead_letters<'e>(
        &self,
        env: &'e Env,
        queue: Arg<'e, String>,
        options: Option<Arg<'e, QueueDeadOptions>>,
    ) -> Result<PromiseRaw<'e, QueueDeadPage>> {
        let parsed = (|| {
            let queue = queue.get("queue")?;
            let (select, offset, limit) = match opt(&options, "options")? {
                None => (ShardSelect::default(), None, None),
                Some(o) => (
                    ShardSelect { shards: count("shards", o.shards)?, shard: count("shard", o.shard)? },
                    count("offset", o.offset)?,
                    count("limit", o.limit)?,
                ),
            };
            Ok((queue, select, offset, limit))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (queue, select, offset, limit) = parsed?;
            let page = client.dead_letters(&queue, select, offset, limit).await?;
            Ok(QueueDeadPage {
                next_offset: page.next_offset.map(|v| v as f64),
                items: page
                    .items
                    .into_iter()
                    .map(|d| QueueDeadLetter {
                        id: d.id,
                        shard: d.shard,
                        deliveries: d.deliveries as f64,
                        died_at: d.died_at as f64,
                    })
                    .collect(),
            })
        })
    }

    /// Puts dead letters back as waiting, due now, their deliveries reset; per id `requeued` or
    /// `not_dead` (left as it is).
    #[napi]
    pub fn requeue_dead<'e>(
        &self,
        env: &'e Env,
        queue: Arg<'e, String>,
        ids: Arg<'e, Either<String, Vec<String>>>,
        options: Option<Arg<'e, QueueRequeueOptions>>,
    ) -> Result<PromiseRaw<'e, QueueRequeueResult>> {
        let parsed = (|| {
            let (queue, ids) = (queue.get("queue")?, one_or_many(ids.get("ids")?));
            let shards = match opt(&options, "options")? {
                None => None,
                Some(o) => count("shards", o.shards)?,
            };
            Ok((queue, ids, shards))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (queue, ids, shards) = parsed?;
            let items: Vec<QueueRequeued> = client
                .requeue_dead(&queue, ids, shards)
                .await?
                .into_iter()
                .map(|r| QueueRequeued {
                    id: r.id,
                    shard: r.shard,
                    outcome: if r.requeued { "requeued" } else { "not_dead" }.to_string(),
                    due_at: r.due_at.map(|v| v as f64),
                })
                .collect();
            let requeued = items.iter().filter(|i| i.due_at.is_some()).count() as u32;
            Ok(QueueRequeueResult { requeued, not_dead: items.len() as u32 - requeued, items })
        })
    }

    /// The shard of `id` in a queue of `shards` shards: `fnv1a(id) % shards`, as the npm
    /// package `fnv1a` computes it.
    /// A string with an unpaired surrogate is refused (`ERR_INVALID_ARGUMENT`), as every name is.
    #[napi]
    pub fn shard_of<'e>(env: &'e Env, id: Arg<'e, String>, shards: Arg<'e, f64>) -> Result<u32> {
        let r = (|| {
            let id = id.get("id")?;
            let n = whole("shards", Some(shards.get("shards")?))?.unwrap_or(0);
            let n = flowguard_core::validate::range("shards", n, 1, core::MAX_SHARDS)? as u32;
            Ok::<_, flowguard_core::Error>(core::shard_of(&id, n))
        })();
        r.map_err(|e| js_error(env, &e))
    }
}
