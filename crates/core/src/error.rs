//! Errors as values a program can act on: a stable code and a message a person understands.

use std::fmt;

/// Stable error codes. The string form (`ERR_…`) is what JavaScript sees as `error.code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A parameter is missing, of the wrong type, empty, too long or out of range. Nothing was written.
    InvalidArgument,
    /// Redis cannot be reached (connection refused, dropped, DNS, TLS handshake).
    RedisUnavailable,
    /// Redis refused the credentials (wrong password, unknown user, NOAUTH).
    RedisAuth,
    /// Redis answered with an error (out of memory, read-only replica, a script error).
    Redis,
    /// A Redis command or connection attempt took longer than its configured timeout.
    Timeout,
    /// A worker passed an owner token but the item or lock is now owned by someone else.
    NotOwner,
    /// A feature cannot be used with the selected backend or configuration (also: a durable store
    /// file written by a newer flowguard).
    Unsupported,
    /// The durable store's file cannot be used: its directory is missing, it is read-only, the
    /// disk is full, or it is corrupt or another program's database. The message names the path.
    Storage,
    /// A bug in flowguard (a panic was caught before it could reach the host process).
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "ERR_INVALID_ARGUMENT",
            ErrorCode::RedisUnavailable => "ERR_REDIS_UNAVAILABLE",
            ErrorCode::RedisAuth => "ERR_REDIS_AUTH",
            ErrorCode::Redis => "ERR_REDIS",
            ErrorCode::Timeout => "ERR_TIMEOUT",
            ErrorCode::NotOwner => "ERR_NOT_OWNER",
            ErrorCode::Unsupported => "ERR_UNSUPPORTED",
            ErrorCode::Storage => "ERR_STORAGE",
            ErrorCode::Internal => "ERR_INTERNAL",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The one error type of the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
}

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error { code, message: message.into() }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::InvalidArgument, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::Internal, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
