//! SQLite (rusqlite, bundled; WAL with synchronous=NORMAL and FULL) against redb (Durability::
//! Immediate and None) on flowguard's workload, each step shaped as the durable backend runs it:
//! - single claims: one write transaction each (read the record, check, write it back, advance the
//!   stored clock);
//! - a batch claim of 10,000 ids in one transaction;
//! - lock pairs: acquire (one transaction) + release (one transaction);
//! - queue: enqueue one id per transaction, then read batches of 100 and ack them (two
//!   transactions per batch).
//!
//! Prints one line per store and step: operations per second. Files go to a temporary folder.

use std::path::{Path, PathBuf};
use std::time::Instant;

const SINGLE: usize = 20_000;
const BATCH: usize = 10_000;
const BATCHES: usize = 5;
const LOCK_PAIRS: usize = 10_000;
const QUEUE_IDS: usize = 20_000;
const READ_LIMIT: usize = 100;

/// A stand-in for a tracker record: about the size of the JSON the backend stores.
fn record(attempts: u32, lease_end: u64) -> Vec<u8> {
    format!(
        r#"{{"s":"in_progress","a":{attempts},"o":"0123456789abcdef0123456789abcdef","l":{lease_end},"c":1,"u":1,"d":0,"x":{lease_end},"t":[{{"t":1,"s":"in_progress","a":{attempts}}}]}}"#
    )
    .into_bytes()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

trait Store {
    fn claim(&mut self, ids: &[String]);
    fn lock_pair(&mut self, name: &str, owner: &str);
    fn enqueue(&mut self, id: &str);
    /// Claims up to `limit` due ids and acks them; returns how many.
    fn read_ack(&mut self, owner: &str, limit: usize) -> usize;
}

mod sqlite {
    use super::*;
    use rusqlite::{params, Connection, OptionalExtension};

    pub struct Sqlite(pub Connection);

    pub fn open(path: &Path, synchronous: &str) -> Sqlite {
        let c = Connection::open(path).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.pragma_update(None, "synchronous", synchronous).unwrap();
        if let Ok(pages) = std::env::var("WAL_AUTOCHECKPOINT") {
            c.pragma_update(None, "wal_autocheckpoint", pages.parse::<i64>().unwrap()).unwrap();
        }
        c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        c.execute_batch(
            "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER) WITHOUT ROWID;
             INSERT OR IGNORE INTO meta VALUES('clock', 0);
             CREATE TABLE IF NOT EXISTS items(grp TEXT, id TEXT, x INTEGER, rec BLOB, PRIMARY KEY(grp, id));
             CREATE TABLE IF NOT EXISTS locks(name TEXT PRIMARY KEY, owner TEXT, fence INTEGER, exp INTEGER);
             CREATE TABLE IF NOT EXISTS waiting(id TEXT PRIMARY KEY, due INTEGER);
             CREATE INDEX IF NOT EXISTS waiting_due ON waiting(due, id);
             CREATE TABLE IF NOT EXISTS claimed(id TEXT PRIMARY KEY, deadline INTEGER, owner TEXT);",
        )
        .unwrap();
        Sqlite(c)
    }

    /// One write transaction that advances the stored clock first, as the backend does.
    fn tx<T>(c: &Connection, f: impl FnOnce(&Connection, u64) -> T) -> T {
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        let last: u64 = c
            .prepare_cached("SELECT v FROM meta WHERE k='clock'")
            .unwrap()
            .query_row([], |r| r.get(0))
            .unwrap();
        let now = now_ms().max(last);
        if now > last {
            c.prepare_cached("UPDATE meta SET v=?1 WHERE k='clock'").unwrap().execute([now]).unwrap();
        }
        let out = f(c, now);
        c.execute_batch("COMMIT").unwrap();
        out
    }

    impl Store for Sqlite {
        fn claim(&mut self, ids: &[String]) {
            tx(&self.0, |c, now| {
                let mut get = c.prepare_cached("SELECT rec FROM items WHERE grp='g' AND id=?1").unwrap();
                let mut put = c
                    .prepare_cached("INSERT OR REPLACE INTO items(grp, id, x, rec) VALUES('g', ?1, ?2, ?3)")
                    .unwrap();
                for id in ids {
                    let old: Option<Vec<u8>> = get.query_row([id], |r| r.get(0)).optional().unwrap();
                    let attempts = old.map_or(0, |r| r.len() as u32 % 7) + 1;
                    put.execute(params![id, now + 600_000, record(attempts, now + 600_000)]).unwrap();
                }
            })
        }
        fn lock_pair(&mut self, name: &str, owner: &str) {
            for acquire in [true, false] {
                tx(&self.0, |c, now| {
                    let held: Option<(Option<String>, i64, i64)> = c
                        .prepare_cached("SELECT owner, fence, exp FROM locks WHERE name=?1")
                        .unwrap()
                        .query_row([name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                        .optional()
                        .unwrap();
                    let fence = held.as_ref().map_or(0, |h| h.1);
                    if acquire {
                        c.prepare_cached("INSERT OR REPLACE INTO locks VALUES(?1, ?2, ?3, ?4)")
                            .unwrap()
                            .execute(params![name, owner, fence + 1, now + 60_000])
                            .unwrap();
                    } else {
                        c.prepare_cached("UPDATE locks SET owner=NULL, exp=0 WHERE name=?1 AND owner=?2")
                            .unwrap()
                            .execute([name, owner])
                            .unwrap();
                    }
                })
            }
        }
        fn enqueue(&mut self, id: &str) {
            tx(&self.0, |c, now| {
                c.prepare_cached("INSERT OR IGNORE INTO waiting VALUES(?1, ?2)")
                    .unwrap()
                    .execute(params![id, now])
                    .unwrap();
            })
        }
        fn read_ack(&mut self, owner: &str, limit: usize) -> usize {
            let ids: Vec<String> = tx(&self.0, |c, now| {
                let ids: Vec<String> = c
                    .prepare_cached("SELECT id FROM waiting WHERE due <= ?1 ORDER BY due, id LIMIT ?2")
                    .unwrap()
                    .query_map(params![now, limit as i64], |r| r.get(0))
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                let mut del = c.prepare_cached("DELETE FROM waiting WHERE id=?1").unwrap();
                let mut ins = c.prepare_cached("INSERT OR REPLACE INTO claimed VALUES(?1, ?2, ?3)").unwrap();
                for id in &ids {
                    del.execute([id]).unwrap();
                    ins.execute(params![id, now + 600_000, owner]).unwrap();
                }
                ids
            });
            tx(&self.0, |c, _| {
                let mut ack = c.prepare_cached("DELETE FROM claimed WHERE id=?1 AND owner=?2").unwrap();
                for id in &ids {
                    ack.execute([id.as_str(), owner]).unwrap();
                }
            });
            ids.len()
        }
    }
}

mod redb_store {
    use super::*;
    use redb::{Database, Durability, ReadableTable, TableDefinition, WriteTransaction};

    const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
    const ITEMS: TableDefinition<&str, &[u8]> = TableDefinition::new("items");
    const LOCKS: TableDefinition<&str, (u64, u64, &str)> = TableDefinition::new("locks");
    const WAITING: TableDefinition<(u64, &str), ()> = TableDefinition::new("waiting");
    const DUE: TableDefinition<&str, u64> = TableDefinition::new("due");
    const CLAIMED: TableDefinition<&str, (u64, &str)> = TableDefinition::new("claimed");

    pub struct Redb(pub Database, pub Durability);

    pub fn open(path: &Path, durability: Durability) -> Redb {
        Redb(Database::create(path).unwrap(), durability)
    }

    impl Redb {
        fn tx<T>(&self, f: impl FnOnce(&WriteTransaction, u64) -> T) -> T {
            let mut w = self.0.begin_write().unwrap();
            w.set_durability(self.1).unwrap();
            let out = {
                let mut meta = w.open_table(META).unwrap();
                let last = meta.get("clock").unwrap().map_or(0, |v| v.value());
                let now = now_ms().max(last);
                if now > last {
                    meta.insert("clock", now).unwrap();
                }
                drop(meta);
                f(&w, now)
            };
            w.commit().unwrap();
            out
        }
    }

    impl Store for Redb {
        fn claim(&mut self, ids: &[String]) {
            self.tx(|w, now| {
                let mut t = w.open_table(ITEMS).unwrap();
                for id in ids {
                    let key = format!("g\u{1f}{id}");
                    let attempts = t.get(key.as_str()).unwrap().map_or(0, |r| r.value().len() as u32 % 7) + 1;
                    t.insert(key.as_str(), record(attempts, now + 600_000).as_slice()).unwrap();
                }
            })
        }
        fn lock_pair(&mut self, name: &str, owner: &str) {
            for acquire in [true, false] {
                self.tx(|w, now| {
                    let mut t = w.open_table(LOCKS).unwrap();
                    let fence = t.get(name).unwrap().map_or(0, |v| v.value().0);
                    if acquire {
                        t.insert(name, (fence + 1, now + 60_000, owner)).unwrap();
                    } else {
                        t.insert(name, (fence, 0, "")).unwrap();
                    }
                })
            }
        }
        fn enqueue(&mut self, id: &str) {
            self.tx(|w, now| {
                let mut due = w.open_table(DUE).unwrap();
                if due.get(id).unwrap().is_none() {
                    due.insert(id, now).unwrap();
                    w.open_table(WAITING).unwrap().insert((now, id), ()).unwrap();
                }
            })
        }
        fn read_ack(&mut self, owner: &str, limit: usize) -> usize {
            let ids: Vec<String> = self.tx(|w, now| {
                let mut waiting = w.open_table(WAITING).unwrap();
                let mut due = w.open_table(DUE).unwrap();
                let mut claimed = w.open_table(CLAIMED).unwrap();
                let mut ids = Vec::new();
                for _ in 0..limit {
                    let first = waiting.first().unwrap().map(|(k, _)| {
                        let (d, id) = k.value();
                        (d, id.to_string())
                    });
                    let Some((d, id)) = first else { break };
                    if d > now {
                        break;
                    }
                    waiting.remove((d, id.as_str())).unwrap();
                    due.remove(id.as_str()).unwrap();
                    claimed.insert(id.as_str(), (now + 600_000, owner)).unwrap();
                    ids.push(id);
                }
                ids
            });
            self.tx(|w, _| {
                let mut claimed = w.open_table(CLAIMED).unwrap();
                for id in &ids {
                    let mine = claimed.get(id.as_str()).unwrap().is_some_and(|v| v.value().1 == owner);
                    if mine {
                        claimed.remove(id.as_str()).unwrap();
                    }
                }
            });
            ids.len()
        }
    }
}

fn rate(n: usize, start: Instant) -> String {
    let per_s = n as f64 / start.elapsed().as_secs_f64();
    format!("{:>12.0}/s", per_s)
}

fn run(name: &str, store: &mut dyn Store, file: &Path) {
    let ids: Vec<String> = (0..SINGLE).map(|i| format!("item-{i}")).collect();
    let t = Instant::now();
    for id in &ids {
        store.claim(std::slice::from_ref(id));
    }
    println!("{name:<28} single claims        {}", rate(SINGLE, t));

    let batch: Vec<String> = (0..BATCH).map(|i| format!("batch-{i}")).collect();
    let t = Instant::now();
    for _ in 0..BATCHES {
        store.claim(&batch);
    }
    println!("{name:<28} batch claims (10,000) {}", rate(BATCH * BATCHES, t));

    let t = Instant::now();
    for i in 0..LOCK_PAIRS {
        store.lock_pair(&format!("lock-{}", i % 16), "owner-token");
    }
    println!("{name:<28} lock pairs            {}", rate(LOCK_PAIRS, t));

    let t = Instant::now();
    for i in 0..QUEUE_IDS {
        store.enqueue(&format!("q-{i}"));
    }
    println!("{name:<28} enqueue (1 per tx)    {}", rate(QUEUE_IDS, t));
    let t = Instant::now();
    let mut n = 0;
    loop {
        let got = store.read_ack("reader", READ_LIMIT);
        n += got;
        if got == 0 {
            break;
        }
    }
    assert_eq!(n, QUEUE_IDS);
    println!("{name:<28} read+ack (100/batch)  {} ids", rate(n, t));
    let size: u64 = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name().to_string_lossy().starts_with(&*file.file_name().unwrap().to_string_lossy())
        })
        .map(|e| e.metadata().unwrap().len())
        .sum();
    println!("{name:<28} file size after run   {:>10} KiB", size / 1024);
}

fn main() {
    let dir: PathBuf = std::env::temp_dir().join(format!("fg-durable-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let only = std::env::args().nth(1).unwrap_or_default();
    let want = |s: &str| only.is_empty() || s.contains(&only);
    for sync in ["NORMAL", "FULL"] {
        let name = format!("sqlite WAL synchronous={sync}");
        if want(&name) {
            let f = dir.join(format!("sqlite-{sync}.db"));
            run(&name, &mut sqlite::open(&f, sync), &f);
        }
    }
    for (label, d) in [("Immediate", redb::Durability::Immediate), ("None", redb::Durability::None)] {
        let name = format!("redb Durability::{label}");
        if want(&name) {
            let f = dir.join(format!("redb-{label}.redb"));
            run(&name, &mut redb_store::open(&f, d), &f);
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
