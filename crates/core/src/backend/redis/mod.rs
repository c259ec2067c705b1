//! The Redis backend: one pooled, multiplexed, self-reconnecting connection per configuration,
//! shared by the open clients of the process and closed when the last of them closes (or is
//! dropped). Each atomic step is one Lua script (EVALSHA, kept in a static) or one command; lease
//! times come from the Redis server's clock. Scripts run through [`RedisStore::eval`] go over a
//! shell's faster connection when it has one for the calling thread ([`transport`]): lock,
//! semaphore, limiter, tracker and queue calls.
//!
//! A Redis Cluster is reached through redis-rs's cluster client ([`cluster`]): seed nodes, slots
//! followed through MOVED/ASK, the slot map refreshed after a failover, writes sent to primaries
//! only. Every script touches the keys of one hash slot (see `keys.rs`), so each runs whole on
//! the primary that owns it.
//!
//! A Sentinel-managed Redis is reached through its sentinels ([`sentinel`]): the primary of a
//! master name resolved again when it fails or is demoted.
//!
//! A pooled connection is retired after [`RETIRE_AFTER_TIMEOUTS`] timeouts in a row (a socket
//! that went silent, e.g. behind a dropped NAT or firewall entry, never reports an error by
//! itself), and its TCP socket has keepalive probes and `TCP_NODELAY` set.

mod catalog;
mod clock;
mod cluster;
mod id_hash;
mod limiter;
mod lock;
mod queue;
mod semaphore;
mod sentinel;
mod state;
mod tracker;
mod tracker_record;
pub mod transport;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::io::tcp::{socket2::TcpKeepalive, TcpSettings};
use redis::{ConnectionAddr, IntoConnectionInfo, RedisError};

use crate::backend::Backend;
use crate::client::Config;
use crate::error::{Error, ErrorCode, Result};
use crate::keys::Keys;
use cluster::ClusterLink;
use sentinel::SentinelLink;
pub use sentinel::SentinelOptions;

/// The connection settings a pooled connection is keyed by.
#[derive(Clone, PartialEq, Eq, Hash)]
struct PoolKey {
    /// The URL, or the seed URLs of a cluster.
    urls: Vec<String>,
    cluster: bool,
    /// The master name, sentinels and data-node credentials of a Sentinel-managed Redis.
    sentinel: Option<SentinelOptions>,
    connect_timeout_ms: u64,
    command_timeout_ms: u64,
    /// The tokio runtime whose task drives the connection: a connection dies with its runtime,
    /// and a shell may replace its runtime (the Node addon's is shut down when the last
    /// JavaScript environment using it exits, and a new one started for the next).
    runtime: Option<tokio::runtime::Id>,
}

/// The pool holds its connections weakly: the stores using one own it, and the last to close
/// (or be dropped) closes it. Entries nobody holds are removed at the next open.
fn pool() -> &'static Mutex<HashMap<PoolKey, Weak<Shared>>> {
    static POOL: OnceLock<Mutex<HashMap<PoolKey, Weak<Shared>>>> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Timeouts in a row after which a pooled connection is replaced by a new one. Small, so a
/// black-holed connection is left after a few command timeouts; more than one, so a single slow
/// script does not drop a healthy connection (and the commands pipelined on it).
pub const RETIRE_AFTER_TIMEOUTS: u32 = 3;

/// TCP keepalive of a pooled connection: the first probe after this much idle time, then one
/// every [`KEEPALIVE_INTERVAL`], [`KEEPALIVE_PROBES`] unanswered probes ending the connection.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(15);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
#[cfg(any(target_os = "linux", target_os = "macos", target_os = "freebsd", target_os = "android"))]
const KEEPALIVE_PROBES: u32 = 3;

/// The pooled connection: a self-reconnecting manager that is replaced after
/// [`RETIRE_AFTER_TIMEOUTS`] timeouts in a row (the manager reconnects after errors, not after
/// timeouts).
struct Conn {
    client: redis::Client,
    config: ConnectionManagerConfig,
    current: Mutex<Current>,
}

