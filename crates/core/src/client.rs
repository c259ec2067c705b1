//! The entry point: a client bound to one backend and its settings.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::durable::Durability;
use crate::backend::postgres::PostgresOptions;
use crate::backend::redis::SentinelOptions;
use crate::backend::{self, Backend};
use crate::error::{Error, Result};
use crate::keys::{Keys, DEFAULT_PREFIX};
use crate::validate;

/// Default connect timeout to Redis.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 2_000;
/// Default timeout of one Redis command (or script) once connected.
pub const DEFAULT_COMMAND_TIMEOUT_MS: u64 = 5_000;
/// Default time finished item records are kept: 30 days.
pub const DEFAULT_RETENTION_MS: u64 = 30 * 24 * 3600 * 1000;

/// Options of [`Client::open`], before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// `redis://[user:password@]host[:port][/db]` or `rediss://…` for TLS. None: the embedded store.
    pub url: Option<String>,
    /// The seed nodes of a Redis Cluster, `redis://host:port` each (any nodes of the cluster,
    /// primaries or replicas; one is enough, more survive the loss of some). Not with `url` or
    /// `path`.
    pub cluster: Option<Vec<String>>,
    /// A Sentinel-managed Redis: the master name, the sentinels, and the data nodes'
    /// credentials. Not with `url`, `cluster` or `path`.
    pub sentinel: Option<SentinelOptions>,
    /// A PostgreSQL database: its URL, schema and pool. Not with `url`, `cluster`, `sentinel` or
    /// `path`. See docs/postgres.md.
    pub postgres: Option<PostgresOptions>,
    /// A file for the durable embedded store (created when absent): state survives restarts and
    /// crashes, and processes that open the same file share it. None (and no URL): in memory.
    pub path: Option<PathBuf>,
    /// What a resolved call of the durable store survives. Default [`Durability::Process`].
    pub durability: Option<Durability>,
    /// Prefix of every key (and namespace of the embedded store). Default `fg:`.
    pub prefix: Option<String>,
    /// Connect timeout to Redis. Default 2 s.
    pub connect_timeout: Option<Duration>,
    /// Timeout of one Redis command. Default 5 s.
    pub command_timeout: Option<Duration>,
    /// How long item records are kept after their last change (completed and failed items, and
    /// abandoned ones after their lease). Default 30 days.
    pub retention: Option<Duration>,
}

/// Validated settings (durations in whole milliseconds, as the backends use them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub keys: Keys,
    pub connect_timeout_ms: u64,
    pub command_timeout_ms: u64,
    pub retention_ms: u64,
    /// The durable store's file.
    pub path: Option<PathBuf>,
    pub durability: Durability,
}

#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Box<dyn Backend>,
    config: Config,
}

impl Client {
    /// Opens a client. Without a URL it uses the process-wide embedded store (in memory, or the
    /// durable store in `path`); with one it connects
    /// to Redis (reusing a pooled connection for the same URL and timeouts) and fails within the
    /// connect timeout when Redis cannot be reached.
    pub async fn open(opts: OpenOptions) -> Result<Client> {
        let prefix = opts.prefix.as_deref().unwrap_or(DEFAULT_PREFIX);
        let keys = Keys::new(prefix)?;
        let config = Config {
            keys,
            connect_timeout_ms: validate::duration_or(
                "connect_timeout",
                opts.connect_timeout,
                DEFAULT_CONNECT_TIMEOUT_MS,
            )?,
            command_timeout_ms: validate::duration_or(
                "command_timeout",
                opts.command_timeout,
                DEFAULT_COMMAND_TIMEOUT_MS,
            )?,
            retention_ms: validate::duration_or("retention", opts.retention, DEFAULT_RETENTION_MS)?,
            path: durable_path(&opts)?,
            durability: opts.durability.unwrap_or_default(),
        };
        cluster_check(&opts)?;
        sentinel_check(&opts)?;
        postgres_check(&opts)?;
        let backend = backend::open(
            opts.url.as_deref(),
            opts.cluster.as_deref(),
            opts.sentinel.as_ref(),
            opts.postgres.as_ref(),
            &config,
        )
        .await?;
        Ok(Client { inner: Arc::new(Inner { backend, config }) })
    }

    pub fn backend(&self) -> &dyn Backend {
        &*self.inner.backend
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// `embedded`, `durable`, `redis` or `postgres`.
    pub fn kind(&self) -> &'static str {
        self.inner.backend.kind()
    }

