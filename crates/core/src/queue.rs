//! Dedup Queue: ids waiting to be processed once, spread over shards, read in claimed batches.
//!
//! Each shard keeps four sets:
//! - waiting: id -> due time. Enqueueing an id already waiting keeps its first due time (or, in
//!   debounce mode, moves it to the last enqueue plus the delay).
//! - claimed: id -> visibility deadline, with the owner token of the read that claimed it. A claim
//!   is live while its deadline is in the future; an expired claim goes back to waiting (due at
//!   its deadline) before any other step of that shard looks at the shard.
//! - again: ids enqueued while claimed, with their due time. They go back to waiting when the
//!   claim ends (ack, release or expiry), so an update made during processing is never lost and an
//!   id is never held by two readers at once.
//!
//! The queue as a whole records the shard count it holds ids for (and how many shards hold
//! any), so a producer or consumer that disagrees gets an error on every call instead of silently
//! missing ids. The count can change only while the queue is empty.
//!
//! An id goes to shard `fnv1a(id) % shards`, computed as the npm package `fnv1a` does (32-bit
//! FNV-1a over the UTF-16 code units of the string).

use std::time::Duration;

use futures_util::future::join_all;

use crate::backend::BoxFuture;
use crate::client::Client;
use crate::error::{Error, ErrorCode, FieldPath, Result};
use crate::tracker::truncate;
use crate::{token, validate};

/// How long a read batch is held before its ids become due again: 600 s.
pub const DEFAULT_VISIBILITY_MS: u64 = 600_000;
/// The most shards a queue may have.
pub const MAX_SHARDS: u64 = 1024;
/// Default and largest batch of a read, and largest page of a peek.
pub const DEFAULT_READ_LIMIT: u64 = 100;
pub const MAX_READ_LIMIT: u64 = 10_000;
/// The largest `max_deliveries` of a read (SQS's `maxReceiveCount` range, 1 to 1000).
pub const MAX_DELIVERIES: u64 = 1000;
/// Default and largest page of a dead-letter listing, and the largest offset into it.
pub const DEFAULT_DEAD_LIMIT: u64 = 100;
pub const MAX_DEAD_LIMIT: u64 = 1000;
pub const MAX_DEAD_OFFSET: u64 = 100_000;

const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 16_777_619;

/// 32-bit FNV-1a over the UTF-16 code units of `s`, as the npm package `fnv1a` computes it.
pub fn fnv1a(s: &str) -> u32 {
    let mut h = FNV_OFFSET;
    for unit in s.encode_utf16() {
        h ^= unit as u32;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// The shard of `id` in a queue of `shards` shards.
pub fn shard_of(id: &str, shards: u32) -> u32 {
    fnv1a(id) % shards.max(1)
}

/// One shard of one queue, as backends address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRef<'a> {
    pub queue: &'a str,
    pub shard: u32,
    /// The shard count of the caller, checked against the one the queue holds ids for.
    pub shards: u32,
}

/// What happened to one enqueued id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueOutcome {
    /// It was not in the queue: it is waiting now.
    Added,
    /// It was already waiting (or already queued again while claimed): its due time is unchanged.
    Duplicate,
    /// It was already waiting (or queued again): debounce moved its due time.
    Debounced,
    /// It is claimed by a reader now: it will be delivered once more after that claim ends.
    Claimed,
    /// It is a dead letter: it stays one (not enqueued) until requeued.
    Dead,
}

impl EnqueueOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            EnqueueOutcome::Added => "added",
            EnqueueOutcome::Duplicate => "duplicate",
            EnqueueOutcome::Debounced => "debounced",
            EnqueueOutcome::Claimed => "claimed",
            EnqueueOutcome::Dead => "dead",
        }
    }
}

/// How an enqueue treats an id already waiting (or enqueued again while claimed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Debounce {
    /// Its due time is kept.
    Off,
    /// Its due time moves to now + the delay on every enqueue; with `max_delay_ms`, never past
    /// its first enqueue + `max_delay_ms` (see [`crate::rules::queue`]).
    On { max_delay_ms: Option<u64> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueued {
    pub id: String,
    pub shard: u32,
    pub outcome: EnqueueOutcome,
    /// When the id is due (ms since the epoch, the backend's clock).
    pub due_at: i64,
}

/// One id of a read batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: String,
    pub shard: u32,
    /// When it became due.
    pub due_at: i64,
}

