//! The Rate Limiter's fast take (`limiter_fast`): each take is shown taken (the store's count of
//! decided fast statements goes up), its answer equal to what the rule (`rules::limiter::decide`)
//! gives for the row it found at the time it answers with, and the row after it the one the rule
//! writes. Takes started together are each counted once. Needs FLOWGUARD_TEST_POSTGRES_URL (see
//! `scripts/postgres.mjs`).

use super::fast_tests::{store_with, taken, warm};
use super::{read, Ctx, Postgres, PostgresOptions, Sql};
use crate::limiter::{LimiterBackend, PauseEnd, Rule};
use crate::rules::limiter::decide;

const SECOND: u64 = 1_000_000;

async fn store() -> Postgres {
    let url = std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL");
    store_with(PostgresOptions { url, ..Default::default() }, "lfast").await
}

/// The row of limiter `name` as stored: (TAT, pause end, exp).
async fn row(s: &Postgres, name: &str) -> Option<(i64, Option<i64>, i64)> {
    async fn load(c: &Ctx<'_, '_>, name: &str) -> Sql<Option<(i64, Option<i64>, i64)>> {
        let sql = "SELECT tat, until, exp FROM {s}.limiters WHERE ns = $1 AND name = $2";
        Ok(match c.query_opt(sql, &[&c.ns(), &name.as_bytes()]).await? {
            Some(r) => Some((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)),
            None => None,
        })
    }
    async fn run(s: &Postgres, name: &str) -> crate::error::Result<Option<(i64, Option<i64>, i64)>> {
        read!(s, |c| load(&c, name))
    }
    run(s, name).await.unwrap()
}

/// A take of `cost` with `max_wait_us`, shown taken by the fast statement and equal to the rule.
async fn take(s: &Postgres, name: &str, rule: Rule, cost: u64, max_wait_us: u64) -> bool {
    let before = row(s, name).await;
    let count = taken(s);
    let t = s.take(name, rule, cost, max_wait_us).await.unwrap();
    assert_eq!(taken(s) - count, 1, "{name} cost {cost}: taken");
    let (stored, paused) = before.map_or((None, None), |(t, p, _)| (Some(t), p));
    let (want, next) = decide(stored, paused, t.now_us, rule, cost, max_wait_us);
    assert_eq!(t, want, "{name} cost {cost} wait {max_wait_us}, before {before:?}: the rule's answer");
    let after = row(s, name).await;
    match next {
        Some(next) => {
            let (tat, until, exp) = after.expect("a row after an allowed take");
            assert_eq!((tat, until), (next, paused), "{name}: the TAT moved on, the pause kept");
            let ms_after = (next + 999).div_euclid(1000);
            assert_eq!(exp, before.map_or(ms_after, |(_, _, e)| e.max(ms_after)), "{name}: exp");
        }
        None => assert_eq!(after, before, "{name}: nothing written"),
    }
    t.allowed
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn take_fast_statement_decides_as_the_rule() {
    let s = store().await;
    let rule = Rule { interval_us: SECOND, burst: 3 };
    // A new limiter, then its burst, then a refusal, a reservation within the wait; a take of
    // no cost writes nothing (refused while the reservation runs ahead, allowed on a new one).
    assert!(take(&s, "a", rule, 1, 0).await);
    assert!(take(&s, "a", rule, 2, 0).await);
    assert!(!take(&s, "a", rule, 1, 0).await);
    assert!(take(&s, "a", rule, 1, 2 * SECOND).await);
    assert!(!take(&s, "a", rule, 0, 0).await);
    assert!(take(&s, "e", rule, 0, 0).await);
    assert_eq!(row(&s, "e").await, None);
    // A cost above the burst is never allowed without a wait; with one, it is reserved.
    assert!(!take(&s, "b", rule, 5, 0).await);
    assert!(take(&s, "b", rule, 5, 3 * SECOND).await);
    // A paused limiter: its tokens are due at the pause end at the earliest.
    let p = s.pause_limiter("c", PauseEnd::After(60 * SECOND)).await.unwrap();
    assert!(row(&s, "c").await.is_some(), "{p:?}");
    assert!(!take(&s, "c", rule, 1, 0).await);
    assert!(!take(&s, "c", rule, 1, 59 * SECOND).await, "due at the pause end, not before");
    assert!(take(&s, "c", rule, 1, 61 * SECOND).await);
    // A TAT long past: the take starts from now.
    let fast = Rule { interval_us: 1_000, burst: 1 };
    assert!(take(&s, "d", fast, 1, 0).await);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(take(&s, "d", fast, 1, 0).await);
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn takes_started_together_each_count_once() {
    let s = store().await;
    let rule = Rule { interval_us: 60 * SECOND, burst: 4 };
    for round in 0..5 {
        for name in [format!("new{round}"), format!("old{round}")] {
            if name.starts_with("old") {
                // An existing row with one token of the burst taken.
                assert!(s.take(&name, rule, 1, 0).await.unwrap().allowed);
            }
            let left = if name.starts_with("old") { 3 } else { 4 };
            warm(&s, 8).await;
            let barrier = tokio::sync::Barrier::new(8);
            let calls = (0..8).map(|_| async {
                barrier.wait().await;
                s.take(&name, rule, 1, 0).await.unwrap().allowed
            });
            let allowed = futures_util::future::join_all(calls).await.into_iter().filter(|a| *a).count();
            assert_eq!(allowed, left, "{name}: the burst's tokens left, each taken once");
        }
    }
}
