//! Removing expired items, without an index on their expiry (which would cost every claim
//! another page written) and without a pause.
//!
//! For every `SWEEP / 2` items written, the next [`SWEEP`] items in key order are visited (after
//! where the last sweep stopped, around the table) and the expired ones deleted. So each write
//! does a bounded share of the work, and since the sweep visits items twice as fast as they are
//! written, it passes over every row while the table grows by at most half of it: expired rows
//! cannot pile up. Expired rows are invisible to every read until then.
//!
//! Most of the time nothing can have expired: items are kept for days, and a sweep would walk
//! live rows only. The file keeps a low mark (`meta.items_low`): no row expires before it. While
//! the time is before the mark, writes skip the sweep. The mark is kept true by every write (an
//! item written with an earlier expiry lowers it) and raised only by a sweep that has passed over
//! the whole table: a pass keeps the earliest expiry it saw among the rows it kept, together
//! with that of every item written since the pass began (`meta.items_pass_low`), and at its end
//! that is the new mark. The pass's position is in the file (`item_sweep`), so a pass is shared
//! by every process that writes the file, and the marks cover their writes too.
//!
//! A process remembers the marks between its writes (see `remembered`, as the clock does), so a
//! write reads them again only after another process wrote.

use rusqlite::{params, Connection, OptionalExtension};

use super::remembered::Remembered;
use super::{Durable, Fail, Sql};

/// Items visited by one sweep.
pub(super) const SWEEP: usize = 256;

/// Where a sweep stands: the key of the last item it visited (`None`: at the start of the table).
type At = Option<Vec<u8>>;

/// The marks (ms since the epoch): no item expires before `low`; no item written since the pass
/// began, and none the pass kept, expires before `pass_low`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Marks {
    low: i64,
    pass_low: i64,
}

/// This process's share of the sweep: items written since its last sweep, and the marks as it
/// last knew them.
#[derive(Default)]
pub(super) struct Sweep {
    debt: usize,
    marks: Remembered<Marks>,
}

fn stored_marks(c: &Connection) -> rusqlite::Result<Marks> {
    c.prepare_cached(
        "SELECT (SELECT v FROM meta WHERE k = 'items_low'), (SELECT v FROM meta WHERE k = 'items_pass_low')",
    )?
    .query_row([], |r| Ok(Marks { low: r.get(0)?, pass_low: r.get(1)? }))
}

impl Sweep {
    fn marks(&mut self, c: &Connection) -> Sql<Marks> {
        Ok(self.marks.get(c, stored_marks)?)
    }

    fn store(&mut self, c: &Connection, m: Marks) -> Sql<()> {
        let was = self.marks(c)?;
        if m.low != was.low {
            c.prepare_cached("UPDATE meta SET v = ?1 WHERE k = 'items_low'")?.execute([m.low])?;
        }
        if m.pass_low != was.pass_low {
            c.prepare_cached("UPDATE meta SET v = ?1 WHERE k = 'items_pass_low'")?.execute([m.pass_low])?;
        }
        self.marks.set(m);
        Ok(())
    }

    /// Items expiring from `exp` on were written (or kept by the pass): the marks come down to
    /// it where they are later.
    fn lower(&mut self, c: &Connection, exp: i64) -> Sql<()> {
        let m = self.marks(c)?;
        if exp < m.pass_low {
            self.store(c, Marks { low: m.low.min(exp), pass_low: exp })?;
        }
        Ok(())
    }

    /// After a write transaction: remembers the marks it left when it committed (`ok`),
    /// forgets them when it failed.
    pub(super) fn settle(&mut self, c: &Connection, ok: bool) {
        self.marks.settle(c, ok);
    }
}

impl Durable {
    /// Counts `written` items whose earliest expiry is `earliest` (`i64::MAX`: none), and sweeps
    /// when the debt calls for it and something may have expired.
    pub(super) fn sweep_items(&self, c: &Connection, now: i64, written: usize, earliest: i64) -> Sql<()> {
        let mut sweep = super::guard(&self.db.sweep);
        sweep.lower(c, earliest)?;
        sweep.debt += written;
        // The sweeps a call owes (a batch owes many) are one stretch: the same rows visited, by
        // fewer statements.
        let sweeps = sweep.debt / (SWEEP / 2);
        if sweeps == 0 {
            return Ok(());
        }
        sweep.debt -= sweeps * (SWEEP / 2);
        if now < sweep.marks(c)?.low {
            return Ok(());
        }
        let mut at: At =
            c.prepare_cached("SELECT at FROM item_sweep")?.query_row([], |r| r.get(0)).optional()?;
        let (ended, kept_low) = sweep_slice(c, now, &mut at, sweeps * SWEEP)?;
        sweep.lower(c, kept_low)?;
        if ended {
            // The pass has been over every row: a new one starts at the table's start.
            let m = sweep.marks(c)?;
            sweep.store(c, Marks { low: m.pass_low, pass_low: i64::MAX })?;
        }
        match &at {
            Some(key) => c
                .prepare_cached("INSERT OR REPLACE INTO item_sweep (k, at) VALUES (0, ?1)")?
                .execute([key])?,
            None => c.prepare_cached("DELETE FROM item_sweep")?.execute([])?,
        };
        Ok(())
    }
}

