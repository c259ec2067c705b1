//! The OpenAPI document of the server, generated from the request and response types
//! (`#[derive(ToSchema)]`) and the handlers (`#[utoipa::path]`, routed by `routes!`, so a route
//! and its documentation are one declaration). Served at `/openapi.json`; the committed copy
//! `crates/server/openapi.json` is written by `flowguard-server --print-openapi` and a test
//! fails when it differs from this document.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use flowguard_core::tracker::{Action, BatchOutcome, ItemStatus, Keep};
use flowguard_core::ErrorCode;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Ref, RefOr, Response};
use utoipa::{IntoResponses, Modify, OpenApi, PartialSchema};

use crate::error::{self, status_of, ApiError};

/// The security scheme of the API routes and `/metrics`: `Authorization: Bearer <token>`.
pub const BEARER: &str = "bearer";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "flowguard-server",
        description = "Item Tracker, Concurrency Lock, Dedup Queue, Job State, Rate Limiter and Semaphore \
                       over HTTP/JSON. Every API call is POST with a JSON body; field names and units (ms) \
                       as in the Node.js API; numbers and booleans are also accepted as strings (\"60000\", \
                       \"true\"). See docs/server.md."
    ),
    security(("bearer" = [])),
    modifiers(&Shared),
    components(schemas(ApiError)),
    tags(
        (name = "tracker", description = "Item Tracker"),
        (name = "lock", description = "Concurrency Lock"),
        (name = "queue", description = "Dedup Queue"),
        (name = "state", description = "Job State"),
        (name = "limiter", description = "Rate Limiter"),
        (name = "semaphore", description = "Semaphore"),
        (name = "ops", description = "Health, readiness, metrics and this document"),
        (name = "dashboard", description = "The dashboard's page and assets"),
    )
)]
struct Base;

/// The whole document: the base above merged with every route's operation and schemas.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = Base::openapi();
    doc.merge(crate::app::routes().into_openapi());
    doc
}

/// The document as pretty JSON (what `/openapi.json` serves and `--print-openapi` prints).
pub fn json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let mut s = document().to_pretty_json().expect("the OpenAPI document serializes");
        s.push('\n');
        s
    })
}

/// Adds what derives cannot say: the bearer scheme and the shared error responses.
struct Shared;

impl Modify for Shared {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        for (status, codes) in error_statuses() {
            components.responses.insert(response_name(status), RefOr::T(error_response(&codes)));
        }
    }
}

/// Every error code an API call can answer with, by status: the core's (by
/// [`status_of`]) and the server's own. `ERR_NOT_OWNER` (412) is left to the routes that take
/// an owner token.
fn error_statuses() -> BTreeMap<u16, Vec<&'static str>> {
    let mut by: BTreeMap<u16, Vec<&'static str>> = BTreeMap::new();
    let core =
        ErrorCode::ALL.into_iter().filter(|c| *c != ErrorCode::NotOwner).map(|c| (status_of(c), c.as_str()));
    for (status, code) in error::CALL_ERRORS.iter().copied().chain(core) {
        let codes = by.entry(status.as_u16()).or_default();
        if !codes.contains(&code) {
            codes.push(code);
        }
    }
    by
}

fn response_name(status: u16) -> String {
    format!("E{status}")
}

fn error_response(codes: &[&str]) -> Response {
    ResponseBuilder::new()
        .description(codes.join(", "))
        .content("application/json", ContentBuilder::new().schema(Some(ApiError::schema())).build())
        .build()
}

/// The error responses every API call may give (a reference to each shared response).
pub struct Errors;

impl IntoResponses for Errors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        error_statuses()
            .into_keys()
            .map(|s| (s.to_string(), RefOr::Ref(Ref::from_response_name(response_name(s)))))
            .collect()
    }
}

/// 412 `ERR_NOT_OWNER`: the owner token given no longer holds what the call changes.
pub struct NotOwner;

