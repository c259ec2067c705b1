//! Semaphore on the durable store: a row per holder, and a row per name keeping its last fencing
//! token across restarts, until it has been unused for `FENCE_KEEP_MS` (see `fences`).

use rusqlite::{params, Connection, OptionalExtension};

use super::fences::Fences;
use super::{checked_scan, purge, Durable, Sql};
use crate::backend::BoxFuture;
use crate::lock::{ExtendResult, ReleaseResult};
use crate::rules::{lock, semaphore};
use crate::semaphore::{Holder, PerKey, PermitAttempt, SemaphoreBackend, SemaphoreInfo};

fn last_fence(c: &Connection, ns: &str, name: &str) -> Sql<u64> {
    Ok(c.prepare_cached("SELECT fence FROM sem_fences WHERE ns = ?1 AND name = ?2")?
        .query_row(params![ns, name], |r| r.get::<_, i64>(0))
        .optional()?
        .unwrap_or(0) as u64)
}

/// Drops the holders of `name` whose lease ended (and a slice of other expired holders).
fn sweep(c: &Connection, ns: &str, name: &str, now: i64) -> Sql<()> {
    c.prepare_cached("DELETE FROM sem_holders WHERE ns = ?1 AND name = ?2 AND exp <= ?3")?
        .execute(params![ns, name, now])?;
    purge(c, "sem_holders", now)?;
    Ok(())
}

/// A live holder: its fence, label, key and lease end.
type Row = (u64, Option<String>, Option<String>, i64);

/// The live holders of `name`: (fence, label, key, exp), by expiry.
///
/// Read with only the name's start in the SQL, its end and the rows' order checked in Rust: a
/// count or a read over the name's rows in SQL stops short, without an error, at a damaged record
/// (see `checked_scan`), which would let an acquire past the permits.
fn holders(c: &Connection, ns: &str, name: &str, now: i64) -> Sql<Vec<Row>> {
    let mut st = c.prepare_cached(
        "SELECT ns, name, owner, fence, label, exp, k FROM sem_holders INDEXED BY sqlite_autoindex_sem_holders_1
         WHERE (ns, name) >= (?1, ?2) ORDER BY ns, name, owner",
    )?;
    let mut out = Vec::new();
    checked_scan::scan(
        st.query(params![ns, name])?,
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)),
        |k| (k.0.as_str(), k.1.as_str()) == (ns, name),
        || format!("the holders of semaphore {name:?}"),
        |_, r| {
            let exp: i64 = r.get(5)?;
            if lock::holds(exp, now) {
                out.push((r.get::<_, i64>(3)? as u64, r.get(4)?, r.get(6)?, exp));
            }
            Ok(true)
        },
    )?;
    out.sort_by_key(|h| (h.3, h.0));
    Ok(out)
}

/// What an acquire asks for.
struct Ask<'a> {
    owner: &'a str,
    permits: u64,
    per_key: Option<PerKey<'a>>,
    lease_ms: u64,
    label: Option<&'a str>,
}