struct Current {
    /// Counts replacements, so timeouts of calls sent on a retired manager are not held against
    /// its successor.
    generation: u64,
    manager: ConnectionManager,
    timeouts: u32,
}

impl Conn {
    /// A handle to the current manager and its generation.
    fn checkout(&self) -> (u64, ConnectionManager) {
        let c = crate::backend::guard(&self.current);
        (c.generation, c.manager.clone())
    }

    /// Counts a call's outcome against the manager it was sent on: a timeout adds one (the last
    /// allowed one replaces the manager with a new, lazily connecting one); any reply or other
    /// error shows the connection is alive and resets the count.
    fn record<T>(&self, generation: u64, outcome: &redis::RedisResult<T>) {
        let timed_out = matches!(outcome, Err(e) if e.is_timeout());
        let mut c = crate::backend::guard(&self.current);
        if c.generation != generation || (!timed_out && c.timeouts == 0) {
            return;
        }
        if !timed_out {
            c.timeouts = 0;
            return;
        }
        c.timeouts += 1;
        if c.timeouts >= RETIRE_AFTER_TIMEOUTS {
            if let Ok(fresh) =
                ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())
            {
                c.manager = fresh;
                c.generation += 1;
                c.timeouts = 0;
            }
        }
    }
}

/// How a pooled connection reaches Redis: one server, a cluster, or the primary the sentinels
/// name.
enum Link {
    Single(Box<Conn>),
    Cluster(ClusterLink),
    Sentinel(Box<SentinelLink>),
}

/// A connection and what to say about it in errors (never the password).
struct Shared {
    link: Link,
    target: Target,
    fast: Option<std::sync::Arc<dyn transport::Endpoint>>,
}

/// Where a connection goes, for error messages: `host:port/db`, no credentials.
#[derive(Clone)]
pub struct Target {
    pub display: String,
    /// The passwords to scrub from messages.
    secrets: Vec<String>,
    pub command_timeout_ms: u64,
    /// A Cluster or Sentinel client: it follows failovers, so the errors a failover answers
    /// with for a moment are passing, not the server's final word.
    pub follows_failover: bool,
}

impl Target {
    /// Removes the passwords from a message, should a library ever echo them.
    fn scrub(&self, msg: &str) -> String {
        let mut out = msg.to_string();
        for s in self.secrets.iter().filter(|s| !s.is_empty()) {
            out = out.replace(s.as_str(), "***");
        }
        out
    }
}

pub struct RedisStore {
    /// None once closed.
    shared: RwLock<Option<Arc<Shared>>>,
    keys: Keys,
    /// What this store has learned of the server's clock (the Dedup Queue's claim deadline).
    clock: clock::ServerClock,
}

fn describe(client: &redis::Client) -> (String, Vec<String>) {
    let info = client.get_connection_info();
    let db = info.redis_settings().db();
    let addr = match info.addr() {
        ConnectionAddr::Tcp(h, p) => format!("{h}:{p}"),
        ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port} (TLS)"),
        ConnectionAddr::Unix(p) => format!("unix:{}", p.display()),
        other => format!("{other:?}"),
    };
    (format!("{addr} db {db}"), info.redis_settings().password().map(str::to_string).into_iter().collect())
}

