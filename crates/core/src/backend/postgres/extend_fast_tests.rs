//! The extensions' fast statements (`lock::EXTEND_FAST`, `semaphore_fast::EXTEND`): an extension
//! of the owner's live lease is shown taken (the store's count of decided fast statements goes up)
//! and its new lease end read back; every refusal is shown decided by the transaction, as the rule
//! answers it. Each statement, and the releases' (`lock::RELEASE_FAST`, `semaphore_fast::RELEASE`),
//! reads the time after it holds the row's lock: an extension or release that waited for another
//! call's lock past the lease's end is refused. Needs
//! FLOWGUARD_TEST_POSTGRES_URL (see `scripts/postgres.mjs`).

use std::time::{Duration, Instant};

use super::fast_tests::{store_with, taken};
use super::{Postgres, PostgresOptions};
use crate::lock::{ExtendResult, LockBackend, Refusal};
use crate::semaphore::SemaphoreBackend;

/// A lock's row and a semaphore name's row, to hold `FOR UPDATE`.
const LOCK_ROW: &str = "SELECT 1 FROM {s}.locks WHERE ns = $1 AND name = $2 FOR UPDATE";
const SEM_ROW: &str = "SELECT 1 FROM {s}.sems WHERE ns = $1 AND name = $2 FOR UPDATE";
/// A name's permits' rows (the test's name has one).
const PERMIT_ROWS: &str = "SELECT 1 FROM {s}.sem_holders WHERE ns = $1 AND name = $2 FOR UPDATE";

fn url() -> String {
    std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL")
}

async fn store() -> Postgres {
    store_with(PostgresOptions { url: url(), ..Default::default() }, "xfast").await
}

/// A lock's extension, asserted taken by the fast statement (`fast`) or decided by the
/// transaction.
async fn extend_lock(s: &Postgres, name: &str, owner: &str, lease_ms: u64, fast: bool) -> ExtendResult {
    let count = taken(s);
    let r = s.extend(name, owner, lease_ms).await.unwrap();
    assert_eq!(taken(s) - count, u64::from(fast), "{name} {owner}: fast {fast}: {r:?}");
    r
}

/// A permit's extension, as [`extend_lock`].
async fn extend_permit(s: &Postgres, name: &str, owner: &str, lease_ms: u64, fast: bool) -> ExtendResult {
    let count = taken(s);
    let r = s.extend_permit(name, owner, lease_ms).await.unwrap();
    assert_eq!(taken(s) - count, u64::from(fast), "{name} {owner}: fast {fast}: {r:?}");
    r
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn lock_extensions_as_the_rule_answers() {
    let s = store().await;
    let (o1, o2) = (crate::token::new_token(), crate::token::new_token());
    assert!(s.try_acquire("L", &o1, 60_000, Some("lab")).await.unwrap().acquired);
    // The owner's live lease: extended by the statement, to the lease given after now.
    let r = extend_lock(&s, "L", &o1, 120_000, true).await;
    assert_eq!(r, ExtendResult { extended: true, remaining_ms: 120_000, reason: None });
    let info = s.inspect("L").await.unwrap();
    assert!(info.locked && (110_000..=120_000).contains(&info.remaining_ms), "{info:?}");
    assert_eq!(info.holder.as_deref(), Some("lab"));
    // Another owner: the transaction's refusal, with the holder's time left.
    let r = extend_lock(&s, "L", &o2, 120_000, false).await;
    assert!(!r.extended && r.reason == Some(Refusal::NotOwner), "{r:?}");
    assert!((110_000..=120_000).contains(&r.remaining_ms), "{r:?}");
    // After the release, and on a name never taken: not held.
    assert!(s.release("L", &o1).await.unwrap().released);
    let r = extend_lock(&s, "L", &o1, 1_000, false).await;
    assert_eq!(r, ExtendResult { extended: false, remaining_ms: 0, reason: Some(Refusal::NotHeld) });
    let r = extend_lock(&s, "never", &o1, 1_000, false).await;
    assert_eq!(r.reason, Some(Refusal::NotHeld));
    assert!(!s.inspect("L").await.unwrap().locked, "a refused extension wrote nothing");
    // A lease that ended: not held, and not taken back.
    assert!(s.try_acquire("E", &o1, 1, None).await.unwrap().acquired);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let r = extend_lock(&s, "E", &o1, 60_000, false).await;
    assert_eq!(r.reason, Some(Refusal::NotHeld), "{r:?}");
    assert!(!s.inspect("E").await.unwrap().locked);
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn permit_extensions_as_the_rule_answers() {
    let s = store().await;
    let (o1, o2) = (crate::token::new_token(), crate::token::new_token());
    let a = s.try_acquire_permit("S", &o1, 2, None, 60_000, Some("p")).await.unwrap();
    assert!(a.acquired);
    let b = s.try_acquire_permit("S", &o2, 2, None, 30_000, None).await.unwrap();
    assert!(b.acquired);
    let r = extend_permit(&s, "S", &o1, 120_000, true).await;
    assert_eq!(r, ExtendResult { extended: true, remaining_ms: 120_000, reason: None });
    let info = s.inspect_semaphore("S").await.unwrap();
    let mine = info.holders.iter().find(|h| h.fence == a.fence).expect("o1 holds");
    assert!((110_000..=120_000).contains(&mine.remaining_ms), "{info:?}");
    let other = info.holders.iter().find(|h| h.fence == b.fence).expect("o2 holds");
    assert!(other.remaining_ms <= 30_000, "the other permit is unchanged: {info:?}");
    // One that holds no permit, a name never used, a lease that ended: the transaction's refusals.
    let stranger = crate::token::new_token();
    let r = extend_permit(&s, "S", &stranger, 1_000, false).await;
    assert_eq!(r, ExtendResult { extended: false, remaining_ms: 0, reason: Some(Refusal::NotHeld) });
    assert_eq!(extend_permit(&s, "never", &o1, 1_000, false).await.reason, Some(Refusal::NotHeld));
    assert!(s.try_acquire_permit("E", &o1, 1, None, 1, None).await.unwrap().acquired);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(extend_permit(&s, "E", &o1, 60_000, false).await.reason, Some(Refusal::NotHeld));
    assert!(s.inspect_semaphore("E").await.unwrap().holders.is_empty());
    // After its release: not held.
    assert!(s.release_permit("S", &o1).await.unwrap().released);
    assert_eq!(extend_permit(&s, "S", &o1, 1_000, false).await.reason, Some(Refusal::NotHeld));
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
    let s = std::sync::Arc::new(store().await);
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
/// (`lock::RELEASE_FAST`, `semaphore_fast::RELEASE`): a release that waited for the name's lock
/// past its lease's end is refused (the lease ended: not held), as the transaction refuses it.
#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn a_release_reads_the_time_after_the_lock() {
    let s = std::sync::Arc::new(store().await);
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