impl IntoResponses for NotOwner {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        let status = status_of(ErrorCode::NotOwner).as_u16().to_string();
        BTreeMap::from([(status, RefOr::T(error_response(&[ErrorCode::NotOwner.as_str()])))])
    }
}

/// Every code a response's `code` can hold: the core's, the server's own errors and the codes
/// of results answered with a status (a held lock, a busy item...).
pub fn all_codes() -> Vec<&'static str> {
    let mut codes: Vec<&'static str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    for code in error::CALL_ERRORS.iter().map(|(_, c)| *c).chain(error::OTHER_CODES.iter().copied()) {
        if !codes.contains(&code) {
            codes.push(code);
        }
    }
    codes
}

/// A string that is one of `words`.
fn words(words: impl IntoIterator<Item = &'static str>) -> Schema {
    ObjectBuilder::new().schema_type(Type::String).enum_values(Some(words)).build().into()
}

/// Schema of an error's `code`.
pub fn code() -> Schema {
    words(all_codes())
}

/// An owner token, as returned by a claim, acquire or read.
pub fn owner() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(format!("^[0-9a-f]{{{}}}$", flowguard_core::token::TOKEN_LEN)))
        .description(Some("owner token returned by a claim, acquire or read"))
        .build()
        .into()
}

/// An item's status.
pub fn item_status() -> Schema {
    words(
        [
            ItemStatus::None,
            ItemStatus::InProgress,
            ItemStatus::Abandoned,
            ItemStatus::Completed,
            ItemStatus::Failed,
            ItemStatus::Dead,
        ]
        .map(ItemStatus::as_str),
    )
}

/// Why a claim did not take the item (or a revival left it alone: the item's status).
pub fn busy_reason() -> Schema {
    item_status()
}

/// A claim's note: a short text kept with the item until its next claim.
pub fn note() -> Schema {
    let max = flowguard_core::tracker::MAX_NOTE_BYTES;
    ObjectBuilder::new().schema_type(Type::String).max_length(Some(max)).build().into()
}

/// A claim's `maxAttempts`: the attempts allowed before a failure makes the item dead.
pub fn max_attempts() -> Schema {
    whole_in(1, Some(u64::from(flowguard_core::tracker::MAX_ATTEMPTS_LIMIT)))
}

/// The status a `setItems` request asks for.
pub fn requested_status() -> Schema {
    words(
        [ItemStatus::InProgress, ItemStatus::Completed, ItemStatus::Failed, ItemStatus::None]
            .map(ItemStatus::as_str),
    )
}

/// The status filter of `listItems`.
pub fn list_filter() -> Schema {
    let statuses = [
        ItemStatus::InProgress,
        ItemStatus::Abandoned,
        ItemStatus::Completed,
        ItemStatus::Failed,
        ItemStatus::Dead,
    ];
    words(std::iter::once("all").chain(statuses.map(ItemStatus::as_str)))
}

pub fn batch_outcome() -> Schema {
    words(
        [BatchOutcome::Claimed, BatchOutcome::InProgress, BatchOutcome::Completed, BatchOutcome::Dead]
            .map(BatchOutcome::as_str),
    )
}

pub fn action() -> Schema {
    words([Action::Claim, Action::Complete, Action::Fail, Action::Unset, Action::Revive].map(Action::as_str))
}

pub fn enqueue_outcome() -> Schema {
    use flowguard_core::queue::EnqueueOutcome as E;
    words([E::Added, E::Duplicate, E::Debounced, E::Claimed, E::Dead].map(E::as_str))
}

pub fn settle_reason() -> Schema {
    use flowguard_core::queue::SettleOutcome as S;
    words([S::NotClaimed, S::NotOwner, S::Expired].into_iter().filter_map(S::reason))
}

/// Why a release or extend of a lock or permit changed nothing.
pub fn refusal() -> Schema {
    use flowguard_core::lock::Refusal as R;
    words([R::NotHeld, R::NotOwner].map(|r| r.as_str()))
}