/// One sweep: up to `rows` items visited in key order after `at`. Returns whether it reached
/// the table's end (`at` is then `None`), and the earliest expiry among the rows it visited and
/// kept (`i64::MAX`: none).
///
/// The walk reads the keys and expiries of the stretch (with only its start in the SQL) and
/// checks that the keys come in order; then the expired rows up to the last key are deleted in
/// one statement. On a damaged page the sweep, and the write it is part of, fails with
/// `ERR_STORAGE` (a damaged key read as a key out of order, a damaged record as `SQLITE_CORRUPT`):
/// the sweep's position never jumps past rows it did not visit to a damaged key, and the delete
/// covers only the stretch walked (a range delete that stops early at a damaged record deletes
/// less, never more).
fn sweep_slice(c: &Connection, now: i64, at: &mut At, rows: usize) -> Sql<(bool, i64)> {
    let after = at.take().unwrap_or_default();
    let mut st = c.prepare_cached("SELECT k, exp FROM items WHERE k > ?1 ORDER BY k LIMIT ?2")?;
    let mut walk = st.query(params![after, rows as i64])?;
    let (mut visited, mut last, mut low) = (0usize, after.clone(), i64::MAX);
    while let Some(r) = walk.next()? {
        // A key or an expiry of another type is damage too (a damaged record's type byte).
        let key =
            r.get_ref(0)?.as_blob().map_err(|_| Fail::Corrupt("an item key that is not a key".into()))?;
        if key <= last.as_slice() {
            return Err(Fail::Corrupt("item keys out of order".into()));
        }
        last.clear();
        last.extend_from_slice(key);
        let exp = r
            .get_ref(1)?
            .as_i64()
            .map_err(|_| Fail::Corrupt("an item expiry that is not a number".into()))?;
        if exp > now {
            low = low.min(exp);
        }
        visited += 1;
    }
    if visited == 0 {
        return Ok((true, i64::MAX));
    }
    c.prepare_cached("DELETE FROM items WHERE k > ?1 AND k <= ?2 AND exp <= ?3")?
        .execute(params![after, last, now])?;
    // A stretch shorter than asked for ran into the table's end: the next starts it over.
    let ended = visited < rows;
    *at = (!ended).then_some(last);
    Ok((ended, low))
}

#[cfg(test)]
mod tests {
    use super::{sweep_slice, At, SWEEP};
    use crate::backend::durable::item_key;
    use crate::backend::durable::{Durability, Durable};
    use crate::tracker::{ItemOp, TrackerBackend};
    use rusqlite::{params, Connection};

    fn sweep(c: &Connection, now: i64, at: &mut At) -> (bool, i64) {
        match sweep_slice(c, now, at, SWEEP) {
            Ok(out) => out,
            Err(super::super::Fail::Db(e)) => panic!("sweep failed: {e}"),
            Err(_) => panic!("sweep failed"),
        }
    }

    fn insert(c: &Connection, ns: &str, grp: &str, id: &str, exp: i64) {
        let key = item_key::item(&item_key::group(ns, grp), id);
        c.execute(
            "INSERT INTO items (k, exp, s, a, l, c, u, d) VALUES (?1, ?2, 0, 0, 0, 0, 0, 0)",
            params![key, exp],
        )
        .unwrap();
    }

