//! The one clock of the PostgreSQL backend: the database server's `clock_timestamp()`, in whole
//! milliseconds since the epoch, read once per transaction after its rows are locked (as the
//! Redis backend reads `TIME` in its scripts). Never the client's clock: every process that uses
//! the database decides leases at the same time. A lock's or a semaphore's grant reads it in µs:
//! its fence floor (`rules::lock::next_fence`), and in ms ([`ms`] of it) its lease.

use tokio_postgres::Row;

use super::{Ctx, Fail, Params, Sql};

/// The statements that read the clock, in ms and in µs (the Rate Limiter's unit; PostgreSQL's
/// timestamps have µs).
const NOW: &str = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8";
const NOW_US: &str = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::int8";

impl Ctx<'_, '_> {
    /// The database's time now (ms since the epoch).
    pub async fn now(&self) -> Sql<i64> {
        self.read_clock(NOW).await
    }
    /// Runs `sql` (typically one that locks rows, `… FOR UPDATE`) and then reads the database's
    /// time (ms), in one round trip: both statements are prepared first, then sent together (the
    /// driver sends a statement on its future's first poll and pipelines futures polled together;
    /// `try_join` polls `sql`'s first), and PostgreSQL runs them in the order sent, so the time is
    /// still read after the rows are locked.
    pub async fn query_then_now(&self, sql: &str, params: Params<'_>) -> Sql<(Vec<Row>, i64)> {
        self.query_then_clock(sql, params, NOW).await
    }
    /// As [`Ctx::query_then_now`], the time in µs.
    pub async fn query_then_now_us(&self, sql: &str, params: Params<'_>) -> Sql<(Vec<Row>, i64)> {
        self.query_then_clock(sql, params, NOW_US).await
    }
    async fn query_then_clock(&self, sql: &str, params: Params<'_>, clock: &str) -> Sql<(Vec<Row>, i64)> {
        let (st, clock) = (self.prepare(sql).await?, self.prepare(clock).await?);
        let (rows, now) =
            futures_util::future::try_join(self.run_query(&st, params), self.run_query_opt(&clock, &[]))
                .await?;
        let now = now.ok_or_else(|| Fail::Corrupt("the clock read no row".into()))?;
        Ok((rows, now.try_get(0)?))
    }
    async fn read_clock(&self, sql: &str) -> Sql<i64> {
        let row =
            self.query_opt(sql, &[]).await?.ok_or_else(|| Fail::Corrupt("the clock read no row".into()))?;
        Ok(row.try_get(0)?)
    }
}

/// The time in ms of a time in µs (as `NOW` reads it: whole ms, rounded down).
pub fn ms(us: i64) -> i64 {
    us.div_euclid(1000)
}