/// What one shard's claim gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardClaim {
    /// The visibility deadline of the claimed ids.
    pub visible_until: i64,
    /// (id, due time), oldest first.
    pub items: Vec<(String, i64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The owner token (receipt) of this read: pass it to ack and release.
    pub owner: String,
    /// Until when the ids are held (the earliest over the shards read); 0 when nothing was claimed.
    pub visible_until: i64,
    pub items: Vec<Delivery>,
    /// Shards that gave no answer (unreachable, no reply within the command timeout, or a claim
    /// that started too late to be awaited and took nothing): their due ids stay due for a later
    /// read. A shard that answered is never listed. Empty when every shard answered.
    pub failed_shards: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettleAction {
    Ack,
    Release { delay_ms: u64 },
}

/// How an ack or release of one id ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettleOutcome {
    /// Done. `requeued`: the id was enqueued again while claimed and is waiting again (ack), or
    /// that later enqueue's due time was kept (release).
    Done { requeued: bool },
    /// The id is not claimed (never was, already acked or released, or its claim expired and it
    /// went back to waiting).
    NotClaimed,
    /// Another read holds it now.
    NotOwner,
    /// Still held with this owner token but past its visibility deadline: it will be delivered
    /// again; the ack or release was not applied.
    Expired,
}

impl SettleOutcome {
    pub fn reason(self) -> Option<&'static str> {
        match self {
            SettleOutcome::Done { .. } => None,
            SettleOutcome::NotClaimed => Some("not_claimed"),
            SettleOutcome::NotOwner => Some("not_owner"),
            SettleOutcome::Expired => Some("expired"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub id: String,
    pub shard: u32,
    pub outcome: SettleOutcome,
    /// When the id is due again, when it is waiting again after this call.
    pub due_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub id: String,
    pub shard: u32,
    pub due_at: i64,
    /// Due now (by the backend's clock).
    pub due: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardSize {
    pub shard: u32,
    /// Ids waiting, due or not.
    pub waiting: u64,
    /// Of those, ids due now.
    pub due: u64,
    /// Ids held by a reader.
    pub claimed: u64,
    /// Claimed ids enqueued again, to be delivered after their claim ends.
    pub again: u64,
    /// Dead letters (see [`crate::rules::queue::deliver`]).
    pub dead: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSize {
    pub waiting: u64,
    pub due: u64,
    pub claimed: u64,
    pub again: u64,
    pub dead: u64,
    pub shards: Vec<ShardSize>,
}

/// One dead letter of a shard, as a backend lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardDead {
    pub id: String,
    /// How many times it was delivered (the read's `max_deliveries` when it died).
    pub deliveries: u64,
    /// When it died (ms since the epoch, the backend's clock).
    pub died_at: i64,
}

/// One dead letter of a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub id: String,
    pub shard: u32,
    pub deliveries: u64,
    pub died_at: i64,
}

/// A page of a queue's dead letters, oldest death first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadPage {
    pub items: Vec<DeadLetter>,
    /// The offset of the next page, absent on the last.
    pub next_offset: Option<u64>,
}

/// What a requeue did with one id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requeued {
    pub id: String,
    pub shard: u32,
    /// It was a dead letter and waits again, due at `due_at`; false: it was no dead letter.
    pub requeued: bool,
    pub due_at: Option<i64>,
}

