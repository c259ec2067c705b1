//! Bearer-token authentication: `Authorization: Bearer <token>` (n8n: a Header Auth credential
//! with name `Authorization` and value `Bearer <token>`). The scheme is matched without regard to
//! case (RFC 7235); the token is compared in constant time and never logged nor echoed.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::app::App;
use crate::error::{ApiError, INVALID_HEADER, UNAUTHORIZED};

/// Whether `header` carries the expected token. Lengths are compared in the open (the token's
/// length is not a secret worth hiding); the bytes in constant time.
pub fn authorized(expected: &[u8], header: Option<&[u8]>) -> bool {
    let Some(h) = header else { return false };
    let Some(space) = h.iter().position(|&b| b == b' ') else { return false };
    let (scheme, rest) = h.split_at(space);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return false;
    }
    let given = rest.trim_ascii_start();
    bool::from(given.ct_eq(expected))
}

pub async fn require_token(State(app): State<App>, req: Request, next: Next) -> Response {
    if let Some(token) = &app.token {
        let mut given = req.headers().get_all(header::AUTHORIZATION).iter();
        let first = given.next().map(|v| v.as_bytes());
        if given.next().is_some() {
            // Which one would a proxy or the caller mean? Neither is guessed.
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                INVALID_HEADER,
                "the Authorization header is given more than once: send it once",
            )
            .into_response();
        }
        if !authorized(token.as_bytes(), first) {
            let mut r = ApiError::new(
                StatusCode::UNAUTHORIZED,
                UNAUTHORIZED,
                "a valid token is required: send the header Authorization: Bearer <token>",
            )
            .into_response();
            r.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        assert!(authorized(b"s3cret", Some(b"Bearer s3cret")));
        assert!(authorized(b"s3cret", Some(b"bearer s3cret")));
        assert!(authorized(b"s3cret", Some(b"BEARER s3cret")));
        assert!(authorized(b"s3cret", Some(b"BeArEr  s3cret")));
        assert!(!authorized(b"s3cret", Some(b"Bearer s3cres")));
        assert!(!authorized(b"s3cret", Some(b"Bearer s3cret2")));
        assert!(!authorized(b"s3cret", Some(b"s3cret")));
        assert!(!authorized(b"s3cret", Some(b"Basic s3cret")));
        assert!(!authorized(b"s3cret", Some(b"Bearers3cret")));
        assert!(!authorized(b"s3cret", Some(b"Bearer")));
        assert!(!authorized(b"s3cret", None));
    }
}
