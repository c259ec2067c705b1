//! The PostgreSQL backend (`Flowguard.open({ postgres: { url } })`): the patterns kept in tables
//! of their own schema (default `flowguard`), on the same rules as the other stores
//! (`crate::rules`): the Concurrency Lock, Job State (values and idempotency keys), the Item
//! Tracker, the Rate Limiter, the Semaphore, the Dedup Queue and the catalog. See
//! docs/postgres.md.
//!
//! - A pool of connections (deadpool-postgres over tokio-postgres; no protocol code of our own),
//!   made lazily, of [`PostgresOptions::pool_size`]; the connect timeout is the client's
//!   `connect_timeout`, and every statement runs under the client's `command_timeout` as
//!   PostgreSQL's `statement_timeout` (so a wait for a row lock is bounded too). TLS per libpq's
//!   `sslmode` (`tls`).
//! - Every call that writes is one transaction (`READ COMMITTED`): it locks the rows it needs
//!   (`SELECT … FOR UPDATE`, several rows in key order so that two calls never deadlock), then
//!   reads the database's clock (`clock_timestamp()`, after the locks, so a call that waited
//!   decides at the time it got them), asks the rule, and writes. A row that did not exist cannot
//!   be locked: it is written with `INSERT … ON CONFLICT DO NOTHING`, and when another call
//!   inserted it first, the transaction is rolled back and run again ([`Fail::Race`]), now
//!   finding the row and locking it (the Item Tracker inserts its new records without `ON
//!   CONFLICT`: the unique violation says the same, at less than half the cost per row).
//! - The calls whose common case one statement decides (an item's claim, completion and failure,
//!   a lock's acquisition and release) run that statement first, on its own: one round trip, and
//!   the transaction only when it returns no row (`fast`).
//! - Times are milliseconds since the epoch by the database's clock, never the client's.

mod catalog;
mod clock;
#[cfg(test)]
mod explain_tests;
#[cfg(test)]
mod extend_fast_tests;
mod fast;
#[cfg(test)]
mod fast_tests;
mod limiter;
mod limiter_fast;
#[cfg(test)]
mod limiter_fast_tests;
#[cfg(test)]
mod list_tests;
mod lock;
mod notify;
mod once_fast;
#[cfg(test)]
mod once_fast_tests;
mod queue;
mod queue_fast;
#[cfg(test)]
mod read_tests;
mod schema;
mod semaphore;
mod semaphore_fast;
#[cfg(test)]
mod semaphore_fast_tests;
mod state;
mod state_fast;
#[cfg(test)]
mod state_fast_tests;
mod sweep;
#[cfg(test)]
mod sweep_tests;
#[cfg(test)]
mod time_after_lock_tests;
mod tls;
mod tracker;
mod tracker_fast;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use tls::{ClientCert, Pem, RootCert, SslMode};

use crate::backend::Backend;
use crate::client::Config;
use crate::error::{Error, ErrorCode, FieldPath, Result};
use crate::wakeup::{Subscription, Topic};

/// Default schema of flowguard's tables.
pub const DEFAULT_SCHEMA: &str = "flowguard";
/// Default number of pooled connections per client.
pub const DEFAULT_POOL_SIZE: u32 = 10;
/// The most pooled connections per client.
pub const MAX_POOL_SIZE: u32 = 1_000;
/// Default pause between two sweeps of expired rows (see `sweep`).
pub const DEFAULT_SWEEP_INTERVAL_MS: u64 = 1_000;
/// The shortest and longest pause between two sweeps (0: no sweep).
pub const SWEEP_INTERVAL_MS: std::ops::RangeInclusive<u64> = 100..=3_600_000;
/// How many times a transaction that lost a race (see [`Fail::Race`]) or was chosen as a
/// deadlock's or serialization failure's victim is run again before the call fails.
pub(crate) const MAX_RETRIES: u32 = 8;

