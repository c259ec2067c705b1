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

use super::lock::SWEEP_EVERY;
use super::{clock, read, text, transaction, Ctx, Postgres, Purged, Sql};
use crate::backend::BoxFuture;
use crate::lock::{ExtendResult, ReleaseResult};
use crate::rules::{lock, semaphore};
use crate::semaphore::{Holder, PerKey, PermitAttempt, SemaphoreBackend, SemaphoreInfo};
use crate::wakeup::Topic;

/// A name's row (its last fence), locked until the transaction ends, and unlocked; the live
/// holders of a name.
pub(super) const NAME_LOCKED: &str = "SELECT fence FROM {s}.sems WHERE ns = $1 AND name = $2 FOR UPDATE";
pub(super) const NAME: &str = "SELECT fence FROM {s}.sems WHERE ns = $1 AND name = $2";
pub(super) const HOLDERS: &str =
    "SELECT fence, label, exp, k FROM {s}.sem_holders WHERE ns = $1 AND name = $2 AND exp > $3 ORDER BY exp, fence";

/// A live holder: its fence, label, lease end and key.
type Row = (u64, Option<String>, i64, Option<String>);

/// The last fence of `name` (`None`: it has no row).
async fn last_fence(c: &Ctx<'_, '_>, name: &str, for_update: bool) -> Sql<Option<u64>> {
    let sql = if for_update { NAME_LOCKED } else { NAME };
    match c.query_opt(sql, &[&c.ns(), &name.as_bytes()]).await? {
        Some(r) => Ok(Some(r.try_get::<_, i64>(0)? as u64)),
        None => Ok(None),
    }
}

/// The live holders of `name` at `now`: (fence, label, lease end, key), first lease end first.
async fn holders(c: &Ctx<'_, '_>, name: &str, now: i64) -> Sql<Vec<Row>> {
    let rows = c.query(HOLDERS, &[&c.ns(), &name.as_bytes(), &now]).await?;
    rows.iter()
        .map(|r| Ok((r.try_get::<_, i64>(0)? as u64, text(r, 1)?, r.try_get(2)?, text(r, 3)?)))
        .collect()
}

/// What an acquire asks for.
struct Ask<'a> {
    owner: &'a str,
    permits: u64,
    per_key: Option<PerKey<'a>>,
    lease_ms: u64,
    label: Option<&'a str>,
}

async fn try_acquire(c: &Ctx<'_, '_>, name: &str, ask: Ask<'_>, sweep: bool) -> Sql<PermitAttempt> {
    let last = last_fence(c, name, true).await?;
    // The clock in µs: the fence floor; in ms: the leases' time.
    let now_us = c.now_us().await?;
    let now = clock::ms(now_us);
    let held = holders(c, name, now).await?;
    let Ask { owner, permits, per_key, lease_ms, label } = ask;
    let key = per_key.map(|k| k.key);
    let same = |h: &Row| key.is_some() && h.3.as_deref() == key;
    let limits = PerKey::limits(per_key, permits);
    let floor = now_us.max(0) as u64;
    let d = semaphore::acquire(
        held.iter().map(|h| (h.2, same(h))),
        last.unwrap_or(0),
        floor,
        limits,
        lease_ms,
        now,
    );
    if let Some((fence, exp)) = d.take {
        let (ns, name_b, fence) = (c.ns(), name.as_bytes(), fence as i64);
        let keep = lock::fence_kept_until(now, lease_ms);
        c.write_row(
            last.is_some(),
            "UPDATE {s}.sems SET fence = $3, keep = GREATEST(keep, $4) WHERE ns = $1 AND name = $2",
            "INSERT INTO {s}.sems (ns, name, fence, keep) VALUES ($1, $2, $3, $4) ON CONFLICT (ns, name) DO NOTHING",
            &[&ns, &name_b, &fence, &keep],
        )
        .await?;
        let label = lock::label(label).map(str::as_bytes);
        match key.map(str::as_bytes) {
            None => {
                c.execute(
                    "INSERT INTO {s}.sem_holders (ns, name, owner, fence, label, exp) VALUES ($1, $2, $3, $4, $5, $6)",
                    &[&ns, &name_b, &owner, &fence, &label, &exp],
                )
                .await?
            }
            Some(key) => {
                c.execute(
                    "INSERT INTO {s}.sem_holders (ns, name, owner, fence, label, exp, k) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    &[&ns, &name_b, &owner, &fence, &label, &exp, &key],
                )
                .await?
            }
        };
    }
    // The name's ended leases, then a slice of others' (after this call's own row is written:
    // it is live).
    c.execute(
        "DELETE FROM {s}.sem_holders WHERE ns = $1 AND name = $2 AND exp <= $3",
        &[&c.ns(), &name.as_bytes(), &now],
    )
    .await?;
    c.purge(Purged::SemHolders, now).await?;
    // After the write: this name's row is then kept (taken now: `keep` is ahead), or it has live
    // holders (refused), so the sweep leaves it.
    if sweep {
        c.purge(Purged::Sems, now).await?;
    }
    Ok(d.attempt)
}

async fn release(c: &Ctx<'_, '_>, name: &str, owner: &str) -> Sql<ReleaseResult> {
    if last_fence(c, name, true).await?.is_none() {
        return Ok(semaphore::release(false));
    }
    let now = c.now().await?;
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
    if last_fence(c, name, true).await?.is_none() {
        return Ok(semaphore::release_fence([], fence, 0));
    }
    let now = c.now().await?;
    let held = holders(c, name, now).await?;
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
    if last_fence(c, name, true).await?.is_none() {
        return Ok(semaphore::extend(false, lease_ms));
    }
    let now = c.now().await?;
    let n = c
        .execute(
            "UPDATE {s}.sem_holders SET exp = $5 WHERE ns = $1 AND name = $2 AND owner = $3 AND exp > $4",
            &[&c.ns(), &name.as_bytes(), &owner, &now, &(now + lease_ms as i64)],
        )
        .await?;
    Ok(semaphore::extend(n > 0, lease_ms))
}

async fn inspect(c: &Ctx<'_, '_>, name: &str) -> Sql<SemaphoreInfo> {
    let fence = last_fence(c, name, false).await?.unwrap_or(0);
    let now = c.now().await?;
    let holders = holders(c, name, now)
        .await?
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
