//! The Semaphore's fast statement (`semaphore_fast`): a release by its holder is shown taken (the
//! store's count of decided fast statements goes up), announced, and its row gone; a release it
//! leaves is shown decided by the transaction. Acquisitions are the transaction's (the count
//! unchanged): their answers and rows are shown as the rule gives them, and acquisitions started
//! together grant each permit once (a one-statement acquisition that counted the holders of its
//! snapshot failed this). Needs FLOWGUARD_TEST_POSTGRES_URL (see `scripts/postgres.mjs`).

use std::time::Duration;

use super::fast_tests::{listen, store_with, taken, warm};
use super::{Postgres, PostgresOptions};
use crate::lock::Refusal;
use crate::semaphore::{PerKey, PermitAttempt, SemaphoreBackend};

fn url() -> String {
    std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL")
}

async fn store() -> Postgres {
    store_with(PostgresOptions { url: url(), ..Default::default() }, "pfast").await
}

/// An acquisition, shown decided by the transaction.
async fn acquire(
    s: &Postgres,
    name: &str,
    owner: &str,
    permits: u64,
    per_key: Option<PerKey<'_>>,
    lease_ms: u64,
) -> PermitAttempt {
    let count = taken(s);
    let a = s.try_acquire_permit(name, owner, permits, per_key, lease_ms, Some("lab")).await.unwrap();
    assert_eq!(taken(s), count, "{name} {owner}: the transaction's");
    a
}

/// The live holders of `name`: (fence, key), first lease end first.
async fn holders(s: &Postgres, name: &str) -> Vec<(u64, Option<String>)> {
    let info = s.inspect_semaphore(name).await.unwrap();
    info.holders.into_iter().map(|h| (h.fence, h.key)).collect()
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn acquisitions_and_releases_as_the_rules_do() {
    let s = store().await;
    // Two permits: two grants, fences increasing; the third refused, the first lease's end the wait.
    let a = acquire(&s, "S", "o1", 2, None, 60_000).await;
    assert!(a.acquired && a.holders == 1 && a.key_holders == 0 && a.remaining_ms == 60_000, "{a:?}");
    let b = acquire(&s, "S", "o2", 2, None, 30_000).await;
    assert!(b.acquired && b.fence > a.fence && b.holders == 2, "{b:?}");
    let c = acquire(&s, "S", "o3", 2, None, 60_000).await;
    assert!(!c.acquired && c.fence == b.fence && c.holders == 2, "{c:?}");
    assert!((25_000..=30_000).contains(&c.remaining_ms), "the first lease to end: {c:?}");
    assert_eq!(holders(&s, "S").await, vec![(b.fence, None), (a.fence, None)]);
    // Per key: the key's limit refuses, with its own first lease end; another key is granted.
    let k1 = Some(PerKey { key: "k1", limit: 1 });
    let k2 = Some(PerKey { key: "k2", limit: 1 });
    let x = acquire(&s, "K", "o1", 5, k1, 20_000).await;
    assert!(x.acquired && x.holders == 1 && x.key_holders == 1, "{x:?}");
    let y = acquire(&s, "K", "o2", 5, k1, 60_000).await;
    assert!(!y.acquired && y.holders == 1 && y.key_holders == 1, "{y:?}");
    assert!((15_000..=20_000).contains(&y.remaining_ms), "{y:?}");
    let z = acquire(&s, "K", "o3", 5, k2, 60_000).await;
    assert!(z.acquired && z.holders == 2 && z.key_holders == 1 && z.fence > x.fence, "{z:?}");
    assert_eq!(holders(&s, "K").await, vec![(x.fence, Some("k1".into())), (z.fence, Some("k2".into()))]);
    // An ended lease no longer counts, and its row goes.
    let e = acquire(&s, "E", "o1", 1, None, 1).await;
    assert!(e.acquired);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let f = acquire(&s, "E", "o2", 1, None, 60_000).await;
    assert!(f.acquired && f.holders == 1 && f.fence > e.fence, "{f:?}");
    assert_eq!(holders(&s, "E").await, vec![(f.fence, None)]);

    // The listener of releases, as a waiter's.
    let (_db, mut heard) = listen(&s).await;
    // A release by a holder: fast, announced; by one that holds nothing: the transaction's refusal.
    let count = taken(&s);
    let r = s.release_permit("S", "o1").await.unwrap();
    assert_eq!((r.released, r.reason, taken(&s) - count), (true, None, 1));
    let payload = tokio::time::timeout(Duration::from_secs(30), heard.recv()).await.unwrap().unwrap();
    assert_eq!(payload, super::notify::payload(crate::wakeup::Topic::Permit, &s.ns, "S"));
    assert_eq!(holders(&s, "S").await, vec![(b.fence, None)]);
    let r = s.release_permit("S", "o3").await.unwrap();
    assert_eq!((r.released, r.reason, taken(&s) - count), (false, Some(Refusal::NotHeld), 1));
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn acquisitions_started_together_grant_each_permit_once() {
    let s = store().await;
    for round in 0..5 {
        for name in [format!("new{round}"), format!("old{round}")] {
            let mut fences = Vec::new();
            if name.starts_with("old") {
                // A name with a row and one live holder.
                let a = s.try_acquire_permit(&name, "first", 3, None, 60_000, None).await.unwrap();
                assert!(a.acquired);
                fences.push(a.fence);
            }
            let free = 3 - fences.len();
            warm(&s, 8).await;
            let barrier = tokio::sync::Barrier::new(8);
            let calls = (0..8).map(|i| {
                let (s, name, barrier) = (&s, &name, &barrier);
                async move {
                    let owner = format!("o{i}");
                    barrier.wait().await;
                    s.try_acquire_permit(name, &owner, 3, None, 60_000, None).await.unwrap()
                }
            });
            let got = futures_util::future::join_all(calls).await;
            let granted: Vec<u64> = got.iter().filter(|a| a.acquired).map(|a| a.fence).collect();
            assert_eq!(granted.len(), free, "{name}: the free permits, each granted once: {got:?}");
            fences.extend(granted);
            let mut held: Vec<u64> = holders(&s, &name).await.into_iter().map(|h| h.0).collect();
            held.sort_unstable();
            fences.sort_unstable();
            fences.dedup();
            assert_eq!(held, fences, "{name}: the holders are the grants, each fence once");
        }
    }
}
