//! Bearer-token authentication: `Authorization: Bearer <token>` (n8n: a Header Auth credential
//! with name `Authorization` and value `Bearer <token>`). Compared in constant time; the token is
//! never logged nor echoed.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::app::App;
use crate::error::{ApiError, UNAUTHORIZED};

/// Whether `header` carries the expected token. Lengths are compared in the open (the token's
/// length is not a secret worth hiding); the bytes in constant time.
pub fn authorized(expected: &[u8], header: Option<&[u8]>) -> bool {
    let Some(h) = header else { return false };
    let Some(given) = h.strip_prefix(b"Bearer ").or_else(|| h.strip_prefix(b"bearer ")) else { return false };
    bool::from(given.ct_eq(expected))
}

pub async fn require_token(State(app): State<App>, req: Request, next: Next) -> Response {
    if let Some(token) = &app.token {
        let given = req.headers().get(header::AUTHORIZATION).map(|v| v.as_bytes());
        if !authorized(token.as_bytes(), given) {
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
        assert!(!authorized(b"s3cret", Some(b"Bearer s3cres")));
        assert!(!authorized(b"s3cret", Some(b"Bearer s3cret2")));
        assert!(!authorized(b"s3cret", Some(b"s3cret")));
        assert!(!authorized(b"s3cret", Some(b"Basic s3cret")));
        assert!(!authorized(b"s3cret", None));
    }
}