/// What a backend must do for the Dedup Queue. Each method is one atomic step on one shard; a
/// step first checks the caller's shard count against the queue's (see [`shard_mismatch`]) and
/// returns expired claims of that shard to waiting.
pub trait QueueBackend {
    /// Enqueues ids (all of this shard) and reports, per id, the outcome and due time.
    fn enqueue<'a>(
        &'a self,
        at: ShardRef<'a>,
        ids: &'a [String],
        delay_ms: u64,
        debounce: Debounce,
    ) -> BoxFuture<'a, Vec<(EnqueueOutcome, i64)>>;
    /// Claims up to `limit` due ids, oldest first, for `visibility_ms`. With `max_deliveries`,
    /// counts the deliveries of the ids it claims and moves those delivered that many times to
    /// the dead letters instead ([`crate::rules::queue::deliver`]), at most `limit` of them per
    /// call; without, it neither counts nor checks.
    fn claim<'a>(
        &'a self,
        at: ShardRef<'a>,
        owner: &'a str,
        limit: u64,
        visibility_ms: u64,
        max_deliveries: Option<u64>,
    ) -> BoxFuture<'a, ShardClaim>;
    /// Acks or releases ids of this shard held by `owner`; per id the outcome and the due time
    /// when the id is waiting again.
    fn settle<'a>(
        &'a self,
        at: ShardRef<'a>,
        owner: &'a str,
        ids: &'a [String],
        action: SettleAction,
    ) -> BoxFuture<'a, Vec<(SettleOutcome, Option<i64>)>>;
    /// The first `limit` waiting ids by due time, and the backend's time now.
    fn peek<'a>(&'a self, at: ShardRef<'a>, limit: u64) -> BoxFuture<'a, (i64, Vec<(String, i64)>)>;
    fn size<'a>(&'a self, at: ShardRef<'a>) -> BoxFuture<'a, ShardSize>;
    /// The first `limit` dead letters by the time they died, then id.
    fn dead_letters<'a>(&'a self, at: ShardRef<'a>, limit: u64) -> BoxFuture<'a, Vec<ShardDead>>;
    /// Makes dead letters of this shard waiting again, due now, their counts dropped
    /// ([`crate::rules::queue::requeue`]); per id its due time, or `None` when it was no dead letter.
    fn requeue_dead<'a>(&'a self, at: ShardRef<'a>, ids: &'a [String]) -> BoxFuture<'a, Vec<Option<i64>>>;
}

/// The error of a caller whose shard count differs from the one the queue holds ids for.
pub fn shard_mismatch(at: ShardRef<'_>, stored: u64) -> Error {
    Error::invalid(format!(
        "shards is {}, but queue {:?} holds ids enqueued with shards = {stored}; every producer and consumer \
         of a queue must use the same shard count (it can change once the queue is empty)",
        at.shards,
        truncate(at.queue, 80)
    ))
}

/// Options of an enqueue, before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnqueueOptions {
    /// The queue's shard count, 1 to [`MAX_SHARDS`]. Default 1.
    pub shards: Option<u64>,
    /// Make the ids due this long after now. Default 0.
    pub delay: Option<Duration>,
    /// Move an id's due time to now + delay on every enqueue, instead of keeping the first one.
    pub debounce: bool,
    /// With `debounce` only: never move an id's due time past its first enqueue + this (more than
    /// 0, at most 365 days; Trigger.dev's `maxDelay`). Default: no cap.
    pub max_delay: Option<Duration>,
}

/// The debounce of an enqueue's options, checked.
fn debounce_of(debounce: bool, max_delay: Option<Duration>) -> Result<Debounce> {
    match (debounce, max_delay) {
        (false, None) => Ok(Debounce::Off),
        (false, Some(_)) => {
            Err(Error::invalid_at("max_delay", "caps a debounce: it is valid only with debounce: true"))
        }
        (true, None) => Ok(Debounce::On { max_delay_ms: None }),
        (true, Some(v)) => Ok(Debounce::On { max_delay_ms: Some(validate::duration("max_delay", v)?) }),
    }
}

/// Options of a read, before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOptions {
    pub shards: Option<u64>,
    /// Read only this shard. Default: all shards.
    pub shard: Option<u64>,
    /// The most ids to claim, 1 to [`MAX_READ_LIMIT`]. Default [`DEFAULT_READ_LIMIT`].
    pub limit: Option<u64>,
    /// How long the ids are held. Default [`DEFAULT_VISIBILITY_MS`].
    pub visibility_timeout: Option<Duration>,
    /// Move an id delivered this many times without an ack to the dead letters instead of
    /// delivering it again (1 to [`MAX_DELIVERIES`]). Default: no count kept.
    pub max_deliveries: Option<u64>,
}

/// Which shards a peek or size looks at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardSelect {
    pub shards: Option<u64>,
    /// Only this shard. Default: all shards.
    pub shard: Option<u64>,
}

fn shard_count(v: Option<u64>) -> Result<u32> {
    Ok(validate::range("shards", v.unwrap_or(1), 1, MAX_SHARDS)? as u32)
}

/// The shards a call addresses: one, or all of them.
fn targets(shard: Option<u64>, shards: u32) -> Result<Vec<u32>> {
    match shard {
        Some(v) => Ok(vec![validate::range("shard", v, 0, shards as u64 - 1)? as u32]),
        None => Ok((0..shards).collect()),
    }
}

