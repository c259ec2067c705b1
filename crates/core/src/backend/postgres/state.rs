//! Job State on PostgreSQL: a storage adapter around [`crate::rules::state`] (values, in `vals`)
//! and [`crate::rules::once`] (idempotency keys, in `idem`). A call that decides from what a key
//! holds locks its row first (`SELECT … FOR UPDATE`), reads the database's time, asks the rule
//! and writes; an unconditional set is one upsert. Each write but a set with `ifAbsent` runs one
//! statement first (`state_fast`, `once_fast`), the transaction only when it does not decide; a
//! delete, a key's completion and its release are that statement alone. Expired rows are
//! invisible to every call and removed a bounded slice per write (see `Ctx::purge`).

use tokio_postgres::Row;

use super::{read, transaction, Ctx, Postgres, Purged, Sql};
use crate::backend::BoxFuture;
use crate::rules::{once, state};
use crate::state::{Expiry, KeyClaim, Refusal, SetResult, StateBackend, StateValue};

type Refused<T> = std::result::Result<T, Refusal>;

/// A value's row locked until the transaction ends; the rows of several values; an idempotency
/// key's row locked.
pub(super) const VALUE_LOCKED: &str = "SELECT json, exp FROM {s}.vals WHERE ns = $1 AND key = $2 FOR UPDATE";
pub(super) const VALUES: &str =
    "SELECT v.json, v.exp, v.key FROM (SELECT DISTINCT key FROM unnest($2::bytea[]) AS u(key)) w,
    LATERAL (SELECT json, exp, key FROM {s}.vals WHERE ns = $1 AND key = w.key OFFSET 0) v";
pub(super) const IDEM_LOCKED: &str =
    "SELECT owner, result, exp FROM {s}.idem WHERE ns = $1 AND key = $2 FOR UPDATE";

fn stored(r: &Row) -> Sql<StateValue> {
    Ok(StateValue { json: r.try_get(0)?, expires_at: r.try_get(1)? })
}

fn rule_value(v: &StateValue) -> state::Value<'_> {
    state::Value { json: &v.json, expires_at: v.expires_at }
}

/// The row of value `key` (live or not) locked until the transaction ends, and the database's
/// time read after the lock, in one round trip (see `clock`).
async fn value_for_update(c: &Ctx<'_, '_>, key: &str) -> Sql<(Option<StateValue>, i64)> {
    let (rows, now) = c.query_then_now(VALUE_LOCKED, &[&c.ns(), &key.as_bytes()]).await?;
    Ok((rows.first().map(stored).transpose()?, now))
}

/// Writes value `key` (its row locked when `existed`, else absent).
async fn put(c: &Ctx<'_, '_>, existed: bool, key: &str, json: &str, exp: Option<i64>) -> Sql<()> {
    c.write_row(
        existed,
        "UPDATE {s}.vals SET json = $3, exp = $4 WHERE ns = $1 AND key = $2",
        "INSERT INTO {s}.vals (ns, key, json, exp) VALUES ($1, $2, $3, $4) ON CONFLICT (ns, key) DO NOTHING",
        &[&c.ns(), &key.as_bytes(), &json, &exp],
    )
    .await
}

async fn get(c: &Ctx<'_, '_>, keys: &[String]) -> Sql<Vec<Option<StateValue>>> {
    let wanted: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    let (rows, now) = c.query_then_now(VALUES, &[&c.ns(), &wanted]).await?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for r in &rows {
        let v = stored(r)?;
        if state::live(v.expires_at, now) {
            found.insert(r.try_get::<_, Vec<u8>>(2)?, v);
        }
    }
    Ok(keys.iter().map(|k| found.get(k.as_bytes()).cloned()).collect())
}

pub(super) async fn set(
    c: &Ctx<'_, '_>,
    key: &str,
    json: &str,
    expiry: Expiry,
    if_absent: bool,
) -> Sql<Refused<SetResult>> {
    // The rule reads the current value only for `if_absent`; without it, the write is one upsert.
    let (current, now) = if if_absent { value_for_update(c, key).await? } else { (None, c.now().await?) };
    let decision = state::set(current.as_ref().map(rule_value), expiry, if_absent, now);
    Ok(match decision {
        Err(r) => Err(r),
        Ok(state::Set::Keep(v)) => Ok(SetResult { written: false, current: v.into() }),
        Ok(state::Set::Write { expires_at }) => {
            if if_absent {
                put(c, current.is_some(), key, json, expires_at).await?;
            } else {
                c.execute(
                    "INSERT INTO {s}.vals (ns, key, json, exp) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (ns, key) DO UPDATE SET json = excluded.json, exp = excluded.exp",
                    &[&c.ns(), &key.as_bytes(), &json, &expires_at],
                )
                .await?;
            }
            c.purge(Purged::Vals, now).await?;
            Ok(SetResult { written: true, current: StateValue { json: json.to_string(), expires_at } })
        }
    })
}

