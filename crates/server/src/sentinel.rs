//! The `--redis-sentinel-*` options (and the data nodes' `--redis-username`, `--redis-password`,
//! `--redis-db`) turned into the core's [`SentinelOptions`], checked with errors that name the
//! flag at fault. Passwords come from the environment, a flag or a file, and are never printed.

use flowguard_core::backend::redis::SentinelOptions;
use flowguard_core::error::{FieldPath, Segment};
use flowguard_core::{Error, Result};

pub use crate::node_entry::Secret;
use crate::node_entry::{host_port_url, printable};

/// The flag holding each field of the core's `sentinel` options.
fn flag(field: &str) -> &'static str {
    match field {
        "master_name" => "--redis-sentinel-master",
        "nodes" => "--redis-sentinel-nodes",
        "username" => "--redis-username",
        "password" => "--redis-password",
        "db" => "--redis-db",
        "replica_acks" => "--redis-sentinel-replica-acks",
        _ => "--redis-sentinel-master",
    }
}

/// What the operator gave, before it is checked.
pub struct SentinelFlags<'a> {
    pub master: &'a str,
    /// Comma-separated `host:port` or `redis[s]://[user:password@]host:port` entries.
    pub nodes: &'a str,
    /// The sentinels' own ACL user and password, for the `host:port` entries.
    pub sentinel_username: Option<&'a str>,
    pub sentinel_password: Secret<'a>,
    /// The data nodes' ACL user, password and database.
    pub username: Option<&'a str>,
    pub password: Secret<'a>,
    pub db: Option<i64>,
    /// Replicas that must confirm each call before it is answered.
    pub replica_acks: Option<u32>,
}

/// The checked sentinel options; an `ERR_INVALID_ARGUMENT` naming the flag otherwise (its value
/// only when it holds no credentials).
pub fn options(f: &SentinelFlags<'_>) -> Result<SentinelOptions> {
    let sentinel_password = f.sentinel_password.read()?;
    let mut nodes = Vec::new();
    for (i, entry) in f.nodes.split(',').map(str::trim).enumerate() {
        let at = || FieldPath::new(flag("nodes")).index(i);
        if entry.contains("://") {
            if f.sentinel_username.is_some() || sentinel_password.is_some() {
                return Err(Error::invalid_at(
                    at(),
                    "is a URL: give the sentinels' credentials in it, or give host:port entries with \
                     --redis-sentinel-username / --redis-sentinel-password",
                ));
            }
            nodes.push(entry.to_string());
        } else {
            let url =
                host_port_url(entry, f.sentinel_username, sentinel_password.as_deref()).ok_or_else(|| {
                    Error::invalid_at(
                        at(),
                        format!(
                            "must be host:port (or a redis:// / rediss:// URL), got \"{}\"",
                            printable(entry)
                        ),
                    )
                })?;
            nodes.push(url);
        }
    }
    let opts = SentinelOptions {
        master_name: f.master.to_string(),
        nodes,
        username: f.username.map(str::to_string),
        password: f.password.read()?,
        db: f.db,
        replica_acks: f.replica_acks,
    };
    opts.check().map_err(in_flags)?;
    Ok(opts)
}

/// The core's error about its `sentinel` options, its path written in flags.
fn in_flags(mut e: Error) -> Error {
    let Some(path) = &e.field else { return e };
    let mut named = FieldPath::new(flag(""));
    for s in path.segments().iter().skip(1) {
        named = match s {
            Segment::Field(f) => FieldPath::new(flag(f)),
            Segment::Index(i) => named.index(*i),
        };
    }
    e.field = Some(named);
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowguard_core::ErrorCode;
    use std::path::Path;

    fn none() -> Secret<'static> {
        Secret { inline: None, file: None, file_flag: "--redis-password-file" }
    }

    fn flags(nodes: &str) -> SentinelFlags<'_> {
        SentinelFlags {
            master: "main",
            nodes,
            sentinel_username: None,
            sentinel_password: none(),
            username: None,
            password: none(),
            db: None,
            replica_acks: None,
        }
    }

    fn refused(f: &SentinelFlags<'_>) -> String {
        let e = options(f).expect_err("refused");
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        e.to_string()
    }

    #[test]
    fn host_port_entries_become_sentinel_urls_with_the_sentinel_credentials() {
        let o = options(&flags("s1:26379, 10.0.0.2:26380,[::1]:26381")).unwrap();
        assert_eq!(o.nodes, ["redis://s1:26379", "redis://10.0.0.2:26380", "redis://[::1]:26381"]);
        let f = SentinelFlags {
            sentinel_username: Some("sen"),
            sentinel_password: Secret { inline: Some("p@ss:w/rd"), ..none() },
            username: Some("app"),
            password: Secret { inline: Some("data"), ..none() },
            db: Some(2),
            ..flags("s1:26379")
        };
        let o = options(&f).unwrap();
        assert_eq!(o.nodes, ["redis://sen:p%40ss%3Aw%2Frd@s1:26379"]);
        assert_eq!(
            (o.username.as_deref(), o.password.as_deref(), o.db),
            (Some("app"), Some("data"), Some(2))
        );
        let urls = options(&flags("rediss://s1:26379#insecure,rediss://:x@s2:26379#insecure")).unwrap();
        assert_eq!(urls.nodes, ["rediss://s1:26379#insecure", "rediss://:x@s2:26379#insecure"]);
    }

    #[test]
    fn bad_values_name_their_flag_and_never_a_password() {
        assert!(refused(&flags("s1:26379,s2")).contains("--redis-sentinel-nodes[1] must be host:port"));
        assert!(refused(&flags("s1:0")).contains("--redis-sentinel-nodes[0]"));
        assert!(refused(&flags("")).contains("--redis-sentinel-nodes[0]"));
        let e = refused(&flags("u:secret@s1:26379"));
        assert!(e.contains("--redis-sentinel-nodes[0]") && !e.contains("secret"), "{e}");
        assert!(refused(&flags("redis://s1:26379,rediss://s2:26379"))
            .contains("--redis-sentinel-nodes[1] must use the same scheme"));
        let f = SentinelFlags {
            sentinel_password: Secret { inline: Some("x"), ..none() },
            ..flags("redis://s1:1")
        };
        assert!(refused(&f).contains("--redis-sentinel-nodes[0] is a URL"));
        assert!(refused(&SentinelFlags { master: "a b", ..flags("s1:1") })
            .contains("--redis-sentinel-master must be"));
        assert!(refused(&SentinelFlags { db: Some(-1), ..flags("s1:1") })
            .contains("--redis-db must be 0 or more"));
        assert!(refused(&SentinelFlags { replica_acks: Some(65), ..flags("s1:1") })
            .contains("--redis-sentinel-replica-acks must be 0 to 64 replicas, got 65"));
        let missing = Path::new("/nonexistent/flowguard-password");
        let f = SentinelFlags { password: Secret { file: Some(missing), ..none() }, ..flags("s1:1") };
        assert!(
            refused(&f).starts_with("ERR_INVALID_ARGUMENT: --redis-password-file cannot read /nonexistent")
        );
    }

    #[test]
    fn a_password_file_loses_its_trailing_line_break_only() {
        let file = std::env::temp_dir().join(format!("fg-sentinel-pw-{}", std::process::id()));
        std::fs::write(&file, " pass word \n").unwrap();
        let f = SentinelFlags { password: Secret { file: Some(&file), ..none() }, ..flags("s1:1") };
        let o = options(&f);
        std::fs::remove_file(&file).unwrap();
        assert_eq!(o.unwrap().password.as_deref(), Some(" pass word "));
    }
}
