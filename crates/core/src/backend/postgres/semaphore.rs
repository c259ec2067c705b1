//! Semaphore on PostgreSQL: a row per name in `sems` (its last fencing token) and a row per
//! holder in `sem_holders`. Every call on a name first locks the name's row (`SELECT … FOR
//! UPDATE`), so the count of live holders an acquisition decides on cannot change under it (an
//! extension or release of another holder waits for it); then it reads the database's time, asks
//! [`rules::semaphore`], and writes. A name without a row has no holders: its first acquisition
//! inserts the row (`ON CONFLICT DO NOTHING`; another call's insert first makes the transaction run
//! again, see the module `postgres`).
//!
//! A grant's fencing token is [`lock::next_fence`] with the database's clock in µs as the floor,
//! as for the lock (see `lock`): above every token handed out before a failover that lost the
//! name's row's last writes, as long as the new primary's clock is not behind by more than the
//! time between the last lost grant and the promotion.
//!
//! A name's fence is kept until `keep` (`FENCE_KEEP_MS` past the end of its longest lease, as the
//! other stores keep it) and while it has live holders; every [`SWEEP_EVERY`]th acquisition of a
//! client removes up to 64 names past that (`Ctx::purge`), so their next token is the clock's
//! again, above the forgotten ones.
//!
//! [`rules::semaphore`]: crate::rules::semaphore

use std::sync::atomic::Ordering;

use tokio_postgres::types::ToSql;

use super::lock::SWEEP_EVERY;
use super::{clock, read, text, transaction, Ctx, Fail, Postgres, Purged, Sql};
use crate::backend::BoxFuture;
use crate::lock::{ExtendResult, ReleaseResult};
use crate::rules::{lock, semaphore};
use crate::semaphore::{Holder, PerKey, PermitAttempt, SemaphoreBackend, SemaphoreInfo};
use crate::wakeup::Topic;

/// A name's row (its last fence), locked until the transaction ends, and unlocked; the live
/// holders of a name.
pub(super) const NAME_LOCKED: &str = "SELECT fence FROM {s}.sems WHERE ns = $1 AND name = $2 FOR UPDATE";
pub(super) const NAME: &str = "SELECT fence FROM {s}.sems WHERE ns = $1 AND name = $2";
/// The database's time in µs, and the holders of a name live at that time (in ms, as
/// [`clock::ms`] reads it), first lease end first: a row per holder (its fence, label, lease end
/// and key), or one row with NULLs for none. Sent right after [`NAME_LOCKED`] or [`NAME`], in one
/// round trip (see [`name_then_holders`]).
pub(super) const CLOCK_AND_HOLDERS: &str = "SELECT t.us, h.fence, h.label, h.exp, h.k
    FROM (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::int8 AS us) t
    LEFT JOIN {s}.sem_holders h ON h.ns = $1 AND h.name = $2 AND h.exp > div(t.us, 1000)
    ORDER BY h.exp, h.fence";

/// A live holder: its fence, label, lease end and key.
type Row = (u64, Option<String>, i64, Option<String>);

/// What an acquire asks for.
struct Ask<'a> {
    owner: &'a str,
    permits: u64,
    per_key: Option<PerKey<'a>>,
    lease_ms: u64,
    label: Option<&'a str>,
}

/// The name's row (locked until the transaction ends when `for_update`), then the database's
/// time (µs) and the name's live holders at it, in one round trip: both statements are prepared
/// first, then sent together (`try_join` polls the name's first), and PostgreSQL runs them in the
/// order sent. So the time is read after the lock, and the holders by a statement that begins
/// after it: its snapshot holds every holder the calls this one waited for wrote (one statement
/// that locked and counted would read them as its snapshot held them before the wait, see
/// `semaphore_fast`). Returns the name's last fence (`None`: it has no row), the time in µs and
/// the holders.
async fn name_then_holders(
    c: &Ctx<'_, '_>,
    name: &str,
    for_update: bool,
) -> Sql<(Option<u64>, i64, Vec<Row>)> {
    let first = if for_update { NAME_LOCKED } else { NAME };
    let (first, then) = (c.prepare(first).await?, c.prepare(CLOCK_AND_HOLDERS).await?);
    let params: [&(dyn ToSql + Sync); 2] = [&c.ns(), &name.as_bytes()];
    let (last, rows) =
        futures_util::future::try_join(c.run_query_opt(&first, &params), c.run_query(&then, &params)).await?;
    let last = match last {
        Some(r) => Some(r.try_get::<_, i64>(0)? as u64),
        None => None,
    };
    let now_us: i64 =
        rows.first().ok_or_else(|| Fail::Corrupt("the clock read no row".into()))?.try_get(0)?;
    let mut held = Vec::with_capacity(rows.len());
    for r in &rows {
        if let Some(fence) = r.try_get::<_, Option<i64>>(1)? {
            held.push((fence as u64, text(r, 2)?, r.try_get(3)?, text(r, 4)?));
        }
    }
    Ok((last, now_us, held))
}

