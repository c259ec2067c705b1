//! Concurrency Lock on PostgreSQL: one row per lock name in `locks`, kept after a release (its
//! `owner` NULL) so the name's fencing token keeps increasing. Each call is one transaction: the
//! row locked (`SELECT … FOR UPDATE`), the database's time read, [`rules::lock`] asked, the
//! decision written.
//!
//! A grant's fencing token is [`lock::next_fence`] with the database's clock in µs as the floor
//! (read with the lease's time, `clock_timestamp()`), as the Redis scripts take the Redis clock:
//! a replica promoted after an asynchronous failover, which lost the last grants' rows, still
//! grants tokens above every token the old primary handed out, as long as its clock is not behind
//! by more than the time between the last lost grant and the promotion. A name without a row is inserted (`ON CONFLICT DO NOTHING`); when another
//! call inserted it first, the transaction runs again and finds it (see the module `postgres`).
//!
//! A name unused for [`FENCE_KEEP_MS`] (its `exp`, the end of its last lease or its release, that
//! long ago) is forgotten, as the other stores forget it: its next token is the clock's again,
//! above the forgotten ones. Every
//! [`SWEEP_EVERY`]th acquisition of a client also removes up to 64 such rows (`Ctx::purge`, by the
//! index on `exp`), so the table does not keep a row per name ever used.
//!
//! [`FENCE_KEEP_MS`]: crate::lock::FENCE_KEEP_MS

use tokio_postgres::Row;

use std::sync::atomic::Ordering;

use tokio_postgres::types::ToSql;

use super::{clock, notify, read, text, transaction, Ctx, Postgres, Purged, Sql};
use crate::backend::BoxFuture;
use crate::lock::{Attempt, ExtendResult, LockBackend, LockInfo, ReleaseResult};
use crate::rules::lock::{self, Holder};
use crate::wakeup::Topic;

/// A lock's row.
struct Stored {
    owner: Option<String>,
    fence: u64,
    label: Option<String>,
    exp: i64,
}

impl Stored {
    fn from_row(r: &Row) -> Sql<Stored> {
        Ok(Stored {
            owner: r.try_get(0)?,
            fence: r.try_get::<_, i64>(1)? as u64,
            label: text(r, 2)?,
            exp: r.try_get(3)?,
        })
    }
    /// Its holder, when a lease was taken and not released (whether it still holds is
    /// [`lock::holds`]).
    fn holder(&self) -> Option<Holder<'_>> {
        let owner = self.owner.as_deref()?;
        Some(Holder { owner, fence: self.fence, label: self.label.as_deref(), expires_at: self.exp })
    }
}

/// One acquisition in this many sweeps forgotten names: each adds at most one row, each sweep
/// removes up to 64, so the sweep keeps ahead of new names.
pub(super) const SWEEP_EVERY: u32 = 32;

/// A lock's row, and the same locked until the transaction ends.
pub(super) const LOAD: &str = "SELECT owner, fence, label, exp FROM {s}.locks WHERE ns = $1 AND name = $2";
pub(super) const LOAD_LOCKED: &str =
    "SELECT owner, fence, label, exp FROM {s}.locks WHERE ns = $1 AND name = $2 FOR UPDATE";

/// The fast statement of an acquisition (see `fast`): [`lock::acquire`] takes a lock whose row
/// is absent or whose lease ended or was released at or before now, with the fence
/// [`lock::next_fence`] of the last (none: 0) and the clock in µs (`k.us`, read with the lease's
/// time `k.now` from one `clock_timestamp()`). `$1` ns, `$2` name, `$3` owner, `$4` label, `$5`
/// lease (ms). Its row: `owner, fence, label, exp, now, written`: when it took the lock, the new
/// fence (`written`); else the lock's row as the statement's snapshot holds it and the
/// statement's time, from which the call answers a refusal (the lock held then, see
/// [`Postgres::acquire_fast`]); no row when the snapshot has none (a row inserted meanwhile).
pub(super) const ACQUIRE_FAST: &str = "WITH c AS (SELECT extract(epoch FROM clock_timestamp()) AS e),
k AS (SELECT floor(e * 1000)::int8 AS now, floor(e * 1000000)::int8 AS us FROM c),
up AS (INSERT INTO {s}.locks AS l (ns, name, owner, fence, label, exp)
  SELECT $1, $2, $3, GREATEST(1, k.us), $4, k.now + $5 FROM k
  ON CONFLICT (ns, name) DO UPDATE SET owner = EXCLUDED.owner, fence = GREATEST(l.fence + 1, EXCLUDED.fence),
    label = EXCLUDED.label, exp = EXCLUDED.exp
  WHERE l.exp <= EXCLUDED.exp - $5
  RETURNING fence)
