//! A Redis Cluster, through redis-rs's cluster client: the slot map is read from the seed nodes,
//! each script goes to the primary owning its keys' slot (MOVED and ASK followed, the map rebuilt
//! after a MOVED or when a node is lost, so a promoted replica takes over after a failover), and
//! nothing is written to a replica. The shell's faster connection ([`super::transport`]) speaks
//! to one server only, so a cluster never uses it.
//!
//! A script the node of its slot does not have yet is loaded on that node only ([`SlotPinned`]):
//! redis-rs would send its `SCRIPT LOAD` to every primary and wait for all of them, so one slow or
//! unreachable primary would fail the first call of a script on every other node too.

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Arg, Cmd, ConnectionAddr, IntoConnectionInfo, Pipeline, RedisFuture, RedisResult, Value};

use super::{map_error, tcp_settings, Link, Shared, Target};
use crate::client::Config;
use crate::error::{Error, ErrorCode, FieldPath, Result};
use crate::keys::hash_slot;

/// Retries of one call through redirections, reconnections and a cluster without a primary for
/// a slot; each call is bounded by the command timeout as a whole anyway.
const RETRIES: u32 = 16;
/// Wait before a retry: from [`MIN_RETRY_WAIT_MS`], doubling, up to [`MAX_RETRY_WAIT_MS`]. Short,
/// so a call that waits out a failover goes through soon after the replica is promoted.
pub(super) const MIN_RETRY_WAIT_MS: u64 = 10;
pub(super) const MAX_RETRY_WAIT_MS: u64 = 250;

/// Calls made again after a `NOSCRIPT` that redis-rs's own load and retry did not cure (see
/// [`ClusterLink::run`]).
const NOSCRIPT_RETRIES: u32 = 3;

/// The cluster connection of a pooled store.
pub(super) struct ClusterLink {
    conn: ClusterConnection,
}

impl ClusterLink {
    /// Runs a script. redis-rs answers `NOSCRIPT` by loading the script and sending it once more;
    /// just after a failover the load can still go to the old primary (the slot map is rebuilt by
    /// the `MOVED` of the second send) while the script reaches the promoted one, which lacks it.
    /// A `NOSCRIPT` reply means the script did not run, so the call is made again, a bounded
    /// number of times after short waits: the load then follows the rebuilt map to the node that
    /// lacks the script.
    pub(super) async fn run<T: redis::FromRedisValue>(
        &self,
        inv: &redis::ScriptInvocation<'_>,
    ) -> RedisResult<T> {
        let mut again = NOSCRIPT_RETRIES;
        loop {
            match inv.invoke_async(&mut SlotPinned { conn: self.conn.clone(), slot: None }).await {
                Err(e)
                    if again > 0
                        && e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    again -= 1;
                    // A moment for the map's rebuild, which the redirection started.
                    let wait = MIN_RETRY_WAIT_MS << (NOSCRIPT_RETRIES - again);
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
                outcome => return outcome,
            }
        }
    }
}

/// The cluster connection as one script call sees it: the `SCRIPT LOAD` that follows a `NOSCRIPT`
/// reply goes to the primary of the slot the script was sent to (the node that lacks it), not to
/// every primary; every other command is routed as redis-rs routes it.
struct SlotPinned {
    conn: ClusterConnection,
    /// The slot of the last script sent (its first key's).
    slot: Option<u16>,
}

/// The first two words of `cmd`, and its fourth argument (a script call's first key).
fn head(cmd: &Cmd) -> (&[u8], &[u8], Option<&[u8]>) {
    let mut args = cmd.args_iter().map(|a| match a {
        Arg::Simple(a) => a,
        _ => &[],
    });
    let (first, second) = (args.next().unwrap_or_default(), args.next().unwrap_or_default());
    let key = match args.next() {
        Some(n) if n != b"0" => args.next(),
        _ => None,
    };
    (first, second, key)
}

impl ConnectionLike for SlotPinned {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let (first, second, key) = head(cmd);
        if first.eq_ignore_ascii_case(b"EVALSHA") || first.eq_ignore_ascii_case(b"EVAL") {
            self.slot = key.map(hash_slot);
        } else if let (true, Some(slot)) =
            (first.eq_ignore_ascii_case(b"SCRIPT") && second.eq_ignore_ascii_case(b"LOAD"), self.slot)
        {
            let to = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
            return Box::pin(self.conn.route_command(cmd.clone(), RoutingInfo::SingleNode(to)));
        }
        self.conn.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.conn.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
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
            ErrorCode::BackendUnavailable,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_call_is_read_as_its_command_and_first_key() {
        let mut call = redis::cmd("EVALSHA");
        call.arg("abc").arg(2).arg("{q:x:1}:w").arg("{q:x:1}:c").arg("owner");
        assert_eq!(head(&call), (&b"EVALSHA"[..], &b"abc"[..], Some(&b"{q:x:1}:w"[..])));
        let mut no_keys = redis::cmd("EVAL");
        no_keys.arg("return 1").arg(0).arg("a");
        assert_eq!(head(&no_keys).2, None);
        let mut load = redis::cmd("SCRIPT");
        load.arg("LOAD").arg("return 1");
        let (first, second, _) = head(&load);
        assert!(first.eq_ignore_ascii_case(b"script") && second.eq_ignore_ascii_case(b"load"));
    }
}
