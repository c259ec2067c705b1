//! The embedded backend: an in-process store, one per process, shared by every client made in
//! that process (so two n8n executions in one n8n instance see the same locks and items).
//! Each key prefix is its own namespace.
//!
//! Time comes from one clock, [`now_ms`]: the monotonic clock, mapped to milliseconds since the
//! Unix epoch at its first use. All state lives in this one process, so leases, visibility
//! timeouts and expiries are measured on a clock that never jumps: a wall-clock step (NTP, a
//! manual change) neither ends nor prolongs a lease. Times shown to callers (`leaseExpiresAt`,
//! `dueAt`, `expiresAt`, …) are epoch ms on that clock: the wall clock as it was when the store
//! first read the time, plus the monotonic time since.

mod batch_run;
mod catalog;
mod chunked;
mod expiries;
mod expiry_buckets;
mod id_slots;
mod inline_id;
mod limiter;
mod lock;
mod named;
mod place_order;
mod queue;
mod ranked;
mod semaphore;
mod state;
mod tracker;

/// Numbers below `m` from a fixed seed (a linear congruential generator): the inputs of the
/// randomized tests, the same on every run.
#[cfg(test)]
fn seeded(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |m| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % m
    }
}

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub(crate) use crate::backend::guard;
use crate::backend::Backend;

pub use limiter::LimiterTable;
pub use lock::LockTable;
pub use queue::QueueTable;
pub use semaphore::SemaphoreTable;
pub use state::StateTable;
pub use tracker::TrackerTable;

/// Milliseconds since the Unix epoch on the store's clock: monotonic, anchored to the wall clock
/// once per process (see the module docs).
pub fn now_ms() -> i64 {
    now_us() / 1000
}

/// Microseconds since the Unix epoch on the store's clock (the same clock as [`now_ms`]).
pub fn now_us() -> i64 {
    // The anchor keeps the wall clock's sub-millisecond part: rounding it and the elapsed time
    // down separately would put this clock up to 2 ms behind the wall clock it starts from.
    static ANCHOR: OnceLock<(Instant, u128)> = OnceLock::new();
    let (at, epoch_us) = ANCHOR.get_or_init(|| {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or(0);
        (Instant::now(), wall)
    });
    (epoch_us + at.elapsed().as_micros()) as i64
}

/// The state of one namespace (one key prefix).
#[derive(Default)]
pub struct Namespace {
    pub tracker: Mutex<TrackerTable>,
    pub locks: Mutex<LockTable>,
    pub queues: Mutex<QueueTable>,
    pub state: Mutex<StateTable>,
    pub limiters: Mutex<LimiterTable>,
    pub semaphores: Mutex<SemaphoreTable>,
}

fn namespaces() -> &'static Mutex<HashMap<String, Arc<Namespace>>> {
    static STORE: OnceLock<Mutex<HashMap<String, Arc<Namespace>>>> = OnceLock::new();
    STORE.get_or_init(|| Mutex::new(HashMap::new()))
}

#[derive(Clone)]
pub struct Embedded {
    ns: Arc<Namespace>,
}

impl Embedded {
    pub fn open(prefix: &str) -> Embedded {
        let ns = guard(namespaces()).entry(prefix.to_string()).or_default().clone();
        Embedded { ns }
    }

    pub fn namespace(&self) -> &Namespace {
        &self.ns
    }
}

impl Backend for Embedded {
    fn kind(&self) -> &'static str {
        "embedded"
    }
}
