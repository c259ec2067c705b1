//! Item Tracker methods of `Flowguard`.

use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;

use super::client::Flowguard;
use serde::Serialize;

use super::from_js::{js_input, ms, opt, opt_ms, whole, Arg, Elem, Field};
use super::json::{json, json_sized, Json};
use super::{now_or_promise, promise};
use flowguard_core::error::At;
use flowguard_core::tracker::{self as core, ItemRequest, Keep, Outcome};

#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    /// When, in ms since the epoch (the backend's clock).
    pub at: f64,
    /// `revived`: made claimable again by `reviveItems`.
    #[napi(ts_type = "'in_progress' | 'abandoned' | 'completed' | 'failed' | 'dead' | 'revived'")]
    pub status: String,
    pub attempt: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An item's state. `abandoned`: claimed, but its lease ran out before it was completed or failed.
/// `dead`: failed at the last attempt its claim's `maxAttempts` allowed; not claimed again until
/// it is revived (`reviveItems`) or unset.
#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemState {
    pub id: String,
    #[napi(ts_type = "'none' | 'in_progress' | 'abandoned' | 'completed' | 'failed' | 'dead'")]
    pub status: String,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<f64>,
    /// When the record will be forgotten (retention, or `keepMs` of a completion); absent for a
    /// record kept forever (`keepMs: 'forever'`) and for an unknown item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<f64>,
    /// The latest transitions, oldest first (at most 20).
    pub timeline: Vec<Transition>,
    /// The `maxAttempts` of the latest claim, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// The result its completion gave (`complete`'s `result`); absent when none was given, and
    /// after a new claim (a result belongs to the attempt that completed, as BullMQ's
    /// `returnvalue`).
    #[napi(ts_type = "unknown")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// The note its latest claim gave (`claim`'s `note`); absent when that claim gave none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl From<core::ItemState> for ItemState {
    fn from(s: core::ItemState) -> Self {
        ItemState {
            id: s.id,
            status: s.status.as_str().to_string(),
            attempts: s.attempts,
            last_error: s.last_error,
            created_at: s.created_at.map(|v| v as f64),
            updated_at: s.updated_at.map(|v| v as f64),
            lease_expires_at: s.lease_expires_at.map(|v| v as f64),
            finished_at: s.finished_at.map(|v| v as f64),
            expires_at: s.expires_at.map(|v| v as f64),
            timeline: s
                .timeline
                .into_iter()
                .map(|t| Transition {
                    at: t.at as f64,
                    status: t.status.into_owned(),
                    attempt: t.attempt,
                    error: t.error,
                })
                .collect(),
            max_attempts: s.max_attempts,
            // The core stores only JSON text it checked; text that no longer parses reads as absent.
            result: s.result.and_then(|r| serde_json::from_str(&r).ok()),
            note: s.note,
        }
    }
}

/// Options of a claim.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct ClaimOptions {
    /// The lease in ms: after it the item shows as abandoned and can be claimed again. Default 600000.
    pub timeout_ms: Option<f64>,
    /// Claim even an item that is completed. Default false.
    pub reclaim_completed: Option<bool>,
    /// The attempts allowed (1 to 1000): a failure of attempt `maxAttempts` or later makes the
    /// item `dead` instead of `failed`. Default: no limit.
    pub max_attempts: Option<f64>,
    /// A short text kept with the item until its next claim (at most 256 bytes), returned as
    /// the item's `note`.
    pub note: Option<String>,
}

js_input!(ClaimOptions { timeout_ms = "timeoutMs", reclaim_completed = "reclaimCompleted", max_attempts = "maxAttempts", note = "note" });

/// The lease, `reclaimCompleted`, `maxAttempts` and note of a claim's options.
type ClaimOpts = (Option<std::time::Duration>, bool, Option<u32>, Option<String>);