/// Where a PostgreSQL backend is, and how to use it.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct PostgresOptions {
    /// `postgres://[user[:password]@]host[:port]/database[?options]` (or the key=value form).
    pub url: String,
    /// The schema of flowguard's tables, created on first use. Default [`DEFAULT_SCHEMA`].
    /// Lowercase letters, digits and `_`, starting with a letter or `_`, at most 63 bytes.
    pub schema: Option<String>,
    /// Pooled connections, 1 to [`MAX_POOL_SIZE`]. Default [`DEFAULT_POOL_SIZE`].
    pub pool_size: Option<u32>,
    /// TLS settings beside the URL's `sslmode`. Given, the default `sslmode` is `verify-full`
    /// (without it, `prefer`, as libpq).
    pub tls: Option<PostgresTls>,
    /// The pause between two sweeps of expired rows (± a quarter), [`SWEEP_INTERVAL_MS`]; 0: no
    /// sweep (expired rows then go only with the writes of their table). Default
    /// [`DEFAULT_SWEEP_INTERVAL_MS`].
    pub sweep_interval_ms: Option<u64>,
}

/// The `tls` of [`PostgresOptions`].
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct PostgresTls {
    /// The CA certificates to check the server's certificate with, as PEM text (instead of the
    /// URL's `sslrootcert=<file>`). None: the URL's `sslrootcert`, else, for `verify-ca` and
    /// `verify-full`, the system's trust store.
    pub ca: Option<String>,
    /// A client certificate (PEM text, the chain after it if any) shown to a server that asks for
    /// one (`cert` authentication), instead of the URL's `sslcert=<file>`. With `key`.
    pub cert: Option<String>,
    /// The client certificate's private key (PEM text: PKCS #8, RSA or EC, unencrypted), instead
    /// of the URL's `sslkey=<file>`. With `cert`. Never printed.
    pub key: Option<String>,
}

/// Never prints the key.
impl fmt::Debug for PostgresTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresTls")
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .field("key", &self.key.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Never prints the URL (it may hold a password).
impl fmt::Debug for PostgresOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresOptions")
            .field("url", &"***")
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("tls", &self.tls)
            .field("sweep_interval_ms", &self.sweep_interval_ms)
            .finish()
    }
}

impl PostgresOptions {
    /// The schema name, checked (errors name `postgres.schema`).
    pub fn schema(&self) -> Result<&str> {
        let s = self.schema.as_deref().unwrap_or(DEFAULT_SCHEMA);
        let ok = !s.is_empty()
            && s.len() <= 63
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !s.as_bytes()[0].is_ascii_digit()
            && !s.starts_with("pg_");
        if !ok {
            return Err(Error::invalid_at(
                FieldPath::new("postgres").field("schema"),
                format!(
                    "must be 1 to 63 lowercase letters, digits or _, not starting with a digit or pg_, got {:?}",
                    crate::tracker::truncate(s, 70)
                ),
            ));
        }
        Ok(s)
    }

    /// The pool size, checked (errors name `postgres.pool_size`).
    pub fn pool_size(&self) -> Result<u32> {
        match self.pool_size {
            None => Ok(DEFAULT_POOL_SIZE),
            Some(n) if (1..=MAX_POOL_SIZE).contains(&n) => Ok(n),
            Some(n) => Err(Error::invalid_at(
                FieldPath::new("postgres").field("pool_size"),
                format!("must be 1 to {MAX_POOL_SIZE} connections, got {n}"),
            )),
        }
    }

    /// The pause between two sweeps, checked (errors name `postgres.sweep_interval_ms`); `None`:
    /// no sweep.
    pub fn sweep_interval(&self) -> Result<Option<Duration>> {
        match self.sweep_interval_ms {
            None => Ok(Some(Duration::from_millis(DEFAULT_SWEEP_INTERVAL_MS))),
            Some(0) => Ok(None),
            Some(n) if SWEEP_INTERVAL_MS.contains(&n) => Ok(Some(Duration::from_millis(n))),
            Some(n) => Err(Error::invalid_at(
                FieldPath::new("postgres").field("sweep_interval_ms"),
                format!(
                    "must be 0 (no sweep) or {} to {} ms, got {n}",
                    SWEEP_INTERVAL_MS.start(),
                    SWEEP_INTERVAL_MS.end()
                ),
            )),
        }
    }

