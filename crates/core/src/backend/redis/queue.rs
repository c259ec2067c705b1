//! Dedup Queue on Redis: one script call per shard and step. Each script is the shared head
//! `queue_common.lua` (key names, the server's time, reaping expired claims, the shard count
//! check) followed by the step's own part.

use std::future::Future;

use redis::Value;

use super::{int, opt_str, RedisStore};
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

const PARTS: [char; 5] = ['w', 'c', 'o', 'a', 'm'];

impl RedisStore {
    /// Prepares a call of `script` on one shard: its five keys and the shard count.
    fn shard_call<'s>(&self, script: &'s redis::Script, at: ShardRef<'_>) -> redis::ScriptInvocation<'s> {
        let head = self.keys().queue_shard(at.queue, at.shard);
        let mut inv = script.prepare_invoke();
        for p in PARTS {
            inv.key(self.keys().queue_key(&head, p));
        }
        inv.arg(at.shards);
        inv
    }

    /// Runs a shard call; the reply after its leading status, or the shard count error.
    async fn shard_run(&self, inv: &redis::ScriptInvocation<'_>, at: ShardRef<'_>) -> Result<Vec<Value>> {
        let mut reply: Vec<Value> = self.run(inv).await?;
        if reply.is_empty() {
            return Err(Error::internal("queue script replied with nothing"));
        }
        if int(&reply[0])? == 0 {
            let stored = reply.get(1).map(int).transpose()?.unwrap_or(0);
            return Err(shard_mismatch(at, stored.max(0) as u64));
        }
        reply.remove(0);
        Ok(reply)
    }

    async fn enqueue_shard(
        &self,
        at: ShardRef<'_>,
        ids: &[String],
        delay_ms: u64,
        debounce: bool,
    ) -> Result<Vec<(EnqueueOutcome, i64)>> {
        let mut inv = self.shard_call(enqueue_script(), at);
        inv.arg(delay_ms).arg(if debounce { "1" } else { "" });
        for id in ids {
            inv.arg(id);
        }
        let reply = self.shard_run(&inv, at).await?;
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
    }

    async fn claim_shard(
        &self,
        at: ShardRef<'_>,
        owner: &str,
        limit: u64,
        visibility_ms: u64,
    ) -> Result<ShardClaim> {
        let mut inv = self.shard_call(claim_script(), at);
        inv.arg(owner).arg(limit).arg(visibility_ms);
        let reply = self.shard_run(&inv, at).await?;
        if reply.is_empty() || (reply.len() - 1) % 2 != 0 {
            return Err(Error::internal(format!("claim script replied with {} values", reply.len())));
        }
        let visible_until = int(&reply[0])?;
        let items = reply[1..]
            .chunks(2)
            .map(|p| Ok((opt_str(&p[0])?.unwrap_or_default(), int(&p[1])?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(ShardClaim { visible_until, items })
    }

    async fn settle_shard(
        &self,
        at: ShardRef<'_>,
        owner: &str,
        ids: &[String],
        action: SettleAction,
    ) -> Result<Vec<(SettleOutcome, Option<i64>)>> {
        let mut inv = self.shard_call(settle_script(), at);
        match action {
            SettleAction::Ack => inv.arg(owner).arg("a").arg(0),
            SettleAction::Release { delay_ms } => inv.arg(owner).arg("r").arg(delay_ms),
        };
        for id in ids {
            inv.arg(id);
        }
        let reply = self.shard_run(&inv, at).await?;
        if reply.len() != ids.len() * 2 {
            return Err(Error::internal(format!("ack/release script replied with {} values", reply.len())));
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
    }

    async fn peek_shard(&self, at: ShardRef<'_>, limit: u64) -> Result<(i64, Vec<(String, i64)>)> {
        let mut inv = self.shard_call(peek_script(), at);
        inv.arg(limit);
        let reply = self.shard_run(&inv, at).await?;
        if reply.is_empty() || (reply.len() - 1) % 2 != 0 {
            return Err(Error::internal(format!("peek script replied with {} values", reply.len())));
        }
        let now = int(&reply[0])?;
        let items = reply[1..]
            .chunks(2)
            .map(|p| Ok((opt_str(&p[0])?.unwrap_or_default(), int(&p[1])?)))
            .collect::<Result<Vec<_>>>()?;
        Ok((now, items))
    }

    async fn size_shard(&self, at: ShardRef<'_>) -> Result<ShardSize> {
        let inv = self.shard_call(size_script(), at);
        let reply = self.shard_run(&inv, at).await?;
        if reply.len() != 4 {
            return Err(Error::internal(format!("size script replied with {} values", reply.len())));
        }
        let n = |i: usize| int(&reply[i]).map(|v| v.max(0) as u64);
        Ok(ShardSize { shard: at.shard, waiting: n(0)?, due: n(1)?, claimed: n(2)?, again: n(3)? })
    }
}

impl QueueBackend for RedisStore {
    fn enqueue(
        &self,
        at: ShardRef<'_>,
        ids: &[String],
        delay_ms: u64,
        debounce: bool,
    ) -> impl Future<Output = Result<Vec<(EnqueueOutcome, i64)>>> + Send {
        self.enqueue_shard(at, ids, delay_ms, debounce)
    }
    fn claim(
        &self,
        at: ShardRef<'_>,
        owner: &str,
        limit: u64,
        visibility_ms: u64,
    ) -> impl Future<Output = Result<ShardClaim>> + Send {
        self.claim_shard(at, owner, limit, visibility_ms)
    }
    fn settle(
        &self,
        at: ShardRef<'_>,
        owner: &str,
        ids: &[String],
        action: SettleAction,
    ) -> impl Future<Output = Result<Vec<(SettleOutcome, Option<i64>)>>> + Send {
        self.settle_shard(at, owner, ids, action)
    }
    fn peek(
        &self,
        at: ShardRef<'_>,
        limit: u64,
    ) -> impl Future<Output = Result<(i64, Vec<(String, i64)>)>> + Send {
        self.peek_shard(at, limit)
    }
    fn size(&self, at: ShardRef<'_>) -> impl Future<Output = Result<ShardSize>> + Send {
        self.size_shard(at)
    }
}