/// An acquisition in three round trips besides `BEGIN`: the lock, the clock and the holders
/// ([`name_then_holders`]); the rule; then every write and the purges sent together; then `COMMIT`.
async fn try_acquire(c: &Ctx<'_, '_>, name: &str, ask: Ask<'_>, sweep: bool) -> Sql<PermitAttempt> {
    // The clock in µs: the fence floor; in ms: the leases' time.
    let (last, now_us, held) = name_then_holders(c, name, true).await?;
    let now = clock::ms(now_us);
    let Ask { owner, permits, per_key, lease_ms, label } = ask;
    let key = per_key.map(|k| k.key);
    let limits = PerKey::limits(per_key, permits);
    let floor = now_us.max(0) as u64;
    let d = semaphore::acquire(
        held.iter().map(|h| (h.2, key.is_some() && h.3.as_deref() == key)),
        last.unwrap_or(0),
        floor,
        limits,
        lease_ms,
        now,
    );
    let (ns, name_b) = (c.ns(), name.as_bytes());
    // Every statement is prepared first, so each is sent on its future's first poll and
    // PostgreSQL runs them in the order below: the writes, then the name's ended leases, then a
    // slice of others' (this call's own row is live), then the names' sweep (after the write:
    // this name's row is then kept, taken now with `keep` ahead, or it has live holders).
    let (take, fence, exp) = match d.take {
        Some((fence, exp)) => {
            let name_row = if last.is_some() { SEM_UPDATE } else { SEM_INSERT };
            let holder = if key.is_some() { HOLDER_INSERT_KEY } else { HOLDER_INSERT };
            (Some((c.prepare(name_row).await?, c.prepare(holder).await?)), fence as i64, exp)
        }
        None => (None, 0, 0),
    };
    let ended = c.prepare(ENDED).await?;
    let purge = c.prepare(Purged::SemHolders.statement()).await?;
    let names = if sweep { Some(c.prepare(Purged::Sems.statement()).await?) } else { None };
    let keep = lock::fence_kept_until(now, lease_ms);
    let label = lock::label(label).map(str::as_bytes);
    let key_b = key.map(str::as_bytes);
    let writes = async {
        let Some((name_row, holder)) = &take else { return Ok(()) };
        let name_params: [&(dyn ToSql + Sync); 4] = [&ns, &name_b, &fence, &keep];
        let holder_params: [&(dyn ToSql + Sync); 7] = [&ns, &name_b, &owner, &fence, &label, &exp, &key_b];
        let n = holder_params.len() - usize::from(key.is_none());
        let (written, _) = futures_util::future::try_join(
            c.run_execute(name_row, &name_params),
            c.run_execute(holder, &holder_params[..n]),
        )
        .await?;
        // A name found without a row that another call inserted since: run again.
        if last.is_none() && written == 0 {
            return Err(Fail::Race);
        }
        Ok(())
    };
    let ended_params: [&(dyn ToSql + Sync); 3] = [&ns, &name_b, &now];
    futures_util::future::try_join4(
        writes,
        async { Ok(c.run_execute(&ended, &ended_params).await?) },
        async { Ok(c.run_execute(&purge, &[&now]).await?) },
        async {
            match &names {
                Some(st) => Ok(c.run_execute(st, &[&now]).await?),
                None => Ok(0),
            }
        },
    )
    .await?;
    Ok(d.attempt)
}

/// An acquisition's writes: the name's row (its new fence, and how long it is kept) updated, or
/// inserted for a name without one (nothing written: another call inserted it since); the new
/// holder, without or with a key; the name's ended leases removed.
const SEM_UPDATE: &str =
    "UPDATE {s}.sems SET fence = $3, keep = GREATEST(keep, $4) WHERE ns = $1 AND name = $2";
const SEM_INSERT: &str =
    "INSERT INTO {s}.sems (ns, name, fence, keep) VALUES ($1, $2, $3, $4) ON CONFLICT (ns, name) DO NOTHING";
const HOLDER_INSERT: &str =
    "INSERT INTO {s}.sem_holders (ns, name, owner, fence, label, exp) VALUES ($1, $2, $3, $4, $5, $6)";
const HOLDER_INSERT_KEY: &str =
    "INSERT INTO {s}.sem_holders (ns, name, owner, fence, label, exp, k) VALUES ($1, $2, $3, $4, $5, $6, $7)";
