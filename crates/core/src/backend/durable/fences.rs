//! Forgetting the fencing tokens of lock and semaphore names nobody used for
//! [`FENCE_KEEP_MS`], as Redis and the in-memory store do: otherwise a workload that takes a
//! new lock name per run (a lock per customer, per item) would grow the file by a row per name
//! for good.
//!
//! A lock's row keeps the end of its last lease in `exp` (the release time once released), and a
//! semaphore's fence row keeps in `keep` when its fence may go (`FENCE_KEEP_MS` past the longest
//! lease of its acquisitions). There is no index on either time (every acquisition would write
//! one more page): as for expired items (`item_sweep`), each acquisition adds
//! to a debt, and for every [`SWEEP`]` / 2` acquisitions the next [`SWEEP`] rows in key order
//! (after where the last sweep stopped, around the table) are visited and the forgotten ones
//! deleted. Each call does a bounded share of the work, and the sweep passes over the whole
//! table while it grows by at most half.

use rusqlite::{params, Connection, OptionalExtension};

use super::{guard, Durable, Sql};
use crate::lock::FENCE_KEEP_MS;

/// Rows visited by one sweep.
const SWEEP: usize = 256;

/// The two tables whose rows keep a fence.
#[derive(Clone, Copy)]
pub(super) enum Fences {
    Locks,
    Semaphores,
}

/// Where each table's sweep stands in this process.
#[derive(Default)]
pub(super) struct FenceSweeps {
    debt: [usize; 2],
    after: [Option<(String, String)>; 2],
}

impl Fences {
    /// The statements of one sweep: the key `SWEEP` rows on, then the deletion of the forgotten
    /// rows of the range up to it (or to the end of the table). `?3` / `?5`: the time now.
    fn sql(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Fences::Locks => (
                "SELECT ns, name FROM locks WHERE (ns, name) > (?1, ?2) ORDER BY ns, name LIMIT 1 OFFSET ?3",
                "DELETE FROM locks WHERE (ns, name) > (?1, ?2) AND (ns, name) <= (?3, ?4)
                   AND exp <= ?5 - 2592000000",
                "DELETE FROM locks WHERE (ns, name) > (?1, ?2) AND exp <= ?3 - 2592000000",
            ),
            Fences::Semaphores => (
                "SELECT ns, name FROM sem_fences WHERE (ns, name) > (?1, ?2) ORDER BY ns, name LIMIT 1 OFFSET ?3",
                "DELETE FROM sem_fences WHERE (ns, name) > (?1, ?2) AND (ns, name) <= (?3, ?4) AND keep <= ?5
                   AND NOT EXISTS (SELECT 1 FROM sem_holders h
                     WHERE h.ns = sem_fences.ns AND h.name = sem_fences.name AND h.exp > ?5)",
                "DELETE FROM sem_fences WHERE (ns, name) > (?1, ?2) AND keep <= ?3
                   AND NOT EXISTS (SELECT 1 FROM sem_holders h
                     WHERE h.ns = sem_fences.ns AND h.name = sem_fences.name AND h.exp > ?3)",
            ),
        }
    }
}

// The lock statements above spell FENCE_KEEP_MS out (SQL text is static): keep them in step.
const _: () = assert!(FENCE_KEEP_MS == 2_592_000_000);

impl Durable {
    /// Counts one acquisition on `table` and sweeps when the debt calls for it.
    pub(super) fn sweep_fences(&self, c: &Connection, table: Fences, now: i64) -> Sql<()> {
        let mut s = guard(&self.db.fence_sweeps);
        let t = table as usize;
        s.debt[t] += 1;
        while s.debt[t] >= SWEEP / 2 {
            s.debt[t] -= SWEEP / 2;
            let (next_sql, range_sql, tail_sql) = table.sql();
            let (ns, name) = s.after[t].clone().unwrap_or_default();
            let next: Option<(String, String)> = c
                .prepare_cached(next_sql)?
                .query_row(params![ns, name, SWEEP as i64 - 1], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            match &next {
                Some((ns2, name2)) => {
                    c.prepare_cached(range_sql)?.execute(params![ns, name, ns2, name2, now])?
                }
                None => c.prepare_cached(tail_sql)?.execute(params![ns, name, now])?,
            };
            s.after[t] = next;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::SWEEP;
    use crate::backend::durable::{Durability, Durable};
    use crate::lock::{LockBackend, FENCE_KEEP_MS};
    use crate::semaphore::SemaphoreBackend;
    use rusqlite::Connection;

    fn temp() -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("fg-fences-{}-{}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("f.db")
    }

    const OWNER: &str = "0123456789abcdef0123456789abcdef";

    /// A name whose last use is more than FENCE_KEEP_MS ago goes (its next token is 1 again);
    /// one used recently, and one held, keep theirs; no call deletes more than a sweep's range.
    #[tokio::test]
    async fn lock_and_semaphore_names_unused_for_the_keep_time_are_forgotten() {
        let path = temp();
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        for name in ["old", "recent", "held"] {
            let a = d.try_acquire(name, OWNER, 60_000, None).await.unwrap();
            assert!(a.acquired);
            if name != "held" {
                assert!(d.release(name, OWNER).await.unwrap().released);
            }
            let p = d.try_acquire_permit(name, OWNER, 2, None, 60_000, None).await.unwrap();
            assert!(p.acquired);
            if name != "held" {
                assert!(d.release_permit(name, OWNER).await.unwrap().released);
            }
        }
        // Age "old" past the keep time, as 30 days would.
        let c = Connection::open(&path).unwrap();
        let past = 1_000_000_000_000i64 - FENCE_KEEP_MS as i64;
        c.execute("UPDATE locks SET exp = ?1 WHERE name = 'old'", [past]).unwrap();
        c.execute("UPDATE sem_fences SET keep = ?1 WHERE name = 'old'", [past]).unwrap();
        drop(c);
        // Enough acquisitions of other names for a sweep over the whole (small) table.
        for i in 0..SWEEP {
            let n = format!("n{i}");
            let a = d.try_acquire(&n, OWNER, 60_000, None).await.unwrap();
            assert!(d.release(&n, OWNER).await.unwrap().released, "{}", a.fence);
            d.try_acquire_permit(&n, OWNER, 1, None, 60_000, None).await.unwrap();
            d.release_permit(&n, OWNER).await.unwrap();
        }
        assert_eq!(d.inspect("old").await.unwrap().fence, 0, "the old lock name is forgotten");
        assert_eq!(d.inspect_semaphore("old").await.unwrap().fence, 0, "the old semaphore name is forgotten");
        for name in ["recent", "held"] {
            assert_eq!(d.inspect(name).await.unwrap().fence, 1, "{name} keeps its lock fence");
            assert_eq!(d.inspect_semaphore(name).await.unwrap().fence, 1, "{name} keeps its semaphore fence");
        }
        assert!(d.inspect("held").await.unwrap().locked);
        assert_eq!(d.try_acquire("old", OWNER, 1000, None).await.unwrap().fence, 1);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}
