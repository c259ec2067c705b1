//! Item Tracker: per-item processing state for batch loops.
//!
//! An item (group, id) is `in_progress` under a lease, `completed`, `failed`, or unknown. A claim
//! is atomic: it succeeds only when no live lease holds the item and it is not completed. A lease
//! that ran out shows the item as `abandoned` and makes it claimable again. Completing or failing
//! with an owner token is refused when a newer claim owns the item.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::time::Duration;

/// A status word of a record or transition: borrowed when set in-process (no allocation),
/// owned when read from Redis.
pub type Word = Cow<'static, str>;

use crate::backend::BoxFuture;
use crate::client::Client;
use crate::error::{At, Error, ErrorCode, FieldPath, Result};
use crate::{token, validate};

/// Default lease of a claim: 10 minutes.
pub const DEFAULT_LEASE_MS: u64 = 600_000;
/// How many transitions an item keeps in its timeline.
pub const MAX_TIMELINE: usize = 20;
/// The expiry of a record kept until it is unset ([`Keep::Forever`]): the latest time that every
/// backend stores exactly (the Redis scripts write record times with 14 significant digits), in
/// the year 5138. No clock reaches it, so no purge removes such a record.
pub const NEVER: i64 = 99_999_999_999_999;
/// The `keep_ms` of an [`ItemOp`] for [`Keep::Forever`]: so long that [`expiry`] gives [`NEVER`].
pub const KEEP_FOREVER_MS: u64 = NEVER as u64;

/// When a record kept `keep_ms` from `now` expires: [`NEVER`] at the latest.
pub fn expiry(now: i64, keep_ms: u64) -> i64 {
    now.saturating_add(keep_ms.min(KEEP_FOREVER_MS) as i64).min(NEVER)
}

/// How long a completed or failed record is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// For this long (more than 0, at most 365 days).
    For(Duration),
    /// Until it is unset: no expiry.
    Forever,
}

impl Keep {
    /// The word that asks for [`Keep::Forever`] where a number of milliseconds is also accepted.
    pub const FOREVER_WORD: &'static str = "forever";

    /// [`Keep::Forever`] from its word; any other word is refused, naming `field`.
    pub fn from_word(field: impl At, word: &str) -> Result<Keep> {
        if word == Self::FOREVER_WORD {
            return Ok(Keep::Forever);
        }
        Err(Error::invalid_at(
            field,
            format!(
                "must be a number of milliseconds or {:?}, got {:?}",
                Self::FOREVER_WORD,
                truncate(word, 40)
            ),
        ))
    }
}

/// Default and largest page of `list`.
pub const DEFAULT_LIST_LIMIT: u64 = 100;
pub const MAX_LIST_LIMIT: u64 = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemStatus {
    None,
    InProgress,
    Abandoned,
    Completed,
    Failed,
    /// Failed at its last allowed attempt (`maxAttempts`): kept, not claimed again until it is
    /// unset or revived.
    Dead,
}

impl ItemStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemStatus::None => "none",
            ItemStatus::InProgress => "in_progress",
            ItemStatus::Abandoned => "abandoned",
            ItemStatus::Completed => "completed",
            ItemStatus::Failed => "failed",
            ItemStatus::Dead => "dead",
        }
    }
}

/// The statuses a stored record can have, each at its code: the one numbering of every
/// in-process store (the in-memory record's status byte, the durable file's status column).
/// Code 0 is the empty status of a record that was unset or never claimed.
pub const STORED_STATUS: [&str; 5] = ["", "in_progress", "completed", "failed", "dead"];

/// The code of a stored status word (its position in [`STORED_STATUS`]), or `None` for a word
/// that is not one.
pub fn stored_status_code(word: &str) -> Option<u8> {
    STORED_STATUS.iter().position(|w| *w == word).map(|i| i as u8)
}

/// The largest result a completion stores: the bytes of its JSON text.
pub const MAX_RESULT_BYTES: usize = 4096;
/// The longest note a claim stores, in bytes.
pub const MAX_NOTE_BYTES: usize = 256;