const ENDED: &str = "DELETE FROM {s}.sem_holders WHERE ns = $1 AND name = $2 AND exp <= $3";

/// The name's row locked, then the time (ms), in one round trip (see `clock`); `None`: the name
/// has no row.
async fn locked_now(c: &Ctx<'_, '_>, name: &str) -> Sql<Option<i64>> {
    let (rows, now) = c.query_then_now(NAME_LOCKED, &[&c.ns(), &name.as_bytes()]).await?;
    Ok((!rows.is_empty()).then_some(now))
}

async fn release(c: &Ctx<'_, '_>, name: &str, owner: &str) -> Sql<ReleaseResult> {
    let Some(now) = locked_now(c, name).await? else {
        return Ok(semaphore::release(false));
    };
    let n = c
        .execute(
            "DELETE FROM {s}.sem_holders WHERE ns = $1 AND name = $2 AND owner = $3 AND exp > $4",
            &[&c.ns(), &name.as_bytes(), &owner, &now],
        )
        .await?;
    if n > 0 {
        c.notify(Topic::Permit, name).await?;
    }
    Ok(semaphore::release(n > 0))
}

async fn release_fence(c: &Ctx<'_, '_>, name: &str, fence: u64) -> Sql<ReleaseResult> {
    let (last, now_us, held) = name_then_holders(c, name, true).await?;
    if last.is_none() {
        return Ok(semaphore::release_fence([], fence, 0));
    }
    let now = clock::ms(now_us);
    let r = semaphore::release_fence(held.iter().map(|h| (h.0, h.2)), fence, now);
    if r.released {
        let delete = async {
            c.execute(
                "DELETE FROM {s}.sem_holders WHERE ns = $1 AND name = $2 AND fence = $3",
                &[&c.ns(), &name.as_bytes(), &(fence as i64)],
            )
            .await
        };
        // Waiters are woken as by a release (sent together: one round trip).
        futures_util::future::try_join(delete, c.notify(Topic::Permit, name)).await?;
    }
    Ok(r)
}

async fn extend(c: &Ctx<'_, '_>, name: &str, owner: &str, lease_ms: u64) -> Sql<ExtendResult> {
    let Some(now) = locked_now(c, name).await? else {
        return Ok(semaphore::extend(false, lease_ms));
    };
    let n = c
        .execute(
            "UPDATE {s}.sem_holders SET exp = $5 WHERE ns = $1 AND name = $2 AND owner = $3 AND exp > $4",
            &[&c.ns(), &name.as_bytes(), &owner, &now, &(now + lease_ms as i64)],
        )
        .await?;
    Ok(semaphore::extend(n > 0, lease_ms))
}

async fn inspect(c: &Ctx<'_, '_>, name: &str) -> Sql<SemaphoreInfo> {
    let (fence, now_us, held) = name_then_holders(c, name, false).await?;
    let (fence, now) = (fence.unwrap_or(0), clock::ms(now_us));
    let holders = held
        .into_iter()
        .map(|(fence, label, exp, key)| Holder { fence, label, key, remaining_ms: (exp - now).max(0) as u64 })
        .collect();
    Ok(SemaphoreInfo { name: name.to_string(), holders, fence })
}

impl SemaphoreBackend for Postgres {
    fn try_acquire_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        permits: u64,
        per_key: Option<PerKey<'a>>,
        lease_ms: u64,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, PermitAttempt> {
        let sweep = self.permits.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1;
        Box::pin(async move {
            transaction!(self, |c| try_acquire(
                &c,
                name,
                Ask { owner, permits, per_key, lease_ms, label },
                sweep
            ))
        })
    }
    fn release_permit<'a>(&'a self, name: &'a str, owner: &'a str) -> BoxFuture<'a, ReleaseResult> {
        Box::pin(async move {
            if let Some(r) = self.release_permit_fast(name, owner).await? {
                return Ok(r);
            }
            transaction!(self, |c| release(&c, name, owner))
        })
    }
    fn release_permit_fence<'a>(&'a self, name: &'a str, fence: u64) -> BoxFuture<'a, ReleaseResult> {
        Box::pin(async move { transaction!(self, |c| release_fence(&c, name, fence)) })
    }
    fn extend_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        lease_ms: u64,
    ) -> BoxFuture<'a, ExtendResult> {
        Box::pin(async move {
            if let Some(r) = self.extend_permit_fast(name, owner, lease_ms).await? {
                return Ok(r);
            }
            transaction!(self, |c| extend(&c, name, owner, lease_ms))
        })
    }
    fn inspect_semaphore<'a>(&'a self, name: &'a str) -> BoxFuture<'a, SemaphoreInfo> {
        Box::pin(async move { read!(self, |c| inspect(&c, name)) })
    }
}
