//! Concurrency Lock on the durable store. A lock name keeps its row after release or expiry, so
//! its fencing token keeps increasing across restarts, until it has been unused for
//! `FENCE_KEEP_MS` (see `fences`).

use rusqlite::{params, Connection, OptionalExtension};

use super::fences::Fences;
use super::{Durable, Sql};
use crate::backend::BoxFuture;
use crate::lock::{Attempt, ExtendResult, LockBackend, LockInfo, ReleaseResult};
use crate::rules::lock::{self, Holder};

struct Row {
    owner: Option<String>,
    fence: u64,
    label: Option<String>,
    exp: i64,
}

impl Row {
    /// Its holder, when a lease was taken and not released (whether it still holds is
    /// [`lock::holds`]).
    fn holder(&self) -> Option<Holder<'_>> {
        let owner = self.owner.as_deref()?;
        Some(Holder { owner, fence: self.fence, label: self.label.as_deref(), expires_at: self.exp })
    }
    fn live(&self, now: i64) -> bool {
        self.holder().is_some_and(|h| lock::holds(h.expires_at, now))
    }
    fn remaining(&self, now: i64) -> u64 {
        (self.exp - now).max(0) as u64
    }
}

fn load(c: &Connection, ns: &str, name: &str) -> Sql<Option<Row>> {
    Ok(c.prepare_cached("SELECT owner, fence, label, exp FROM locks WHERE ns = ?1 AND name = ?2")?
        .query_row(params![ns, name], |r| {
            Ok(Row { owner: r.get(0)?, fence: r.get::<_, i64>(1)? as u64, label: r.get(2)?, exp: r.get(3)? })
        })
        .optional()?)
}

fn try_acquire(
    c: &Connection,
    ns: &str,
    name: &str,
    owner: &str,
    lease_ms: u64,
    label: Option<&str>,
    now: i64,
) -> Sql<Attempt> {
    let label = lock::label(label);
    let exp = now + lease_ms as i64;
    // Most acquisitions find the name's row free (released or run out): one statement takes
    // it (`lock::acquire` of a row no lease holds, in SQL). A name without a row, or one held,
    // is read first, as below.
    let taken: Option<i64> = c
        .prepare_cached(
            "UPDATE locks SET owner = ?3, fence = fence + 1, label = ?4, exp = ?5
             WHERE ns = ?1 AND name = ?2 AND (owner IS NULL OR exp <= ?6) RETURNING fence",
        )?
        .query_row(params![ns, name, owner, label, exp, now], |r| r.get(0))
        .optional()?;
    if let Some(fence) = taken {
        return Ok(Attempt {
            acquired: true,
            fence: fence as u64,
            remaining_ms: lease_ms,
            holder: label.map(str::to_string),
        });
    }
    let row = load(c, ns, name)?;
    let d = lock::acquire(
        row.as_ref().and_then(Row::holder),
        row.as_ref().map_or(0, |h| h.fence),
        lock::NO_FLOOR,
        lease_ms,
        label,
        now,
    );
    let Some((fence, exp)) = d.take else { return Ok(d.attempt) };
    c.prepare_cached(
        "INSERT INTO locks (ns, name, owner, fence, label, exp) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (ns, name) DO UPDATE SET owner = excluded.owner, fence = excluded.fence,
           label = excluded.label, exp = excluded.exp",
    )?
    .execute(params![ns, name, owner, fence as i64, label, exp])?;
    Ok(d.attempt)
}

fn release(c: &Connection, ns: &str, name: &str, owner: &str, now: i64) -> Sql<ReleaseResult> {
    // The usual case, a release by the holder, is one statement (`lock::release` of a row its
    // owner holds, in SQL); a refusal reads the row to say why.
    let freed = c
        .prepare_cached(
            "UPDATE locks SET owner = NULL, label = NULL, exp = ?4
             WHERE ns = ?1 AND name = ?2 AND owner = ?3 AND exp > ?4",
        )?
        .execute(params![ns, name, owner, now])?;
    if freed == 1 {
        return Ok(ReleaseResult { released: true, reason: None });
    }
    let row = load(c, ns, name)?;
    let r = lock::release(row.as_ref().and_then(Row::holder), owner, now);
    if r.released {
        free(c, ns, name, now)?;
    }
    Ok(r)
}

/// Frees the lock's row (its fence stays, for the next grant).
fn free(c: &Connection, ns: &str, name: &str, now: i64) -> Sql<()> {
    c.prepare_cached("UPDATE locks SET owner = NULL, label = NULL, exp = ?3 WHERE ns = ?1 AND name = ?2")?
        .execute(params![ns, name, now])?;
    Ok(())
}

fn release_fence(c: &Connection, ns: &str, name: &str, fence: u64, now: i64) -> Sql<ReleaseResult> {
    let row = load(c, ns, name)?;
    let r = lock::release_fence(row.as_ref().and_then(Row::holder), fence, now);
    if r.released {
        free(c, ns, name, now)?;
    }
    Ok(r)
}

fn extend(c: &Connection, ns: &str, name: &str, owner: &str, lease_ms: u64, now: i64) -> Sql<ExtendResult> {
    let row = load(c, ns, name)?;
    let r = lock::extend(row.as_ref().and_then(Row::holder), owner, lease_ms, now);
    if r.extended {
        c.prepare_cached("UPDATE locks SET exp = ?3 WHERE ns = ?1 AND name = ?2")?.execute(params![
            ns,
            name,
            now + lease_ms as i64
        ])?;
    }
    Ok(r)
}

fn inspect(c: &Connection, ns: &str, name: &str, now: i64) -> Sql<LockInfo> {
    let row = load(c, ns, name)?;
    Ok(match row {
        Some(h) if h.live(now) => LockInfo {
            name: name.to_string(),
            locked: true,
            remaining_ms: h.remaining(now),
            fence: h.fence,
            holder: h.label,
        },
        other => LockInfo {
            name: name.to_string(),
            locked: false,
            remaining_ms: 0,
            fence: other.map_or(0, |h| h.fence),
            holder: None,
        },
    })
}

impl LockBackend for Durable {
    fn try_acquire<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        lease_ms: u64,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, Attempt> {
        self.write_tx(move |c, ns, now| {
            let a = try_acquire(c, ns, name, owner, lease_ms, label, now)?;
            self.sweep_fences(c, Fences::Locks, now)?;
            Ok(a)
        })
    }
    fn release<'a>(&'a self, name: &'a str, owner: &'a str) -> BoxFuture<'a, ReleaseResult> {
        self.write_tx(move |c, ns, now| release(c, ns, name, owner, now))
    }
    fn release_fence<'a>(&'a self, name: &'a str, fence: u64) -> BoxFuture<'a, ReleaseResult> {
        self.write_tx(move |c, ns, now| release_fence(c, ns, name, fence, now))
    }
    fn extend<'a>(&'a self, name: &'a str, owner: &'a str, lease_ms: u64) -> BoxFuture<'a, ExtendResult> {
        self.write_tx(move |c, ns, now| extend(c, ns, name, owner, lease_ms, now))
    }
    fn inspect<'a>(&'a self, name: &'a str) -> BoxFuture<'a, LockInfo> {
        self.read_tx(move |c, ns, now| inspect(c, ns, name, now))
    }
}
