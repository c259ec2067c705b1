//! The one clock of the PostgreSQL backend: the database server's `clock_timestamp()`, in whole
//! milliseconds since the epoch, read once per transaction after its rows are locked (as the
//! Redis backend reads `TIME` in its scripts). Never the client's clock: every process that uses
//! the database decides leases at the same time.

use super::{Ctx, Fail, Sql};

/// The statement that reads the clock.
const NOW: &str = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8";

impl Ctx<'_, '_> {
    /// The database's time now (ms since the epoch).
    pub async fn now(&self) -> Sql<i64> {
        let row =
            self.query_opt(NOW, &[]).await?.ok_or_else(|| Fail::Corrupt("the clock read no row".into()))?;
        Ok(row.try_get(0)?)
    }
}
