//! Configuration by flags and environment variables.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{ArgGroup, Parser};
use flowguard_core::backend::durable::Durability;
use flowguard_core::OpenOptions;

use crate::app::Limits;
use crate::cluster::{self, ClusterFlags};
use crate::postgres::{self, PostgresFlags};
use crate::sentinel::{self, Secret, SentinelFlags};
use crate::transport::Transport;

/// The shortest token accepted: a guessable token is no protection.
pub const MIN_TOKEN_LEN: usize = 16;

/// flowguard-server: item tracker, concurrency lock, dedup queue and job state over HTTP/JSON.
// No Debug: the token and the Redis and PostgreSQL URLs (which may hold a password) must never be printed.
#[derive(Parser, Clone)]
#[command(name = "flowguard-server", version)]
// A Sentinel-managed Redis or a Redis Cluster (not both): the data nodes' credentials go with either.
#[command(group(ArgGroup::new("redis_nodes").args(["redis_sentinel_master", "redis_cluster_nodes"])))]
pub struct Args {
    /// Address to listen on. Without a token only a loopback address is accepted.
    #[arg(long, env = "FLOWGUARD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Redis URL (redis://, rediss://). Without it and without --path: the in-memory store.
    #[arg(long, env = "FLOWGUARD_REDIS_URL", hide_env_values = true, conflicts_with = "path")]
    pub redis_url: Option<String>,
    /// Sentinel-managed Redis: the name the sentinels monitor the primary under (with
    /// --redis-sentinel-nodes; instead of --redis-url).
    #[arg(long, env = "FLOWGUARD_REDIS_SENTINEL_MASTER", value_name = "NAME",
          conflicts_with_all = ["redis_url", "path"], requires = "redis_sentinel_nodes")]
    pub redis_sentinel_master: Option<String>,
    /// The sentinels, comma-separated: host:port, or redis[s]://[user:password@]host:port
    /// (rediss:// reaches the sentinels and the data nodes over TLS).
    #[arg(
        long,
        env = "FLOWGUARD_REDIS_SENTINEL_NODES",
        hide_env_values = true,
        value_name = "HOST:PORT,…",
        requires = "redis_sentinel_master"
    )]
    pub redis_sentinel_nodes: Option<String>,
    /// Redis Cluster: seed nodes, comma-separated (any nodes of the cluster, primaries or replicas):
    /// host:port, or redis[s]://[user:password@]host:port (rediss:// for TLS); instead of --redis-url.
    #[arg(
        long,
        env = "FLOWGUARD_REDIS_CLUSTER_NODES",
        hide_env_values = true,
        value_name = "HOST:PORT,…",
        conflicts_with_all = ["redis_url", "path"]
    )]
    pub redis_cluster_nodes: Option<String>,
    /// ACL user of the sentinels themselves (host:port entries).
    #[arg(long, env = "FLOWGUARD_REDIS_SENTINEL_USERNAME", requires = "redis_sentinel_master")]
    pub redis_sentinel_username: Option<String>,
    /// Password of the sentinels themselves (host:port entries).
    #[arg(
        long,
        env = "FLOWGUARD_REDIS_SENTINEL_PASSWORD",
        hide_env_values = true,
        conflicts_with = "redis_sentinel_password_file",
        requires = "redis_sentinel_master"
    )]
    pub redis_sentinel_password: Option<String>,
    /// A file holding the sentinels' password (a trailing line break is ignored).
    #[arg(long, env = "FLOWGUARD_REDIS_SENTINEL_PASSWORD_FILE", requires = "redis_sentinel_master")]
    pub redis_sentinel_password_file: Option<std::path::PathBuf>,
    /// With --redis-sentinel-master or --redis-cluster-nodes: ACL user of the data nodes (with
    /// --redis-url: in the URL).
    #[arg(long, env = "FLOWGUARD_REDIS_USERNAME", requires = "redis_nodes")]
    pub redis_username: Option<String>,
    /// With --redis-sentinel-master or --redis-cluster-nodes: password of the data nodes (with
    /// --redis-url: in the URL).
    #[arg(
        long,
        env = "FLOWGUARD_REDIS_PASSWORD",
        hide_env_values = true,
        conflicts_with = "redis_password_file",
        requires = "redis_nodes"
    )]
    pub redis_password: Option<String>,
    /// A file holding the data nodes' password (a trailing line break is ignored).
    #[arg(long, env = "FLOWGUARD_REDIS_PASSWORD_FILE", requires = "redis_nodes")]
    pub redis_password_file: Option<std::path::PathBuf>,
    /// With --redis-sentinel-master: database of the data nodes (with --redis-url: in the URL).
    #[arg(long, env = "FLOWGUARD_REDIS_DB", requires = "redis_sentinel_master")]
    pub redis_db: Option<i64>,
    /// With --redis-sentinel-master: how many replicas must confirm each call (Redis WAIT)
    /// before it is answered; 0 (default): answered once the primary ran it. A call not confirmed
    /// within its timeout fails with ERR_BACKEND_UNAVAILABLE (it ran, and a failover could lose it).
    #[arg(long, env = "FLOWGUARD_REDIS_SENTINEL_REPLICA_ACKS", requires = "redis_sentinel_master")]
    pub redis_sentinel_replica_acks: Option<u32>,
    /// PostgreSQL URL: postgres://[user[:password]@]host[:port]/database[?options] (or the
    /// key=value form); instead of --redis-url, the Redis Cluster or Sentinel flags and --path.
    /// TLS per ?sslmode=disable|prefer|require|verify-ca|verify-full (libpq's meanings; default
    /// prefer), the CA file as &sslrootcert=/path/ca.pem (verify-* without it: the system's store).
    #[arg(
        long,
        env = "FLOWGUARD_POSTGRES_URL",
        hide_env_values = true,
        conflicts_with_all = ["redis_url", "redis_sentinel_master", "redis_cluster_nodes", "path"]
    )]
    pub postgres_url: Option<String>,
    /// With --postgres-url: the schema of flowguard's tables, created on first use. Default flowguard.
    #[arg(long, env = "FLOWGUARD_POSTGRES_SCHEMA", requires = "postgres_url")]
    pub postgres_schema: Option<String>,
    /// With --postgres-url: pooled connections, 1 to 1000. Default 10.
    #[arg(long, env = "FLOWGUARD_POSTGRES_POOL_SIZE", requires = "postgres_url")]
    pub postgres_pool_size: Option<u32>,
    /// A durable store file (SQLite): state survives restarts and crashes of the server.
    #[arg(long, env = "FLOWGUARD_PATH")]
    pub path: Option<std::path::PathBuf>,
    /// With --path: `process` (a resolved call survives a crash of the server; default) or
    /// `fsync` (it survives a power loss too; every commit is flushed to the disk).
    #[arg(long, env = "FLOWGUARD_DURABILITY", value_parser = ["process", "fsync"], requires = "path")]
    pub durability: Option<String>,
    /// Bearer token callers must send (Authorization: Bearer <token>), at least 16 characters.
    #[arg(long, env = "FLOWGUARD_TOKEN", hide_env_values = true, conflicts_with = "token_file")]
    pub token: Option<String>,
    /// A file holding the token (for Docker secrets); surrounding whitespace is ignored.
    #[arg(long, env = "FLOWGUARD_TOKEN_FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// Key prefix (and embedded namespace). Default fg:
    #[arg(long, env = "FLOWGUARD_PREFIX")]
    pub prefix: Option<String>,
    /// Connect timeout to Redis, ms.
    #[arg(long, env = "FLOWGUARD_CONNECT_TIMEOUT_MS")]
    pub connect_timeout_ms: Option<u64>,
    /// Timeout of one Redis command, ms.
    #[arg(long, env = "FLOWGUARD_COMMAND_TIMEOUT_MS")]
    pub command_timeout_ms: Option<u64>,
    /// How long finished item records are kept, ms.
    #[arg(long, env = "FLOWGUARD_RETENTION_MS")]
    pub retention_ms: Option<u64>,
    /// Largest request body, bytes.
    #[arg(long, env = "FLOWGUARD_MAX_BODY_BYTES", default_value_t = Limits::default().max_body)]
    pub max_body_bytes: usize,
    /// Most ids, requests or keys in one call.
    #[arg(long, env = "FLOWGUARD_MAX_BATCH", default_value_t = Limits::default().max_batch)]
    pub max_batch: usize,
    /// Longest waitMs of a lock acquire, ms (below the request timeout).
    #[arg(long, env = "FLOWGUARD_MAX_WAIT_MS", default_value_t = Limits::default().max_wait_ms)]
    pub max_wait_ms: u64,
    /// Longest a call may take before it is answered 504, ms.
    #[arg(long, env = "FLOWGUARD_REQUEST_TIMEOUT_MS", default_value_t = Limits::default().request_timeout.as_millis() as u64)]
    pub request_timeout_ms: u64,
    /// Longest a client may take to send a request head (and a TLS handshake), ms: counted from
    /// the connection's opening, or from the first byte of a later request; then it is closed.
    #[arg(long, env = "FLOWGUARD_HEADER_TIMEOUT_MS", default_value_t = Transport::default().header_timeout.as_millis() as u64)]
    pub header_timeout_ms: u64,
    /// Longest a call's body may take to arrive once its head is read, ms (then 408).
    #[arg(long, env = "FLOWGUARD_BODY_TIMEOUT_MS", default_value_t = Limits::default().body_timeout.as_millis() as u64)]
    pub body_timeout_ms: u64,
    /// Longest a kept-alive connection may stay silent between calls, ms; then it is closed.
    #[arg(long, env = "FLOWGUARD_IDLE_TIMEOUT_MS", default_value_t = Transport::default().idle_timeout.as_millis() as u64)]
    pub idle_timeout_ms: u64,
    /// Most connections served at once; more wait in the listen backlog. Keep it below the
    /// process's file-descriptor limit (ulimit -n).
    #[arg(long, env = "FLOWGUARD_MAX_CONNECTIONS", default_value_t = Transport::default().max_connections)]
    pub max_connections: usize,
    /// On SIGTERM, longest the server answers the calls in flight before it closes the
    /// connections still open and exits, ms.
    #[arg(long, env = "FLOWGUARD_DRAIN_TIMEOUT_MS", default_value_t = Transport::default().drain_timeout.as_millis() as u64)]
    pub drain_timeout_ms: u64,
    /// TLS certificate chain (PEM). With --tls-key, the server speaks HTTPS only.
    #[arg(long, env = "FLOWGUARD_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// TLS private key (PEM) of --tls-cert.
    #[arg(long, env = "FLOWGUARD_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Log format: json or text.
    #[arg(long, env = "FLOWGUARD_LOG_FORMAT", default_value = "json", value_parser = ["json", "text"])]
    pub log_format: String,
    /// Print the OpenAPI document of the API (JSON) and exit, serving nothing.
    #[arg(long)]
    pub print_openapi: bool,
    /// Ask the server of this host (at --listen's port, on loopback when it listens on every
    /// address) for /healthz and exit 0 when it answers 200, 1 otherwise: a container's
    /// HEALTHCHECK without a shell. Plain HTTP only (refused with --tls-cert).
    #[arg(long)]
    pub healthcheck: bool,
}

