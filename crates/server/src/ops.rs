//! Operations endpoints: liveness, readiness, metrics, the OpenAPI document, and the answers to
//! unknown routes and methods.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::app::App;
use crate::error::{ApiError, METHOD_NOT_ALLOWED, NOT_FOUND, TIMEOUT};

#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    status: &'static str,
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "ops", security(), responses((status = 200, description = "alive", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

#[derive(Serialize, ToSchema)]
pub struct Ready {
    /// `ready`.
    status: &'static str,
    /// The store: `embedded` (in memory), `durable` (a file), `redis` or `postgres`.
    backend: &'static str,
}

/// Readiness: the backend answers a read.
///
/// Redis or PostgreSQL reachable within the command timeout, the durable store's file readable.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "ops",
    security(),
    responses(
        (status = 200, description = "ready", body = Ready),
        (status = 503, description = "the backend cannot be read", body = ApiError),
    )
)]
pub async fn readyz(State(app): State<App>) -> Response {
    match app.client.get_state(vec!["flowguard-server:readyz".into()]).await {
        Ok(_) => Json(Ready { status: "ready", backend: app.client.kind() }).into_response(),
        Err(e) => {
            let mut err = ApiError::from(e);
            err.status = StatusCode::SERVICE_UNAVAILABLE;
            err.into_response()
        }
    }
}

/// Prometheus metrics (text format).
///
/// Calls, errors by code and latency by route; and, read at each scrape with bounded work (at
/// most 200 names of each kind): flowguard_locks_held, flowguard_items{group,status},
/// flowguard_queue_ids{queue,state}, flowguard_listing_complete{kind} (0 when the bound cut the
/// listing short) and flowguard_state_up (0 when the backend could not be read; the state gauges
/// are then left out).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "ops",
    responses(
        (status = 200, description = "metrics", body = String, content_type = "text/plain"),
        (status = 401, description = "ERR_UNAUTHORIZED", body = ApiError),
    )
)]
pub async fn metrics(State(app): State<App>) -> Response {
    let mut text = app.metrics.render();
    text.push_str(&crate::gauges::render(&app.client).await);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// This document (OpenAPI 3.1).
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "ops",
    security(),
    responses((status = 200, description = "the OpenAPI document", body = Object))
)]
pub async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], crate::openapi::json()).into_response()
}

pub async fn not_found(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        NOT_FOUND,
        format!("no route {} (see /openapi.json)", shown(req.uri().path())),
    )
}

pub async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        METHOD_NOT_ALLOWED,
        format!(
            "{} is not allowed on {} (API calls are POST with a JSON body)",
            req.method(),
            shown(req.uri().path())
        ),
    )
}

/// A path as shown in a message: cut to a readable length.
fn shown(path: &str) -> String {
    let mut s: String = path.chars().take(100).collect();
    if s.len() < path.len() {
        s.push('…');
    }
    s
}

/// Answers with 504 `ERR_TIMEOUT` when a call takes longer than the server's request timeout.
/// Dropping the call there is safe: a backend step is one atomic script or command, applied
/// whole or not at all (the caller cannot know which: resend only what is safe to resend).
pub async fn timeout(State(app): State<App>, req: Request, next: Next) -> Response {
    match tokio::time::timeout(app.limits.request_timeout, next.run(req)).await {
        Ok(r) => r,
        Err(_) => ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            TIMEOUT,
            format!(
                "the call took longer than the server's request timeout ({} ms)",
                app.limits.request_timeout.as_millis()
            ),
        )
        .into_response(),
    }
}
