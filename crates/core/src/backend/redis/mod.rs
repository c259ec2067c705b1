//! The Redis backend: one pooled, multiplexed, self-reconnecting connection per configuration,
//! shared by every client of the process. Each atomic step is one Lua script (EVALSHA, kept in a
//! static) or one command; lease times come from the Redis server's clock. Lock scripts go over a
//! shell's faster connection when it has one for the calling thread ([`transport`]).

mod lock;
mod queue;
mod state;
mod tracker;
pub mod transport;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ConnectionAddr, RedisError};

use crate::client::Config;
use crate::error::{Error, ErrorCode, Result};
use crate::keys::Keys;

/// The connection settings a pooled connection is keyed by.
#[derive(Clone, PartialEq, Eq, Hash)]
struct PoolKey {
    url: String,
    connect_timeout_ms: u64,
    command_timeout_ms: u64,
    /// The tokio runtime whose task drives the connection: a connection dies with its runtime,
    /// and a shell may replace its runtime (the Node addon's is shut down when the last
    /// JavaScript environment using it exits, and a new one started for the next).
    runtime: Option<tokio::runtime::Id>,
}

fn pool() -> &'static Mutex<HashMap<PoolKey, Shared>> {
    static POOL: OnceLock<Mutex<HashMap<PoolKey, Shared>>> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A connection and what to say about it in errors (never the password).
#[derive(Clone)]
struct Shared {
    conn: ConnectionManager,
    target: Target,
    fast: Option<std::sync::Arc<dyn transport::Endpoint>>,
}

/// Where a connection goes, for error messages: `host:port/db`, no credentials.
#[derive(Clone)]
pub struct Target {
    pub display: String,
    secret: Option<String>,
    pub command_timeout_ms: u64,
}

impl Target {
    /// Removes the password from a message, should a library ever echo it.
    fn scrub(&self, msg: &str) -> String {
        match &self.secret {
            Some(s) if !s.is_empty() => msg.replace(s.as_str(), "***"),
            _ => msg.to_string(),
        }
    }
}

#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    target: Target,
    keys: Keys,
    fast: Option<std::sync::Arc<dyn transport::Endpoint>>,
}

fn describe(client: &redis::Client) -> (String, Option<String>) {
    let info = client.get_connection_info();
    let db = info.redis_settings().db();
    let addr = match info.addr() {
        ConnectionAddr::Tcp(h, p) => format!("{h}:{p}"),
        ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port} (TLS)"),
        ConnectionAddr::Unix(p) => format!("unix:{}", p.display()),
        other => format!("{other:?}"),
    };
    (format!("{addr} db {db}"), info.redis_settings().password().map(str::to_string))
}

