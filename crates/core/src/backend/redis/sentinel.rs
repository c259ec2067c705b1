//! Sentinel-managed Redis: the sentinels are asked for the current primary of a master name,
//! and calls go over one multiplexed connection to it, resolved again when the primary changes.
//!
//! Resolution asks every sentinel (`SENTINEL MASTER <name>`) at once and takes the answer with
//! the highest `config-epoch` among those that do not see the primary down, then checks with
//! `ROLE` that the node is a primary. (redis-rs's `SentinelClient` takes the first sentinel's
//! answer in the configured order and hands out plain connections that are never resolved
//! again; just after a failover a sentinel that has not heard of it yet still names the old
//! primary, which accepts writes until it is converted to a replica seconds later, and loses
//! them then.)
//!
//! The connection is dropped, and the primary resolved again by the next call, when:
//! - a call is refused (connection refused, or `READONLY`: the node was demoted to a replica,
//!   which refuses a script at its first write, so nothing was written): the call is sent again
//!   after resolving (retries with a doubling wait, bounded by the command timeout as a whole),
//!   as nothing of it ran;
//! - the connection is lost with a call on it: that call fails with `ERR_BACKEND_UNAVAILABLE` and
//!   is not sent again (the script may have run and its reply been lost; a second run could
//!   apply a write twice);
//! - [`RETIRE_AFTER_TIMEOUTS`] calls in a row time out (a primary gone silent);
//! - a sentinel announces the failover of the master name: each sentinel is subscribed to
//!   (`+failover-state-send-slaveof-noone`, `+switch-master`, `-failover-abort-*`). From the
//!   moment the leading sentinel is about to promote a replica until it announces the new
//!   primary (or aborts), calls wait ([`HOLD`] at most, within their command timeout) instead
//!   of writing to the old primary, whose writes after the promotion would be lost.
//!
//! Nothing is written to a replica: every connection goes to a node the sentinels name as the
//! primary and that answered `ROLE` as one, and a node demoted since refuses writes
//! (`READONLY`). The shell's faster connection ([`super::transport`]) speaks to one fixed
//! server, so a sentinel-managed store never uses it.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisError, RedisResult,
};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::cluster::{MAX_RETRY_WAIT_MS, MIN_RETRY_WAIT_MS};
use super::{map_error, tcp_settings, Link, Shared, Target, RETIRE_AFTER_TIMEOUTS};
use crate::client::Config;
use crate::error::{Error, ErrorCode, FieldPath, Result};

/// The longest calls wait for a failover a sentinel announced to end (they also stop at their
/// command timeout): a promotion on a healthy set takes about a second.
const HOLD: Duration = Duration::from_secs(5);
/// Wait before subscribing again to a sentinel that could not be reached or dropped the
/// subscription.
const RESUBSCRIBE_WAIT: Duration = Duration::from_secs(1);

/// The most replicas a call can wait for (`replica_acks`).
pub const MAX_REPLICA_ACKS: u32 = 64;
/// Of the time a call has left, the part its `WAIT` for replicas may take: the rest carries the
/// answer back before the call's own deadline, so an unconfirmed call says so instead of timing out.
const WAIT_SHARE: f64 = 0.8;

/// The most sentinel addresses of one store.
pub const MAX_SENTINELS: usize = 64;
/// The longest master name (sentinel names are short identifiers; this only bounds the input).
pub const MAX_MASTER_NAME_LEN: usize = 256;

/// Where a sentinel-managed Redis is: the master name the sentinels monitor, the sentinels'
/// URLs, and the credentials and database of the data nodes (the primary).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct SentinelOptions {
    /// The name the sentinels monitor the primary under (`sentinel monitor <name> …`).
    pub master_name: String,
    /// `redis://[user:password@]host[:port]` of each sentinel (their own credentials, if they
    /// have any), or `rediss://…`: then the data nodes are reached over TLS too (`#insecure`
    /// skipping the certificate check for both).
    pub nodes: Vec<String>,
    /// ACL user of the data nodes.
    pub username: Option<String>,
    /// Password of the data nodes.
    pub password: Option<String>,
    /// Database of the data nodes. Default 0.
    pub db: Option<i64>,
    /// How many replicas must confirm each call before it returns (Redis `WAIT`): 0 (the
    /// default) returns when the primary has run it, as Redis replicates asynchronously.
    pub replica_acks: Option<u32>,
}

