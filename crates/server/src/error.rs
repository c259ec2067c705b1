//! Errors as HTTP responses: a status a caller can route on and a coded JSON body
//! `{code, message, field?}`, with the field named as the request body names it (camelCase, ms).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowguard_core::{Error, ErrorCode};
use serde::Serialize;
use utoipa::ToSchema;

/// The code of a response, kept as a response extension so the metrics can count errors by code.
#[derive(Debug, Clone, Copy)]
pub struct Code(pub &'static str);

/// Codes of the server itself (the core's are `ErrorCode::as_str`).
pub const UNAUTHORIZED: &str = "ERR_UNAUTHORIZED";
pub const NOT_FOUND: &str = "ERR_NOT_FOUND";
pub const METHOD_NOT_ALLOWED: &str = "ERR_METHOD_NOT_ALLOWED";
pub const PAYLOAD_TOO_LARGE: &str = "ERR_PAYLOAD_TOO_LARGE";
pub const INVALID_JSON: &str = "ERR_INVALID_JSON";
/// A request header the server cannot act on (two `Authorization` headers).
pub const INVALID_HEADER: &str = "ERR_INVALID_HEADER";
/// A `Content-Encoding` other than identity (415).
pub const UNSUPPORTED_ENCODING: &str = "ERR_UNSUPPORTED_ENCODING";
/// The body was not received within the body timeout (408).
pub const BODY_TIMEOUT: &str = "ERR_BODY_TIMEOUT";
pub const LOCK_HELD: &str = "ERR_LOCK_HELD";
pub const ITEM_BUSY: &str = "ERR_ITEM_BUSY";
pub const KEY_PENDING: &str = "ERR_KEY_PENDING";
/// The call took longer than the server's request timeout (504; the core's own timeouts share
/// the code).
pub const TIMEOUT: &str = "ERR_TIMEOUT";

/// The server's own errors an API call can answer with, by status (the core's are mapped by
/// [`status_of`]); listed in the OpenAPI document.
pub const CALL_ERRORS: &[(StatusCode, &str)] = &[
    (StatusCode::BAD_REQUEST, INVALID_JSON),
    (StatusCode::BAD_REQUEST, INVALID_HEADER),
    (StatusCode::UNAUTHORIZED, UNAUTHORIZED),
    (StatusCode::REQUEST_TIMEOUT, BODY_TIMEOUT),
    (StatusCode::PAYLOAD_TOO_LARGE, PAYLOAD_TOO_LARGE),
    (StatusCode::UNSUPPORTED_MEDIA_TYPE, UNSUPPORTED_ENCODING),
    (StatusCode::GATEWAY_TIMEOUT, TIMEOUT),
];

/// The other codes a response can carry: unknown routes and methods, and results answered with
/// a status (see [`busy`]).
pub const OTHER_CODES: &[&str] = &[
    NOT_FOUND,
    METHOD_NOT_ALLOWED,
    LOCK_HELD,
    ITEM_BUSY,
    KEY_PENDING,
    crate::routes::limiter::RATE_LIMITED,
    crate::routes::semaphore::SEMAPHORE_FULL,
];

/// An error: its status, and the body `{code, message, field?}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ApiError {
    #[serde(skip)]
    pub status: StatusCode,
    #[schema(schema_with = crate::openapi::code, example = "ERR_INVALID_ARGUMENT")]
    pub code: &'static str,
    /// What is wrong, naming the bad input (never a secret).
    pub message: String,
    /// The body field at fault, e.g. `requests[1].timeoutMs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), field: None }
    }

    /// A bad argument found by the server (a type the body cannot have, a limit of this server).
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        let field = field.into();
        let message = format!("{field} {}", message.into());
        ApiError {
            field: Some(field),
            ..ApiError::new(StatusCode::BAD_REQUEST, "ERR_INVALID_ARGUMENT", message)
        }
    }
}

/// The status of each core code. `ERR_NOT_OWNER` is 412 (the owner-token precondition failed:
/// resending the same request can never succeed), unlike 409 (busy: a later call may succeed).
pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidArgument | ErrorCode::Unsupported => StatusCode::BAD_REQUEST,
        ErrorCode::NotOwner => StatusCode::PRECONDITION_FAILED,
        ErrorCode::BackendUnavailable | ErrorCode::BackendAuth => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Backend => StatusCode::BAD_GATEWAY,
        ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        // The store file cannot be read or written (disk full, read-only, corrupt).
        ErrorCode::Storage => StatusCode::INSUFFICIENT_STORAGE,
        // The server's clock disagrees with the store file's: it serves again once corrected.
        ErrorCode::ClockSkew => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        // The server never closes its client; should it happen, it is the server's fault.
        ErrorCode::Closed => StatusCode::SERVICE_UNAVAILABLE,
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        ApiError {
            status: status_of(e.code),
            code: e.code.as_str(),
            message: e.text(flowguard_core::field_name::public),
            field: e.field.as_ref().map(|p| p.render(flowguard_core::field_name::public)),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, Json(&self)).into_response();
        r.extensions_mut().insert(Code(self.code));
        r
    }
}

/// The body of a result answered with a status: the result with its `code` added.
#[derive(Serialize, ToSchema)]
pub struct Busy<T> {
    #[serde(flatten)]
    pub result: T,
    /// The code of the status (`ERR_LOCK_HELD`, `ERR_ITEM_BUSY`...).
    #[schema(schema_with = crate::openapi::code)]
    pub code: &'static str,
}

/// A result that is not an error but that callers route on by status (a held lock, a busy item):
/// the body is the result with a `code` added.
pub fn busy<T: Serialize>(status: StatusCode, code: &'static str, result: T) -> Response {
    let mut r = (status, Json(Busy { result, code })).into_response();
    r.extensions_mut().insert(Code(code));
    r
}

pub type ApiResult<T> = Result<T, ApiError>;
