//! The semantic suite on PostgreSQL, for the patterns the backend has (the Concurrency Lock, Job
//! State, the Item Tracker, the Rate Limiter, the Semaphore), and what only this backend has: its schema's version, the patterns
//! not built yet refused by code. Needs FLOWGUARD_POSTGRES_URL: `node scripts/postgres.mjs --
//! cargo test …` starts a throwaway cluster, sets it, and runs these with `--include-ignored`.
mod common;

use flowguard_core::backend::postgres::PostgresOptions;
use std::str::FromStr;

use flowguard_core::{Client, ErrorCode, OpenOptions};

fn url() -> String {
    std::env::var("FLOWGUARD_POSTGRES_URL")
        .expect("FLOWGUARD_POSTGRES_URL must point at a PostgreSQL database for the PostgreSQL suite")
}

fn target() -> common::Target {
    common::Target::Postgres(url())
}

suite!(@each target(), [#[ignore = "needs a PostgreSQL: set FLOWGUARD_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]],
    claim_is_exclusive_and_completion_sticks,
    failed_items_keep_reason_and_can_be_claimed_again,
    expired_lease_shows_abandoned_and_is_claimable,
    batch_apply_is_ordered_and_reports_each_item,
    claim_batch_matches_claim_rules,
    keep_ms_expires_completed_marks,
    keep_forever_has_no_expiry_until_unset,
    unset_forgets,
    names_with_any_characters_are_distinct,
    bad_input_is_refused_before_writing,
    concurrent_claims_have_one_winner,
    concurrent_claims_of_a_known_item_have_one_winner,
    lock_basics_and_owner_checks,
    lock_expiry_and_fencing,
    lock_wait_gets_it_when_freed_and_never_waits_longer,
    concurrent_lock_sets_have_one_winner,
    lock_bad_input,
    empty_label_reads_back_as_no_label,
    state_values_set_get_increment_delete,
    idempotency_keys_claim_complete_release,
    fences_strictly_increase_under_contention,
    limiter_pause_refuses_takes_until_its_end,
    concurrent_takes_allow_exactly_the_burst,
    concurrent_permits_never_exceed_the_permits
);

/// A client with a prefix of its own, and that prefix (the `ns` of its rows).
async fn opened() -> (Client, String) {
    let c = common::open(target()).await;
    let prefix = c.config().keys.prefix().to_string();
    (c, prefix)
}

/// Two clients (two pools, so two connections) with one prefix.
async fn two_clients() -> (Client, Client) {
    let (a, prefix) = opened().await;
    let b = Client::open(OpenOptions {
        postgres: Some(PostgresOptions { url: url(), ..Default::default() }),
        prefix: Some(prefix),
        ..Default::default()
    })
    .await
    .unwrap();
    (a, b)
}

#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn two_clients_race_for_one_lock() {
    common::runtime().block_on(async {
        for _ in 0..20 {
            let (a, b) = two_clients().await;
            common::two_clients_race_for_one_lock(a, b).await;
        }
    });
}

/// A raw connection to the test database (for what flowguard does not do: age a schema).
async fn raw() -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

fn in_schema(schema: &str) -> OpenOptions {
    OpenOptions {
        postgres: Some(PostgresOptions { url: url(), schema: Some(schema.into()), ..Default::default() }),
        ..Default::default()
    }
}

