//! Errors as values a program can act on: a stable code, the field at fault as data, and a
//! message a person understands.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// Stable error codes. The string form (`ERR_…`) is what JavaScript sees as `error.code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A parameter is missing, of the wrong type, empty, too long or out of range. Nothing was written.
    InvalidArgument,
    /// The backend's server cannot be reached (Redis: connection refused, dropped, DNS, TLS
    /// handshake, or changing hands for a moment during a failover): a later call may succeed.
    BackendUnavailable,
    /// The backend's server refused the credentials (Redis: wrong password, unknown user, NOAUTH).
    BackendAuth,
    /// The backend's server answered with an error (Redis: out of memory, read-only replica, a
    /// script error, a key holding a value flowguard did not write).
    Backend,
    /// A Redis command or connection attempt took longer than its configured timeout.
    Timeout,
    /// A worker passed an owner token but the item or lock is now owned by someone else.
    NotOwner,
    /// A feature cannot be used with the selected backend or configuration (also: a durable store
    /// file of a layout version other than the one this flowguard reads).
    Unsupported,
    /// The durable store's file cannot be used: its directory is missing, it is read-only, the
    /// disk is full, or it is corrupt or another program's database. The message names the path.
    Storage,
    /// The durable store refused this process's clock: it is more than a second ahead of or
    /// behind the time of the store's file, which another process that agrees with it wrote
    /// recently, or ahead of its host's clock when it would move the file's time ahead. Nothing
    /// was written; the call can succeed once the clock is corrected (or the process restarted).
    ClockSkew,
    /// A bug in flowguard (a panic was caught before it could reach the host process).
    Internal,
    /// The client was closed (`close()`): open a new one.
    Closed,
}

impl ErrorCode {
    /// Every code, in declaration order (the server lists them in its OpenAPI document).
    pub const ALL: [ErrorCode; 11] = [
        ErrorCode::InvalidArgument,
        ErrorCode::BackendUnavailable,
        ErrorCode::BackendAuth,
        ErrorCode::Backend,
        ErrorCode::Timeout,
        ErrorCode::NotOwner,
        ErrorCode::Unsupported,
        ErrorCode::Storage,
        ErrorCode::ClockSkew,
        ErrorCode::Internal,
        ErrorCode::Closed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "ERR_INVALID_ARGUMENT",
            ErrorCode::BackendUnavailable => "ERR_BACKEND_UNAVAILABLE",
            ErrorCode::BackendAuth => "ERR_BACKEND_AUTH",
            ErrorCode::Backend => "ERR_BACKEND",
            ErrorCode::Timeout => "ERR_TIMEOUT",
            ErrorCode::NotOwner => "ERR_NOT_OWNER",
            ErrorCode::Unsupported => "ERR_UNSUPPORTED",
            ErrorCode::Storage => "ERR_STORAGE",
            ErrorCode::ClockSkew => "ERR_CLOCK_SKEW",
            ErrorCode::Internal => "ERR_INTERNAL",
            ErrorCode::Closed => "ERR_CLOSED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One step of a [`FieldPath`]: a named field (the Rust name, snake_case) or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Field(Cow<'static, str>),
    Index(usize),
}

/// Where in the input a bad value sits, e.g. `requests[3].timeout`. Kept as data so each shell
/// names it in its own terms (the Node addon in camelCase with units: `requests[3].timeoutMs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(Vec<Segment>);

impl FieldPath {
    /// A path of one field.
    pub fn new(name: impl Into<Cow<'static, str>>) -> FieldPath {
        FieldPath(vec![Segment::Field(name.into())])
    }

    /// This path followed by field `name`.
    pub fn field(&self, name: impl Into<Cow<'static, str>>) -> FieldPath {
        let mut v = self.0.clone();
        v.push(Segment::Field(name.into()));
        FieldPath(v)
    }

    /// This path followed by index `i`.
    pub fn index(&self, i: usize) -> FieldPath {
        let mut v = self.0.clone();
        v.push(Segment::Index(i));
        FieldPath(v)
    }

    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    /// The path written with `name` turning each field name into the caller's terms.
    pub fn render(&self, name: impl Fn(&str) -> Cow<'_, str>) -> String {
        let mut out = String::new();
        for s in &self.0 {
            match s {
                Segment::Field(f) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(&name(f));
                }
                Segment::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
            }
        }
        out
    }
}

