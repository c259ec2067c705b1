//! The backends behind one interface: the in-process embedded store (in memory, or durable in a
//! file), Redis, and PostgreSQL.
//!
//! Each pattern has one trait ([`TrackerBackend`], [`LockBackend`], [`QueueBackend`],
//! [`StateBackend`]), implemented directly by each backend. A [`Client`](crate::Client) holds
//! its backend as a `Box<dyn Backend>`: the one place a call is dispatched to the chosen backend.
//! The traits return boxed futures so they stay object-safe; the embedded stores (in memory and
//! durable) do their work before they return and hand back a future that is ready on its first
//! poll, which the Node binding turns into a synchronous return.

pub mod durable;
pub mod embedded;
pub mod postgres;
pub mod redis;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};

use crate::catalog::CatalogBackend;
use crate::client::Config;
use crate::error::Result;
use crate::limiter::LimiterBackend;
use crate::lock::LockBackend;
use crate::queue::QueueBackend;
use crate::semaphore::SemaphoreBackend;
use crate::state::StateBackend;
use crate::tracker::TrackerBackend;
use crate::wakeup::{Subscription, Topic};

/// The future of one backend step.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// A backend: every pattern, and its name.
pub trait Backend:
    TrackerBackend
    + LockBackend
    + QueueBackend
    + StateBackend
    + CatalogBackend
    + LimiterBackend
    + SemaphoreBackend
    + Send
    + Sync
{
    /// `embedded`, `durable`, `redis` or `postgres`.
    fn kind(&self) -> &'static str;

    /// Lets go of what this client holds (a pooled Redis connection, a durable store's file);
    /// later calls may fail with `ERR_CLOSED`. The in-memory store holds nothing per client.
    fn close(&self) {}

    /// A subscription to the announced releases of `name` (of this client's key prefix), taken
    /// by a wait before each try (see [`crate::wakeup`]); none where releases are not announced
    /// (every backend but PostgreSQL) or not now: the wait then polls.
    fn subscribe(&self, _topic: Topic, _name: &str) -> Option<Subscription> {
        None
    }
}

/// A step that is already done: ready on its first poll.
pub(crate) fn ready<'a, T: Send + 'a>(out: Result<T>) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(out))
}

/// Locks a mutex, recovering from poisoning: every table keeps itself consistent at each step,
/// so a panic in one caller must not make the store unusable for the others.
pub(crate) fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Opens the in-memory embedded store (no URL, no path), the durable store in file `path`, or a
/// Redis connection (one server's URL, or a cluster's seed URLs), or a PostgreSQL database.
pub async fn open(
    url: Option<&str>,
    cluster: Option<&[String]>,
    sentinel: Option<&redis::SentinelOptions>,
    postgres: Option<&postgres::PostgresOptions>,
    config: &Config,
) -> Result<Box<dyn Backend>> {
    if let Some(opts) = postgres {
        return Ok(Box::new(postgres::Postgres::open(opts, config).await?));
    }
    if let (None, None, Some(opts)) = (url, cluster, sentinel) {
        return Ok(Box::new(redis::RedisStore::open(redis::Endpoints::Sentinel(opts), config).await?));
    }
    match (url, cluster, &config.path) {
        (Some(url), _, _) => {
            Ok(Box::new(redis::RedisStore::open(redis::Endpoints::Single(url), config).await?))
        }
        (None, Some(urls), _) => {
            Ok(Box::new(redis::RedisStore::open(redis::Endpoints::Cluster(urls), config).await?))
        }
        (None, None, None) => Ok(Box::new(embedded::Embedded::open(config.keys.prefix()))),
        (None, None, Some(path)) => {
            Ok(Box::new(durable::Durable::open(path, config.keys.prefix(), config.durability)?))
        }
    }
}
