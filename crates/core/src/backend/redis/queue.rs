//! Dedup Queue on Redis: one script call per shard and step. Each script is the shared head
//! `queue_common.lua` (key names, the server's time, reaping expired claims, the shard's change
//! between empty and holding ids) followed by the step's own part; around it, a step on the
//! queue's record (`queue_meta.lua`) checks the caller's shard count.

use redis::Value;

use super::{int, opt_str, script, RedisStore};
use crate::backend::BoxFuture;
use crate::error::{Error, Result};
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

    /// Runs `queue_meta.lua` on the queue's record (`mode`: check, reserve or settle).
    async fn record(&self, at: ShardRef<'_>, mode: &str, change: i64) -> Result<()> {
        let mut inv = meta_script().prepare_invoke();
        inv.key(self.keys().queue_meta(at.queue)).arg(at.shards).arg(mode).arg(change);
        match self.run::<Value>(&inv).await? {
            Value::Array(v) => {
                Err(shard_mismatch(at, v.get(1).map(int).transpose()?.unwrap_or(0).max(0) as u64))
            }
            _ => Ok(()),
        }
    }

    /// Runs a shard call between two steps on the queue's record (its own hash slot, so its own
    /// script): before, the caller's shard count is checked (and an enqueue reserves a place, so
    /// the count cannot change before its write lands); after, the shard's change from empty to
    /// holding ids or back is counted. A step that fails keeps its reservation: the record then
    /// counts one shard too many, which only delays a change of the shard count, where one too
    /// few could hide ids. Returns the reply after its leading change.
    async fn shard_run(
        &self,
        inv: &redis::ScriptInvocation<'_>,
        at: ShardRef<'_>,
        enqueue: bool,
    ) -> Result<Vec<Value>> {
        self.record(at, if enqueue { "reserve" } else { "check" }, 0).await?;
        let mut reply: Vec<Value> = self.run(inv).await?;
        if reply.is_empty() {
            return Err(Error::internal("queue script replied with nothing"));
        }
        let change = int(&reply[0])? - i64::from(enqueue);
        if change != 0 {
            self.record(at, "settle", change).await?;
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
            let reply = self.shard_run(&inv, at, true).await?;
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
            let reply = self.shard_run(&inv, at, false).await?;
            if reply.is_empty() || (reply.len() - 1) % 2 != 0 {
                return Err(Error::internal(format!("claim script replied with {} values", reply.len())));
            }
            let visible_until = int(&reply[0])?;
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
            let reply = self.shard_run(&inv, at, false).await?;
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
            let reply = self.shard_run(&inv, at, false).await?;
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
            let inv = self.shard_call(size_script(), at);
            let reply = self.shard_run(&inv, at, false).await?;
            if reply.len() != 4 {
                return Err(Error::internal(format!("size script replied with {} values", reply.len())));
            }
            let n = |i: usize| int(&reply[i]).map(|v| v.max(0) as u64);
            Ok(ShardSize { shard: at.shard, waiting: n(0)?, due: n(1)?, claimed: n(2)?, again: n(3)? })
        })
    }
}