impl From<&'static str> for FieldPath {
    fn from(name: &'static str) -> Self {
        FieldPath::new(name)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(|s| Cow::Borrowed(s)))
    }
}

/// Where a check found a bad value: a path, built only when an error needs it (the checks run
/// on every call; most find nothing).
pub trait At {
    fn path(self) -> FieldPath;
}

impl At for &'static str {
    fn path(self) -> FieldPath {
        FieldPath::new(self)
    }
}

impl At for FieldPath {
    fn path(self) -> FieldPath {
        self
    }
}

impl At for &FieldPath {
    fn path(self) -> FieldPath {
        self.clone()
    }
}

/// Field `1` under path `0` (the path not cloned unless an error needs it).
impl At for (&FieldPath, &'static str) {
    fn path(self) -> FieldPath {
        self.0.field(self.1)
    }
}

/// Element `1` of the list at path `0`.
impl At for (&FieldPath, usize) {
    fn path(self) -> FieldPath {
        self.0.index(self.1)
    }
}

/// The one error type of the core.
///
/// With a `field`, the message is what is wrong with that field ("must be a non-empty string")
/// and the full text is the field's path followed by the message; shells render the path in
/// their own terms.
#[derive(Debug, Clone)]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
    pub field: Option<FieldPath>,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code && self.message == other.message && self.field == other.field
    }
}

impl Eq for Error {}

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error { code, message: message.into(), field: None, source: None }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::InvalidArgument, message)
    }

    /// `ERR_INVALID_ARGUMENT` about the value at `field`; `message` says what is wrong with it.
    pub fn invalid_at(field: impl At, message: impl Into<String>) -> Self {
        Error { field: Some(field.path()), ..Error::invalid(message) }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::Internal, message)
    }

    /// The same error with `source` as its cause (see [`std::error::Error::source`]).
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// The text of the error with its field path written by `name` (see [`FieldPath::render`]).
    pub fn text(&self, name: impl Fn(&str) -> Cow<'_, str>) -> String {
        match &self.field {
            Some(p) if p.segments().is_empty() => self.message.clone(),
            Some(p) => format!("{} {}", p.render(name), self.message),
            None => self.message.clone(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.text(|s| Cow::Borrowed(s)))
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    /// `ErrorCode::ALL` holds every code once, in declaration order: a new code fails to compile
    /// here (the match has no catch-all) until it is given its place, and then this test fails
    /// until `ALL` holds it there.
    #[test]
    fn all_lists_every_code_once_in_order() {
        fn place(c: ErrorCode) -> usize {
            match c {
                ErrorCode::InvalidArgument => 0,
                ErrorCode::BackendUnavailable => 1,
                ErrorCode::BackendAuth => 2,
                ErrorCode::Backend => 3,
                ErrorCode::Timeout => 4,
                ErrorCode::NotOwner => 5,
                ErrorCode::Unsupported => 6,
                ErrorCode::Storage => 7,
                ErrorCode::ClockSkew => 8,
                ErrorCode::Internal => 9,
                ErrorCode::Closed => 10,
            }
        }
        let places: Vec<usize> = ErrorCode::ALL.iter().map(|c| place(*c)).collect();
        assert_eq!(places, (0..11).collect::<Vec<_>>());
    }

    use super::*;

    #[test]
    fn paths_render_in_the_callers_terms() {
        let p = FieldPath::new("requests").index(3).field("timeout");
        assert_eq!(p.to_string(), "requests[3].timeout");
        let js = p.render(|f| if f == "timeout" { "timeoutMs".into() } else { f.into() });
        assert_eq!(js, "requests[3].timeoutMs");
        let e = Error::invalid_at(p, "must be greater than 0 milliseconds, got 0");
        assert_eq!(
            e.to_string(),
            "ERR_INVALID_ARGUMENT: requests[3].timeout must be greater than 0 milliseconds, got 0"
        );
    }

    #[test]
    fn codes_of_a_backend_are_named_by_meaning_not_after_redis() {
        assert_eq!(ErrorCode::BackendUnavailable.as_str(), "ERR_BACKEND_UNAVAILABLE");
        assert_eq!(ErrorCode::BackendAuth.as_str(), "ERR_BACKEND_AUTH");
        assert_eq!(ErrorCode::Backend.as_str(), "ERR_BACKEND");
    }

    #[test]
    fn source_is_kept() {
        use std::error::Error as _;
        let e = Error::internal("x").with_source(std::fmt::Error);
        assert!(e.source().is_some());
    }
}
