//! Dedup Queue on the durable store: a storage adapter around [`crate::rules::queue`], with a
//! shard's waiting and claimed ids as rows. Every step is one transaction on one shard and first
//! returns that shard's expired claims to waiting.

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{checked_scan, Durable, Fail, Sql};
use crate::backend::BoxFuture;
use crate::queue::{
    shard_mismatch, Debounce, EnqueueOutcome, QueueBackend, SettleAction, SettleOutcome, ShardClaim,
    ShardDead, ShardRef, ShardSize,
};
use crate::rules::queue::{self, Deliver, EnqueueWrite};

/// A claim: (deadline, owner, due time of an enqueue made while claimed, its first-enqueue time).
type ClaimRow = (i64, String, Option<i64>, Option<i64>);

/// A claim row as the rules read it.
fn rule_claim(row: &ClaimRow) -> queue::Claim<'_> {
    queue::Claim { deadline: row.0, owner: &row.1, again: row.2 }
}

/// A row's key in the order a shard's rows are read: (ns, queue, shard, a time, id).
type Key = (String, String, u32, i64, String);

/// A shard's rows are read with only the shard's start in the SQL, their end and order checked
/// in Rust (see `checked_scan`): the waiting ids by due time, the claimed ones by deadline, and
/// the claimed ones by id (for counting, with no index lookup per row).
const WAITING_BY_DUE: &str = "SELECT ns, queue, shard, due, id FROM q_waiting INDEXED BY q_waiting_due
     WHERE (ns, queue, shard) >= (?1, ?2, ?3) ORDER BY ns, queue, shard, due, id";
const CLAIMED_BY_DEADLINE: &str = "SELECT ns, queue, shard, deadline, id, again, again_first FROM q_claimed
     INDEXED BY q_claimed_deadline WHERE (ns, queue, shard) >= (?1, ?2, ?3) ORDER BY ns, queue, shard, deadline, id";
const DEAD_BY_DIED: &str = "SELECT ns, queue, shard, died, id, n FROM q_dead INDEXED BY q_dead_died
     WHERE (ns, queue, shard) >= (?1, ?2, ?3) ORDER BY ns, queue, shard, died, id";
const CLAIMED_BY_ID: &str = "SELECT ns, queue, shard, 0, id, again FROM q_claimed
     WHERE (ns, queue, shard) >= (?1, ?2, ?3) ORDER BY ns, queue, shard, id";

/// One shard of one queue in one namespace, inside a transaction.
struct Shard<'a> {
    c: &'a Connection,
    ns: &'a str,
    queue: &'a str,
    shard: u32,
}