impl Args {
    /// The token to require, from --token or --token-file.
    pub fn token(&self) -> Result<Option<String>, String> {
        let token = match (&self.token, &self.token_file) {
            (Some(t), _) => Some(t.clone()),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read --token-file {}: {e}", path.display()))?
                    .trim()
                    .to_string(),
            ),
            (None, None) => None,
        };
        if let Some(t) = &token {
            if t.chars().count() < MIN_TOKEN_LEN || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(format!("the token must be at least {MIN_TOKEN_LEN} characters without spaces"));
            }
        }
        if token.is_none() && !self.listen.ip().is_loopback() {
            return Err(format!(
                "refusing to listen on {} without a token: set --token / FLOWGUARD_TOKEN (or listen on 127.0.0.1)",
                self.listen
            ));
        }
        Ok(token)
    }

    pub fn limits(&self) -> Result<Limits, String> {
        if self.max_wait_ms >= self.request_timeout_ms {
            return Err("--max-wait-ms must be below --request-timeout-ms".into());
        }
        if self.max_batch == 0 || self.max_body_bytes == 0 {
            return Err("--max-batch and --max-body-bytes must be greater than 0".into());
        }
        if self.body_timeout_ms == 0 {
            return Err("--body-timeout-ms must be greater than 0".into());
        }
        Ok(Limits {
            max_body: self.max_body_bytes,
            max_batch: self.max_batch,
            max_wait_ms: self.max_wait_ms,
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            body_timeout: Duration::from_millis(self.body_timeout_ms),
        })
    }

    /// The limits of connections: timeouts, the cap, the drain on shutdown.
    pub fn transport(&self) -> Result<Transport, String> {
        if self.header_timeout_ms == 0 || self.idle_timeout_ms == 0 || self.max_connections == 0 {
            return Err(
                "--header-timeout-ms, --idle-timeout-ms and --max-connections must be greater than 0".into(),
            );
        }
        Ok(Transport {
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            max_connections: self.max_connections,
            drain_timeout: Duration::from_millis(self.drain_timeout_ms),
        })
    }

    /// The data nodes' password, from --redis-password or --redis-password-file.
    fn data_password(&self) -> Secret<'_> {
        Secret {
            inline: self.redis_password.as_deref(),
            file: self.redis_password_file.as_deref(),
            file_flag: "--redis-password-file",
        }
    }

    /// The core's options; an `ERR_INVALID_ARGUMENT` naming the flag at fault.
    pub fn open_options(&self) -> flowguard_core::Result<OpenOptions> {
        let sentinel = match (&self.redis_sentinel_master, &self.redis_sentinel_nodes) {
            (Some(master), Some(nodes)) => Some(sentinel::options(&SentinelFlags {
                master,
                nodes,
                sentinel_username: self.redis_sentinel_username.as_deref(),
                sentinel_password: Secret {
                    inline: self.redis_sentinel_password.as_deref(),
                    file: self.redis_sentinel_password_file.as_deref(),
                    file_flag: "--redis-sentinel-password-file",
                },
                username: self.redis_username.as_deref(),
                password: self.data_password(),
                db: self.redis_db,
                replica_acks: self.redis_sentinel_replica_acks,
            })?),
            _ => None,
        };
        Ok(OpenOptions {
            url: self.redis_url.clone(),
            cluster: match &self.redis_cluster_nodes {
                Some(nodes) => Some(cluster::seeds(&ClusterFlags {
                    nodes,
                    username: self.redis_username.as_deref(),
                    password: self.data_password(),
                })?),
                None => None,
            },
            sentinel,
            postgres: match &self.postgres_url {
                Some(url) => Some(postgres::options(&PostgresFlags {
                    url,
                    schema: self.postgres_schema.as_deref(),
                    pool_size: self.postgres_pool_size,
                })?),
                None => None,
            },
            prefix: self.prefix.clone(),
            connect_timeout: self.connect_timeout_ms.map(Duration::from_millis),
            command_timeout: self.command_timeout_ms.map(Duration::from_millis),
            retention: self.retention_ms.map(Duration::from_millis),
            path: self.path.clone(),
            durability: self.durability.as_deref().map(|d| match d {
                "fsync" => Durability::Fsync,
                _ => Durability::Process,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("flowguard-server").chain(v.iter().copied())).unwrap()
    }

    #[test]
    fn a_public_address_needs_a_token() {
        assert!(args(&["--listen", "0.0.0.0:8080"]).token().unwrap_err().contains("without a token"));
        assert_eq!(args(&["--listen", "127.0.0.1:8080"]).token().unwrap(), None);
        assert_eq!(args(&["--listen", "[::1]:8080"]).token().unwrap(), None);
        let t = args(&["--listen", "0.0.0.0:8080", "--token", "0123456789abcdef"]).token().unwrap();
        assert_eq!(t.as_deref(), Some("0123456789abcdef"));
        let e = args(&["--token", "short"]).token().unwrap_err();
        assert!(!e.contains("short"), "the token is never echoed: {e}");
    }

    #[test]
    fn sentinel_flags_give_the_sentinel_options_and_conflict_with_the_other_stores() {
        let a = args(&[
            "--redis-sentinel-master",
            "main",
            "--redis-sentinel-nodes",
            "s1:26379,s2:26379",
            "--redis-db",
            "3",
        ]);
        let s = a.open_options().unwrap().sentinel.unwrap();
        assert_eq!((s.master_name.as_str(), s.nodes.len(), s.db), ("main", 2, Some(3)));
        assert_eq!(args(&[]).open_options().unwrap().sentinel, None);
        let parse =
            |v: &[&str]| Args::try_parse_from(std::iter::once("flowguard-server").chain(v.iter().copied()));
        for bad in [
            &["--redis-sentinel-master", "m", "--redis-sentinel-nodes", "s:1", "--redis-url", "redis://h"][..],
            &["--redis-sentinel-master", "m", "--redis-sentinel-nodes", "s:1", "--path", "x.db"],
            &["--redis-sentinel-master", "m"],
            &["--redis-sentinel-nodes", "s:1"],
            &["--redis-password", "secret-value"],
        ] {
            let e = parse(bad).err().expect("refused").to_string();
            assert!(e.contains("--redis-"), "{e}");
            assert!(!e.contains("secret-value"), "{e}");
        }
    }

    #[test]
    fn cluster_nodes_give_the_seed_urls_and_conflict_with_the_other_stores() {
        let a = args(&["--redis-cluster-nodes", "n1:7000,n2:7001", "--redis-password", "pw"]);
        let o = a.open_options().unwrap();
        assert_eq!(o.cluster.unwrap(), ["redis://:pw@n1:7000", "redis://:pw@n2:7001"]);
        assert_eq!((o.url, o.sentinel), (None, None));
        assert_eq!(args(&[]).open_options().unwrap().cluster, None);
        let e = args(&["--redis-cluster-nodes", "n1:7000,secret-value"]).open_options().unwrap_err();
        assert_eq!(e.code, flowguard_core::ErrorCode::InvalidArgument);
        assert!(e.to_string().contains("--redis-cluster-nodes[1] must be host:port"), "{e}");
        let parse =
            |v: &[&str]| Args::try_parse_from(std::iter::once("flowguard-server").chain(v.iter().copied()));
        for bad in [
            &["--redis-cluster-nodes", "n:1", "--redis-url", "redis://h"][..],
            &["--redis-cluster-nodes", "n:1", "--path", "x.db"],
            &[
                "--redis-cluster-nodes",
                "n:1",
                "--redis-sentinel-master",
                "m",
                "--redis-sentinel-nodes",
                "s:1",
            ],
            &["--redis-cluster-nodes", "n:1", "--redis-db", "1"],
            &["--redis-username", "u"],
        ] {
            let e = parse(bad).err().expect("refused").to_string();
            assert!(e.contains("--redis-"), "{e}");
            assert!(!e.contains("secret-value"), "{e}");
        }
    }

    #[test]
    fn postgres_flags_give_the_postgres_options_and_conflict_with_the_other_stores() {
        let a = args(&[
            "--postgres-url",
            "postgres://u:secret-value@h/db",
            "--postgres-schema",
            "fg",
            "--postgres-pool-size",
            "3",
        ]);
        let o = a.open_options().unwrap();
        let pg = o.postgres.unwrap();
        assert_eq!(
            (pg.url.as_str(), pg.schema.as_deref(), pg.pool_size),
            ("postgres://u:secret-value@h/db", Some("fg"), Some(3))
        );
        assert_eq!((o.url, o.cluster, o.sentinel, o.path), (None, None, None, None));
        assert_eq!(args(&[]).open_options().unwrap().postgres, None);
        let e = args(&["--postgres-url", "postgres://u:secret-value@h/db", "--postgres-pool-size", "0"])
            .open_options()
            .unwrap_err();
        assert_eq!(e.code, flowguard_core::ErrorCode::InvalidArgument);
        assert!(e.to_string().contains("--postgres-pool-size must be"), "{e}");
        assert!(!e.to_string().contains("secret-value"), "{e}");
        let parse =
            |v: &[&str]| Args::try_parse_from(std::iter::once("flowguard-server").chain(v.iter().copied()));
        let url = "postgres://u:secret-value@h/db";
        for bad in [
            &["--postgres-url", url, "--redis-url", "redis://h"][..],
            &["--postgres-url", url, "--path", "x.db"],
            &["--postgres-url", url, "--redis-cluster-nodes", "n:1"],
            &["--postgres-url", url, "--redis-sentinel-master", "m", "--redis-sentinel-nodes", "s:1"],
            &["--postgres-schema", "fg"],
            &["--postgres-pool-size", "2"],
        ] {
            let e = parse(bad).err().expect("refused").to_string();
            assert!(e.contains("--postgres-"), "{e}");
            assert!(!e.contains("secret-value"), "{e}");
        }
    }

    #[test]
    fn transport_limits_have_defaults_and_refuse_zero() {
        let t = args(&[]).transport().unwrap();
        assert_eq!((t.header_timeout.as_millis(), t.drain_timeout.as_millis()), (10_000, 5_000));
        assert_eq!((t.idle_timeout.as_millis(), t.max_connections), (60_000, 1024));
        assert_eq!(args(&[]).limits().unwrap().body_timeout.as_millis(), 30_000);
        let t = args(&["--header-timeout-ms", "250", "--max-connections", "3", "--drain-timeout-ms", "0"])
            .transport()
            .unwrap();
        assert_eq!(
            (t.header_timeout.as_millis(), t.max_connections, t.drain_timeout.as_millis()),
            (250, 3, 0)
        );
        for zero in ["--header-timeout-ms", "--idle-timeout-ms", "--max-connections"] {
            assert!(args(&[zero, "0"]).transport().unwrap_err().contains(zero));
        }
        assert!(args(&["--body-timeout-ms", "0"]).limits().unwrap_err().contains("--body-timeout-ms"));
    }

    #[test]
    fn wait_stays_below_the_request_timeout() {
        assert!(args(&["--max-wait-ms", "60000", "--request-timeout-ms", "60000"]).limits().is_err());
        assert_eq!(args(&[]).limits().unwrap().max_wait_ms, 30_000);
    }
}
