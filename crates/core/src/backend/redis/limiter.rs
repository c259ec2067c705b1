//! Rate Limiter on Redis: one script per take or pause, on the limiter's two keys (its TAT and
//! its pause end) in the name's hash slot.

use redis::Value;

use super::{int, lua, RedisStore};
use crate::backend::BoxFuture;
use crate::error::{Error, ErrorCode};
use crate::limiter::{LimiterBackend, PauseEnd, Rule, Stored, Take};
use crate::rules::limiter::{Pause, MAX_PAUSE_US};

lua!(take_script, "limiter_take.lua");
lua!(inspect_script, "limiter_inspect.lua");
lua!(pause_script, "limiter_pause.lua");

/// The error of a limiter key that holds something flowguard did not write.
fn foreign(key: &str) -> Error {
    Error::new(
        ErrorCode::Backend,
        format!(
            "the Redis key {key:?} (or its pause key {key:?}:p) holds a value flowguard did not write (a \
             limiter is an integer string); nothing was changed: delete the key or use another limiter name"
        ),
    )
}

/// A time the script read: None when absent (0) or reached.
fn ahead(v: i64, now: i64) -> Option<i64> {
    (v > now).then_some(v)
}

impl LimiterBackend for RedisStore {
    fn take<'a>(&'a self, name: &'a str, rule: Rule, cost: u64, max_wait_us: u64) -> BoxFuture<'a, Take> {
        Box::pin(async move {
            let keys = [self.keys().limiter(name), self.keys().limiter_pause(name)];
            let args = [
                rule.interval_us.to_string(),
                rule.burst.to_string(),
                cost.to_string(),
                max_wait_us.to_string(),
            ];
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            let reply: Vec<Value> =
                self.eval(take_script(), &[keys[0].as_bytes(), keys[1].as_bytes()], &args).await?;
            match reply.as_slice() {
                [code, now, tat, pause] => {
                    let now_us = int(now)?;
                    Ok(Take {
                        allowed: int(code)? == 1,
                        now_us,
                        tat_us: int(tat)?,
                        pause_us: ahead(int(pause)?, now_us),
                    })
                }
                _ => Err(foreign(&keys[0])),
            }
        })
    }

    fn inspect_limiter<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Stored> {
        Box::pin(async move {
            let keys = [self.keys().limiter(name), self.keys().limiter_pause(name)];
            let reply: Vec<Value> =
                self.eval(inspect_script(), &[keys[0].as_bytes(), keys[1].as_bytes()], &[]).await?;
            match reply.as_slice() {
                [now, tat, pause] => {
                    let now_us = int(now)?;
                    Ok(Stored {
                        now_us,
                        tat_us: ahead(int(tat)?, now_us),
                        pause_us: ahead(int(pause)?, now_us),
                    })
                }
                _ => Err(foreign(&keys[0])),
            }
        })
    }

    fn pause_limiter<'a>(&'a self, name: &'a str, end: PauseEnd) -> BoxFuture<'a, (Pause, Stored)> {
        Box::pin(async move {
            let keys = [self.keys().limiter(name), self.keys().limiter_pause(name)];
            let (kind, us) = match end {
                PauseEnd::At(at) => ("at", at.to_string()),
                PauseEnd::After(after) => ("after", after.to_string()),
            };
            let max = MAX_PAUSE_US.to_string();
            let args: [&[u8]; 3] = [kind.as_bytes(), us.as_bytes(), max.as_bytes()];
            let reply: Vec<Value> =
                self.eval(pause_script(), &[keys[0].as_bytes(), keys[1].as_bytes()], &args).await?;
            match reply.as_slice() {
                [code, now, tat, pause, asked] => {
                    let now_us = int(now)?;
                    let (pause, asked) = (int(pause)?, int(asked)?);
                    let decision = match int(code)? {
                        1 => Pause::Store(pause),
                        2 => Pause::TooFar(asked),
                        _ => Pause::Keep,
                    };
                    Ok((
                        decision,
                        Stored { now_us, tat_us: ahead(int(tat)?, now_us), pause_us: ahead(pause, now_us) },
                    ))
                }
                _ => Err(foreign(&keys[0])),
            }
        })
    }
}