fn ids_check(ids: &[String]) -> Result<()> {
    let at = FieldPath::new("ids");
    validate::batch_len(&at, ids.len())?;
    for (i, id) in ids.iter().enumerate() {
        validate::name((&at, i), id)?;
    }
    Ok(())
}

/// Groups the positions of ids by shard, keeping their order inside each shard.
fn by_shard(ids: &[String], shards: u32) -> Vec<(u32, Vec<usize>)> {
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); shards as usize];
    for (i, id) in ids.iter().enumerate() {
        groups[shard_of(id, shards) as usize].push(i);
    }
    groups.into_iter().enumerate().filter(|(_, v)| !v.is_empty()).map(|(s, v)| (s as u32, v)).collect()
}

fn random_below(n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    rand::random::<u64>() % n
}

/// Splits `limit` over `k` shards as evenly as possible, the remainder going to the shards from
/// `start` on, so no shard is always last.
fn quotas(limit: u64, k: usize, start: usize) -> Vec<u64> {
    let base = limit / k as u64;
    let extra = (limit % k as u64) as usize;
    (0..k).map(|i| base + u64::from((i + k - start) % k < extra)).collect()
}

/// A backend that claimed more ids of a shard than it was asked for: a defect of flowguard's, reported
/// (after the batch's ids are released) rather than passed on or panicked over.
fn over_delivery(shard: u32, asked: u64) -> Error {
    Error::internal(format!("the backend claimed more than the {asked} ids asked for on shard {shard}"))
}

/// An error of one shard's step that leaves the other shards' results usable: the shard's
/// server could not be reached, did not answer in time, or answered with an error of its own.
fn shard_fault(e: &Error) -> bool {
    matches!(e.code, ErrorCode::BackendUnavailable | ErrorCode::Timeout | ErrorCode::Backend)
}

/// The error of an enqueue whose step failed on some shards: the first error, saying how many
/// ids the other shards took (enqueueing them again is safe: they are reported as duplicates).
fn partly_enqueued(groups: &[(u32, Vec<usize>)], replies: Vec<Result<Vec<(EnqueueOutcome, i64)>>>) -> Error {
    let done: usize =
        groups.iter().zip(&replies).filter(|(_, r)| r.is_ok()).map(|((_, pos), _)| pos.len()).sum();
    let failed_shards: Vec<String> =
        groups.iter().zip(&replies).filter(|(_, r)| r.is_err()).map(|((s, _), _)| s.to_string()).collect();
    let Some(Err(mut e)) = replies.into_iter().find(|r| r.is_err()) else {
        return Error::internal("an enqueue failed without an error");
    };
    if done > 0 {
        e.message.push_str(&format!(
            " (shard {} failed; {done} ids of other shards were enqueued: enqueueing all ids again is safe, \
             those are reported as duplicates)",
            failed_shards.join(", ")
        ));
    }
    e
}

impl Client {
    /// Releases the ids a failing read claimed on the shards that answered (the caller gets an
    /// error, never their owner token), and returns `e`, saying what became of them.
    async fn release_unreturned(
        &self,
        queue: &str,
        shards: u32,
        owner: &str,
        items: &[Delivery],
        mut e: Error,
    ) -> Error {
        if items.is_empty() {
            return e;
        }
        let mut by: Vec<(u32, Vec<String>)> = Vec::new();
        for d in items {
            match by.iter_mut().find(|(s, _)| *s == d.shard) {
                Some((_, ids)) => ids.push(d.id.clone()),
                None => by.push((d.shard, vec![d.id.clone()])),
            }
        }
        let action = SettleAction::Release { delay_ms: 0 };
        let released = join_all(by.iter().map(|(shard, ids)| {
            self.backend().settle(ShardRef { queue, shard: *shard, shards }, owner, ids, action)
        }))
        .await;
        let kept: usize =
            by.iter().zip(&released).filter(|(_, r)| r.is_err()).map(|((_, ids), _)| ids.len()).sum();
        e.message.push_str(&if kept == 0 {
            format!(" (the {} ids claimed on other shards were released)", items.len())
        } else {
            format!(
                " ({kept} of the {} ids claimed on other shards could not be released: they are due again \
                 after the visibility timeout)",
                items.len()
            )
        });
        e
    }

