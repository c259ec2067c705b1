//! Rate Limiter on Redis: one script per take, on one key in the name's hash slot.

use redis::Value;

use super::{int, lua, RedisStore};
use crate::backend::BoxFuture;
use crate::error::{Error, ErrorCode};
use crate::limiter::{LimiterBackend, Rule, Take};

lua!(take_script, "limiter_take.lua");

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
                [code, now, tat] => Ok(Take { allowed: int(code)? == 1, now_us: int(now)?, tat_us: int(tat)? }),
                _ => Err(Error::new(
                    ErrorCode::Redis,
                    format!(
                        "the Redis key {key:?} holds a value flowguard did not write (a limiter is an integer \
                         string); nothing was changed: delete the key or use another limiter name"
                    ),
                )),
            }
        })
    }
}
