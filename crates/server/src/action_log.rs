//! The action log: a call that names the person making it (`X-Flowguard-Actor: <name>`, as the
//! dashboard's actions do) is logged once answered, at `info` under the target
//! `flowguard::action`: who (the name given, the peer address when known), what (the route and
//! the body's `group`, `id`, `name`, `queue` when they are strings) and the outcome (the status).
//! The log line carries the time. Runs behind the token check: an unauthenticated call is not an
//! action. The body is never logged whole (it may hold values an operator should not see there).

use axum::body::{to_bytes, Body};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;

use crate::app::App;
use crate::error::{ApiError, INVALID_HEADER};

/// The header naming who makes a call.
pub const ACTOR_HEADER: &str = "x-flowguard-actor";
/// The longest actor name.
pub const MAX_ACTOR_LEN: usize = 64;
/// The longest value of a body field kept in the log (longer ones are cut, marked with `…`).
const MAX_FIELD_LEN: usize = 200;
/// The body fields that say what an action was about.
const SUBJECT_FIELDS: [&str; 4] = ["group", "id", "name", "queue"];

/// The actor named by the header: 1 to [`MAX_ACTOR_LEN`] characters, none a control character.
fn actor(value: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(value).ok()?.trim();
    let ok = !s.is_empty() && s.chars().count() <= MAX_ACTOR_LEN && !s.chars().any(char::is_control);
    ok.then(|| s.to_string())
}

/// `field=value` of each subject field the JSON body holds as a string.
fn subject(body: &[u8]) -> String {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_slice::<serde_json::Value>(body) else {
        return String::new();
    };
    let mut parts = Vec::new();
    for f in SUBJECT_FIELDS {
        if let Some(serde_json::Value::String(v)) = map.get(f) {
            let cut: String = v.chars().take(MAX_FIELD_LEN).collect();
            let more = if cut.len() < v.len() { "…" } else { "" };
            parts.push(format!("{f}={cut:?}{more}"));
        }
    }
    parts.join(" ")
}

pub async fn record(State(app): State<App>, req: Request, next: Next) -> Response {
    let Some(value) = req.headers().get(ACTOR_HEADER) else { return next.run(req).await };
    let Some(who) = actor(value.as_bytes()) else {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            INVALID_HEADER,
            format!("the {ACTOR_HEADER} header must be a name of 1 to {MAX_ACTOR_LEN} characters, no control characters"),
        )
        .into_response();
    };
    let route = req.uri().path().to_string();
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.to_string()).unwrap_or_default();
    let (parts, body) = req.into_parts();
    // The body limit applies as for any call: a longer body is refused before it is read whole.
    let bytes = match to_bytes(body, app.limits.max_body).await {
        Ok(b) => b,
        Err(_) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                crate::error::PAYLOAD_TOO_LARGE,
                format!("the body is larger than this server takes ({} bytes)", app.limits.max_body),
            )
            .into_response()
        }
    };
    let what = subject(&bytes);
    let res = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    tracing::info!(
        target: "flowguard::action",
        actor = %who,
        peer = %peer,
        route = %route,
        subject = %what,
        status = res.status().as_u16(),
        "action"
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actor_names_are_short_and_printable() {
        assert_eq!(actor(b" Ada (ops) ").as_deref(), Some("Ada (ops)"));
        assert_eq!(actor("Zoë".as_bytes()).as_deref(), Some("Zoë"));
        assert!(actor(b"").is_none());
        assert!(actor(b"   ").is_none());
        assert!(actor(b"a\tb").is_none());
        assert!(actor(&[0xff, 0xfe]).is_none());
        assert!(actor("x".repeat(MAX_ACTOR_LEN).as_bytes()).is_some());
        assert!(actor("x".repeat(MAX_ACTOR_LEN + 1).as_bytes()).is_none());
    }

    #[test]
    fn the_subject_names_strings_only_and_cuts_long_ones() {
        assert_eq!(
            subject(br#"{"group":"g","id":"sku-9","owner":"secret","n":1}"#),
            r#"group="g" id="sku-9""#
        );
        assert_eq!(subject(br#"{"name":7}"#), "");
        assert_eq!(subject(b"not json"), "");
        let long = format!(r#"{{"id":"{}"}}"#, "a".repeat(300));
        assert_eq!(subject(long.as_bytes()), format!("id={:?}…", "a".repeat(MAX_FIELD_LEN)));
    }
}