    /// Enqueues ids: each to its shard, one atomic step per shard touched, the shards in
    /// parallel. Results are in the order of `ids`.
    pub async fn enqueue(
        &self,
        queue: &str,
        ids: Vec<String>,
        opts: EnqueueOptions,
    ) -> Result<Vec<Enqueued>> {
        validate::name("queue", queue)?;
        let shards = shard_count(opts.shards)?;
        let delay_ms = match opts.delay {
            Some(v) => validate::duration_or_zero("delay", v)?,
            None => 0,
        };
        let debounce = debounce_of(opts.debounce, opts.max_delay)?;
        ids_check(&ids)?;
        let groups = by_shard(&ids, shards);
        let calls = groups.iter().map(|(shard, pos)| {
            let part: Vec<String> = pos.iter().map(|&i| ids[i].clone()).collect();
            let at = ShardRef { queue, shard: *shard, shards };
            async move { self.backend().enqueue(at, &part, delay_ms, debounce).await }
        });
        let replies = join_all(calls).await;
        if replies.iter().any(|r| r.is_err()) {
            return Err(partly_enqueued(&groups, replies));
        }
        let mut out: Vec<Option<Enqueued>> = vec![None; ids.len()];
        for ((shard, pos), reply) in groups.iter().zip(replies) {
            let reply = reply?;
            if reply.len() != pos.len() {
                return Err(Error::internal(format!(
                    "enqueue replied for {} of {} ids",
                    reply.len(),
                    pos.len()
                )));
            }
            for (&i, (outcome, due_at)) in pos.iter().zip(reply) {
                out[i] = Some(Enqueued { id: ids[i].clone(), shard: *shard, outcome, due_at });
            }
        }
        out.into_iter().map(|e| e.ok_or_else(|| Error::internal("an id got no enqueue result"))).collect()
    }

    /// Claims up to `limit` due ids for the visibility timeout. Over several shards, the limit is
    /// split evenly first and what some shards could not fill is then taken from the others.
    pub async fn read_batch(&self, queue: &str, opts: ReadOptions) -> Result<Batch> {
        validate::name("queue", queue)?;
        let shards = shard_count(opts.shards)?;
        let targets = targets(opts.shard, shards)?;
        let limit = validate::range("limit", opts.limit.unwrap_or(DEFAULT_READ_LIMIT), 1, MAX_READ_LIMIT)?;
        let visibility_ms =
            validate::duration_or("visibility_timeout", opts.visibility_timeout, DEFAULT_VISIBILITY_MS)?;
        let max_deliveries = opts
            .max_deliveries
            .map(|v| validate::range("max_deliveries", v, 1, MAX_DELIVERIES))
            .transpose()?;
        let owner = token::new_token();
        let start = random_below(targets.len() as u64) as usize;
        let quota = quotas(limit, targets.len(), start);
        let first =
            join_all(targets.iter().zip(&quota).filter(|(_, q)| **q > 0).map(|(shard, q)| {
                let at = ShardRef { queue, shard: *shard, shards };
                let owner = owner.as_str();
                async move {
                    (*shard, *q, self.backend().claim(at, owner, *q, visibility_ms, max_deliveries).await)
                }
            }))
            .await;
        // A shard that cannot be reached (or timed out) is left out: the batch holds what the
        // other shards gave and names it in `failed_shards`, its ids stay due for a later read
        // (a claim that starts too late for its reply to be awaited claims nothing, see the Redis
        // backend). The call fails when no shard answered, and when a shard refused the call
        // itself (a shard count mismatch): then what the other shards gave is released first, so
        // no id stays held by an owner token the caller never received.
        let mut items = Vec::new();
        let mut visible_until = i64::MAX;
        // Shards that may hold more due ids: those that had no quota (a limit below the shard
        // count), in the rotated order, then those that filled theirs; with whether they answered
        // the first pass.
        let rotated: Vec<usize> = (0..targets.len()).map(|i| (i + start) % targets.len()).collect();
        let mut more: Vec<(u32, bool)> =
            rotated.iter().filter(|&&i| quota[i] == 0).map(|&i| (targets[i], false)).collect();
        // Shards that gave no answer, with their errors.
        let mut failed: Vec<(u32, Error)> = Vec::new();
        let mut answered = false;
        for (shard, q, r) in first {
            let c = match r {
                Ok(c) => c,
                Err(e) => {
                    failed.push((shard, e));
                    continue;
                }
            };
            answered = true;
            let (full, over) = (c.items.len() as u64 >= q, c.items.len() as u64 > q);
            if full {
                more.push((shard, true));
            }
            if !c.items.is_empty() {
                visible_until = visible_until.min(c.visible_until);
            }
            items.extend(c.items.into_iter().map(|(id, due_at)| Delivery { id, shard, due_at }));
            if over {
                return Err(self
                    .release_unreturned(queue, shards, &owner, &items, over_delivery(shard, q))
                    .await);
            }
        }
        if let Some(i) = failed.iter().position(|(_, e)| !shard_fault(e)) {
            let e = failed.swap_remove(i).1;
            return Err(self.release_unreturned(queue, shards, &owner, &items, e).await);
        }
        // No shard asked answered: the error of one (the shards left for the second pass, asked
        // one at a time, are not tried then).
        if !answered {
            return Err(failed.swap_remove(0).1);
        }
        // Second pass, one shard at a time so the limit is never exceeded. A shard that answered
        // the first pass and fails here is not a failed shard: its ids of the first pass are in
        // the batch (and the claim that failed took none, see above).
        for (shard, answered_first) in more {
            let want = limit.saturating_sub(items.len() as u64);
            if want == 0 {
                break;
            }
            let c = match self
                .backend()
                .claim(ShardRef { queue, shard, shards }, &owner, want, visibility_ms, max_deliveries)
                .await
            {
                Ok(c) => c,
                Err(e) if shard_fault(&e) => {
                    if !answered_first {
                        failed.push((shard, e));
                    }
                    continue;
                }
                Err(e) => return Err(self.release_unreturned(queue, shards, &owner, &items, e).await),
            };
            if !c.items.is_empty() {
                visible_until = visible_until.min(c.visible_until);
            }
            let over = c.items.len() as u64 > want;
            items.extend(c.items.into_iter().map(|(id, due_at)| Delivery { id, shard, due_at }));
            if over {
                return Err(self
                    .release_unreturned(queue, shards, &owner, &items, over_delivery(shard, want))
                    .await);
            }
        }
        items.sort_by(|a, b| a.due_at.cmp(&b.due_at).then_with(|| a.shard.cmp(&b.shard)));
        let mut failed_shards: Vec<u32> = failed.into_iter().map(|(s, _)| s).collect();
        failed_shards.sort_unstable();
        failed_shards.dedup();
        Ok(Batch {
            owner,
            visible_until: if items.is_empty() { 0 } else { visible_until },
            items,
            failed_shards,
        })
    }

