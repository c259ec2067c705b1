//! The `Flowguard` class: opening a client.

use std::path::PathBuf;

use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;

use super::from_js::{js_input, one_or_many, opt, opt_ms, whole, Arg, Field};
use super::promise;
use flowguard_core::backend::durable::Durability;
use flowguard_core::backend::postgres::{
    PostgresOptions as CorePostgresOptions, PostgresTls as CorePostgresTls,
};
use flowguard_core::backend::redis::SentinelOptions as CoreSentinelOptions;
use flowguard_core::client::{Client, OpenOptions as CoreOpenOptions};

/// Options of `Flowguard.open`. An option name it does not know is refused
/// (`ERR_INVALID_ARGUMENT`), so a misspelt `url` never silently gives the embedded store.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct OpenOptions {
    /// `redis://[user:password@]host[:port][/db]`, or `rediss://…` for TLS. Omitted: the embedded
    /// in-process store (one per process, shared by every client with the same prefix).
    pub url: Option<String>,
    /// The seed nodes of a Redis Cluster (`redis://host:port` each, or `rediss://…`): any nodes
    /// of the cluster, one is enough, more survive the loss of some. Each call goes to the primary
    /// of its keys' slot; the slot map is refreshed after a failover. Not with `url` or `path`.
    #[napi(ts_type = "string | string[]")]
    pub cluster: Option<Either<String, Vec<String>>>,
    /// A Sentinel-managed Redis: the sentinels are asked for the primary of `masterName`, and
    /// asked again when it fails or is demoted. Not with `url`, `cluster` or `path`.
    pub sentinel: Option<SentinelOptions>,
    /// A PostgreSQL database: its URL (`postgres://user:password@host:port/database`), or the URL
    /// with the schema of flowguard's tables (default `flowguard`, created on first use) and the
    /// pool's size (default 10). Not with `url`, `cluster`, `sentinel` or `path`. Every
    /// pattern (docs/postgres.md). TLS per the URL's `sslmode` (libpq's meanings), the CA as
    /// `sslrootcert=<file>` or `tls: { ca }`.
    #[napi(ts_type = "string | PostgresOptions")]
    pub postgres: Option<Either<String, PostgresOptions>>,
    /// A file for the durable embedded store (created when absent; not with `url`): items, locks,
    /// queued ids and values survive a restart or crash of the process, and processes that open
    /// the same file share them. Omitted (and no `url`): the in-memory store.
    pub path: Option<String>,
    /// What a resolved call of the durable store survives: `'process'` (default; a crash of the
    /// process, kill -9) or `'fsync'` (also a power loss: every write is flushed to the disk).
    #[napi(ts_type = "'process' | 'fsync'")]
    pub durability: Option<String>,
    /// Prefix of every key. Default `fg:`. May not contain `{` or `}`.
    pub prefix: Option<String>,
    /// Connect timeout to Redis in ms. Default 2000.
    pub connect_timeout_ms: Option<f64>,
    /// Timeout of one Redis command in ms. Default 5000.
    pub command_timeout_ms: Option<f64>,
    /// How long item records are kept after their last change, in ms. Default 30 days.
    pub retention_ms: Option<f64>,
}

js_input!(OpenOptions { url = "url", cluster = "cluster", sentinel = "sentinel", postgres = "postgres", path = "path", durability = "durability", prefix = "prefix", connect_timeout_ms = "connectTimeoutMs", command_timeout_ms = "commandTimeoutMs", retention_ms = "retentionMs" });

impl OpenOptions {
    fn into_core(self) -> flowguard_core::Result<CoreOpenOptions> {
        let at = |name| Field("options", name);
        Ok(CoreOpenOptions {
            url: self.url,
            cluster: self.cluster.map(one_or_many),
            sentinel: self.sentinel.map(SentinelOptions::into_core).transpose()?,
            postgres: self.postgres.map(PostgresOptions::into_core).transpose()?,
            path: self.path.map(PathBuf::from),
            durability: self.durability.map(|d| Durability::parse(at("durability"), &d)).transpose()?,
            prefix: self.prefix,
            connect_timeout: opt_ms(at("connectTimeoutMs"), self.connect_timeout_ms)?,
            command_timeout: opt_ms(at("commandTimeoutMs"), self.command_timeout_ms)?,
            retention: opt_ms(at("retentionMs"), self.retention_ms)?,
        })
    }
}

/// Where a Sentinel-managed Redis is (`sentinel` of `Flowguard.open`).
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct SentinelOptions {
    /// The name the sentinels monitor the primary under (`sentinel monitor <name> …`).
    pub master_name: String,
    /// The sentinels: `redis://[user:password@]host[:port]` each (the sentinels' own credentials,
    /// if they have any). `rediss://…` reaches the sentinels and the data nodes over TLS
    /// (`#insecure` skips the certificate check); all the same scheme. One is enough, more
    /// survive the loss of some.
    #[napi(ts_type = "string | string[]")]
    pub nodes: Either<String, Vec<String>>,
    /// ACL user of the data nodes (primary and replicas).
    pub username: Option<String>,
    /// Password of the data nodes. Never shown in errors.
    pub password: Option<String>,
    /// Database of the data nodes. Default 0.
    pub db: Option<f64>,
    /// How many replicas must confirm each call before it resolves (Redis `WAIT`), 0 to 64.
    /// Default 0: a call resolves once the primary ran it, and a failover can lose the last
    /// writes (replication is asynchronous). A call not confirmed within `commandTimeoutMs` fails
    /// with `ERR_BACKEND_UNAVAILABLE`: it ran on the primary and may be lost.
    pub replica_acks: Option<f64>,
}