/// Where a store connects: one server's URL, a cluster's seed URLs, or sentinels.
#[derive(Clone, Copy)]
pub enum Endpoints<'a> {
    Single(&'a str),
    Cluster(&'a [String]),
    Sentinel(&'a SentinelOptions),
}

impl RedisStore {
    pub async fn open(to: Endpoints<'_>, config: &Config) -> Result<RedisStore> {
        let (urls, cluster, sentinel) = match to {
            Endpoints::Single(url) => (vec![url.to_string()], false, None),
            Endpoints::Cluster(urls) => (urls.to_vec(), true, None),
            Endpoints::Sentinel(opts) => (Vec::new(), false, Some(opts.clone())),
        };
        let key = PoolKey {
            urls,
            cluster,
            sentinel,
            connect_timeout_ms: config.connect_timeout_ms,
            command_timeout_ms: config.command_timeout_ms,
            runtime: tokio::runtime::Handle::try_current().ok().map(|h| h.id()),
        };
        let cached = crate::backend::guard(pool()).get(&key).and_then(Weak::upgrade);
        let shared = match cached {
            Some(s) => s,
            None => {
                let s = Arc::new(match to {
                    Endpoints::Single(url) => connect(url, config).await?,
                    Endpoints::Cluster(urls) => cluster::connect(urls, config).await?,
                    Endpoints::Sentinel(opts) => sentinel::connect(opts, config).await?,
                });
                // Two first calls may race to connect; keep the first stored and drop the other.
                // Connections of other runtimes, and those no store holds, leave the pool.
                let mut pool = crate::backend::guard(pool());
                pool.retain(|k, v| k.runtime == key.runtime && v.strong_count() > 0);
                match pool.get(&key).and_then(Weak::upgrade) {
                    Some(first) => first,
                    None => {
                        pool.insert(key, Arc::downgrade(&s));
                        s
                    }
                }
            }
        };
        Ok(RedisStore {
            shared: RwLock::new(Some(shared)),
            keys: config.keys.clone(),
            clock: clock::ServerClock::default(),
        })
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The connection, or the error of a closed client.
    fn shared(&self) -> Result<Arc<Shared>> {
        self.shared.read().unwrap_or_else(|p| p.into_inner()).clone().ok_or_else(|| {
            Error::new(ErrorCode::Closed, "this client was closed: open a new one with Flowguard.open")
        })
    }

    /// Whether this store reaches a Redis Cluster (whose scripts take the keys of one slot).
    pub(crate) fn is_cluster(&self) -> Result<bool> {
        Ok(matches!(self.shared()?.link, Link::Cluster(_)))
    }

    /// Runs a script with a fresh handle to the shared connection, mapping errors. A call whose
    /// connection attempt was refused (nothing was sent) is tried once more, so the first call
    /// after Redis comes back succeeds instead of reporting the earlier refusal.
    pub(crate) async fn run<T: redis::FromRedisValue>(&self, inv: &redis::ScriptInvocation<'_>) -> Result<T> {
        let shared = self.shared()?;
        let outcome = match &shared.link {
            Link::Single(conn) => {
                let (mut generation, mut c) = conn.checkout();
                let mut outcome = inv.invoke_async::<T>(&mut c).await;
                if matches!(&outcome, Err(e) if e.is_connection_refusal()) {
                    let (g, mut c) = conn.checkout();
                    generation = g;
                    outcome = inv.invoke_async::<T>(&mut c).await;
                }
                conn.record(generation, &outcome);
                outcome
            }
            Link::Cluster(c) => c.run(inv).await,
            Link::Sentinel(s) => s.run(|mut c| async move { inv.invoke_async::<T>(&mut c).await }).await,
        };
        outcome.map_err(|e| map_error(&shared.target, e))
    }

    /// Runs a script: over the transport's endpoint when it takes the command (see
    /// [`transport`]), else as [`RedisStore::run`] does. Same errors either way.
    pub(crate) async fn eval<T: redis::FromRedisValue>(
        &self,
        lua: &'static Lua,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<T> {
        let shared = self.shared()?;
        if let Some(fast) = &shared.fast {
            let sha = lua.script.get_hash().as_bytes();
            if let Some(reply) = fast.send(&eval_cmd("EVALSHA", sha, keys, args)) {
                let v = match reply.await {
                    Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                        match fast.send(&eval_cmd("EVAL", lua.source.as_bytes(), keys, args)) {
                            Some(reply) => reply.await,
                            None => return Box::pin(self.eval_pooled(lua, keys, args)).await,
                        }
                    }
                    other => other,
                };
                return v
                    .and_then(|v| T::from_redis_value(v).map_err(RedisError::from))
                    .map_err(|e| map_error(&shared.target, e));
            }
        }
        // Boxed: redis-rs's call is a large future, and inline it would make every call's
        // future (allocated per call, also on the endpoint's path) as large.
        Box::pin(self.eval_pooled(lua, keys, args)).await
    }

    async fn eval_pooled<T: redis::FromRedisValue>(
        &self,
        lua: &'static Lua,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<T> {
        let mut inv = lua.script.prepare_invoke();
        for k in keys {
            inv.key(*k);
        }
        for a in args {
            inv.arg(*a);
        }
        self.run(&inv).await
    }
}

/// The TCP settings of every pooled connection: no Nagle delay (each command is one small write
/// awaited by its caller) and keepalive probes, so a peer that vanished is noticed even while
/// the connection is idle.
fn tcp_settings() -> TcpSettings {
    let keepalive = TcpKeepalive::new().with_time(KEEPALIVE_IDLE).with_interval(KEEPALIVE_INTERVAL);
    #[cfg(any(target_os = "linux", target_os = "macos", target_os = "freebsd", target_os = "android"))]
    let keepalive = keepalive.with_retries(KEEPALIVE_PROBES);
    TcpSettings::default().set_nodelay(true).set_keepalive(keepalive)
}

/// `EVALSHA sha numkeys keys… args…`, or `EVAL source …`.
fn eval_cmd(head: &str, body: &[u8], keys: &[&[u8]], args: &[&[u8]]) -> redis::Cmd {
    // Sized up front: one allocation each for the arguments and their bytes (this is on every
    // lock and tracker call's path).
    let bytes = head.len() + body.len() + 20 + keys.iter().chain(args).map(|a| a.len()).sum::<usize>();
    let mut cmd = redis::Cmd::with_capacity(3 + keys.len() + args.len(), bytes);
    cmd.arg(head).arg(body).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    for a in args {
        cmd.arg(*a);
    }
    cmd
}

async fn connect(url: &str, config: &Config) -> Result<Shared> {
    let invalid = || {
        Error::invalid(
            "url is not a valid Redis URL: expected redis://[user:password@]host[:port][/db] or rediss://… for TLS",
        )
    };
    let info = url.into_connection_info().map_err(|_| invalid())?.set_tcp_settings(tcp_settings());
    let client = redis::Client::open(info).map_err(|_| invalid())?;
    let (display, secret) = describe(&client);
    let fast = transport::endpoint(
        client.get_connection_info(),
        config.connect_timeout_ms,
        config.command_timeout_ms,
    );
    let target = Target {
        display,
        secrets: secret,
        command_timeout_ms: config.command_timeout_ms,
        follows_failover: false,
    };
    let mcfg = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(config.connect_timeout_ms)))
        .set_response_timeout(Some(Duration::from_millis(config.command_timeout_ms)))
        // One attempt per (re)connection: a refused connection fails at once instead of after
        // seconds of silent retries; the next call tries again.
        .set_number_of_retries(0);
    // The whole first connection, handshake and AUTH included, is bounded by the connect timeout.
    let no_connection = || {
        Error::new(
            ErrorCode::BackendUnavailable,
            format!(
                "cannot reach Redis at {}: no connection within connectTimeoutMs = {} ms",
                target.display, config.connect_timeout_ms
            ),
        )
    };
    let budget = Duration::from_millis(config.connect_timeout_ms.saturating_mul(2).max(50));
    let manager =
        match tokio::time::timeout(budget, ConnectionManager::new_with_config(client.clone(), mcfg.clone()))
            .await
        {
            Ok(Ok(c)) => c,
            // A timeout while connecting is the connect timeout's, not the command timeout's.
            Ok(Err(e)) if e.is_timeout() => return Err(no_connection()),
            Ok(Err(e)) => return Err(map_error(&target, e)),
            Err(_) => return Err(no_connection()),
        };
    Ok(Shared {
        link: Link::Single(Box::new(Conn {
            client,
            config: mcfg,
            current: Mutex::new(Current { generation: 0, manager, timeouts: 0 }),
        })),
        target,
        fast,
    })
}

