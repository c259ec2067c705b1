//! Job State's idempotency keys' fast statements (`once_fast`): each case they cover is shown
//! taken (the store's count of decided fast statements goes up) and answering and writing what
//! the rule (`rules::once`) gives at the statement's time; the case a claim leaves (a key another
//! call inserted meanwhile) is shown decided by the transaction (the count unchanged). A completion
//! or release that waited for another call's change of the row decides on the row changed, eight
//! claims of one key started together take it once, and a completion or release wakes the key's
//! waiters.
//! Needs FLOWGUARD_TEST_POSTGRES_URL (see `scripts/postgres.mjs`).

use std::time::Duration;

use super::fast_tests::{listen, store_with, taken, warm};
use super::{notify, read, Ctx, Postgres, PostgresOptions, Sql};
use crate::backend::Backend;
use crate::rules::once::{self as rule, Key};
use crate::state::{KeyClaim, StateBackend};
use crate::wakeup::{Release, Topic};

fn url() -> String {
    std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL")
}

async fn store() -> Postgres {
    store_with(PostgresOptions { url: url(), ..Default::default() }, "ofast").await
}

/// A connection of its own (outside the store's pool).
async fn connect() -> tokio_postgres::Client {
    let (db, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    db
}

/// The database's time.
async fn now(s: &Postgres) -> i64 {
    async fn run(s: &Postgres) -> crate::error::Result<i64> {
        read!(s, |c| async move { c.now().await })
    }
    run(s).await.unwrap()
}

/// A key's row as stored, expired or not: (owner, result, expiry).
type Row = (Option<String>, Option<String>, i64);

async fn stored(s: &Postgres, key: &str) -> Option<Row> {
    async fn load(c: &Ctx<'_, '_>, key: &str) -> Sql<Option<Row>> {
        let sql = "SELECT owner, result, exp FROM {s}.idem WHERE ns = $1 AND key = $2";
        let row = c.query_opt(sql, &[&c.ns(), &key.as_bytes()]).await?;
        Ok(match row {
            Some(r) => Some((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)),
            None => None,
        })
    }
    async fn run(s: &Postgres, key: &str) -> crate::error::Result<Option<Row>> {
        read!(s, |c| load(&c, key))
    }
    run(s, key).await.unwrap()
}

/// Writes a key's row as given (as no call writes some of them: a row with both an owner and a
/// result, or with neither).
async fn put_row(s: &Postgres, db: &tokio_postgres::Client, key: &str, row: &Row) {
    let sql = format!(
        "INSERT INTO {}.idem (ns, key, owner, result, exp) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (ns, key) DO UPDATE SET owner = excluded.owner, result = excluded.result, exp = excluded.exp",
        s.schema
    );
    db.execute(&sql, &[&s.ns.as_bytes(), &key.as_bytes(), &row.0, &row.1, &row.2]).await.unwrap();
}

/// Whether a key's row is as it was before a call that wrote nothing: the same, or gone when it
/// was expired at `t` (a purge of another call, or the sweep, may take an expired row at any time).
fn unchanged(after: &Option<Row>, before: &Option<Row>, t: i64) -> bool {
    after == before || (after.is_none() && before.as_ref().is_some_and(|b| b.2 <= t))
}

/// The row as the rule reads it (as `state::rule_key`).
fn rule_key(row: &Row) -> Option<Key<'_>> {
    match row {
        (_, Some(json), exp) => Some(Key::Done { json, expires_at: *exp }),
        (Some(owner), None, exp) => Some(Key::Pending { owner, expires_at: *exp }),
        (None, None, _) => None,
    }
}

