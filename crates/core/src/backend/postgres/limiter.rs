//! Rate Limiter on PostgreSQL: a row per name in `limiters` holding its TAT and its pause end
//! (µs by the database's clock), and `exp` (ms): when both are reached, after which the row is
//! invisible (a TAT or pause end not after now is none) and purged. Each call is one transaction:
//! the row locked (`SELECT … FOR UPDATE`), the time read, [`rules::limiter`] asked, the
//! decision written (an absent row inserted, see the module `postgres`); a take runs its fast
//! statement first (`limiter_fast`), which decides all but one case.
//!
//! [`rules::limiter`]: crate::rules::limiter

use super::{read, transaction, Ctx, Fail, Postgres, Purged, Sql};
use crate::backend::BoxFuture;
use crate::limiter::{LimiterBackend, PauseEnd, Rule, Stored, Take};
use crate::rules::limiter::{decide, pause, Pause};

/// A limiter's row, and the same locked until the transaction ends.
pub(super) const LOAD: &str = "SELECT tat, until FROM {s}.limiters WHERE ns = $1 AND name = $2";
pub(super) const LOAD_LOCKED: &str =
    "SELECT tat, until FROM {s}.limiters WHERE ns = $1 AND name = $2 FOR UPDATE";

/// The row of limiter `name` (`Some((tat, pause end))` when it has one) locked until the
/// transaction ends, and the database's time (µs) read after the lock, in one round trip (see
/// `clock`).
async fn load_locked(c: &Ctx<'_, '_>, name: &str) -> Sql<(Option<(i64, Option<i64>)>, i64)> {
    let (rows, now) = c.query_then_now_us(LOAD_LOCKED, &[&c.ns(), &name.as_bytes()]).await?;
    let row = rows.first().map(|r| Ok::<_, Fail>((r.try_get(0)?, r.try_get(1)?))).transpose()?;
    Ok((row, now))
}

/// The ms at which a time of `us` is reached (rounded up).
fn ms_after(us: i64) -> i64 {
    (us + 999).div_euclid(1000)
}

async fn take(c: &Ctx<'_, '_>, name: &str, rule: Rule, cost: u64, max_wait_us: u64) -> Sql<Take> {
    let (row, now) = load_locked(c, name).await?;
    let (stored, paused) = row.map_or((None, None), |(t, p)| (Some(t), p));
    let (t, next) = decide(stored, paused, now, rule, cost, max_wait_us);
    if let Some(next) = next {
        c.write_row(
            row.is_some(),
            "UPDATE {s}.limiters SET tat = $3, exp = GREATEST(exp, $4) WHERE ns = $1 AND name = $2",
            "INSERT INTO {s}.limiters (ns, name, tat, until, exp) VALUES ($1, $2, $3, NULL, $4)
             ON CONFLICT (ns, name) DO NOTHING",
            &[&c.ns(), &name.as_bytes(), &next, &ms_after(next)],
        )
        .await?;
    }
    c.purge(Purged::Limiters, now.div_euclid(1000)).await?;
    Ok(t)
}

/// What a caller sees of a limiter stored as `row` at `now` (µs).
fn stored(row: Option<(i64, Option<i64>)>, now: i64) -> Stored {
    let (tat, until) = row.map_or((None, None), |(t, p)| (Some(t), p));
    Stored { now_us: now, tat_us: tat.filter(|t| *t > now), pause_us: until.filter(|p| *p > now) }
}

async fn pause_limiter(c: &Ctx<'_, '_>, name: &str, end: PauseEnd) -> Sql<(Pause, Stored)> {
    let (row, now) = load_locked(c, name).await?;
    let decision = pause(row.and_then(|(_, p)| p).filter(|p| *p > now), now, end);
    let mut after = row;
    if let Pause::Store(until) = decision {
        // A new row's TAT is now (equal to none): the row lives until the pause ends, so the
        // limiter is in use until then.
        let (ns, name_b, exp) = (c.ns(), name.as_bytes(), ms_after(until));
        if row.is_some() {
            c.execute(
                "UPDATE {s}.limiters SET until = $3, exp = GREATEST(exp, $4) WHERE ns = $1 AND name = $2",
                &[&ns, &name_b, &until, &exp],
            )
            .await?;
        } else {
            let n = c
                .execute(
                    "INSERT INTO {s}.limiters (ns, name, tat, until, exp) VALUES ($1, $2, $5, $3, $4)
                     ON CONFLICT (ns, name) DO NOTHING",
                    &[&ns, &name_b, &until, &exp, &now],
                )
                .await?;
            if n == 0 {
                return Err(Fail::Race);
            }
        }
        after = Some((row.map_or(now, |(t, _)| t), Some(until)));
    }
    Ok((decision, stored(after, now)))
}

async fn inspect(c: &Ctx<'_, '_>, name: &str) -> Sql<Stored> {
    let (rows, now) = c.query_then_now_us(LOAD, &[&c.ns(), &name.as_bytes()]).await?;
    let row = rows.first().map(|r| Ok::<_, Fail>((r.try_get(0)?, r.try_get(1)?))).transpose()?;
    Ok(stored(row, now))
}

impl LimiterBackend for Postgres {
    fn take<'a>(&'a self, name: &'a str, rule: Rule, cost: u64, max_wait_us: u64) -> BoxFuture<'a, Take> {
        Box::pin(async move {
            // Its fast statement first (`limiter_fast`).
            if let Some(t) = self.take_fast(name, rule, cost, max_wait_us).await? {
                return Ok(t);
            }
            transaction!(self, |c| take(&c, name, rule, cost, max_wait_us))
        })
    }
    fn inspect_limiter<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Stored> {
        Box::pin(async move { read!(self, |c| inspect(&c, name)) })
    }
    fn pause_limiter<'a>(&'a self, name: &'a str, end: PauseEnd) -> BoxFuture<'a, (Pause, Stored)> {
        Box::pin(async move { transaction!(self, |c| pause_limiter(&c, name, end)) })
    }
}
