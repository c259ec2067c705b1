//! Dedup Queue on the durable store: the rules of the in-memory store (see `queue.rs`), with a
//! shard's waiting and claimed ids as rows. Every step is one transaction on one shard and first
//! returns that shard's expired claims to waiting.

use rusqlite::{params, Connection, OptionalExtension};

use super::{Durable, Fail, Sql};
use crate::backend::BoxFuture;
use crate::queue::{
    shard_mismatch, EnqueueOutcome, QueueBackend, SettleAction, SettleOutcome, ShardClaim, ShardRef,
    ShardSize,
};

/// A claim: (deadline, owner, due time of an enqueue made while claimed).
type ClaimRow = (i64, String, Option<i64>);

/// One shard of one queue in one namespace, inside a transaction.
struct Shard<'a> {
    c: &'a Connection,
    ns: &'a str,
    queue: &'a str,
    shard: u32,
}

impl Shard<'_> {
    /// Puts `id` in waiting, due at `due` (moving it when it is there already).
    fn wait(&self, id: &str, due: i64) -> Sql<()> {
        self.c
            .prepare_cached(
                "INSERT INTO q_waiting (ns, queue, shard, id, due) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (ns, queue, shard, id) DO UPDATE SET due = excluded.due",
            )?
            .execute(params![self.ns, self.queue, self.shard, id, due])?;
        Ok(())
    }

    fn waiting_due(&self, id: &str) -> Sql<Option<i64>> {
        Ok(self
            .c
            .prepare_cached(
                "SELECT due FROM q_waiting WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4",
            )?
            .query_row(params![self.ns, self.queue, self.shard, id], |r| r.get(0))
            .optional()?)
    }

    /// The claim of `id`.
    fn claim_of(&self, id: &str) -> Sql<Option<ClaimRow>> {
        Ok(self
            .c
            .prepare_cached(
                "SELECT deadline, owner, again FROM q_claimed WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4",
            )?
            .query_row(params![self.ns, self.queue, self.shard, id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?)
    }

    fn unclaim(&self, id: &str) -> Sql<()> {
        self.c
            .prepare_cached("DELETE FROM q_claimed WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4")?
            .execute(params![self.ns, self.queue, self.shard, id])?;
        Ok(())
    }

    /// Returns expired claims to waiting, due at their deadline (or at the due time of a later
    /// enqueue, when that is later).
    fn reap(&self, now: i64) -> Sql<()> {
        let expired: Vec<(String, i64, Option<i64>)> = self
            .c
            .prepare_cached(
                "SELECT id, deadline, again FROM q_claimed WHERE ns = ?1 AND queue = ?2 AND shard = ?3
                   AND deadline <= ?4 ORDER BY deadline, id",
            )?
            .query_map(params![self.ns, self.queue, self.shard, now], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        for (id, deadline, again) in expired {
            self.unclaim(&id)?;
            self.wait(&id, again.map_or(deadline, |a| a.max(deadline)))?;
        }
        Ok(())
    }

    fn count(&self, sql: &str, now: i64) -> Sql<u64> {
        let n: i64 = self
            .c
            .prepare_cached(sql)?
            .query_row(params![self.ns, self.queue, self.shard, now], |r| r.get(0))?;
        Ok(n as u64)
    }
}

/// Runs `f` on a shard after checking the caller's shard count against the queue's: while any
/// shard of the queue holds ids, every call must use the count those ids were enqueued with (a
/// row of `q_shards` per shard that holds ids, all with the queue's count); once none does, the
/// next write records the caller's count.
fn with<T>(
    c: &Connection,
    ns: &str,
    at: ShardRef<'_>,
    now: i64,
    f: impl FnOnce(&Shard<'_>) -> Sql<T>,
) -> Sql<T> {
    let s = Shard { c, ns, queue: at.queue, shard: at.shard };
    let stored: Option<u32> = c
        .prepare_cached("SELECT shards FROM q_shards WHERE ns = ?1 AND queue = ?2 LIMIT 1")?
        .query_row(params![ns, at.queue], |r| r.get(0))
        .optional()?;
    if let Some(stored) = stored.filter(|&n| n != at.shards) {
        return Err(Fail::Coded(shard_mismatch(at, stored as u64)));
    }
    let out = f(&s)?;
    let empty = s.count(
        "SELECT NOT EXISTS (SELECT 1 FROM q_waiting WHERE ns = ?1 AND queue = ?2 AND shard = ?3)
            AND NOT EXISTS (SELECT 1 FROM q_claimed WHERE ns = ?1 AND queue = ?2 AND shard = ?3) AND ?4 = ?4",
        now,
    )? == 1;
    if empty {
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
    debounce: bool,
    now: i64,
) -> Sql<Vec<(EnqueueOutcome, i64)>> {
    s.reap(now)?;
    let due = now + delay_ms as i64;
    let set_again = |id: &str| -> Sql<()> {
        s.c.prepare_cached(
            "UPDATE q_claimed SET again = ?5 WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4",
        )?
        .execute(params![s.ns, s.queue, s.shard, id, due])?;
        Ok(())
    };
    ids.iter()
        .map(|id| {
            if let Some((_, _, again)) = s.claim_of(id)? {
                let d = match again {
                    Some(a) if !debounce => a,
                    _ => {
                        set_again(id)?;
                        due
                    }
                };
                Ok((EnqueueOutcome::Claimed, d))
            } else if let Some(old) = s.waiting_due(id)? {
                if debounce {
                    s.wait(id, due)?;
                    Ok((EnqueueOutcome::Debounced, due))
                } else {
                    Ok((EnqueueOutcome::Duplicate, old))
                }
            } else {
                s.wait(id, due)?;
                Ok((EnqueueOutcome::Added, due))
            }
        })
        .collect()
}

fn claim(s: &Shard<'_>, owner: &str, limit: u64, visibility_ms: u64, now: i64) -> Sql<ShardClaim> {
    s.reap(now)?;
    let deadline = now + visibility_ms as i64;
    let items: Vec<(String, i64)> =
        s.c.prepare_cached(
            "SELECT id, due FROM q_waiting WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND due <= ?4
             ORDER BY due, id LIMIT ?5",
        )?
        .query_map(params![s.ns, s.queue, s.shard, now, limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut del =
        s.c.prepare_cached("DELETE FROM q_waiting WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND id = ?4")?;
    let mut ins = s.c.prepare_cached(
        "INSERT INTO q_claimed (ns, queue, shard, id, deadline, owner, again) VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL)",
    )?;
    for (id, _) in &items {
        del.execute(params![s.ns, s.queue, s.shard, id])?;
        ins.execute(params![s.ns, s.queue, s.shard, id, deadline, owner])?;
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
    let out = ids
        .iter()
        .map(|id| {
            Ok(match s.claim_of(id)? {
                None => (SettleOutcome::NotClaimed, None),
                Some((_, o, _)) if o != owner => (SettleOutcome::NotOwner, None),
                Some((deadline, _, _)) if deadline <= now => (SettleOutcome::Expired, None),
                Some((_, _, again)) => {
                    s.unclaim(id)?;
                    match action {
                        SettleAction::Ack => match again {
                            Some(d) => {
                                s.wait(id, d)?;
                                (SettleOutcome::Done { requeued: true }, Some(d))
                            }
                            None => (SettleOutcome::Done { requeued: false }, None),
                        },
                        SettleAction::Release { delay_ms } => {
                            let due = again.map_or(now + delay_ms as i64, |d| d.max(now + delay_ms as i64));
                            s.wait(id, due)?;
                            (SettleOutcome::Done { requeued: again.is_some() }, Some(due))
                        }
                    }
                }
            })
        })
        .collect::<Sql<Vec<_>>>()?;
    s.reap(now)?;
    Ok(out)
}

/// The shard's first `limit` waiting ids, by due time.
///
/// The shard's end is checked here, not in the SQL: SQLite ends a range scan silently (fewer
/// rows, no error) when the record it compares with the range's end is damaged, while reading
/// that record fails with `SQLITE_CORRUPT` (see `tracker::list`). So the scan has only a start,
/// reads up to the first row past the shard, and checks that the rows come in the index's order:
/// a damaged page fails the call instead of shortening the list.
fn peek(s: &Shard<'_>, limit: u64, now: i64) -> Sql<(i64, Vec<(String, i64)>)> {
    s.reap(now)?;
    let mut st = s.c.prepare_cached(
        "SELECT ns, queue, shard, due, id FROM q_waiting INDEXED BY q_waiting_due
         WHERE (ns, queue, shard) >= (?1, ?2, ?3) ORDER BY ns, queue, shard, due, id",
    )?;
    let mut rows = st.query(params![s.ns, s.queue, s.shard])?;
    type Row = (String, String, u32, i64, String);
    let read = |r: &rusqlite::Row<'_>| -> rusqlite::Result<Row> {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    };
    let (mut items, mut last): (Vec<(String, i64)>, Option<Row>) = (Vec::new(), None);
    let out_of_order = || Fail::Corrupt(format!("waiting ids out of order in queue {:?}", s.queue));
    while (items.len() as u64) < limit {
        let Some(r) = rows.next()? else { break };
        let row = read(r)?;
        if last.as_ref().is_some_and(|l| &row <= l) {
            return Err(out_of_order());
        }
        if (row.0.as_str(), row.1.as_str(), row.2) != (s.ns, s.queue, s.shard) {
            // Past the shard, unless the row after it is back before it.
            match rows.next()? {
                Some(next) if read(next)? <= row => return Err(out_of_order()),
                _ => break,
            }
        }
        items.push((row.4.clone(), row.3));
        last = Some(row);
    }
    Ok((now, items))
}

fn size(s: &Shard<'_>, now: i64) -> Sql<ShardSize> {
    s.reap(now)?;
    let waiting = "SELECT count(*) FROM q_waiting WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND ?4 = ?4";
    let due = "SELECT count(*) FROM q_waiting WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND due <= ?4";
    let claimed = "SELECT count(*) FROM q_claimed WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND ?4 = ?4";
    let again =
        "SELECT count(*) FROM q_claimed WHERE ns = ?1 AND queue = ?2 AND shard = ?3 AND again IS NOT NULL AND ?4 = ?4";
    Ok(ShardSize {
        shard: s.shard,
        waiting: s.count(waiting, now)?,
        due: s.count(due, now)?,
        claimed: s.count(claimed, now)?,
        again: s.count(again, now)?,
    })
}

impl QueueBackend for Durable {
    fn enqueue<'a>(
        &'a self,
        at: ShardRef<'a>,
        ids: &'a [String],
        delay_ms: u64,
        debounce: bool,
    ) -> BoxFuture<'a, Vec<(EnqueueOutcome, i64)>> {
        self.write_tx(move |c, ns, now| with(c, ns, at, now, |s| enqueue(s, ids, delay_ms, debounce, now)))
    }
    fn claim<'a>(
        &'a self,
        at: ShardRef<'a>,
        owner: &'a str,
        limit: u64,
        visibility_ms: u64,
    ) -> BoxFuture<'a, ShardClaim> {
        self.write_tx(move |c, ns, now| with(c, ns, at, now, |s| claim(s, owner, limit, visibility_ms, now)))
    }
    fn settle<'a>(
        &'a self,
        at: ShardRef<'a>,
        owner: &'a str,
        ids: &'a [String],
        action: SettleAction,
    ) -> BoxFuture<'a, Vec<(SettleOutcome, Option<i64>)>> {
        self.write_tx(move |c, ns, now| with(c, ns, at, now, |s| settle(s, owner, ids, action, now)))
    }
    fn peek<'a>(&'a self, at: ShardRef<'a>, limit: u64) -> BoxFuture<'a, (i64, Vec<(String, i64)>)> {
        self.write_tx(move |c, ns, now| with(c, ns, at, now, |s| peek(s, limit, now)))
    }
    fn size<'a>(&'a self, at: ShardRef<'a>) -> BoxFuture<'a, ShardSize> {
        self.write_tx(move |c, ns, now| with(c, ns, at, now, |s| size(s, now)))
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::durable::damage;
    use crate::backend::durable::{Durability, Durable};
    use crate::queue::{QueueBackend, ShardRef};

    const IDS: usize = 3_000;

    /// Damaged pages in the middle of a file of 3,000 waiting ids: a peek at them either returns
    /// all 3,000 or fails with ERR_STORAGE, never a short list.
    #[tokio::test]
    async fn a_damaged_page_fails_a_peek_instead_of_shortening_it() {
        let at = ShardRef { queue: "q", shard: 0, shards: 1 };
        let path = damage::temp("queue.db");
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        let ids: Vec<String> = (0..IDS).map(|i| format!("id-{i:05}")).collect();
        for chunk in ids.chunks(500) {
            d.enqueue(at, chunk, 0, false).await.unwrap();
        }
        drop(d);
        let failed = damage::failures(&path, async |byte, d| {
            let (_, waiting) = d.peek(at, 10_000).await?;
            assert_eq!(waiting.len(), IDS, "damage at byte {byte}: a short peek, no error");
            Ok(())
        })
        .await;
        assert!(failed > 0, "some damage was found (else this test tells nothing)");
    }
}
