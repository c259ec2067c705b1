//! The entry point: a client bound to one backend and its settings.

use std::sync::Arc;

use crate::backend::durable::Durability;
use crate::backend::{self, Backend};
use crate::error::Result;
use crate::keys::{Keys, DEFAULT_PREFIX};
use crate::validate;

/// Default connect timeout to Redis.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 2_000;
/// Default timeout of one Redis command (or script) once connected.
pub const DEFAULT_COMMAND_TIMEOUT_MS: u64 = 5_000;
/// Default time finished item records are kept: 30 days.
pub const DEFAULT_RETENTION_MS: u64 = 30 * 24 * 3600 * 1000;

/// Options of [`Client::open`], before validation (durations as JavaScript numbers).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenOptions {
    /// `redis://[user:password@]host[:port][/db]` or `rediss://…` for TLS. None: the embedded store.
    pub url: Option<String>,
    /// A file for the durable embedded store (created when absent): state survives restarts and
    /// crashes, and processes that open the same file share it. None (and no URL): in memory.
    pub path: Option<String>,
    /// `process` (default: a resolved call survives kill -9) or `fsync` (also a power loss).
    pub durability: Option<String>,
    /// Prefix of every key (and namespace of the embedded store). Default `fg:`.
    pub prefix: Option<String>,
    pub connect_timeout_ms: Option<f64>,
    pub command_timeout_ms: Option<f64>,
    /// How long item records are kept after their last change (completed and failed items, and
    /// abandoned ones after their lease). Default 30 days.
    pub retention_ms: Option<f64>,
}

/// Validated settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub keys: Keys,
    pub connect_timeout_ms: u64,
    pub command_timeout_ms: u64,
    pub retention_ms: u64,
    /// The durable store's file.
    pub path: Option<String>,
    pub durability: Durability,
}

#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
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
        let ms = |field: &str, v: Option<f64>, default: u64| -> Result<u64> {
            match v {
                Some(v) => validate::duration_ms(field, v),
                None => Ok(default),
            }
        };
        let config = Config {
            keys,
            connect_timeout_ms: ms("connectTimeoutMs", opts.connect_timeout_ms, DEFAULT_CONNECT_TIMEOUT_MS)?,
            command_timeout_ms: ms("commandTimeoutMs", opts.command_timeout_ms, DEFAULT_COMMAND_TIMEOUT_MS)?,
            retention_ms: ms("retentionMs", opts.retention_ms, DEFAULT_RETENTION_MS)?,
            path: durable_path(&opts)?,
            durability: match opts.durability.as_deref() {
                Some(d) => Durability::parse(d)?,
                None => Durability::default(),
            },
        };
        let backend = backend::open(opts.url.as_deref(), &config).await?;
        Ok(Client { inner: Arc::new(Inner { backend, config }) })
    }

    pub fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// `embedded`, `durable` or `redis`.
    pub fn kind(&self) -> &'static str {
        self.inner.backend.kind()
    }
}

/// The durable store's path, checked: not empty, and not together with a Redis URL.
fn durable_path(opts: &OpenOptions) -> Result<Option<String>> {
    match (&opts.path, &opts.url) {
        (Some(_), Some(_)) => Err(crate::Error::invalid(
            "give either url (Redis) or path (the durable embedded store), not both",
        )),
        (Some(p), None) if p.is_empty() || p.contains('\0') => {
            Err(crate::Error::invalid("path must be a non-empty file path without NUL characters"))
        }
        (p, _) => Ok(p.clone()),
    }
}