    /// The client certificate and key: the `tls.cert` / `tls.key` options or the URL's `sslcert` /
    /// `sslkey`, each from one place, both or neither.
    fn client_cert(&self, url_cert: Option<String>, url_key: Option<String>) -> Result<Option<ClientCert>> {
        let tls = FieldPath::new("postgres").field("tls");
        let in_url = FieldPath::new("postgres").field("url");
        let pick =
            |option: Option<String>, from_url: Option<String>, name: &'static str, url_key: &str| match (
                option, from_url,
            ) {
                (Some(_), Some(_)) => Err(Error::invalid_at(
                    tls.clone().field(name),
                    format!("is given with {url_key} in postgres.url: give one of them"),
                )),
                (Some(t), None) => Ok(Some((Pem::Text(t), tls.clone().field(name)))),
                (None, Some(f)) => Ok(Some((Pem::File(f), in_url.clone()))),
                (None, None) => Ok(None),
            };
        let opts = self.tls.as_ref();
        let cert = pick(opts.and_then(|t| t.cert.clone()), url_cert, "cert", "sslcert")?;
        let key = pick(opts.and_then(|t| t.key.clone()), url_key, "key", "sslkey")?;
        match (cert, key) {
            (None, None) => Ok(None),
            (Some((cert, cert_field)), Some((key, key_field))) => {
                Ok(Some(ClientCert { cert, cert_field, key, key_field }))
            }
            (Some(_), None) => Err(Error::invalid_at(
                tls.field("key"),
                "is missing: a client certificate (tls.cert or sslcert) needs its key (tls.key or sslkey)",
            )),
            (None, Some(_)) => Err(Error::invalid_at(
                tls.field("cert"),
                "is missing: a client key (tls.key or sslkey) needs its certificate (tls.cert or sslcert)",
            )),
        }
    }

    /// The driver's settings from the URL and its TLS connector, checked without connecting
    /// (errors name `postgres.url` or `postgres.tls.ca`, never echo the URL).
    fn driver_config(&self, config: &Config) -> Result<(tokio_postgres::Config, MakeRustlsConnect)> {
        let url = tls::split_url(&self.url)?;
        let mut pg = tokio_postgres::Config::from_str(&url.rest).map_err(|e| {
            Error::invalid_at(
                FieldPath::new("postgres").field("url"),
                format!(
                    "is not a PostgreSQL connection URL (postgres://user:password@host:port/database): {}",
                    redact(&e.to_string(), &self.url)
                ),
            )
        })?;
        if pg.get_hosts().is_empty() {
            return Err(Error::invalid_at(
                FieldPath::new("postgres").field("url"),
                "names no host (postgres://host:port/database)",
            ));
        }
        let mode = url.mode.unwrap_or(if self.tls.is_some() { SslMode::VerifyFull } else { SslMode::Prefer });
        pg.ssl_mode(mode.driver());
        let ca_field = FieldPath::new("postgres").field("tls").field("ca");
        let (root, field) = match (self.tls.as_ref().and_then(|t| t.ca.clone()), url.root_cert) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid_at(
                    ca_field,
                    "is given with sslrootcert in postgres.url: give one of them",
                ))
            }
            (Some(pem), None) => (Some(RootCert::Pem(pem)), ca_field),
            (None, Some(f)) if f == "system" => {
                (Some(RootCert::System), FieldPath::new("postgres").field("url"))
            }
            (None, Some(f)) => (Some(RootCert::File(f)), FieldPath::new("postgres").field("url")),
            (None, None) => (None, ca_field),
        };
        let client = self.client_cert(url.cert, url.key)?;
        let connector = tls::connector(mode, root.as_ref(), field, client.as_ref())?;
        pg.connect_timeout(Duration::from_millis(config.connect_timeout_ms));
        // Every statement is bounded, a wait for a row lock included. And no statement reads a
        // whole table: each has an index to use (`explain_tests`), and with sequential scans off
        // it uses it whatever the statistics say. Without that, a statement prepared while its
        // table was small keeps the sequential scan planned then (a few rows are cheaper to read
        // than an index) and reads the whole table, at every run, once it has grown, until
        // autovacuum analyzes it again: see docs/postgres.md "Plans that do not depend on the
        // statistics".
        let session = format!("-c statement_timeout={} -c enable_seqscan=off", config.command_timeout_ms);
        // No JIT compilation, unless the URL's own options turn it on (they come after): only a
        // statement over a whole big group (`listItems` of a million records) costs enough to
        // trigger it, and there the compilation took longer than it saved (docs/postgres.md).
        let own = pg.get_options().filter(|o| !o.is_empty()).map(|o| format!("{o} ")).unwrap_or_default();
        pg.options(format!("-c jit=off {own}{session}"));
        if pg.get_application_name().is_none() {
            pg.application_name("flowguard");
        }
        Ok((pg, connector))
    }
}

/// `text` with every occurrence of `secret` replaced (a driver message never shows the URL).
fn redact(text: &str, secret: &str) -> String {
    if secret.is_empty() {
        text.to_string()
    } else {
        text.replace(secret, "***")
    }
}