SELECT NULL::text, up.fence, NULL::bytea, NULL::int8, NULL::int8, true FROM up
UNION ALL
SELECT l.owner, l.fence, l.label, l.exp, k.now, false FROM k, {s}.locks l
  WHERE NOT EXISTS (SELECT FROM up) AND l.ns = $1 AND l.name = $2";

/// The fast statement of a release (see `fast`): [`lock::release`] passes the owner check when
/// the live lease's owner is the one given; the row is freed as [`free`] frees it, and the
/// release announced (`notify`, sent when the statement commits). The row is locked first (`r`)
/// and the time read after the lock (`k`), as the transaction reads them: a release that waited
/// for another call past its lease's end is refused, as the rule refuses it. `$1` ns, `$2` name,
/// `$3` owner, `$4` the channel, `$5` the payload. A row when released; none: refused, and the
/// transaction tells why.
pub(super) const RELEASE_FAST: &str =
    "WITH r AS (SELECT 1 FROM {s}.locks WHERE ns = $1 AND name = $2 FOR UPDATE),
k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now FROM (SELECT count(*) FROM r) z),
u AS (UPDATE {s}.locks AS l SET owner = NULL, label = NULL, exp = k.now FROM k
  WHERE l.ns = $1 AND l.name = $2 AND l.owner = $3 AND l.exp > k.now RETURNING 1)
SELECT pg_notify($4, $5)::text FROM u";

/// The fast statement of an extension (see `fast`): [`lock::extend`] extends the live lease of the
/// owner given to `lease` after now. The row is locked first (`r`) and the time read after the lock
/// (`k`), as the transaction reads them; the owner check then reads the row's newest version.
/// `$1` ns, `$2` name, `$3` owner, `$4` lease (ms). A row when extended; none: refused, and the
/// transaction tells why.
pub(super) const EXTEND_FAST: &str = "WITH r AS (SELECT 1 FROM {s}.locks WHERE ns = $1 AND name = $2 FOR UPDATE),
k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now FROM (SELECT count(*) FROM r) z),
u AS (UPDATE {s}.locks AS l SET exp = k.now + $4 FROM k
  WHERE l.ns = $1 AND l.name = $2 AND l.owner = $3 AND l.exp > k.now RETURNING 1)
SELECT 1 FROM u";

/// The row of lock `name`, locked until the transaction ends when `for_update`, and the
/// database's time read after it (one round trip, see `Ctx::query_then_now`).
async fn load(c: &Ctx<'_, '_>, name: &str, for_update: bool) -> Sql<(Option<Stored>, i64)> {
    let sql = if for_update { LOAD_LOCKED } else { LOAD };
    let (rows, now) = c.query_then_now(sql, &[&c.ns(), &name.as_bytes()]).await?;
    Ok((rows.first().map(Stored::from_row).transpose()?, now))
}

