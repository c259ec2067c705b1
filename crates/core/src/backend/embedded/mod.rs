//! The embedded backend: an in-process store, one per process, shared by every client made in
//! that process (so two n8n executions in one n8n instance see the same locks and items).
//! Each key prefix is its own namespace. Time comes from one clock: this process's system clock.

mod lock;
mod queue;
mod state;
mod tracker;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) use crate::backend::guard;

pub use lock::LockTable;
pub use queue::QueueTable;
pub(crate) use state::integer;
pub use state::StateTable;
pub use tracker::TrackerTable;
pub(crate) use tracker::{finish, fresh, page, take};

/// Milliseconds since the Unix epoch by this process's clock.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The state of one namespace (one key prefix).
#[derive(Default)]
pub struct Namespace {
    pub tracker: Mutex<TrackerTable>,
    pub locks: Mutex<LockTable>,
    pub queues: Mutex<QueueTable>,
    pub state: Mutex<StateTable>,
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