/// A client of a PostgreSQL database: its pool, its schema and its key prefix.
pub struct Postgres {
    pool: Pool,
    /// The schema, a checked identifier (written into statements as it is).
    schema: String,
    /// The key prefix: the namespace of every row this client reads and writes.
    ns: String,
    /// The client's command timeout: the longest a COMMIT is waited for (see [`Postgres::commit`]).
    command_timeout: Duration,
    /// Lock acquisitions by this client, for the sweep of forgotten lock names (see `lock`).
    acquisitions: std::sync::atomic::AtomicU32,
    /// Semaphore acquisitions by this client, for the sweep of forgotten names (see `semaphore`).
    permits: std::sync::atomic::AtomicU32,
    /// The connection that hears the releases announced by NOTIFY, for the waits (`notify`).
    listener: notify::Listener,
    /// The task that deletes expired rows without waiting for writes (`sweep`).
    sweeper: sweep::Sweeper,
    /// Calls a fast statement decided (`fast`), for the tests that show them taken.
    fast_taken: std::sync::atomic::AtomicU64,
    /// The Item Tracker's fast statements run, for their purge's turn (`tracker_fast`).
    fast_writes: std::sync::atomic::AtomicU32,
    /// Job State's fast writes run, for their purge's turn (`state_fast`).
    state_writes: std::sync::atomic::AtomicU32,
    /// The Rate Limiter's fast takes run, for their purge's turn (`limiter_fast`).
    limiter_takes: std::sync::atomic::AtomicU32,
    /// Idempotency key claims by their fast statement, for their purge's turn (`once_fast`).
    key_claims: std::sync::atomic::AtomicU32,
    /// Transactions begun (`transaction!`), for the tests that show a read runs none.
    transactions: std::sync::atomic::AtomicU64,
}

impl Postgres {
    /// Opens a pool on the database of `opts` and makes sure flowguard's schema is there, at the
    /// version this flowguard uses (created when absent; a newer one is refused with
    /// `ERR_UNSUPPORTED`). Fails within the connect timeout when the database cannot be reached.
    pub async fn open(opts: &PostgresOptions, config: &Config) -> Result<Postgres> {
        let schema = opts.schema()?.to_string();
        let size = opts.pool_size()? as usize;
        let sweep_every = opts.sweep_interval()?;
        let (pg, tls) = opts.driver_config(config)?;
        let listener = notify::Listener::new(pg.clone(), tls.clone(), &schema);
        let manager =
            Manager::from_config(pg, tls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(size)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(Duration::from_millis(config.connect_timeout_ms)))
            .wait_timeout(Some(Duration::from_millis(config.command_timeout_ms)))
            .build()
            .map_err(|e| Error::new(ErrorCode::Internal, format!("the PostgreSQL pool: {e}")))?;
        let store = Postgres {
            pool: pool.clone(),
            schema: schema.clone(),
            ns: config.keys.prefix().to_string(),
            command_timeout: Duration::from_millis(config.command_timeout_ms),
            acquisitions: Default::default(),
            permits: Default::default(),
            listener,
            sweeper: sweep::Sweeper::start(pool.clone(), schema.clone(), None),
            fast_taken: Default::default(),
            fast_writes: Default::default(),
            state_writes: Default::default(),
            limiter_takes: Default::default(),
            key_claims: Default::default(),
            transactions: Default::default(),
        };
        schema::ensure(&store).await?;
        // Once the tables are there.
        let store = Postgres { sweeper: sweep::Sweeper::start(pool, schema, sweep_every), ..store };
        Ok(store)
    }

    /// A pooled connection.
    async fn conn(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(|e| self.pool_error(e))
    }

    fn pool_error(&self, e: PoolError) -> Error {
        match e {
            PoolError::Backend(e) => pg_error(e),
            PoolError::Timeout(deadpool_postgres::TimeoutType::Wait) => Error::new(
                ErrorCode::Timeout,
                format!(
                    "all {} pooled PostgreSQL connections stayed busy for the command timeout; nothing was done: \
                     raise postgres.poolSize or commandTimeoutMs",
                    self.pool.status().max_size
                ),
            ),
            PoolError::Timeout(_) => Error::new(
                ErrorCode::BackendUnavailable,
                "PostgreSQL did not accept a connection within the connect timeout",
            ),
            PoolError::Closed => closed(),
            other => Error::new(ErrorCode::BackendUnavailable, format!("PostgreSQL connection pool: {other}")),
        }
    }