fn try_acquire(c: &Connection, ns: &str, name: &str, ask: Ask<'_>, now: i64) -> Sql<PermitAttempt> {
    sweep(c, ns, name, now)?;
    let held = holders(c, ns, name, now)?;
    let last = last_fence(c, ns, name)?;
    let Ask { owner, permits, per_key, lease_ms, label } = ask;
    let key = per_key.map(|k| k.key);
    let same = |h: &Row| key.is_some() && h.2.as_deref() == key;
    let d = semaphore::acquire(
        held.iter().map(|h| (h.3, same(h))),
        last,
        lock::NO_FLOOR,
        PerKey::limits(per_key, permits),
        lease_ms,
        now,
    );
    let Some((fence, exp)) = d.take else { return Ok(d.attempt) };
    c.prepare_cached(
        "INSERT INTO sem_fences (ns, name, fence, keep) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (ns, name) DO UPDATE SET fence = excluded.fence, keep = max(keep, excluded.keep)",
    )?
    .execute(params![ns, name, fence as i64, lock::fence_kept_until(now, lease_ms)])?;
    let label = lock::label(label);
    match key {
        None => c.prepare_cached(
            "INSERT INTO sem_holders (ns, name, owner, fence, label, exp) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![ns, name, owner, fence as i64, label, exp])?,
        Some(key) => c.prepare_cached(
            "INSERT INTO sem_holders (ns, name, owner, fence, label, exp, k) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(params![ns, name, owner, fence as i64, label, exp, key])?,
    };
    Ok(d.attempt)
}

fn release_fence(c: &Connection, ns: &str, name: &str, fence: u64, now: i64) -> Sql<ReleaseResult> {
    sweep(c, ns, name, now)?;
    let held = holders(c, ns, name, now)?;
    let r = semaphore::release_fence(held.iter().map(|h| (h.0, h.3)), fence, now);
    if r.released {
        c.prepare_cached("DELETE FROM sem_holders WHERE ns = ?1 AND name = ?2 AND fence = ?3")?
            .execute(params![ns, name, fence as i64])?;
    }
    Ok(r)
}

fn release(c: &Connection, ns: &str, name: &str, owner: &str, now: i64) -> Sql<ReleaseResult> {
    sweep(c, ns, name, now)?;
    // After the sweep, the owner's row is its live permit: one statement removes it when held.
    let n = c
        .prepare_cached("DELETE FROM sem_holders WHERE ns = ?1 AND name = ?2 AND owner = ?3")?
        .execute(params![ns, name, owner])?;
    Ok(semaphore::release(n > 0))
}

fn extend(c: &Connection, ns: &str, name: &str, owner: &str, lease_ms: u64, now: i64) -> Sql<ExtendResult> {
    sweep(c, ns, name, now)?;
    let n = c
        .prepare_cached("UPDATE sem_holders SET exp = ?4 WHERE ns = ?1 AND name = ?2 AND owner = ?3")?
        .execute(params![ns, name, owner, now + lease_ms as i64])?;
    Ok(semaphore::extend(n > 0, lease_ms))
}

fn inspect(c: &Connection, ns: &str, name: &str, now: i64) -> Sql<SemaphoreInfo> {
    let holders = holders(c, ns, name, now)?
        .into_iter()
        .map(|(fence, label, key, exp)| Holder { fence, label, key, remaining_ms: (exp - now).max(0) as u64 })
        .collect();
    Ok(SemaphoreInfo { name: name.to_string(), holders, fence: last_fence(c, ns, name)? })
}

impl SemaphoreBackend for Durable {
    fn try_acquire_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        permits: u64,
        per_key: Option<PerKey<'a>>,
        lease_ms: u64,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, PermitAttempt> {
        self.write_tx(move |c, ns, now| {
            let a = try_acquire(c, ns, name, Ask { owner, permits, per_key, lease_ms, label }, now)?;
            self.sweep_fences(c, Fences::Semaphores, now)?;
            Ok(a)
        })
    }
    fn release_permit<'a>(&'a self, name: &'a str, owner: &'a str) -> BoxFuture<'a, ReleaseResult> {
        self.write_tx(move |c, ns, now| release(c, ns, name, owner, now))
    }
    fn release_permit_fence<'a>(&'a self, name: &'a str, fence: u64) -> BoxFuture<'a, ReleaseResult> {
        self.write_tx(move |c, ns, now| release_fence(c, ns, name, fence, now))
    }
    fn extend_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        lease_ms: u64,
    ) -> BoxFuture<'a, ExtendResult> {
        self.write_tx(move |c, ns, now| extend(c, ns, name, owner, lease_ms, now))
    }
    fn inspect_semaphore<'a>(&'a self, name: &'a str) -> BoxFuture<'a, SemaphoreInfo> {
        self.read_tx(move |c, ns, now| inspect(c, ns, name, now))
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::durable::damage;
    use crate::backend::durable::{Durability, Durable};
    use crate::semaphore::SemaphoreBackend;

    const HOLDERS: usize = 3_000;

    /// A file made before the key column (its holders' table without `k`) gets it when opened:
    /// its holders count toward the total, and a permit with a key is taken and read back.
    #[tokio::test]
    async fn a_file_without_the_key_column_gets_it_on_open() {
        use crate::semaphore::PerKey;
        let path = damage::temp("old-sem.db");
        drop(Durable::open(&path, "fg:", Durability::Process).unwrap());
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("ALTER TABLE sem_holders DROP COLUMN k").unwrap();
        c.execute(
            "INSERT INTO sem_holders (ns, name, owner, fence, label, exp) VALUES ('fg:', 's', 'old', 1, NULL, 4000000000000)",
            [],
        )
        .unwrap();
        c.execute("INSERT INTO sem_fences VALUES ('fg:', 's', 1, 4000000000000)", []).unwrap();
        drop(c);
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        let k = Some(PerKey { key: "a", limit: 1 });
        let got = d.try_acquire_permit("s", "new", 2, k, 60_000, None).await.unwrap();
        assert_eq!((got.acquired, got.holders, got.key_holders, got.fence), (true, 2, 1, 2));
        let info = d.inspect_semaphore("s").await.unwrap();
        assert_eq!(info.key_counts(), vec![("a".to_string(), 1)]);
        assert!(!d.try_acquire_permit("s", "third", 3, k, 60_000, None).await.unwrap().acquired);
    }

    /// Damaged pages in the middle of a file of a semaphore with 3,000 holders: inspecting it
    /// either lists all 3,000 or fails with ERR_STORAGE, and an acquire with 3,000 permits is
    /// either refused (all taken) or fails: a short count never lets one more in.
    #[tokio::test]
    async fn a_damaged_page_fails_a_semaphore_instead_of_shortening_its_holders() {
        let path = damage::temp("sem.db");
        drop(Durable::open(&path, "fg:", Durability::Process).unwrap());
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("BEGIN").unwrap();
        for i in 0..HOLDERS {
            c.execute(
                "INSERT INTO sem_holders (ns, name, owner, fence, label, exp) VALUES ('fg:', 's', ?1, ?2, NULL, 4000000000000)",
                rusqlite::params![format!("owner-{i:05}"), i as i64 + 1],
            )
            .unwrap();
        }
        c.execute("INSERT INTO sem_fences VALUES ('fg:', 's', ?1, 4000000000000)", [HOLDERS as i64]).unwrap();
        c.execute_batch("COMMIT").unwrap();
        drop(c);
        let failed = damage::failures(&path, damage::middle, async |at, d| {
            let info = d.inspect_semaphore("s").await?;
            assert_eq!(info.holders.len(), HOLDERS, "damage at byte {at}: short holders, no error");
            let got = d.try_acquire_permit("s", "one-more", HOLDERS as u64, None, 60_000, None).await?;
            assert!(!got.acquired, "damage at byte {at}: a permit past the limit");
            Ok(())
        })
        .await;
        assert!(failed > 0, "some damage was found (else this test tells nothing)");
    }
}
