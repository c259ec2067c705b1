//! The one clock of the PostgreSQL backend: the database server's `clock_timestamp()`, in whole
//! milliseconds since the epoch, read once per transaction after its rows are locked (as the
//! Redis backend reads `TIME` in its scripts). Never the client's clock: every process that uses
//! the database decides leases at the same time.

use super::{Ctx, Fail, Sql};

/// The statements that read the clock, in ms and in µs (the Rate Limiter's unit; PostgreSQL's
/// timestamps have µs).
const NOW: &str = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8";
const NOW_US: &str = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::int8";

impl Ctx<'_, '_> {
    /// The database's time now (ms since the epoch).
    pub async fn now(&self) -> Sql<i64> {
        self.read_clock(NOW).await
    }
    /// The database's time now (µs since the epoch).
    pub async fn now_us(&self) -> Sql<i64> {
        self.read_clock(NOW_US).await
    }
    async fn read_clock(&self, sql: &str) -> Sql<i64> {
        let row =
            self.query_opt(sql, &[]).await?.ok_or_else(|| Fail::Corrupt("the clock read no row".into()))?;
        Ok(row.try_get(0)?)
    }
}
