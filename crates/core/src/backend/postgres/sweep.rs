//! The sweep of expired rows, independent of writes: each client's task that, every
//! [`PostgresOptions::sweep_interval_ms`](super::PostgresOptions) (± a quarter, so clients
//! opened together do not tick together), deletes the rows of every table the writes purge
//! ([`Purged`]) that are past their expiry, in bounded slices.
//!
//! The writes' purge removes a slice of its own table's expired rows per write; a table (or a
//! group, a prefix) no one writes to would keep its expired rows until some write reached them.
//! The sweep removes them without any call:
//!
//! - one tick takes one pooled connection, and only a free one (it never waits for a connection
//!   a call needs: with every connection busy, the tick is skipped), reads the database's clock
//!   once, and runs at most [`SLICES_PER_TICK`] slices, each one autocommitted statement that
//!   deletes at most [`SWEEP_SLICE`] rows by the table's index on its expiry, skipping the rows
//!   other calls (and other clients' sweeps) hold (`FOR UPDATE SKIP LOCKED`): the statement of
//!   the writes' purge ([`Purged::statement`]) with a larger limit, so what is expired is what
//!   the rules say (a tracker record is kept `retentionMs` after it finished: its `x` is that
//!   end), and every statement is bounded by the client's `statement_timeout`; a call waiting
//!   for a connection ends the tick after its slice under way;
//! - the tables take turns (each tick starts at the next one), so a table with a million expired
//!   rows does not starve the others; a tick that ran out of slices with work left is followed by
//!   the next one after [`AGAIN`], not the interval;
//! - several clients sweep the same schema without waiting for each other: each skips the rows
//!   the other holds, and a row is deleted once;
//! - a failed tick (the database away, a timeout) is tried again at the next one, silently; the
//!   task ends with the client (`close()`, or the client dropped) and holds no connection after.

use std::sync::Mutex;
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::task::JoinHandle;

use super::Purged;

/// Rows one slice deletes, at most.
pub(crate) const SWEEP_SLICE: i64 = 500;
/// Slices one tick runs, at most.
pub(crate) const SLICES_PER_TICK: usize = 20;
/// The pause before the next tick when a tick left expired rows (it ran out of slices).
pub(crate) const AGAIN: Duration = Duration::from_millis(100);

/// The tables swept, in turn. Semaphore holders before their names: a name is forgotten only
/// once it has no live holder.
pub(crate) const TABLES: [Purged; 7] = [
    Purged::Items,
    Purged::Vals,
    Purged::Idem,
    Purged::Limiters,
    Purged::SemHolders,
    Purged::Sems,
    Purged::Locks,
];

/// The database's time (ms), as `clock` reads it.
const NOW: &str = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8";

/// `table`'s sweep statement (`$1`: the time now, `$2`: the slice): its purge's, with the limit
/// a parameter.
pub(crate) fn statement(table: Purged) -> String {
    table.statement().replace("LIMIT 64", "LIMIT $2")
}

/// What one tick did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Tick {
    /// Rows deleted.
    pub deleted: u64,
    /// Whether it ran out of slices before every table's expired rows were gone.
    pub more: bool,
}

/// One tick over `pool`'s database (schema `schema`), starting at table `first` (an index into
/// [`TABLES`]). `None`: no free connection (the calls have them all), or the pool is closed. A
/// call waiting for a connection ends the tick after its slice under way (`more`; the first slice
/// is always run, so a busy pool still sees the sweep progress).
pub(crate) async fn tick(
    pool: &Pool,
    schema: &str,
    first: usize,
) -> Result<Option<Tick>, tokio_postgres::Error> {
    let mut timeouts = pool.timeouts();
    timeouts.wait = Some(Duration::ZERO);
    let Ok(conn) = pool.timeout_get(&timeouts).await else { return Ok(None) };
    let clock = conn.prepare_cached(NOW).await?;
    let now: i64 = conn.query_one(&clock, &[]).await?.try_get(0)?;
    let mut done = Tick::default();
    let mut slices = 0;
    for k in 0..TABLES.len() {
        let table = TABLES[(first + k) % TABLES.len()];
        let st = conn.prepare_cached(&statement(table).replace("{s}", schema)).await?;
        loop {
            if slices == SLICES_PER_TICK || (slices > 0 && pool.status().waiting > 0) {
                done.more = true;
                return Ok(Some(done));
            }
            slices += 1;
            let n = conn.execute(&st, &[&now, &SWEEP_SLICE]).await?;
            done.deleted += n;
            if n < SWEEP_SLICE as u64 {
                break;
            }
        }
    }
    Ok(Some(done))
}

/// The sweeping task of one client.
pub(crate) struct Sweeper {
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Sweeper {
    /// Starts sweeping `pool`'s database every `every` (none: never).
    pub(crate) fn start(pool: Pool, schema: String, every: Option<Duration>) -> Sweeper {
        let task = match (every, tokio::runtime::Handle::try_current()) {
            (Some(every), Ok(rt)) => Some(rt.spawn(run(pool, schema, every))),
            _ => None,
        };
        Sweeper { task: Mutex::new(task) }
    }

    /// Stops the task for good (the connection of a tick under way is dropped with it).
    pub(crate) fn stop(&self) {
        if let Some(t) = crate::backend::guard(&self.task).take() {
            t.abort();
        }
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `every` ± a quarter.
fn jittered(every: Duration) -> Duration {
    every.mul_f64(0.75 + rand::random::<f64>() / 2.0)
}

async fn run(pool: Pool, schema: String, every: Duration) {
    let mut first = rand::random::<u32>() as usize % TABLES.len();
    loop {
        let pause = match tick(&pool, &schema, first).await {
            Ok(Some(Tick { more: true, .. })) => AGAIN.min(every),
            _ if pool.is_closed() => return,
            // Done, skipped, or failed (tried again at the next tick).
            _ => jittered(every),
        };
        first = (first + 1) % TABLES.len();
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sweep_statement_is_its_purge_with_the_slice_a_parameter() {
        for t in TABLES {
            assert_eq!(t.statement().matches("LIMIT 64").count(), 1);
            let s = statement(t);
            assert!(s.contains("ORDER BY") && s.contains("LIMIT $2") && !s.contains("LIMIT 64"), "{s}");
        }
    }

    #[test]
    fn the_pause_is_the_interval_give_or_take_a_quarter() {
        for _ in 0..100 {
            let p = jittered(Duration::from_millis(1000));
            assert!(p >= Duration::from_millis(750) && p <= Duration::from_millis(1250), "{p:?}");
        }
    }
}
