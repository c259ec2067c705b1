//! Concurrency Lock on Redis: each step one script.
//!
//! The fence counter (a lock's and a semaphore's) holds the last fence granted. A grant's fence is
//! the larger of that + 1 and the Redis clock in microseconds (`TIME`), and is written back (the
//! counter's lifetime, [`FENCE_KEEP_MS`], given once when a grant finds none). So fencing tokens
//! strictly increase across releases, lease expiries, the counter's own expiry and a failover or
//! restart that lost the counter's last writes: the clock has moved past every token handed out
//! before (Redis runs fewer than one grant per microsecond), for as long as the Redis clock does
//! not go back (a server whose clock is set back, or a failover to a replica whose clock is
//! behind). While the counter only counted, a promoted replica one increment behind handed its
//! primary's last token out again (the checked histories found it). Fences are about 1.8e15
//! (2026): exact in a JavaScript number until 2^53 microseconds, June 2255.

use redis::Value;

use super::{int, lua, opt_str, RedisStore};
use crate::backend::BoxFuture;
use crate::error::{Error, ErrorCode, Result};
use crate::lock::{Attempt, ExtendResult, LockBackend, LockInfo, Refusal, ReleaseResult, FENCE_KEEP_MS};

lua!(acquire_script, "fence_swap.lua", "lock_acquire.lua");
lua!(release_script, "lock_release.lua");
lua!(release_fence_script, "lock_release_fence.lua");
lua!(extend_script, "lock_extend.lua");
lua!(inspect_script, "lock_inspect.lua");

/// `<owner>:`, the start of the owner's lock value, as the acquire and release scripts take it
/// (joined here: fewer steps in the scripts).
fn mine(owner: &str) -> Vec<u8> {
    [owner.as_bytes(), b":"].concat()
}

/// [`FENCE_KEEP_MS`] as the scripts take it: the lifetime a new fence counter is given.
pub(super) fn fence_keep() -> &'static str {
    static KEEP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEEP.get_or_init(|| FENCE_KEEP_MS.to_string())
}

/// The error of a lock key (or its fence counter) that holds something flowguard did not write,
/// such as a value set by hand: nothing was changed.
fn foreign(key: &str) -> Error {
    Error::new(
        ErrorCode::Backend,
        format!(
            "the Redis key {key:?} holds a value flowguard did not write (a lock is the string \
             \"<owner>:<fence>:<label>\" and its fence counter an integer); nothing was changed: delete \
             the key or use another lock name"
        ),
    )
}

/// Reads a holder as the scripts report it: `{"<fence>:<label>", ms left}` (the lock is one string
/// `<owner>:<fence>:<label>`; the owner never leaves Redis), or `{false, i}` when KEYS[i] holds
/// a foreign value.
fn holder(reply: &[Value], keys: [&str; 2]) -> Result<(u64, u64, Option<String>)> {
    let [v, ms] = reply else {
        return Err(Error::internal(format!("lock script replied with {} values", reply.len())));
    };
    let Some(rest) = opt_str(v)? else {
        return Err(foreign(if int(ms)? == 2 { keys[1] } else { keys[0] }));
    };
    let (fence, label) = rest.split_once(':').unwrap_or((rest.as_str(), ""));
    let fence = fence.parse::<u64>().map_err(|_| foreign(keys[0]))?;
    let label = (!label.is_empty()).then(|| label.to_string());
    Ok((fence, int(ms)?.max(0) as u64, label))
}

impl LockBackend for RedisStore {
    fn try_acquire<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        lease_ms: u64,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, Attempt> {
        Box::pin(async move {
            let (lock, fence) = (self.keys().lock(name), self.keys().lock_fence(name));
            let lease = lease_ms.to_string();
            let keys: [&[u8]; 2] = [lock.as_bytes(), fence.as_bytes()];
            let args: [&[u8]; 4] =
                [&mine(owner), lease.as_bytes(), label.unwrap_or("").as_bytes(), fence_keep().as_bytes()];
            match self.eval::<Value>(acquire_script(), &keys, &args).await? {
                Value::Array(held) => {
                    let (fence, remaining_ms, holder) = holder(&held, [&lock, &fence])?;
                    Ok(Attempt { acquired: false, fence, remaining_ms, holder })
                }
                fence => Ok(Attempt {
                    acquired: true,
                    fence: int(&fence)?.max(0) as u64,
                    remaining_ms: lease_ms,
                    holder: label.filter(|l| !l.is_empty()).map(str::to_string),
                }),
            }
        })
    }

    fn release<'a>(&'a self, name: &'a str, owner: &'a str) -> BoxFuture<'a, ReleaseResult> {
        Box::pin(async move {
            let lock = self.keys().lock(name);
            let code: i64 = self.eval(release_script(), &[lock.as_bytes()], &[&mine(owner)]).await?;
            Ok(match code {
                1 => ReleaseResult { released: true, reason: None },
                0 => ReleaseResult { released: false, reason: Some(Refusal::NotHeld) },
                -1 => ReleaseResult { released: false, reason: Some(Refusal::NotOwner) },
                _ => return Err(foreign(&lock)),
            })
        })
    }

    fn release_fence<'a>(&'a self, name: &'a str, fence: u64) -> BoxFuture<'a, ReleaseResult> {
        Box::pin(async move {
            let lock = self.keys().lock(name);
            let fence = fence.to_string();
            let code: i64 =
                self.eval(release_fence_script(), &[lock.as_bytes()], &[fence.as_bytes()]).await?;
            Ok(match code {
                1 => ReleaseResult { released: true, reason: None },
                0 => ReleaseResult { released: false, reason: Some(Refusal::NotHeld) },
                -1 => ReleaseResult { released: false, reason: Some(Refusal::NotOwner) },
                _ => return Err(foreign(&lock)),
            })
        })
    }

    fn extend<'a>(&'a self, name: &'a str, owner: &'a str, lease_ms: u64) -> BoxFuture<'a, ExtendResult> {
        Box::pin(async move {
            let (lock, lease) = (self.keys().lock(name), lease_ms.to_string());
            let reply: Vec<i64> =
                self.eval(extend_script(), &[lock.as_bytes()], &[owner.as_bytes(), lease.as_bytes()]).await?;
            let (code, ms) =
                (reply.first().copied().unwrap_or(0), reply.get(1).copied().unwrap_or(0).max(0) as u64);
            Ok(match code {
                1 => ExtendResult { extended: true, remaining_ms: ms, reason: None },
                0 => ExtendResult { extended: false, remaining_ms: 0, reason: Some(Refusal::NotHeld) },
                -1 => ExtendResult { extended: false, remaining_ms: ms, reason: Some(Refusal::NotOwner) },
                _ => return Err(foreign(&lock)),
            })
        })
    }

    fn inspect<'a>(&'a self, name: &'a str) -> BoxFuture<'a, LockInfo> {
        Box::pin(async move {
            let (lock, fence) = (self.keys().lock(name), self.keys().lock_fence(name));
            Ok(
                match self.eval::<Value>(inspect_script(), &[lock.as_bytes(), fence.as_bytes()], &[]).await? {
                    Value::Array(held) => {
                        let (fence, remaining_ms, holder) = holder(&held, [&lock, &fence])?;
                        LockInfo { name: name.to_string(), locked: true, remaining_ms, fence, holder }
                    }
                    last => LockInfo {
                        name: name.to_string(),
                        locked: false,
                        remaining_ms: 0,
                        fence: match opt_str(&last)? {
                            None => 0,
                            Some(f) => f.parse::<u64>().map_err(|_| foreign(&fence))?,
                        },
                        holder: None,
                    },
                },
            )
        })
    }
}
