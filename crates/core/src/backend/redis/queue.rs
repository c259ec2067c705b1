//! Dedup Queue on Redis: one script call per shard and step, in the common case the only round
//! trip. Each script is the shared head `queue_common.lua` (key names, the shard's mark, the
//! server's time, reaping expired claims, the end of the step) followed by the step's own part.
//!
//! The shard count is checked by the shard's script itself against the shard's mark: a key in the
//! shard's slot holding the queue's shard count, present exactly while the shard holds ids. The
//! queue's record (`queue_meta.lua`, the queue's own slot) counts the shards that hold a mark and
//! holds the count, so while any shard holds ids the count cannot change. The record is asked only
//! at a shard's change between holding no id and holding some: an enqueue onto a shard without
//! mark reserves a place on the record first (the script then sets the mark), a step that empties
//! a shard (an ack) gives its place back after, and a step on a shard without mark checks the
//! count on the record after (it found nothing there, so there was nothing to undo).
//!
//! A claim carries a deadline on Redis's clock and claims nothing when it starts later (see
//! [`claim_deadline`]): a shard that answers too late for its caller (a node paused, busy or cut
//! off for a while, redis-rs sending a timed-out call again) never holds ids the caller was not
//! given.

use redis::Value;

use super::clock::local_ms;
use super::{int, lua, opt_str, RedisStore};
use crate::backend::BoxFuture;
use crate::error::{Error, ErrorCode, Result};
use crate::queue::{
    shard_mismatch, Debounce, EnqueueOutcome, QueueBackend, SettleAction, SettleOutcome, ShardClaim,
    ShardDead, ShardRef, ShardSize,
};

/// Like `lua!`, with the shared head prepended.
macro_rules! queue_script {
    ($name:ident, $file:literal) => {
        fn $name() -> &'static super::Lua {
            static S: std::sync::OnceLock<super::Lua> = std::sync::OnceLock::new();
            const SOURCE: &str =
                concat!(include_str!("lua/queue_common.lua"), include_str!(concat!("lua/", $file)));
            S.get_or_init(|| super::Lua { script: redis::Script::new(SOURCE), source: SOURCE })
        }
    };
}

queue_script!(enqueue_script, "queue_enqueue.lua");
queue_script!(claim_script, "queue_claim.lua");
queue_script!(settle_script, "queue_settle.lua");
queue_script!(peek_script, "queue_peek.lua");
queue_script!(size_script, "queue_size.lua");
queue_script!(dead_script, "queue_dead.lua");
queue_script!(requeue_script, "queue_requeue.lua");
lua!(enqueue_one_script, "queue_enqueue_one.lua");
lua!(meta_script, "queue_meta.lua");
lua!(time_script, "queue_time.lua");

/// The shard's keys: waiting, claimed, owners, enqueued again while claimed, its mark, and the
/// first-enqueue times of capped debounces (given to every step but an enqueue without a capped
/// debounce, so a plain enqueue sends and stores nothing more).
const PARTS: [char; 6] = ['w', 'c', 'o', 'a', 'n', 'f'];

/// What a shard step is, for its standing with the queue's record.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Adds ids: onto a shard without mark, only after a place is reserved on the record.
    Enqueue,
    /// Passes the claim's deadline ([`claim_deadline`]) as the script's last argument.
    Claim,
    Other,
}

/// The latest time, on Redis's clock, at which a claim may start: `start` (a time on Redis's
/// clock no later than the moment the claim is sent, see [`super::clock`]) plus three quarters of
/// the command timeout. The caller waits for the claim's reply until the command timeout after
/// sending it, so a claim that starts by then has a quarter of the timeout left for its reply to
/// arrive; one that starts later (the node was paused, busy, or the call was sent again by the
/// cluster client after a timeout) claims nothing, so a shard reported as failed holds no id of
/// this read. Chosen over releasing afterwards: a release needs the very node that did not answer,
/// and could itself run before the late claim.
///
/// `start` is learned from the server's time in earlier replies (the first claim of a store reads
/// it with one `TIME` script on the shard's node): on a Redis Cluster from any node, so a
/// difference between the nodes' clocks moves the deadline by as much (the nodes' clocks are
/// assumed to agree within a small part of the command timeout, as NTP keeps them).
fn claim_deadline(start: i64, command_timeout_ms: u64) -> i64 {
    let budget = command_timeout_ms - command_timeout_ms / 4;
    start.saturating_add(i64::try_from(budget).unwrap_or(i64::MAX))
}