/// Checks a completion's result, given as JSON text: valid JSON of at most
/// [`MAX_RESULT_BYTES`] bytes; the error names `field` and the limit.
pub fn check_result(field: impl At, json: &str) -> Result<()> {
    if json.len() > MAX_RESULT_BYTES {
        return Err(Error::invalid_at(
            field,
            format!(
                "must be at most {MAX_RESULT_BYTES} bytes of JSON text (4 KiB), got {} bytes",
                json.len()
            ),
        ));
    }
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(json) {
        return Err(Error::invalid_at(field, format!("must be JSON text: {e}")));
    }
    Ok(())
}

/// Checks a claim's note: at most [`MAX_NOTE_BYTES`] bytes; the error names `field` and the
/// limit.
pub fn check_note(field: impl At, note: &str) -> Result<()> {
    if note.len() > MAX_NOTE_BYTES {
        return Err(Error::invalid_at(
            field,
            format!("must be at most {MAX_NOTE_BYTES} bytes, got {} bytes", note.len()),
        ));
    }
    Ok(())
}

/// The most attempts a claim's `maxAttempts` allows.
pub const MAX_ATTEMPTS_LIMIT: u32 = 1000;

/// The status column of the durable file and of PostgreSQL: the status's code in
/// [`STORED_STATUS`] plus 8 times the record's `maxAttempts` (0 when it has none), so a record
/// claimed without `maxAttempts` keeps the column it always had and the tables no new column.
pub fn status_column(word: &str, max_attempts: Option<u32>) -> Option<i64> {
    let code = i64::from(stored_status_code(word)?);
    Some(code + 8 * i64::from(max_attempts.unwrap_or(0)))
}

/// A status column read back (see [`status_column`]): the status word and `maxAttempts`;
/// `None` for a column no record has.
pub fn from_status_column(column: i64) -> Option<(Word, Option<u32>)> {
    let word = STORED_STATUS.get(usize::try_from(column & 7).ok()?)?;
    let max = u32::try_from(column >> 3).ok()?;
    Some((Cow::Borrowed(*word), (max > 0).then_some(max)))
}

/// One entry of an item's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// Milliseconds since the epoch, by the backend's clock.
    #[serde(rename = "t")]
    pub at: i64,
    /// `in_progress`, `abandoned`, `completed` or `failed`.
    #[serde(rename = "s")]
    pub status: Word,
    /// The attempt this transition belongs to.
    #[serde(rename = "a", default)]
    pub attempt: u32,
    /// The reason given with `failed`.
    #[serde(rename = "e", default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The stored record of an item. The same JSON shape is kept by the Redis scripts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Stored status: `in_progress`, `completed` or `failed`.
    pub s: Word,
    /// Attempts (claims) so far.
    pub a: u32,
    /// Owner token of the latest claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub o: Option<String>,
    /// Lease expiry (ms) while in progress, else 0.
    #[serde(default)]
    pub l: i64,
    /// Created at (ms).
    pub c: i64,
    /// Updated at (ms).
    pub u: i64,
    /// Completed or failed at (ms), else 0.
    #[serde(default)]
    pub d: i64,
    /// Last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e: Option<String>,
    /// When the record is forgotten (ms).
    pub x: i64,
    /// Timeline, oldest first, at most [`MAX_TIMELINE`] entries.
    #[serde(default)]
    pub t: Vec<Transition>,
    /// The `maxAttempts` of the latest claim, when it gave one: a failure at that attempt (or
    /// later) makes the item dead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m: Option<u32>,
    /// The result its completion gave (JSON text, at most [`MAX_RESULT_BYTES`]); cleared by a
    /// claim (see [`crate::rules::tracker::take`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r: Option<String>,
    /// The note its latest claim gave (at most [`MAX_NOTE_BYTES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<String>,
}

impl Record {
    /// Its status at `now` (see [`crate::rules::tracker::status`]).
    pub fn status_at(&self, now: i64) -> ItemStatus {
        crate::rules::tracker::status(&self.s, self.l, now)
    }