fn claim_opts(o: Option<ClaimOptions>) -> flowguard_core::Result<ClaimOpts> {
    let Some(o) = o else { return Ok((None, false, None, None)) };
    if let Some(note) = &o.note {
        core::check_note(Field("options", "note"), note)?;
    }
    Ok((
        opt_ms(Field("options", "timeoutMs"), o.timeout_ms)?,
        o.reclaim_completed.unwrap_or(false),
        max_attempts(Field("options", "maxAttempts"), o.max_attempts)?,
        o.note,
    ))
}

/// A `maxAttempts` given as a JavaScript number: a whole number (the core checks the range).
fn max_attempts(at: impl At + Copy, v: Option<f64>) -> flowguard_core::Result<Option<u32>> {
    Ok(whole(at, v)?.map(|m| u32::try_from(m).unwrap_or(u32::MAX)))
}

#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimResult {
    pub id: String,
    pub claimed: bool,
    /// The owner token: pass it to `complete` / `fail` so a stale worker cannot overwrite a newer claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Why the claim did not succeed.
    #[napi(ts_type = "'in_progress' | 'completed' | 'dead'")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub item: ItemState,
}

impl From<core::ClaimResult> for ClaimResult {
    fn from(r: core::ClaimResult) -> Self {
        ClaimResult {
            id: r.item.id.clone(),
            claimed: r.claimed,
            owner: r.owner,
            reason: r.reason.map(|s| s.as_str().to_string()),
            item: r.item.into(),
        }
    }
}

/// The compact result of `claimBatch`.
#[napi(object, object_from_js = false)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimBatch {
    /// The owner token of every item this call claimed: pass it to `complete` / `fail`.
    pub owner: String,
    /// When the leases of the claimed items end, in ms since the epoch (the backend's clock).
    pub lease_expires_at: f64,
    /// How many ids this call claimed.
    pub claimed: u32,
    /// Per id, in the order given: `claimed` by this call, or left alone because it is
    /// `in_progress` under a live claim (also a repeated id), `completed` or `dead`.
    #[napi(ts_type = "Array<'claimed' | 'in_progress' | 'completed' | 'dead'>")]
    pub results: Vec<&'static str>,
    /// Per id, in the order given: the item's attempts after the call (when claimed, this claim's number).
    pub attempts: Vec<u32>,
}

/// Options of `complete` and `fail`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct FinishOptions {
    /// The owner token of the claim; when given and a newer claim owns the item, the call is
    /// refused with `ERR_NOT_OWNER`.
    pub owner: Option<String>,
    /// How long the record is kept, in ms (a completed item counts as done until then), or
    /// `'forever'`: until it is unset. Default: the client's retention.
    #[napi(ts_type = "number | 'forever'")]
    pub keep_ms: Option<Either<f64, String>>,
    /// `complete` only: a JSON value stored with the item (at most 4 KiB of JSON text, else
    /// `ERR_INVALID_ARGUMENT` on `options.result`), returned as the item's `result` until its next
    /// claim. (index.js turns the value into JSON text, which is what this layer receives.)
    #[napi(ts_type = "unknown")]
    pub result: Option<String>,
}

js_input!(FinishOptions { owner = "owner", keep_ms = "keepMs", result = "result" });

/// One change of `setItems`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct ItemRequestInput {
    pub id: String,
    /// `in_progress` claims, `completed` / `failed` finish, `none` forgets the item.
    #[napi(ts_type = "'in_progress' | 'completed' | 'failed' | 'none'")]
    pub status: String,
    /// The owner token of the claim (complete and fail).
    pub owner: Option<String>,
    /// The reason of a failure.
    pub error: Option<String>,
    /// The lease of a claim in ms. Default 600000. Checked on every request.
    pub timeout_ms: Option<f64>,
    /// How long a finished record is kept, in ms, or `'forever'`: until it is unset. Default: the
    /// client's retention.
    #[napi(ts_type = "number | 'forever'")]
    pub keep_ms: Option<Either<f64, String>>,
    /// Claim even an item that is completed. Default false.
    pub reclaim_completed: Option<bool>,
    /// A claim's attempts allowed (see `ClaimOptions.maxAttempts`). Checked on every request.
    pub max_attempts: Option<f64>,
    /// A claim's note (see `ClaimOptions.note`). Checked on every request.
    pub note: Option<String>,
    /// A completion's result: a JSON value (see `FinishOptions.result`; index.js turns it into
    /// JSON text). Checked on every request.
    #[napi(ts_type = "unknown")]
    pub result: Option<String>,
}

