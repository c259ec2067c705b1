//! The fast statements (`fast`): each is shown taken (the store's count of decided fast
//! statements goes up) and its result, and the record it wrote, equal to what the rule writes at
//! the statement's time (what the transaction writes); each case it leaves is shown left to the
//! transaction, which decides it. Needs FLOWGUARD_TEST_POSTGRES_URL (see `scripts/postgres.mjs`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_postgres::AsyncMessage;

use super::{tracker, transaction, Ctx, Postgres, PostgresOptions, Sql};
use crate::lock::{Attempt, LockBackend, Refusal};
use crate::rules::tracker::{decide, fresh, kept, write, Decision};
use crate::tracker::{ItemOp, ItemStatus, OpResult, Outcome, Record, TrackerBackend, NEVER};
use crate::{Client, OpenOptions};

const RETENTION: u64 = 3_600_000;

fn url() -> String {
    std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL")
}

/// A store on a prefix of its own (the client made the schema).
async fn store() -> Postgres {
    let opts = PostgresOptions { url: url(), ..Default::default() };
    let prefix = format!("fast{}:", crate::token::new_token());
    let client = Client::open(OpenOptions {
        postgres: Some(opts.clone()),
        prefix: Some(prefix),
        ..Default::default()
    })
    .await
    .unwrap();
    Postgres::open(&opts, client.config()).await.unwrap()
}

async fn load(c: &Ctx<'_, '_>, group: &str, id: &str) -> Sql<Option<Record>> {
    let ids: Vec<&[u8]> = vec![id.as_bytes()];
    let rows = c.query(tracker::LOAD, &[&c.ns(), &group.as_bytes(), &ids]).await?;
    rows.first().map(|r| tracker::from_row(r).map(|(_, rec)| rec)).transpose()
}

async fn record(store: &Postgres, group: &str, id: &str) -> Option<Record> {
    async fn read(store: &Postgres, group: &str, id: &str) -> crate::error::Result<Option<Record>> {
        transaction!(store, |c| load(&c, group, id))
    }
    read(store, group, id).await.unwrap()
}

fn taken(store: &Postgres) -> u64 {
    store.fast_taken.load(Ordering::Relaxed)
}

/// Applies `op`; when `fast`, asserts its fast statement decided it and wrote what the rule
/// writes at its time (the record's update time), else that the transaction decided it.
async fn apply(store: &Postgres, group: &str, op: ItemOp, fast: bool) -> OpResult {
    let id = op.id().to_string();
    let before = record(store, group, &id).await;
    let count = taken(store);
    let r = store.apply(group, std::slice::from_ref(&op), RETENTION).await.unwrap().remove(0);
    assert_eq!(taken(store) - count, u64::from(fast), "{op:?} on {before:?}: fast statement taken");
    if fast {
        let after = record(store, group, &id).await.expect("a record");
        let now = after.u;
        let before = before.filter(|r| kept(r.x, now));
        assert!(matches!(decide(&op, before.as_ref(), now), Decision::Take | Decision::Finish));
        let mut expected = before.unwrap_or_else(|| fresh(now));
        write(&op, &mut expected, now, RETENTION);
        assert_eq!(after, expected, "{op:?}: the record written");
        assert_eq!(r.item, expected.to_state(&id, now), "{op:?}: the result");
        assert_eq!(r.outcome, Outcome::Done);
    }
    r
}

fn claim(id: &str, lease_ms: u64, max_attempts: Option<u32>, reclaim: bool) -> ItemOp {
    ItemOp::Claim {
        id: id.into(),
        owner: crate::token::new_token(),
        lease_ms,
        reclaim_completed: reclaim,
        max_attempts,
        note: Some("n\"ote".into()),
    }
}

fn owner(r: &OpResult) -> Option<String> {
    r.owner.clone()
}

fn complete(id: &str, owner: Option<String>) -> ItemOp {
    ItemOp::Complete { id: id.into(), owner, keep_ms: 60_000, result: Some("{\"ok\":1}".into()) }
}