/// Never prints the password.
impl fmt::Debug for SentinelOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelOptions")
            .field("master_name", &self.master_name)
            .field("nodes", &self.nodes.iter().map(|u| address(u)).collect::<Vec<_>>())
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("db", &self.db)
            .field("replica_acks", &self.replica_acks)
            .finish()
    }
}

impl SentinelOptions {
    /// Checks what can be checked without connecting (errors name the field under `sentinel`).
    pub fn check(&self) -> Result<()> {
        let at = || FieldPath::new("sentinel");
        let name = &self.master_name;
        if name.is_empty()
            || name.len() > MAX_MASTER_NAME_LEN
            || name.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(Error::invalid_at(
                at().field("master_name"),
                format!(
                    "must be the name the sentinels monitor the primary under: 1 to {MAX_MASTER_NAME_LEN} \
                     characters without spaces or control characters"
                ),
            ));
        }
        if self.nodes.is_empty() || self.nodes.len() > MAX_SENTINELS {
            return Err(Error::invalid_at(
                at().field("nodes"),
                format!("must list 1 to {MAX_SENTINELS} sentinel URLs, got {}", self.nodes.len()),
            ));
        }
        let mut tls = None;
        for (i, url) in self.nodes.iter().enumerate() {
            let here = || at().field("nodes").index(i);
            let info = url.as_str().into_connection_info().map_err(|_| {
                Error::invalid_at(
                    here(),
                    "is not a valid sentinel URL: expected redis://[user:password@]host[:port] or rediss://… for TLS",
                )
            })?;
            let mode = match info.addr() {
                ConnectionAddr::Tcp(..) => None,
                ConnectionAddr::TcpTls { insecure, .. } => Some(*insecure),
                _ => return Err(Error::invalid_at(here(), "must be a TCP address (redis:// or rediss://)")),
            };
            match tls {
                None => tls = Some(mode),
                Some(first) if first != mode => return Err(Error::invalid_at(
                    here(),
                    "must use the same scheme as the first sentinel URL (all redis://, all rediss:// or all \
                         rediss://…#insecure): it also sets how the data nodes are reached",
                )),
                Some(_) => {}
            }
        }
        if let Some(db) = self.db {
            if db < 0 {
                return Err(Error::invalid_at(at().field("db"), format!("must be 0 or more, got {db}")));
            }
        }
        if let Some(n) = self.replica_acks.filter(|n| *n > MAX_REPLICA_ACKS) {
            return Err(Error::invalid_at(
                at().field("replica_acks"),
                format!("must be 0 to {MAX_REPLICA_ACKS} replicas, got {n}"),
            ));
        }
        Ok(())
    }
}

/// `host:port` of a URL, without credentials (`?` when it does not parse).
fn address(url: &str) -> String {
    match url.into_connection_info().map(|i| i.addr().clone()) {
        Ok(ConnectionAddr::Tcp(h, p)) => format!("{h}:{p}"),
        Ok(ConnectionAddr::TcpTls { host, port, .. }) => format!("{host}:{port} (TLS)"),
        _ => "?".to_string(),
    }
}

/// `master <name> via sentinels host:port, …`, and every password to scrub from messages.
fn describe(opts: &SentinelOptions) -> (String, Vec<String>) {
    let mut secrets: Vec<String> = opts.password.iter().cloned().collect();
    for url in &opts.nodes {
        if let Ok(info) = url.as_str().into_connection_info() {
            secrets.extend(info.redis_settings().password().map(str::to_string));
        }
    }
    let nodes: Vec<String> = opts.nodes.iter().map(|u| address(u)).collect();
    (
        format!("master {} via sentinels {} db {}", opts.master_name, nodes.join(", "), opts.db.unwrap_or(0)),
        secrets,
    )
}

/// The connection to the primary the sentinels named last.
struct Primary {
    /// Counts resolutions, so a failure seen on a connection already replaced does not drop
    /// its successor.
    generation: u64,
    conn: Option<MultiplexedConnection>,
    /// Where `conn` goes.
    addr: Option<(String, u16)>,
    timeouts: u32,
    /// Until when calls wait for a failover a sentinel announced.
    hold_until: Option<Instant>,
}