js_input!(ItemRequestInput { id = "id", status = "status", owner = "owner", error = "error", timeout_ms = "timeoutMs", keep_ms = "keepMs", reclaim_completed = "reclaimCompleted", max_attempts = "maxAttempts", note = "note", result = "result" });

impl ItemRequestInput {
    fn into_core(self, at: impl At + Copy) -> flowguard_core::Result<ItemRequest> {
        Ok(ItemRequest {
            id: self.id,
            status: self.status,
            owner: self.owner,
            error: self.error,
            timeout: opt_ms(Field(at, "timeoutMs"), self.timeout_ms)?,
            keep: opt_keep(Field(at, "keepMs"), self.keep_ms)?,
            reclaim_completed: self.reclaim_completed.unwrap_or(false),
            max_attempts: max_attempts(Field(at, "maxAttempts"), self.max_attempts)?,
            note: self.note,
            result: self.result,
        })
    }
}

#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemResult {
    pub id: String,
    #[napi(ts_type = "'claim' | 'complete' | 'fail' | 'unset' | 'revive'")]
    pub action: String,
    /// Done. False for a claim that found the item busy, a revival of an item that is not dead
    /// (nor failed, with `failed`), and a refusal (see `code`).
    pub ok: bool,
    /// For claims: whether this call claimed the item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claimed: Option<bool>,
    /// Why it was left alone: the item's status.
    #[napi(ts_type = "'none' | 'in_progress' | 'abandoned' | 'completed' | 'failed' | 'dead'")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The error code of a refusal, e.g. `ERR_NOT_OWNER`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub item: ItemState,
}

impl From<core::OpResult> for ItemResult {
    fn from(r: core::OpResult) -> Self {
        let is_claim = r.action == core::Action::Claim;
        let (ok, reason, code, message) = match r.outcome {
            Outcome::Done => (true, None, None, None),
            Outcome::Busy(s) => (false, Some(s.as_str().to_string()), None, None),
            Outcome::Refused(e) => (false, None, Some(e.code.as_str().to_string()), Some(e.message)),
        };
        ItemResult {
            id: r.id,
            action: r.action.as_str().to_string(),
            ok,
            claimed: if is_claim { Some(ok) } else { None },
            reason,
            owner: r.owner,
            code,
            message,
            item: r.item.into(),
        }
    }
}

#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusCounts {
    pub in_progress: f64,
    pub abandoned: f64,
    pub completed: f64,
    pub failed: f64,
    pub dead: f64,
    pub total: f64,
}

/// Options of `listItems`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct ListOptions {
    /// Only items in this status. Default `all`.
    #[napi(ts_type = "'all' | 'in_progress' | 'abandoned' | 'completed' | 'failed' | 'dead'")]
    pub status: Option<String>,
    /// How many items to skip. Default 0.
    pub offset: Option<f64>,
    /// Default 100, at most 10000.
    pub limit: Option<f64>,
}

js_input!(ListOptions { status = "status", offset = "offset", limit = "limit" });

#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemList {
    pub counts: StatusCounts,
    pub items: Vec<ItemState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<f64>,
}

