//! Item Tracker on Redis: one script call per batch.

use std::collections::HashMap;

use redis::Value;

use super::tracker_record::{decode_record, pack_owner};
use super::{int, opt_str, Lua, RedisStore};
use crate::backend::BoxFuture;
use crate::error::{Error, Result};
use crate::tracker::{
    not_owner, BatchClaim, BatchOutcome, ClaimBatch, Counts, ItemList, ItemOp, ItemState, ItemStatus,
    ListFilter, ListQuery, OpResult, Outcome, Record, TrackerBackend, MAX_TIMELINE,
};

/// A tracker script with `tracker_head.lua` (the group's keys, time, record layout) and
/// `tracker_common.lua` (records, purge, key expiry) in front, run by [`RedisStore::eval`] (over
/// the shell's faster connection when it has one). `tracker_apply.lua` has its fast path
/// (`tracker_apply_fast.lua`) between the two.
macro_rules! group_script {
    ($name:ident, $($file:literal),+) => {
        fn $name() -> &'static Lua {
            static S: std::sync::OnceLock<Lua> = std::sync::OnceLock::new();
            const SOURCE: &str = concat!($(include_str!(concat!("lua/", $file))),+);
            S.get_or_init(|| Lua { script: redis::Script::new(SOURCE), source: SOURCE })
        }
    };
}

group_script!(
    apply_script,
    "tracker_head.lua",
    "tracker_apply_fast.lua",
    "tracker_cidx.lua",
    "tracker_crec.lua",
    "tracker_common.lua",
    "tracker_apply.lua"
);
group_script!(
    claim_script,
    "tracker_head.lua",
    "tracker_cidx.lua",
    "tracker_crec.lua",
    "tracker_common.lua",
    "tracker_claim.lua"
);
group_script!(
    list_script,
    "tracker_head.lua",
    "tracker_cidx.lua",
    "tracker_crec.lua",
    "tracker_common.lua",
    "tracker_list.lua"
);
group_script!(read_script, "tracker_crec.lua", "tracker_read.lua");

/// A script's arguments: borrowed text, or numbers written out.
struct Args<'a>(Vec<std::borrow::Cow<'a, [u8]>>);

impl<'a> Args<'a> {
    fn with_capacity(n: usize) -> Self {
        Args(Vec::with_capacity(n))
    }
    fn text(&mut self, s: impl Into<std::borrow::Cow<'a, str>>) -> &mut Self {
        self.0.push(match s.into() {
            std::borrow::Cow::Borrowed(s) => std::borrow::Cow::Borrowed(s.as_bytes()),
            std::borrow::Cow::Owned(s) => std::borrow::Cow::Owned(s.into_bytes()),
        });
        self
    }
    /// An owner token as the records pack it (none: empty).
    fn owner(&mut self, owner: Option<&str>) -> &mut Self {
        self.0.push(std::borrow::Cow::Owned(owner.map(pack_owner).unwrap_or_default()));
        self
    }
    /// The ids' hashes, packed (`id_hash.rs`).
    fn hashes<'i>(&mut self, ids: impl IntoIterator<Item = &'i str>) -> &mut Self {
        self.0.push(std::borrow::Cow::Owned(super::id_hash::packed(ids)));
        self
    }
    fn num(&mut self, n: impl ToString) -> &mut Self {
        self.0.push(std::borrow::Cow::Owned(n.to_string().into_bytes()));
        self
    }
    fn refs(&self) -> Vec<&[u8]> {
        self.0.iter().map(|a| a.as_ref()).collect()
    }
}

const STATUSES: [&str; 3] = ["in_progress", "completed", "failed"];

/// A claim's text argument: '1' to re-claim completed items, then the maxAttempts when there is
/// one (after a '0' when not re-claiming); '1' or '' without one, as before maxAttempts existed;
/// then, only with a note, ':' and the note (`claim_note` in `lua/tracker_common.lua`).
fn claim_text(
    reclaim_completed: bool,
    max_attempts: Option<u32>,
    note: Option<&str>,
) -> std::borrow::Cow<'static, str> {
    let flags: std::borrow::Cow<'static, str> = match (reclaim_completed, max_attempts) {
        (true, None) => "1".into(),
        (false, None) => "".into(),
        (r, Some(m)) => format!("{}{m}", u8::from(r)).into(),
    };
    match note {
        None => flags,
        Some(n) => format!("{flags}:{n}").into(),
    }
}

/// A record read from Redis; None when absent or expired (its expiry passed: it counts as gone
/// even before a script purges it).
fn decode(raw: &Value, now: i64) -> Result<Option<Record>> {
    let raw = match raw {
        Value::Nil => return Ok(None),
        Value::BulkString(b) => b,
        other => {
            return Err(Error::internal(format!("script replied with {other:?} where a record was expected")))
        }
    };
    let r = decode_record(raw)?;
    Ok((r.x > now).then_some(r))
}