    pub fn to_state(&self, id: &str, now: i64) -> ItemState {
        let status = self.status_at(now);
        let leased = matches!(status, ItemStatus::InProgress | ItemStatus::Abandoned);
        ItemState {
            id: id.to_string(),
            status,
            attempts: self.a,
            last_error: self.e.clone(),
            created_at: Some(self.c),
            updated_at: Some(self.u),
            lease_expires_at: if leased { Some(self.l) } else { None },
            finished_at: if self.d > 0 { Some(self.d) } else { None },
            // A record kept forever has no expiry to report.
            expires_at: (self.x < NEVER).then_some(self.x),
            timeline: self.t.clone(),
            max_attempts: self.m,
            result: self.r.clone(),
            note: self.n.clone(),
        }
    }
}

/// What a caller sees of an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemState {
    pub id: String,
    pub status: ItemStatus,
    pub attempts: u32,
    pub last_error: Option<String>,
    pub created_at: Option<i64>,
    pub updated_at: Option<i64>,
    pub lease_expires_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub expires_at: Option<i64>,
    pub timeline: Vec<Transition>,
    /// The `maxAttempts` of the latest claim, when it gave one.
    pub max_attempts: Option<u32>,
    /// The result of its completion, as JSON text, when the completion gave one.
    pub result: Option<String>,
    /// The note of its latest claim, when it gave one.
    pub note: Option<String>,
}

impl ItemState {
    pub fn unknown(id: &str) -> ItemState {
        ItemState {
            id: id.to_string(),
            status: ItemStatus::None,
            attempts: 0,
            last_error: None,
            created_at: None,
            updated_at: None,
            lease_expires_at: None,
            finished_at: None,
            expires_at: None,
            timeline: Vec::new(),
            max_attempts: None,
            result: None,
            note: None,
        }
    }
}

/// A validated operation on one item, as a backend executes it. A finished record expires at
/// [`expiry`]`(now, keep_ms)`; `keep_ms` is [`KEEP_FOREVER_MS`] for a record kept forever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemOp {
    Claim {
        id: String,
        owner: String,
        lease_ms: u64,
        reclaim_completed: bool,
        max_attempts: Option<u32>,
        /// The claim's note (checked: at most [`MAX_NOTE_BYTES`]).
        note: Option<String>,
    },
    Complete {
        id: String,
        owner: Option<String>,
        keep_ms: u64,
        /// The result as JSON text (checked: JSON, at most [`MAX_RESULT_BYTES`]).
        result: Option<String>,
    },
    Fail {
        id: String,
        owner: Option<String>,
        error: String,
        keep_ms: u64,
    },
    Unset {
        id: String,
    },
    /// A dead item (and, with `failed`, a failed one) made claimable again: see
    /// [`crate::rules::tracker::revive`].
    Revive {
        id: String,
        failed: bool,
        reset_attempts: bool,
    },
}

impl ItemOp {
    pub fn id(&self) -> &str {
        match self {
            ItemOp::Claim { id, .. }
            | ItemOp::Complete { id, .. }
            | ItemOp::Fail { id, .. }
            | ItemOp::Unset { id }
            | ItemOp::Revive { id, .. } => id,
        }
    }
    pub fn action(&self) -> Action {
        match self {
            ItemOp::Claim { .. } => Action::Claim,
            ItemOp::Complete { .. } => Action::Complete,
            ItemOp::Fail { .. } => Action::Fail,
            ItemOp::Unset { .. } => Action::Unset,
            ItemOp::Revive { .. } => Action::Revive,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Claim,
    Complete,
    Fail,
    Unset,
    Revive,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Claim => "claim",
            Action::Complete => "complete",
            Action::Fail => "fail",
            Action::Unset => "unset",
            Action::Revive => "revive",
        }
    }
}

/// How one operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done: claimed, completed, failed, or unset (`existed` tells whether there was a record).
    Done,
    /// A claim that did not succeed: the item is in progress under a live lease, or completed.
    Busy(ItemStatus),
    /// Refused with a coded error (for example `ERR_NOT_OWNER`); nothing changed for this item.
    Refused(Error),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpResult {
    pub id: String,
    pub action: Action,
    pub outcome: Outcome,
    /// The owner token of a successful claim.
    pub owner: Option<String>,
    /// The item after the operation (before it, for unset and refusals).
    pub item: ItemState,
}