/// An item state as a JSON array, without the id (the caller has it) and without keys:
/// `[status, attempts, lastError, createdAt, updatedAt, leaseExpiresAt, finishedAt, expiresAt,
/// [[at, status, attempt, error], ...]]`, then `maxAttempts`, `note` and `result` (JSON text)
/// only when the item has one of them, null for absent values. `JSON.parse` of an array is
/// several times cheaper than of the object with its keys; index.js builds the object.
fn item_tuple(s: &core::ItemState) -> impl Serialize + '_ {
    ItemTuple(s)
}

struct ItemTuple<'a>(&'a core::ItemState);

impl Serialize for ItemTuple<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let s = self.0;
        let more = s.max_attempts.is_some() || s.note.is_some() || s.result.is_some();
        let mut seq = ser.serialize_seq(Some(if more { 12 } else { 9 }))?;
        seq.serialize_element(s.status.as_str())?;
        seq.serialize_element(&s.attempts)?;
        seq.serialize_element(&s.last_error)?;
        seq.serialize_element(&s.created_at)?;
        seq.serialize_element(&s.updated_at)?;
        seq.serialize_element(&s.lease_expires_at)?;
        seq.serialize_element(&s.finished_at)?;
        seq.serialize_element(&s.expires_at)?;
        let timeline: Vec<_> = s.timeline.iter().map(|t| (t.at, &*t.status, t.attempt, &t.error)).collect();
        seq.serialize_element(&timeline)?;
        if more {
            seq.serialize_element(&s.max_attempts)?;
            seq.serialize_element(&s.note)?;
            seq.serialize_element(&s.result)?;
        }
        seq.end()
    }
}

/// A claim result as a JSON array: `[claimed, owner, reason, item]` (see [`item_tuple`]).
fn claim_tuple(r: &core::ClaimResult) -> impl Serialize + '_ {
    (r.claimed, &r.owner, r.reason.map(|s| s.as_str()), item_tuple(&r.item))
}

fn status_code(s: &str) -> f64 {
    match s {
        "none" => 0.0,
        "in_progress" => 1.0,
        "abandoned" => 2.0,
        "completed" => 3.0,
        "failed" => 4.0,
        "dead" => 5.0,
        "revived" => 6.0,
        _ => -1.0,
    }
}

/// How many numbers a claim result may need (see [`write_claim`]).
const CLAIM_NUMBERS: usize = 10 + 3 * core::MAX_TIMELINE;

/// Writes a claim result without texts into `out` (at least [`CLAIM_NUMBERS`] long): claimed
/// (0/1), reason (0 none, 1 in_progress, 3 completed), status (the codes of `status_code`),
/// attempts, createdAt, updatedAt, leaseExpiresAt, finishedAt, expiresAt (NaN when absent), the
/// timeline's length n, then n times at, status, attempt: at most 10 + 3 × 20 = 70 numbers.
fn write_claim(out: &mut [f64], r: &core::ClaimResult) {
    let s = &r.item;
    let opt = |v: Option<i64>| v.map(|v| v as f64).unwrap_or(f64::NAN);
    out[0] = if r.claimed { 1.0 } else { 0.0 };
    out[1] = r.reason.map(|x| status_code(x.as_str())).unwrap_or(0.0);
    out[2] = status_code(s.status.as_str());
    out[3] = s.attempts as f64;
    out[4] = opt(s.created_at);
    out[5] = opt(s.updated_at);
    out[6] = opt(s.lease_expires_at);
    out[7] = opt(s.finished_at);
    out[8] = opt(s.expires_at);
    out[9] = s.timeline.len() as f64;
    for (k, t) in s.timeline.iter().enumerate() {
        out[10 + 3 * k] = t.at as f64;
        out[11 + 3 * k] = status_code(&t.status);
        out[12 + 3 * k] = t.attempt as f64;
    }
}

/// About the JSON text of one item's state in a result of many (its id, owner, times and a short
/// timeline): reserved up front for the whole result.
const ITEM_JSON_BYTES: usize = 320;