async fn try_acquire(
    c: &Ctx<'_, '_>,
    name: &str,
    owner: &str,
    lease_ms: u64,
    label: Option<&str>,
    sweep: bool,
) -> Sql<Attempt> {
    // The clock in µs: the fence floor; in ms: the lease's time.
    let (rows, now_us) = c.query_then_now_us(LOAD_LOCKED, &[&c.ns(), &name.as_bytes()]).await?;
    let row = rows.first().map(Stored::from_row).transpose()?;
    let now = clock::ms(now_us);
    let label = lock::label(label);
    let d = lock::acquire(
        row.as_ref().and_then(Stored::holder),
        row.as_ref().map_or(0, |r| r.fence),
        now_us.max(0) as u64,
        lease_ms,
        label,
        now,
    );
    if let Some((fence, exp)) = d.take {
        take(c, row.is_some(), name, owner, fence, label, exp).await?;
    }
    // After the write: this name's row is then live (taken now, or held by another), so the
    // sweep leaves it.
    if sweep {
        c.purge(Purged::Locks, now).await?;
    }
    Ok(d.attempt)
}

/// Writes the new holder of lock `name` (its row locked when `existed`, else absent).
async fn take(
    c: &Ctx<'_, '_>,
    existed: bool,
    name: &str,
    owner: &str,
    fence: u64,
    label: Option<&str>,
    exp: i64,
) -> Sql<()> {
    let (ns, name, label) = (c.ns(), name.as_bytes(), label.map(str::as_bytes));
    let fence = fence as i64;
    c.write_row(
        existed,
        "UPDATE {s}.locks SET owner = $3, fence = $4, label = $5, exp = $6 WHERE ns = $1 AND name = $2",
        "INSERT INTO {s}.locks (ns, name, owner, fence, label, exp) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (ns, name) DO NOTHING",
        &[&ns, &name, &owner, &fence, &label, &exp],
    )
    .await
}

async fn release(c: &Ctx<'_, '_>, name: &str, owner: &str) -> Sql<ReleaseResult> {
    let (row, now) = load(c, name, true).await?;
    let r = lock::release(row.as_ref().and_then(Stored::holder), owner, now);
    if r.released {
        // Sent together: one round trip.
        futures_util::future::try_join(free(c, name, now), c.notify(Topic::Lock, name)).await?;
    }
    Ok(r)
}

async fn release_fence(c: &Ctx<'_, '_>, name: &str, fence: u64) -> Sql<ReleaseResult> {
    let (row, now) = load(c, name, true).await?;
    let r = lock::release_fence(row.as_ref().and_then(Stored::holder), fence, now);
    if r.released {
        // Sent together: one round trip.
        futures_util::future::try_join(free(c, name, now), c.notify(Topic::Lock, name)).await?;
    }
    Ok(r)
}

/// Frees the lock's row (its fence stays, for the next grant).
async fn free(c: &Ctx<'_, '_>, name: &str, now: i64) -> Sql<()> {
    c.execute(
        "UPDATE {s}.locks SET owner = NULL, label = NULL, exp = $3 WHERE ns = $1 AND name = $2",
        &[&c.ns(), &name.as_bytes(), &now],
    )
    .await?;
    Ok(())
}

async fn extend(c: &Ctx<'_, '_>, name: &str, owner: &str, lease_ms: u64) -> Sql<ExtendResult> {
    let (row, now) = load(c, name, true).await?;
    let r = lock::extend(row.as_ref().and_then(Stored::holder), owner, lease_ms, now);
    if r.extended {
        c.execute(
            "UPDATE {s}.locks SET exp = $3 WHERE ns = $1 AND name = $2",
            &[&c.ns(), &name.as_bytes(), &(now + lease_ms as i64)],
        )
        .await?;
    }
    Ok(r)
}

async fn inspect(c: &Ctx<'_, '_>, name: &str) -> Sql<LockInfo> {
    let (row, now) = load(c, name, false).await?;
    let live = row.as_ref().and_then(Stored::holder).filter(|h| lock::holds(h.expires_at, now));
    Ok(match live {
        Some(h) => LockInfo {
            name: name.to_string(),
            locked: true,
            remaining_ms: (h.expires_at - now).max(0) as u64,
            fence: h.fence,
            holder: h.label.map(str::to_string),
        },
        None => LockInfo {
            name: name.to_string(),
            locked: false,
            remaining_ms: 0,
            fence: row.map_or(0, |r| r.fence),
            holder: None,
        },
    })
}

