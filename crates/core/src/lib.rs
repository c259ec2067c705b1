//! flowguard-core: correct, fast Redis patterns for batch loops and workflows.
//!
//! Plain async Rust on tokio and redis-rs, usable and tested on its own. It never names napi or
//! HTTP: the Node.js addon (the `flowguard` crate at the repository root) and the server are thin
//! shells over it.

pub mod backend;
pub mod catalog;
pub mod client;
pub mod error;
pub mod field_name;
pub mod keys;
pub mod limiter;
pub mod lock;
pub mod queue;
pub mod retry_after;
pub mod rules;
pub mod semaphore;
pub mod state;
pub mod token;
pub mod tracker;
pub mod validate;
pub mod wakeup;

pub use client::{Client, OpenOptions};
pub use error::{Error, ErrorCode, Result};