/// A request to change one item, before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemRequest {
    pub id: String,
    /// `in_progress` (claim), `completed`, `failed`, or `none` (unset).
    pub status: String,
    pub owner: Option<String>,
    pub error: Option<String>,
    /// Lease of a claim ([`DEFAULT_LEASE_MS`] by default). Checked on every request: a bad value
    /// is refused even where it would not be used.
    pub timeout: Option<Duration>,
    /// How long a completed or failed record is kept; the client's retention by default.
    pub keep: Option<Keep>,
    pub reclaim_completed: bool,
    /// A claim's attempt budget (1 to [`MAX_ATTEMPTS_LIMIT`]): a failure of attempt
    /// `max_attempts` or later makes the item dead. None: no limit.
    pub max_attempts: Option<u32>,
    /// A claim's note: a short text kept with the item until the next claim (at most
    /// [`MAX_NOTE_BYTES`]). Checked on every request.
    pub note: Option<String>,
    /// A completion's result as JSON text (at most [`MAX_RESULT_BYTES`]). Checked on every
    /// request.
    pub result: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListFilter {
    All,
    InProgress,
    Abandoned,
    Completed,
    Failed,
    Dead,
}

impl ListFilter {
    pub fn parse(s: &str) -> Result<ListFilter> {
        Ok(match s {
            "all" => ListFilter::All,
            "in_progress" => ListFilter::InProgress,
            "abandoned" => ListFilter::Abandoned,
            "completed" => ListFilter::Completed,
            "failed" => ListFilter::Failed,
            "dead" => ListFilter::Dead,
            other => {
                return Err(Error::invalid_at(
                    "status",
                    format!(
                        "must be one of all, in_progress, abandoned, completed, failed, dead; got {:?}",
                        truncate(other, 40)
                    ),
                ))
            }
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListQuery {
    pub filter: ListFilter,
    pub offset: u64,
    pub limit: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub in_progress: u64,
    pub abandoned: u64,
    pub completed: u64,
    pub failed: u64,
    pub dead: u64,
}

impl Counts {
    pub fn total(&self) -> u64 {
        self.in_progress + self.abandoned + self.completed + self.failed + self.dead
    }
    pub fn of(&self, f: ListFilter) -> u64 {
        match f {
            ListFilter::All => self.total(),
            ListFilter::InProgress => self.in_progress,
            ListFilter::Abandoned => self.abandoned,
            ListFilter::Completed => self.completed,
            ListFilter::Failed => self.failed,
            ListFilter::Dead => self.dead,
        }
    }
}

/// One page of a group's items. Items are ordered: in progress (by lease expiry), abandoned
/// (by lease expiry), failed, dead, completed (by when their record expires).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemList {
    pub counts: Counts,
    pub items: Vec<ItemState>,
    /// Offset of the next page, when there is one.
    pub next_offset: Option<u64>,
}

/// What a batch claim did with one id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Claimed by this call (a new item, an abandoned or failed one, or a completed one with
    /// `reclaim_completed`).
    Claimed,
    /// Left alone: another live claim holds it (or an earlier occurrence of the id in this call).
    InProgress,
    /// Left alone: it is completed.
    Completed,
    /// Left alone: it is dead (failed at its last allowed attempt) until revived or unset.
    Dead,
}

impl BatchOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            BatchOutcome::Claimed => "claimed",
            BatchOutcome::InProgress => "in_progress",
            BatchOutcome::Completed => "completed",
            BatchOutcome::Dead => "dead",
        }
    }
}

/// The compact result of [`Client::claim_batch`]: one owner token for every item the call
/// claimed, and per id (in the order given) what happened and the item's attempts after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimBatch {
    pub owner: String,
    /// When the leases of the claimed items end (ms, the backend's clock).
    pub lease_expires_at: i64,
    pub outcomes: Vec<BatchOutcome>,
    /// Attempts (claims) of each item after the call: the claim's number when claimed.
    pub attempts: Vec<u32>,
}