impl RedisStore {
    /// The six keys of one shard.
    fn shard_keys(&self, at: ShardRef<'_>) -> [String; 6] {
        let head = self.keys().queue_shard(at.queue, at.shard);
        PARTS.map(|p| self.keys().queue_key(&head, p))
    }

    /// Runs `queue_meta.lua` on the queue's record (`mode`: check, reserve or settle).
    async fn record(&self, at: ShardRef<'_>, mode: &str, change: i64) -> Result<()> {
        let key = self.keys().queue_meta(at.queue);
        let (shards, change) = (at.shards.to_string(), change.to_string());
        let reply: Vec<Value> = self
            .eval(meta_script(), &[key.as_bytes()], &[shards.as_bytes(), mode.as_bytes(), change.as_bytes()])
            .await?;
        match reply.first().map(int).transpose()? {
            Some(0) if reply.len() == 2 => Err(shard_mismatch(at, int(&reply[1])?.max(0) as u64)),
            _ => Ok(()),
        }
    }

    /// Redis's time now, at most the true one: learned from earlier replies, or read once.
    async fn server_now(&self, at: ShardRef<'_>) -> Result<i64> {
        if let Some(t) = self.clock.server_at(local_ms()) {
            return Ok(t);
        }
        let key = self.keys().queue_key(&self.keys().queue_shard(at.queue, at.shard), 'n');
        let t = int(&self.eval::<Value>(time_script(), &[key.as_bytes()], &[]).await?)?;
        self.clock.sample(t, local_ms());
        Ok(self.clock.server_at(local_ms()).unwrap_or(t))
    }

    /// Sends one shard script (`lua` with the shard's keys, the sixth only with `first`, the
    /// caller's shard count, its standing with the record and then `tail`), and answers for
    /// the record around it (see the module's notes): a second script before it only onto a shard
    /// without mark, one after it only when the shard's change is to report or its count to check.
    /// A failed report of the change after the script does not fail the step (the record then
    /// counts one shard too many, which only delays a change of the shard count, where one too few
    /// could hide ids): what the shard call did is returned, so the ids a claim took are never
    /// held unseen. Returns the server's time and the step's own part of the reply.
    async fn shard_run(
        &self,
        at: ShardRef<'_>,
        step: Step,
        lua: &'static super::Lua,
        lead: Option<&'static super::Lua>,
        first: bool,
        tail: &[&[u8]],
    ) -> Result<(i64, Vec<Value>)> {
        let keys = self.shard_keys(at);
        let keys = keys.each_ref().map(|k| k.as_bytes());
        let keys = &keys[..if first { 6 } else { 5 }];
        let shards = at.shards.to_string();
        let mut mode = if step == Step::Enqueue { "e" } else { "" };
        loop {
            let deadline;
            let mut args = Vec::with_capacity(3 + tail.len());
            args.extend([shards.as_bytes(), mode.as_bytes()]);
            if step == Step::Claim {
                // The claim's deadline follows owner, limit and visibility (ARGV[6]); a read's
                // maxDeliveries, when given, comes after it (ARGV[7]).
                let start = self.server_now(at).await?;
                deadline = claim_deadline(start, self.shared()?.target.command_timeout_ms).to_string();
                let (head, rest) = tail.split_at(tail.len().min(3));
                args.extend_from_slice(head);
                args.push(deadline.as_bytes());
                args.extend_from_slice(rest);
            } else {
                args.extend_from_slice(tail);
            }
            // `lead`: the step's leaner script for the first try (no place reserved yet).
            let script = match lead {
                Some(lead) if mode == "e" => lead,
                _ => lua,
            };
            let mut reply = self.eval::<Vec<Value>>(script, keys, &args).await?;
            let arrived = local_ms();
            let status =
                int(reply.first().ok_or_else(|| Error::internal("queue script replied with nothing"))?)?;
            if status == 0 && reply.len() == 2 {
                return Err(shard_mismatch(at, int(&reply[1])?.max(0) as u64));
            }
            if reply.len() < 3 {
                return Err(Error::internal("queue script replied with too few values"));
            }
            let (change, now) = (int(&reply[1])?, int(&reply[2])?);
            if now > 0 {
                // 0: the step did not read the time (an enqueue of ids all waiting already).
                self.clock.sample(now, arrived);
            }
            if status == 2 && (mode == "e" || mode.is_empty()) {
                // The record first: a place for the enqueue, or the count of a shard written
                // before marks existed.
                let enqueue = step == Step::Enqueue;
                self.record(at, if enqueue { "reserve" } else { "check" }, 0).await?;
                mode = if enqueue { "r" } else { "c" };
                continue;
            }
            if status != 1 && status != 3 {
                return Err(Error::internal(format!("queue script replied with status {status}")));
            }
            if change != 0 {
                // Best effort, see above.
                let _ = self.record(at, "settle", change).await;
            }
            if status == 3 {
                self.record(at, "check", 0).await?;
            }
            reply.drain(..3);
            return Ok((now, reply));
        }
    }
}

