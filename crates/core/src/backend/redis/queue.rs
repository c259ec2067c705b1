//! Dedup Queue on Redis: one script call per shard and step. Each script is the shared head
//! `queue_common.lua` (key names, the server's time, reaping expired claims, the shard's change
//! between empty and holding ids) followed by the step's own part; around it, a step on the
//! queue's record (`queue_meta.lua`) checks the caller's shard count.
//!
//! A claim carries a deadline on Redis's clock and claims nothing when it starts later (see
//! [`claim_deadline`]): a shard that answers too late for its caller (a node paused, busy or cut
//! off for a while, redis-rs sending a timed-out call again) never holds ids the caller was not
//! given.

use redis::Value;

use super::{int, opt_str, script, RedisStore};
use crate::backend::BoxFuture;
use crate::error::{Error, ErrorCode, Result};
use crate::queue::{
    shard_mismatch, EnqueueOutcome, QueueBackend, SettleAction, SettleOutcome, ShardClaim, ShardRef,
    ShardSize,
};

/// Like `script!`, with the shared head prepended.
macro_rules! queue_script {
    ($name:ident, $file:literal) => {
        fn $name() -> &'static redis::Script {
            static S: std::sync::OnceLock<redis::Script> = std::sync::OnceLock::new();
            S.get_or_init(|| {
                redis::Script::new(concat!(
                    include_str!("lua/queue_common.lua"),
                    include_str!(concat!("lua/", $file))
                ))
            })
        }
    };
}

queue_script!(enqueue_script, "queue_enqueue.lua");
queue_script!(claim_script, "queue_claim.lua");
queue_script!(settle_script, "queue_settle.lua");
queue_script!(peek_script, "queue_peek.lua");
queue_script!(size_script, "queue_size.lua");
script!(meta_script, "queue_meta.lua");

const PARTS: [char; 4] = ['w', 'c', 'o', 'a'];

/// What a shard step asks of the queue's record around it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Reserves a place before the step (see [`RedisStore::shard_run`]).
    Enqueue,
    /// Passes the claim's deadline ([`claim_deadline`]) as the script's last argument.
    Claim,
    Other,
}

/// The latest time, on Redis's clock, at which a claim may start: `start` (Redis's time when the
/// step began, read by the check on the queue's record just before the claim is sent) plus three
/// quarters of the command timeout. The caller waits for the claim's reply until the command
/// timeout after sending it, so a claim that starts by then has a quarter of the timeout left for
/// its reply to arrive; one that starts later (the node was paused, busy, or the call was sent
/// again by the cluster client after a timeout) claims nothing, so a shard reported as failed
/// holds no id of this read. Chosen over releasing afterwards: a release needs the very node that
/// did not answer, and could itself run before the late claim.
///
/// On a Redis Cluster, `start` comes from the node of the queue's record and the claim runs on the
/// shard's node: a difference between their clocks moves the deadline by as much (the nodes'
/// clocks are assumed to agree within a small part of the command timeout, as NTP keeps them).
fn claim_deadline(start: i64, command_timeout_ms: u64) -> i64 {
    let budget = command_timeout_ms - command_timeout_ms / 4;
    start.saturating_add(i64::try_from(budget).unwrap_or(i64::MAX))
}

impl RedisStore {
    /// Prepares a call of `script` on one shard: its four keys and the caller's shard count.
    fn shard_call<'s>(&self, script: &'s redis::Script, at: ShardRef<'_>) -> redis::ScriptInvocation<'s> {
        let head = self.keys().queue_shard(at.queue, at.shard);
        let mut inv = script.prepare_invoke();
        for p in PARTS {
            inv.key(self.keys().queue_key(&head, p));
        }
        inv.arg(at.shards);
        inv
    }

    /// Runs `queue_meta.lua` on the queue's record (`mode`: check, reserve or settle). Returns
    /// Redis's time for check and reserve.
    async fn record(&self, at: ShardRef<'_>, mode: &str, change: i64) -> Result<i64> {
        let mut inv = meta_script().prepare_invoke();
        inv.key(self.keys().queue_meta(at.queue)).arg(at.shards).arg(mode).arg(change);
        match self.run::<Value>(&inv).await? {
            Value::Array(v) if v.len() == 2 => match int(&v[0])? {
                1 => int(&v[1]),
                _ => Err(shard_mismatch(at, int(&v[1])?.max(0) as u64)),
            },
            _ => Ok(0),
        }
    }