    /// Commits `tx`, waiting at most the command timeout. PostgreSQL's `statement_timeout` does
    /// not bound a COMMIT's wait for a synchronous standby (it is switched off before the commit
    /// runs), so with the standby away the COMMIT waits as long as it is; and cancelling it would
    /// end that wait with the COMMIT answered as done (only a WARNING says the standby has not
    /// confirmed it), a write a promotion of that standby loses. So the wait is bounded here and,
    /// past it, the call fails ([`Fail::Unconfirmed`]: applied or not, unknown) and its connection,
    /// still in its COMMIT, is closed (see [`transaction!`]).
    pub(crate) async fn commit(&self, tx: deadpool_postgres::Transaction<'_>) -> Sql<()> {
        match tokio::time::timeout(self.command_timeout, tx.commit()).await {
            Ok(done) => Ok(done?),
            Err(_) => Err(Fail::Unconfirmed),
        }
    }

    /// How long a statement committed by itself (a fast statement, `fast.rs`) may run before the
    /// call gives up on it client-side: the command timeout and a grace of a tenth of it (at least
    /// [`MIN_FAST_GRACE`]). The server's own `statement_timeout` (the command timeout, counted from
    /// when the statement arrived) so ends a statement still running (waiting for a row lock, say)
    /// first, and the call is answered "nothing was written"; only a wait past it, the commit's
    /// wait for a synchronous standby that `statement_timeout` does not bound, is cut here. Cut at
    /// the same moment, the call could give up while the server went on and wrote: a lock acquired
    /// for a caller told it timed out.
    pub(crate) fn fast_bound(&self) -> Duration {
        self.command_timeout + (self.command_timeout / 10).max(MIN_FAST_GRACE)
    }

    /// Why a transaction failed, as a coded error.
    fn failure(&self, f: Fail) -> Error {
        match f {
            Fail::Pg(e) => pg_error(e),
            Fail::Race => Error::new(
                ErrorCode::Backend,
                format!(
                    "PostgreSQL: the call lost {MAX_RETRIES} races in a row for rows other calls were creating; \
                     nothing was written, try again"
                ),
            ),
            Fail::Corrupt(what) => Error::new(
                ErrorCode::Storage,
                format!("a row of PostgreSQL schema {} holds what flowguard did not write ({what})", self.schema),
            ),
            Fail::Coded(e) => e,
            Fail::Unconfirmed => Error::new(
                ErrorCode::Timeout,
                format!(
                    "PostgreSQL did not confirm the commit within the command timeout ({} ms; a synchronous standby \
                     not answering?): the write may or may not have been applied",
                    self.command_timeout.as_millis()
                ),
            ),
        }
    }
}

/// The least grace [`Postgres::fast_bound`] gives a fast statement past the command timeout.
const MIN_FAST_GRACE: Duration = Duration::from_millis(100);

/// Runs `$body` (an async block that uses `$c`, a [`Ctx`], and returns a [`Sql`]) as one
/// transaction of `$store` (a `&Postgres`), committed when it succeeds, rolled back and run
/// again when it lost a race ([`Fail::Race`]) or was chosen as a deadlock's victim.
macro_rules! transaction {
    ($store:expr, |$c:ident| $body:expr) => {{
        let store: &$crate::backend::postgres::Postgres = $store;
        let mut tries = 0u32;
        loop {
            let mut conn = store.conn().await?;
            let tx = match conn.transaction().await {
                Ok(tx) => tx,
                Err(e) => break Err($crate::backend::postgres::pg_error(e)),
            };
            store.transactions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let $c = $crate::backend::postgres::Ctx {
                on: $crate::backend::postgres::On::Tx(&tx),
                schema: &store.schema,
                ns: &store.ns,
            };
            let out: $crate::backend::postgres::Sql<_> = $body.await;
            let out = match out {
                Ok(v) => store.commit(tx).await.map(|()| v),
                Err(e) => {
                    drop(tx);
                    Err(e)
                }
            };
            if matches!(out, Err($crate::backend::postgres::Fail::Unconfirmed)) {
                // Its connection is still in its COMMIT: out of the pool, and closed.
                drop(deadpool_postgres::Object::take(conn));
            }
            match out {
                Ok(v) => break Ok(v),
                Err(f) if f.retry() && tries < $crate::backend::postgres::MAX_RETRIES => {
                    // Dropping the transaction rolls it back.
                    tries += 1;
                }
                Err(f) => break Err(store.failure(f)),
            }
        }
    }};
}
pub(crate) use transaction;

