//! The fast statements that check a lease read the time after they hold the rows they decide
//! from, as the transactions do (`FOR UPDATE`, then the clock): a call that waited for another
//! call's lock past its lease's end is refused, as the rule refuses it at that time. Each test
//! holds the row in a transaction of its own, starts the call, waits until PostgreSQL shows the
//! call blocked by that transaction (`pg_blocking_pids`: the barrier), lets the lease end, and
//! commits. With the time read before the lock, the lock's and the permit's releases and the
//! queue's ack answered done (each test failed so); the extensions are held to it as well. Needs
//! FLOWGUARD_TEST_POSTGRES_URL (see `scripts/postgres.mjs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fast_tests::{store_with, taken};
use super::{Postgres, PostgresOptions};
use crate::lock::{ExtendResult, LockBackend, Refusal};
use crate::queue::{Debounce, QueueBackend, SettleAction, SettleOutcome, ShardRef};
use crate::semaphore::SemaphoreBackend;

/// A lock's row and a semaphore name's row, to hold `FOR UPDATE`.
const LOCK_ROW: &str = "SELECT 1 FROM {s}.locks WHERE ns = $1 AND name = $2 FOR UPDATE";
const SEM_ROW: &str = "SELECT 1 FROM {s}.sems WHERE ns = $1 AND name = $2 FOR UPDATE";
/// A name's permits' rows (the test's name has one); a queue's ids' rows (the test's has one).
const PERMIT_ROWS: &str = "SELECT 1 FROM {s}.sem_holders WHERE ns = $1 AND name = $2 FOR UPDATE";
const QUEUE_ROWS: &str = "SELECT 1 FROM {s}.q_ids WHERE ns = $1 AND queue = $2 FOR UPDATE";

fn url() -> String {
    std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL")
}

async fn store() -> Arc<Postgres> {
    Arc::new(store_with(PostgresOptions { url: url(), ..Default::default() }, "tlock").await)
}