impl Shard<'_> {
    /// Puts `id` in waiting, due at `due`, with the first-enqueue time `first` (moving it when it
    /// is there already).
    fn wait(&self, id: &str, due: i64, first: Option<i64>) -> Sql<()> {
        self.c
            .prepare_cached(
                "INSERT INTO q_waiting (ns, queue, shard, id, due, first) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (ns, queue, shard, id) DO UPDATE SET due = excluded.due, first = excluded.first",
            )?
            .execute(params![self.ns, self.queue, self.shard, id, due, first])?;
        Ok(())
    }

    /// The due time and first-enqueue time of a waiting id.
    fn waiting_due(&self, id: &str) -> Sql<Option<(i64, Option<i64>)>> {
        Ok(self
            .c
            .prepare_cached(
                "SELECT due, first FROM q_waiting WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4",
            )?
            .query_row(params![self.ns, self.queue, self.shard, id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    /// The claim of `id`.
    fn claim_of(&self, id: &str) -> Sql<Option<ClaimRow>> {
        Ok(self
            .c
            .prepare_cached(
                "SELECT deadline, owner, again, again_first FROM q_claimed
                 WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4",
            )?
            .query_row(params![self.ns, self.queue, self.shard, id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()?)
    }

    /// Whether `id` is a dead letter.
    fn is_dead(&self, id: &str) -> Sql<bool> {
        Ok(self
            .c
            .prepare_cached("SELECT 1 FROM q_dead WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4")?
            .query_row(params![self.ns, self.queue, self.shard, id], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// The delivery count of `id` (0 when none is kept).
    fn count(&self, id: &str) -> Sql<u64> {
        Ok(self
            .c
            .prepare_cached("SELECT n FROM q_counts WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4")?
            .query_row(params![self.ns, self.queue, self.shard, id], |r| r.get(0))
            .optional()?
            .unwrap_or(0))
    }

    /// Whether the shard keeps any delivery count (so an ack without one costs one look per call).
    fn has_counts(&self) -> Sql<bool> {
        Ok(self
            .c
            .prepare_cached("SELECT 1 FROM q_counts WHERE ns = ?1 AND queue = ?2 AND shard = ?3 LIMIT 1")?
            .query_row(params![self.ns, self.queue, self.shard], |_| Ok(()))
            .optional()?
            .is_some())
    }

    fn drop_count(&self, id: &str) -> Sql<()> {
        self.c
            .prepare_cached("DELETE FROM q_counts WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4")?
            .execute(params![self.ns, self.queue, self.shard, id])?;
        Ok(())
    }

    fn unclaim(&self, id: &str) -> Sql<()> {
        self.c
            .prepare_cached("DELETE FROM q_claimed WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4")?
            .execute(params![self.ns, self.queue, self.shard, id])?;
        Ok(())
    }

    /// Reads the shard's rows of `sql` (one of the queries above) whose time is `until` or
    /// before, handing each to `take` until it returns false.
    fn scan(&self, sql: &str, until: i64, take: impl FnMut(&Key, &Row<'_>) -> Sql<bool>) -> Sql<()> {
        let mut st = self.c.prepare_cached(sql)?;
        let rows = st.query(params![self.ns, self.queue, self.shard])?;
        checked_scan::scan(
            rows,
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            |k: &Key| (k.0.as_str(), k.1.as_str(), k.2) == (self.ns, self.queue, self.shard) && k.3 <= until,
            || format!("queue {:?}", self.queue),
            take,
        )
    }

    /// Whether the shard holds no ids.
    fn is_empty(&self) -> Sql<bool> {
        let mut empty = true;
        for sql in [WAITING_BY_DUE, CLAIMED_BY_ID, DEAD_BY_DIED] {
            self.scan(sql, i64::MAX, |_, _| {
                empty = false;
                Ok(false)
            })?;
        }
        Ok(empty)
    }

    /// Returns expired claims to waiting (see [`queue::back_at`]). The scan reads the claims
    /// whose deadline is now or before: those no longer [`queue::live`].
    fn reap(&self, now: i64) -> Sql<()> {
        let mut expired: Vec<(String, i64, Option<i64>, Option<i64>)> = Vec::new();
        self.scan(CLAIMED_BY_DEADLINE, now, |k, r| {
            expired.push((k.4.clone(), k.3, r.get(5)?, r.get(6)?));
            Ok(true)
        })?;
        for (id, deadline, again, first) in expired {
            debug_assert!(!queue::live(deadline, now));
            self.unclaim(&id)?;
            self.wait(&id, queue::back_at(deadline, again), first)?;
        }
        Ok(())
    }
}

/// Runs `f` on a shard after checking the caller's shard count against the queue's: while any
/// shard of the queue holds ids, every call must use the count those ids were enqueued with (a
/// row of `q_shards` per shard that holds ids, all with the queue's count); once none does, the
/// next write records the caller's count.
fn with<T>(c: &Connection, ns: &str, at: ShardRef<'_>, f: impl FnOnce(&Shard<'_>) -> Sql<T>) -> Sql<T> {
    let s = Shard { c, ns, queue: at.queue, shard: at.shard };
    let mut stored: Option<u32> = None;
    let mut st = c.prepare_cached(
        "SELECT ns, queue, shard, shards FROM q_shards WHERE (ns, queue) >= (?1, ?2) ORDER BY ns, queue, shard",
    )?;
    checked_scan::scan(
        st.query(params![ns, at.queue])?,
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, u32>(2)?)),
        |k| (k.0.as_str(), k.1.as_str()) == (ns, at.queue),
        || format!("the shards of queue {:?}", at.queue),
        |_, r| {
            stored = Some(r.get(3)?);
            Ok(false)
        },
    )?;
    if let Some(stored) = stored.filter(|&n| n != at.shards) {
        return Err(Fail::Coded(shard_mismatch(at, stored as u64)));
    }
    let out = f(&s)?;
    if s.is_empty()? {
        c.prepare_cached("DELETE FROM q_shards WHERE ns = ?1 AND queue = ?2 AND shard = ?3")?
            .execute(params![ns, at.queue, at.shard])?;
    } else {
        c.prepare_cached(
            "INSERT INTO q_shards (ns, queue, shard, shards) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (ns, queue, shard) DO NOTHING",
        )?
        .execute(params![ns, at.queue, at.shard, at.shards])?;
    }
    Ok(out)
}

fn enqueue(
    s: &Shard<'_>,
    ids: &[String],
    delay_ms: u64,
    debounce: Debounce,
    now: i64,
) -> Sql<Vec<(EnqueueOutcome, i64)>> {
    let due = queue::due(now, delay_ms);
    ids.iter()
        .map(|id| {
            let claim = s.claim_of(id)?;
            let (place, first) = match &claim {
                Some(row) => (queue::Place::Claimed(rule_claim(row)), row.3),
                None => match s.waiting_due(id)? {
                    Some((due, first)) => (queue::Place::Waiting(due), first),
                    None if s.is_dead(id)? => (queue::Place::Dead, None),
                    None => (queue::Place::Absent, None),
                },
            };
            let d = queue::enqueue(place, debounce, first, due, now);
            match d.write {
                EnqueueWrite::Keep => {}
                EnqueueWrite::Wait(t) => {
                    // When it was claimed (the claim had expired), the claim row goes.
                    if claim.is_some() {
                        s.unclaim(id)?;
                    }
                    s.wait(id, t, d.first)?;
                }
                EnqueueWrite::Again(t) => {
                    s.c.prepare_cached(
                        "UPDATE q_claimed SET again = ?5, again_first = ?6
                         WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4",
                    )?
                    .execute(params![s.ns, s.queue, s.shard, id, t, d.first])?;
                }
            }
            Ok((d.outcome, d.due))
        })
        .collect()
}

fn claim(
    s: &Shard<'_>,
    owner: &str,
    limit: u64,
    visibility_ms: u64,
    max_deliveries: Option<u64>,
    now: i64,
) -> Sql<ShardClaim> {
    s.reap(now)?;
    let deadline = queue::lease(now, visibility_ms);
    let mut del =
        s.c.prepare_cached("DELETE FROM q_waiting WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4")?;
    let mut ins = s.c.prepare_cached(
        "INSERT INTO q_claimed (ns, queue, shard, id, deadline, owner, again) VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL)",
    )?;
    let mut items = Vec::new();
    // Dead letters made by this call: at most `limit`.
    let mut died = 0;
    loop {
        // The scan reads the waiting ids due by now: those [`queue::deliverable`].
        let ask = (limit - items.len() as u64).min(limit - died);
        let batch = due(s, now, ask)?;
        let got = batch.len() as u64;
        for (id, due_at) in batch {
            del.execute(params![s.ns, s.queue, s.shard, id])?;
            if let Some(max) = max_deliveries {
                let count = s.count(&id)?;
                match queue::deliver(count, max) {
                    Deliver::Claim(n) => {
                        s.c.prepare_cached(
                            "INSERT INTO q_counts (ns, queue, shard, id, n) VALUES (?1, ?2, ?3, ?4, ?5)
                             ON CONFLICT (ns, queue, shard, id) DO UPDATE SET n = excluded.n",
                        )?
                        .execute(params![s.ns, s.queue, s.shard, id, n])?;
                    }
                    Deliver::Dead => {
                        s.drop_count(&id)?;
                        s.c.prepare_cached(
                            "INSERT INTO q_dead (ns, queue, shard, id, died, n) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                        )?
                        .execute(params![s.ns, s.queue, s.shard, id, now, count])?;
                        died += 1;
                        continue;
                    }
                }
            }
            ins.execute(params![s.ns, s.queue, s.shard, id, deadline, owner])?;
            items.push((id, due_at));
        }
        // Done: the shard had no more due ids, the batch is full, or the dead letters' bound.
        if got < ask || items.len() as u64 >= limit || died >= limit || max_deliveries.is_none() {
            break;
        }
    }
    Ok(ShardClaim { visible_until: deadline, items })
}

fn settle(
    s: &Shard<'_>,
    owner: &str,
    ids: &[String],
    action: SettleAction,
    now: i64,
) -> Sql<Vec<(SettleOutcome, Option<i64>)>> {
    let counted = !queue::keeps_count(action) && s.has_counts()?;
    let out = ids
        .iter()
        .map(|id| {
            let row = s.claim_of(id)?;
            let (outcome, due) = queue::settle(row.as_ref().map(rule_claim), owner, action, now);
            if let SettleOutcome::Done { .. } = outcome {
                s.unclaim(id)?;
                if counted {
                    s.drop_count(id)?;
                }
                if let Some(t) = due {
                    // The first-enqueue time of an enqueue made while claimed goes with it.
                    s.wait(id, t, row.as_ref().and_then(|r| r.3))?;
                }
            }
            Ok((outcome, due))
        })
        .collect::<Sql<Vec<_>>>()?;
    s.reap(now)?;
    Ok(out)
}

/// The shard's first `limit` waiting ids due by `until`, by due time (the shard's end checked
/// in Rust: see `checked_scan`).
fn due(s: &Shard<'_>, until: i64, limit: u64) -> Sql<Vec<(String, i64)>> {
    let mut items = Vec::new();
    if limit == 0 {
        return Ok(items);
    }
    s.scan(WAITING_BY_DUE, until, |k, _| {
        items.push((k.4.clone(), k.3));
        Ok((items.len() as u64) < limit)
    })?;
    Ok(items)
}

/// The shard's first `limit` waiting ids, by due time.
fn peek(s: &Shard<'_>, limit: u64, now: i64) -> Sql<(i64, Vec<(String, i64)>)> {
    s.reap(now)?;
    Ok((now, due(s, i64::MAX, limit)?))
}

/// The shard's counts, by reading its rows (a count in SQL over the shard would stop short at a
/// damaged record, see `checked_scan`): the same rows a count walks, each read once.
fn size(s: &Shard<'_>, now: i64) -> Sql<ShardSize> {
    s.reap(now)?;
    let mut size = ShardSize { shard: s.shard, waiting: 0, due: 0, claimed: 0, again: 0, dead: 0 };
    s.scan(WAITING_BY_DUE, i64::MAX, |k, _| {
        size.waiting += 1;
        size.due += u64::from(k.3 <= now);
        Ok(true)
    })?;
    s.scan(CLAIMED_BY_ID, i64::MAX, |_, r| {
        size.claimed += 1;
        size.again += u64::from(r.get_ref(5)?.data_type() != rusqlite::types::Type::Null);
        Ok(true)
    })?;
    s.scan(DEAD_BY_DIED, i64::MAX, |_, _| {
        size.dead += 1;
        Ok(true)
    })?;
    Ok(size)
}

/// The shard's first `limit` dead letters, by the time they died.
fn dead_letters(s: &Shard<'_>, limit: u64) -> Sql<Vec<ShardDead>> {
    let mut out = Vec::new();
    s.scan(DEAD_BY_DIED, i64::MAX, |k, r| {
        out.push(ShardDead { id: k.4.clone(), deliveries: r.get(5)?, died_at: k.3 });
        Ok((out.len() as u64) < limit)
    })?;
    Ok(out)
}

fn requeue_dead(s: &Shard<'_>, ids: &[String], now: i64) -> Sql<Vec<Option<i64>>> {
    ids.iter()
        .map(|id| {
            let gone = s
                .c
                .prepare_cached("DELETE FROM q_dead WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4")?
                .execute(params![s.ns, s.queue, s.shard, id])?;
            let due = queue::requeue(gone > 0, now);
            if let Some(t) = due {
                s.wait(id, t, None)?;
            }
            Ok(due)
        })
        .collect()
}

impl QueueBackend for Durable {
    fn enqueue<'a>(
        &'a self,
        at: ShardRef<'a>,
        ids: &'a [String],
        delay_ms: u64,
        debounce: Debounce,
    ) -> BoxFuture<'a, Vec<(EnqueueOutcome, i64)>> {
        self.write_tx(move |c, ns, now| with(c, ns, at, |s| enqueue(s, ids, delay_ms, debounce, now)))
    }
    fn claim<'a>(
        &'a self,
        at: ShardRef<'a>,
        owner: &'a str,
        limit: u64,
        visibility_ms: u64,
        max_deliveries: Option<u64>,
    ) -> BoxFuture<'a, ShardClaim> {
        self.write_tx(move |c, ns, now| {
            with(c, ns, at, |s| claim(s, owner, limit, visibility_ms, max_deliveries, now))
        })
    }
    fn settle<'a>(
        &'a self,
        at: ShardRef<'a>,
        owner: &'a str,
        ids: &'a [String],
        action: SettleAction,
    ) -> BoxFuture<'a, Vec<(SettleOutcome, Option<i64>)>> {
        self.write_tx(move |c, ns, now| with(c, ns, at, |s| settle(s, owner, ids, action, now)))
    }
    fn peek<'a>(&'a self, at: ShardRef<'a>, limit: u64) -> BoxFuture<'a, (i64, Vec<(String, i64)>)> {
        self.write_tx(move |c, ns, now| with(c, ns, at, |s| peek(s, limit, now)))
    }
    fn size<'a>(&'a self, at: ShardRef<'a>) -> BoxFuture<'a, ShardSize> {
        self.write_tx(move |c, ns, now| with(c, ns, at, |s| size(s, now)))
    }
    fn dead_letters<'a>(&'a self, at: ShardRef<'a>, limit: u64) -> BoxFuture<'a, Vec<ShardDead>> {
        self.write_tx(move |c, ns, _| with(c, ns, at, |s| dead_letters(s, limit)))
    }
    fn requeue_dead<'a>(&'a self, at: ShardRef<'a>, ids: &'a [String]) -> BoxFuture<'a, Vec<Option<i64>>> {
        self.write_tx(move |c, ns, now| with(c, ns, at, |s| requeue_dead(s, ids, now)))
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::durable::damage;
    use crate::backend::durable::{Durability, Durable};
    use crate::queue::{Debounce, QueueBackend, ShardRef};

    const IDS: usize = 3_000;
    const AT: ShardRef<'static> = ShardRef { queue: "q", shard: 0, shards: 1 };

    fn ids(prefix: &str) -> Vec<String> {
        (0..IDS).map(|i| format!("{prefix}-{i:05}")).collect()
    }

    /// A file with a queue of 3,000 waiting ids, due now or (`claimed`) in an hour, and with
    /// `claimed` 3,000 more whose claims have expired.
    async fn queue_file(name: &str, claimed: bool) -> std::path::PathBuf {
        let path = damage::temp(name);
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        let delay = if claimed { 3_600_000 } else { 0 };
        for chunk in ids("w").chunks(500) {
            d.enqueue(AT, chunk, delay, Debounce::Off).await.unwrap();
        }
        if claimed {
            for chunk in ids("c").chunks(500) {
                d.enqueue(AT, chunk, 0, Debounce::Off).await.unwrap();
            }
            let got = d.claim(AT, "o", 10_000, 1, None).await.unwrap();
            assert_eq!(got.items.len(), IDS);
        }
        drop(d);
        std::thread::sleep(std::time::Duration::from_millis(5));
        path
    }

    /// Damaged pages in the middle of a file of 3,000 waiting ids: a peek at them either returns
    /// all 3,000 or fails with ERR_STORAGE, never a short list.
    #[tokio::test]
    async fn a_damaged_page_fails_a_peek_instead_of_shortening_it() {
        let path = queue_file("queue.db", false).await;
        let failed = damage::failures(&path, damage::middle, async |byte, d| {
            let (_, waiting) = d.peek(AT, 10_000).await?;
            assert_eq!(waiting.len(), IDS, "damage at byte {byte}: a short peek, no error");
            Ok(())
        })
        .await;
        assert!(failed > 0, "some damage was found (else this test tells nothing)");
    }

    /// Damaged pages anywhere in a file of 3,000 ids waiting for an hour and 3,000 expired
    /// claims: a claim either gets the 3,000 returned from their expired claims (none of the
    /// others) or fails with ERR_STORAGE, never fewer.
    #[tokio::test]
    async fn a_damaged_page_fails_a_claim_instead_of_shortening_it() {
        let path = queue_file("claim.db", true).await;
        let failed = damage::failures(&path, damage::across, async |byte, d| {
            let got = d.claim(AT, "p", 10_000, 60_000, None).await?;
            assert_eq!(got.items.len(), IDS, "damage at byte {byte}: a short claim, no error");
            Ok(())
        })
        .await;
        assert!(failed > 0, "some damage was found (else this test tells nothing)");
    }

    /// The same file: the queue's size (after the expired claims are returned) either counts
    /// 6,000 waiting, 3,000 due and none claimed, or fails with ERR_STORAGE: neither a short
    /// count nor expired claims left behind.
    #[tokio::test]
    async fn a_damaged_page_fails_a_size_instead_of_shortening_it() {
        let path = queue_file("size.db", true).await;
        let failed = damage::failures(&path, damage::across, async |byte, d| {
            let size = d.size(AT).await?;
            let got = (size.waiting, size.due, size.claimed, size.again);
            assert_eq!(
                got,
                (2 * IDS as u64, IDS as u64, 0, 0),
                "damage at byte {byte}: a wrong size, no error"
            );
            Ok(())
        })
        .await;
        assert!(failed > 0, "some damage was found (else this test tells nothing)");
    }
}