js_input!(SentinelOptions { master_name = "masterName", nodes = "nodes", username = "username", password = "password", db = "db", replica_acks = "replicaAcks" });

impl SentinelOptions {
    fn into_core(self) -> flowguard_core::Result<CoreSentinelOptions> {
        let db = whole(Field(Field("options", "sentinel"), "db"), self.db)?;
        let replica_acks = whole(Field(Field("options", "sentinel"), "replicaAcks"), self.replica_acks)?;
        Ok(CoreSentinelOptions {
            master_name: self.master_name,
            nodes: one_or_many(self.nodes),
            username: self.username,
            password: self.password,
            db: db.map(|d| i64::try_from(d).unwrap_or(i64::MAX)),
            replica_acks: replica_acks.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        })
    }
}

/// A PostgreSQL database with its settings (`postgres` of `Flowguard.open`).
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct PostgresOptions {
    /// `postgres://[user[:password]@]host[:port]/database`. Never shown in errors.
    pub url: String,
    /// The schema of flowguard's tables, created on first use: lowercase letters, digits and `_`.
    /// Default `flowguard`.
    pub schema: Option<String>,
    /// Pooled connections of this client, 1 to 1000. Default 10.
    pub pool_size: Option<f64>,
    /// TLS: given, the URL's `sslmode` defaults to `verify-full` (else `prefer`, as libpq).
    pub tls: Option<PostgresTls>,
    /// The pause between two sweeps of expired rows by this client (± a quarter), 100 to 3600000;
    /// 0: no sweep (expired rows then go only with writes to their table). Default 1000.
    pub sweep_interval_ms: Option<f64>,
}

js_input!(PostgresOptions {
    url = "url",
    schema = "schema",
    pool_size = "poolSize",
    tls = "tls",
    sweep_interval_ms = "sweepIntervalMs"
});

/// The `tls` of the `postgres` option.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct PostgresTls {
    /// The CA certificates (PEM text) the server's certificate is checked against, instead of
    /// the URL's `sslrootcert=<file>`. Omitted: `sslrootcert`, else (verify-ca, verify-full) the
    /// system's trust store.
    pub ca: Option<String>,
    /// A client certificate (PEM text) shown to a server that asks for one (`cert`
    /// authentication), instead of the URL's `sslcert=<file>`. With `key`.
    pub cert: Option<String>,
    /// The client certificate's private key (PEM text: PKCS #8, RSA or EC, unencrypted), instead of
    /// the URL's `sslkey=<file>`. With `cert`. Never shown in errors.
    pub key: Option<String>,
}

js_input!(PostgresTls { ca = "ca", cert = "cert", key = "key" });

impl PostgresOptions {
    fn into_core(v: Either<String, PostgresOptions>) -> flowguard_core::Result<CorePostgresOptions> {
        Ok(match v {
            Either::A(url) => CorePostgresOptions { url, ..Default::default() },
            Either::B(o) => {
                let size = whole(Field(Field("options", "postgres"), "poolSize"), o.pool_size)?;
                let sweep =
                    whole(Field(Field("options", "postgres"), "sweepIntervalMs"), o.sweep_interval_ms)?;
                CorePostgresOptions {
                    url: o.url,
                    schema: o.schema,
                    pool_size: size.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                    tls: o.tls.map(|t| CorePostgresTls { ca: t.ca, cert: t.cert, key: t.key }),
                    sweep_interval_ms: sweep,
                }
            }
        })
    }
}

/// A client of one backend. Open it once and share it; connections are pooled per URL and
/// timeouts, so opening again with the same settings reuses the connection.
#[napi]
pub struct Flowguard {
    pub(crate) client: Client,
}

#[napi]
impl Flowguard {
    /// Opens a client: Redis with `options.url` (connecting now, and failing within the connect
    /// timeout when it cannot be reached), a Redis Cluster with `options.cluster`, a
    /// Sentinel-managed Redis with `options.sentinel` (the primary of `masterName` resolved through
    /// the sentinels now, and again after a failover), a PostgreSQL database with
    /// `options.postgres` (its schema created or checked now), the durable embedded store in file
    /// `options.path`, else the in-memory embedded store.
    #[napi]
    pub fn open<'e>(
        env: &'e Env,
        options: Option<Arg<'e, OpenOptions>>,
    ) -> Result<PromiseRaw<'e, Flowguard>> {
        let opts = opt(&options, "options").and_then(|o| o.map(OpenOptions::into_core).transpose());
        promise(env, async move { Ok(Flowguard { client: Client::open(opts?.unwrap_or_default()).await? }) })
    }

    /// `embedded` (in memory), `durable` (the embedded store in a file), `redis` or `postgres`.
    #[napi(getter, ts_return_type = "'embedded' | 'durable' | 'redis' | 'postgres'")]
    pub fn backend(&self) -> &'static str {
        self.client.kind()
    }

    /// The key prefix.
    #[napi(getter)]
    pub fn prefix(&self) -> String {
        self.client.config().keys.prefix().to_string()
    }

    /// Lets go of this client's store (its Redis connection, or its durable file): closed once
    /// no open client of the same settings uses it (a durable file's -wal/-shm then removed).
    /// Calls in flight finish; later calls fail with `ERR_CLOSED` (the in-memory store has
    /// nothing to let go: it goes on answering).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, ()>> {
        self.client.close();
        promise(env, async { Ok(()) })
    }
}