/// The schema is created on first use at version 1, reused by the next client, and a schema of
/// a newer version is refused with ERR_UNSUPPORTED naming both versions (nothing changed).
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn schema_is_created_versioned_and_a_newer_one_refused() {
    common::runtime().block_on(async {
        let schema = format!("fg_test_{:x}", rand_suffix());
        let c = Client::open(in_schema(&schema)).await.unwrap();
        assert_eq!(c.kind(), "postgres");
        let db = raw().await;
        let v: String = db
            .query_one(&format!("SELECT value FROM {schema}.meta WHERE key = 'version'"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(v, "1");
        // Two clients opening at once both get the schema (the creation is serialized).
        let (x, y) =
            tokio::join!(Client::open(in_schema(&schema)), Client::open(in_schema(&format!("{schema}_b"))));
        x.unwrap();
        y.unwrap();
        db.execute(&format!("UPDATE {schema}.meta SET value = '2' WHERE key = 'version'"), &[])
            .await
            .unwrap();
        let e = Client::open(in_schema(&schema)).await.err().expect("a newer schema is refused");
        assert_eq!(e.code, ErrorCode::Unsupported, "{e}");
        assert!(e.message.contains("version 2") && e.message.contains("version 1"), "{e}");
        let v: String = db
            .query_one(&format!("SELECT value FROM {schema}.meta WHERE key = 'version'"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(v, "2", "nothing was changed");
        for s in [schema.clone(), format!("{schema}_b")] {
            db.execute(&format!("DROP SCHEMA {s} CASCADE"), &[]).await.unwrap();
        }
    });
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        ^ u64::from(std::process::id())
}

/// Bad options are refused before connecting, naming the field and never echoing the URL.
#[test]
fn bad_options_are_refused_by_code() {
    common::runtime().block_on(async {
        let open =
            |pg: PostgresOptions| Client::open(OpenOptions { postgres: Some(pg), ..Default::default() });
        let e = open(PostgresOptions {
            url: "postgres://u:secret@h/db".into(),
            schema: Some("Bad-Name".into()),
            ..Default::default()
        })
        .await
        .err()
        .unwrap();
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("postgres.schema"), "{e}");
        let e = open(PostgresOptions {
            url: "postgres://u:secret@h/db".into(),
            pool_size: Some(0),
            ..Default::default()
        })
        .await
        .err()
        .unwrap();
        assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("postgres.pool_size"), "{e}");
        let e =
            open(PostgresOptions { url: "postgres://u:secret@h:notaport/db".into(), ..Default::default() })
                .await
                .err()
                .unwrap();
        assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("postgres.url"), "{e}");
        assert!(!e.message.contains("secret"), "{e}");
        let e = open(PostgresOptions {
            url: "postgres://u:secret@h/db?sslmode=require".into(),
            ..Default::default()
        })
        .await
        .err()
        .unwrap();
        assert_eq!(e.code, ErrorCode::Unsupported, "{e}");
        assert!(!e.message.contains("secret"), "{e}");
        let e = Client::open(OpenOptions {
            postgres: Some(PostgresOptions { url: "postgres://h/db".into(), ..Default::default() }),
            url: Some("redis://127.0.0.1".into()),
            ..Default::default()
        })
        .await
        .err()
        .unwrap();
        assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("postgres"), "{e}");
        // Nothing listens on port 1: unavailable, within the connect timeout, without the password.
        let e =
            open(PostgresOptions { url: "postgres://u:secret@127.0.0.1:1/db".into(), ..Default::default() })
                .await
                .err()
                .unwrap();
        assert_eq!(e.code, ErrorCode::BackendUnavailable, "{e}");
        assert!(!e.message.contains("secret"), "{e}");
    });
}

/// The patterns not built yet answer ERR_UNSUPPORTED naming the pattern: no silent stub.
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn patterns_not_built_are_refused_by_code() {
    use flowguard_core::catalog::Kind;
    use flowguard_core::queue::EnqueueOptions;
    common::runtime().block_on(async {
        let c = common::open(target()).await;
        let checks = [
            ("Dedup Queue", c.enqueue("q", vec!["a".into()], EnqueueOptions::default()).await.err()),
            ("Dedup Queue", c.list_names(Kind::Queues, None, None).await.err()),
        ];
        for (pattern, e) in checks {
            let e = e.unwrap_or_else(|| panic!("{pattern} answered"));
            assert_eq!(e.code, ErrorCode::Unsupported, "{e}");
            assert!(e.message.contains(pattern), "{e}");
        }
    });
}