    /// Acks (removes) or releases (makes due again after `delay`) ids held by `owner`.
    pub async fn settle(
        &self,
        queue: &str,
        owner: &str,
        ids: Vec<String>,
        shards: Option<u64>,
        action: SettleAction,
    ) -> Result<Vec<Settled>> {
        validate::name("queue", queue)?;
        token::check_token("owner", owner)?;
        let shards = shard_count(shards)?;
        ids_check(&ids)?;
        let groups = by_shard(&ids, shards);
        let calls = groups.iter().map(|(shard, pos)| {
            let part: Vec<String> = pos.iter().map(|&i| ids[i].clone()).collect();
            let at = ShardRef { queue, shard: *shard, shards };
            async move { self.backend().settle(at, owner, &part, action).await }
        });
        let replies = join_all(calls).await;
        let mut out: Vec<Option<Settled>> = vec![None; ids.len()];
        for ((shard, pos), reply) in groups.iter().zip(replies) {
            let reply = reply?;
            if reply.len() != pos.len() {
                return Err(Error::internal(format!(
                    "ack/release replied for {} of {} ids",
                    reply.len(),
                    pos.len()
                )));
            }
            for (&i, (outcome, due_at)) in pos.iter().zip(reply) {
                out[i] = Some(Settled { id: ids[i].clone(), shard: *shard, outcome, due_at });
            }
        }
        out.into_iter().map(|e| e.ok_or_else(|| Error::internal("an id got no ack/release result"))).collect()
    }

    pub async fn ack(
        &self,
        queue: &str,
        owner: &str,
        ids: Vec<String>,
        shards: Option<u64>,
    ) -> Result<Vec<Settled>> {
        self.settle(queue, owner, ids, shards, SettleAction::Ack).await
    }