/// A validated batch claim, as a backend executes it.
#[derive(Debug, Clone, Copy)]
pub struct BatchClaim<'a> {
    pub ids: &'a [String],
    pub owner: &'a str,
    pub lease_ms: u64,
    pub reclaim_completed: bool,
    pub retention_ms: u64,
    /// The claims' attempt budget (see [`ItemRequest::max_attempts`]).
    pub max_attempts: Option<u32>,
    /// The claims' note (see [`ItemRequest::note`]).
    pub note: Option<&'a str>,
}

impl<'a> BatchClaim<'a> {
    /// What each claim gives beside its owner and lease (see [`crate::rules::tracker::take`]).
    pub fn given(&self) -> crate::rules::tracker::Take<'a> {
        crate::rules::tracker::Take { max_attempts: self.max_attempts, note: self.note }
    }
}

/// What a backend must do for the Item Tracker.
pub trait TrackerBackend {
    /// Claims every id of `claim` in `group` (in order, atomically), with one owner token.
    fn claim_batch<'a>(&'a self, group: &'a str, claim: BatchClaim<'a>) -> BoxFuture<'a, ClaimBatch>;
    /// Applies `ops` to items of `group`, atomically as one batch, in order.
    fn apply<'a>(
        &'a self,
        group: &'a str,
        ops: &'a [ItemOp],
        retention_ms: u64,
    ) -> BoxFuture<'a, Vec<OpResult>>;
    /// Reads items of `group`.
    fn read<'a>(&'a self, group: &'a str, ids: &'a [String]) -> BoxFuture<'a, Vec<ItemState>>;
    /// Lists a page of `group`.
    fn list<'a>(&'a self, group: &'a str, query: ListQuery, retention_ms: u64) -> BoxFuture<'a, ItemList>;
}

/// The single-item result of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimResult {
    pub claimed: bool,
    pub owner: Option<String>,
    /// Why the claim did not succeed: `in_progress`, `completed` or `dead`.
    pub reason: Option<ItemStatus>,
    pub item: ItemState,
}

impl From<OpResult> for ClaimResult {
    fn from(r: OpResult) -> Self {
        let (claimed, reason) = match r.outcome {
            Outcome::Done => (true, None),
            Outcome::Busy(s) => (false, Some(s)),
            Outcome::Refused(_) => (false, None),
        };
        ClaimResult { claimed, owner: r.owner, reason, item: r.item }
    }
}

pub(crate) fn truncate(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max_chars).collect();
        t.push('…');
        t
    }
}

