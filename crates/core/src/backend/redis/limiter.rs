//! Rate Limiter on Redis: one script per take, on one key in the name's hash slot.

use redis::Value;

use super::{int, lua, RedisStore};
use crate::backend::BoxFuture;
use crate::error::{Error, ErrorCode};
use crate::limiter::{LimiterBackend, Rule, Stored, Take};

lua!(take_script, "limiter_take.lua");
lua!(inspect_script, "limiter_inspect.lua");

/// The error of a limiter key that holds something flowguard did not write.
fn foreign(key: &str) -> Error {
    Error::new(
        ErrorCode::Backend,
        format!(
            "the Redis key {key:?} holds a value flowguard did not write (a limiter is an integer string); \
             nothing was changed: delete the key or use another limiter name"
        ),
    )
}

impl LimiterBackend for RedisStore {
    fn take<'a>(&'a self, name: &'a str, rule: Rule, cost: u64, max_wait_us: u64) -> BoxFuture<'a, Take> {
        Box::pin(async move {
            let key = self.keys().limiter(name);
            let args = [
                rule.interval_us.to_string(),
                rule.burst.to_string(),
                cost.to_string(),
                max_wait_us.to_string(),
            ];
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            let reply: Vec<Value> = self.eval(take_script(), &[key.as_bytes()], &args).await?;
            match reply.as_slice() {
                [code, now, tat] => {
                    Ok(Take { allowed: int(code)? == 1, now_us: int(now)?, tat_us: int(tat)? })
                }
                _ => Err(foreign(&key)),
            }
        })
    }

    fn inspect_limiter<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Stored> {
        Box::pin(async move {
            let key = self.keys().limiter(name);
            let reply: Vec<Value> = self.eval(inspect_script(), &[key.as_bytes()], &[]).await?;
            match reply.as_slice() {
                [now] if int(now)? >= 0 => Ok(Stored { now_us: int(now)?, tat_us: None }),
                [now, tat] => {
                    let (now_us, tat) = (int(now)?, int(tat)?);
                    Ok(Stored { now_us, tat_us: (tat > now_us).then_some(tat) })
                }
                _ => Err(foreign(&key)),
            }
        })
    }
}