impl QueueBackend for RedisStore {
    fn enqueue<'a>(
        &'a self,
        at: ShardRef<'a>,
        ids: &'a [String],
        delay_ms: u64,
        debounce: Debounce,
    ) -> BoxFuture<'a, Vec<(EnqueueOutcome, i64)>> {
        Box::pin(async move {
            let delay = delay_ms.to_string();
            let mode = match debounce {
                Debounce::Off => String::new(),
                Debounce::On { max_delay_ms: None } => "1".to_string(),
                Debounce::On { max_delay_ms: Some(max) } => format!("m{max}"),
            };
            let capped = matches!(debounce, Debounce::On { max_delay_ms: Some(_) });
            let mut tail = Vec::with_capacity(2 + ids.len());
            tail.extend([delay.as_bytes(), mode.as_bytes()]);
            tail.extend(ids.iter().map(|id| id.as_bytes()));
            // One id (the webhook's step): its own script first.
            let lead = (ids.len() == 1).then(enqueue_one_script);
            let (_, reply) = self.shard_run(at, Step::Enqueue, enqueue_script(), lead, capped, &tail).await?;
            if let [due] = reply.as_slice() {
                // Every id added at one due time (queue_enqueue.lua's short reply).
                let due = int(due)?;
                return Ok(ids.iter().map(|_| (EnqueueOutcome::Added, due)).collect());
            }
            if reply.len() != ids.len() * 2 {
                return Err(Error::internal(format!("enqueue script replied with {} values", reply.len())));
            }
            reply
                .chunks(2)
                .map(|p| {
                    let outcome = match int(&p[0])? {
                        1 => EnqueueOutcome::Added,
                        0 => EnqueueOutcome::Duplicate,
                        2 => EnqueueOutcome::Debounced,
                        4 => EnqueueOutcome::Dead,
                        _ => EnqueueOutcome::Claimed,
                    };
                    Ok((outcome, int(&p[1])?))
                })
                .collect()
        })
    }

    fn claim<'a>(
        &'a self,
        at: ShardRef<'a>,
        owner: &'a str,
        limit: u64,
        visibility_ms: u64,
        max_deliveries: Option<u64>,
    ) -> BoxFuture<'a, ShardClaim> {
        Box::pin(async move {
            let (limit, visibility) = (limit.to_string(), visibility_ms.to_string());
            let max = max_deliveries.map(|m| m.to_string());
            let mut tail = vec![owner.as_bytes(), limit.as_bytes(), visibility.as_bytes()];
            tail.extend(max.as_ref().map(|m| m.as_bytes()));
            let (_, reply) = self.shard_run(at, Step::Claim, claim_script(), None, true, &tail).await?;
            if reply.is_empty() || (reply.len() - 1) % 2 != 0 {
                return Err(Error::internal(format!("claim script replied with {} values", reply.len())));
            }
            let visible_until = int(&reply[0])?;
            if visible_until < 0 {
                let target = self.shared()?.target.clone();
                return Err(Error::new(
                    ErrorCode::Timeout,
                    format!(
                        "Redis at {} started the claim on shard {} too late to answer within commandTimeoutMs = \
                         {} ms: nothing was claimed there",
                        target.display, at.shard, target.command_timeout_ms
                    ),
                ));
            }
            let items = reply[1..]
                .chunks(2)
                .map(|p| Ok((opt_str(&p[0])?.unwrap_or_default(), int(&p[1])?)))
                .collect::<Result<Vec<_>>>()?;
            Ok(ShardClaim { visible_until, items })
        })
    }

    fn settle<'a>(
        &'a self,
        at: ShardRef<'a>,
        owner: &'a str,
        ids: &'a [String],
        action: SettleAction,
    ) -> BoxFuture<'a, Vec<(SettleOutcome, Option<i64>)>> {
        Box::pin(async move {
            let (kind, delay) = match action {
                SettleAction::Ack => ("a", 0),
                SettleAction::Release { delay_ms } => ("r", delay_ms),
            };
            let delay = delay.to_string();
            let mut tail = Vec::with_capacity(3 + ids.len());
            tail.extend([owner.as_bytes(), kind.as_bytes(), delay.as_bytes()]);
            tail.extend(ids.iter().map(|id| id.as_bytes()));
            let (_, reply) = self.shard_run(at, Step::Other, settle_script(), None, true, &tail).await?;
            if reply.len() != ids.len() * 2 {
                return Err(Error::internal(format!(
                    "ack/release script replied with {} values",
                    reply.len()
                )));
            }
            reply
                .chunks(2)
                .map(|p| {
                    let outcome = match int(&p[0])? {
                        1 => SettleOutcome::Done { requeued: false },
                        2 => SettleOutcome::Done { requeued: true },
                        0 => SettleOutcome::NotClaimed,
                        -1 => SettleOutcome::NotOwner,
                        _ => SettleOutcome::Expired,
                    };
                    let due = int(&p[1])?;
                    Ok((outcome, if due >= 0 { Some(due) } else { None }))
                })
                .collect()
        })
    }

    fn peek<'a>(&'a self, at: ShardRef<'a>, limit: u64) -> BoxFuture<'a, (i64, Vec<(String, i64)>)> {
        Box::pin(async move {
            let limit = limit.to_string();
            let (now, reply) =
                self.shard_run(at, Step::Other, peek_script(), None, true, &[limit.as_bytes()]).await?;
            if reply.len() % 2 != 0 {
                return Err(Error::internal(format!("peek script replied with {} values", reply.len())));
            }
            let items = reply
                .chunks(2)
                .map(|p| Ok((opt_str(&p[0])?.unwrap_or_default(), int(&p[1])?)))
                .collect::<Result<Vec<_>>>()?;
            Ok((now, items))
        })
    }

    fn size<'a>(&'a self, at: ShardRef<'a>) -> BoxFuture<'a, ShardSize> {
        Box::pin(async move {
            let (_, reply) = self.shard_run(at, Step::Other, size_script(), None, true, &[]).await?;
            if reply.len() != 5 {
                return Err(Error::internal(format!("size script replied with {} values", reply.len())));
            }
            let n = |i: usize| int(&reply[i]).map(|v| v.max(0) as u64);
            Ok(ShardSize {
                shard: at.shard,
                waiting: n(0)?,
                due: n(1)?,
                claimed: n(2)?,
                again: n(3)?,
                dead: n(4)?,
            })
        })
    }

    fn dead_letters<'a>(&'a self, at: ShardRef<'a>, limit: u64) -> BoxFuture<'a, Vec<ShardDead>> {
        Box::pin(async move {
            let limit = limit.to_string();
            let (_, reply) =
                self.shard_run(at, Step::Other, dead_script(), None, true, &[limit.as_bytes()]).await?;
            if reply.len() % 3 != 0 {
                return Err(Error::internal(format!(
                    "dead letters script replied with {} values",
                    reply.len()
                )));
            }
            reply
                .chunks(3)
                .map(|p| {
                    Ok(ShardDead {
                        id: opt_str(&p[0])?.unwrap_or_default(),
                        deliveries: int(&p[1])?.max(0) as u64,
                        died_at: int(&p[2])?,
                    })
                })
                .collect()
        })
    }

    fn requeue_dead<'a>(&'a self, at: ShardRef<'a>, ids: &'a [String]) -> BoxFuture<'a, Vec<Option<i64>>> {
        Box::pin(async move {
            let tail: Vec<&[u8]> = ids.iter().map(|id| id.as_bytes()).collect();
            let (_, reply) = self.shard_run(at, Step::Other, requeue_script(), None, true, &tail).await?;
            if reply.len() != ids.len() {
                return Err(Error::internal(format!("requeue script replied with {} values", reply.len())));
            }
            reply.iter().map(|v| int(v).map(|t| (t >= 0).then_some(t))).collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::claim_deadline;

    #[test]
    fn a_claim_may_start_until_three_quarters_of_the_command_timeout() {
        assert_eq!(claim_deadline(10_000, 800), 10_600);
        assert_eq!(claim_deadline(10_000, 300), 10_225);
        assert_eq!(claim_deadline(10_000, 1), 10_001);
        assert_eq!(claim_deadline(i64::MAX - 5, 800), i64::MAX);
    }
}
