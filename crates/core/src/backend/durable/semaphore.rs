//! Semaphore on the durable store: a row per holder, and a row per name keeping its last fencing
//! token across restarts, until it has been unused for `FENCE_KEEP_MS` (see `fences`).

use rusqlite::{params, Connection, OptionalExtension};

use super::fences::Fences;
use super::{purge, Durable, Sql};
use crate::backend::BoxFuture;
use crate::lock::{ExtendResult, Refusal, ReleaseResult, FENCE_KEEP_MS};
use crate::semaphore::{Holder, PermitAttempt, SemaphoreBackend, SemaphoreInfo};

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

/// What an acquire asks for.
struct Ask<'a> {
    owner: &'a str,
    permits: u64,
    lease_ms: u64,
    label: Option<&'a str>,
}

fn try_acquire(c: &Connection, ns: &str, name: &str, ask: Ask<'_>, now: i64) -> Sql<PermitAttempt> {
    sweep(c, ns, name, now)?;
    let (n, first): (i64, Option<i64>) = c
        .prepare_cached("SELECT count(*), min(exp) FROM sem_holders WHERE ns = ?1 AND name = ?2")?
        .query_row(params![ns, name], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let last = last_fence(c, ns, name)?;
    let Ask { owner, permits, lease_ms, label } = ask;
    if n as u64 >= permits {
        return Ok(PermitAttempt {
            acquired: false,
            fence: last,
            holders: n as u64,
            remaining_ms: first.map_or(0, |e| (e - now).max(0) as u64),
        });
    }
    let fence = last + 1;
    c.prepare_cached(
        "INSERT INTO sem_fences (ns, name, fence, keep) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (ns, name) DO UPDATE SET fence = excluded.fence, keep = max(keep, excluded.keep)",
    )?
    .execute(params![ns, name, fence as i64, now + lease_ms as i64 + FENCE_KEEP_MS as i64])?;
    let label = label.filter(|l| !l.is_empty());
    c.prepare_cached(
        "INSERT INTO sem_holders (ns, name, owner, fence, label, exp) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![ns, name, owner, fence as i64, label, now + lease_ms as i64])?;
    Ok(PermitAttempt { acquired: true, fence, holders: n as u64 + 1, remaining_ms: lease_ms })
}

fn release(c: &Connection, ns: &str, name: &str, owner: &str, now: i64) -> Sql<ReleaseResult> {
    sweep(c, ns, name, now)?;
    let n = c
        .prepare_cached("DELETE FROM sem_holders WHERE ns = ?1 AND name = ?2 AND owner = ?3")?
        .execute(params![ns, name, owner])?;
    Ok(if n > 0 {
        ReleaseResult { released: true, reason: None }
    } else {
        ReleaseResult { released: false, reason: Some(Refusal::NotHeld) }
    })
}

fn extend(c: &Connection, ns: &str, name: &str, owner: &str, lease_ms: u64, now: i64) -> Sql<ExtendResult> {
    sweep(c, ns, name, now)?;
    let n = c
        .prepare_cached("UPDATE sem_holders SET exp = ?4 WHERE ns = ?1 AND name = ?2 AND owner = ?3")?
        .execute(params![ns, name, owner, now + lease_ms as i64])?;
    Ok(if n > 0 {
        ExtendResult { extended: true, remaining_ms: lease_ms, reason: None }
    } else {
        ExtendResult { extended: false, remaining_ms: 0, reason: Some(Refusal::NotHeld) }
    })
}

fn inspect(c: &Connection, ns: &str, name: &str, now: i64) -> Sql<SemaphoreInfo> {
    let holders = c
        .prepare_cached(
            "SELECT fence, label, exp FROM sem_holders WHERE ns = ?1 AND name = ?2 AND exp > ?3
             ORDER BY exp, fence",
        )?
        .query_map(params![ns, name, now], |r| {
            Ok(Holder {
                fence: r.get::<_, i64>(0)? as u64,
                label: r.get(1)?,
                remaining_ms: (r.get::<_, i64>(2)? - now).max(0) as u64,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(SemaphoreInfo { name: name.to_string(), holders, fence: last_fence(c, ns, name)? })
}

impl SemaphoreBackend for Durable {
    fn try_acquire_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        permits: u64,
        lease_ms: u64,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, PermitAttempt> {
        self.write_tx(move |c, ns, now| {
            let a = try_acquire(c, ns, name, Ask { owner, permits, lease_ms, label }, now)?;
            self.sweep_fences(c, Fences::Semaphores, now)?;
            Ok(a)
        })
    }
    fn release_permit<'a>(&'a self, name: &'a str, owner: &'a str) -> BoxFuture<'a, ReleaseResult> {
        self.write_tx(move |c, ns, now| release(c, ns, name, owner, now))
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