    pub async fn release(
        &self,
        queue: &str,
        owner: &str,
        ids: Vec<String>,
        shards: Option<u64>,
        delay: Option<Duration>,
    ) -> Result<Vec<Settled>> {
        let delay_ms = match delay {
            Some(v) => validate::duration_or_zero("delay", v)?,
            None => 0,
        };
        self.settle(queue, owner, ids, shards, SettleAction::Release { delay_ms }).await
    }

    /// The first `limit` waiting ids by due time (over the shards addressed), without claiming.
    pub async fn peek(&self, queue: &str, select: ShardSelect, limit: Option<u64>) -> Result<Vec<Waiting>> {
        validate::name("queue", queue)?;
        let shards = shard_count(select.shards)?;
        let targets = targets(select.shard, shards)?;
        let limit = validate::range("limit", limit.unwrap_or(DEFAULT_READ_LIMIT), 1, MAX_READ_LIMIT)?;
        let replies = join_all(targets.iter().map(|shard| {
            let at = ShardRef { queue, shard: *shard, shards };
            async move { (*shard, self.backend().peek(at, limit).await) }
        }))
        .await;
        let mut out = Vec::new();
        for (shard, r) in replies {
            let (now, items) = r?;
            out.extend(items.into_iter().map(|(id, due_at)| Waiting {
                id,
                shard,
                due_at,
                due: due_at <= now,
            }));
        }
        out.sort_by(|a, b| {
            a.due_at.cmp(&b.due_at).then_with(|| a.shard.cmp(&b.shard)).then_with(|| a.id.cmp(&b.id))
        });
        out.truncate(limit as usize);
        Ok(out)
    }

    /// Counts per shard and in total.
    pub async fn queue_size(&self, queue: &str, select: ShardSelect) -> Result<QueueSize> {
        validate::name("queue", queue)?;
        let shards = shard_count(select.shards)?;
        let targets = targets(select.shard, shards)?;
        let replies = join_all(
            targets.iter().map(|shard| self.backend().size(ShardRef { queue, shard: *shard, shards })),
        )
        .await;
        let mut total = QueueSize {
            waiting: 0,
            due: 0,
            claimed: 0,
            again: 0,
            dead: 0,
            shards: Vec::with_capacity(targets.len()),
        };
        for r in replies {
            let s = r?;
            total.waiting += s.waiting;
            total.due += s.due;
            total.claimed += s.claimed;
            total.again += s.again;
            total.dead += s.dead;
            total.shards.push(s);
        }
        Ok(total)
    }

    /// One page of the dead letters of the shards addressed, by the time they died (then shard
    /// and id): `offset` (default 0, at most [`MAX_DEAD_OFFSET`]) and `limit` (1 to
    /// [`MAX_DEAD_LIMIT`], default [`DEFAULT_DEAD_LIMIT`]), as the tracker's `list` pages. Each
    /// shard reads at most `offset + limit + 1` of them.
    pub async fn dead_letters(
        &self,
        queue: &str,
        select: ShardSelect,
        offset: Option<u64>,
        limit: Option<u64>,
    ) -> Result<DeadPage> {
        validate::name("queue", queue)?;
        let shards = shard_count(select.shards)?;
        let targets = targets(select.shard, shards)?;
        let offset = validate::range("offset", offset.unwrap_or(0), 0, MAX_DEAD_OFFSET)?;
        let limit = validate::range("limit", limit.unwrap_or(DEFAULT_DEAD_LIMIT), 1, MAX_DEAD_LIMIT)?;
        let want = offset + limit + 1;
        let replies = join_all(targets.iter().map(|shard| {
            let at = ShardRef { queue, shard: *shard, shards };
            async move { (*shard, self.backend().dead_letters(at, want).await) }
        }))
        .await;
        let mut all = Vec::new();
        for (shard, r) in replies {
            all.extend(r?.into_iter().map(|d| DeadLetter {
                id: d.id,
                shard,
                deliveries: d.deliveries,
                died_at: d.died_at,
            }));
        }
        all.sort_by(|a, b| {
            a.died_at.cmp(&b.died_at).then_with(|| a.shard.cmp(&b.shard)).then_with(|| a.id.cmp(&b.id))
        });
        let more = all.len() as u64 > offset + limit;
        let items: Vec<DeadLetter> = all.into_iter().skip(offset as usize).take(limit as usize).collect();
        Ok(DeadPage { next_offset: more.then_some(offset + limit), items })
    }

