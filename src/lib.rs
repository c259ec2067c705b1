//! flowguard: correct, fast Redis patterns for batch loops and workflows.
//!
//! The core (everything but [`binding`]) never touches napi: it is plain async Rust on tokio and
//! redis-rs, usable and tested on its own. [`binding`] is the thin napi-rs layer for Node.js.

// Backend traits return `impl Future + Send` so the futures can be spawned on tokio; clippy would
// have them written as `async fn`, which cannot promise `Send`.
#![allow(clippy::manual_async_fn)]

pub mod backend;
pub mod client;
pub mod error;
pub mod keys;
pub mod lock;
pub mod queue;
pub mod state;
pub mod token;
pub mod tracker;
pub mod validate;

mod binding;

pub use client::{Client, OpenOptions};
pub use error::{Error, ErrorCode, Result};