impl RedisStore {
    pub async fn open(url: &str, config: &Config) -> Result<RedisStore> {
        let key = PoolKey {
            url: url.to_string(),
            connect_timeout_ms: config.connect_timeout_ms,
            command_timeout_ms: config.command_timeout_ms,
            runtime: tokio::runtime::Handle::try_current().ok().map(|h| h.id()),
        };
        let cached = crate::backend::guard(pool()).get(&key).cloned();
        let shared = match cached {
            Some(s) => s,
            None => {
                let s = connect(url, config).await?;
                // Two first calls may race to connect; keep the first stored and drop the other.
                // Connections of other runtimes leave the pool (stores using them keep them).
                let mut pool = crate::backend::guard(pool());
                pool.retain(|k, _| k.runtime == key.runtime);
                pool.entry(key).or_insert(s).clone()
            }
        };
        Ok(RedisStore {
            conn: shared.conn,
            target: shared.target,
            keys: config.keys.clone(),
            fast: shared.fast,
        })
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Runs a script with a fresh handle to the shared connection, mapping errors. A call whose
    /// connection attempt was refused (nothing was sent) is tried once more, so the first call
    /// after Redis comes back succeeds instead of reporting the earlier refusal.
    pub(crate) async fn run<T: redis::FromRedisValue>(&self, inv: &redis::ScriptInvocation<'_>) -> Result<T> {
        let mut conn = self.conn.clone();
        match inv.invoke_async::<T>(&mut conn).await {
            Ok(v) => Ok(v),
            Err(e) if e.is_connection_refusal() => {
                let mut conn = self.conn.clone();
                inv.invoke_async::<T>(&mut conn).await.map_err(|e| map_error(&self.target, e))
            }
            Err(e) => Err(map_error(&self.target, e)),
        }
    }

    /// Runs a script: over the transport's endpoint when it takes the command (see
    /// [`transport`]), else as [`RedisStore::run`] does. Same errors either way.
    pub(crate) async fn eval<T: redis::FromRedisValue>(
        &self,
        lua: &'static Lua,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<T> {
        if let Some(fast) = &self.fast {
            let sha = lua.script.get_hash().as_bytes();
            if let Some(reply) = fast.send(&eval_cmd("EVALSHA", sha, keys, args)) {
                let v = match reply.await {
                    Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                        match fast.send(&eval_cmd("EVAL", lua.source.as_bytes(), keys, args)) {
                            Some(reply) => reply.await,
                            None => return self.eval_pooled(lua, keys, args).await,
                        }
                    }
                    other => other,
                };
                return v
                    .and_then(|v| T::from_redis_value(v).map_err(RedisError::from))
                    .map_err(|e| map_error(&self.target, e));
            }
        }
        self.eval_pooled(lua, keys, args).await
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

/// `EVALSHA sha numkeys keys… args…`, or `EVAL source …`.
fn eval_cmd(head: &str, body: &[u8], keys: &[&[u8]], args: &[&[u8]]) -> redis::Cmd {
    let mut cmd = redis::cmd(head);
    cmd.arg(body).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    for a in args {
        cmd.arg(*a);
    }
    cmd
}

async fn connect(url: &str, config: &Config) -> Result<Shared> {
    let client = redis::Client::open(url).map_err(|_| {
        Error::invalid(
            "url is not a valid Redis URL: expected redis://[user:password@]host[:port][/db] or rediss://… for TLS",
        )
    })?;
    let (display, secret) = describe(&client);
    let fast = transport::endpoint(
        client.get_connection_info(),
        config.connect_timeout_ms,
        config.command_timeout_ms,
    );
    let target = Target { display, secret, command_timeout_ms: config.command_timeout_ms };
    let mcfg = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(config.connect_timeout_ms)))
        .set_response_timeout(Some(Duration::from_millis(config.command_timeout_ms)))
        // One attempt per (re)connection: a refused connection fails at once instead of after
        // seconds of silent retries; the next call tries again.
        .set_number_of_retries(0);
    // The whole first connection, handshake and AUTH included, is bounded by the connect timeout.
    let budget = Duration::from_millis(config.connect_timeout_ms.saturating_mul(2).max(50));
    let conn = match tokio::time::timeout(budget, ConnectionManager::new_with_config(client, mcfg)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(map_error(&target, e)),
        Err(_) => {
            return Err(Error::new(
                ErrorCode::RedisUnavailable,
                format!(
                    "cannot reach Redis at {}: no connection within {} ms",
                    target.display, config.connect_timeout_ms
                ),
            ))
        }
    };
    Ok(Shared { conn, target, fast })
}

/// Maps a redis-rs error to a coded error naming the server (never its password).
pub(crate) fn map_error(target: &Target, e: RedisError) -> Error {
    let detail = target.scrub(&e.to_string());
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
            ErrorCode::RedisAuth,
            format!("Redis at {} refused the credentials: {detail}", target.display),
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
            ErrorCode::RedisUnavailable,
            format!("cannot reach Redis at {}: {detail}", target.display),
        );
    }
    Error::new(ErrorCode::Redis, format!("Redis at {} answered with an error: {detail}", target.display))
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

/// Like [`script!`], for [`RedisStore::eval`].
macro_rules! lua {
    ($name:ident, $file:literal) => {
        fn $name() -> &'static $crate::backend::redis::Lua {
            static S: std::sync::OnceLock<$crate::backend::redis::Lua> = std::sync::OnceLock::new();
            const SOURCE: &str = include_str!(concat!("lua/", $file));
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