/// What the calls and the sentinel subscriptions share.
struct State {
    master_name: String,
    primary: Mutex<Primary>,
    /// Asks the sentinels; one resolution at a time (the calls that found the connection gone
    /// wait for it and share its result).
    resolver: tokio::sync::Mutex<Resolver>,
    conn_config: AsyncConnectionConfig,
    connect_timeout: Duration,
    command_timeout: Duration,
    /// Replicas that must confirm each call (`WAIT`); 0: none.
    replica_acks: u32,
}

/// The sentinels, with a connection to each once used.
struct Resolver {
    sentinels: Vec<(redis::Client, Option<MultiplexedConnection>)>,
    /// Address-less connection settings of the data nodes (credentials, db, TLS mode).
    data: ConnectionInfo,
    tls: Option<bool>,
}

/// The sentinel-resolved connection of a pooled store; its subscriptions end with it.
pub(super) struct SentinelLink {
    state: Arc<State>,
    watchers: Vec<AbortHandle>,
}

impl Drop for SentinelLink {
    fn drop(&mut self) {
        for w in &self.watchers {
            w.abort();
        }
    }
}

/// A failed attempt, and whether sending the call again is safe (nothing of it ran).
struct Failed {
    error: RedisError,
    resend: bool,
}

impl SentinelLink {
    /// Runs one call (a script or a command) on the primary, resolving it again as the module
    /// docs say. `send` sends the call on the connection given.
    pub(super) async fn run<T, F, Fut>(&self, send: F) -> RedisResult<T>
    where
        F: Fn(MultiplexedConnection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let state = &self.state;
        let deadline = Instant::now() + state.command_timeout;
        match retried(deadline, || state.attempt(&send, deadline), |f: &Failed| f.resend).await {
            Some(Ok(v)) => Ok(v),
            Some(Err(failed)) => Err(failed.error),
            None => Err(timed_out()),
        }
    }
}

/// Runs `attempt` until it succeeds, fails in a way `again` says will not pass, or `deadline`
/// comes, waiting between tries from [`MIN_RETRY_WAIT_MS`], doubling, up to
/// [`MAX_RETRY_WAIT_MS`] (no wait that would end past the deadline). `None`: the deadline came
/// during a try.
async fn retried<T, E, Fut>(
    deadline: Instant,
    attempt: impl Fn() -> Fut,
    again: impl Fn(&E) -> bool,
) -> Option<std::result::Result<T, E>>
where
    Fut: Future<Output = std::result::Result<T, E>>,
{
    let mut wait = Duration::from_millis(MIN_RETRY_WAIT_MS);
    loop {
        match tokio::time::timeout_at(deadline, attempt()).await {
            Err(_) => return None,
            Ok(Ok(v)) => return Some(Ok(v)),
            Ok(Err(e)) if !again(&e) || Instant::now() + wait >= deadline => return Some(Err(e)),
            Ok(Err(_)) => {}
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_millis(MAX_RETRY_WAIT_MS));
    }
}

impl State {
    async fn attempt<T, F, Fut>(&self, send: &F, deadline: Instant) -> std::result::Result<T, Failed>
    where
        F: Fn(MultiplexedConnection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        // A resolution that failed sent nothing to the primary.
        let (generation, conn) = self.checkout().await.map_err(|error| Failed { error, resend: true })?;
        let outcome = match send(conn.clone()).await {
            Ok(v) if self.replica_acks > 0 => self.confirm(conn, deadline).await.map(|()| v),
            other => other,
        };
        let mut p = crate::backend::guard(&self.primary);
        if p.generation != generation {
            return outcome.map_err(|error| Failed { resend: resendable(&error), error });
        }
        match outcome {
            Ok(v) => {
                p.timeouts = 0;
                Ok(v)
            }
            Err(error) => {
                if error.is_timeout() {
                    p.timeouts += 1;
                    if p.timeouts >= RETIRE_AFTER_TIMEOUTS {
                        p.conn = None;
                    }
                } else if resendable(&error)
                    || error.is_io_error()
                    || error.is_connection_dropped()
                    // The replicas stopped confirming: perhaps one was promoted; ask the sentinels.
                    || error.kind() == redis::ErrorKind::NoValidReplicasFoundBySentinel
                {
                    p.conn = None;
                } else {
                    p.timeouts = 0;
                }
                Err(Failed { resend: resendable(&error), error })
            }
        }
    }

