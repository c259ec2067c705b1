//! Job State on the durable store: the rules of the in-memory store (and the Redis scripts
//! `state_*.lua`), with values and idempotency keys as rows. Expired rows are invisible to every
//! call and removed a slice per write.

use rusqlite::{params, Connection, OptionalExtension};

use super::{purge, Durable, Sql};
use crate::backend::embedded::integer;
use crate::backend::BoxFuture;
use crate::state::{Expiry, KeyClaim, Refusal, SetResult, StateBackend, StateValue, MAX_SAFE_INTEGER};

type Refused<T> = std::result::Result<T, Refusal>;

fn value(c: &Connection, ns: &str, key: &str, now: i64) -> Sql<Option<StateValue>> {
    Ok(c.prepare_cached(
        "SELECT json, exp FROM vals WHERE ns = ?1 AND key = ?2 AND (exp IS NULL OR exp > ?3)",
    )?
    .query_row(params![ns, key, now], |r| Ok(StateValue { json: r.get(0)?, expires_at: r.get(1)? }))
    .optional()?)
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
    let expires_at = match expiry {
        Expiry::Never => None,
        Expiry::In(ms) => Some(now + ms as i64),
        Expiry::At(at) if (at as i64) <= now => return Ok(Err(Refusal::ExpiryPast)),
        Expiry::At(at) => Some(at as i64),
    };
    if if_absent {
        if let Some(current) = value(c, ns, key, now)? {
            return Ok(Ok(SetResult { written: false, current }));
        }
    }
    put(c, ns, key, json, expires_at, now)?;
    Ok(Ok(SetResult { written: true, current: StateValue { json: json.to_string(), expires_at } }))
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
    let (current, expires_at) = match value(c, ns, key, now)? {
        Some(v) => match integer(&v.json) {
            Ok(n) => (n, v.expires_at),
            Err(r) => return Ok(Err(r)),
        },
        None => (0, None),
    };
    let next = current + by;
    if next.abs() > MAX_SAFE_INTEGER {
        return Ok(Err(Refusal::OutOfRange));
    }
    let expires_at = expires_at.or_else(|| ttl_ms.map(|t| now + t as i64));
    put(c, ns, key, &next.to_string(), expires_at, now)?;
    Ok(Ok(next))
}

fn claim_key(c: &Connection, ns: &str, key: &str, owner: &str, lease_ms: u64, now: i64) -> Sql<KeyClaim> {
    purge(c, "idem", now)?;
    Ok(match idem(c, ns, key, now)? {
        Some((_, Some(json), exp)) => KeyClaim::Done { json, expires_at: Some(exp) },
        Some((_, None, exp)) => KeyClaim::Pending { remaining_ms: (exp - now).max(0) as u64 },
        None => {
            c.prepare_cached(
                "INSERT INTO idem (ns, key, owner, result, exp) VALUES (?1, ?2, ?3, NULL, ?4)
                 ON CONFLICT (ns, key) DO UPDATE SET owner = excluded.owner, result = NULL, exp = excluded.exp",
            )?
            .execute(params![ns, key, owner, now + lease_ms as i64])?;
            KeyClaim::Claimed { owner: owner.to_string(), lease_ms }
        }
    })
}

/// Whether `owner` holds the pending key `key` now.
fn holds(c: &Connection, ns: &str, key: &str, owner: &str, now: i64) -> Sql<bool> {
    Ok(matches!(idem(c, ns, key, now)?, Some((Some(o), None, _)) if o == owner))
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
    if !holds(c, ns, key, owner, now)? {
        return Ok(false);
    }
    c.prepare_cached("UPDATE idem SET owner = NULL, result = ?3, exp = ?4 WHERE ns = ?1 AND key = ?2")?
        .execute(params![ns, key, json, now + ttl_ms as i64])?;
    Ok(true)
}

fn release_key(c: &Connection, ns: &str, key: &str, owner: &str, now: i64) -> Sql<bool> {
    if !holds(c, ns, key, owner, now)? {
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
