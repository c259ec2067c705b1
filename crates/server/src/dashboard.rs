//! The dashboard at `/`: one HTML page, its script and its style sheet, embedded in the binary
//! (no CDN, nothing fetched from elsewhere). The page itself holds no data and is served without
//! a token; it reads everything through the API routes, sending the token the user typed in as
//! `Authorization: Bearer <token>`, so it is bound by the same rules as any other caller.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;

const INDEX: &str = include_str!("../dashboard/index.html");
const SCRIPT: &str = include_str!("../dashboard/app.js");
const STYLE: &str = include_str!("../dashboard/app.css");

/// Only this server's own script and styles run on the page, it talks only to this server, and
/// no other site may frame it.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The dashboard (HTML). Open: it holds no data and reads through the API with the token the user types in.
#[utoipa::path(
    get,
    path = "/",
    tag = "dashboard",
    operation_id = "dashboard",
    security(),
    responses((status = 200, description = "the asset", body = String, content_type = "text/html"))
)]
pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

/// The dashboard's script.
#[utoipa::path(
    get,
    path = "/dashboard/app.js",
    tag = "dashboard",
    operation_id = "dashboard_script",
    security(),
    responses((status = 200, description = "the asset", body = String, content_type = "text/javascript"))
)]
pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// The dashboard's style sheet.
#[utoipa::path(
    get,
    path = "/dashboard/app.css",
    tag = "dashboard",
    operation_id = "dashboard_style",
    security(),
    responses((status = 200, description = "the asset", body = String, content_type = "text/css"))
)]
pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new().routes(routes!(index)).routes(routes!(script)).routes(routes!(style))
}
