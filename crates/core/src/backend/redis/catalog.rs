//! Catalog on Redis: one `SCAN cursor MATCH … COUNT 1000` per step (Redis looks at about a
//! thousand keys of its keyspace, whatever its size), the names read back from the keys. A step
//! that finds more names than asked for returns the first ones in name order and a cursor that
//! runs the same SCAN step again past the last name returned. Queues also get their shard count,
//! one `HGET` per queue listed, pipelined. Limiter keys exist while in use (they expire when full
//! again); a semaphore is listed by its holders' key, which may still hold ended leases until a
//! step meets them (the caller reads each one).

use super::{map_error, Link, RedisStore};
use crate::backend::BoxFuture;
use crate::catalog::{CatalogBackend, Entry, Kind, Page};
use crate::error::{Error, ErrorCode, Result};
use crate::keys::{glob_escape, unescape};

/// The `COUNT` of one SCAN step: about how many keys Redis looks at.
const SCAN_COUNT: u64 = 1000;

/// The SCAN pattern of a kind, and how its keys end after the escaped name.
fn pattern(prefix: &str, kind: Kind) -> (String, &'static str, &'static str) {
    let (head, tail) = match kind {
        Kind::Groups => ("{t:", "}:r"),
        Kind::Locks => ("{l:", "}"),
        Kind::Queues => ("{q:", "}:m"),
        Kind::Limiters => ("{rl:", "}"),
        Kind::Semaphores => ("{sem:", "}:h"),
    };
    (format!("{}{head}*{tail}", glob_escape(prefix)), head, tail)
}

/// The name of a key of the kind, or None for a key that only looks like one (a queue shard's key
/// holds `:<shard>` inside the tag; escaped names hold no `:` nor `}`).
fn name_of(key: &str, prefix: &str, head: &str, tail: &str) -> Option<String> {
    let esc = key.strip_prefix(prefix)?.strip_prefix(head)?.strip_suffix(tail)?;
    if esc.contains([':', '}', '{']) {
        return None;
    }
    unescape(esc)
}

impl RedisStore {
    /// Sends a command or pipeline to the one server. A cluster spreads names over its primaries,
    /// which one SCAN cannot walk: listing is refused there with a coded error.
    async fn query<T: redis::FromRedisValue>(&self, q: Query<'_>) -> Result<T> {
        let shared = self.shared()?;
        let conn =
            match &shared.link {
                Link::Single(conn) => conn,
                Link::Sentinel(s) => {
                    let outcome = s
                        .run(|mut c| async move {
                            match q {
                                Query::Cmd(cmd) => cmd.query_async::<T>(&mut c).await,
                                Query::Pipe(pipe) => pipe.query_async::<T>(&mut c).await,
                            }
                        })
                        .await;
                    return outcome.map_err(|e| map_error(&shared.target, e));
                }
                Link::Cluster(_) => return Err(Error::new(
                    ErrorCode::Unsupported,
                    "listing names is not supported on a Redis Cluster (it needs a SCAN of every primary)",
                )),
            };
        let (generation, mut c) = conn.checkout();
        let outcome = match q {
            Query::Cmd(cmd) => cmd.query_async::<T>(&mut c).await,
            Query::Pipe(pipe) => pipe.query_async::<T>(&mut c).await,
        };
        conn.record(generation, &outcome);
        outcome.map_err(|e| map_error(&shared.target, e))
    }

    async fn queue_shards(&self, names: &[String]) -> Result<Vec<Option<u32>>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for n in names {
            pipe.cmd("HGET").arg(self.keys().queue_meta(n)).arg("n");
        }
        let replies: Vec<Option<String>> = self.query(Query::Pipe(&pipe)).await?;
        Ok(replies.into_iter().map(|v| v.and_then(|s| s.parse().ok())).collect())
    }
}

#[derive(Clone, Copy)]
enum Query<'a> {
    Cmd(&'a redis::Cmd),
    Pipe(&'a redis::Pipeline),
}

impl CatalogBackend for RedisStore {
    fn list_names<'a>(&'a self, kind: Kind, cursor: Option<&'a str>, limit: u64) -> BoxFuture<'a, Page> {
        Box::pin(async move {
            // `<scan cursor>` or `<scan cursor>:<last name returned from that step>`.
            let (start, after) = match cursor {
                None => (0, None),
                Some(c) => {
                    let (scan, after) = match c.split_once(':') {
                        Some((scan, after)) => (scan, Some(after)),
                        None => (c, None),
                    };
                    let scan: u64 = scan.parse().map_err(|_| {
                        Error::invalid_at(
                            "cursor",
                            "is not a cursor of this Redis listing (pass the one a page returned)",
                        )
                    })?;
                    (scan, after)
                }
            };
            let prefix = self.keys().prefix();
            let (pat, head, tail) = pattern(prefix, kind);
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(start).arg("MATCH").arg(&pat).arg("COUNT").arg(SCAN_COUNT);
            let (next, keys): (u64, Vec<String>) = self.query(Query::Cmd(&cmd)).await?;
            let mut names: Vec<String> = keys
                .iter()
                .filter_map(|k| name_of(k, prefix, head, tail))
                .filter(|n| after.is_none_or(|a| n.as_str() > a))
                .collect();
            names.sort();
            names.dedup();
            let cursor = if names.len() as u64 > limit {
                names.truncate(limit as usize);
                Some(format!("{start}:{}", names.last().expect("limit is at least 1")))
            } else {
                (next != 0).then(|| next.to_string())
            };
            let shards = match kind {
                Kind::Queues => self.queue_shards(&names).await?,
                _ => vec![None; names.len()],
            };
            let entries =
                names.into_iter().zip(shards).map(|(name, shards)| Entry { name, shards }).collect();
            Ok(Page { entries, cursor })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;

    #[test]
    fn names_come_back_from_keys() {
        let k = Keys::new("fg*:").unwrap();
        let (pat, head, tail) = pattern(k.prefix(), Kind::Queues);
        assert_eq!(pat, "fg\\*:{q:*}:m");
        assert_eq!(name_of(&k.queue_meta("a:b}"), k.prefix(), head, tail).as_deref(), Some("a:b}"));
        assert_eq!(name_of(&k.queue_shard("a", 3), k.prefix(), head, tail), None);
        let (_, head, tail) = pattern(k.prefix(), Kind::Locks);
        assert_eq!(name_of(&k.lock("x{y"), k.prefix(), head, tail).as_deref(), Some("x{y"));
        assert_eq!(name_of(&k.lock_fence("x"), k.prefix(), head, tail), None);
        let (_, head, tail) = pattern(k.prefix(), Kind::Groups);
        let g = k.tracker_group("g 1");
        assert_eq!(name_of(&k.item_records(&g), k.prefix(), head, tail).as_deref(), Some("g 1"));
        assert_eq!(name_of(&k.item_index(&g, "failed"), k.prefix(), head, tail), None);
        let (_, head, tail) = pattern(k.prefix(), Kind::Limiters);
        assert_eq!(name_of(&k.limiter("api:1"), k.prefix(), head, tail).as_deref(), Some("api:1"));
        let (_, head, tail) = pattern(k.prefix(), Kind::Semaphores);
        assert_eq!(name_of(&k.semaphore("s}1", "h"), k.prefix(), head, tail).as_deref(), Some("s}1"));
        assert_eq!(name_of(&k.semaphore("s", "fence"), k.prefix(), head, tail), None);
    }
}
