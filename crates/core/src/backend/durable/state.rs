//! Job State on the durable store: a storage adapter around [`crate::rules::state`] and
//! [`crate::rules::once`], with values and idempotency keys as rows. Expired rows are invisible to every
//! call and removed a slice per write.

use rusqlite::{params, Connection, OptionalExtension};

use super::{purge, Durable, Sql};
use crate::backend::BoxFuture;
use crate::rules::{once, state};
use crate::state::{Expiry, KeyClaim, Refusal, SetResult, StateBackend, StateValue};

type Refused<T> = std::result::Result<T, Refusal>;

fn value(c: &Connection, ns: &str, key: &str, now: i64) -> Sql<Option<StateValue>> {
    Ok(c.prepare_cached(
        "SELECT json, exp FROM vals WHERE ns = ?1 AND key = ?2 AND (exp IS NULL OR exp > ?3)",
    )?
    .query_row(params![ns, key, now], |r| Ok(StateValue { json: r.get(0)?, expires_at: r.get(1)? }))
    .optional()?)
}

fn rule_value(v: &StateValue) -> state::Value<'_> {
    state::Value { json: &v.json, expires_at: v.expires_at }
}

fn put(c: &Connection, ns: &str, key: &str, json: &str, exp: Option<i64>, now: i64) -> Sql<()> {
    c.prepare_cached(
        "INSERT INTO vals (ns, key, json, exp) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (ns, key) DO UPDATE SET json = excluded.json, exp = excluded.exp",
    )?
    .execute(params![ns, key, json, exp])?;
    purge(c, "vals", now)?;
    Ok(())
}

/// An idempotency key: (owner while pending, result when done, expiry).
type IdemRow = (Option<String>, Option<String>, i64);

/// An idempotency key row as the rules read it: done when it holds a result, else pending under
/// its owner (a row with neither is not written).
fn rule_key(row: &IdemRow) -> Option<once::Key<'_>> {
    match row {
        (_, Some(json), exp) => Some(once::Key::Done { json, expires_at: *exp }),
        (Some(owner), None, exp) => Some(once::Key::Pending { owner, expires_at: *exp }),
        (None, None, _) => None,
    }
}