    /// Makes dead letters waiting again, due now, their delivery counts dropped; one atomic step
    /// per shard touched. Results are in the order of `ids`; an id that is no dead letter is
    /// reported `requeued: false` and left as it is.
    pub async fn requeue_dead(
        &self,
        queue: &str,
        ids: Vec<String>,
        shards: Option<u64>,
    ) -> Result<Vec<Requeued>> {
        validate::name("queue", queue)?;
        let shards = shard_count(shards)?;
        ids_check(&ids)?;
        let groups = by_shard(&ids, shards);
        let replies = join_all(groups.iter().map(|(shard, pos)| {
            let part: Vec<String> = pos.iter().map(|&i| ids[i].clone()).collect();
            let at = ShardRef { queue, shard: *shard, shards };
            async move { self.backend().requeue_dead(at, &part).await }
        }))
        .await;
        let mut out: Vec<Option<Requeued>> = vec![None; ids.len()];
        for ((shard, pos), reply) in groups.iter().zip(replies) {
            let reply = reply?;
            if reply.len() != pos.len() {
                return Err(Error::internal(format!(
                    "requeue replied for {} of {} ids",
                    reply.len(),
                    pos.len()
                )));
            }
            for (&i, due_at) in pos.iter().zip(reply) {
                out[i] =
                    Some(Requeued { id: ids[i].clone(), shard: *shard, requeued: due_at.is_some(), due_at });
            }
        }
        out.into_iter().map(|e| e.ok_or_else(|| Error::internal("an id got no requeue result"))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_reference_values() {
        // Values of the FNV reference (isthe.com) and of the npm package `fnv1a` 1.1.1.
        assert_eq!(fnv1a(""), 0x811c9dc5);
        assert_eq!(fnv1a("a"), 0xe40c292c);
        assert_eq!(fnv1a("foobar"), 0xbf9cf968);
        assert_eq!(fnv1a("product-id-1"), 2275536424);
        assert_eq!(shard_of("product-id-1", 4), 0);
        // Non-ASCII: hashed over UTF-16 code units (a surrogate pair counts as two units).
        assert_eq!(fnv1a("ü€😀"), 1735330120);
    }

    #[test]
    fn quotas_split_evenly_and_rotate() {
        assert_eq!(quotas(10, 4, 0), vec![3, 3, 2, 2]);
        assert_eq!(quotas(10, 4, 2), vec![2, 2, 3, 3]);
        assert_eq!(quotas(2, 4, 3), vec![1, 0, 0, 1]);
        for start in 0..7 {
            assert_eq!(quotas(100, 7, start).iter().sum::<u64>(), 100);
        }
    }

    #[test]
    fn ids_group_by_shard_in_order() {
        let ids: Vec<String> = (0..50).map(|i| format!("id-{i}")).collect();
        let groups = by_shard(&ids, 4);
        let mut seen = 0;
        for (shard, pos) in &groups {
            assert!(pos.windows(2).all(|w| w[0] < w[1]));
            for &i in pos {
                assert_eq!(shard_of(&ids[i], 4), *shard);
            }
            seen += pos.len();
        }
        assert_eq!(seen, ids.len());
    }

    #[test]
    fn bad_shard_and_limit_values_are_refused() {
        assert!(shard_count(Some(0)).is_err());
        assert!(shard_count(Some(1025)).unwrap_err().to_string().contains("shards"));
        assert_eq!(shard_count(None).unwrap(), 1);
        assert!(targets(Some(4), 4).unwrap_err().to_string().contains("shard"));
        assert_eq!(targets(None, 3).unwrap(), vec![0, 1, 2]);
    }

    #[test]
    fn max_delay_only_caps_a_debounce() {
        let ms = Duration::from_millis;
        assert_eq!(debounce_of(false, None).unwrap(), Debounce::Off);
        assert_eq!(debounce_of(true, None).unwrap(), Debounce::On { max_delay_ms: None });
        assert_eq!(debounce_of(true, Some(ms(500))).unwrap(), Debounce::On { max_delay_ms: Some(500) });
        for (debounce, v) in [(false, ms(500)), (true, ms(0)), (true, Duration::from_secs(366 * 86_400))] {
            let e = debounce_of(debounce, Some(v)).unwrap_err();
            assert_eq!(
                (e.code, e.field.map(|f| f.to_string())),
                (ErrorCode::InvalidArgument, Some("max_delay".into()))
            );
        }
    }
}