fn state(id: &str, rec: &Option<Record>, now: i64) -> ItemState {
    match rec {
        Some(r) => r.to_state(id, now),
        None => ItemState::unknown(id),
    }
}

impl RedisStore {
    /// The group's keys: its three indexes, its records, its dead index, and the compact
    /// layout's tree hash and root (`docs/redis-compact.md`).
    fn group_keys(&self, group: &str) -> [String; 7] {
        let head = self.keys().tracker_group(group);
        let [a, b, c] = STATUSES.map(|s| self.keys().item_index(&head, s));
        let tree = self.keys().item_compact(&head);
        let root = format!("{tree}:r");
        [a, b, c, self.keys().item_records(&head), self.keys().item_index(&head, "dead"), tree, root]
    }

    /// Runs a tracker script on the group's keys.
    async fn group_eval<T: redis::FromRedisValue>(
        &self,
        lua: &'static Lua,
        group: &str,
        args: &Args<'_>,
    ) -> Result<T> {
        let keys = self.group_keys(group);
        let keys: [&[u8]; 7] = keys.each_ref().map(|k| k.as_bytes());
        self.eval(lua, &keys, &args.refs()).await
    }
}

impl TrackerBackend for RedisStore {
    fn apply<'a>(
        &'a self,
        group: &'a str,
        ops: &'a [ItemOp],
        retention_ms: u64,
    ) -> BoxFuture<'a, Vec<OpResult>> {
        Box::pin(async move {
            let mut args = Args::with_capacity(2 + ops.len() * 5);
            args.num(retention_ms).num(MAX_TIMELINE);
            for op in ops {
                match op {
                    ItemOp::Claim { id, owner, lease_ms, reclaim_completed, max_attempts, note } => {
                        args.text("c").text(id).owner(Some(owner)).num(*lease_ms);
                        args.text(claim_text(*reclaim_completed, *max_attempts, note.as_deref()));
                    }
                    ItemOp::Complete { id, owner, keep_ms, result } => {
                        let result = result.as_deref().unwrap_or("");
                        args.text("d").text(id).owner(owner.as_deref()).num(*keep_ms).text(result);
                    }
                    ItemOp::Fail { id, owner, error, keep_ms } => {
                        args.text("f").text(id).owner(owner.as_deref()).num(*keep_ms).text(error);
                    }
                    ItemOp::Unset { id } => {
                        args.text("u").text(id).text("").text("0").text("");
                    }
                    ItemOp::Revive { id, failed, reset_attempts } => {
                        let flag = |b: bool| if b { "1" } else { "" };
                        args.text("r").text(id).text("").text(flag(*failed)).text(flag(*reset_attempts));
                    }
                }
            }
            args.hashes(ops.iter().map(|op| op.id()));
            let reply: Vec<Value> = self.group_eval(apply_script(), group, &args).await?;
            if reply.len() != 1 + ops.len() * 3 {
                return Err(Error::internal(format!("tracker script replied with {} values", reply.len())));
            }
            let now = int(&reply[0])?;
            let mut out = Vec::with_capacity(ops.len());
            for (i, op) in ops.iter().enumerate() {
                let code = int(&reply[1 + i * 3])?;
                let word = opt_str(&reply[2 + i * 3])?.unwrap_or_default();
                let rec = decode(&reply[3 + i * 3], now)?;
                let id = op.id();
                let outcome = match code {
                    1 => Outcome::Done,
                    // A revival left alone: the item's status, from its record.
                    0 if matches!(op, ItemOp::Revive { .. }) => Outcome::Busy(state(id, &rec, now).status),
                    0 if word == "completed" => Outcome::Busy(ItemStatus::Completed),
                    0 if word == "dead" => Outcome::Busy(ItemStatus::Dead),
                    0 => Outcome::Busy(ItemStatus::InProgress),
                    _ => Outcome::Refused(not_owner(group, id, rec.as_ref())),
                };
                let owner = match (op, &outcome) {
                    (ItemOp::Claim { owner, .. }, Outcome::Done) => Some(owner.clone()),
                    _ => None,
                };
                out.push(OpResult {
                    id: id.to_string(),
                    action: op.action(),
                    outcome,
                    owner,
                    item: state(id, &rec, now),
                });
            }
            Ok(out)
        })
    }

    fn claim_batch<'a>(&'a self, group: &'a str, c: BatchClaim<'a>) -> BoxFuture<'a, ClaimBatch> {
        Box::pin(async move {
            // The script takes each id once; a repeated id gets its first occurrence's outcome
            // (claimed there: in progress here), as the embedded store gives it.
            let mut first: HashMap<&str, usize, foldhash::fast::RandomState> = HashMap::default();
            first.reserve(c.ids.len());
            let mut unique: Vec<&str> = Vec::with_capacity(c.ids.len());
            let slot: Vec<usize> = c
                .ids
                .iter()
                .map(|id| {
                    *first.entry(id.as_str()).or_insert_with(|| {
                        unique.push(id.as_str());
                        unique.len() - 1
                    })
                })
                .collect();
            let mut args = Args::with_capacity(6 + unique.len());
            args.num(c.retention_ms).num(MAX_TIMELINE).owner(Some(c.owner)).num(c.lease_ms);
            args.text(claim_text(c.reclaim_completed, c.max_attempts, c.note));
            args.hashes(unique.iter().copied());
            for id in &unique {
                args.text(*id);
            }
            let (now, ex): (i64, Vec<Value>) = self.group_eval(claim_script(), group, &args).await?;
            // Every id is "claimed, attempt 1" but for the exceptions the script lists.
            let mut outcomes = vec![BatchOutcome::Claimed; unique.len()];
            let mut attempts = vec![1u32; unique.len()];
            for t in ex.chunks(3) {
                let (Some(i), Some(code), Some(a)) = (t.first(), t.get(1), t.get(2)) else {
                    return Err(Error::internal("claim script replied with an incomplete exception"));
                };
                let i = usize::try_from(int(i)? - 1).ok().filter(|i| *i < unique.len());
                let i =
                    i.ok_or_else(|| Error::internal("claim script replied with a position out of range"))?;
                outcomes[i] = match opt_str(code)?.as_deref() {
                    Some("c") => BatchOutcome::Claimed,
                    Some("p") => BatchOutcome::InProgress,
                    Some("d") => BatchOutcome::Completed,
                    Some("x") => BatchOutcome::Dead,
                    other => {
                        return Err(Error::internal(format!("claim script replied with outcome {other:?}")))
                    }
                };
                attempts[i] = u32::try_from(int(a)?)
                    .map_err(|_| Error::internal("claim script replied with bad attempts"))?;
            }
            let mut seen = vec![false; unique.len()];
            let (outcomes, attempts) = slot
                .iter()
                .map(|&u| {
                    let repeat = std::mem::replace(&mut seen[u], true);
                    let o = match outcomes[u] {
                        BatchOutcome::Claimed if repeat => BatchOutcome::InProgress,
                        o => o,
                    };
                    (o, attempts[u])
                })
                .unzip();
            Ok(ClaimBatch {
                owner: c.owner.to_string(),
                lease_expires_at: now + c.lease_ms as i64,
                outcomes,
                attempts,
            })
        })
    }

    fn read<'a>(&'a self, group: &'a str, ids: &'a [String]) -> BoxFuture<'a, Vec<ItemState>> {
        Box::pin(async move {
            let head = self.keys().tracker_group(group);
            let (records, tree) = (self.keys().item_records(&head), self.keys().item_compact(&head));
            let hashes = super::id_hash::packed(ids.iter().map(String::as_str));
            let args: Vec<&[u8]> =
                std::iter::once(hashes.as_slice()).chain(ids.iter().map(|id| id.as_bytes())).collect();
            let reply: Vec<Value> =
                self.eval(read_script(), &[records.as_bytes(), tree.as_bytes()], &args).await?;
            if reply.len() != 1 + ids.len() {
                return Err(Error::internal(format!("read script replied with {} values", reply.len())));
            }
            let now = int(&reply[0])?;
            ids.iter().zip(&reply[1..]).map(|(id, v)| Ok(state(id, &decode(v, now)?, now))).collect()
        })
    }

    fn list<'a>(&'a self, group: &'a str, q: ListQuery, retention_ms: u64) -> BoxFuture<'a, ItemList> {
        Box::pin(async move {
            let filter = match q.filter {
                ListFilter::All => "all",
                ListFilter::InProgress => "in_progress",
                ListFilter::Abandoned => "abandoned",
                ListFilter::Completed => "completed",
                ListFilter::Failed => "failed",
                ListFilter::Dead => "dead",
            };
            let mut args = Args::with_capacity(4);
            args.text(filter).num(q.offset).num(q.limit).num(retention_ms);
            let reply: Vec<Value> = self.group_eval(list_script(), group, &args).await?;
            if reply.len() < 6 || !(reply.len() - 6).is_multiple_of(2) {
                return Err(Error::internal(format!("list script replied with {} values", reply.len())));
            }
            let now = int(&reply[0])?;
            let counts = Counts {
                in_progress: int(&reply[1])? as u64,
                abandoned: int(&reply[2])? as u64,
                completed: int(&reply[3])? as u64,
                failed: int(&reply[4])? as u64,
                dead: int(&reply[5])? as u64,
            };
            let mut items = Vec::with_capacity((reply.len() - 6) / 2);
            for pair in reply[6..].chunks(2) {
                let id = opt_str(&pair[0])?.unwrap_or_default();
                // A record kept past its expiry (claimed by a client with a longer retention than
                // this one's purge assumed) is left out.
                if let Some(rec) = decode(&pair[1], now)? {
                    items.push(rec.to_state(&id, now));
                }
            }
            let end = q.offset + q.limit;
            Ok(ItemList {
                counts,
                items,
                next_offset: if end < counts.of(q.filter) { Some(end) } else { None },
            })
        })
    }
}