    /// Lets go of this client's Redis connection (shared with other open clients of the same
    /// settings, and closed when the last of them closes); calls in flight finish, later Redis
    /// calls fail with `ERR_CLOSED`. Closing twice is harmless. The durable store lets go of its
    /// file (later calls fail with `ERR_CLOSED`; after the file's last client in the process the
    /// file is closed, its `-wal` log removed). The in-memory store holds nothing: there it
    /// changes nothing.
    pub fn close(&self) {
        self.inner.backend.close();
    }
}

/// The most seed nodes of a cluster.
pub const MAX_CLUSTER_SEEDS: usize = 64;

/// The cluster seeds, checked: a non-empty list of at most [`MAX_CLUSTER_SEEDS`] URLs, and not
/// together with `url` or `path`.
fn cluster_check(opts: &OpenOptions) -> Result<()> {
    let Some(seeds) = &opts.cluster else { return Ok(()) };
    if opts.url.is_some() || opts.path.is_some() {
        return Err(Error::invalid_at(
            "cluster",
            "cannot be given with url or path: give url (one Redis server), cluster (the seed nodes of a \
             Redis Cluster) or path (the durable embedded store)",
        ));
    }
    if seeds.is_empty() || seeds.len() > MAX_CLUSTER_SEEDS {
        return Err(Error::invalid_at(
            "cluster",
            format!("must list 1 to {MAX_CLUSTER_SEEDS} seed node URLs, got {}", seeds.len()),
        ));
    }
    Ok(())
}

/// The sentinel options, checked: not together with `url`, `cluster` or `path`.
fn sentinel_check(opts: &OpenOptions) -> Result<()> {
    let Some(sentinel) = &opts.sentinel else { return Ok(()) };
    if opts.url.is_some() || opts.cluster.is_some() || opts.path.is_some() {
        return Err(Error::invalid_at(
            "sentinel",
            "cannot be given with url, cluster or path: give url (one Redis server), cluster (the seed nodes \
             of a Redis Cluster), sentinel (a Sentinel-managed Redis) or path (the durable embedded store)",
        ));
    }
    sentinel.check()
}

/// The PostgreSQL options, checked: not together with `url`, `cluster`, `sentinel` or `path`.
fn postgres_check(opts: &OpenOptions) -> Result<()> {
    let Some(pg) = &opts.postgres else { return Ok(()) };
    if opts.url.is_some() || opts.cluster.is_some() || opts.sentinel.is_some() || opts.path.is_some() {
        return Err(Error::invalid_at(
            "postgres",
            "cannot be given with url, cluster, sentinel or path: give one backend (postgres: a PostgreSQL \
             database; url, cluster or sentinel: Redis; path: the durable embedded store)",
        ));
    }
    pg.schema()?;
    pg.pool_size()?;
    Ok(())
}

/// The durable store's path, checked: not empty, and not together with a Redis URL.
fn durable_path(opts: &OpenOptions) -> Result<Option<PathBuf>> {
    match (&opts.path, &opts.url) {
        (Some(_), Some(_)) => Err(Error::invalid_at(
            "path",
            "cannot be given with url: give either url (Redis) or path (the durable embedded store)",
        )),
        (Some(p), None) if p.as_os_str().is_empty() || p.as_os_str().as_encoded_bytes().contains(&0) => {
            Err(Error::invalid_at("path", "must be a non-empty file path without NUL characters"))
        }
        (p, _) => Ok(p.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sentinel() -> Option<SentinelOptions> {
        Some(SentinelOptions {
            master_name: "main".into(),
            nodes: vec!["redis://127.0.0.1:26379".into()],
            ..Default::default()
        })
    }

    #[test]
    fn sentinel_excludes_the_other_targets() {
        let url =
            OpenOptions { url: Some("redis://127.0.0.1".into()), sentinel: sentinel(), ..Default::default() };
        let cluster = OpenOptions {
            cluster: Some(vec!["redis://127.0.0.1".into()]),
            sentinel: sentinel(),
            ..Default::default()
        };
        let path = OpenOptions { path: Some("x.db".into()), sentinel: sentinel(), ..Default::default() };
        for opts in [url, path] {
            let e = sentinel_check(&opts).expect_err("refused");
            assert_eq!(e.code, crate::error::ErrorCode::InvalidArgument);
            assert_eq!(e.field.map(|f| f.to_string()).as_deref(), Some("sentinel"));
        }
        // `cluster` with `sentinel` is refused by either check, naming one of them.
        assert!(cluster_check(&cluster).is_ok() && sentinel_check(&cluster).is_err());
        sentinel_check(&OpenOptions { sentinel: sentinel(), ..Default::default() }).unwrap();
    }
}
