//! Catalog on the durable store: names in name order, each found by one index seek (the tables'
//! keys begin with the namespace and the name), so a page costs its size in seeks however many
//! items or ids the names hold.

use rusqlite::{params, Connection, OptionalExtension};

use super::{item_key, Durable, Fail, Sql};
use crate::backend::BoxFuture;
use crate::catalog::{CatalogBackend, Entry, Kind, Page};

/// How many rows a step looks at per name asked for: a lock name keeps its row (and fence) after
/// release, and limiter and semaphore rows stay until purged, so rows of names not in use are
/// skipped, a bounded number per step.
const ROWS_PER_NAME: u64 = 8;

/// The next distinct names after `cursor` by repeated seeks of `sql` (which takes ns, the name
/// to start after, and yields a name and a shard count or NULL).
fn distinct(c: &Connection, sql: &str, ns: &str, cursor: Option<&str>, limit: u64) -> Sql<Page> {
    let mut stmt = c.prepare_cached(sql)?;
    let mut entries: Vec<Entry> = Vec::new();
    let mut after = cursor.unwrap_or("").to_string();
    while (entries.len() as u64) < limit {
        let next = stmt
            .query_row(params![ns, after], |r| {
                Ok(Entry { name: r.get(0)?, shards: r.get::<_, Option<i64>>(1)?.map(|s| s as u32) })
            })
            .optional()?;
        match next {
            Some(e) => {
                after.clone_from(&e.name);
                entries.push(e);
            }
            None => return Ok(Page { entries, cursor: None }),
        }
    }
    // A full page: there is more when a name follows its last one.
    let more = stmt.query_row(params![ns, after], |_| Ok(())).optional()?.is_some();
    Ok(Page { entries, cursor: more.then_some(after) })
}

/// The next groups after `cursor`, by one seek each: past every key of the last group found (see
/// `item_key`), the next key is the first of the next group.
fn groups(c: &Connection, ns: &str, cursor: Option<&str>, limit: u64) -> Sql<Page> {
    // The namespace's end is checked here, not in the SQL: a range scan that meets a damaged
    // record at its end stops without an error (see `tracker::list`); reading it fails.
    let mut stmt = c.prepare_cached("SELECT k FROM items WHERE k > ?1 ORDER BY k LIMIT 1")?;
    let end = item_key::after_all(&item_key::namespace(ns));
    let mut next = |after: Option<&str>| -> Sql<Option<String>> {
        let from = match after {
            Some(g) => item_key::after_all(&item_key::group(ns, g)),
            None => item_key::namespace(ns),
        };
        let key: Option<Vec<u8>> = stmt.query_row(params![from], |r| r.get(0)).optional()?;
        match key {
            None => Ok(None),
            Some(k) if k >= end => Ok(None),
            Some(k) => match item_key::split(&k) {
                Some((_, group, _)) => Ok(Some(group)),
                None => Err(Fail::Corrupt(format!("item key {k:?}"))),
            },
        }
    };
    let mut entries: Vec<Entry> = Vec::new();
    let mut after = cursor.map(str::to_string);
    while (entries.len() as u64) < limit {
        match next(after.as_deref())? {
            Some(name) => {
                after = Some(name.clone());
                entries.push(Entry { name, shards: None });
            }
            None => return Ok(Page { entries, cursor: None }),
        }
    }
    // A full page: there is more when a group follows its last one.
    let more = next(after.as_deref())?.is_some();
    Ok(Page { entries, cursor: if more { after } else { None } })
}

/// The names in use after `cursor` by one range read of `sql` (which takes ns, the name to start
/// after, now and a row budget, and yields a name and whether it is in use), skipping the rest.
fn in_use(c: &Connection, sql: &str, ns: &str, cursor: Option<&str>, limit: u64, now: i64) -> Sql<Page> {
    let budget = limit.saturating_mul(ROWS_PER_NAME);
    let mut stmt = c.prepare_cached(sql)?;
    let rows = stmt.query_map(params![ns, cursor.unwrap_or(""), now, budget as i64], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?))
    })?;
    let (mut entries, mut seen, mut last) = (Vec::new(), 0u64, None);
    for row in rows {
        let (name, held) = row?;
        seen += 1;
        if held {
            entries.push(Entry { name: name.clone(), shards: None });
        }
        last = Some(name);
        if entries.len() as u64 >= limit {
            break;
        }
    }
    // Stopped on a full page or at the budget: the rest starts after the last row looked at.
    let cursor = if entries.len() as u64 >= limit || seen >= budget { last } else { None };
    Ok(Page { entries, cursor })
}

impl CatalogBackend for Durable {
    fn list_names<'a>(&'a self, kind: Kind, cursor: Option<&'a str>, limit: u64) -> BoxFuture<'a, Page> {
        self.read_tx(move |c, ns, now| match kind {
            Kind::Groups => groups(c, ns, cursor, limit),
            Kind::Queues => distinct(
                c,
                "SELECT queue, shards FROM q_shards WHERE ns = ?1 AND queue > ?2 ORDER BY queue LIMIT 1",
                ns,
                cursor,
                limit,
            ),
            Kind::Locks => in_use(
                c,
                "SELECT name, owner IS NOT NULL AND exp > ?3 FROM locks WHERE ns = ?1 AND name > ?2
                 ORDER BY name LIMIT ?4",
                ns,
                cursor,
                limit,
                now,
            ),
            // `exp` is in ms; the TAT runs to it.
            Kind::Limiters => in_use(
                c,
                "SELECT name, exp > ?3 FROM limiters WHERE ns = ?1 AND name > ?2 ORDER BY name LIMIT ?4",
                ns,
                cursor,
                limit,
                now,
            ),
            // One row per name: a name's holders (at most its permits) are grouped by the unique
            // (ns, name, owner) index.
            Kind::Semaphores => in_use(
                c,
                "SELECT name, max(exp) > ?3 FROM sem_holders WHERE ns = ?1 AND name > ?2
                 GROUP BY name ORDER BY name LIMIT ?4",
                ns,
                cursor,
                limit,
                now,
            ),
        })
    }
}