/// A row lock held elsewhere (another session's open transaction) bounds a call by the command
/// timeout, as PostgreSQL's statement_timeout: ERR_TIMEOUT, nothing written; the call succeeds
/// once the row is free.
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn a_row_locked_elsewhere_times_out_by_code() {
    use flowguard_core::lock::AcquireOptions;
    common::runtime().block_on(async {
        let (c, prefix) = opened().await;
        let first = c.acquire_lock("busy", AcquireOptions::default()).await.unwrap();
        assert!(c.release_lock("busy", first.owner.as_deref().unwrap()).await.unwrap().released);
        let short = Client::open(OpenOptions {
            postgres: Some(PostgresOptions { url: url(), ..Default::default() }),
            prefix: Some(prefix.clone()),
            command_timeout: Some(std::time::Duration::from_millis(300)),
            ..Default::default()
        })
        .await
        .unwrap();
        let mut db = raw().await;
        let tx = db.transaction().await.unwrap();
        let held = tx
            .query(
                "SELECT 1 FROM flowguard.locks WHERE ns = $1 AND name = $2 FOR UPDATE",
                &[&prefix.as_bytes(), &"busy".as_bytes()],
            )
            .await
            .unwrap();
        assert_eq!(held.len(), 1, "the lock's row is held by the other session");
        let t = std::time::Instant::now();
        let e = short.acquire_lock("busy", AcquireOptions::default()).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::Timeout, "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "bounded by the command timeout");
        tx.rollback().await.unwrap();
        let info = c.get_lock("busy").await.unwrap();
        assert!(!info.locked, "nothing was written");
        assert_eq!(info.fence, first.fence);
        assert!(short.acquire_lock("busy", AcquireOptions::default()).await.unwrap().acquired);
    });
}

/// Lock and semaphore names unused for FENCE_KEEP_MS are forgotten, as the other stores forget
/// them (the next token is 1 again): a client's acquisitions sweep such rows a bounded slice at a
/// time. Names used within that time, and held ones (a held semaphore name even past its keep
/// time), keep their fence.
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn lock_and_semaphore_names_unused_for_the_keep_time_are_forgotten() {
    use flowguard_core::lock::{AcquireOptions, FENCE_KEEP_MS};
    use flowguard_core::semaphore::PermitOptions;
    common::runtime().block_on(async {
        let (c, prefix) = opened().await;
        let one = PermitOptions { permits: 1, ..Default::default() };
        for name in ["old", "recent", "held"] {
            let a = c.acquire_lock(name, AcquireOptions::default()).await.unwrap();
            let p = c.acquire_permit(name, one.clone()).await.unwrap();
            assert_eq!((a.fence, p.fence), (1, 1));
            if name != "held" {
                assert!(c.release_lock(name, a.owner.as_deref().unwrap()).await.unwrap().released);
                assert!(c.release_permit(name, p.owner.as_deref().unwrap()).await.unwrap().released);
            }
        }
        // Age them past the keep time, as 30 days unused would: the lock "old", the semaphores
        // "old" and "held".
        let (db, ns) = (raw().await, prefix.as_bytes());
        let aged = db
            .execute(
                "UPDATE flowguard.locks SET exp = exp - $3 - 1000 WHERE ns = $1 AND name = $2",
                &[&ns, &"old".as_bytes(), &(FENCE_KEEP_MS as i64)],
            )
            .await
            .unwrap();
        let names = vec!["old".as_bytes(), "held".as_bytes()];
        let aged_sems = db
            .execute("UPDATE flowguard.sems SET keep = 0 WHERE ns = $1 AND name = ANY($2)", &[&ns, &names])
            .await
            .unwrap();
        assert_eq!((aged, aged_sems), (1, 2));
        assert_eq!(c.get_lock("old").await.unwrap().fence, 1, "not forgotten before a sweep");
        // Enough acquisitions of other names for one sweep of each (one in 32).
        for i in 0..32 {
            let n = format!("n{i}");
            let a = c.acquire_lock(&n, AcquireOptions::default()).await.unwrap();
            assert!(c.release_lock(&n, a.owner.as_deref().unwrap()).await.unwrap().released);
            let p = c.acquire_permit(&n, one.clone()).await.unwrap();
            assert!(c.release_permit(&n, p.owner.as_deref().unwrap()).await.unwrap().released);
        }
        assert_eq!(c.get_lock("old").await.unwrap().fence, 0, "the old lock name is forgotten");
        assert_eq!(c.get_semaphore("old").await.unwrap().fence, 0, "the old semaphore name is forgotten");
        assert_eq!(c.get_lock("recent").await.unwrap().fence, 1, "a recent name keeps its fence");
        assert_eq!(c.get_semaphore("recent").await.unwrap().fence, 1, "a recent name keeps its fence");
        let held = c.get_lock("held").await.unwrap();
        assert!(held.locked && held.fence == 1, "a held name keeps its fence: {held:?}");
        let held = c.get_semaphore("held").await.unwrap();
        assert!(held.holders.len() == 1 && held.fence == 1, "a held name keeps its fence: {held:?}");
        assert_eq!(c.acquire_lock("old", AcquireOptions::default()).await.unwrap().fence, 1);
        assert_eq!(c.acquire_permit("old", one).await.unwrap().fence, 1);
    });
}