fn fail(id: &str, owner: Option<String>) -> ItemOp {
    ItemOp::Fail { id: id.into(), owner, error: "bo\"om ü".into(), keep_ms: 60_000 }
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn tracker_fast_statements_write_what_the_rules_write() {
    let s = store().await;
    let g = "g";
    // A new id; then busy: the transaction refuses it.
    let c = apply(&s, g, claim("a", 60_000, Some(2), false), true).await;
    let busy = apply(&s, g, claim("a", 60_000, None, false), false).await;
    assert_eq!(busy.outcome, Outcome::Busy(ItemStatus::InProgress));
    // Failed at its first attempt (timeline implied), claimed again (stored), dead at maxAttempts.
    apply(&s, g, fail("a", owner(&c)), true).await;
    let c = apply(&s, g, claim("a", 60_000, Some(2), false), true).await;
    apply(&s, g, fail("a", owner(&c)), true).await;
    let dead = apply(&s, g, claim("a", 60_000, None, true), false).await;
    assert_eq!(dead.outcome, Outcome::Busy(ItemStatus::Dead));
    // Dead at the first attempt: its implied timeline is stored with the death.
    let c = apply(&s, g, claim("b", 60_000, Some(1), false), true).await;
    apply(&s, g, fail("b", owner(&c)), true).await;
    // Completed by its owner; another owner is refused by the transaction; re-claimed with
    // reclaimCompleted only; completed without an owner.
    let c = apply(&s, g, claim("c", 60_000, None, false), true).await;
    let refused = apply(&s, g, complete("c", Some("other".into())), false).await;
    assert!(matches!(refused.outcome, Outcome::Refused(_)));
    apply(&s, g, complete("c", owner(&c)), true).await;
    let done = apply(&s, g, claim("c", 60_000, None, false), false).await;
    assert_eq!(done.outcome, Outcome::Busy(ItemStatus::Completed));
    apply(&s, g, claim("c", 60_000, None, true), true).await;
    apply(&s, g, complete("c", None), true).await;
    // Abandoned (its lease ended) and claimed again, past the timeline's 20 entries.
    for _ in 0..12 {
        apply(&s, g, claim("d", 1, None, false), true).await;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let d = record(&s, g, "d").await.unwrap();
    assert_eq!((d.a, d.t.len()), (12, 20));
    // A completion of an abandoned item by its owner.
    let c = apply(&s, g, claim("e", 1, None, false), true).await;
    tokio::time::sleep(Duration::from_millis(3)).await;
    apply(&s, g, complete("e", owner(&c)), true).await;
    // An expired record counts as none: a fresh one is written.
    s.apply(g, &[claim("f", 1, None, false)], 0).await.unwrap();
    tokio::time::sleep(Duration::from_millis(3)).await;
    let f = apply(&s, g, claim("f", 60_000, None, false), true).await;
    assert_eq!(f.item.attempts, 1);
    // A completion with nothing to complete, an unset: the transaction.
    apply(&s, g, complete("none", None), false).await;
    apply(&s, g, ItemOp::Unset { id: "c".into() }, false).await;
    // A completion kept forever.
    let c = apply(&s, g, claim("h", 60_000, None, false), true).await;
    let op = ItemOp::Complete { id: "h".into(), owner: owner(&c), keep_ms: u64::MAX, result: None };
    apply(&s, g, op, true).await;
    assert_eq!(record(&s, g, "h").await.unwrap().x, NEVER);
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn lock_fast_statements_acquire_and_release_as_the_rules_do() {
    let s = store().await;
    // The listener of releases, as a waiter's.
    let (db, mut conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls).await.unwrap();
    let (tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let mut messages = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
    tokio::spawn(async move {
        while let Some(Ok(m)) = messages.next().await {
            if let AsyncMessage::Notification(n) = m {
                let _ = tx.send(n.payload().to_string());
            }
        }
    });
    db.batch_execute(&format!("LISTEN {}", s.schema)).await.unwrap();

    let acquire = |owner: &'static str, lease_ms: u64| {
        let s = &s;
        async move {
            let count = taken(s);
            let a = s.try_acquire("L", owner, lease_ms, Some("lab")).await.unwrap();
            (a, taken(s) - count == 1)
        }
    };
    let granted = |fence, lease_ms| Attempt {
        acquired: true,
        fence,
        remaining_ms: lease_ms,
        holder: Some("lab".into()),
    };
    // The database's clock in µs: the fence floor (`lock::next_fence`).
    let clock_us = {
        let db = &db;
        move || async move {
            let sql = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::int8";
            db.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) as u64
        }
    };
    // A new name: the clock's fence. Held: the transaction refuses.
    let before = clock_us().await;
    let (a, fast) = acquire("o1", 60_000).await;
    assert!(a.fence >= before && a.fence <= clock_us().await, "the clock's fence: {a:?}, {before}");
    assert_eq!((a.clone(), fast), (granted(a.fence, 60_000), true));
    let (held, fast) = acquire("o2", 60_000).await;
    assert!(!held.acquired && !fast && held.fence == a.fence);
    // Released by another owner: the transaction refuses; by its owner: released, announced.
    let count = taken(&s);
    let r = s.release("L", "o2").await.unwrap();
    assert_eq!((r.released, r.reason, taken(&s) - count), (false, Some(Refusal::NotOwner), 0));
    let r = s.release("L", "o1").await.unwrap();
    assert_eq!((r.released, r.reason, taken(&s) - count), (true, None, 1));
    let payload = tokio::time::timeout(Duration::from_secs(30), heard.recv()).await.unwrap().unwrap();
    assert_eq!(payload, super::notify::payload(crate::wakeup::Topic::Lock, &s.ns, "L"));
    // Released: the clock's fence, past the last. Its lease ended: the clock's again.
    let before = clock_us().await;
    let (b, fast) = acquire("o2", 1).await;
    assert!(b.fence > a.fence && b.fence >= before, "{b:?} after {a:?}");
    assert_eq!((b.clone(), fast), (granted(b.fence, 1), true));
    tokio::time::sleep(Duration::from_millis(3)).await;
    // A last fence ahead of the clock (as after a primary whose clock ran ahead): one above it.
    let ahead = (b.fence + 1_000_000_000) as i64;
    let sql = format!("UPDATE {}.locks SET fence = $3 WHERE ns = $1 AND name = $2", s.schema);
    assert_eq!(db.execute(&sql, &[&s.ns.as_bytes(), &"L".as_bytes(), &ahead]).await.unwrap(), 1);
    assert_eq!(acquire("o3", 60_000).await, (granted(ahead as u64 + 1, 60_000), true));
    // A release by an owner whose lease ended, the lock held by another: the transaction refuses.
    let r = s.release("L", "o2").await.unwrap();
    assert_eq!((r.released, r.reason), (false, Some(Refusal::NotOwner)));
}