/// Runs `$body` (as for [`transaction!`]) for a call that only reads: its statements run on one
/// pooled connection, each committed by itself, with no `BEGIN` and no `COMMIT` (a round trip
/// each). The same answers as in a transaction: a transaction of flowguard's runs at READ
/// COMMITTED, where each statement reads its own snapshot too, and a read locks no row. A body
/// given here must not write, lock rows (`FOR UPDATE`) or rely on `SET LOCAL`.
macro_rules! read {
    ($store:expr, |$c:ident| $body:expr) => {{
        let store: &$crate::backend::postgres::Postgres = $store;
        let conn = store.conn().await?;
        let $c = $crate::backend::postgres::Ctx {
            on: $crate::backend::postgres::On::Alone(&conn),
            schema: &store.schema,
            ns: &store.ns,
        };
        let out: $crate::backend::postgres::Sql<_> = $body.await;
        out.map_err(|f| store.failure(f))
    }};
}
pub(crate) use read;

/// One call under way: its transaction (or, for a read, its connection: see [`read!`]), the
/// schema and the key prefix.
pub(crate) struct Ctx<'t, 'c> {
    pub on: On<'t, 'c>,
    pub schema: &'t str,
    pub ns: &'t str,
}

/// Where a call's statements run: in its transaction, or each committed by itself on one
/// pooled connection (a call that only reads, see [`read!`]).
pub(crate) enum On<'t, 'c> {
    Tx(&'t deadpool_postgres::Transaction<'c>),
    Alone(&'t deadpool_postgres::ClientWrapper),
}

/// The parameters of a statement.
pub(crate) type Params<'p> = &'p [&'p (dyn ToSql + Sync)];

impl Ctx<'_, '_> {
    /// The statement `sql` with `{s}` as the schema, prepared once per connection.
    async fn prepare(&self, sql: &str) -> Sql<Statement> {
        let sql = sql.replace("{s}", self.schema);
        Ok(match self.on {
            On::Tx(tx) => tx.prepare_cached(&sql).await?,
            On::Alone(conn) => conn.prepare_cached(&sql).await?,
        })
    }
    pub async fn query(&self, sql: &str, params: Params<'_>) -> Sql<Vec<Row>> {
        let st = self.prepare(sql).await?;
        Ok(self.run_query(&st, params).await?)
    }
    pub async fn query_opt(&self, sql: &str, params: Params<'_>) -> Sql<Option<Row>> {
        let st = self.prepare(sql).await?;
        Ok(self.run_query_opt(&st, params).await?)
    }
    pub async fn execute(&self, sql: &str, params: Params<'_>) -> Sql<u64> {
        let st = self.prepare(sql).await?;
        Ok(self.run_execute(&st, params).await?)
    }
    /// A prepared statement's rows (sent on the first poll: nothing is awaited before, so
    /// statements polled together are pipelined).
    pub async fn run_query(
        &self,
        st: &Statement,
        params: Params<'_>,
    ) -> std::result::Result<Vec<Row>, tokio_postgres::Error> {
        match self.on {
            On::Tx(tx) => tx.query(st, params).await,
            On::Alone(conn) => conn.query(st, params).await,
        }
    }
    /// [`Ctx::run_query`], for at most one row.
    pub async fn run_query_opt(
        &self,
        st: &Statement,
        params: Params<'_>,
    ) -> std::result::Result<Option<Row>, tokio_postgres::Error> {
        match self.on {
            On::Tx(tx) => tx.query_opt(st, params).await,
            On::Alone(conn) => conn.query_opt(st, params).await,
        }
    }
    /// [`Ctx::run_query`], for the count of rows written.
    pub async fn run_execute(
        &self,
        st: &Statement,
        params: Params<'_>,
    ) -> std::result::Result<u64, tokio_postgres::Error> {
        match self.on {
            On::Tx(tx) => tx.execute(st, params).await,
            On::Alone(conn) => conn.execute(st, params).await,
        }
    }
    /// Statements without parameters (the schema's `CREATE`s).
    pub async fn batch_execute(&self, sql: &str) -> Sql<()> {
        match self.on {
            On::Tx(tx) => tx.batch_execute(sql).await?,
            On::Alone(conn) => conn.batch_execute(sql).await?,
        }
        Ok(())
    }
    /// Writes a row this transaction either locked (`existed`: `update`) or found absent
    /// (`insert`, an `INSERT … ON CONFLICT DO NOTHING`). When another call inserted the row in
    /// the meantime, nothing is written and the transaction must run again ([`Fail::Race`]).
    /// Both statements take `params`.
    pub async fn write_row(&self, existed: bool, update: &str, insert: &str, params: Params<'_>) -> Sql<()> {
        if existed {
            self.execute(update, params).await?;
        } else if self.execute(insert, params).await? == 0 {
            return Err(Fail::Race);
        }
        Ok(())
    }
    /// Removes up to [`PURGE_SLICE`] rows of `table` whose `exp` is not after `now` (rows other
    /// calls hold are skipped): expired rows are invisible to every read, so they go a bounded
    /// slice per write, by the table's index on `exp`, and no call pays for one big DELETE.
    pub async fn purge(&self, table: Purged, now: i64) -> Sql<()> {
        let sql = table.statement();
        self.execute(sql, &[&now]).await?;
        Ok(())
    }
    /// The key prefix, as the `ns` column holds it.
    pub fn ns(&self) -> &[u8] {
        self.ns.as_bytes()
    }
}

/// Expired rows removed per write, at most (see [`Ctx::purge`]).
pub(crate) const PURGE_SLICE: i64 = 64;
// The purge statements spell PURGE_SLICE and FENCE_KEEP_MS out (SQL text is static): keep them
// in step.
const _: () = assert!(PURGE_SLICE == 64 && crate::lock::FENCE_KEEP_MS == 2_592_000_000);

/// The tables whose expired rows are purged.
#[derive(Clone, Copy)]
pub(crate) enum Purged {
    Vals,
    Idem,
    Items,
    /// Lock names unused for [`FENCE_KEEP_MS`](crate::lock::FENCE_KEEP_MS): their fence is forgotten.
    Locks,
    /// Rate limiters whose TAT and pause are both reached.
    Limiters,
    /// Semaphore holders whose lease ended.
    SemHolders,
    /// Semaphore names past their fence's keep time and without live holders: their fence is
    /// forgotten.
    Sems,
}

impl Purged {
    /// Its purge statement (`$1`: the time now). The rows are taken oldest first: the order keeps
    /// the statement on the expiry's index whatever the planner thinks of the rows' number
    /// (without it, with most of a big table expired, a sequential scan that stops at the 64th
    /// row looks cheaper, and each purge reads again the dead rows the ones before it left at the
    /// table's start).
    pub(crate) fn statement(self) -> &'static str {
        match self {
            Purged::Vals => {
                "DELETE FROM {s}.vals WHERE ctid = ANY(ARRAY(SELECT ctid FROM {s}.vals WHERE exp <= $1
                   ORDER BY exp LIMIT 64 FOR UPDATE SKIP LOCKED))"
            }
            Purged::Idem => {
                "DELETE FROM {s}.idem WHERE ctid = ANY(ARRAY(SELECT ctid FROM {s}.idem WHERE exp <= $1
                   ORDER BY exp LIMIT 64 FOR UPDATE SKIP LOCKED))"
            }
            Purged::Items => {
                "DELETE FROM {s}.items WHERE ctid = ANY(ARRAY(SELECT ctid FROM {s}.items WHERE x <= $1
                   AND x < 99999999999999 ORDER BY x LIMIT 64 FOR UPDATE SKIP LOCKED))"
            }
            Purged::Limiters => {
                "DELETE FROM {s}.limiters WHERE ctid = ANY(ARRAY(SELECT ctid FROM {s}.limiters WHERE exp <= $1
                   ORDER BY exp LIMIT 64 FOR UPDATE SKIP LOCKED))"
            }
            Purged::SemHolders => {
                "DELETE FROM {s}.sem_holders WHERE ctid = ANY(ARRAY(SELECT ctid FROM {s}.sem_holders WHERE exp <= $1
                   ORDER BY exp LIMIT 64 FOR UPDATE SKIP LOCKED))"
            }
            Purged::Sems => {
                "DELETE FROM {s}.sems WHERE ctid = ANY(ARRAY(SELECT ctid FROM {s}.sems f WHERE keep <= $1
                   AND NOT EXISTS (SELECT 1 FROM {s}.sem_holders h WHERE h.ns = f.ns AND h.name = f.name AND h.exp > $1)
                   ORDER BY keep LIMIT 64 FOR UPDATE SKIP LOCKED))"
            }
            Purged::Locks => {
                "DELETE FROM {s}.locks WHERE ctid = ANY(ARRAY(SELECT ctid FROM {s}.locks
                   WHERE exp <= $1 - 2592000000 ORDER BY exp LIMIT 64 FOR UPDATE SKIP LOCKED))"
            }
        }
    }
}

