//! The semantic suite on PostgreSQL (every pattern), and what only this backend has: its schema's
//! version, its options, refused roles, row locks held elsewhere, the sweeps of forgotten names. Needs FLOWGUARD_TEST_POSTGRES_URL: `node scripts/postgres.mjs --
//! cargo test …` starts a throwaway cluster, sets it, and runs these with `--include-ignored`.
mod common;

use flowguard_core::backend::postgres::{PostgresOptions, PostgresTls};
use std::str::FromStr;

use flowguard_core::{Client, ErrorCode, OpenOptions};

fn url() -> String {
    std::env::var("FLOWGUARD_TEST_POSTGRES_URL")
        .expect("FLOWGUARD_TEST_POSTGRES_URL must point at a PostgreSQL database for the PostgreSQL suite")
}

fn target() -> common::Target {
    common::Target::Postgres(url())
}

suite!(target(), [#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]]);

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
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn two_clients_race_for_one_lock() {
    common::runtime().block_on(async {
        for _ in 0..20 {
            let (a, b) = two_clients().await;
            common::two_clients_race_for_one_lock(a, b).await;
        }
    });
}

/// A client of `prefix` whose command timeout is 300 ms (a statement waiting for a row lock
/// longer than that fails).
async fn impatient(prefix: &str) -> Client {
    Client::open(OpenOptions {
        postgres: Some(PostgresOptions { url: url(), ..Default::default() }),
        prefix: Some(prefix.to_string()),
        command_timeout: Some(std::time::Duration::from_millis(300)),
        ..Default::default()
    })
    .await
    .unwrap()
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
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
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
            url: "postgres://u:secret@h/db?sslmode=allow".into(),
            ..Default::default()
        })
        .await
        .err()
        .unwrap();
        assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("postgres.url"), "{e}");
        assert!(!e.message.contains("secret"), "{e}");
        let e = open(PostgresOptions {
            url: "postgres://u:secret@h/db".into(),
            tls: Some(PostgresTls { ca: Some("not pem".into()), ..Default::default() }),
            ..Default::default()
        })
        .await
        .err()
        .unwrap();
        assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("postgres.tls.ca"), "{e}");
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

