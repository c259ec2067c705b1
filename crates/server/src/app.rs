//! The server's shared state and its router.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use axum::Router;
use flowguard_core::Client;
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;

use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::{action_log, auth, dashboard, metrics, ops, routes};

/// Limits of one call, on top of the core's own.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// The most ids (requests, keys) in one call, and the largest `limit` of a read or peek.
    pub max_batch: usize,
    /// The longest `waitMs` of a lock acquire: kept below the request timeout.
    pub max_wait_ms: u64,
    /// The longest a call may take before it is answered with 504.
    pub request_timeout: Duration,
    /// The longest the body of a call may take to arrive once its head is read (408 after).
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body: 2 * 1024 * 1024 + 64 * 1024,
            max_batch: 10_000,
            max_wait_ms: 30_000,
            request_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
        }
    }
}

impl Limits {
    pub fn batch(&self, field: &str, len: usize) -> Result<(), ApiError> {
        if len > self.max_batch {
            return Err(ApiError::invalid(
                field,
                format!("holds {len} entries; this server accepts at most {} per call", self.max_batch),
            ));
        }
        Ok(())
    }

    pub fn wait(&self, field: &str, wait: std::time::Duration) -> Result<(), ApiError> {
        if wait > std::time::Duration::from_millis(self.max_wait_ms) {
            let ms = wait.as_secs_f64() * 1000.0;
            return Err(ApiError::invalid(
                field,
                format!("is {ms} ms; this server waits at most {} ms per call", self.max_wait_ms),
            ));
        }
        Ok(())
    }
}

/// What every handler shares.
#[derive(Clone)]
pub struct App {
    pub client: Client,
    /// The bearer token; None: no authentication (loopback only, checked at startup).
    pub token: Option<Arc<str>>,
    pub limits: Arc<Limits>,
    pub metrics: Metrics,
}

impl App {
    pub fn new(client: Client, token: Option<String>, limits: Limits) -> App {
        App { client, token: token.map(Arc::from), limits: Arc::new(limits), metrics: Metrics::new() }
    }
}

/// The routes behind the token: the API and `/metrics`.
fn guarded() -> OpenApiRouter<App> {
    routes::api().routes(utoipa_axum::routes!(ops::metrics))
}

/// The open routes: health, readiness, the OpenAPI document and the dashboard's page (which
/// reads through the API).
fn open() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(utoipa_axum::routes!(ops::healthz))
        .routes(utoipa_axum::routes!(ops::readyz))
        .routes(utoipa_axum::routes!(ops::openapi))
        .merge(dashboard::routes())
}

/// Every route with its OpenAPI operation (see [`crate::openapi::document`]).
pub fn routes() -> OpenApiRouter<App> {
    guarded().merge(open())
}

/// The whole HTTP surface: the API and `/metrics` behind the token; health, readiness, the
/// OpenAPI document and the dashboard's page open.
pub fn router(app: App) -> Router {
    let (guarded, _) = guarded()
        // Layers run outside in: the token is checked before a call is logged as an action.
        .route_layer(from_fn_with_state(app.clone(), action_log::record))
        .route_layer(from_fn_with_state(app.clone(), auth::require_token))
        .split_for_parts();
    let (open, _) = open().split_for_parts();
    Router::new()
        .merge(guarded)
        .merge(open)
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .layer(DefaultBodyLimit::max(app.limits.max_body))
        .layer(from_fn_with_state(app.clone(), ops::timeout))
        .layer(from_fn_with_state(app.clone(), metrics::track))
        .layer(TraceLayer::new_for_http())
        .with_state(app)
}
