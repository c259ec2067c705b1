//! A Redis Cluster, through redis-rs's cluster client: the slot map is read from the seed nodes,
//! each script goes to the primary owning its keys' slot (MOVED and ASK followed, the map rebuilt
//! after a MOVED or when a node is lost, so a promoted replica takes over after a failover), and
//! nothing is written to a replica. The shell's faster connection ([`super::transport`]) speaks
//! to one server only, so a cluster never uses it.

use std::time::Duration;

use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{ConnectionAddr, IntoConnectionInfo, RedisResult};

use super::{map_error, tcp_settings, Link, Shared, Target};
use crate::client::Config;
use crate::error::{Error, ErrorCode, FieldPath, Result};

/// Retries of one call through redirections, reconnections and a cluster without a primary for
/// a slot; each call is bounded by the command timeout as a whole anyway.
const RETRIES: u32 = 16;
/// Wait before a retry: from [`MIN_RETRY_WAIT_MS`], doubling, up to [`MAX_RETRY_WAIT_MS`]. Short,
/// so a call that waits out a failover goes through soon after the replica is promoted.
pub(super) const MIN_RETRY_WAIT_MS: u64 = 10;
pub(super) const MAX_RETRY_WAIT_MS: u64 = 250;

/// The cluster connection of a pooled store.
pub(super) struct ClusterLink {
    conn: ClusterConnection,
}

impl ClusterLink {
    pub(super) async fn run<T: redis::FromRedisValue>(
        &self,
        inv: &redis::ScriptInvocation<'_>,
    ) -> RedisResult<T> {
        inv.invoke_async(&mut self.conn.clone()).await
    }
}

/// `host:port, host:port (cluster)`: the seeds, no credentials.
fn describe(urls: &[String]) -> (String, Vec<String>) {
    let mut secret = None;
    let seeds: Vec<String> = urls
        .iter()
        .filter_map(|u| u.as_str().into_connection_info().ok())
        .map(|info| {
            if secret.is_none() {
                secret = info.redis_settings().password().map(str::to_string);
            }
            match info.addr() {
                ConnectionAddr::Tcp(h, p) => format!("{h}:{p}"),
                ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port} (TLS)"),
                other => format!("{other:?}"),
            }
        })
        .collect();
    (format!("cluster {}", seeds.join(", ")), secret.into_iter().collect())
}

/// Connects to a cluster through its seed nodes (any of them, primary or replica), reading the
/// slot map within the connect timeout.
pub(super) async fn connect(urls: &[String], config: &Config) -> Result<Shared> {
    let mut infos = Vec::with_capacity(urls.len());
    for (i, url) in urls.iter().enumerate() {
        let info = url.as_str().into_connection_info().map_err(|_| {
            Error::invalid_at(
                FieldPath::new("cluster").index(i),
                "is not a valid Redis URL: expected redis://[user:password@]host[:port] or rediss://… for TLS",
            )
        })?;
        infos.push(info);
    }
    let (display, secret) = describe(urls);
    let target = Target {
        display,
        secrets: secret,
        command_timeout_ms: config.command_timeout_ms,
        follows_failover: true,
    };
    let command_timeout = Duration::from_millis(config.command_timeout_ms);
    let client = ClusterClientBuilder::new(infos)
        .connection_timeout(Duration::from_millis(config.connect_timeout_ms))
        .response_timeout(command_timeout)
        .overall_response_timeout(Some(command_timeout))
        .retries(RETRIES)
        .min_retry_wait(MIN_RETRY_WAIT_MS)
        .max_retry_wait(MAX_RETRY_WAIT_MS)
        .tcp_settings(tcp_settings())
        .build()
        .map_err(|e| map_error(&target, e))?;
    let no_connection = || {
        Error::new(
            ErrorCode::RedisUnavailable,
            format!(
                "cannot reach Redis at {}: no slot map within connectTimeoutMs = {} ms",
                target.display, config.connect_timeout_ms
            ),
        )
    };
    let budget = Duration::from_millis(config.connect_timeout_ms.saturating_mul(2).max(50));
    let conn = match tokio::time::timeout(budget, client.get_async_connection()).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) if e.is_timeout() => return Err(no_connection()),
        Ok(Err(e)) => return Err(map_error(&target, e)),
        Err(_) => return Err(no_connection()),
    };
    Ok(Shared { link: Link::Cluster(ClusterLink { conn }), target, fast: None })
}
