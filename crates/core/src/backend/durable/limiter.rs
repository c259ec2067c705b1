//! Rate Limiter on the durable store: a row per name holding its TAT, purged once reached.

use rusqlite::{params, Connection, OptionalExtension};

use super::{purge, Durable, Sql};
use crate::backend::embedded::now_us;
use crate::backend::BoxFuture;
use crate::limiter::{decide, LimiterBackend, Rule, Stored, Take};

fn take(
    c: &Connection,
    ns: &str,
    name: &str,
    rule: Rule,
    cost: u64,
    max_wait_us: u64,
    now_ms: i64,
) -> Sql<Take> {
    purge(c, "limiters", now_ms)?;
    // The store's clock is whole ms that never run back across processes; this process's clock
    // adds the microseconds within the current one.
    let now = now_us().max(now_ms * 1000);
    let stored: Option<i64> = c
        .prepare_cached("SELECT tat FROM limiters WHERE ns = ?1 AND name = ?2")?
        .query_row(params![ns, name], |r| r.get(0))
        .optional()?;
    let (t, next) = decide(stored, now, rule, cost, max_wait_us);
    if let Some(next) = next {
        c.prepare_cached(
            "INSERT INTO limiters (ns, name, tat, exp) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (ns, name) DO UPDATE SET tat = excluded.tat, exp = excluded.exp",
        )?
        .execute(params![ns, name, next, (next + 999) / 1000])?;
    }
    Ok(t)
}

fn inspect(c: &Connection, ns: &str, name: &str, now_ms: i64) -> Sql<Stored> {
    let now = now_us().max(now_ms * 1000);
    let tat: Option<i64> = c
        .prepare_cached("SELECT tat FROM limiters WHERE ns = ?1 AND name = ?2")?
        .query_row(params![ns, name], |r| r.get(0))
        .optional()?;
    Ok(Stored { now_us: now, tat_us: tat.filter(|t| *t > now) })
}

impl LimiterBackend for Durable {
    fn take<'a>(&'a self, name: &'a str, rule: Rule, cost: u64, max_wait_us: u64) -> BoxFuture<'a, Take> {
        self.write_tx(move |c, ns, now| take(c, ns, name, rule, cost, max_wait_us, now))
    }

    fn inspect_limiter<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Stored> {
        self.read_tx(move |c, ns, now| inspect(c, ns, name, now))
    }
}
