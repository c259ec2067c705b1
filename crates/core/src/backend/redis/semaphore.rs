//! Semaphore on Redis: each step one script over the name's three keys, in its hash slot. A pair
//! (acquire + release) runs 12 commands inside its two scripts and no type probe: a key that holds
//! something flowguard did not write is found by the first command that touches it.

use redis::Value;

use super::{int, opt_str, RedisStore};
use crate::backend::BoxFuture;
use crate::error::{Error, ErrorCode, Result};
use crate::lock::{ExtendResult, Refusal, ReleaseResult};
use crate::semaphore::{Holder, PermitAttempt, SemaphoreBackend, SemaphoreInfo};

/// A script: the shared head `semaphore_common.lua` followed by the step's own part, run by
/// [`RedisStore::eval`] (over a shell's faster connection when it has one, as the lock's).
macro_rules! semaphore_script {
    ($name:ident, $file:literal) => {
        fn $name() -> &'static super::Lua {
            static S: std::sync::OnceLock<super::Lua> = std::sync::OnceLock::new();
            const SOURCE: &str =
                concat!(include_str!("lua/semaphore_common.lua"), include_str!(concat!("lua/", $file)));
            S.get_or_init(|| super::Lua { script: redis::Script::new(SOURCE), source: SOURCE })
        }
    };
}

semaphore_script!(acquire_script, "semaphore_acquire.lua");
semaphore_script!(release_script, "semaphore_release.lua");
semaphore_script!(extend_script, "semaphore_extend.lua");
semaphore_script!(inspect_script, "semaphore_inspect.lua");

const PARTS: [&str; 3] = ["h", "i", "fence"];

/// The error of a semaphore key that holds something flowguard did not write.
fn foreign(key: &str) -> Error {
    Error::new(
        ErrorCode::Backend,
        format!(
            "the Redis key {key:?} holds a value flowguard did not write (a semaphore's holders are a \
             sorted set, their info a hash, its fence counter an integer); nothing was changed: delete the \
             key or use another semaphore name"
        ),
    )
}

impl RedisStore {
    /// Runs a semaphore script on the three keys of `name`.
    async fn semaphore_call<T: redis::FromRedisValue>(
        &self,
        script: &'static super::Lua,
        name: &str,
        args: &[&[u8]],
    ) -> Result<T> {
        let keys = PARTS.map(|p| self.keys().semaphore(name, p));
        let keys = keys.each_ref().map(|k| k.as_bytes());
        self.eval(script, &keys, args).await
    }

    /// The foreign key named by a `{-1, i}` reply.
    fn semaphore_foreign(&self, name: &str, i: &Value) -> Error {
        let i = int(i).unwrap_or(1).clamp(1, 3) as usize;
        foreign(&self.keys().semaphore(name, PARTS[i - 1]))
    }
}

fn num(v: &Value) -> Result<u64> {
    Ok(int(v)?.max(0) as u64)
}

impl SemaphoreBackend for RedisStore {
    fn try_acquire_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        permits: u64,
        lease_ms: u64,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, PermitAttempt> {
        Box::pin(async move {
            let (permits, lease) = (permits.to_string(), lease_ms.to_string());
            let args: [&[u8]; 5] = [
                owner.as_bytes(),
                permits.as_bytes(),
                lease.as_bytes(),
                label.unwrap_or("").as_bytes(),
                super::lock::fence_keep().as_bytes(),
            ];
            let reply: Vec<Value> = self.semaphore_call(acquire_script(), name, &args).await?;
            match reply.as_slice() {
                [code, holders, fence] if int(code)? == 1 => Ok(PermitAttempt {
                    acquired: true,
                    fence: num(fence)?,
                    holders: num(holders)?,
                    remaining_ms: lease_ms,
                }),
                [_, holders, ms, fence] => Ok(PermitAttempt {
                    acquired: false,
                    fence: num(fence)?,
                    holders: num(holders)?,
                    remaining_ms: num(ms)?,
                }),
                [_, i] => Err(self.semaphore_foreign(name, i)),
                _ => Err(Error::internal(format!("semaphore script replied with {} values", reply.len()))),
            }
        })
    }

    fn release_permit<'a>(&'a self, name: &'a str, owner: &'a str) -> BoxFuture<'a, ReleaseResult> {
        Box::pin(async move {
            Ok(match self.semaphore_call::<i64>(release_script(), name, &[owner.as_bytes()]).await? {
                1 => ReleaseResult { released: true, reason: None },
                0 => ReleaseResult { released: false, reason: Some(Refusal::NotHeld) },
                bad => return Err(self.semaphore_foreign(name, &Value::Int(-bad))),
            })
        })
    }

    fn extend_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        lease_ms: u64,
    ) -> BoxFuture<'a, ExtendResult> {
        Box::pin(async move {
            let lease = lease_ms.to_string();
            let args: [&[u8]; 2] = [owner.as_bytes(), lease.as_bytes()];
            Ok(match self.semaphore_call::<i64>(extend_script(), name, &args).await? {
                1 => ExtendResult { extended: true, remaining_ms: lease_ms, reason: None },
                0 => ExtendResult { extended: false, remaining_ms: 0, reason: Some(Refusal::NotHeld) },
                bad => return Err(self.semaphore_foreign(name, &Value::Int(-bad))),
            })
        })
    }

    fn inspect_semaphore<'a>(&'a self, name: &'a str) -> BoxFuture<'a, SemaphoreInfo> {
        Box::pin(async move {
            let reply: Vec<Value> = self.semaphore_call(inspect_script(), name, &[]).await?;
            let Some((fence, rest)) = reply.split_first() else {
                return Err(Error::internal("semaphore inspect replied with nothing"));
            };
            if int(fence)? < 0 {
                return Err(self.semaphore_foreign(name, rest.first().unwrap_or(&Value::Int(1))));
            }
            let mut holders = Vec::with_capacity(rest.len() / 2);
            for pair in rest.chunks(2) {
                let [info, ms] = pair else { break };
                let info = opt_str(info)?.unwrap_or_default();
                let (f, label) = info.split_once(':').unwrap_or((info.as_str(), ""));
                holders.push(Holder {
                    fence: f.parse().unwrap_or(0),
                    remaining_ms: num(ms)?,
                    label: (!label.is_empty()).then(|| label.to_string()),
                });
            }
            Ok(SemaphoreInfo { name: name.to_string(), holders, fence: num(fence)? })
        })
    }
}
