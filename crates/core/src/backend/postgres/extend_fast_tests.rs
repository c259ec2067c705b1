//! The extensions' fast statements (`lock::EXTEND_FAST`, `semaphore_fast::EXTEND`): an extension
//! of the owner's live lease is shown taken (the store's count of decided fast statements goes up)
//! and its new lease end read back; every refusal is shown decided by the transaction, as the rule
//! answers it. That each reads the time after its row's lock: `time_after_lock_tests.rs`. Needs
//! FLOWGUARD_TEST_POSTGRES_URL (see `scripts/postgres.mjs`).

use std::time::Duration;

use super::fast_tests::{store_with, taken};
use super::{Postgres, PostgresOptions};
use crate::lock::{ExtendResult, LockBackend, Refusal};
use crate::semaphore::SemaphoreBackend;

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