    /// `key` as an SQL blob literal.
    fn blob(key: &[u8]) -> String {
        format!("x'{}'", key.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    fn count(c: &Connection, sql: &str) -> usize {
        c.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap() as usize
    }

    fn temp(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("fg-sweep-{}-{}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    /// A sweep visits at most SWEEP items, from group to group and namespace to namespace,
    /// deletes the expired ones of what it visited and nothing live, and reports the earliest
    /// expiry it kept; sweeps go on where the last stopped until every expired item is gone,
    /// then start the table over.
    #[test]
    fn a_sweep_visits_a_bounded_stretch_and_deletes_only_expired_items() {
        let path = temp("s.db");
        let c = super::super::schema::open(&path).unwrap();
        let now = 1_000_000;
        // (namespace, group, items, expired): a group of expired items, a group of live items, a
        // group longer than a sweep, and a few expired items in another namespace.
        let groups = [
            ("a:", "g1", 100, true),
            ("a:", "g2", 50, false),
            ("a:", "g3", 300, true),
            ("b:", "g1", 10, true),
        ];
        for (ns, grp, n, expired) in groups {
            for i in 0..n {
                let exp = if expired { now - 1 } else { now + 1 + i };
                insert(&c, ns, grp, &format!("{i:04}"), exp);
            }
        }
        let mut at = None;
        assert_eq!(sweep(&c, now, &mut at), (false, now + 1), "the first stretch keeps a:g2");
        // The first SWEEP items in key order: all of a:g1 and a:g2, then the start of a:g3.
        let into_g3 = SWEEP - 150;
        assert_eq!(count(&c, "SELECT count(*) FROM items WHERE exp < 1000000"), 300 - into_g3 + 10);
        assert_eq!(at, Some(item_key::item(&item_key::group("a:", "g3"), &format!("{:04}", into_g3 - 1))));
        let mut sweeps = 1;
        while count(&c, "SELECT count(*) FROM items WHERE exp < 1000000") > 0 {
            let (ended, kept_low) = sweep(&c, now, &mut at);
            assert_eq!(kept_low, i64::MAX, "nothing live after a:g2");
            sweeps += 1;
            assert!(sweeps <= 3, "the expired items take at most 3 sweeps");
            assert_eq!(ended, at.is_none());
        }
        assert_eq!(count(&c, "SELECT count(*) FROM items"), 50, "the live items are kept");
        // The table's end was reached: the next sweep starts it over.
        assert_eq!(at, None);
        assert_eq!(sweep(&c, now, &mut at), (true, now + 1), "a table smaller than a sweep is visited whole");
        assert_eq!(count(&c, "SELECT count(*) FROM items"), 50);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    /// Damaged pages in the middle of a file of 6,000 items, every other one expired: a pass of
    /// sweeps over each damaged copy either fails (ERR_STORAGE) or, once it has been over the
    /// table, has deleted every expired item the copy held and no live one: it never skips rows
    /// to a damaged key, nor deletes past what it walked.
    #[tokio::test]
    async fn a_sweep_on_a_damaged_file_fails_or_deletes_exactly_the_expired_items() {
        use crate::backend::durable::{damage, Fail};
        let path = damage::temp("sweep.db");
        let now = 1_000_000;
        let c = super::super::schema::open(&path).unwrap();
        c.execute_batch("BEGIN").unwrap();
        for i in 0..6_000 {
            insert(&c, "fg:", "g", &format!("item-{i:05}"), if i % 2 == 0 { now - 1 } else { now + 1 + i });
        }
        c.execute_batch("COMMIT").unwrap();
        drop(c);
        let rows = |c: &Connection, sql: &str| -> rusqlite::Result<Vec<Vec<u8>>> {
            c.prepare(sql)?.query_map([], |r| r.get(0))?.collect()
        };
        let (mut failed, mut passed) = (0, 0);
        let good = damage::checkpointed(&path);
        let places = damage::across(good.len());
        let copies = damage::copies(&good, &places);
        for (at, copy) in &copies {
            let Ok(c) = super::super::schema::open(copy) else {
                failed += 1;
                continue;
            };
            let Ok(live) = rows(&c, "SELECT k FROM items WHERE exp > 1000000 ORDER BY k") else {
                failed += 1;
                continue;
            };
            let mut pos = None;
            let pass = (0..100).try_for_each(|_| match sweep_slice(&c, now, &mut pos, SWEEP) {
                Ok((true, _)) => Err(None),
                Ok((false, _)) => Ok(()),
                Err(e) => Err(Some(e)),
            });
            match pass {
                Err(Some(Fail::Corrupt(_))) => failed += 1,
                Err(Some(Fail::Db(e))) => {
                    let m = super::super::storage_error(copy, e).message;
                    assert!(m.contains("corrupt"), "damage at byte {at}: {m}");
                    failed += 1;
                }
                Err(None) => {
                    let left = rows(&c, "SELECT k FROM items WHERE exp <= 1000000").unwrap_or_default();
                    assert_eq!(left.len(), 0, "damage at byte {at}: a finished pass left expired items");
                    let kept = rows(&c, "SELECT k FROM items WHERE exp > 1000000 ORDER BY k").unwrap();
                    assert_eq!(kept, live, "damage at byte {at}: live items deleted");
                    passed += 1;
                }
                _ => panic!("damage at byte {at}: the pass did not end"),
            }
        }
        copies.iter().for_each(|(_, copy)| damage::remove(copy));
        damage::remove(&path);
        assert!(failed > 0, "some damage was found (else this test tells nothing)");
        assert_eq!(passed + failed, places.len());
    }

    fn marks(path: &std::path::Path) -> (i64, i64) {
        let c = Connection::open(path).unwrap();
        c.query_row(
            "SELECT (SELECT v FROM meta WHERE k = 'items_low'), (SELECT v FROM meta WHERE k = 'items_pass_low')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    }

    fn claims(prefix: &str, n: usize) -> Vec<ItemOp> {
        (0..n)
            .map(|i| ItemOp::Claim {
                id: format!("{prefix}{i:05}"),
                owner: "o".into(),
                lease_ms: 60_000,
                reclaim_completed: false,
                max_attempts: None,
                note: None,
            })
            .collect()
    }

    fn completions(prefix: &str, n: usize, keep_ms: u64) -> Vec<ItemOp> {
        (0..n)
            .map(|i| ItemOp::Complete { id: format!("{prefix}{i:05}"), owner: None, keep_ms, result: None })
            .collect()
    }

    /// While nothing can have expired, writes skip the sweep (its position stays); the first pass
    /// over the table raises the low mark to the earliest expiry. An item written with an earlier
    /// expiry lowers the mark at once, by this process or by another one (a connection of its
    /// own), and the sweep runs again and removes the item once it has expired.
    #[tokio::test]
    async fn the_low_mark_skips_sweeps_until_something_can_have_expired() {
        let path = temp("m.db");
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        let day: u64 = 86_400_000;
        let half_day = (day / 2) as i64;
        let now_ms = crate::backend::embedded::now_ms;
        let rows = |sql: &str| count(&Connection::open(&path).unwrap(), sql);
        // A new file: the mark is unknown until a first pass.
        assert_eq!(marks(&path), (i64::MIN, i64::MAX));
        d.apply("g", &claims("a", SWEEP / 2), day).await.unwrap();
        let (low, pass_low) = marks(&path);
        assert!(low > now_ms() + half_day, "the first pass raised the mark: {low}");
        assert_eq!(pass_low, i64::MAX, "a new pass began");
        // Many more writes, all long-lived: no sweep runs, its position stays at the start.
        d.apply("g", &claims("b", SWEEP * 4), day).await.unwrap();
        assert_eq!(rows("SELECT count(*) FROM item_sweep"), 0, "no sweep moved");
        assert_eq!(marks(&path).0, low);

        // Another process writes an item that expires at once, and lowers the marks.
        let c = Connection::open(&path).unwrap();
        let soon = now_ms() + 1;
        c.execute("UPDATE meta SET v = min(v, ?1) WHERE k IN ('items_low', 'items_pass_low')", [soon])
            .unwrap();
        insert(&c, "fg:", "g", "zz", soon);
        drop(c);
        std::thread::sleep(std::time::Duration::from_millis(5));
        // Enough long-lived writes here for a pass over the table: the item goes.
        d.apply("g", &claims("c", SWEEP * 6), day).await.unwrap();
        let g = item_key::group("fg:", "g");
        let zz = format!("SELECT count(*) FROM items WHERE k = {}", blob(&item_key::item(&g, "zz")));
        assert_eq!(rows(&zz), 0, "swept after the other's write");

        // This process completes items kept 1 ms: the mark comes down, and they are swept.
        d.apply("g", &completions("a", 10, 1), day).await.unwrap();
        assert!(marks(&path).0 <= now_ms() + 1);
        std::thread::sleep(std::time::Duration::from_millis(5));
        d.apply("g", &claims("d", SWEEP * 6), day).await.unwrap();
        assert_eq!(
            rows(&format!(
                "SELECT count(*) FROM items WHERE k > {} AND k < {}",
                blob(&g),
                blob(&item_key::item(&g, "a00010"))
            )),
            0,
            "the completed items are swept"
        );
        assert_eq!(rows("SELECT count(*) FROM items"), SWEEP / 2 - 10 + SWEEP * 4 + SWEEP * 12);
        // A pass during which every write was long-lived raises the mark again (the pass that
        // swept an item may still count its expiry: the mark is never too high, at worst low).
        let mut more = 0;
        while marks(&path).0 <= now_ms() + half_day {
            assert!(more < 16, "the mark stays low after {more} more batches");
            d.apply("g", &claims(&format!("e{more}-"), SWEEP * 2), day).await.unwrap();
            more += 1;
        }
        assert!(rows("SELECT count(*) FROM item_sweep") <= 1);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}