/// The catalog lists the groups, held locks, limiters in use and held semaphores a page at a time
/// (pages of 2, so several), as the shared suite's catalog test does on the other backends (less
/// its queues, not built here).
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn catalog_lists_the_names_in_use_but_queues() {
    use flowguard_core::catalog::Kind;
    use flowguard_core::limiter::LimitOptions;
    use flowguard_core::lock::AcquireOptions;
    use flowguard_core::semaphore::PermitOptions;
    use flowguard_core::tracker::ItemRequest;
    common::runtime().block_on(async {
        let c = common::open(target()).await;
        let groups = ["g:1", "g{2}", "g%3", "g4", "g5"];
        for g in groups {
            let done = ItemRequest { id: "a".into(), status: "completed".into(), ..Default::default() };
            c.set_items(g, vec![done]).await.unwrap();
        }
        let mut want: Vec<(String, Option<u32>)> = groups.iter().map(|g| (g.to_string(), None)).collect();
        want.sort();
        assert_eq!(common::all_names(&c, Kind::Groups).await, want);

        assert!(c.acquire_lock("held:1", AcquireOptions::default()).await.unwrap().acquired);
        let freed = c.acquire_lock("freed", AcquireOptions::default()).await.unwrap();
        c.release_lock("freed", freed.owner.as_deref().unwrap()).await.unwrap();
        assert_eq!(common::all_names(&c, Kind::Locks).await, vec![("held:1".to_string(), None)]);

        let slow = LimitOptions {
            limit: 1,
            period: Some(std::time::Duration::from_secs(600)),
            ..Default::default()
        };
        for n in ["rl:a", "rl{b}"] {
            assert!(c.rate_limit(n, slow.clone()).await.unwrap().allowed);
        }
        c.rate_limit("rl:untaken", LimitOptions { cost: Some(0), ..slow.clone() }).await.unwrap();
        let back_off = flowguard_core::limiter::PauseFor::RetryAfter("600".into());
        c.pause_rate_limit("rl:paused", back_off).await.unwrap();
        assert_eq!(
            common::all_names(&c, Kind::Limiters).await,
            vec![("rl:a".to_string(), None), ("rl:paused".to_string(), None), ("rl{b}".to_string(), None)]
        );

        let two = PermitOptions { permits: 2, ..Default::default() };
        assert!(c.acquire_permit("sem:held", two.clone()).await.unwrap().acquired);
        let p = c.acquire_permit("sem:freed", two).await.unwrap();
        c.release_permit("sem:freed", p.owner.as_deref().unwrap()).await.unwrap();
        assert_eq!(common::all_names(&c, Kind::Semaphores).await, vec![("sem:held".to_string(), None)]);
    });
}

/// A role that may not log in, and one that may not create flowguard's schema: ERR_BACKEND_AUTH,
/// the second saying what to grant.
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn refused_roles_are_backend_auth_by_code() {
    common::runtime().block_on(async {
        let db = raw().await;
        let suffix = format!("{:x}", rand_suffix());
        let (nologin, plain) = (format!("fg_nologin_{suffix}"), format!("fg_plain_{suffix}"));
        db.batch_execute(&format!("CREATE ROLE {nologin} NOLOGIN; CREATE ROLE {plain} LOGIN")).await.unwrap();
        let as_role = |role: &str| {
            let u = url();
            let user = tokio_postgres::Config::from_str(&u).unwrap().get_user().unwrap().to_string();
            let changed = u.replacen(&format!("://{user}@"), &format!("://{role}@"), 1);
            assert_ne!(changed, u, "the URL names its user");
            changed
        };
        let open = |url: String| {
            Client::open(OpenOptions {
                postgres: Some(PostgresOptions {
                    url,
                    schema: Some(format!("fg_denied_{suffix}")),
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        let e = open(as_role(&nologin)).await.err().expect("refused");
        assert_eq!(e.code, ErrorCode::BackendAuth, "{e}");
        let e = open(as_role(&plain)).await.err().expect("refused");
        assert_eq!(e.code, ErrorCode::BackendAuth, "{e}");
        assert!(e.message.contains("grant CREATE"), "{e}");
        db.batch_execute(&format!("DROP ROLE {nologin}; DROP ROLE {plain}")).await.unwrap();
    });
}