    /// Runs a shard call between two steps on the queue's record (its own hash slot, so its own
    /// script): before, the caller's shard count is checked (and an enqueue reserves a place, so
    /// the count cannot change before its write lands); after, the shard's change from empty to
    /// holding ids or back is counted. A step that fails keeps its reservation: the record then
    /// counts one shard too many, which only delays a change of the shard count, where one too
    /// few could hide ids. For the same reason a failed count after the shard call does not fail
    /// the step (a step never adds to the count after its reservation): what the shard call did
    /// is returned, so the ids a claim took are never held unseen. Returns the reply after its
    /// leading change.
    async fn shard_run(
        &self,
        inv: &mut redis::ScriptInvocation<'_>,
        at: ShardRef<'_>,
        step: Step,
    ) -> Result<Vec<Value>> {
        let enqueue = step == Step::Enqueue;
        let start = self.record(at, if enqueue { "reserve" } else { "check" }, 0).await?;
        if step == Step::Claim {
            inv.arg(claim_deadline(start, self.shared()?.target.command_timeout_ms));
        }
        let mut reply: Vec<Value> = self.run(inv).await?;
        if reply.is_empty() {
            return Err(Error::internal("queue script replied with nothing"));
        }
        let change = int(&reply[0])? - i64::from(enqueue);
        if change != 0 {
            // Best effort, see above.
            let _ = self.record(at, "settle", change).await;
        }
        reply.remove(0);
        Ok(reply)
    }
}

impl QueueBackend for RedisStore {
    fn enqueue<'a>(
        &'a self,
        at: ShardRef<'a>,
        ids: &'a [String],
        delay_ms: u64,
        debounce: bool,
    ) -> BoxFuture<'a, Vec<(EnqueueOutcome, i64)>> {
        Box::pin(async move {
            let mut inv = self.shard_call(enqueue_script(), at);
            inv.arg(delay_ms).arg(if debounce { "1" } else { "" });
            for id in ids {
                inv.arg(id);
            }
            let reply = self.shard_run(&mut inv, at, Step::Enqueue).await?;
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
    ) -> BoxFuture<'a, ShardClaim> {
        Box::pin(async move {
            let mut inv = self.shard_call(claim_script(), at);
            inv.arg(owner).arg(limit).arg(visibility_ms);
            let reply = self.shard_run(&mut inv, at, Step::Claim).await?;
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
            let mut inv = self.shard_call(settle_script(), at);
            match action {
                SettleAction::Ack => inv.arg(owner).arg("a").arg(0),
                SettleAction::Release { delay_ms } => inv.arg(owner).arg("r").arg(delay_ms),
            };
            for id in ids {
                inv.arg(id);
            }
            let reply = self.shard_run(&mut inv, at, Step::Other).await?;
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
            let mut inv = self.shard_call(peek_script(), at);
            inv.arg(limit);
            let reply = self.shard_run(&mut inv, at, Step::Other).await?;
            if reply.is_empty() || (reply.len() - 1) % 2 != 0 {
                return Err(Error::internal(format!("peek script replied with {} values", reply.len())));
            }
            let now = int(&reply[0])?;
            let items = reply[1..]
                .chunks(2)
                .map(|p| Ok((opt_str(&p[0])?.unwrap_or_default(), int(&p[1])?)))
                .collect::<Result<Vec<_>>>()?;
            Ok((now, items))
        })
    }

    fn size<'a>(&'a self, at: ShardRef<'a>) -> BoxFuture<'a, ShardSize> {
        Box::pin(async move {
            let mut inv = self.shard_call(size_script(), at);
            let reply = self.shard_run(&mut inv, at, Step::Other).await?;
            if reply.len() != 4 {
                return Err(Error::internal(format!("size script replied with {} values", reply.len())));
            }
            let n = |i: usize| int(&reply[i]).map(|v| v.max(0) as u64);
            Ok(ShardSize { shard: at.shard, waiting: n(0)?, due: n(1)?, claimed: n(2)?, again: n(3)? })
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
