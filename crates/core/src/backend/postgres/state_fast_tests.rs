//! Job State's fast statements (`state_fast`): each case they cover is shown taken (the store's
//! count of decided fast statements goes up) and answering and writing what the rule
//! (`rules::state`) gives at the statement's time; each case they leave is shown decided by the
//! transaction (the count unchanged), with its refusal, and nothing written. Needs
//! FLOWGUARD_TEST_POSTGRES_URL (see `scripts/postgres.mjs`).

use std::time::Duration;

use super::fast_tests::{store_with, taken, warm};
use super::{read, transaction, Ctx, Postgres, PostgresOptions, Sql};
use crate::rules::state::{self as rule, Value};
use crate::state::{Expiry, Refusal, StateBackend, StateValue, MAX_SAFE_INTEGER};

async fn store() -> Postgres {
    let url = std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL");
    store_with(PostgresOptions { url, ..Default::default() }, "sfast").await
}

/// The database's time.
async fn now(s: &Postgres) -> i64 {
    async fn run(s: &Postgres) -> crate::error::Result<i64> {
        read!(s, |c| async move { c.now().await })
    }
    run(s).await.unwrap()
}

/// The row of `key` as stored, expired or not.
async fn stored(s: &Postgres, key: &str) -> Option<StateValue> {
    async fn load(c: &Ctx<'_, '_>, key: &str) -> Sql<Option<StateValue>> {
        let sql = "SELECT json, exp FROM {s}.vals WHERE ns = $1 AND key = $2";
        let row = c.query_opt(sql, &[&c.ns(), &key.as_bytes()]).await?;
        Ok(match row {
            Some(r) => Some(StateValue { json: r.try_get(0)?, expires_at: r.try_get(1)? }),
            None => None,
        })
    }
    async fn run(s: &Postgres, key: &str) -> crate::error::Result<Option<StateValue>> {
        read!(s, |c| load(&c, key))
    }
    run(s, key).await.unwrap()
}