impl Backend for RedisStore {
    fn kind(&self) -> &'static str {
        "redis"
    }

    /// Lets go of the pooled connection: closed now if no other open client uses it, else when
    /// the last one closes. Calls in flight finish; later calls fail with `ERR_CLOSED`.
    fn close(&self) {
        self.shared.write().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// Maps a redis-rs error to a coded error naming the server (never its password).
pub(crate) fn map_error(target: &Target, e: RedisError) -> Error {
    let detail = target.scrub(&e.to_string());
    // A client configuration redis-rs cannot use (e.g. `#insecure` without the TLS feature)
    // is a bad argument, not an error of the server.
    if e.kind() == redis::ErrorKind::InvalidClientConfig {
        return Error::invalid_at("url", format!("cannot be used: {detail}"));
    }
    let code = e.code().unwrap_or("");
    // A server that wants a password and got none refuses the connection's SELECT with
    // "Authentication required." (its NOAUTH code is not kept by redis-rs there): an auth error too.
    let auth_required =
        e.detail().is_some_and(|d| d.starts_with("NOAUTH") || d.starts_with("Authentication required"));
    if e.kind() == redis::ErrorKind::AuthenticationFailed
        || code == "NOAUTH"
        || code == "WRONGPASS"
        || auth_required
    {
        return Error::new(
            ErrorCode::BackendAuth,
            format!("Redis at {} refused the credentials: {detail}", target.display),
        );
    }
    // The sentinels answered but name no primary they see up (or the node they name is not one).
    if e.kind() == redis::ErrorKind::MasterNameNotFoundBySentinel {
        return Error::new(
            ErrorCode::BackendUnavailable,
            format!("no primary for Redis {}: the sentinels know none that is up ({detail})", target.display),
        );
    }
    // A Sentinel store's call ran on the primary, but fewer replicas than `replicaAcks` confirmed
    // it in time: it may be lost in a failover, so it is not acknowledged.
    if e.kind() == redis::ErrorKind::NoValidReplicasFoundBySentinel {
        return Error::new(
            ErrorCode::BackendUnavailable,
            format!(
                "Redis {}: {}",
                target.display,
                e.detail().unwrap_or("replicas did not confirm the call")
            ),
        );
    }
    if e.is_timeout() {
        return Error::new(
            ErrorCode::Timeout,
            format!("Redis at {} did not answer within {} ms", target.display, target.command_timeout_ms),
        );
    }
    if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
        return Error::new(
            ErrorCode::BackendUnavailable,
            format!("cannot reach Redis at {}: {detail}", target.display),
        );
    }
    // A failover or resharding in progress: a slot without a reachable primary for a moment
    // (CLUSTERDOWN, MASTERDOWN, TRYAGAIN), a node still loading its data, or, for a client that
    // follows failovers, a demoted primary (READONLY) or redirections followed as far as the
    // cluster client's retries go. A later call may succeed: unavailable, not an error of the call.
    let passing = matches!(code, "CLUSTERDOWN" | "MASTERDOWN" | "TRYAGAIN" | "LOADING")
        || e.kind() == redis::ErrorKind::ClusterConnectionNotFound
        || (target.follows_failover && matches!(code, "READONLY" | "MOVED" | "ASK"));
    if passing {
        return Error::new(
            ErrorCode::BackendUnavailable,
            format!("Redis at {} is changing hands (failover or resharding): {detail}", target.display),
        );
    }
    // One node of a cluster, opened by `url`, redirects the keys of the slots it does not own.
    if code == "MOVED" || code == "ASK" {
        return Error::new(
            ErrorCode::Backend,
            format!(
                "Redis at {} is a Redis Cluster node and redirected the call ({detail}): open the client with \
                 `cluster: [<node URLs>]` instead of `url`",
                target.display
            ),
        );
    }
    Error::new(ErrorCode::Backend, format!("Redis at {} answered with an error: {detail}", target.display))
}