impl Postgres {
    /// An acquisition by [`ACQUIRE_FAST`]: the lock taken, or refused when the statement's
    /// snapshot shows it held at the statement's time (the rule, [`lock::acquire`], answers from
    /// the row: the holder's fence, the time left, its label); `None`: the transaction decides
    /// (the lock free in the snapshot but taken or changed since, or no row in it). A refusal so
    /// answered held when the statement began: the lease it read ends after the statement's time.
    async fn acquire_fast(
        &self,
        name: &str,
        owner: &str,
        lease_ms: u64,
        label: Option<&str>,
    ) -> crate::error::Result<Option<Attempt>> {
        let label = lock::label(label);
        let (ns, name_b, label_b, lease) =
            (self.ns.as_bytes(), name.as_bytes(), label.map(str::as_bytes), lease_ms as i64);
        let rows =
            self.statement_alone(ACQUIRE_FAST, &[&ns, &name_b, &owner, &label_b, &lease], None).await?;
        let Some(row) = rows.first() else { return Ok(None) };
        let read = |row: &Row| -> Sql<Option<Attempt>> {
            if row.try_get::<_, bool>(5)? {
                let fence: i64 = row.try_get(1)?;
                return Ok(Some(Attempt {
                    acquired: true,
                    fence: fence as u64,
                    remaining_ms: lease_ms,
                    holder: label.map(str::to_string),
                }));
            }
            let (stored, now) = (Stored::from_row(row)?, row.try_get::<_, i64>(4)?);
            // The fence floor (0) counts only for a grant, which is left to the transaction.
            let d = lock::acquire(stored.holder(), stored.fence, 0, lease_ms, label, now);
            Ok((!d.attempt.acquired).then_some(d.attempt))
        };
        let attempt = read(row).map_err(|f| self.failure(f))?;
        if attempt.is_some() {
            self.decided();
        }
        Ok(attempt)
    }
}

impl LockBackend for Postgres {
    fn try_acquire<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        lease_ms: u64,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, Attempt> {
        let sweep = self.acquisitions.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1;
        Box::pin(async move {
            // The sweep's turn goes by the transaction, which runs it.
            if !sweep {
                if let Some(a) = self.acquire_fast(name, owner, lease_ms, label).await? {
                    return Ok(a);
                }
            }
            transaction!(self, |c| try_acquire(&c, name, owner, lease_ms, label, sweep))
        })
    }
    fn release<'a>(&'a self, name: &'a str, owner: &'a str) -> BoxFuture<'a, ReleaseResult> {
        Box::pin(async move {
            let (ns, name_b) = (self.ns.as_bytes(), name.as_bytes());
            let payload = notify::payload(Topic::Lock, &self.ns, name);
            let params: [&(dyn ToSql + Sync); 5] = [&ns, &name_b, &owner, &self.schema, &payload];
            if !self.one_statement(RELEASE_FAST, &params, None).await?.is_empty() {
                return Ok(ReleaseResult { released: true, reason: None });
            }
            transaction!(self, |c| release(&c, name, owner))
        })
    }
    fn release_fence<'a>(&'a self, name: &'a str, fence: u64) -> BoxFuture<'a, ReleaseResult> {
        Box::pin(async move { transaction!(self, |c| release_fence(&c, name, fence)) })
    }
    fn extend<'a>(&'a self, name: &'a str, owner: &'a str, lease_ms: u64) -> BoxFuture<'a, ExtendResult> {
        Box::pin(async move {
            let (ns, name_b, lease) = (self.ns.as_bytes(), name.as_bytes(), lease_ms as i64);
            let params: [&(dyn ToSql + Sync); 4] = [&ns, &name_b, &owner, &lease];
            if !self.one_statement(EXTEND_FAST, &params, None).await?.is_empty() {
                return Ok(lock::extended(lease_ms));
            }
            transaction!(self, |c| extend(&c, name, owner, lease_ms))
        })
    }
    fn inspect<'a>(&'a self, name: &'a str) -> BoxFuture<'a, LockInfo> {
        Box::pin(async move { read!(self, |c| inspect(&c, name)) })
    }
}
