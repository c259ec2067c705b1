//! The calls that only read (`read!`) run no transaction: no `BEGIN`, no `COMMIT`, each of their
//! statements committed by itself (see `read!` for why the answers are the same). Each is shown
//! answering what the writes before it left, with the store's count of transactions begun
//! unchanged; a write beside them moves that count (so the count is read at all). Needs
//! FLOWGUARD_TEST_POSTGRES_URL (see `scripts/postgres.mjs`).

use std::sync::atomic::Ordering;

use super::{fast_tests::store_with, Postgres, PostgresOptions};
use crate::catalog::{CatalogBackend, Kind};
use crate::limiter::{LimiterBackend, Rule};
use crate::lock::LockBackend;
use crate::semaphore::SemaphoreBackend;
use crate::state::{Expiry, StateBackend};
use crate::tracker::{BatchClaim, ItemStatus, ListFilter, ListQuery, TrackerBackend};

fn begun(s: &Postgres) -> u64 {
    s.transactions.load(Ordering::Relaxed)
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn reads_run_no_transaction() {
    let url = std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL");
    let s = store_with(PostgresOptions { url, ..Default::default() }, "read").await;

    // The writes: each by its transaction or its fast statement.
    let owner = crate::token::new_token();
    let ids: Vec<String> = vec!["a".into(), "b".into()];
    let before = begun(&s);
    let claim = BatchClaim {
        ids: &ids,
        owner: &owner,
        lease_ms: 60_000,
        reclaim_completed: false,
        retention_ms: 3_600_000,
        max_attempts: None,
        note: None,
    };
    s.claim_batch("g", claim).await.unwrap();
    assert!(begun(&s) > before, "a claimBatch runs a transaction (the count is read)");
    s.set("k", "{\"v\":1}", Expiry::In(60_000), false).await.unwrap().unwrap();
    s.try_acquire("L", &crate::token::new_token(), 60_000, Some("lab")).await.unwrap();
    s.take("R", Rule { interval_us: 1_000_000, burst: 5 }, 1, 0).await.unwrap();
    s.try_acquire_permit("S", &crate::token::new_token(), 2, None, 60_000, Some("p")).await.unwrap();

    let before = begun(&s);
    let items = s.read("g", &ids).await.unwrap();
    assert!(items.iter().all(|i| i.status == ItemStatus::InProgress), "{items:?}");
    let page =
        s.list("g", ListQuery { filter: ListFilter::All, offset: 0, limit: 10 }, 3_600_000).await.unwrap();
    assert_eq!((page.counts.in_progress, page.items.len()), (2, 2), "{page:?}");
    let values = s.get(&["k".into(), "absent".into()]).await.unwrap();
    assert_eq!(values[0].as_ref().map(|v| v.json.as_str()), Some("{\"v\":1}"));
    assert!(values[1].is_none());
    let lock = s.inspect("L").await.unwrap();
    assert!(lock.locked && lock.holder.as_deref() == Some("lab"), "{lock:?}");
    let limiter = s.inspect_limiter("R").await.unwrap();
    assert!(limiter.tat_us.is_some_and(|t| t > limiter.now_us), "{limiter:?}");
    let sem = s.inspect_semaphore("S").await.unwrap();
    assert_eq!(sem.holders.len(), 1, "{sem:?}");
    let groups = s.list_names(Kind::Groups, None, 100).await.unwrap();
    assert!(!groups.entries.is_empty(), "{groups:?}");
    assert_eq!(begun(&s), before, "the reads began no transaction");
}

/// A read of one id (`getItem`) runs its own statement (`tracker::LOAD_ONE`, the record and the
/// time in one); a read of several runs `tracker::LOAD` and the clock. Each id of every kind of
/// record, and of none, read alone equals the same id read beside another.
#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn one_id_reads_as_many_do() {
    use crate::tracker::{ItemOp, TrackerBackend};
    let url = std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL");
    // No sweep: the expired record stays until a write of the table (none after the first).
    let opts = PostgresOptions { url, sweep_interval_ms: Some(0), ..Default::default() };
    let s = store_with(opts, "read-one").await;
    let owner = crate::token::new_token();
    let claim = |id: &str, lease_ms: u64| ItemOp::Claim {
        id: id.into(),
        owner: owner.clone(),
        lease_ms,
        reclaim_completed: false,
        max_attempts: Some(3),
        note: Some("n".into()),
    };
    let hour = 3_600_000;
    let ops = [
        claim("live", 60_000),
        claim("abandoned", 1),
        claim("done", 60_000),
        claim("failed", 60_000),
        claim("gone", 60_000),
        ItemOp::Complete {
            id: "done".into(),
            owner: Some(owner.clone()),
            keep_ms: hour,
            result: Some("[1]".into()),
        },
        ItemOp::Fail { id: "failed".into(), owner: Some(owner.clone()), error: "boom".into(), keep_ms: hour },
        ItemOp::Complete { id: "gone".into(), owner: Some(owner.clone()), keep_ms: 1, result: None },
    ];
    let done = s.apply("g", &ops, hour).await.unwrap();
    assert_eq!(done.len(), ops.len());
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let want = [
        ("live", ItemStatus::InProgress),
        ("abandoned", ItemStatus::Abandoned),
        ("done", ItemStatus::Completed),
        ("failed", ItemStatus::Failed),
        ("gone", ItemStatus::None),
        ("never", ItemStatus::None),
    ];
    for (id, status) in want {
        let alone = s.read("g", &[id.to_string()]).await.unwrap();
        let beside = s.read("g", &[id.to_string(), "other".to_string()]).await.unwrap();
        assert_eq!(alone.len(), 1);
        assert_eq!(alone[0].status, status, "{id}: {alone:?}");
        assert_eq!(alone[0], beside[0], "{id}");
    }
}