/// JSON text handed to JavaScript as a string (index.js parses it).
fn compact<T: Serialize>(v: &T) -> flowguard_core::Result<String> {
    serde_json::to_string(v)
        .map_err(|e| flowguard_core::Error::internal(format!("cannot serialize a result: {e}")))
}

/// The owner, kept time and result (JSON text) of a finish's options.
type FinishOpts = (Option<String>, Option<Keep>, Option<String>);

fn finish_opts(o: Option<FinishOptions>) -> flowguard_core::Result<FinishOpts> {
    let Some(o) = o else { return Ok((None, None, None)) };
    if let Some(result) = &o.result {
        core::check_result(Field("options", "result"), result)?;
    }
    Ok((o.owner, opt_keep(Field("options", "keepMs"), o.keep_ms)?, o.result))
}

/// `keepMs`: milliseconds, or the word `'forever'`.
fn opt_keep(at: impl At + Copy, v: Option<Either<f64, String>>) -> flowguard_core::Result<Option<Keep>> {
    Ok(match v {
        None => None,
        Some(Either::A(n)) => Some(Keep::For(ms(at, n)?)),
        Some(Either::B(word)) => Some(Keep::from_word(at, &word)?),
    })
}

/// A claim request for one item.
fn claim_request(id: String, (timeout, reclaim, max_attempts, note): ClaimOpts) -> ItemRequest {
    ItemRequest {
        id,
        status: "in_progress".into(),
        timeout,
        reclaim_completed: reclaim,
        max_attempts,
        note,
        ..Default::default()
    }
}

/// Options of `reviveItems`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct ReviveOptions {
    /// Revive failed items too (with `resetAttempts`, a new attempt budget). Default false.
    pub failed: Option<bool>,
    /// Start the attempts again at 0 (BullMQ's `resetAttemptsMade`). Default false: kept, so an
    /// item revived at its `maxAttempts` gets one more attempt before it is dead again.
    pub reset_attempts: Option<bool>,
}

js_input!(ReviveOptions { failed = "failed", reset_attempts = "resetAttempts" });