    /// Waits until `replica_acks` replicas hold every write made on `conn` so far (the call just
    /// run included), within the part of the call's time [`WAIT_SHARE`] allows. `WAIT` blocks
    /// the connection it is sent on, so the calls sharing it take turns meanwhile: when the
    /// replicas keep up that is a replica round trip; when they do not, each call waits its share.
    async fn confirm(&self, mut conn: MultiplexedConnection, deadline: Instant) -> RedisResult<()> {
        let left = deadline.saturating_duration_since(Instant::now()).mul_f64(WAIT_SHARE);
        // `WAIT n 0` would wait for ever.
        let wait_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1);
        let confirmed: u64 = redis::cmd("WAIT")
            .arg(self.replica_acks)
            .arg(wait_ms)
            .query_async(&mut conn)
            .await
            .map_err(|e| demoted_while_waiting(e, self.replica_acks))?;
        if confirmed >= u64::from(self.replica_acks) {
            return Ok(());
        }
        Err(RedisError::from((
            redis::ErrorKind::NoValidReplicasFoundBySentinel,
            "replicas did not confirm the call",
            format!(
                "the primary ran it, {confirmed} of the {} replicas asked for (replicaAcks) confirmed it within \
                 {wait_ms} ms, so a failover now could lose it",
                self.replica_acks
            ),
        )))
    }

    /// The current connection, resolving the primary when there is none; waits while a
    /// failover is announced.
    async fn checkout(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        let seen = loop {
            let (seen, held) = {
                let mut p = crate::backend::guard(&self.primary);
                match p.hold_until {
                    Some(t) if t > Instant::now() => (p.generation, true),
                    _ => {
                        p.hold_until = None;
                        if let Some(c) = &p.conn {
                            return Ok((p.generation, c.clone()));
                        }
                        (p.generation, false)
                    }
                }
            };
            if !held {
                break seen;
            }
            tokio::time::sleep(Duration::from_millis(MIN_RETRY_WAIT_MS)).await;
        };
        let mut resolver = self.resolver.lock().await;
        {
            // Another call resolved while this one waited for the lock.
            let p = crate::backend::guard(&self.primary);
            if let (true, Some(c)) = (p.generation != seen, &p.conn) {
                return Ok((p.generation, c.clone()));
            }
        }
        let (addr, conn) = resolver.resolve(self).await?;
        let mut p = crate::backend::guard(&self.primary);
        p.generation += 1;
        p.conn = Some(conn.clone());
        p.addr = Some(addr);
        p.timeouts = 0;
        Ok((p.generation, conn))
    }

    /// A sentinel's event: a failover of this master name begins, ends or is given up.
    fn on_event(&self, channel: &str, payload: &str) {
        let words: Vec<&str> = payload.split(' ').collect();
        // `<type> <name> <ip> <port> [@ <master name> <master ip> <master port>]`, or for
        // +switch-master `<master name> <old ip> <old port> <new ip> <new port>`.
        let master = match channel {
            "+switch-master" => words.first(),
            _ => match words.iter().position(|w| *w == "@") {
                Some(at) => words.get(at + 1),
                None => words.get(1),
            },
        };
        if master != Some(&self.master_name.as_str()) {
            return;
        }
        let mut p = crate::backend::guard(&self.primary);
        match channel {
            "+failover-state-send-slaveof-noone" => {
                p.hold_until = Some(Instant::now() + HOLD);
                p.conn = None;
            }
            "+switch-master" => {
                p.hold_until = None;
                let new = words.get(3).zip(words.get(4).and_then(|w| w.parse::<u16>().ok()));
                if new.map(|(h, port)| (h.to_string(), port)) != p.addr {
                    p.conn = None;
                }
            }
            _ => p.hold_until = None,
        }
    }
}

impl Resolver {
    /// Asks every sentinel for the primary, takes the newest configuration, connects to the
    /// primary and checks its role, within the connect timeout (a sentinel or node that never
    /// answers must not hold the call longer).
    async fn resolve(&mut self, state: &State) -> RedisResult<((String, u16), MultiplexedConnection)> {
        let budget = state.connect_timeout.saturating_mul(2).max(Duration::from_millis(50));
        tokio::time::timeout(budget, self.resolve_now(state)).await.unwrap_or_else(|_| Err(timed_out()))
    }

