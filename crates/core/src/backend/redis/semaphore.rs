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
use crate::semaphore::{Holder, PerKey, PermitAttempt, SemaphoreBackend, SemaphoreInfo};

/// A script: the shared head `semaphore_common.lua` followed by the step's own files, run by
/// [`RedisStore::eval`] (over a shell's faster connection when it has one, as the lock's).
macro_rules! semaphore_script {
    ($name:ident, $($file:literal),+) => {
        fn $name() -> &'static super::Lua {
            static S: std::sync::OnceLock<super::Lua> = std::sync::OnceLock::new();
            const SOURCE: &str =
                concat!(include_str!("lua/semaphore_common.lua"), $(include_str!(concat!("lua/", $file))),+);
            S.get_or_init(|| super::Lua { script: redis::Script::new(SOURCE), source: SOURCE })
        }
    };
}

semaphore_script!(acquire_script, "fence_swap.lua", "semaphore_acquire.lua");
semaphore_script!(extend_script, "semaphore_extend.lua");
semaphore_script!(inspect_script, "semaphore_inspect.lua");
semaphore_script!(release_fence_script, "semaphore_release_fence.lua");
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

/// A permit key's value: `"<fence>:<label>"`, or with a key `"<fence>k<key bytes>:<key>:<label>"`
/// (semaphore_acquire.lua), as (fence, key, label).
fn permit_value(v: &str) -> (u64, Option<&str>, Option<&str>) {
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let (f, rest) = v.split_at(digits);
    let fence = f.parse().unwrap_or(0);
    let keyed = rest.strip_prefix('k').and_then(|r| {
        let (len, r) = r.split_once(':')?;
        let len: usize = len.parse().ok()?;
        let key = r.get(..len)?;
        let label = r.get(len..)?.strip_prefix(':')?;
        Some((key, label))
    });
    let (key, label) = match keyed {
        Some((key, label)) => (Some(key), label),
        None => (None, rest.strip_prefix(':').unwrap_or(rest)),
    };
    (fence, key, (!label.is_empty()).then_some(label))
}

impl SemaphoreBackend for RedisStore {
    fn try_acquire_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        permits: u64,
        per_key: Option<PerKey<'a>>,
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
            let reply: Vec<Value> = match per_key {
                None => self.semaphore_call(acquire_script(), name, Some(owner), &args).await?,
                Some(k) => {
                    let (limit, prefix) = (k.limit.to_string(), self.keys().semaphore(name, PERMIT));
                    let keyed: [&[u8]; 3] = [k.key.as_bytes(), limit.as_bytes(), prefix.as_bytes()];
                    let args = [&args[..], &keyed[..]].concat();
                    self.semaphore_call(acquire_script(), name, Some(owner), &args).await?
                }
            };
            let key_holders = |k: Option<&Value>| k.map_or(Ok(0), num);
            match reply.as_slice() {
                [code, holders, fence, k @ ..] if int(code)? == 1 && k.len() <= 1 => Ok(PermitAttempt {
                    acquired: true,
                    fence: num(fence)?,
                    holders: num(holders)?,
                    key_holders: key_holders(k.first())?,
                    remaining_ms: lease_ms,
                }),
                [code, holders, ms, fence, k @ ..] if int(code)? == 0 && k.len() <= 1 => Ok(PermitAttempt {
                    acquired: false,
                    fence: num(fence)?,
                    holders: num(holders)?,
                    key_holders: key_holders(k.first())?,
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

    fn release_permit_fence<'a>(&'a self, name: &'a str, fence: u64) -> BoxFuture<'a, ReleaseResult> {
        Box::pin(async move {
            let (fence, prefix) = (fence.to_string(), self.keys().semaphore(name, PERMIT));
            let args: [&[u8]; 2] = [fence.as_bytes(), prefix.as_bytes()];
            Ok(match self.semaphore_call::<i64>(release_fence_script(), name, None, &args).await? {
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
                let (fence, key, label) = permit_value(&info);
                holders.push(Holder {
                    fence,
                    remaining_ms: num(ms)?,
                    label: label.map(str::to_string),
                    key: key.map(str::to_string),
                });
            }
            Ok(SemaphoreInfo { name: name.to_string(), holders, fence: num(fence)? })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::permit_value;

    #[test]
    fn permit_values() {
        assert_eq!(permit_value("12:"), (12, None, None));
        assert_eq!(permit_value("12:a:b"), (12, None, Some("a:b")));
        assert_eq!(permit_value("12k3:a:b:"), (12, Some("a:b"), None));
        assert_eq!(permit_value("12k3:a:b:lab:el"), (12, Some("a:b"), Some("lab:el")));
        assert_eq!(permit_value("7k0::x"), (7, Some(""), Some("x")));
        assert_eq!(permit_value("9k2:é:x"), (9, Some("é"), Some("x")));
    }
}