/// The live idempotency key.
fn idem(c: &Connection, ns: &str, key: &str, now: i64) -> Sql<Option<IdemRow>> {
    Ok(c.prepare_cached("SELECT owner, result, exp FROM idem WHERE ns = ?1 AND key = ?2 AND exp > ?3")?
        .query_row(params![ns, key, now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?)
}

fn set(
    c: &Connection,
    ns: &str,
    key: &str,
    json: &str,
    expiry: Expiry,
    if_absent: bool,
    now: i64,
) -> Sql<Refused<SetResult>> {
    // The rule reads the current value only for `if_absent`.
    let current = if if_absent { value(c, ns, key, now)? } else { None };
    Ok(match state::set(current.as_ref().map(rule_value), expiry, if_absent, now) {
        Err(r) => Err(r),
        Ok(state::Set::Keep(v)) => Ok(SetResult { written: false, current: v.into() }),
        Ok(state::Set::Write { expires_at }) => {
            put(c, ns, key, json, expires_at, now)?;
            Ok(SetResult { written: true, current: StateValue { json: json.to_string(), expires_at } })
        }
    })
}

fn delete(c: &Connection, ns: &str, key: &str, now: i64) -> Sql<bool> {
    let live = value(c, ns, key, now)?.is_some();
    c.prepare_cached("DELETE FROM vals WHERE ns = ?1 AND key = ?2")?.execute(params![ns, key])?;
    purge(c, "vals", now)?;
    Ok(live)
}

fn increment(
    c: &Connection,
    ns: &str,
    key: &str,
    by: i64,
    ttl_ms: Option<u64>,
    now: i64,
) -> Sql<Refused<i64>> {
    let current = value(c, ns, key, now)?;
    Ok(match state::increment(current.as_ref().map(rule_value), by, ttl_ms, now) {
        Err(r) => Err(r),
        Ok((next, expires_at)) => {
            put(c, ns, key, &next.to_string(), expires_at, now)?;
            Ok(next)
        }
    })
}

fn claim_key(c: &Connection, ns: &str, key: &str, owner: &str, lease_ms: u64, now: i64) -> Sql<KeyClaim> {
    purge(c, "idem", now)?;
    let row = idem(c, ns, key, now)?;
    Ok(match once::claim(row.as_ref().and_then(rule_key), lease_ms, now) {
        once::Claim::Done { json, expires_at } => {
            KeyClaim::Done { json: json.to_string(), expires_at: Some(expires_at) }
        }
        once::Claim::Pending { remaining_ms } => KeyClaim::Pending { remaining_ms },
        once::Claim::Take { expires_at } => {
            c.prepare_cached(
                "INSERT INTO idem (ns, key, owner, result, exp) VALUES (?1, ?2, ?3, NULL, ?4)
                 ON CONFLICT (ns, key) DO UPDATE SET owner = excluded.owner, result = NULL, exp = excluded.exp",
            )?
            .execute(params![ns, key, owner, expires_at])?;
            KeyClaim::Claimed { owner: owner.to_string(), lease_ms }
        }
    })
}

fn complete_key(
    c: &Connection,
    ns: &str,
    key: &str,
    owner: &str,
    json: &str,
    ttl_ms: u64,
    now: i64,
) -> Sql<bool> {
    let row = idem(c, ns, key, now)?;
    let Some(expires_at) = once::complete(row.as_ref().and_then(rule_key), owner, ttl_ms, now) else {
        return Ok(false);
    };
    c.prepare_cached("UPDATE idem SET owner = NULL, result = ?3, exp = ?4 WHERE ns = ?1 AND key = ?2")?
        .execute(params![ns, key, json, expires_at])?;
    Ok(true)
}

fn release_key(c: &Connection, ns: &str, key: &str, owner: &str, now: i64) -> Sql<bool> {
    let row = idem(c, ns, key, now)?;
    if !once::release(row.as_ref().and_then(rule_key), owner, now) {
        return Ok(false);
    }
    c.prepare_cached("DELETE FROM idem WHERE ns = ?1 AND key = ?2")?.execute(params![ns, key])?;
    Ok(true)
}

impl StateBackend for Durable {
    fn get<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Vec<Option<StateValue>>> {
        self.read_tx(move |c, ns, now| keys.iter().map(|k| value(c, ns, k, now)).collect())
    }
    fn set<'a>(
        &'a self,
        key: &'a str,
        json: &'a str,
        expiry: Expiry,
        if_absent: bool,
    ) -> BoxFuture<'a, Refused<SetResult>> {
        self.write_tx(move |c, ns, now| set(c, ns, key, json, expiry, if_absent, now))
    }
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, bool> {
        self.write_tx(move |c, ns, now| delete(c, ns, key, now))
    }
    fn increment<'a>(&'a self, key: &'a str, by: i64, ttl_ms: Option<u64>) -> BoxFuture<'a, Refused<i64>> {
        self.write_tx(move |c, ns, now| increment(c, ns, key, by, ttl_ms, now))
    }
    fn claim_key<'a>(&'a self, key: &'a str, owner: &'a str, lease_ms: u64) -> BoxFuture<'a, KeyClaim> {
        self.write_tx(move |c, ns, now| claim_key(c, ns, key, owner, lease_ms, now))
    }
    fn complete_key<'a>(
        &'a self,
        key: &'a str,
        owner: &'a str,
        json: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, bool> {
        self.write_tx(move |c, ns, now| complete_key(c, ns, key, owner, json, ttl_ms, now))
    }
    fn release_key<'a>(&'a self, key: &'a str, owner: &'a str) -> BoxFuture<'a, bool> {
        self.write_tx(move |c, ns, now| release_key(c, ns, key, owner, now))
    }
}
