//! Semaphore on Redis: each step one script over the name's keys, in its hash slot (layout 2,
//! `lua/semaphore_common.lua`): the holders (a sorted set of owner -> lease end), the fence
//! counter, and one key per holder, its permit (`"<fence>:<label>"`), which Redis expires at the
//! lease's end. A pair (acquire + release) runs 8 commands inside its two scripts (the release
//! reads no clock: the permit key tells whether the lease holds) and no type probe: a key that
//! holds something flowguard did not write is found by the first command that touches it.

use redis::Value;

use super::{int, lua, opt_str, RedisStore};
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
semaphore_script!(extend_script, "semaphore_extend.lua");
semaphore_script!(inspect_script, "semaphore_inspect.lua");
// Standalone: the release reads no clock and needs none of the head's functions.
lua!(release_script, "semaphore_release.lua");

/// The parts of a name's keys the scripts take as KEYS[1] and KEYS[2]; KEYS[3] is the caller's
/// permit, `PERMIT` followed by its owner token.
const PARTS: [&str; 2] = ["h", "fence"];
const PERMIT: &str = "p:";

/// The error of a semaphore key that holds something flowguard did not write.
fn foreign(key: &str) -> Error {
    Error::new(
        ErrorCode::Backend,
        format!(
            "the Redis key {key:?} holds a value flowguard did not write (a semaphore's holders are a \
             sorted set, its fence counter an integer, each holder's permit a string); nothing was \
             changed: delete the key or use another semaphore name"
        ),
    )
}

impl RedisStore {
    /// Runs a semaphore script on the keys of `name`, with the permit key of `owner` when given.
    async fn semaphore_call<T: redis::FromRedisValue>(
        &self,
        script: &'static super::Lua,
        name: &str,
        owner: Option<&str>,
        args: &[&[u8]],
    ) -> Result<T> {
        let [h, fence] = PARTS.map(|p| self.keys().semaphore(name, p));
        match owner {
            Some(owner) => {
                let permit = self.keys().semaphore(name, &[PERMIT, owner].concat());
                self.eval(script, &[h.as_bytes(), fence.as_bytes(), permit.as_bytes()], args).await
            }
            None => self.eval(script, &[h.as_bytes(), fence.as_bytes()], args).await,
        }
    }

    /// The foreign key named by a `{-1, i}` reply: KEYS[i], or (3) a holder's permit key, named
    /// without its owner token (which never leaves the store).
    fn semaphore_foreign(&self, name: &str, i: &Value) -> Error {
        match int(i).unwrap_or(1) {
            2 => foreign(&self.keys().semaphore(name, PARTS[1])),
            3 => foreign(&self.keys().semaphore(name, &[PERMIT, "<owner>"].concat())),
            _ => foreign(&self.keys().semaphore(name, PARTS[0])),
        }
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
            let reply: Vec<Value> = self.semaphore_call(acquire_script(), name, Some(owner), &args).await?;
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
            Ok(
                match self
                    .semaphore_call::<i64>(release_script(), name, Some(owner), &[owner.as_bytes()])
                    .await?
                {
                    1 => ReleaseResult { released: true, reason: None },
                    0 => ReleaseResult { released: false, reason: Some(Refusal::NotHeld) },
                    bad => return Err(self.semaphore_foreign(name, &Value::Int(-bad))),
                },
            )
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
            Ok(match self.semaphore_call::<i64>(extend_script(), name, Some(owner), &args).await? {
                1 => ExtendResult { extended: true, remaining_ms: lease_ms, reason: None },
                0 => ExtendResult { extended: false, remaining_ms: 0, reason: Some(Refusal::NotHeld) },
                bad => return Err(self.semaphore_foreign(name, &Value::Int(-bad))),
            })
        })
    }

    fn inspect_semaphore<'a>(&'a self, name: &'a str) -> BoxFuture<'a, SemaphoreInfo> {
        Box::pin(async move {
            let permits = self.keys().semaphore(name, PERMIT);
            let reply: Vec<Value> =
                self.semaphore_call(inspect_script(), name, None, &[permits.as_bytes()]).await?;
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
