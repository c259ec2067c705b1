//! The `--redis-cluster-nodes` option (and the data nodes' `--redis-username`, `--redis-password`)
//! turned into the core's `cluster` seed URLs, checked with errors that name the flag and the
//! entry at fault. Passwords come from the environment, a flag or a file, and are never printed.

use flowguard_core::client::MAX_CLUSTER_SEEDS;
use flowguard_core::error::FieldPath;
use flowguard_core::{Error, Result};

use crate::node_entry::{is_host_port, printable, userinfo, Secret};

const FLAG: &str = "--redis-cluster-nodes";

/// What the operator gave, before it is checked.
pub struct ClusterFlags<'a> {
    /// Comma-separated `host:port` or `redis[s]://[user:password@]host[:port]` entries: any nodes
    /// of the cluster, primaries or replicas.
    pub nodes: &'a str,
    /// The nodes' ACL user and password (the same on every node, as Redis Cluster expects).
    pub username: Option<&'a str>,
    pub password: Secret<'a>,
}

/// The seed URLs, each with the credentials of the flags; an `ERR_INVALID_ARGUMENT` naming the
/// flag and the entry otherwise (its value only when it holds no credentials).
pub fn seeds(f: &ClusterFlags<'_>) -> Result<Vec<String>> {
    let password = f.password.read()?;
    let entries: Vec<&str> = f.nodes.split(',').map(str::trim).collect();
    if entries.len() > MAX_CLUSTER_SEEDS {
        return Err(Error::invalid_at(
            FLAG,
            format!("must list 1 to {MAX_CLUSTER_SEEDS} nodes, got {}", entries.len()),
        ));
    }
    let mut seeds = Vec::with_capacity(entries.len());
    let mut first_tls = None;
    for (i, entry) in entries.into_iter().enumerate() {
        let at = || FieldPath::new(FLAG).index(i);
        let url = match entry.split_once("://") {
            Some((scheme, rest)) => url_entry(scheme, rest, f.username, password.as_deref())
                .map_err(|why| Error::invalid_at(at(), format!("{why}, got \"{}\"", printable(entry))))?,
            None if is_host_port(entry) => {
                format!("redis://{}{entry}", userinfo(f.username, password.as_deref()))
            }
            None => {
                return Err(Error::invalid_at(
                    at(),
                    format!(
                        "must be host:port (or a redis:// / rediss:// URL), got \"{}\"",
                        printable(entry)
                    ),
                ))
            }
        };
        // One TLS setting reaches every node the cluster names, so the seeds must agree on it.
        let tls = url.starts_with("rediss://");
        if *first_tls.get_or_insert(tls) != tls {
            return Err(Error::invalid_at(
                at(),
                format!(
                    "must use the same scheme as {FLAG}[0]: all redis:// (or host:port) or all rediss://"
                ),
            ));
        }
        seeds.push(url);
    }
    Ok(seeds)
}