async fn increment(c: &Ctx<'_, '_>, key: &str, by: i64, ttl_ms: Option<u64>) -> Sql<Refused<i64>> {
    let (current, now) = value_for_update(c, key).await?;
    Ok(match state::increment(current.as_ref().map(rule_value), by, ttl_ms, now) {
        Err(r) => Err(r),
        Ok((next, expires_at)) => {
            put(c, current.is_some(), key, &next.to_string(), expires_at).await?;
            c.purge(Purged::Vals, now).await?;
            Ok(next)
        }
    })
}

/// An idempotency key's row: (owner while pending, result when done, expiry).
type IdemRow = (Option<String>, Option<String>, i64);

/// An idempotency key row as the rules read it: done when it holds a result, else pending
/// under its owner (a row with neither is not written).
fn rule_key(row: &IdemRow) -> Option<once::Key<'_>> {
    match row {
        (_, Some(json), exp) => Some(once::Key::Done { json, expires_at: *exp }),
        (Some(owner), None, exp) => Some(once::Key::Pending { owner, expires_at: *exp }),
        (None, None, _) => None,
    }
}

/// The row of idempotency key `key` (live or not) locked until the transaction ends, and the
/// database's time read after the lock, in one round trip (see `clock`).
async fn idem_for_update(c: &Ctx<'_, '_>, key: &str) -> Sql<(Option<IdemRow>, i64)> {
    let (rows, now) = c.query_then_now(IDEM_LOCKED, &[&c.ns(), &key.as_bytes()]).await?;
    let row = match rows.first() {
        Some(r) => Some((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)),
        None => None,
    };
    Ok((row, now))
}

async fn claim_key(c: &Ctx<'_, '_>, key: &str, owner: &str, lease_ms: u64) -> Sql<KeyClaim> {
    let (row, now) = idem_for_update(c, key).await?;
    Ok(match once::claim(row.as_ref().and_then(rule_key), lease_ms, now) {
        once::Claim::Done { json, expires_at } => {
            KeyClaim::Done { json: json.to_string(), expires_at: Some(expires_at) }
        }
        once::Claim::Pending { remaining_ms } => KeyClaim::Pending { remaining_ms },
        once::Claim::Take { expires_at } => {
            c.write_row(
                row.is_some(),
                "UPDATE {s}.idem SET owner = $3, result = NULL, exp = $4 WHERE ns = $1 AND key = $2",
                "INSERT INTO {s}.idem (ns, key, owner, result, exp) VALUES ($1, $2, $3, NULL, $4)
                 ON CONFLICT (ns, key) DO NOTHING",
                &[&c.ns(), &key.as_bytes(), &owner, &expires_at],
            )
            .await?;
            c.purge(Purged::Idem, now).await?;
            KeyClaim::Claimed { owner: owner.to_string(), lease_ms }
        }
    })
}

impl StateBackend for Postgres {
    fn get<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Vec<Option<StateValue>>> {
        Box::pin(async move { read!(self, |c| get(&c, keys)) })
    }
    fn set<'a>(
        &'a self,
        key: &'a str,
        json: &'a str,
        expiry: Expiry,
        if_absent: bool,
    ) -> BoxFuture<'a, Refused<SetResult>> {
        Box::pin(async move {
            // Its fast statement first (`state_fast`).
            let fast = if if_absent {
                self.set_if_absent_fast(key, json, expiry).await?
            } else {
                self.set_fast(key, json, expiry).await?
            };
            if let Some(r) = fast {
                return Ok(Ok(r));
            }
            transaction!(self, |c| set(&c, key, json, expiry, if_absent))
        })
    }
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, bool> {
        // One statement decides every delete (`state_fast`).
        Box::pin(self.delete_fast(key))
    }
    fn increment<'a>(&'a self, key: &'a str, by: i64, ttl_ms: Option<u64>) -> BoxFuture<'a, Refused<i64>> {
        Box::pin(async move {
            if let Some(next) = self.increment_fast(key, by, ttl_ms).await? {
                return Ok(Ok(next));
            }
            transaction!(self, |c| increment(&c, key, by, ttl_ms))
        })
    }
    fn claim_key<'a>(&'a self, key: &'a str, owner: &'a str, lease_ms: u64) -> BoxFuture<'a, KeyClaim> {
        Box::pin(async move {
            // Its fast statement first (`once_fast`).
            if let Some(claim) = self.claim_key_fast(key, owner, lease_ms).await? {
                return Ok(claim);
            }
            transaction!(self, |c| claim_key(&c, key, owner, lease_ms))
        })
    }
    fn complete_key<'a>(
        &'a self,
        key: &'a str,
        owner: &'a str,
        json: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, bool> {
        // One statement decides every completion (`once_fast`).
        Box::pin(self.complete_key_fast(key, owner, json, ttl_ms))
    }
    fn release_key<'a>(&'a self, key: &'a str, owner: &'a str) -> BoxFuture<'a, bool> {
        // One statement decides every release (`once_fast`).
        Box::pin(self.release_key_fast(key, owner))
    }
}