#[napi]
impl Flowguard {
    /// Claims one item. index.js's `claim` calls this and builds the `ClaimResult` from the
    /// compact JSON array it returns (see [`claim_tuple`]): the value itself when the call is
    /// done at once (embedded), else a Promise of it.
    #[napi(js_name = "_claim", skip_typescript)]
    pub fn claim_compact<'e>(
        &self,
        env: &'e Env,
        group: Arg<'e, String>,
        id: Arg<'e, String>,
        options: Arg<'e, Option<ClaimOptions>>,
    ) -> Result<Unknown<'e>> {
        let parsed = (|| Ok((group.get("group")?, id.get("id")?, claim_opts(options.get("options")?)?)))();
        let client = self.client.clone();
        now_or_promise(env, async move {
            let (group, id, opts) = parsed?;
            let r = client.set_item(&group, claim_request(id, opts)).await?;
            compact(&claim_tuple(&core::ClaimResult::from(r)))
        })
    }

    /// Claims one item on the embedded stores (in memory or durable), the fastest way through
    /// napi (index.js's `claim` uses it for them): the numbers of the result are written into
    /// `out` (a Float64Array of at least 70 entries, see [`write_claim`]), and the call returns
    /// the owner token (claimed), null (not claimed), or, when the item has error texts, the
    /// compact JSON array of `_claim` (its first character is `[`). When the durable store's
    /// file is locked by another process, the call returns a Promise of that JSON array instead.
    #[napi(js_name = "_claimNow", skip_typescript)]
    pub fn claim_now<'e>(
        &self,
        env: &'e Env,
        out: Unknown<'e>,
        group: Arg<'e, String>,
        id: Arg<'e, String>,
        options: Arg<'e, Option<ClaimOptions>>,
    ) -> Result<Unknown<'e>> {
        let fail = |e: flowguard_core::Error| super::js_error(env, &e);
        if !matches!(self.client.backend().kind(), "embedded" | "durable") {
            // Checked before anything runs: a Redis claim must not be started and dropped.
            return Err(fail(flowguard_core::Error::internal("_claimNow is for the embedded stores")));
        }
        // The arguments are read first: their getters may run JavaScript, which could detach the
        // output's buffer, so the output is taken after them (its error still comes first). It is
        // checked before the claim is applied: a claim must never be made and then lost because
        // its result could not be written.
        let args = (|| Ok((group.get("group")?, id.get("id")?, claim_opts(options.get("options")?)?)))();
        let mut out = Float64ArraySlice::from_unknown(out)
            .map_err(|_| fail(flowguard_core::Error::invalid_at("out", "must be a Float64Array")))?;
        #[allow(unsafe_code)]
        // SAFETY: `out` is this call's argument and no JavaScript runs from here to the end of
        // this synchronous call, which writes the slice, so nothing else touches its memory.
        let buf = unsafe { out.as_mut() };
        if buf.len() < CLAIM_NUMBERS {
            return Err(fail(flowguard_core::Error::invalid_at(
                "out",
                format!("holds {} numbers; a claim result needs {CLAIM_NUMBERS}", buf.len()),
            )));
        }
        let (group, id, opts) = args.map_err(fail)?;
        let client = self.client.clone();
        let fut = async move {
            Ok(core::ClaimResult::from(client.set_item(&group, claim_request(id, opts)).await?))
        };
        let r = match super::first_poll(fut) {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(fail(e)),
            Err(rest) => {
                // The durable store's file is locked by another process: the claim goes on as a
                // task, and this call returns a Promise of the compact JSON array of `_claim`.
                let text = async move { compact(&claim_tuple(&rest.await?)) };
                return Ok(super::settle::spawn(env, text)?.to_unknown());
            }
        };
        // Texts, or a maxAttempts (not among the numbers): the compact JSON array.
        let texts = r.item.last_error.is_some()
            || r.item.max_attempts.is_some()
            || r.item.note.is_some()
            || r.item.result.is_some()
            || r.item.timeline.iter().any(|t| t.error.is_some());
        let value = if texts {
            Some(compact(&claim_tuple(&r)).map_err(fail)?)
        } else {
            write_claim(buf, &r);
            r.owner
        };
        value.into_unknown(env)
    }

    /// Claims many items of one group in one atomic step (one round trip on Redis).
    #[napi(ts_return_type = "Promise<ClaimResult[]>")]
    pub fn claim_many<'e>(
        &self,
        env: &'e Env,
        group: Arg<'e, String>,
        ids: Arg<'e, Vec<String>>,
        options: Option<Arg<'e, ClaimOptions>>,
    ) -> Result<PromiseRaw<'e, Json>> {
        let parsed =
            (|| Ok((group.get("group")?, ids.get("ids")?, claim_opts(opt(&options, "options")?)?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (group, ids, (timeout, reclaim, max, note)) = parsed?;
            let results = client.claim_many(&group, ids, timeout, reclaim, max, note).await?;
            let bytes = results.len() * ITEM_JSON_BYTES;
            json_sized(&results.into_iter().map(ClaimResult::from).collect::<Vec<_>>(), bytes)
        })
    }

    /// Claims many items of one group in one atomic step (one round trip on Redis) under ONE
    /// owner token, with a compact result: per id, what happened and its attempts (no item
    /// states; read them with `getItems`). The fast way to claim thousands of ids.
    #[napi(ts_return_type = "Promise<ClaimBatch>")]
    pub fn claim_batch<'e>(
        &self,
        env: &'e Env,
        group: Arg<'e, String>,
        ids: Arg<'e, Vec<String>>,
        options: Option<Arg<'e, ClaimOptions>>,
    ) -> Result<PromiseRaw<'e, Json>> {
        let parsed =
            (|| Ok((group.get("group")?, ids.get("ids")?, claim_opts(opt(&options, "options")?)?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (group, ids, (timeout, reclaim, max, note)) = parsed?;
            let b = client.claim_batch(&group, &ids, timeout, reclaim, max, note.as_deref()).await?;
            json(&ClaimBatch {
                owner: b.owner,
                lease_expires_at: b.lease_expires_at as f64,
                claimed: b.outcomes.iter().filter(|o| **o == core::BatchOutcome::Claimed).count() as u32,
                results: b.outcomes.iter().map(|o| o.as_str()).collect(),
                attempts: b.attempts,
            })
        })
    }

    /// Marks an item completed (index.js's `complete`): the item state as a compact JSON array
    /// (see [`item_tuple`]), the value itself when done at once, else a Promise of it.
    #[napi(js_name = "_complete", skip_typescript)]
    pub fn complete_compact<'e>(
        &self,
        env: &'e Env,
        group: Arg<'e, String>,
        id: Arg<'e, String>,
        options: Arg<'e, Option<FinishOptions>>,
    ) -> Result<Unknown<'e>> {
        let parsed = (|| Ok((group.get("group")?, id.get("id")?, finish_opts(options.get("options")?)?)))();
        let client = self.client.clone();
        now_or_promise(env, async move {
            let (group, id, (owner, keep, result)) = parsed?;
            let req =
                ItemRequest { id, status: "completed".into(), owner, keep, result, ..Default::default() };
            compact(&item_tuple(&client.set_item(&group, req).await?.item))
        })
    }

    /// Marks an item failed (index.js's `fail`), like `_complete`.
    #[napi(js_name = "_fail", skip_typescript)]
    pub fn fail_compact<'e>(
        &self,
        env: &'e Env,
        group: Arg<'e, String>,
        id: Arg<'e, String>,
        reason: Arg<'e, String>,
        options: Arg<'e, Option<FinishOptions>>,
    ) -> Result<Unknown<'e>> {
        let parsed = (|| {
            Ok((
                group.get("group")?,
                id.get("id")?,
                reason.get("reason")?,
                finish_opts(options.get("options")?)?,
            ))
        })();
        let client = self.client.clone();
        now_or_promise(env, async move {
            let (group, id, reason, (owner, keep, _)) = parsed?;
            let req = ItemRequest {
                id,
                status: "failed".into(),
                owner,
                error: Some(reason),
                keep,
                ..Default::default()
            };
            compact(&item_tuple(&client.set_item(&group, req).await?.item))
        })
    }

    /// Applies many changes to items of one group in one atomic step. Refusals and busy items
    /// are per-item results; invalid input rejects the whole call before anything is written.
    #[napi(ts_return_type = "Promise<ItemResult[]>")]
    pub fn set_items<'e>(
        &self,
        env: &'e Env,
        group: Arg<'e, String>,
        requests: Arg<'e, Vec<ItemRequestInput>>,
    ) -> Result<PromiseRaw<'e, Json>> {
        let parsed = (|| {
            let group = group.get("group")?;
            let reqs = requests
                .get("requests")?
                .into_iter()
                .enumerate()
                .map(|(i, r)| r.into_core(Elem("requests", i)))
                .collect::<flowguard_core::Result<Vec<_>>>()?;
            Ok((group, reqs))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (group, reqs) = parsed?;
            let results = client.set_items(&group, reqs).await?;
            let bytes = results.len() * ITEM_JSON_BYTES;
            json_sized(&results.into_iter().map(ItemResult::from).collect::<Vec<_>>(), bytes)
        })
    }

    /// Reads one item (status `none` when unknown).
    #[napi(ts_return_type = "Promise<ItemState>")]
    pub fn get_item<'e>(
        &self,
        env: &'e Env,
        group: Arg<'e, String>,
        id: Arg<'e, String>,
    ) -> Result<PromiseRaw<'e, Json>> {
        let parsed = (|| Ok((group.get("group")?, id.get("id")?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (group, id) = parsed?;
            json(&ItemState::from(client.get_item(&group, &id).await?))
        })
    }

    /// Reads many items of one group in one round trip.
    #[napi(ts_return_type = "Promise<ItemState[]>")]
    pub fn get_items<'e>(
        &self,
        env: &'e Env,
        group: Arg<'e, String>,
        ids: Arg<'e, Vec<String>>,
    ) -> Result<PromiseRaw<'e, Json>> {
        let parsed = (|| Ok((group.get("group")?, ids.get("ids")?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (group, ids) = parsed?;
            let states = client.get_items(&group, ids).await?;
            let bytes = states.len() * ITEM_JSON_BYTES;
            json_sized(&states.into_iter().map(ItemState::from).collect::<Vec<_>>(), bytes)
        })
    }

    /// Makes dead items of one group claimable again, in one atomic step (BullMQ's
    /// `retryJobs`): each becomes `failed` with its attempts, last error and timeline kept and a
    /// `revived` transition added. Per id an `ItemResult` (action `revive`): `ok` when revived,
    /// else `reason` is its status.
    #[napi(ts_return_type = "Promise<ItemResult[]>")]
    pub fn revive_items<'e>(
        &self,
        env: &'e Env,
        group: Arg<'e, String>,
        ids: Arg<'e, Vec<String>>,
        options: Option<Arg<'e, ReviveOptions>>,
    ) -> Result<PromiseRaw<'e, Json>> {
        let parsed = (|| Ok((group.get("group")?, ids.get("ids")?, opt(&options, "options")?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (group, ids, o) = parsed?;
            let (failed, reset) = o.map_or((false, false), |o: ReviveOptions| {
                (o.failed.unwrap_or(false), o.reset_attempts.unwrap_or(false))
            });
            let results = client.revive_items(&group, ids, failed, reset).await?;
            let bytes = results.len() * ITEM_JSON_BYTES;
            json_sized(&results.into_iter().map(ItemResult::from).collect::<Vec<_>>(), bytes)
        })
    }

    /// Forgets an item. Resolves to whether it had a record.
    #[napi]
    pub fn unset_item<'e>(
        &self,
        env: &'e Env,
        group: Arg<'e, String>,
        id: Arg<'e, String>,
    ) -> Result<PromiseRaw<'e, bool>> {
        let parsed = (|| Ok((group.get("group")?, id.get("id")?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (group, id) = parsed?;
            let r = client
                .set_item(&group, ItemRequest { id, status: "none".into(), ..Default::default() })
                .await?;
            Ok(r.item.status != core::ItemStatus::None)
        })
    }

    /// One page of a group's items with counts per status.
    #[napi(ts_return_type = "Promise<ItemList>")]
    pub fn list_items<'e>(
        &self,
        env: &'e Env,
        group: Arg<'e, String>,
        options: Option<Arg<'e, ListOptions>>,
    ) -> Result<PromiseRaw<'e, Json>> {
        let parsed = (|| {
            let group = group.get("group")?;
            let o =
                opt(&options, "options")?.unwrap_or(ListOptions { status: None, offset: None, limit: None });
            let at = |name| Field("options", name);
            Ok((group, o.status, whole(at("offset"), o.offset)?, whole(at("limit"), o.limit)?))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (group, status, offset, limit) = parsed?;
            let l = client.list_items(&group, status.as_deref(), offset, limit).await?;
            json(&ItemList {
                counts: StatusCounts {
                    in_progress: l.counts.in_progress as f64,
                    abandoned: l.counts.abandoned as f64,
                    completed: l.counts.completed as f64,
                    failed: l.counts.failed as f64,
                    dead: l.counts.dead as f64,
                    total: l.counts.total() as f64,
                },
                items: l.items.into_iter().map(Into::into).collect(),
                next_offset: l.next_offset.map(|v| v as f64),
            })
        })
    }
}
