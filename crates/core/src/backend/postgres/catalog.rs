//! Catalog on PostgreSQL: names in name order (bytes), each page one statement over the tables'
//! primary keys (which begin with the namespace and the name), so a page's cost is bounded by its
//! size, however many items or holders the names have.

use super::{read, text, Ctx, Fail, Postgres, Sql};
use crate::backend::BoxFuture;
use crate::catalog::{CatalogBackend, Entry, Kind, Page};

/// How many rows a page looks at per name asked for: a lock name keeps its row after release,
/// limiter and semaphore rows stay until purged, and a queue's count row may outlive its ids, so
/// rows of names not in use are skipped, a bounded number per page.
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
/// The queues after `$2` (at most `$3` rows) with whether each holds ids (a queue's count row
/// may outlive its ids, see the module `queue`) and their shard count.
pub(super) const QUEUES: &str =
    "SELECT queue, EXISTS (SELECT 1 FROM {s}.q_ids i WHERE i.ns = q.ns AND i.queue = q.queue)
        OR EXISTS (SELECT 1 FROM {s}.q_dead d WHERE d.ns = q.ns AND d.queue = q.queue),
      shards
    FROM {s}.q_queues q WHERE ns = $1 AND queue > $2 ORDER BY queue LIMIT $3";
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
/// looked at its whole row budget says where the rest starts. `sql` takes the namespace, the
/// cursor, (with `at_now`) the time now, and the budget.
async fn in_use(c: &Ctx<'_, '_>, sql: &str, at_now: bool, cursor: Option<&str>, limit: u64) -> Sql<Page> {
    let budget = (limit as i64).saturating_mul(ROWS_PER_NAME);
    let after = cursor.unwrap_or("").as_bytes();
    let rows = if at_now {
        let now = c.now().await?;
        c.query(sql, &[&c.ns(), &after, &now, &budget]).await?
    } else {
        c.query(sql, &[&c.ns(), &after, &budget]).await?
    };
    let (mut entries, mut last) = (Vec::new(), None);
    for r in &rows {
        let n = name(r)?;
        if r.try_get::<_, Option<bool>>(1)?.unwrap_or(false) {
            // A queue's listing has its shard count as a third column.
            let shards = if r.len() > 2 { Some(r.try_get::<_, i32>(2)? as u32) } else { None };
            entries.push(Entry { name: n.clone(), shards });
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
        // The listing's statement, and whether it takes the time now.
        let sql = match kind {
            Kind::Groups => None,
            Kind::Locks => Some((LOCKS, true)),
            Kind::Limiters => Some((LIMITERS, true)),
            Kind::Semaphores => Some((SEMAPHORES, true)),
            Kind::Queues => Some((QUEUES, false)),
        };
        Box::pin(async move {
            read!(self, |c| async {
                match sql {
                    None => groups(&c, cursor, limit).await,
                    Some((sql, at_now)) => in_use(&c, sql, at_now, cursor, limit).await,
                }
            })
        })
    }
}