/// A value of `schema`, or the same as a string: n8n's "Using Fields Below" body mode sends
/// every value as a string (see `body.rs`).
fn or_string(schema: ObjectBuilder, pattern: &str) -> OneOfBuilder {
    let text = ObjectBuilder::new().schema_type(Type::String).pattern(Some(pattern));
    OneOfBuilder::new().item(schema.build()).item(text.build())
}

/// A number of milliseconds, as a string.
const MILLIS: &str = r"^\s*[0-9]*\.?[0-9]+([eE][+-]?[0-9]+)?\s*$";

/// The digits of a whole number of 0 or more, as a string.
const DIGITS: &str = r"^\s*\+?[0-9]+\s*$";

/// A whole number of 0 or more (milliseconds, a count), or a string of digits.
pub fn whole() -> Schema {
    whole_in(0, None)
}

/// A duration in milliseconds: a number of 0 or more (a fraction kept), or the same as a string.
pub fn millis() -> Schema {
    let number = ObjectBuilder::new().schema_type(Type::Number).minimum(Some(0));
    or_string(number, MILLIS).build().into()
}

/// A whole number from `min` to `max`, or the same as a string of digits.
fn whole_in(min: u64, max: Option<u64>) -> Schema {
    let number = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(min)).maximum(max);
    or_string(number, DIGITS).build().into()
}

/// The page size of `listItems`.
pub fn item_page_limit() -> Schema {
    whole_in(1, Some(flowguard_core::tracker::MAX_LIST_LIMIT))
}

/// A queue's shard count.
pub fn shards() -> Schema {
    whole_in(1, Some(flowguard_core::queue::MAX_SHARDS))
}

/// A time in ms since the epoch.
pub fn epoch_ms() -> Schema {
    whole_in(1, Some(flowguard_core::state::MAX_EPOCH_MS))
}

/// A whole number, or the same as a string.
pub fn whole_signed() -> Schema {
    or_string(ObjectBuilder::new().schema_type(Type::Integer), r"^\s*[+-]?[0-9]+\s*$").build().into()
}

/// `true` or `false`, or the same as a string.
pub fn flag() -> Schema {
    or_string(ObjectBuilder::new().schema_type(Type::Boolean), r"^\s*(true|false)\s*$").build().into()
}

/// `keepMs`: milliseconds as [`millis`] reads them, or `"forever"`.
pub fn keep_ms() -> Schema {
    or_string(ObjectBuilder::new().schema_type(Type::Number).minimum(Some(0)), MILLIS)
        .item(words([Keep::FOREVER_WORD]))
        .description(Some("how long the record is kept: milliseconds, or \"forever\""))
        .build()
        .into()
}

/// What a batch claim did with each id, in the order given.
pub fn batch_outcomes() -> Schema {
    ArrayBuilder::new().items(RefOr::T(batch_outcome())).build().into()
}

/// A name or id (group, item, lock, queue, key...).
pub fn name() -> Schema {
    let max = flowguard_core::validate::MAX_NAME_BYTES;
    ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).max_length(Some(max)).build().into()
}

pub fn names() -> Schema {
    ArrayBuilder::new().items(RefOr::T(name())).build().into()
}

/// A free text (a label, a failure's reason).
pub fn text() -> Schema {
    let max = flowguard_core::validate::MAX_TEXT_BYTES;
    ObjectBuilder::new().schema_type(Type::String).max_length(Some(max)).build().into()
}

/// The cursor of a listing's next page, as the previous page gave it.
pub fn cursor() -> Schema {
    let max = flowguard_core::catalog::MAX_CURSOR_BYTES;
    ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).max_length(Some(max)).build().into()
}

/// The page size of a listing route.
pub fn page_limit() -> Schema {
    let max = crate::routes::catalog::MAX_LIST;
    let default = crate::routes::catalog::DEFAULT_LIST;
    let number = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).maximum(Some(max));
    or_string(number, DIGITS).default(Some(default.into())).build().into()
}