/// A `redis[s]://` entry (`scheme` and what follows `://`) checked, the flags' credentials
/// written into it when it holds none; why not otherwise.
fn url_entry(
    scheme: &str,
    rest: &str,
    user: Option<&str>,
    password: Option<&str>,
) -> std::result::Result<String, String> {
    if scheme != "redis" && scheme != "rediss" {
        return Err("must be host:port or a redis:// / rediss:// URL".into());
    }
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let (own, host) = match authority.rsplit_once('@') {
        Some((own, host)) => (Some(own), host),
        None => (None, authority),
    };
    if !is_host_port(host) && !is_host_port(&format!("{host}:6379")) {
        return Err("must name a host and port: redis[s]://[user:password@]host:port".into());
    }
    if tail.starts_with('/') && !matches!(tail.split(['?', '#']).next(), Some("/" | "/0")) {
        return Err("must not name a database: a Redis Cluster has database 0 only".into());
    }
    match own {
        Some(_) if user.is_some() || password.is_some() => Err(
            "holds credentials, and --redis-username / --redis-password give them too: give them in one place"
                .into(),
        ),
        Some(_) => Ok(format!("{scheme}://{rest}")),
        None => Ok(format!("{scheme}://{}{rest}", userinfo(user, password))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowguard_core::ErrorCode;

    fn none() -> Secret<'static> {
        Secret { inline: None, file: None, file_flag: "--redis-password-file" }
    }

    fn flags(nodes: &str) -> ClusterFlags<'_> {
        ClusterFlags { nodes, username: None, password: none() }
    }

    fn refused(f: &ClusterFlags<'_>) -> String {
        let e = seeds(f).expect_err("refused");
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        e.to_string()
    }

    #[test]
    fn entries_become_seed_urls_with_the_data_nodes_credentials() {
        assert_eq!(
            seeds(&flags("n1:7000, 10.0.0.2:7001,[::1]:7002,redis://n4:7003")).unwrap(),
            ["redis://n1:7000", "redis://10.0.0.2:7001", "redis://[::1]:7002", "redis://n4:7003"]
        );
        let f = ClusterFlags {
            username: Some("app"),
            password: Secret { inline: Some("p@ss:w/rd"), ..none() },
            ..flags("n1:7000,redis://n2:7001/0")
        };
        assert_eq!(
            seeds(&f).unwrap(),
            ["redis://app:p%40ss%3Aw%2Frd@n1:7000", "redis://app:p%40ss%3Aw%2Frd@n2:7001/0"]
        );
        let tls = ClusterFlags {
            password: Secret { inline: Some("x"), ..none() },
            ..flags("rediss://n1:7000#insecure,rediss://n2")
        };
        assert_eq!(seeds(&tls).unwrap(), ["rediss://:x@n1:7000#insecure", "rediss://:x@n2"]);
        assert_eq!(seeds(&flags("rediss://:own@n1:7000")).unwrap(), ["rediss://:own@n1:7000"]);
    }

    #[test]
    fn bad_entries_name_the_flag_and_the_entry_and_never_a_password() {
        assert!(refused(&flags("n1:7000,n2")).contains("--redis-cluster-nodes[1] must be host:port"));
        assert!(refused(&flags("n1:0")).contains("--redis-cluster-nodes[0] must be host:port"));
        assert!(refused(&flags("")).contains("--redis-cluster-nodes[0]"));
        assert!(refused(&flags("n1:1,http://n2:1"))
            .contains("--redis-cluster-nodes[1] must be host:port or a redis://"));
        assert!(
            refused(&flags("redis://n1:1/2")).contains("--redis-cluster-nodes[0] must not name a database")
        );
        assert!(refused(&flags("redis://:1")).contains("--redis-cluster-nodes[0] must name a host and port"));
        assert!(refused(&flags("n1:1,rediss://n2:1"))
            .contains("--redis-cluster-nodes[1] must use the same scheme as --redis-cluster-nodes[0]"));
        for bad in ["u:secret@n1:7000", "redis://u:secret@n1:0", "ftp://u:secret@n1:1"] {
            let e = refused(&flags(bad));
            assert!(e.contains("--redis-cluster-nodes[0]") && !e.contains("secret"), "{e}");
        }
        let twice = ClusterFlags {
            password: Secret { inline: Some("flag-secret"), ..none() },
            ..flags("redis://:url-secret@n1:1")
        };
        let e = refused(&twice);
        assert!(e.contains("--redis-cluster-nodes[0] holds credentials"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let many = vec!["n:1"; MAX_CLUSTER_SEEDS + 1].join(",");
        assert!(refused(&flags(&many)).contains("--redis-cluster-nodes must list 1 to"));
        let missing = std::path::Path::new("/nonexistent/flowguard-password");
        let f = ClusterFlags { password: Secret { file: Some(missing), ..none() }, ..flags("n1:1") };
        assert!(refused(&f).starts_with("ERR_INVALID_ARGUMENT: --redis-password-file cannot read"));
    }
}