/// A field of a request: `requests[i].name` in a batch, `name` for a single-item call. The
/// path is built only when an error needs it.
#[derive(Clone, Copy)]
struct ReqField(Option<usize>, &'static str);

impl At for ReqField {
    fn path(self) -> FieldPath {
        match self.0 {
            Some(i) => FieldPath::new("requests").index(i).field(self.1),
            None => FieldPath::new(self.1),
        }
    }
}

/// Validates a request (`i`: its position in a batch) and turns it into an operation for a backend.
fn to_op(i: Option<usize>, req: ItemRequest, retention_ms: u64) -> Result<ItemOp> {
    let field = |name| ReqField(i, name);
    validate::name(field("id"), &req.id)?;
    if let Some(owner) = &req.owner {
        token::check_token(field("owner"), owner)?;
    }
    let keep_ms = match req.keep {
        None => retention_ms,
        Some(Keep::Forever) => KEEP_FOREVER_MS,
        Some(Keep::For(d)) => validate::duration(field("keep"), d).map_err(|mut e| {
            if d.as_millis() > validate::MAX_DURATION_MS as u128 {
                e.message.push_str(&format!("; {:?} keeps it with no expiry", Keep::FOREVER_WORD));
            }
            e
        })?,
    };
    // The lease is checked whatever the status, so a bad value never passes unnoticed.
    let lease_ms = validate::duration_or(field("timeout"), req.timeout, DEFAULT_LEASE_MS)?;
    let max_attempts = check_max_attempts(field("maxAttempts"), req.max_attempts)?;
    if let Some(note) = &req.note {
        check_note(field("note"), note)?;
    }
    if let Some(result) = &req.result {
        check_result(field("result"), result)?;
    }
    Ok(match req.status.as_str() {
        "in_progress" => ItemOp::Claim {
            id: req.id,
            owner: token::new_token(),
            lease_ms,
            reclaim_completed: req.reclaim_completed,
            max_attempts,
            note: req.note,
        },
        "completed" => ItemOp::Complete { id: req.id, owner: req.owner, keep_ms, result: req.result },
        "failed" => {
            let error = req.error.unwrap_or_default();
            validate::text(field("error"), &error)?;
            ItemOp::Fail { id: req.id, owner: req.owner, error, keep_ms }
        }
        "none" => ItemOp::Unset { id: req.id },
        other => {
            return Err(Error::invalid_at(
                field("status"),
                format!("must be one of in_progress, completed, failed, none; got {:?}", truncate(other, 40)),
            ))
        }
    })
}

impl Client {
    /// Applies a batch of requests to items of one group in one atomic step (one round trip on
    /// Redis). Every request is validated before anything is written.
    pub async fn set_items(&self, group: &str, requests: Vec<ItemRequest>) -> Result<Vec<OpResult>> {
        validate::name("group", group)?;
        validate::batch_len("requests", requests.len())?;
        let retention = self.config().retention_ms;
        let ops = requests
            .into_iter()
            .enumerate()
            .map(|(i, r)| to_op(Some(i), r, retention))
            .collect::<Result<Vec<_>>>()?;
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        self.backend().apply(group, &ops, retention).await
    }

    /// Claims many items of one group for `timeout` each, in one atomic step.
    pub async fn claim_many(
        &self,
        group: &str,
        ids: Vec<String>,
        timeout: Option<Duration>,
        reclaim_completed: bool,
        max_attempts: Option<u32>,
        note: Option<String>,
    ) -> Result<Vec<ClaimResult>> {
        let reqs = ids
            .into_iter()
            .map(|id| ItemRequest {
                id,
                status: "in_progress".into(),
                timeout,
                reclaim_completed,
                max_attempts,
                note: note.clone(),
                ..Default::default()
            })
            .collect();
        Ok(self.set_items(group, reqs).await?.into_iter().map(ClaimResult::from).collect())
    }

    /// Claims many items of one group for `timeout` each, in one atomic step, under ONE owner
    /// token, with a compact result (no item states): what a loop over thousands of ids needs.
    /// Busy and completed items are results, not errors; invalid input rejects the whole call
    /// before anything is written.
    pub async fn claim_batch(
        &self,
        group: &str,
        ids: &[String],
        timeout: Option<Duration>,
        reclaim_completed: bool,
        max_attempts: Option<u32>,
        note: Option<&str>,
    ) -> Result<ClaimBatch> {
        validate::name("group", group)?;
        check_ids(ids)?;
        let lease_ms = validate::duration_or("timeout", timeout, DEFAULT_LEASE_MS)?;
        let max_attempts = check_max_attempts("maxAttempts", max_attempts)?;
        if let Some(note) = note {
            check_note("note", note)?;
        }
        let owner = token::new_token();
        if ids.is_empty() {
            return Ok(ClaimBatch { owner, lease_expires_at: 0, outcomes: Vec::new(), attempts: Vec::new() });
        }
        let claim = BatchClaim {
            ids,
            owner: &owner,
            lease_ms,
            reclaim_completed,
            retention_ms: self.config().retention_ms,
            max_attempts,
            note,
        };
        self.backend().claim_batch(group, claim).await
    }

    /// Makes dead items of one group claimable again, in one atomic step: each dead id becomes
    /// failed (its attempts, last error and timeline kept, a `revived` transition added), as
    /// BullMQ's `retryJobs` moves failed jobs back; with `failed`, failed ids are revived too
    /// (which matters with `reset_attempts`). `reset_attempts` starts the attempt count again
    /// at 0 (BullMQ's `resetAttemptsMade`). An id that is not dead (nor failed, with `failed`) is
    /// left alone, its result [`Outcome::Busy`] with its status.
    pub async fn revive_items(
        &self,
        group: &str,
        ids: Vec<String>,
        failed: bool,
        reset_attempts: bool,
    ) -> Result<Vec<OpResult>> {
        validate::name("group", group)?;
        check_ids(&ids)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ops: Vec<ItemOp> =
            ids.into_iter().map(|id| ItemOp::Revive { id, failed, reset_attempts }).collect();
        self.backend().apply(group, &ops, self.config().retention_ms).await
    }

    /// Sets one item and turns a refusal into an error. Errors name the request's fields
    /// (`id`, `owner`…) as a single-item call takes them.
    pub async fn set_item(&self, group: &str, request: ItemRequest) -> Result<OpResult> {
        validate::name("group", group)?;
        let retention = self.config().retention_ms;
        let op = to_op(None, request, retention)?;
        let mut results = self.backend().apply(group, std::slice::from_ref(&op), retention).await?;
        let r = results.pop().ok_or_else(|| Error::internal("backend returned no result"))?;
        if let Outcome::Refused(e) = &r.outcome {
            return Err(e.clone());
        }
        Ok(r)
    }

    /// Reads one item (status `none` when unknown).
    pub async fn get_item(&self, group: &str, id: &str) -> Result<ItemState> {
        validate::name("group", group)?;
        validate::name("id", id)?;
        let mut v = self.backend().read(group, &[id.to_string()]).await?;
        v.pop().ok_or_else(|| Error::internal("backend returned no item"))
    }

    pub async fn get_items(&self, group: &str, ids: Vec<String>) -> Result<Vec<ItemState>> {
        validate::name("group", group)?;
        check_ids(&ids)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.backend().read(group, &ids).await
    }

    /// One page of a group's items: `status` filters (default all), `offset` (default 0, at
    /// most 2^32 - 1) skips, `limit` (1 to [`MAX_LIST_LIMIT`], default [`DEFAULT_LIST_LIMIT`]).
    pub async fn list_items(
        &self,
        group: &str,
        status: Option<&str>,
        offset: Option<u64>,
        limit: Option<u64>,
    ) -> Result<ItemList> {
        validate::name("group", group)?;
        let filter = match status {
            Some(s) => ListFilter::parse(s)?,
            None => ListFilter::All,
        };
        let offset = validate::range("offset", offset.unwrap_or(0), 0, u32::MAX as u64)?;
        let limit = validate::range("limit", limit.unwrap_or(DEFAULT_LIST_LIMIT), 1, MAX_LIST_LIMIT)?;
        self.backend().list(group, ListQuery { filter, offset, limit }, self.config().retention_ms).await
    }
}

/// A claim's `maxAttempts`: none, or 1 to [`MAX_ATTEMPTS_LIMIT`].
fn check_max_attempts(field: impl At, max_attempts: Option<u32>) -> Result<Option<u32>> {
    match max_attempts {
        Some(m) => Ok(Some(validate::range(field, u64::from(m), 1, u64::from(MAX_ATTEMPTS_LIMIT))? as u32)),
        None => Ok(None),
    }
}

fn check_ids(ids: &[String]) -> Result<()> {
    let at = FieldPath::new("ids");
    validate::batch_len(&at, ids.len())?;
    for (i, id) in ids.iter().enumerate() {
        validate::name((&at, i), id)?;
    }
    Ok(())
}

/// Builds the error for a completion or failure whose owner token is stale.
pub fn not_owner(group: &str, id: &str, rec: Option<&Record>) -> Error {
    let what = match rec {
        Some(r) => {
            format!("another claim owns it now (attempt {}, {}); its state was left as it is", r.a, r.s)
        }
        None => "it has no record any more (it was unset or its record expired)".to_string(),
    };
    Error::new(
        ErrorCode::NotOwner,
        format!(
            "item {:?} of group {:?} is not owned by this owner token: {what}",
            truncate(id, 80),
            truncate(group, 80)
        ),
    )
}
