//! An extension point for a shell that has a faster way to Redis on some threads.
//!
//! The Node addon drives a connection with the JavaScript thread's own event loop, so that a lock
//! call crosses no thread; the core knows nothing of that. A shell installs one [`Transport`];
//! for every pooled connection the Redis store asks it for an [`Endpoint`], and before running a
//! script it offers the command to that endpoint. The endpoint sends it when the calling thread
//! has a connection of its own to the server, or declines, and the store uses its shared redis-rs
//! connection as it does without a transport. Replies and errors are redis-rs's own types, so
//! both ways map to the same coded errors.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::{Cmd, ConnectionInfo, RedisResult, Value};

/// The reply to a command an [`Endpoint`] sent.
pub type Reply = Pin<Box<dyn Future<Output = RedisResult<Value>> + Send>>;

/// A shell's faster way to Redis, installed once per process with [`install`].
pub trait Transport: Send + Sync {
    /// An endpoint for the server of `info`, asked once per pooled connection; None: this
    /// transport does not serve it (the store always uses redis-rs for it).
    fn endpoint(
        &self,
        info: &ConnectionInfo,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Option<Arc<dyn Endpoint>>;
}

/// One server, as a [`Transport`] reaches it.
pub trait Endpoint: Send + Sync {
    /// Sends `cmd` if the calling thread can, and returns its reply; None: it cannot now (the
    /// caller sends it over redis-rs). A command offered is sent at most once, by one of the two.
    /// The reply fails with a redis-rs I/O error when the connection breaks and with a timeout
    /// error when no reply comes within the command timeout.
    fn send(&self, cmd: &Cmd) -> Option<Reply>;
}

static TRANSPORT: OnceLock<&'static dyn Transport> = OnceLock::new();

/// Installs the process's transport; the first one wins (false for a later one). Connections
/// pooled before it was installed never use it.
pub fn install(transport: &'static dyn Transport) -> bool {
    TRANSPORT.set(transport).is_ok()
}

/// The installed transport's endpoint for a new pooled connection.
pub(crate) fn endpoint(
    info: &ConnectionInfo,
    connect_timeout_ms: u64,
    command_timeout_ms: u64,
) -> Option<Arc<dyn Endpoint>> {
    TRANSPORT.get()?.endpoint(
        info,
        Duration::from_millis(connect_timeout_ms),
        Duration::from_millis(command_timeout_ms),
    )
}
