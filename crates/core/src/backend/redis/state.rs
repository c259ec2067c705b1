//! Job State on Redis: each step one script; expiry times from the server's clock.

use redis::Value;

use super::{int, lua, opt_str, script, RedisStore};
use crate::backend::BoxFuture;
use crate::error::{Error, ErrorCode, Result};
use crate::state::{Expiry, KeyClaim, Refusal, SetResult, StateBackend, StateValue};

lua!(get_script, "state_get.lua");

/// The most keys one read script takes: a read of many keys is bounded work per script.
const GET_CHUNK: usize = 1000;
script!(set_script, "state_set.lua");
script!(delete_script, "state_delete.lua");
script!(incr_script, "state_incr.lua");
script!(claim_script, "key_claim.lua");
script!(complete_script, "key_complete.lua");
script!(release_script, "key_release.lua");

/// The expiry time of a key from the server's `now` and its PTTL (negative: none).
fn expires_at(now: i64, pttl: i64) -> Option<i64> {
    if pttl >= 0 {
        Some(now + pttl)
    } else {
        None
    }
}

impl RedisStore {
    /// Reads the values of `full` (state keys), one script per group of positions in `groups`,
    /// the scripts sent at once.
    async fn read_states(&self, full: &[String], groups: Vec<Vec<usize>>) -> Result<Vec<Option<StateValue>>> {
        let reads = groups.into_iter().map(|idx| async move {
            let keys: Vec<&[u8]> = idx.iter().map(|&i| full[i].as_bytes()).collect();
            let reply: Vec<Value> = self.eval(get_script(), &keys, &[]).await?;
            if reply.len() != 1 + idx.len() * 2 {
                return Err(Error::internal(format!("state get script replied with {} values", reply.len())));
            }
            let now = int(&reply[0])?;
            let values = reply[1..]
                .chunks(2)
                .map(|p| match opt_str(&p[0])? {
                    Some(json) => Ok(Some(StateValue { json, expires_at: expires_at(now, int(&p[1])?) })),
                    None => Ok(None),
                })
                .collect::<Result<Vec<_>>>()?;
            Ok::<_, Error>((idx, values))
        });
        let mut out: Vec<Option<StateValue>> = vec![None; full.len()];
        for (idx, values) in futures_util::future::try_join_all(reads).await? {
            for (i, v) in idx.into_iter().zip(values) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

impl StateBackend for RedisStore {
    /// Reads values. On one server: one script per [`GET_CHUNK`] keys (one for a usual read),
    /// pipelined on the connection. On a Redis Cluster: one script per hash slot (each state key
    /// has its own hash tag, and Redis Cluster refuses a script whose keys span slots, even on
    /// one node), the scripts running concurrently; so too on a cluster node opened by `url`,
    /// found out by its CROSSSLOT refusal of the first script (which changed nothing).
    fn get<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Vec<Option<StateValue>>> {
        Box::pin(async move {
            let full: Vec<String> = keys.iter().map(|k| self.keys().state(k)).collect();
            if !self.is_cluster()? {
                let all: Vec<usize> = (0..full.len()).collect();
                let chunks: Vec<Vec<usize>> = all.chunks(GET_CHUNK).map(<[usize]>::to_vec).collect();
                match self.read_states(&full, chunks).await {
                    // redis-rs names it CrossSlot; the server says CROSSSLOT.
                    Err(e)
                        if e.code == ErrorCode::Backend
                            && e.message.to_ascii_lowercase().contains("crossslot") => {}
                    other => return other,
                }
            }
            let mut by_slot: std::collections::BTreeMap<u16, Vec<usize>> = std::collections::BTreeMap::new();
            for (i, k) in full.iter().enumerate() {
                by_slot.entry(crate::keys::hash_slot(k.as_bytes())).or_default().push(i);
            }
            self.read_states(&full, by_slot.into_values().collect()).await
        })
    }

    fn set<'a>(
        &'a self,
        key: &'a str,
        json: &'a str,
        expiry: Expiry,
        if_absent: bool,
    ) -> BoxFuture<'a, std::result::Result<SetResult, Refusal>> {
        Box::pin(async move {
            let mut inv = set_script().prepare_invoke();
            inv.key(self.keys().state(key)).arg(json);
            match expiry {
                Expiry::Never => inv.arg("").arg(0),
                Expiry::In(ms) => inv.arg("in").arg(ms),
                Expiry::At(at) => inv.arg("at").arg(at),
            };
            inv.arg(if if_absent { "1" } else { "" });
            let reply: Vec<Value> = self.run(&inv).await?;
            let code = int(reply
                .first()
                .ok_or_else(|| Error::internal("state set script replied with nothing"))?)?;
            if code == -1 {
                return Ok(Err(Refusal::ExpiryPast));
            }
            if reply.len() != 4 {
                return Err(Error::internal(format!("state set script replied with {} values", reply.len())));
            }
            let now = int(&reply[3])?;
            let exp = expires_at(now, int(&reply[2])?);
            Ok(Ok(if code == 1 {
                SetResult { written: true, current: StateValue { json: json.to_string(), expires_at: exp } }
            } else {
                let current = opt_str(&reply[1])?.unwrap_or_default();
                SetResult { written: false, current: StateValue { json: current, expires_at: exp } }
            }))
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let mut inv = delete_script().prepare_invoke();
            inv.key(self.keys().state(key));
            let n: i64 = self.run(&inv).await?;
            Ok(n > 0)
        })
    }

    fn increment<'a>(
        &'a self,
        key: &'a str,
        by: i64,
        ttl_ms: Option<u64>,
    ) -> BoxFuture<'a, std::result::Result<i64, Refusal>> {
        Box::pin(async move {
            let mut inv = incr_script().prepare_invoke();
            inv.key(self.keys().state(key)).arg(by);
            match ttl_ms {
                Some(t) => inv.arg(t),
                None => inv.arg(""),
            };
            let reply: Vec<Value> = self.run(&inv).await?;
            Ok(match reply.first().map(int).transpose()? {
                Some(1) => Ok(int(reply
                    .get(1)
                    .ok_or_else(|| Error::internal("increment script replied without a value"))?)?),
                Some(-1) => Err(Refusal::NotInteger),
                Some(-2) => Err(Refusal::OutOfRange),
                other => return Err(Error::internal(format!("increment script replied with {other:?}"))),
            })
        })
    }

    fn claim_key<'a>(&'a self, key: &'a str, owner: &'a str, lease_ms: u64) -> BoxFuture<'a, KeyClaim> {
        Box::pin(async move {
            let mut inv = claim_script().prepare_invoke();
            inv.key(self.keys().idempotency(key)).arg(owner).arg(lease_ms);
            let reply: Vec<Value> = self.run(&inv).await?;
            if reply.len() != 4 {
                return Err(Error::internal(format!("key claim script replied with {} values", reply.len())));
            }
            let pttl = int(&reply[2])?;
            Ok(match int(&reply[0])? {
                1 => KeyClaim::Claimed { owner: owner.to_string(), lease_ms },
                0 => KeyClaim::Pending { remaining_ms: pttl.max(0) as u64 },
                _ => KeyClaim::Done {
                    json: opt_str(&reply[1])?.unwrap_or_default(),
                    expires_at: expires_at(int(&reply[3])?, pttl),
                },
            })
        })
    }

    fn complete_key<'a>(
        &'a self,
        key: &'a str,
        owner: &'a str,
        json: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let mut inv = complete_script().prepare_invoke();
            inv.key(self.keys().idempotency(key)).arg(owner).arg(json).arg(ttl_ms);
            let n: i64 = self.run(&inv).await?;
            Ok(n == 1)
        })
    }

    fn release_key<'a>(&'a self, key: &'a str, owner: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let mut inv = release_script().prepare_invoke();
            inv.key(self.keys().idempotency(key)).arg(owner);
            let n: i64 = self.run(&inv).await?;
            Ok(n == 1)
        })
    }
}