/// Builds a script kept in a static, loaded once per connection and run by EVALSHA.
macro_rules! script {
    ($name:ident, $file:literal) => {
        fn $name() -> &'static redis::Script {
            static S: std::sync::OnceLock<redis::Script> = std::sync::OnceLock::new();
            S.get_or_init(|| redis::Script::new(include_str!(concat!("lua/", $file))))
        }
    };
}
pub(crate) use script;

/// A script with its source, for connections that run it by EVAL when Redis lacks it.
pub(crate) struct Lua {
    pub script: redis::Script,
    pub source: &'static str,
}

/// Like [`script!`], for [`RedisStore::eval`]: the files joined in order (shared functions first).
macro_rules! lua {
    ($name:ident, $($file:literal),+) => {
        fn $name() -> &'static $crate::backend::redis::Lua {
            static S: std::sync::OnceLock<$crate::backend::redis::Lua> = std::sync::OnceLock::new();
            const SOURCE: &str = concat!($(include_str!(concat!("lua/", $file))),+);
            S.get_or_init(|| $crate::backend::redis::Lua {
                script: redis::Script::new(SOURCE),
                source: SOURCE,
            })
        }
    };
}
pub(crate) use lua;

/// Reads an integer from a script reply element.
pub(crate) fn int(v: &redis::Value) -> Result<i64> {
    match v {
        redis::Value::Int(i) => Ok(*i),
        redis::Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::internal("script replied with a non-number")),
        _ => Err(Error::internal(format!("script replied with {v:?} where a number was expected"))),
    }
}