    async fn resolve_now(&mut self, state: &State) -> RedisResult<((String, u16), MultiplexedConnection)> {
        let name = state.master_name.as_str();
        let config = &state.conn_config;
        let asks = self.sentinels.iter_mut().map(|(client, cached)| async move {
            if cached.is_none() {
                *cached = Some(client.get_multiplexed_async_connection_with_config(config).await?);
            }
            let conn = cached.as_mut().expect("connected above");
            let answer = redis::cmd("SENTINEL")
                .arg("MASTER")
                .arg(name)
                .query_async::<HashMap<String, String>>(conn)
                .await;
            if matches!(&answer, Err(e) if e.is_io_error() || e.is_timeout()) {
                *cached = None;
            }
            answer
        });
        let answers = futures_util::future::join_all(asks).await;
        let mut newest: Option<(u64, String, u16)> = None;
        let mut seen_down = false;
        let mut last_err = None;
        for answer in answers {
            let m = match answer {
                Ok(m) => m,
                Err(e) => {
                    last_err = Some(e);
                    continue;
                }
            };
            let flags = m.get("flags").map(String::as_str).unwrap_or("");
            if flags.split(',').any(|f| matches!(f, "s_down" | "o_down" | "disconnected")) {
                seen_down = true;
                continue;
            }
            let epoch = m.get("config-epoch").and_then(|e| e.parse().ok()).unwrap_or(0);
            let (Some(ip), Some(port)) = (m.get("ip"), m.get("port").and_then(|p| p.parse().ok())) else {
                continue;
            };
            if newest.as_ref().is_none_or(|(e, ..)| epoch > *e) {
                newest = Some((epoch, ip.clone(), port));
            }
        }
        let Some((_, host, port)) = newest else {
            return Err(match (seen_down, last_err) {
                (true, _) => no_primary("the sentinels see the primary down"),
                // "ERR No such master with that name" from every sentinel that answered.
                (false, Some(e)) if e.code() == Some("ERR") => no_primary(NOT_MONITORED),
                (false, Some(e)) => e,
                (false, None) => no_primary("no sentinel named a primary"),
            });
        };
        let addr = match self.tls {
            None => ConnectionAddr::Tcp(host.clone(), port),
            Some(insecure) => ConnectionAddr::TcpTls { host: host.clone(), port, insecure, tls_params: None },
        };
        let client = redis::Client::open(self.data.clone().set_addr(addr))?;
        let mut conn = client.get_multiplexed_async_connection_with_config(config).await?;
        let role: redis::Value = redis::cmd("ROLE").query_async(&mut conn).await?;
        let is_primary = match &role {
            redis::Value::Array(v) => {
                matches!(v.first(), Some(redis::Value::BulkString(b)) if b.as_slice() == b"master")
            }
            _ => false,
        };
        if !is_primary {
            return Err(no_primary("the node the sentinels name is not a primary yet"));
        }
        Ok(((host, port), conn))
    }
}

/// The error of a `WAIT` for `replica_acks` replicas: when the primary became a replica while the
/// call waited (a failover: Redis ends the `WAIT` with `UNBLOCKED`), the call ran on it, but
/// whether the new primary has it is not known, so it is answered as one the replicas did not
/// confirm (unavailable, not acknowledged; the connection is dropped and the sentinels asked
/// again), not as an error of the call.
fn demoted_while_waiting(e: RedisError, replica_acks: u32) -> RedisError {
    if e.code() != Some("UNBLOCKED") {
        return e;
    }
    RedisError::from((
        redis::ErrorKind::NoValidReplicasFoundBySentinel,
        "replicas did not confirm the call",
        format!(
            "the primary ran it, then became a replica (a failover) while waiting for {replica_acks} replicas \
             (replicaAcks) to confirm it, so it may be lost"
        ),
    ))
}

/// Why no primary was found when the sentinels answered without naming the master name.
const NOT_MONITORED: &str = "the sentinels do not monitor this name";

fn no_primary(why: &'static str) -> RedisError {
    RedisError::from((redis::ErrorKind::MasterNameNotFoundBySentinel, why))
}

/// Whether a failed resolution may succeed later without any change of settings: a node or
/// sentinel not answering (restarting, or the old primary during a failover), the primary seen
/// down, or a replica not promoted yet; not a name the sentinels do not monitor, nor a refused
/// sign-in.
fn primary_may_come(e: &RedisError) -> bool {
    match e.kind() {
        redis::ErrorKind::MasterNameNotFoundBySentinel => !e.to_string().contains(NOT_MONITORED),
        _ => {
            e.is_io_error()
                || e.is_connection_refusal()
                || e.is_connection_dropped()
                || e.code() == Some("READONLY")
        }
    }
}

