//! The backends behind one interface: the in-process embedded store (in memory, or durable in a
//! file) and Redis.

pub mod durable;
pub mod embedded;
pub mod redis;

use std::future::Future;
use std::sync::{Mutex, MutexGuard};

use crate::client::Config;
use crate::error::Result;
use crate::lock::{Attempt, ExtendResult, LockBackend, LockInfo, ReleaseResult};
use crate::queue::{
    EnqueueOutcome, QueueBackend, SettleAction, SettleOutcome, ShardClaim, ShardRef, ShardSize,
};
use crate::state::{Expiry, KeyClaim, Refusal, SetResult, StateBackend, StateValue};
use crate::tracker::{
    BatchClaim, ClaimBatch, ItemList, ItemOp, ItemState, ListQuery, OpResult, TrackerBackend,
};

/// Everything a backend provides.
pub trait StoreBackend: TrackerBackend + LockBackend + QueueBackend + StateBackend {}
impl<T: TrackerBackend + LockBackend + QueueBackend + StateBackend> StoreBackend for T {}

/// Locks a mutex, recovering from poisoning: every table keeps itself consistent at each step,
/// so a panic in one caller must not make the store unusable for the others.
pub(crate) fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub enum Backend {
    Embedded(embedded::Embedded),
    Durable(durable::Durable),
    Redis(redis::RedisStore),
}

pub async fn open(url: Option<&str>, config: &Config) -> Result<Backend> {
    match (url, &config.path) {
        (None, None) => Ok(Backend::Embedded(embedded::Embedded::open(config.keys.prefix()))),
        (None, Some(path)) => {
            Ok(Backend::Durable(durable::Durable::open(path, config.keys.prefix(), config.durability)?))
        }
        (Some(url), _) => Ok(Backend::Redis(redis::RedisStore::open(url, config).await?)),
    }
}

impl Backend {
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Embedded(_) => "embedded",
            Backend::Durable(_) => "durable",
            Backend::Redis(_) => "redis",
        }
    }
}

/// Forwards a trait method to the selected backend.
macro_rules! forward {
    ($self:ident . $method:ident ( $($arg:expr),* )) => {
        async move {
            match $self {
                Backend::Embedded(b) => b.$method($($arg),*).await,
                Backend::Durable(b) => b.$method($($arg),*).await,
                Backend::Redis(b) => b.$method($($arg),*).await,
            }
        }
    };
}

impl TrackerBackend for Backend {
    fn claim_batch(
        &self,
        group: &str,
        claim: BatchClaim<'_>,
    ) -> impl Future<Output = Result<ClaimBatch>> + Send {
        forward!(self.claim_batch(group, claim))
    }
    fn apply(
        &self,
        group: &str,
        ops: &[ItemOp],
        retention_ms: u64,
    ) -> impl Future<Output = Result<Vec<OpResult>>> + Send {
        forward!(self.apply(group, ops, retention_ms))
    }
    fn read(&self, group: &str, ids: &[String]) -> impl Future<Output = Result<Vec<ItemState>>> + Send {
        forward!(self.read(group, ids))
    }
    fn list(
        &self,
        group: &str,
        query: ListQuery,
        retention_ms: u64,
    ) -> impl Future<Output = Result<ItemList>> + Send {
        forward!(self.list(group, query, retention_ms))
    }
}

impl LockBackend for Backend {
    fn try_acquire(
        &self,
        name: &str,
        owner: &str,
        lease_ms: u64,
        label: Option<&str>,
    ) -> impl Future<Output = Result<Attempt>> + Send {
        forward!(self.try_acquire(name, owner, lease_ms, label))
    }
    fn release(&self, name: &str, owner: &str) -> impl Future<Output = Result<ReleaseResult>> + Send {
        forward!(self.release(name, owner))
    }
    fn extend(
        &self,
        name: &str,
        owner: &str,
        lease_ms: u64,
    ) -> impl Future<Output = Result<ExtendResult>> + Send {
        forward!(self.extend(name, owner, lease_ms))
    }
    fn inspect(&self, name: &str) -> impl Future<Output = Result<LockInfo>> + Send {
        forward!(self.inspect(name))
    }
}

impl QueueBackend for Backend {
    fn enqueue(
        &self,
        at: ShardRef<'_>,
        ids: &[String],
        delay_ms: u64,
        debounce: bool,
    ) -> impl Future<Output = Result<Vec<(EnqueueOutcome, i64)>>> + Send {
        forward!(self.enqueue(at, ids, delay_ms, debounce))
    }
    fn claim(
        &self,
        at: ShardRef<'_>,
        owner: &str,
        limit: u64,
        visibility_ms: u64,
    ) -> impl Future<Output = Result<ShardClaim>> + Send {
        forward!(self.claim(at, owner, limit, visibility_ms))
    }
    fn settle(
        &self,
        at: ShardRef<'_>,
        owner: &str,
        ids: &[String],
        action: SettleAction,
    ) -> impl Future<Output = Result<Vec<(SettleOutcome, Option<i64>)>>> + Send {
        forward!(self.settle(at, owner, ids, action))
    }
    fn peek(
        &self,
        at: ShardRef<'_>,
        limit: u64,
    ) -> impl Future<Output = Result<(i64, Vec<(String, i64)>)>> + Send {
        forward!(self.peek(at, limit))
    }
    fn size(&self, at: ShardRef<'_>) -> impl Future<Output = Result<ShardSize>> + Send {
        forward!(self.size(at))
    }
}

impl StateBackend for Backend {
    fn get(&self, keys: &[String]) -> impl Future<Output = Result<Vec<Option<StateValue>>>> + Send {
        forward!(self.get(keys))
    }
    fn set(
        &self,
        key: &str,
        json: &str,
        expiry: Expiry,
        if_absent: bool,
    ) -> impl Future<Output = Result<std::result::Result<SetResult, Refusal>>> + Send {
        forward!(self.set(key, json, expiry, if_absent))
    }
    fn delete(&self, key: &str) -> impl Future<Output = Result<bool>> + Send {
        forward!(self.delete(key))
    }
    fn increment(
        &self,
        key: &str,
        by: i64,
        ttl_ms: Option<u64>,
    ) -> impl Future<Output = Result<std::result::Result<i64, Refusal>>> + Send {
        forward!(self.increment(key, by, ttl_ms))
    }
    fn claim_key(
        &self,
        key: &str,
        owner: &str,
        lease_ms: u64,
    ) -> impl Future<Output = Result<KeyClaim>> + Send {
        forward!(self.claim_key(key, owner, lease_ms))
    }
    fn complete_key(
        &self,
        key: &str,
        owner: &str,
        json: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<bool>> + Send {
        forward!(self.complete_key(key, owner, json, ttl_ms))
    }
    fn release_key(&self, key: &str, owner: &str) -> impl Future<Output = Result<bool>> + Send {
        forward!(self.release_key(key, owner))
    }
}