/// A row lock held elsewhere (another session's open transaction) bounds a call by the command
/// timeout, as PostgreSQL's statement_timeout: ERR_TIMEOUT, nothing written; the call succeeds
/// once the row is free.
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn a_row_locked_elsewhere_times_out_by_code() {
    use flowguard_core::lock::AcquireOptions;
    common::runtime().block_on(async {
        let (c, prefix) = opened().await;
        let first = c.acquire_lock("busy", AcquireOptions::default()).await.unwrap();
        assert!(c.release_lock("busy", first.owner.as_deref().unwrap()).await.unwrap().released);
        let short = impatient(&prefix).await;
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
/// them (the next token is the database's clock in µs again, above the forgotten ones): a client's
/// acquisitions sweep such rows a bounded slice at a time. Names used within that time, and held
/// ones (a held semaphore name even past its keep time), keep their fence.
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn lock_and_semaphore_names_unused_for_the_keep_time_are_forgotten() {
    use flowguard_core::lock::{AcquireOptions, FENCE_KEEP_MS};
    use flowguard_core::semaphore::PermitOptions;
    common::runtime().block_on(async {
        let (c, prefix) = opened().await;
        let one = PermitOptions { permits: 1, ..Default::default() };
        // Each name's lock and semaphore fence: the database's clock in µs (past 2020's).
        let mut fences = std::collections::HashMap::new();
        for name in ["old", "recent", "held"] {
            let a = c.acquire_lock(name, AcquireOptions::default()).await.unwrap();
            let p = c.acquire_permit(name, one.clone()).await.unwrap();
            assert!(a.fence > 1_577_836_800_000_000 && p.fence > 1_577_836_800_000_000, "{a:?} {p:?}");
            fences.insert(name, (a.fence, p.fence));
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
        assert_eq!(c.get_lock("old").await.unwrap().fence, fences["old"].0, "not forgotten before a sweep");
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
        let recent = fences["recent"];
        assert_eq!(c.get_lock("recent").await.unwrap().fence, recent.0, "a recent name keeps its fence");
        assert_eq!(c.get_semaphore("recent").await.unwrap().fence, recent.1, "a recent name keeps its fence");
        let (held, kept) = (c.get_lock("held").await.unwrap(), fences["held"]);
        assert!(held.locked && held.fence == kept.0, "a held name keeps its fence: {held:?}");
        let held = c.get_semaphore("held").await.unwrap();
        assert!(held.holders.len() == 1 && held.fence == kept.1, "a held name keeps its fence: {held:?}");
        // A forgotten name's next token is the clock's: above the forgotten one.
        let old = fences["old"];
        let a = c.acquire_lock("old", AcquireOptions::default()).await.unwrap();
        assert!(a.acquired && a.fence > old.0, "{a:?} after {old:?}");
        let p = c.acquire_permit("old", one).await.unwrap();
        assert!(p.acquired && p.fence > old.1, "{p:?} after {old:?}");
    });
}

/// A role that may not log in, and one that may not create flowguard's schema: ERR_BACKEND_AUTH,
/// the second saying what to grant.
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
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

/// Readers of one queue on two clients (two pools, so two connections), released together by a
/// barrier: no id is delivered to two of them while the leases hold (see
/// `common::concurrent_readers`).
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn readers_on_two_clients_never_share_an_id() {
    common::runtime().block_on(async {
        let (a, b) = two_clients().await;
        common::concurrent_readers(a, b).await;
    });
}

/// A read never waits for rows another reader holds: with two of a queue's ids locked by another
/// session (as a read under way holds them), a read by a client whose command timeout is 300 ms
/// gets the other ids at once, not those two (nor ERR_TIMEOUT); once the other session ends, the
/// next read gets them.
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn a_read_skips_ids_another_reader_holds() {
    use flowguard_core::queue::{EnqueueOptions, ReadOptions};
    common::runtime().block_on(async {
        let (c, prefix) = opened().await;
        let short = impatient(&prefix).await;
        let ids: Vec<String> = ["a", "b", "c", "d", "e"].iter().map(|s| s.to_string()).collect();
        c.enqueue("q", ids, EnqueueOptions::default()).await.unwrap();
        let mut db = raw().await;
        let tx = db.transaction().await.unwrap();
        let held: Vec<&[u8]> = vec![b"a", b"b"];
        let rows = tx
            .query(
                "SELECT id FROM flowguard.q_ids WHERE ns = $1 AND queue = $2 AND id = ANY($3) FOR UPDATE",
                &[&prefix.as_bytes(), &"q".as_bytes(), &held],
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 2, "the other session holds a and b");
        let got = short.read_batch("q", ReadOptions::default()).await.unwrap();
        let got: Vec<&str> = got.items.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(got, ["c", "d", "e"]);
        tx.rollback().await.unwrap();
        let got = short.read_batch("q", ReadOptions::default()).await.unwrap();
        let got: Vec<&str> = got.items.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(got, ["a", "b"]);
    });
}

/// Two enqueues with different shard counts on an empty queue, on two clients released together
/// by a barrier, 20 times: exactly one is taken, the other is refused naming both counts, and
/// the queue holds the winner's id under the winner's count.
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn enqueues_racing_with_two_shard_counts_have_one_winner() {
    use flowguard_core::queue::{EnqueueOptions, ShardSelect};
    common::runtime().block_on(async {
        let (a, b) = two_clients().await;
        for round in 0..20 {
            let queue = format!("counts-{round}");
            let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(2));
            let race = |c: Client, shards: u64, id: &str| {
                let (barrier, queue, id) = (barrier.clone(), queue.clone(), id.to_string());
                tokio::spawn(async move {
                    barrier.wait().await;
                    let opts = EnqueueOptions { shards: Some(shards), ..Default::default() };
                    c.enqueue(&queue, vec![id], opts).await
                })
            };
            let (ta, tb) = (race(a.clone(), 2, "x"), race(b.clone(), 3, "y"));
            let (ra, rb) = (ta.await.unwrap(), tb.await.unwrap());
            let (winner, loser, lost) = match (&ra, &rb) {
                (Ok(_), Err(e)) => (2, 3, e),
                (Err(e), Ok(_)) => (3, 2, e),
                _ => panic!("round {round}: one enqueue is taken: {ra:?} {rb:?}"),
            };
            assert_eq!(lost.code, ErrorCode::InvalidArgument, "{lost}");
            let names_both = format!("shards is {loser}");
            assert!(lost.message.contains(&names_both), "{lost}");
            assert!(lost.message.contains(&format!("shards = {winner}")), "{lost}");
            let size = a.queue_size(&queue, ShardSelect { shards: Some(winner), shard: None }).await.unwrap();
            assert_eq!(size.waiting, 1, "round {round}");
        }
    });
}

/// A queue's count row that outlives its ids (as two acks emptying the queue at once can leave
/// it) changes nothing: the queue is not listed, and calls with another count are answered (an
/// enqueue records its own count) while no id is held.
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn a_count_row_left_without_ids_is_ignored() {
    use flowguard_core::catalog::Kind;
    use flowguard_core::queue::{EnqueueOptions, ReadOptions, ShardSelect};
    common::runtime().block_on(async {
        let (c, prefix) = opened().await;
        let db = raw().await;
        db.execute(
            "INSERT INTO flowguard.q_queues (ns, queue, shards) VALUES ($1, $2, 8)",
            &[&prefix.as_bytes(), &"q".as_bytes()],
        )
        .await
        .unwrap();
        assert_eq!(common::all_names(&c, Kind::Queues).await, vec![]);
        let four = |shards: u64| ShardSelect { shards: Some(shards), shard: None };
        assert_eq!(c.queue_size("q", four(4)).await.unwrap().waiting, 0);
        assert!(c
            .read_batch("q", ReadOptions { shards: Some(4), ..Default::default() })
            .await
            .unwrap()
            .items
            .is_empty());
        let opts = EnqueueOptions { shards: Some(4), ..Default::default() };
        c.enqueue("q", vec!["a".into(), "b".into()], opts).await.unwrap();
        assert_eq!(common::all_names(&c, Kind::Queues).await, vec![("q".to_string(), Some(4))]);
        let e = c.queue_size("q", four(8)).await.unwrap_err();
        assert!(e.message.contains("shards is 8") && e.message.contains("shards = 4"), "{e}");
        assert_eq!(c.queue_size("q", four(4)).await.unwrap().waiting, 2);
    });
}

/// The fewest tries a wait that only polls (the lock's backoff: pauses of at most 10 ms doubling
/// to 500 ms) makes in `waited_ms`, were each try to take as long as 50 ms.
fn polling_tries(waited_ms: u64) -> u32 {
    let (mut covered, mut tries) = (0u64, 1u32);
    while covered < waited_ms {
        covered += (10u64 << (tries - 1).min(16)).min(500) + 50;
        tries += 1;
    }
    tries
}

/// Waits on PostgreSQL are woken by the release's NOTIFY: a waiter on one client (its own pool
/// and listening connection) gets the lock, the permit, the key's result once another client
/// releases them, after about 3 s of waiting, and its tries stay below what polling alone makes in
/// the time it waited (fails with the announcements switched off: `subscribe` answering none, or
/// no `notify` in the release, checked by hand).
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn waits_are_woken_by_a_release_on_another_client() {
    use flowguard_core::lock::AcquireOptions;
    use flowguard_core::semaphore::PermitOptions;
    use flowguard_core::state::KeyClaim;
    use std::time::Duration;
    let held = Duration::from_secs(3);
    common::runtime().block_on(async {
        let (a, b) = two_clients().await;
        let b = std::sync::Arc::new(b);

        let lease = Some(Duration::from_secs(60));
        let mine =
            a.acquire_lock("woken", AcquireOptions { timeout: lease, ..Default::default() }).await.unwrap();
        let waiter = tokio::spawn({
            let b = b.clone();
            async move {
                let wait = Some(Duration::from_secs(30));
                b.acquire_lock("woken", AcquireOptions { timeout: lease, wait, ..Default::default() }).await
            }
        });
        tokio::time::sleep(held).await;
        assert!(a.release_lock("woken", mine.owner.as_deref().unwrap()).await.unwrap().released);
        let got = waiter.await.unwrap().unwrap();
        assert!(got.acquired, "{got:?}");
        eprintln!(
            "lock: {} tries in {} ms (polling alone: at least {})",
            got.attempts,
            got.waited_ms,
            polling_tries(got.waited_ms)
        );
        assert!(
            got.attempts < polling_tries(got.waited_ms),
            "lock: {} tries in {} ms",
            got.attempts,
            got.waited_ms
        );

        let permit = move |wait| PermitOptions { permits: 1, timeout: lease, wait, ..Default::default() };
        let mine = a.acquire_permit("woken", permit(None)).await.unwrap();
        let waiter = tokio::spawn({
            let b = b.clone();
            async move { b.acquire_permit("woken", permit(Some(Duration::from_secs(30)))).await }
        });
        tokio::time::sleep(held).await;
        assert!(a.release_permit("woken", mine.owner.as_deref().unwrap()).await.unwrap().released);
        let got = waiter.await.unwrap().unwrap();
        assert!(got.acquired, "{got:?}");
        eprintln!(
            "permit: {} tries in {} ms (polling alone: at least {})",
            got.attempts,
            got.waited_ms,
            polling_tries(got.waited_ms)
        );
        assert!(
            got.attempts < polling_tries(got.waited_ms),
            "permit: {} tries in {} ms",
            got.attempts,
            got.waited_ms
        );

        let KeyClaim::Claimed { owner, .. } = a.claim_key("woken", lease).await.unwrap() else {
            panic!("claimed")
        };
        let waiter = tokio::spawn({
            let b = b.clone();
            async move {
                let start = std::time::Instant::now();
                let r = b.claim_key_waiting("woken", lease, Duration::from_secs(30)).await;
                (r, start.elapsed().as_millis() as u64)
            }
        });
        tokio::time::sleep(held).await;
        a.complete_key("woken", &owner, "{\"v\":1}", None).await.unwrap();
        let (got, waited_ms) = waiter.await.unwrap();
        let (claim, attempts) = got.unwrap();
        assert!(matches!(claim, KeyClaim::Done { ref json, .. } if json == "{\"v\":1}"), "{claim:?}");
        eprintln!(
            "key: {attempts} tries in {waited_ms} ms (polling alone: at least {})",
            polling_tries(waited_ms)
        );
        assert!(attempts < polling_tries(waited_ms), "key: {attempts} tries in {waited_ms} ms");
    });
}

/// A batch that writes an expired record again (its row locked, then updated) beside a new id
/// (inserted first) keeps it. The purge of expired records sent with the writes ran before the
/// update and deleted the record this call had locked (`SKIP LOCKED` skips only other calls'
/// locks): the claim answered claimed, and the item read back as none (model seed 9003). A schema
/// of its own, so the record is the only expired one the purge can reach.
#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn a_batch_writing_an_expired_record_again_keeps_it() {
    use flowguard_core::tracker::ItemStatus;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
    let schema = format!("fgpurge_{}_{nanos}", std::process::id());
    let c = Client::open(OpenOptions {
        postgres: Some(PostgresOptions { url: url(), schema: Some(schema), ..Default::default() }),
        retention: Some(Duration::from_millis(100)),
        ..Default::default()
    })
    .await
    .unwrap();
    let ids = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    c.claim_batch("g", &ids(&["a"]), Some(Duration::from_millis(1)), false, None, None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    let r = c.claim_batch("g", &ids(&["a", "n"]), None, false, None, None).await.unwrap();
    assert_eq!(r.attempts, vec![1, 1]);
    for id in ["a", "n"] {
        let item = c.get_item("g", id).await.unwrap();
        assert_eq!((item.status, item.attempts), (ItemStatus::InProgress, 1), "{id}");
    }
}

/// A batch finds the group's rows at either end of its ids' range and inside it (the rows at its
/// first and last id, and a row between them it does not name, are not taken for new), and a
/// range without rows claims its ids as new (`tracker::LOAD_LOCKED`: every id probed).
#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn a_batch_finds_the_rows_at_the_ends_of_its_range() {
    let (c, _) = opened().await;
    let ids = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let claim = |xs: Vec<String>| {
        let c = &c;
        async move {
            let r = c.claim_batch("g", &xs, None, false, None, None).await.unwrap();
            r.outcomes.iter().map(|o| o.as_str()).collect::<Vec<_>>()
        }
    };
    assert_eq!(claim(ids(&["b", "m", "y"])).await, ["claimed"; 3]);
    assert_eq!(claim(ids(&["b"])).await, ["in_progress"]);
    assert_eq!(claim(ids(&["a", "b"])).await, ["claimed", "in_progress"]);
    assert_eq!(claim(ids(&["z", "y"])).await, ["claimed", "in_progress"]);
    assert_eq!(claim(ids(&["c", "x"])).await, ["claimed", "claimed"]);
    assert_eq!(claim(ids(&["n", "o"])).await, ["claimed", "claimed"]);
    let other = c.claim_batch("h", &ids(&["b", "m"]), None, false, None, None).await.unwrap();
    assert_eq!(other.attempts, vec![1, 1]);
    for id in ["a", "b", "c", "m", "n", "o", "x", "y", "z"] {
        assert_eq!(c.get_item("g", id).await.unwrap().attempts, 1, "{id}");
    }
}

/// A client of `schema` (made anew) with one pooled connection and no sweep, whose items table
/// is analyzed while empty, autovacuum off for it (its statistics stay those of an empty table).
/// `app`: the sessions' application name.
async fn stale_statistics(
    db: &tokio_postgres::Client,
    schema: &str,
    app: Option<&str>,
    command_timeout: Option<std::time::Duration>,
) -> Client {
    db.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await.unwrap();
    let url = match app {
        Some(app) => {
            format!("{}{}application_name={app}", url(), if url().contains('?') { '&' } else { '?' })
        }
        None => url(),
    };
    let c = Client::open(OpenOptions {
        postgres: Some(PostgresOptions {
            url,
            schema: Some(schema.into()),
            pool_size: Some(1),
            sweep_interval_ms: Some(0),
            ..Default::default()
        }),
        command_timeout,
        ..Default::default()
    })
    .await
    .unwrap();
    db.batch_execute(&format!(
        "ALTER TABLE {schema}.items SET (autovacuum_enabled = false); ANALYZE {schema}.items"
    ))
    .await
    .unwrap();
    c
}

/// Batches looked up by id do not depend on the planner's statistics. The items table analyzed
/// while empty (autovacuum off for it, so the statistics stay that way) and one pooled connection
/// (its statements' plans cached: after five runs PostgreSQL may use a generic plan), then
/// `claimBatch` of 10,000 new ids into one group eight times, and `getItems` and a batch of
/// unsets over the last 10,000: every call is answered within the 10 s command timeout. With
/// `id = ANY($3)` the generic plan walked the whole group comparing each row with every id of
/// the array: the calls from the sixth on ran past the timeout (`ERR_TIMEOUT`).
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn batches_by_id_do_not_depend_on_the_statistics() {
    use flowguard_core::tracker::ItemRequest;
    common::runtime().block_on(async {
        let schema = "fg_stale_stats";
        let db = raw().await;
        let c = stale_statistics(&db, schema, None, Some(std::time::Duration::from_secs(10))).await;
        let batch = |k: usize| (0..10_000).map(|i| format!("item-{:07}", k * 10_000 + i)).collect::<Vec<_>>();
        for k in 0..8 {
            let r = c.claim_batch("big", &batch(k), None, false, None, None).await;
            let r =
                r.unwrap_or_else(|e| panic!("claimBatch {k} of 10,000 into a group of {}: {e}", k * 10_000));
            assert_eq!(r.outcomes.len(), 10_000);
        }
        let last = batch(7);
        let states = c.get_items("big", last.clone()).await.unwrap();
        assert!(states.iter().all(|s| s.attempts == 1), "every item of the last batch claimed once");
        let unset: Vec<ItemRequest> = last
            .iter()
            .map(|id| ItemRequest { id: id.clone(), status: "none".into(), ..Default::default() })
            .collect();
        c.set_items("big", unset).await.unwrap();
        let states = c.get_items("big", last).await.unwrap();
        assert!(states.iter().all(|s| s.attempts == 0), "every item of the last batch unset");
        db.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.unwrap();
    });
}

/// No statement reads a whole table, whatever the table was like when its plan was made. One
/// pooled connection runs claims and completions of one item at a time (the fast statements,
/// every 8th with the fast purge) and batches (the transaction's load, insert and purge) while the
/// items table is nearly empty and analyzed so, until PostgreSQL keeps a generic plan for each,
/// then the table grows to 50,000 live records (written directly; autovacuum off for it, so no
/// new statistics make the plans again), then the same calls run again. Without
/// `enable_seqscan = off` on flowguard's sessions the plans made on the small table were
/// sequential scans (a few rows are cheaper to read than an index) and were kept: the fast
/// completion and the purges each read all 50,000 rows (2,052,203 rows read by sequential scans
/// in all). The client's statistics are read after its session ended (a backend flushes them as
/// it exits).
#[test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
fn statements_keep_to_their_indexes_as_a_table_grows() {
    use flowguard_core::tracker::ItemRequest;
    common::runtime().block_on(async {
        let (schema, app) = ("fg_grown", "fg_grown");
        let db = raw().await;
        let c = stale_statistics(&db, schema, Some(app), None).await;
        let calls = |round: usize| {
            let c = &c;
            async move {
                for i in 0..16 {
                    let id = format!("one-{round}-{i}");
                    let claim = ItemRequest { id: id.clone(), status: "in_progress".into(), ..Default::default() };
                    let r = c.set_items("small", vec![claim]).await.unwrap();
                    let owner = r[0].owner.clone();
                    let done = ItemRequest { id, status: "completed".into(), owner, ..Default::default() };
                    c.set_items("small", vec![done]).await.unwrap();
                }
                for k in 0..8 {
                    let ids = vec![format!("batch-{round}-{k}")];
                    c.claim_batch("small", &ids, None, false, None, None).await.unwrap();
                }
            }
        };
        calls(0).await;
        db.execute(
            &format!(
                "INSERT INTO {schema}.items (ns, grp, id, s, a, o, l, c, u, d, e, x, t)
                 SELECT 'other:'::bytea, 'big'::bytea, ('i' || g)::bytea, 3, 1, NULL, 0, 0, 0, 0, NULL,
                   floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 + 3600000, NULL
                 FROM generate_series(1, 50000) g"
            ),
            &[],
        )
        .await
        .unwrap();
        calls(1).await;
        c.close();
        let sessions = || async {
            let n: i64 = db
                .query_one("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", &[&app])
                .await
                .unwrap()
                .get(0);
            n
        };
        let gone = std::time::Instant::now();
        while sessions().await > 0 {
            assert!(gone.elapsed() < std::time::Duration::from_secs(10), "the client's session did not end");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let read: i64 = db
            .query_one(
                "SELECT coalesce(seq_tup_read, 0) FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'items'",
                &[&schema],
            )
            .await
            .unwrap()
            .get(0);
        assert!(read < 50_000, "statements read the whole items table: {read} rows read by sequential scans");
        db.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.unwrap();
    });
}