/// Why a transaction failed.
pub(crate) enum Fail {
    Pg(tokio_postgres::Error),
    /// A row this transaction found absent (so could not lock) was inserted by another call
    /// before this one wrote it: run the transaction again.
    Race,
    /// A row that does not read as flowguard writes it.
    Corrupt(String),
    /// The call is refused by a rule (nothing written: the transaction is rolled back).
    Coded(Error),
    /// The COMMIT was not answered within the command timeout (see [`Postgres::commit`]).
    Unconfirmed,
}

impl Fail {
    /// Whether running the transaction again may succeed.
    fn retry(&self) -> bool {
        match self {
            Fail::Race => true,
            Fail::Pg(e) => matches!(
                e.code(),
                Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
            ),
            _ => false,
        }
    }
}

impl From<tokio_postgres::Error> for Fail {
    fn from(e: tokio_postgres::Error) -> Self {
        Fail::Pg(e)
    }
}

pub(crate) type Sql<T> = std::result::Result<T, Fail>;

/// A call on a client after its `close()`.
fn closed() -> Error {
    Error::new(ErrorCode::Closed, "this client was closed: open a new one with Flowguard.open")
}

/// A driver error as a coded error: the server unreachable or going away
/// (`ERR_BACKEND_UNAVAILABLE`), the credentials refused (`ERR_BACKEND_AUTH`), a statement past
/// its timeout (`ERR_TIMEOUT`), anything else the server answered (`ERR_BACKEND`).
pub(crate) fn pg_error(e: tokio_postgres::Error) -> Error {
    let Some(code) = e.code().cloned() else {
        // No SQLSTATE: the connection (refused, dropped, timed out, closed).
        let what = if e.is_closed() { "the connection was closed" } else { "the connection failed" };
        // The driver's reason, with its cause (a TLS handshake's: which check the certificate failed).
        let mut why = e.to_string();
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            why = format!("{why}: {c}");
            cause = c.source();
        }
        return Error::new(ErrorCode::BackendUnavailable, format!("PostgreSQL: {what} ({why})"))
            .with_source(e);
    };
    let class = &code.code()[..2];
    let (kind, what) = if code == SqlState::QUERY_CANCELED {
        (
            ErrorCode::Timeout,
            "a statement ran past the command timeout (statement_timeout); nothing was written",
        )
    } else if class == "28" {
        (ErrorCode::BackendAuth, "the server refused the credentials")
    } else if class == "08" || class == "57" || class == "53" {
        (ErrorCode::BackendUnavailable, "the server is unavailable")
    } else if class == "42" && code == SqlState::INSUFFICIENT_PRIVILEGE {
        (ErrorCode::BackendAuth, "the user may not use flowguard's schema")
    } else {
        (ErrorCode::Backend, "the server refused a statement")
    };
    let detail = e.as_db_error().map(|d| d.message().to_string()).unwrap_or_default();
    Error::new(kind, format!("PostgreSQL: {what} ({} {detail})", code.code())).with_source(e)
}

impl Backend for Postgres {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    /// Closes the pool: pooled connections are closed, later calls fail with `ERR_CLOSED`.
    fn close(&self) {
        self.sweeper.stop();
        self.pool.close();
        self.listener.stop();
    }

    /// Releases are announced with NOTIFY and heard by this client's listening connection.
    fn subscribe(&self, topic: Topic, name: &str) -> Option<Subscription> {
        self.listener.subscribe(topic, &self.ns, name)
    }
}

/// The value of column `i`, or [`Fail::Corrupt`] naming it when it is not UTF-8 text.
pub(crate) fn text(row: &Row, i: usize) -> Sql<Option<String>> {
    let bytes: Option<Vec<u8>> = row.try_get(i)?;
    bytes
        .map(|b| String::from_utf8(b).map_err(|_| Fail::Corrupt(format!("column {i} is not UTF-8"))))
        .transpose()
}
