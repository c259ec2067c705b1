//! The rules of the patterns, once: pure functions (no I/O, no clock: `now` is passed in) over
//! small values describing what a backend loaded, returning a decision and the new state to
//! write. The in-process backends (the in-memory store and the durable file) are storage
//! adapters around them: load, decide, write. The Redis backend keeps the same rules in its Lua
//! scripts (its only atomic unit without extra round trips); the model test
//! (`__test__/model.test.mjs`) holds the backends equal on random sequences.
//!
//! - [`tracker`]: the Item Tracker (claim, complete/fail with the owner check, unset, the lease
//!   and retention expiry, the changes each makes to a record, the `listItems` order);
//! - [`lock`]: the Concurrency Lock (acquire with its fencing token, release and extend with the
//!   owner check, the lease, the label, how long a fence is kept);
//! - [`semaphore`]: the Semaphore (acquire within the permits, release and extend of one's own
//!   permit);
//! - [`queue`]: the Dedup Queue (enqueue: new, duplicate, debounce, delay, kept for after a
//!   claim; the claim of due ids for a visibility lease; ack and release by the claim's owner;
//!   the return of expired claims);
//! - [`state`]: Job State's values (expiry, set with `ifAbsent`, increment);
//! - [`once`]: Job State's idempotency keys (claim, complete and release with the owner check);
//! - [`limiter`]: the Rate Limiter (a take by GCRA, a pause).

pub mod limiter;
pub mod lock;
pub mod once;
pub mod queue;
pub mod semaphore;
pub mod state;
pub mod tracker;
