//! What the Sentinel and Cluster flags share: a password given inline or in a file, and the
//! `host:port` entries of a node list turned into `redis://` URLs. Nothing here prints a password.

use std::path::Path;

use flowguard_core::error::FieldPath;
use flowguard_core::{Error, Result};

/// A password given inline (flag or environment) or in a file named by `file_flag`.
pub struct Secret<'a> {
    pub inline: Option<&'a str>,
    pub file: Option<&'a Path>,
    pub file_flag: &'static str,
}

impl Secret<'_> {
    /// The password; from a file, without its trailing line break (a Docker secret's file).
    pub(crate) fn read(&self) -> Result<Option<String>> {
        match (self.inline, self.file) {
            (Some(p), _) => Ok(Some(p.to_string())),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    Error::invalid_at(
                        FieldPath::new(self.file_flag),
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?;
                Ok(Some(text.trim_end_matches(['\r', '\n']).to_string()))
            }
            (None, None) => Ok(None),
        }
    }
}

/// Whether `entry` is `host:port` (an IPv6 host in brackets, a port above 0).
pub(crate) fn is_host_port(entry: &str) -> bool {
    let Some((host, port)) = entry.rsplit_once(':') else { return false };
    if port.parse::<u16>().ok().filter(|p| *p > 0).is_none() {
        return false;
    }
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    !(bare.is_empty() || bare.contains(['/', '@', '[', ']', ' ']) || (host == bare && bare.contains(':')))
}

/// `user:password@` (percent-encoded), or nothing without either.
pub(crate) fn userinfo(user: Option<&str>, password: Option<&str>) -> String {
    let enc =
        |s: &str| percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string();
    match (user, password) {
        (None, None) => String::new(),
        (u, p) => {
            format!("{}{}@", enc(u.unwrap_or("")), p.map(|p| format!(":{}", enc(p))).unwrap_or_default())
        }
    }
}

/// `redis://[user:password@]host:port` of a `host:port` entry; None when it is not one.
pub(crate) fn host_port_url(entry: &str, user: Option<&str>, password: Option<&str>) -> Option<String> {
    is_host_port(entry).then(|| format!("redis://{}{entry}", userinfo(user, password)))
}

/// An entry as it may be echoed: one that could hold a password (`user:password@…`) is not.
pub(crate) fn printable(entry: &str) -> &str {
    if entry.contains('@') {
        "(not shown: it holds credentials)"
    } else {
        entry
    }
}
