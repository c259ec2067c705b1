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

/// The next distinct names after `cursor` by repeated seeks of `sql` (which takes ns and the
/// name to start after, and yields the namespace, a name and a shard count or NULL of the next
/// row, in any namespace: the namespace's end is checked here, not in the SQL, see [`ours`]).
fn distinct(c: &Connection, sql: &str, ns: &str, cursor: Option<&str>, limit: u64) -> Sql<Page> {
    let mut stmt = c.prepare_cached(sql)?;
    let mut next = |after: &str| -> Sql<Option<Entry>> {
        let row = stmt
            .query_row(params![ns, after], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<i64>>(2)?))
            })
            .optional()?;
        Ok(row
            .filter(|(n, _, _)| n == ns)
            .map(|(_, name, shards)| Entry { name, shards: shards.map(|s| s as u32) }))
    };
    let mut entries: Vec<Entry> = Vec::new();
    let mut after = cursor.unwrap_or("").to_string();
    while (entries.len() as u64) < limit {
        match next(&after)? {
            Some(e) => {
                after.clone_from(&e.name);
                entries.push(e);
            }
            None => return Ok(Page { entries, cursor: None }),
        }
    }
    // A full page: there is more when a name follows its last one.
    let more = next(&after)?.is_some();
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
/// after, now and a row budget, and yields the namespace, a name and whether it is in use, in
/// the order of namespace and name), skipping the rest.
///
/// The namespace's end is checked here, not in the SQL, and so is the rows' order: SQLite ends a
/// range scan silently (fewer rows, no error) when the record it compares with the range's end is
/// damaged, while reading that record fails (see `tracker::list`).
fn in_use(c: &Connection, sql: &str, ns: &str, cursor: Option<&str>, limit: u64, now: i64) -> Sql<Page> {
    let budget = limit.saturating_mul(ROWS_PER_NAME);
    let mut stmt = c.prepare_cached(sql)?;
    let rows = stmt.query_map(params![ns, cursor.unwrap_or(""), now, budget as i64], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, bool>(2)?))
    })?;
    let (mut entries, mut seen, mut last) = (Vec::new(), 0u64, None::<String>);
    let out_of_order = || Fail::Corrupt(format!("names out of order in namespace {ns:?}"));
    let mut rows = rows;
    while let Some(row) = rows.next() {
        let (row_ns, name, held) = row?;
        if row_ns.as_str() < ns || (row_ns == ns && last.as_ref().is_some_and(|l| &name <= l)) {
            return Err(out_of_order());
        }
        if row_ns != ns {
            // Past the namespace, unless the row after it is back before it.
            return match rows.next().transpose()? {
                Some((next_ns, next, _)) if (&next_ns, &next) <= (&row_ns, &name) => Err(out_of_order()),
                _ => Ok(Page { entries, cursor: None }),
            };
        }
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
                "SELECT ns, queue, shards FROM q_shards WHERE (ns, queue) > (?1, ?2) ORDER BY ns, queue LIMIT 1",
                ns,
                cursor,
                limit,
            ),
            Kind::Locks => in_use(
                c,
                "SELECT ns, name, owner IS NOT NULL AND exp > ?3 FROM locks WHERE (ns, name) > (?1, ?2)
                 ORDER BY ns, name LIMIT ?4",
                ns,
                cursor,
                limit,
                now,
            ),
            // `exp` is in ms; the TAT runs to it.
            Kind::Limiters => in_use(
                c,
                "SELECT ns, name, exp > ?3 FROM limiters WHERE (ns, name) > (?1, ?2) ORDER BY ns, name LIMIT ?4",
                ns,
                cursor,
                limit,
                now,
            ),
            // One row per name: a name's holders (at most its permits) are grouped by the unique
            // (ns, name, owner) index.
            Kind::Semaphores => in_use(
                c,
                "SELECT ns, name, max(exp) > ?3 FROM sem_holders WHERE (ns, name) > (?1, ?2)
                 GROUP BY ns, name ORDER BY ns, name LIMIT ?4",
                ns,
                cursor,
                limit,
                now,
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::durable::damage;
    use crate::backend::durable::{Durability, Durable};
    use crate::catalog::{CatalogBackend, Kind};

    const LOCKS: usize = 3_000;

    /// Damaged pages in the middle of a file of 3,000 held locks: paging through their names
    /// either lists all 3,000 or fails with ERR_STORAGE, never stops short.
    #[tokio::test]
    async fn a_damaged_page_fails_the_catalog_instead_of_shortening_it() {
        let path = damage::temp("locks.db");
        drop(Durable::open(&path, "fg:", Durability::Process).unwrap());
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("BEGIN").unwrap();
        for i in 0..LOCKS {
            c.execute(
                "INSERT INTO locks VALUES ('fg:', ?1, 'o', 1, NULL, 4000000000000)",
                [format!("lock-{i:05}")],
            )
            .unwrap();
        }
        c.execute_batch("COMMIT").unwrap();
        drop(c);
        let failed = damage::failures(&path, damage::middle, async |at, d| {
            let (mut names, mut cursor) = (0, None::<String>);
            loop {
                let page = d.list_names(Kind::Locks, cursor.as_deref(), 500).await?;
                names += page.entries.len();
                match page.cursor {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            assert_eq!(names, LOCKS, "damage at byte {at}: a short catalog, no error");
            Ok(())
        })
        .await;
        assert!(failed > 0, "some damage was found (else this test tells nothing)");
    }
}