/// Whether nothing of a call ran, so sending it again is safe: the connection was refused, or
/// the node is no longer the primary and refused the write.
fn resendable(e: &RedisError) -> bool {
    e.is_connection_refusal() || e.code() == Some("READONLY")
}

fn timed_out() -> RedisError {
    RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))
}

/// Follows one sentinel's failover events for as long as the link lives, subscribing again
/// after the sentinel was lost.
async fn watch(sentinel: redis::Client, state: Weak<State>, connect_timeout: Duration) {
    loop {
        let subscribe = async {
            let mut ps = sentinel.get_async_pubsub().await?;
            ps.subscribe(&["+failover-state-send-slaveof-noone", "+switch-master"]).await?;
            ps.psubscribe("-failover-abort-*").await?;
            RedisResult::Ok(ps)
        };
        if let Ok(Ok(ps)) = tokio::time::timeout(connect_timeout, subscribe).await {
            let mut events = ps.into_on_message();
            while let Some(msg) = events.next().await {
                let Some(state) = state.upgrade() else { return };
                if let Ok(payload) = msg.get_payload::<String>() {
                    state.on_event(msg.get_channel_name(), &payload);
                }
            }
        }
        if state.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(RESUBSCRIBE_WAIT).await;
    }
}

/// Connects through the sentinels: the primary is resolved and connected now, within the
/// connect timeout; each sentinel is subscribed to for failover events.
pub(super) async fn connect(opts: &SentinelOptions, config: &Config) -> Result<Shared> {
    opts.check()?;
    let (display, secrets) = describe(opts);
    let target =
        Target { display, secrets, command_timeout_ms: config.command_timeout_ms, follows_failover: true };
    let connect_timeout = Duration::from_millis(config.connect_timeout_ms);
    let command_timeout = Duration::from_millis(config.command_timeout_ms);
    let mut redis_settings = redis::RedisConnectionInfo::default().set_db(opts.db.unwrap_or(0));
    if let Some(u) = &opts.username {
        redis_settings = redis_settings.set_username(u);
    }
    if let Some(p) = &opts.password {
        redis_settings = redis_settings.set_password(p);
    }
    let mut sentinels = Vec::with_capacity(opts.nodes.len());
    let mut tls = None;
    for url in &opts.nodes {
        let info = url.as_str().into_connection_info().map_err(|e| map_error(&target, e))?;
        if let ConnectionAddr::TcpTls { insecure, .. } = info.addr() {
            tls = Some(*insecure);
        }
        let client =
            redis::Client::open(info.set_tcp_settings(tcp_settings())).map_err(|e| map_error(&target, e))?;
        sentinels.push((client, None));
    }
    let data = "redis://127.0.0.1"
        .into_connection_info()
        .map_err(|e| map_error(&target, e))?
        .set_redis_settings(redis_settings)
        .set_tcp_settings(tcp_settings());
    let clients: Vec<redis::Client> = sentinels.iter().map(|(c, _)| c.clone()).collect();
    let state = Arc::new(State {
        master_name: opts.master_name.clone(),
        primary: Mutex::new(Primary { generation: 0, conn: None, addr: None, timeouts: 0, hold_until: None }),
        resolver: tokio::sync::Mutex::new(Resolver { sentinels, data, tls }),
        conn_config: AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(Some(command_timeout)),
        connect_timeout,
        command_timeout,
        replica_acks: opts.replica_acks.unwrap_or(0),
    });
    // A failover may be under way: the sentinels still name the old primary (refusing
    // connections) or see it down, or name a replica not promoted yet. Opening waits for the
    // new primary as calls do (doubling waits), within the connect timeout as a whole.
    let deadline = Instant::now() + connect_timeout;
    let opened = match retried(deadline, || state.checkout(), primary_may_come).await {
        Some(Ok(_)) => Ok(()),
        // Out of time while the primary may still come: an I/O error as it is, else a timeout.
        Some(Err(e)) if primary_may_come(&e) && !e.is_io_error() => Err(timed_out()),
        Some(Err(e)) => Err(e),
        None => Err(timed_out()),
    };
    match opened {
        Ok(()) => {}
        Err(e) if e.is_timeout() => {
            return Err(Error::new(
                ErrorCode::BackendUnavailable,
                format!(
                    "cannot reach Redis {}: no primary within connectTimeoutMs = {} ms",
                    target.display, config.connect_timeout_ms
                ),
            ))
        }
        Err(e) => return Err(map_error(&target, e)),
    }
    let watchers = clients
        .into_iter()
        .map(|c| tokio::spawn(watch(c, Arc::downgrade(&state), connect_timeout)).abort_handle())
        .collect();
    Ok(Shared { link: Link::Sentinel(Box::new(SentinelLink { state, watchers })), target, fast: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(nodes: &[&str]) -> SentinelOptions {
        SentinelOptions {
            master_name: "main".into(),
            nodes: nodes.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    /// The field a refusal names.
    fn field_of(r: Result<()>) -> String {
        let e = r.expect_err("refused");
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        e.field.map(|f| f.to_string()).unwrap_or_default()
    }

    #[test]
    fn a_wait_ended_by_a_demotion_is_unconfirmed_not_an_error_of_the_call() {
        let unblocked = match redis::parse_redis_value(
            b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n",
        ) {
            Ok(redis::Value::ServerError(e)) => RedisError::from(e),
            other => panic!("not a server error: {other:?}"),
        };
        let e = demoted_while_waiting(unblocked, 1);
        assert_eq!(e.kind(), redis::ErrorKind::NoValidReplicasFoundBySentinel, "{e:?}");
        let target = super::super::Target {
            display: "master main via sentinels 127.0.0.1:26379 db 0".into(),
            secrets: vec![],
            command_timeout_ms: 1000,
            follows_failover: true,
        };
        let mapped = super::super::map_error(&target, e);
        assert_eq!(mapped.code, ErrorCode::BackendUnavailable, "{mapped:?}");
        assert!(mapped.message.contains("became a replica"), "{}", mapped.message);
        // Any other error of the WAIT is left as it is.
        let other = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(demoted_while_waiting(other, 1).is_io_error());
    }

    #[test]
    fn accepts_sentinel_urls() {
        opts(&["redis://127.0.0.1:26379", "redis://:pw@10.0.0.2:26380"]).check().unwrap();
        opts(&["rediss://a:26379", "rediss://b:26379"]).check().unwrap();
    }

    #[test]
    fn refuses_bad_options_naming_the_field() {
        let m = field_of(SentinelOptions { master_name: String::new(), ..opts(&["redis://a:1"]) }.check());
        assert_eq!(m, "sentinel.master_name");
        let m = field_of(SentinelOptions { master_name: "a b".into(), ..opts(&["redis://a:1"]) }.check());
        assert_eq!(m, "sentinel.master_name");
        let m = field_of(opts(&[]).check());
        assert_eq!(m, "sentinel.nodes");
        let m = field_of(opts(&["redis://a:1", "not a url"]).check());
        assert_eq!(m, "sentinel.nodes[1]");
        let m = field_of(opts(&["redis://a:1", "rediss://b:1"]).check());
        assert_eq!(m, "sentinel.nodes[1]");
        let m = field_of(opts(&["redis+unix:///tmp/s.sock"]).check());
        assert_eq!(m, "sentinel.nodes[0]");
        let m = field_of(SentinelOptions { db: Some(-1), ..opts(&["redis://a:1"]) }.check());
        assert_eq!(m, "sentinel.db");
        let m = field_of(SentinelOptions { replica_acks: Some(65), ..opts(&["redis://a:1"]) }.check());
        assert_eq!(m, "sentinel.replica_acks");
        SentinelOptions { replica_acks: Some(64), ..opts(&["redis://a:1"]) }.check().unwrap();
    }

    #[test]
    fn never_shows_passwords() {
        let o = SentinelOptions {
            password: Some("data-secret".into()),
            ..opts(&["redis://:sentinel-secret@127.0.0.1:26379"])
        };
        let shown = format!("{o:?}");
        assert!(!shown.contains("secret"), "{shown}");
        let (display, secrets) = describe(&o);
        assert_eq!(display, "master main via sentinels 127.0.0.1:26379 db 0");
        assert_eq!(secrets, vec!["data-secret".to_string(), "sentinel-secret".to_string()]);
    }
}
