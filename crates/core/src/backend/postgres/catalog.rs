//! Catalog on PostgreSQL: names in name order (bytes), each page one statement over the tables'
//! primary keys (which begin with the namespace and the name), so a page's cost is bounded by its
//! size, however many items or holders the names have. Queues are not listed yet (the Dedup
//! Queue is not built on PostgreSQL): that kind answers `ERR_UNSUPPORTED`.

use super::unsupported::{unsupported, QUEUE};
use super::{text, transaction, Ctx, Fail, Postgres, Sql};
use crate::backend::BoxFuture;
use crate::catalog::{CatalogBackend, Entry, Kind, Page};

/// How many rows a page looks at per name asked for: a lock name keeps its row after release,
/// and limiter and semaphore rows stay until purged, so rows of names not in use are skipped, a
/// bounded number per page.
const ROWS_PER_NAME: i64 = 8;

/// The next groups after `$2`, at most `$3`: one index seek per group (a loose index scan: each
/// step seeks the first key past the group before).
pub(super) const GROUPS: &str = "WITH RECURSIVE g(grp) AS (
      (SELECT grp FROM {s}.items WHERE ns = $1 AND grp > $2 ORDER BY grp LIMIT 1)
      UNION ALL
      SELECT (SELECT i.grp FROM {s}.items i WHERE i.ns = $1 AND i.grp > g.grp ORDER BY i.grp LIMIT 1)
      FROM g WHERE g.grp IS NOT NULL)
    SELECT grp FROM g WHERE grp IS NOT NULL LIMIT $3";
/// The names after `$2` (at most `$4` rows) and whether each is in use at `$3` (ms).
pub(super) const LOCKS: &str = "SELECT name, owner IS NOT NULL AND exp > $3 FROM {s}.locks
    WHERE ns = $1 AND name > $2 ORDER BY name LIMIT $4";
pub(super) const LIMITERS: &str =
    "SELECT name, exp > $3 FROM {s}.limiters WHERE ns = $1 AND name > $2 ORDER BY name LIMIT $4";
pub(super) const SEMAPHORES: &str = "SELECT name, max(exp) > $3 FROM {s}.sem_holders
    WHERE ns = $1 AND name > $2 GROUP BY name ORDER BY name LIMIT $4";

/// A name column as text.
fn name(r: &tokio_postgres::Row) -> Sql<String> {
    text(r, 0)?.ok_or_else(|| Fail::Corrupt("a name that is NULL".into()))
}

async fn groups(c: &Ctx<'_, '_>, cursor: Option<&str>, limit: u64) -> Sql<Page> {
    // One more than the page: whether there is more.
    let after = cursor.unwrap_or("").as_bytes();
    let rows = c.query(GROUPS, &[&c.ns(), &after, &(limit as i64 + 1)]).await?;
    let mut entries =
        rows.iter().map(|r| Ok(Entry { name: name(r)?, shards: None })).collect::<Sql<Vec<_>>>()?;
    let more = entries.len() as u64 > limit;
    entries.truncate(limit as usize);
    let cursor = if more { entries.last().map(|e| e.name.clone()) } else { None };
    Ok(Page { entries, cursor })
}

/// The names in use after `cursor` by one range read of `sql`, skipping the rest; a page that
/// looked at its whole row budget says where the rest starts.
async fn in_use(c: &Ctx<'_, '_>, sql: &str, cursor: Option<&str>, limit: u64) -> Sql<Page> {
    let budget = (limit as i64).saturating_mul(ROWS_PER_NAME);
    let now = c.now().await?;
    let after = cursor.unwrap_or("").as_bytes();
    let rows = c.query(sql, &[&c.ns(), &after, &now, &budget]).await?;
    let (mut entries, mut last) = (Vec::new(), None);
    for r in &rows {
        let n = name(r)?;
        if r.try_get::<_, Option<bool>>(1)?.unwrap_or(false) {
            entries.push(Entry { name: n.clone(), shards: None });
        }
        last = Some(n);
        if entries.len() as u64 >= limit {
            break;
        }
    }
    let full = entries.len() as u64 >= limit || rows.len() as i64 >= budget;
    Ok(Page { entries, cursor: if full { last } else { None } })
}

impl CatalogBackend for Postgres {
    fn list_names<'a>(&'a self, kind: Kind, cursor: Option<&'a str>, limit: u64) -> BoxFuture<'a, Page> {
        let sql = match kind {
            Kind::Groups => None,
            Kind::Locks => Some(LOCKS),
            Kind::Limiters => Some(LIMITERS),
            Kind::Semaphores => Some(SEMAPHORES),
            Kind::Queues => return unsupported(QUEUE),
        };
        Box::pin(async move {
            transaction!(self, |c| async {
                match sql {
                    None => groups(&c, cursor, limit).await,
                    Some(sql) => in_use(&c, sql, cursor, limit).await,
                }
            })
        })
    }
}
