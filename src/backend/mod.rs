//! The two backends behind one interface: the in-process embedded store and Redis.

pub mod embedded;
pub mod redis;

use std::future::Future;
use std::sync::{Mutex, MutexGuard};

use crate::client::Config;
use crate::error::Result;
use crate::lock::{Attempt, ExtendResult, LockBackend, LockInfo, ReleaseResult};
use crate::tracker::{ItemList, ItemOp, ItemState, ListQuery, OpResult, TrackerBackend};

/// Everything a backend provides.
pub trait StoreBackend: TrackerBackend + LockBackend {}
impl<T: TrackerBackend + LockBackend> StoreBackend for T {}

/// Locks a mutex, recovering from poisoning: every table keeps itself consistent at each step,
/// so a panic in one caller must not make the store unusable for the others.
pub(crate) fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub enum Backend {
    Embedded(embedded::Embedded),
    Redis(redis::RedisStore),
}

pub async fn open(url: Option<&str>, config: &Config) -> Result<Backend> {
    match url {
        None => Ok(Backend::Embedded(embedded::Embedded::open(config.keys.prefix()))),
        Some(url) => Ok(Backend::Redis(redis::RedisStore::open(url, config).await?)),
    }
}

impl Backend {
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Embedded(_) => "embedded",
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
                Backend::Redis(b) => b.$method($($arg),*).await,
            }
        }
    };
}

impl TrackerBackend for Backend {
    fn apply(&self, group: &str, ops: &[ItemOp], retention_ms: u64) -> impl Future<Output = Result<Vec<OpResult>>> + Send {
        forward!(self.apply(group, ops, retention_ms))
    }
    fn read(&self, group: &str, ids: &[String]) -> impl Future<Output = Result<Vec<ItemState>>> + Send {
        forward!(self.read(group, ids))
    }
    fn list(&self, group: &str, query: ListQuery, retention_ms: u64) -> impl Future<Output = Result<ItemList>> + Send {
        forward!(self.list(group, query, retention_ms))
    }
}

impl LockBackend for Backend {
    fn try_acquire(&self, name: &str, owner: &str, lease_ms: u64, label: Option<&str>) -> impl Future<Output = Result<Attempt>> + Send {
        forward!(self.try_acquire(name, owner, lease_ms, label))
    }
    fn release(&self, name: &str, owner: &str) -> impl Future<Output = Result<ReleaseResult>> + Send {
        forward!(self.release(name, owner))
    }
    fn extend(&self, name: &str, owner: &str, lease_ms: u64) -> impl Future<Output = Result<ExtendResult>> + Send {
        forward!(self.extend(name, owner, lease_ms))
    }
    fn inspect(&self, name: &str) -> impl Future<Output = Result<LockInfo>> + Send {
        forward!(self.inspect(name))
    }
}
