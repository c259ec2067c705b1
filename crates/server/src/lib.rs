//! flowguard-server: the four flowguard patterns over HTTP/JSON, for n8n's HTTP Request node and
//! any other program. A thin shell over flowguard-core: transport, JSON conversion and error
//! mapping only; every pattern's logic stays in the core.

pub mod action_log;
pub mod app;
pub mod auth;
pub mod body;
pub mod cluster;
pub mod config;
pub mod dashboard;
pub mod error;
pub mod gauges;
pub mod healthcheck;
pub mod metrics;
pub mod node_entry;
pub mod openapi;
pub mod ops;
pub mod postgres;
pub mod routes;
pub mod sentinel;
pub mod tls;
pub mod transport;

pub use app::{router, App, Limits};
pub use transport::Transport;

use std::future::Future;

use tokio::net::TcpListener;

/// Serves `app` on `listener` with the default transport limits until `shutdown` resolves; then
/// stops accepting connections and returns once the calls in flight are answered (or the drain
/// timeout has passed: see [`transport::serve`]).
pub async fn serve(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    transport::serve(listener, router(app), None, Transport::default(), shutdown).await
}