/// A value set by the transaction (`state::set`), not by a fast statement, so the cases below
/// start from rows the general path wrote.
async fn put(s: &Postgres, key: &str, json: &str, expiry: Expiry) {
    async fn run(
        s: &Postgres,
        key: &str,
        json: &str,
        expiry: Expiry,
    ) -> crate::error::Result<Result<crate::state::SetResult, Refusal>> {
        transaction!(s, |c| super::state::set(&c, key, json, expiry, false))
    }
    let count = taken(s);
    let r = run(s, key, json, expiry).await.unwrap().unwrap();
    assert!(r.written);
    assert_eq!(taken(s), count, "put is the transaction's");
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn set_fast_statement_writes_as_the_rule() {
    let s = store().await;
    let json = "{\"a\":[1,\"x\"]}";
    for (i, expiry) in
        [Expiry::Never, Expiry::In(60_000), Expiry::At(4_000_000_000_000)].into_iter().enumerate()
    {
        let key = format!("k{i}");
        // Over an existing value with another expiry: the expiry is the new one (cleared for Never).
        put(&s, &key, "1", Expiry::In(5_000)).await;
        let (count, t0) = (taken(&s), now(&s).await);
        let r = s.set(&key, json, expiry, false).await.unwrap().unwrap();
        let t1 = now(&s).await;
        assert_eq!(taken(&s) - count, 1, "{expiry:?}: taken");
        assert!(r.written);
        assert_eq!(stored(&s, &key).await.as_ref(), Some(&r.current), "{expiry:?}: written as answered");
        assert_eq!(r.current.json, json);
        // The rule at the statement's time (between t0 and t1).
        let at = |t| match rule::set(None, expiry, false, t).unwrap() {
            rule::Set::Write { expires_at } => expires_at,
            keep => panic!("{keep:?}"),
        };
        match expiry {
            Expiry::In(_) => assert!((at(t0)..=at(t1)).contains(&r.current.expires_at), "{r:?} {t0} {t1}"),
            _ => assert_eq!(r.current.expires_at, at(t0)),
        }
    }
    // Left to the transaction: an expiry at a time not after now (refused, nothing written),
    // with ifAbsent or without, over a live value or none.
    put(&s, "past", "1", Expiry::Never).await;
    for (key, if_absent) in [("past", false), ("past", true), ("none", false), ("none", true)] {
        let (count, t) = (taken(&s), now(&s).await);
        let r = s.set(key, "2", Expiry::At(t as u64 - 1), if_absent).await.unwrap();
        assert_eq!(r, Err(Refusal::ExpiryPast), "{key} {if_absent}");
        assert_eq!(taken(&s), count, "{key} {if_absent}: an expiry in the past: the transaction's");
    }
    assert_eq!(stored(&s, "past").await.map(|v| v.json), Some("1".into()));
    assert_eq!(stored(&s, "none").await, None);
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn set_if_absent_fast_statement_keeps_or_writes_as_the_rule() {
    let s = store().await;
    let json = "{\"b\":2}";
    put(&s, "live", "1", Expiry::In(60_000)).await;
    put(&s, "forever", "\"f\"", Expiry::Never).await;
    put(&s, "ended", "1", Expiry::In(1)).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let live = stored(&s, "live").await.unwrap();
    let forever = stored(&s, "forever").await.unwrap();
    for expiry in [Expiry::Never, Expiry::In(30_000), Expiry::At(4_000_000_000_000)] {
        // A live value: kept and answered, nothing written.
        for (key, was) in [("live", &live), ("forever", &forever)] {
            let count = taken(&s);
            let r = s.set(key, json, expiry, true).await.unwrap().unwrap();
            assert_eq!(taken(&s) - count, 1, "{key} {expiry:?}: taken");
            assert!(!r.written, "{key} {expiry:?}");
            assert_eq!(&r.current, was, "{key} {expiry:?}: the value kept");
            assert_eq!(stored(&s, key).await.as_ref(), Some(was), "{key} {expiry:?}: nothing written");
        }
        // None, or one that ended: written as the rule writes at the statement's time.
        for key in ["ended", "absent"] {
            let (count, t0) = (taken(&s), now(&s).await);
            let r = s.set(key, json, expiry, true).await.unwrap().unwrap();
            let t1 = now(&s).await;
            assert_eq!(taken(&s) - count, 1, "{key} {expiry:?}: taken");
            assert!(r.written && r.current.json == json, "{key} {expiry:?}: {r:?}");
            assert_eq!(
                stored(&s, key).await.as_ref(),
                Some(&r.current),
                "{key} {expiry:?}: written as answered"
            );
            let at = |t| match rule::set(None, expiry, true, t).unwrap() {
                rule::Set::Write { expires_at } => expires_at,
                keep => panic!("{keep:?}"),
            };
            match expiry {
                Expiry::In(_) => assert!((at(t0)..=at(t1)).contains(&r.current.expires_at), "{r:?}"),
                _ => assert_eq!(r.current.expires_at, at(t0)),
            }
            // Back to ended / absent for the next expiry.
            if key == "ended" {
                put(&s, key, "1", Expiry::In(1)).await;
            } else {
                s.delete(key).await.unwrap();
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Eight sets with `ifAbsent` of one key started together, five rounds of a new key and of one
/// whose value ended: exactly one writes, every other keeps and answers the value it wrote.
#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn sets_if_absent_started_together_write_once() {
    let s = std::sync::Arc::new(store().await);
    warm(&s, 8).await;
    for round in 0..10 {
        let key = format!("race{}", round / 2);
        if round % 2 == 1 {
            // The same key again, its value ended.
            put(&s, &key, "0", Expiry::In(1)).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(8));
        let calls = (0..8).map(|i| {
            let (s, barrier, key) = (s.clone(), barrier.clone(), key.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                s.set(&key, &format!("{i}"), Expiry::In(60_000), true).await.unwrap().unwrap()
            })
        });
        let got: Vec<_> =
            futures_util::future::join_all(calls).await.into_iter().map(|r| r.unwrap()).collect();
        let winners: Vec<_> = got.iter().filter(|r| r.written).collect();
        assert_eq!(winners.len(), 1, "round {round}: {got:?}");
        let won = &winners[0].current;
        assert!(
            got.iter().all(|r| &r.current == won),
            "round {round}: every call answers the value written: {got:?}"
        );
        assert_eq!(stored(&s, &key).await.as_ref(), Some(won), "round {round}");
    }
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn delete_fast_statement_answers_as_the_rule() {
    let s = store().await;
    put(&s, "live", "1", Expiry::In(60_000)).await;
    put(&s, "gone", "1", Expiry::In(1)).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    for (key, was_live) in [("live", true), ("gone", false), ("never", false)] {
        let count = taken(&s);
        assert_eq!(s.delete(key).await.unwrap(), was_live, "{key}");
        assert_eq!(taken(&s) - count, 1, "{key}: taken");
        assert_eq!(stored(&s, key).await, None, "{key}: no row left");
    }
}

/// An increment's case: the value before, its expiry, by, the TTL, and whether the fast
/// statement takes it.
type Case = (Option<String>, Expiry, i64, Option<u64>, bool);

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn increment_fast_statement_counts_as_the_rule() {
    let s = store().await;
    let max = MAX_SAFE_INTEGER;
    let cases: Vec<Case> = vec![
        (None, Expiry::Never, 5, Some(60_000), true),
        (None, Expiry::Never, -5, None, true),
        (Some("41".into()), Expiry::Never, 1, Some(60_000), true),
        (Some("41".into()), Expiry::In(60_000), 1, None, true),
        (Some("0".into()), Expiry::Never, -1, None, true),
        (Some((1 - max).to_string()), Expiry::Never, -1, None, true),
        (Some((max - 1).to_string()), Expiry::Never, 1, None, true),
        (Some("9999999999999999".into()), Expiry::Never, 0, None, false),
        (Some((1 - max).to_string()), Expiry::Never, -2, None, false),
        (Some("12345678901234567".into()), Expiry::Never, 1, None, false),
        (None, Expiry::Never, max + 1, None, false),
        (Some("\"a\"".into()), Expiry::Never, 1, None, false),
        (Some("01".into()), Expiry::Never, 1, None, false),
        (Some("-0".into()), Expiry::Never, 1, None, false),
        (Some("1.0".into()), Expiry::Never, 1, None, false),
        (Some(" 1".into()), Expiry::Never, 1, None, false),
        (Some("{}".into()), Expiry::Never, 1, None, false),
    ];
    for (i, (before, expiry, by, ttl, fast)) in cases.into_iter().enumerate() {
        let key = format!("c{i}");
        if let Some(json) = &before {
            put(&s, &key, json, expiry).await;
        }
        let was = stored(&s, &key).await;
        let (count, t0) = (taken(&s), now(&s).await);
        let r = s.increment(&key, by, ttl).await.unwrap();
        let t1 = now(&s).await;
        let what = format!("{before:?} {expiry:?} by {by} ttl {ttl:?}");
        assert_eq!(taken(&s) - count, u64::from(fast), "{what}: fast statement taken");
        let current = was.as_ref().map(|v| Value { json: &v.json, expires_at: v.expires_at });
        let rule = |t| rule::increment(current, by, ttl, t);
        match r {
            Ok(next) => {
                let (n0, e0) = rule(t0).unwrap();
                let (n1, e1) = rule(t1).unwrap();
                assert_eq!((next, next), (n0, n1), "{what}");
                let v = stored(&s, &key).await.unwrap();
                assert_eq!(v.json, next.to_string(), "{what}");
                assert!((e0..=e1).contains(&v.expires_at), "{what}: {v:?}, {e0:?}..{e1:?}");
            }
            Err(refusal) => {
                assert_eq!(rule(t0), Err(refusal), "{what}");
                assert_eq!(stored(&s, &key).await, was, "{what}: nothing written");
            }
        }
    }
    // An expired counter counts as none: it starts again at `by`, with the TTL given.
    put(&s, "old", "7", Expiry::In(1)).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (count, t0) = (taken(&s), now(&s).await);
    assert_eq!(s.increment("old", 2, Some(60_000)).await.unwrap(), Ok(2));
    assert_eq!(taken(&s) - count, 1);
    let e = stored(&s, "old").await.unwrap().expires_at.unwrap();
    assert!(e >= t0 + 60_000 && e <= now(&s).await + 60_000, "{e} {t0}");
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn increments_started_together_each_count_once() {
    let s = store().await;
    // Rounds of a new key and of an existing one (a lost update shows in most rounds, not all).
    for (round, key) in (0..5).flat_map(|r| [(r, "new"), (r, "old")]) {
        let key = format!("{key}{round}");
        if key.starts_with("old") {
            put(&s, &key, "100", Expiry::Never).await;
        }
        let base = if key.starts_with("old") { 100 } else { 0 };
        let key = key.as_str();
        warm(&s, 8).await;
        let barrier = tokio::sync::Barrier::new(8);
        let calls = (0..8).map(|_| async {
            barrier.wait().await;
            s.increment(key, 1, None).await.unwrap().unwrap()
        });
        let mut got = futures_util::future::join_all(calls).await;
        got.sort_unstable();
        assert_eq!(got, (base + 1..=base + 8).collect::<Vec<_>>(), "{key}: each increment counted once");
        assert_eq!(stored(&s, key).await.map(|v| v.json), Some((base + 8).to_string()));
    }
}
