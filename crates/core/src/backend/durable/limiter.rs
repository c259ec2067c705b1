//! Rate Limiter on the durable store: a row per name holding its TAT, and a row per paused name
//! holding its pause end, each purged once reached.

use rusqlite::{params, Connection};

use super::{purge, Durable, Sql};
use crate::backend::embedded::now_us;
use crate::backend::BoxFuture;
use crate::limiter::{LimiterBackend, PauseEnd, Rule, Stored, Take};
use crate::rules::limiter::{decide, pause, Pause};

/// The store's clock is whole ms that never run back across processes; this process's clock
/// adds the microseconds within the current one.
fn now(now_ms: i64) -> i64 {
    now_us().max(now_ms * 1000)
}

/// The TAT and pause end of `name` (each None when absent; a pause row past its exp is none).
fn load(c: &Connection, ns: &str, name: &str, now_ms: i64) -> Sql<(Option<i64>, Option<i64>)> {
    c.prepare_cached(
        "SELECT (SELECT tat FROM limiters WHERE ns = ?1 AND name = ?2),
                (SELECT until FROM limiter_pauses WHERE ns = ?1 AND name = ?2 AND exp > ?3)",
    )?
    .query_row(params![ns, name, now_ms], |r| Ok((r.get(0)?, r.get(1)?)))
    .map_err(Into::into)
}

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
    let now = now(now_ms);
    let (stored, paused) = load(c, ns, name, now_ms)?;
    let (t, next) = decide(stored, paused, now, rule, cost, max_wait_us);
    if let Some(next) = next {
        c.prepare_cached(
            "INSERT INTO limiters (ns, name, tat, exp) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (ns, name) DO UPDATE SET tat = excluded.tat, exp = excluded.exp",
        )?
        .execute(params![ns, name, next, (next + 999) / 1000])?;
    }
    Ok(t)
}

fn pause_limiter(c: &Connection, ns: &str, name: &str, end: PauseEnd, now_ms: i64) -> Sql<(Pause, Stored)> {
    purge(c, "limiter_pauses", now_ms)?;
    let now = now(now_ms);
    let (_, paused) = load(c, ns, name, now_ms)?;
    let decision = pause(paused.filter(|p| *p > now), now, end);
    if let Pause::Store(until) = decision {
        let exp = (until + 999) / 1000;
        c.prepare_cached(
            "INSERT INTO limiter_pauses (ns, name, until, exp) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (ns, name) DO UPDATE SET until = excluded.until, exp = excluded.exp",
        )?
        .execute(params![ns, name, until, exp])?;
        // The limiters row lives at least as long, so the catalog lists the paused name (a TAT
        // of now equals none).
        c.prepare_cached(
            "INSERT INTO limiters (ns, name, tat, exp) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (ns, name) DO UPDATE SET exp = max(exp, excluded.exp)",
        )?
        .execute(params![ns, name, now, exp])?;
    }
    Ok((decision, inspect(c, ns, name, now_ms)?))
}

fn inspect(c: &Connection, ns: &str, name: &str, now_ms: i64) -> Sql<Stored> {
    let now = now(now_ms);
    let (tat, paused) = load(c, ns, name, now_ms)?;
    Ok(Stored { now_us: now, tat_us: tat.filter(|t| *t > now), pause_us: paused.filter(|p| *p > now) })
}

impl LimiterBackend for Durable {
    fn take<'a>(&'a self, name: &'a str, rule: Rule, cost: u64, max_wait_us: u64) -> BoxFuture<'a, Take> {
        self.write_tx(move |c, ns, now| take(c, ns, name, rule, cost, max_wait_us, now))
    }

    fn inspect_limiter<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Stored> {
        self.read_tx(move |c, ns, now| inspect(c, ns, name, now))
    }

    fn pause_limiter<'a>(&'a self, name: &'a str, end: PauseEnd) -> BoxFuture<'a, (Pause, Stored)> {
        self.write_tx(move |c, ns, now| pause_limiter(c, ns, name, end, now))
    }
}
