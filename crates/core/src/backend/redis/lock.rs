//! Concurrency Lock on Redis: each step one script.

use std::future::Future;

use redis::Value;

use super::{int, lua, opt_str, RedisStore};
use crate::error::{Error, Result};
use crate::lock::{Attempt, ExtendResult, LockBackend, LockInfo, Refusal, ReleaseResult};

lua!(acquire_script, "lock_acquire.lua");
lua!(release_script, "lock_release.lua");
lua!(extend_script, "lock_extend.lua");
lua!(inspect_script, "lock_inspect.lua");

/// Reads a holder as the scripts report it: `{"<fence>:<label>", ms left}` (the lock is one string
/// `<owner>:<fence>:<label>`; the owner never leaves Redis).
fn holder(reply: &[Value]) -> Result<(u64, u64, Option<String>)> {
    let [v, ms] = reply else {
        return Err(Error::internal(format!("lock script replied with {} values", reply.len())));
    };
    let rest = opt_str(v)?.unwrap_or_default();
    let (fence, label) = rest.split_once(':').unwrap_or((rest.as_str(), ""));
    let fence = fence.parse::<u64>().map_err(|_| Error::internal("lock record without a fencing token"))?;
    let label = (!label.is_empty()).then(|| label.to_string());
    Ok((fence, int(ms)?.max(0) as u64, label))
}

impl RedisStore {
    async fn acquire_once(
        &self,
        name: &str,
        owner: &str,
        lease_ms: u64,
        label: Option<&str>,
    ) -> Result<Attempt> {
        let (lock, fence) = (self.keys().lock(name), self.keys().lock_fence(name));
        let lease = lease_ms.to_string();
        let keys: [&[u8]; 2] = [lock.as_bytes(), fence.as_bytes()];
        let args: [&[u8]; 3] = [owner.as_bytes(), lease.as_bytes(), label.unwrap_or("").as_bytes()];
        match self.eval::<Value>(acquire_script(), &keys, &args).await? {
            Value::Array(held) => {
                let (fence, remaining_ms, holder) = holder(&held)?;
                Ok(Attempt { acquired: false, fence, remaining_ms, holder })
            }
            fence => Ok(Attempt {
                acquired: true,
                fence: int(&fence)?.max(0) as u64,
                remaining_ms: lease_ms,
                holder: label.filter(|l| !l.is_empty()).map(str::to_string),
            }),
        }
    }

    async fn release_once(&self, name: &str, owner: &str) -> Result<ReleaseResult> {
        let lock = self.keys().lock(name);
        let code: i64 = self.eval(release_script(), &[lock.as_bytes()], &[owner.as_bytes()]).await?;
        Ok(match code {
            1 => ReleaseResult { released: true, reason: None },
            0 => ReleaseResult { released: false, reason: Some(Refusal::NotHeld) },
            _ => ReleaseResult { released: false, reason: Some(Refusal::NotOwner) },
        })
    }

    async fn extend_once(&self, name: &str, owner: &str, lease_ms: u64) -> Result<ExtendResult> {
        let (lock, lease) = (self.keys().lock(name), lease_ms.to_string());
        let reply: Vec<i64> =
            self.eval(extend_script(), &[lock.as_bytes()], &[owner.as_bytes(), lease.as_bytes()]).await?;
        let (code, ms) =
            (reply.first().copied().unwrap_or(0), reply.get(1).copied().unwrap_or(0).max(0) as u64);
        Ok(match code {
            1 => ExtendResult { extended: true, remaining_ms: ms, reason: None },
            0 => ExtendResult { extended: false, remaining_ms: 0, reason: Some(Refusal::NotHeld) },
            _ => ExtendResult { extended: false, remaining_ms: ms, reason: Some(Refusal::NotOwner) },
        })
    }

    async fn inspect_once(&self, name: &str) -> Result<LockInfo> {
        let (lock, fence) = (self.keys().lock(name), self.keys().lock_fence(name));
        Ok(match self.eval::<Value>(inspect_script(), &[lock.as_bytes(), fence.as_bytes()], &[]).await? {
            Value::Array(held) => {
                let (fence, remaining_ms, holder) = holder(&held)?;
                LockInfo { name: name.to_string(), locked: true, remaining_ms, fence, holder }
            }
            last => LockInfo {
                name: name.to_string(),
                locked: false,
                remaining_ms: 0,
                fence: int(&last)?.max(0) as u64,
                holder: None,
            },
        })
    }
}

impl LockBackend for RedisStore {
    fn try_acquire(
        &self,
        name: &str,
        owner: &str,
        lease_ms: u64,
        label: Option<&str>,
    ) -> impl Future<Output = Result<Attempt>> + Send {
        self.acquire_once(name, owner, lease_ms, label)
    }
    fn release(&self, name: &str, owner: &str) -> impl Future<Output = Result<ReleaseResult>> + Send {
        self.release_once(name, owner)
    }
    fn extend(
        &self,
        name: &str,
        owner: &str,
        lease_ms: u64,
    ) -> impl Future<Output = Result<ExtendResult>> + Send {
        self.extend_once(name, owner, lease_ms)
    }
    fn inspect(&self, name: &str) -> impl Future<Output = Result<LockInfo>> + Send {
        self.inspect_once(name)
    }
}