/// Reads an optional string from a script reply element.
pub(crate) fn opt_str(v: &redis::Value) -> Result<Option<String>> {
    match v {
        redis::Value::Nil => Ok(None),
        redis::Value::BulkString(b) => String::from_utf8(b.clone())
            .map(Some)
            .map_err(|_| Error::internal("script replied with invalid UTF-8")),
        redis::Value::SimpleString(s) => Ok(Some(s.clone())),
        redis::Value::Int(i) => Ok(Some(i.to_string())),
        _ => Err(Error::internal(format!("script replied with {v:?} where a string was expected"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(reply: &str) -> RedisError {
        match redis::parse_redis_value(format!("-{reply}\r\n").as_bytes()) {
            Ok(redis::Value::ServerError(e)) => e.into(),
            other => panic!("not a server error: {other:?}"),
        }
    }

    fn target(follows_failover: bool) -> Target {
        Target {
            display: "127.0.0.1:7000".into(),
            secrets: vec![],
            command_timeout_ms: 1000,
            follows_failover,
        }
    }

    #[test]
    fn a_failover_in_progress_is_unavailable_not_an_error_of_the_call() {
        for reply in [
            "CLUSTERDOWN The cluster is down",
            "MASTERDOWN Link with MASTER is down",
            "TRYAGAIN Multiple keys request during rehashing of slot",
            "LOADING Redis is loading the dataset in memory",
        ] {
            for follows in [false, true] {
                let e = map_error(&target(follows), server_error(reply));
                assert_eq!(e.code, ErrorCode::BackendUnavailable, "{reply}: {e:?}");
            }
        }
        // A cluster or Sentinel client meets a demoted primary or runs out of redirections for a
        // moment while the slot map changes; a client opened on one node's `url` is misconfigured.
        for reply in [
            "MOVED 9181 127.0.0.1:7002",
            "ASK 9181 127.0.0.1:7002",
            "READONLY You can't write against a read only replica.",
        ] {
            let e = map_error(&target(true), server_error(reply));
            assert_eq!(e.code, ErrorCode::BackendUnavailable, "{reply}: {e:?}");
            let e = map_error(&target(false), server_error(reply));
            assert_eq!(e.code, ErrorCode::Backend, "{reply}: {e:?}");
        }
        let e = map_error(&target(false), server_error("MOVED 9181 127.0.0.1:7002"));
        assert!(e.message.contains("`cluster: [<node URLs>]`"), "{}", e.message);
    }
}