/// The rows a key starts from in the cases below, each made at `t` (the database's time): a
/// pending key of `"o1"` and a done one, live or expired, rows with both an owner and a result
/// or with neither, and no row.
fn starts(t: i64) -> Vec<(&'static str, Option<Row>)> {
    let (live, gone) = (t + 600_000, t - 1);
    vec![
        ("absent", None),
        ("pending", Some((Some("o1".into()), None, live))),
        ("pending expired", Some((Some("o1".into()), None, gone))),
        ("done", Some((None, Some("{\"r\":1}".into()), live))),
        ("done expired", Some((None, Some("{\"r\":1}".into()), gone))),
        ("done with an owner", Some((Some("o1".into()), Some("[2]".into()), live))),
        ("neither", Some((None, None, live))),
    ]
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn claim_fast_statement_answers_and_writes_as_the_rule() {
    let (s, db) = (store().await, connect().await);
    let lease = 30_000u64;
    for (what, before) in starts(now(&s).await) {
        let key = format!("claim {what}");
        if let Some(row) = &before {
            put_row(&s, &db, &key, row).await;
        }
        let (count, t0) = (taken(&s), now(&s).await);
        let got = s.claim_key(&key, "o2", lease).await.unwrap();
        let t1 = now(&s).await;
        assert_eq!(taken(&s) - count, 1, "{what}: taken");
        let after = stored(&s, &key).await;
        let rule = |t| rule::claim(before.as_ref().and_then(rule_key), lease, t);
        match (rule(t0), rule(t1)) {
            (rule::Claim::Take { expires_at: e0 }, rule::Claim::Take { expires_at: e1 }) => {
                assert_eq!(got, KeyClaim::Claimed { owner: "o2".into(), lease_ms: lease }, "{what}");
                let (owner, result, exp) = after.unwrap();
                assert_eq!((owner.as_deref(), result), (Some("o2"), None), "{what}: pending for the caller");
                assert!((e0..=e1).contains(&exp), "{what}: {exp} not in {e0}..={e1}");
            }
            (rule::Claim::Pending { remaining_ms: r0 }, rule::Claim::Pending { remaining_ms: r1 }) => {
                let KeyClaim::Pending { remaining_ms } = got else { panic!("{what}: {got:?}") };
                assert!((r1..=r0).contains(&remaining_ms), "{what}: {remaining_ms} not in {r1}..={r0}");
                assert!(unchanged(&after, &before, t1), "{what}: nothing written: {after:?}");
            }
            (rule::Claim::Done { json, expires_at }, d1) => {
                assert_eq!(d1, rule::Claim::Done { json, expires_at }, "{what}");
                assert_eq!(got, KeyClaim::Done { json: json.into(), expires_at: Some(expires_at) }, "{what}");
                assert!(unchanged(&after, &before, t1), "{what}: nothing written: {after:?}");
            }
            other => panic!("{what}: the rule changed between {t0} and {t1}: {other:?}"),
        }
    }
    // Expired by time passing (a lease of 1 ms): absent to the claim, taken again.
    assert!(matches!(s.claim_key("short", "o1", 1).await.unwrap(), KeyClaim::Claimed { .. }));
    tokio::time::sleep(Duration::from_millis(20)).await;
    let count = taken(&s);
    assert_eq!(
        s.claim_key("short", "o2", lease).await.unwrap(),
        KeyClaim::Claimed { owner: "o2".into(), lease_ms: lease }
    );
    assert_eq!(taken(&s) - count, 1);
    assert_eq!(stored(&s, "short").await.unwrap().0.as_deref(), Some("o2"));
}

/// Polls `call` until it waits for a lock the backend of pid `other` holds (it must not end first).
async fn until_blocked<F>(db: &tokio_postgres::Client, other: i32, mut call: std::pin::Pin<&mut F>)
where
    F: std::future::Future,
    F::Output: std::fmt::Debug,
{
    let waiting = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))";
    for _ in 0..500 {
        tokio::select! {
            r = &mut call => panic!("the call did not wait: {r:?}"),
            () = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
        if db.query_one(waiting, &[&other]).await.unwrap().get::<_, i64>(0) > 0 {
            return;
        }
    }
    panic!("the call does not wait");
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn claim_of_a_key_inserted_meanwhile_is_the_transactions() {
    let (s, db) = (store().await, connect().await);
    // Another call's insert, not committed yet: the statement does not see it, and its insert
    // waits for it.
    let mut other = connect().await;
    let other_pid: i32 = other.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    let tx = other.transaction().await.unwrap();
    let sql = format!(
        "INSERT INTO {}.idem (ns, key, owner, result, exp) VALUES ($1, $2, 'o1', NULL, $3)",
        s.schema
    );
    let exp = now(&s).await + 600_000;
    tx.execute(&sql, &[&s.ns.as_bytes(), &"raced".as_bytes(), &exp]).await.unwrap();
    let count = taken(&s);
    let claim = s.claim_key("raced", "o2", 30_000);
    tokio::pin!(claim);
    until_blocked(&db, other_pid, claim.as_mut()).await;
    tx.commit().await.unwrap();
    let got = claim.await.unwrap();
    assert!(matches!(got, KeyClaim::Pending { remaining_ms } if remaining_ms > 500_000), "{got:?}");
    assert_eq!(taken(&s), count, "the transaction's");
    assert_eq!(stored(&s, "raced").await.unwrap().0.as_deref(), Some("o1"));
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn complete_and_release_fast_statements_decide_as_the_rule() {
    let (s, db) = (store().await, connect().await);
    let (ttl, json) = (60_000u64, "{\"done\":true}");
    for owner in ["o1", "o2"] {
        for (what, before) in starts(now(&s).await) {
            // A completion.
            let key = format!("complete {what} by {owner}");
            if let Some(row) = &before {
                put_row(&s, &db, &key, row).await;
            }
            let (count, t0) = (taken(&s), now(&s).await);
            let done = s.complete_key(&key, owner, json, ttl).await.unwrap();
            let t1 = now(&s).await;
            assert_eq!(taken(&s) - count, 1, "{key}: taken");
            let key_of = before.as_ref().and_then(rule_key);
            let (r0, r1) = (rule::complete(key_of, owner, ttl, t0), rule::complete(key_of, owner, ttl, t1));
            assert_eq!(done, r0.is_some(), "{key}");
            assert_eq!(r0.is_some(), r1.is_some(), "{key}: the rule changed between {t0} and {t1}");
            let after = stored(&s, &key).await;
            match (r0, r1) {
                (Some(e0), Some(e1)) => {
                    let (owner, result, exp) = after.unwrap();
                    assert_eq!((owner, result.as_deref()), (None, Some(json)), "{key}: done");
                    assert!((e0..=e1).contains(&exp), "{key}: {exp} not in {e0}..={e1}");
                }
                _ => assert!(unchanged(&after, &before, t1), "{key}: nothing written: {after:?}"),
            }
            // A release.
            let key = format!("release {what} by {owner}");
            if let Some(row) = &before {
                put_row(&s, &db, &key, row).await;
            }
            let (count, t0) = (taken(&s), now(&s).await);
            let freed = s.release_key(&key, owner).await.unwrap();
            let t1 = now(&s).await;
            assert_eq!(taken(&s) - count, 1, "{key}: taken");
            let (r0, r1) = (rule::release(key_of, owner, t0), rule::release(key_of, owner, t1));
            assert_eq!((freed, freed), (r0, r1), "{key}");
            let after = stored(&s, &key).await;
            if freed {
                assert_eq!(after, None, "{key}: deleted");
            } else {
                assert!(unchanged(&after, &before, t1), "{key}: nothing written: {after:?}");
            }
        }
    }
    // Expired by time passing (a lease of 1 ms): its owner no longer holds it.
    for key in ["late complete", "late release"] {
        assert!(matches!(s.claim_key(key, "o1", 1).await.unwrap(), KeyClaim::Claimed { .. }));
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let count = taken(&s);
    assert!(!s.complete_key("late complete", "o1", json, ttl).await.unwrap());
    assert!(!s.release_key("late release", "o1").await.unwrap());
    assert_eq!(taken(&s) - count, 2);
    for key in ["late complete", "late release"] {
        // Its row as it was (or purged: expired).
        let after = stored(&s, key).await.map(|r| (r.0, r.1));
        let kept = after == Some((Some("o1".into()), None));
        assert!(after.is_none() || kept, "{key}: {after:?}");
    }
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn completion_and_release_after_a_change_they_waited_for_decide_on_the_row_changed() {
    let (s, db) = (store().await, connect().await);
    for complete in [true, false] {
        let key = if complete { "waits to complete" } else { "waits to release" };
        assert!(matches!(s.claim_key(key, "o1", 60_000).await.unwrap(), KeyClaim::Claimed { .. }));
        // Another call's change of the row (the key now o2's), not committed yet.
        let mut other = connect().await;
        let other_pid: i32 = other.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
        let tx = other.transaction().await.unwrap();
        let sql = format!("UPDATE {}.idem SET owner = 'o2' WHERE ns = $1 AND key = $2", s.schema);
        assert_eq!(tx.execute(&sql, &[&s.ns.as_bytes(), &key.as_bytes()]).await.unwrap(), 1);
        let count = taken(&s);
        let call = async {
            if complete {
                s.complete_key(key, "o1", "1", 60_000).await.unwrap()
            } else {
                s.release_key(key, "o1").await.unwrap()
            }
        };
        tokio::pin!(call);
        until_blocked(&db, other_pid, call.as_mut()).await;
        tx.commit().await.unwrap();
        assert!(!call.await, "{key}: o1 no longer holds it");
        assert_eq!(taken(&s) - count, 1, "{key}: by the fast statement");
        let row = stored(&s, key).await.unwrap();
        assert_eq!((row.0.as_deref(), row.1), (Some("o2"), None), "{key}: o2's, as it was changed");
    }
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn claims_started_together_take_a_key_once() {
    let (s, db) = (store().await, connect().await);
    // Rounds of a new key, of an expired one (its row there, unless a purge took it) and of a row
    // that is no key (neither owner nor result, not expired: no purge takes it).
    for (round, kind) in (0..4).flat_map(|r| [(r, "new"), (r, "expired"), (r, "neither")]) {
        let key = format!("{kind}{round}");
        if kind == "expired" {
            assert!(matches!(s.claim_key(&key, "old", 1).await.unwrap(), KeyClaim::Claimed { .. }));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if kind == "neither" {
            put_row(&s, &db, &key, &(None, None, now(&s).await + 600_000)).await;
        }
        let key = key.as_str();
        warm(&s, 8).await;
        let barrier = tokio::sync::Barrier::new(8);
        let calls = (0..8).map(|i| {
            let barrier = &barrier;
            let s = &s;
            async move {
                barrier.wait().await;
                (format!("o{i}"), s.claim_key(key, &format!("o{i}"), 60_000).await.unwrap())
            }
        });
        let got = futures_util::future::join_all(calls).await;
        let claimed: Vec<&String> =
            got.iter().filter(|(_, c)| matches!(c, KeyClaim::Claimed { .. })).map(|(o, _)| o).collect();
        assert_eq!(claimed.len(), 1, "{key}: claimed once: {got:?}");
        assert!(
            got.iter().all(|(_, c)| matches!(c, KeyClaim::Claimed { .. } | KeyClaim::Pending { .. })),
            "{key}: the others pending: {got:?}"
        );
        assert_eq!(stored(&s, key).await.unwrap().0.as_ref(), Some(claimed[0]), "{key}: its owner");
    }
}

/// The next notification heard within `wait` for a name of prefix `ns` (the channel is the
/// schema's: the other tests' stores send on it too): its payload.
async fn next_for(
    heard: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    ns: &str,
    wait: Duration,
) -> Option<String> {
    let ours = async {
        loop {
            let m = heard.recv().await?;
            if matches!(notify::parse(&m), Some(Release::One { ns: n, .. }) if n == ns) {
                return Some(m);
            }
        }
    };
    tokio::time::timeout(wait, ours).await.ok().flatten()
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn fast_completion_and_release_wake_the_keys_waiters() {
    let s = store().await;
    // A listener of releases, for what is sent: the payload of `Ctx::notify` on the schema's channel.
    let (_db, mut heard) = listen(&s).await;
    // The store's own waiter (as `claimKey` with a wait takes it), once its listener is up.
    let subscribe = |key: &'static str| {
        let s = &s;
        async move {
            for _ in 0..500 {
                if let Some(sub) = s.subscribe(Topic::Key, key) {
                    return sub;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("the store's listener is not up")
        }
    };
    let within = Duration::from_secs(10);
    for (key, complete) in [("to complete", true), ("to release", false)] {
        assert!(matches!(s.claim_key(key, "o1", 60_000).await.unwrap(), KeyClaim::Claimed { .. }));
        let mut waiter = subscribe(key).await;
        // Refused (not the owner): nothing sent.
        let count = taken(&s);
        let refused = if complete {
            s.complete_key(key, "o2", "1", 60_000).await.unwrap()
        } else {
            s.release_key(key, "o2").await.unwrap()
        };
        assert!(!refused, "{key}");
        let done = if complete {
            s.complete_key(key, "o1", "1", 60_000).await.unwrap()
        } else {
            s.release_key(key, "o1").await.unwrap()
        };
        assert!(done, "{key}");
        assert_eq!(taken(&s) - count, 2, "{key}: both by the fast statement");
        tokio::time::timeout(within, waiter.released()).await.expect("the waiter woken");
        let payload = next_for(&mut heard, &s.ns, within).await.expect("sent");
        assert_eq!(payload, notify::payload(Topic::Key, &s.ns, key));
        // Only the one that wrote sent it.
        let more = next_for(&mut heard, &s.ns, Duration::from_millis(200)).await;
        assert_eq!(more, None, "{key}");
    }
}