/// Holds the row `sql` selects `FOR UPDATE` (the row the call locks first) in a transaction of
/// its own, starts `call` (an extension or a release, its answer as an extension's), waits until
/// PostgreSQL shows it blocked by that transaction (the barrier), lets the lease of `lease_ms`
/// taken at `taken_at` (or later) end, then commits: the call, whose lease had not ended when it
/// began, must read the time after the lock and refuse.
async fn call_after_a_wait<F>(
    s: &Postgres,
    sql: &str,
    name: &str,
    (taken_at, lease_ms): (Instant, u64),
    call: F,
) -> ExtendResult
where
    F: std::future::Future<Output = ExtendResult> + Send + 'static,
{
    let (mut db, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let tx = db.transaction().await.unwrap();
    let held = tx.query(&sql.replace("{s}", &s.schema), &[&s.ns.as_bytes(), &name.as_bytes()]).await.unwrap();
    assert_eq!(held.len(), 1, "the row is held");
    let pid: i32 = tx.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    let waiting = tokio::spawn(call);
    // The barrier: the extension is waiting for this transaction's lock.
    let blocked = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))";
    let mut seen = false;
    for _ in 0..500 {
        if tx.query_one(blocked, &[&pid]).await.unwrap().get::<_, i64>(0) > 0 {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(seen, "the call never waited for the lock");
    let lease = Duration::from_millis(lease_ms);
    assert!(taken_at.elapsed() < lease, "the lease ended before the call waited: nothing shown");
    tokio::time::sleep(lease + Duration::from_millis(50) - taken_at.elapsed()).await;
    tx.commit().await.unwrap();
    waiting.await.unwrap()
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn an_extension_reads_the_time_after_the_lock() {
    let s = store().await;
    let o = crate::token::new_token();
    let lease = 1_000;
    let at = Instant::now();
    assert!(s.try_acquire("W", &o, lease, None).await.unwrap().acquired);
    let (s2, o2) = (s.clone(), o.clone());
    let count = taken(&s);
    let r = call_after_a_wait(&s, LOCK_ROW, "W", (at, lease), async move {
        s2.extend("W", &o2, 60_000).await.unwrap()
    })
    .await;
    assert_eq!(r.reason, Some(Refusal::NotHeld), "the lease ended while the extension waited: {r:?}");
    assert_eq!(taken(&s), count, "the fast statement did not extend it");
    assert!(!s.inspect("W").await.unwrap().locked);

    let at = Instant::now();
    assert!(s.try_acquire_permit("P", &o, 1, None, lease, None).await.unwrap().acquired);
    let (s2, o2) = (s.clone(), o.clone());
    let count = taken(&s);
    let r = call_after_a_wait(&s, SEM_ROW, "P", (at, lease), async move {
        s2.extend_permit("P", &o2, 60_000).await.unwrap()
    })
    .await;
    assert_eq!(r.reason, Some(Refusal::NotHeld), "the permit's lease ended while it waited: {r:?}");
    assert_eq!(taken(&s), count);
    assert!(s.inspect_semaphore("P").await.unwrap().holders.is_empty());
}

/// As [`an_extension_reads_the_time_after_the_lock`], for the releases by owner
/// (`lock::RELEASE_FAST`, `semaphore_fast::RELEASE`): a release that waited for the row's lock
/// past its lease's end is refused (the lease ended: not held), as the transaction refuses it.
#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn a_release_reads_the_time_after_the_lock() {
    let s = store().await;
    let o = crate::token::new_token();
    let lease = 1_000;
    let at = Instant::now();
    assert!(s.try_acquire("W", &o, lease, None).await.unwrap().acquired);
    let (s2, o2) = (s.clone(), o.clone());
    let r = call_after_a_wait(&s, LOCK_ROW, "W", (at, lease), async move {
        let r = s2.release("W", &o2).await.unwrap();
        ExtendResult { extended: r.released, remaining_ms: 0, reason: r.reason }
    })
    .await;
    assert_eq!(r.reason, Some(Refusal::NotHeld), "the lease ended while the release waited: {r:?}");

    let at = Instant::now();
    assert!(s.try_acquire_permit("P", &o, 1, None, lease, None).await.unwrap().acquired);
    let (s2, o2) = (s.clone(), o.clone());
    let r = call_after_a_wait(&s, PERMIT_ROWS, "P", (at, lease), async move {
        let r = s2.release_permit("P", &o2).await.unwrap();
        ExtendResult { extended: r.released, remaining_ms: 0, reason: r.reason }
    })
    .await;
    assert_eq!(r.reason, Some(Refusal::NotHeld), "the permit's lease ended while the release waited: {r:?}");
}

/// The queue's ack (`queue_fast::ACK`): an ack that waited for its id's row past its claim's
/// deadline is refused (`Expired`), as the transaction refuses it.
#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn an_ack_reads_the_time_after_the_lock() {
    let s = store().await;
    let at = ShardRef { queue: "Q", shard: 0, shards: 1 };
    let visibility = 1_000;
    s.enqueue(at, &["w".to_string()], 0, Debounce::Off).await.unwrap();
    let taken_at = Instant::now();
    let read = s.claim(at, "reader", 1, visibility, None).await.unwrap();
    assert_eq!(read.items.len(), 1);
    let s2 = s.clone();
    let r = call_after_a_wait(&s, QUEUE_ROWS, "Q", (taken_at, visibility), async move {
        let mut r = s2.settle(at, "reader", &["w".to_string()], SettleAction::Ack).await.unwrap();
        // Told as an extension's answer: refused (`NotHeld`) when the ack answered `Expired`.
        let (outcome, _) = r.remove(0);
        let reason = (outcome == SettleOutcome::Expired).then_some(Refusal::NotHeld);
        ExtendResult { extended: reason.is_none(), remaining_ms: 0, reason }
    })
    .await;
    assert_eq!(r.reason, Some(Refusal::NotHeld), "the claim ended while the ack waited: not Expired");
}
