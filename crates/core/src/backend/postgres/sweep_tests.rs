//! The sweep of expired rows (`sweep`): rows past their expiry in every table go with no call
//! made, and nothing a read still returns; the task ends with `close()` and lets its connection
//! go; two clients sweeping one schema at once both finish, each skipping what the other (or a
//! call) holds. Each test has a schema of its own (no other client sweeps it). Needs
//! FLOWGUARD_TEST_POSTGRES_URL (see `scripts/postgres.mjs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{sweep, Postgres, PostgresOptions};
use crate::{Client, OpenOptions};

const HOUR: i64 = 3_600_000;
const FENCE_KEEP: i64 = crate::lock::FENCE_KEEP_MS as i64;

fn url() -> String {
    std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL")
}

fn schema() -> String {
    format!("sweep_{}", crate::token::new_token())
}

async fn client(schema: &str, url: String, sweep_interval_ms: u64) -> Client {
    let opts = PostgresOptions {
        url,
        schema: Some(schema.into()),
        sweep_interval_ms: Some(sweep_interval_ms),
        ..Default::default()
    };
    Client::open(OpenOptions { postgres: Some(opts), ..Default::default() }).await.unwrap()
}

/// The options of a store of `schema` that does not sweep (its ticks are run by the test), and a
/// client of them (the store's config).
async fn quiet(schema: &str, pool_size: Option<u32>) -> (PostgresOptions, Client) {
    let opts = PostgresOptions {
        url: url(),
        schema: Some(schema.into()),
        pool_size,
        sweep_interval_ms: Some(0),
        ..Default::default()
    };
    let client =
        Client::open(OpenOptions { postgres: Some(opts.clone()), ..Default::default() }).await.unwrap();
    (opts, client)
}

async fn raw() -> tokio_postgres::Client {
    let (db, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    db
}

async fn now(db: &tokio_postgres::Client) -> i64 {
    db.query_one("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8", &[])
        .await
        .unwrap()
        .get(0)
}

/// Rows in every swept table, of namespace `ns`: `expired` past their expiry (by the rules: a
/// lock name unused for `FENCE_KEEP_MS`, a semaphore name past its keep time without a live
/// holder), else still live (a read returns them, or they keep a fence).
async fn write_rows(db: &tokio_postgres::Client, s: &str, ns: &str, n: usize, expired: bool) {
    let t = now(db).await;
    let (exp, lock_exp, x) =
        if expired { (t - 1, t - FENCE_KEEP - 1, t - 1) } else { (t + HOUR, t - 1, t + HOUR) };
    // $1: the namespace, $2: the row's expiry, $3: how many.
    let statements = [
        "INSERT INTO {s}.vals SELECT $1, ('k' || g)::bytea, '1', $2 FROM generate_series(1, $3) g",
        "INSERT INTO {s}.idem SELECT $1, ('k' || g)::bytea, NULL, 'r', $2 FROM generate_series(1, $3) g",
        "INSERT INTO {s}.limiters SELECT $1, ('l' || g)::bytea, 0, NULL, $2 FROM generate_series(1, $3) g",
        "INSERT INTO {s}.sem_holders SELECT $1, ('s' || g)::bytea, 'o', 1, NULL, $2 FROM generate_series(1, $3) g",
        "INSERT INTO {s}.sems SELECT $1, ('s' || g)::bytea, 1, $2 FROM generate_series(1, $3) g",
        "INSERT INTO {s}.locks SELECT $1, ('l' || g)::bytea, NULL, 1, NULL, $2 FROM generate_series(1, $3) g",
        "INSERT INTO {s}.items SELECT $1, 'g'::bytea, ('i' || g)::bytea, 3, 1, NULL, 0, 0, 0, 0, NULL, $2, NULL
           FROM generate_series(1, $3) g",
    ];
    for st in statements {
        let at = if st.contains(".locks ") {
            lock_exp
        } else if st.contains(".items ") {
            x
        } else {
            exp
        };
        db.execute(&st.replace("{s}", s), &[&ns.as_bytes(), &at, &(n as i32)]).await.unwrap();
    }
}

/// Rows of namespace `ns` per table.
async fn counts(db: &tokio_postgres::Client, s: &str, ns: &str) -> Vec<(&'static str, i64)> {
    let mut out = Vec::new();
    for t in ["vals", "idem", "limiters", "sem_holders", "sems", "locks", "items"] {
        let sql = format!("SELECT count(*) FROM {s}.{t} WHERE ns = $1");
        out.push((t, db.query_one(&sql, &[&ns.as_bytes()]).await.unwrap().get(0)));
    }
    out
}

async fn sessions(db: &tokio_postgres::Client, app: &str) -> i64 {
    db.query_one("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", &[&app])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn expired_rows_go_with_no_call_and_live_ones_stay() {
    let s = schema();
    let c = client(&s, url(), 100).await;
    let db = raw().await;
    // Live rows first (a kept record, a value kept forever, a lock name with its fence…), then
    // expired ones, in two namespaces no call uses.
    write_rows(&db, &s, "live:", 50, false).await;
    db.execute(&format!("INSERT INTO {s}.vals VALUES ('live:'::bytea, 'forever', '1', NULL)"), &[])
        .await
        .unwrap();
    // A semaphore name past its keep time, with a live holder: its fence is kept.
    db.execute(&format!("UPDATE {s}.sems SET keep = 0 WHERE ns = 'live:'::bytea"), &[]).await.unwrap();
    write_rows(&db, &s, "old:", 1_200, true).await;
    let live = counts(&db, &s, "live:").await;
    let started = Instant::now();
    loop {
        let left = counts(&db, &s, "old:").await;
        if left.iter().all(|(_, n)| *n == 0) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "expired rows left after 10 s: {left:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(live.iter().all(|(_, n)| *n >= 50), "{live:?}");
    assert_eq!(counts(&db, &s, "live:").await, live, "a live row was swept");
    c.close();
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn the_sweep_ends_with_close_and_lets_its_connection_go() {
    let s = schema();
    let app = format!("fg{}", schema());
    let sep = if url().contains('?') { '&' } else { '?' };
    let c = client(&s, format!("{}{sep}application_name={app}", url()), 100).await;
    let db = raw().await;
    write_rows(&db, &s, "a:", 10, true).await;
    let started = Instant::now();
    while counts(&db, &s, "a:").await.iter().any(|(_, n)| *n > 0) {
        assert!(started.elapsed() < Duration::from_secs(10), "not swept");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(sessions(&db, &app).await >= 1, "the sweep's pooled connection");
    c.close();
    write_rows(&db, &s, "b:", 10, true).await;
    let started = Instant::now();
    while sessions(&db, &app).await > 0 {
        assert!(started.elapsed() < Duration::from_secs(5), "a connection is left after close()");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Ten intervals: no sweep deletes.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(counts(&db, &s, "b:").await.iter().all(|(_, n)| *n == 10), "swept after close()");
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn two_sweeps_at_once_both_finish_and_skip_held_rows() {
    let s = schema();
    // Two stores of the schema, no task of their own: their ticks are run here.
    let (opts, client) = quiet(&s, None).await;
    let a = Postgres::open(&opts, client.config()).await.unwrap();
    let b = Postgres::open(&opts, client.config()).await.unwrap();
    let db = raw().await;
    write_rows(&db, &s, "x:", 6_000, true).await;
    let total: i64 = counts(&db, &s, "x:").await.iter().map(|(_, n)| n).sum();
    // A call holds ten expired records (as a claim of them would).
    let mut holder = raw().await;
    let tx = holder.transaction().await.unwrap();
    let held = format!("SELECT 1 FROM {s}.items WHERE ns = 'x:'::bytea AND id IN (SELECT ('i' || g)::bytea FROM generate_series(1, 10) g) FOR UPDATE");
    assert_eq!(tx.query(&held, &[]).await.unwrap().len(), 10);
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let sweep_all = |store: Postgres, barrier: Arc<tokio::sync::Barrier>, s: String| async move {
        barrier.wait().await;
        let (mut deleted, mut ticks) = (0u64, 0usize);
        loop {
            let t = sweep::tick(&store.pool, &s, ticks).await.unwrap().expect("a free connection");
            deleted += t.deleted;
            ticks += 1;
            if !t.more {
                return (deleted, ticks);
            }
        }
    };
    let bounded = Duration::from_secs(30);
    let ((da, ta), (db_, tb)) = tokio::time::timeout(bounded, async {
        tokio::join!(sweep_all(a, barrier.clone(), s.clone()), sweep_all(b, barrier.clone(), s.clone()))
    })
    .await
    .expect("both sweeps finish without waiting for the held rows");
    // Both swept (neither waited for the other), every row once, the held ones skipped.
    assert!(ta >= 1 && tb >= 1);
    assert_eq!((da + db_) as i64, total - 10, "a: {da} in {ta} ticks, b: {db_} in {tb} ticks");
    assert_eq!(counts(&db, &s, "x:").await.iter().map(|(_, n)| n).sum::<i64>(), 10);
    tx.rollback().await.unwrap();
    let c = Postgres::open(&opts, client.config()).await.unwrap();
    assert_eq!(sweep::tick(&c.pool, &s, 0).await.unwrap(), Some(sweep::Tick { deleted: 10, more: false }));
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn a_call_waiting_for_the_connection_ends_the_tick_after_its_slice() {
    let s = schema();
    let (opts, client) = quiet(&s, Some(1)).await;
    let store = Postgres::open(&opts, client.config()).await.unwrap();
    let db = raw().await;
    write_rows(&db, &s, "x:", 2_000, true).await;
    // The tick takes the only connection and starts its first slice; the call then waits for it
    // (polled together: the tick first).
    let (tick, call) = tokio::join!(sweep::tick(&store.pool, &s, 0), async {
        let conn = store.pool.get().await.unwrap();
        conn.query_one("SELECT 1", &[]).await.unwrap().get::<_, i32>(0)
    });
    assert_eq!(call, 1);
    let tick = tick.unwrap().expect("a free connection");
    assert_eq!(
        tick,
        sweep::Tick { deleted: sweep::SWEEP_SLICE as u64, more: true },
        "one slice, then the call's turn"
    );
}

/// With most of a table expired, a slice (and the writes' purge, the same statement) still reads
/// the expiry's index, with the planner free to choose (sequential scans allowed): a sequential
/// scan that stops at the slice's last row would read again, slice after slice, the dead rows the
/// ones before left at the table's start.
#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn slices_read_the_expiry_index_when_most_rows_expired() {
    let s = schema();
    let c = client(&s, url(), 0).await;
    let db = raw().await;
    write_rows(&db, &s, "x:", 20_000, true).await;
    write_rows(&db, &s, "y:", 100, false).await;
    db.batch_execute(&format!(
        "ANALYZE {s}.items, {s}.vals, {s}.idem, {s}.limiters, {s}.sem_holders, {s}.sems, {s}.locks"
    ))
    .await
    .unwrap();
    let now = now(&db).await;
    for t in sweep::TABLES {
        for (what, sql) in [("sweep", sweep::statement(t)), ("purge", t.statement().to_string())] {
            let sql = format!("EXPLAIN {}", sql.replace("{s}", &s));
            let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                if what == "sweep" { vec![&now, &sweep::SWEEP_SLICE] } else { vec![&now] };
            let plan: Vec<String> = db.query(&sql, &params).await.unwrap().iter().map(|r| r.get(0)).collect();
            let plan = plan.join("\n");
            assert!(!plan.contains("Seq Scan"), "{what} reads a whole table:\n{plan}");
        }
    }
    let sql = format!("EXPLAIN {}", super::tracker_fast::PURGE.replace("{s}", &s));
    let plan: Vec<String> = db.query(&sql, &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert!(
        !plan.join("\n").contains("Seq Scan"),
        "the fast statements' purge reads a whole table:\n{plan:?}"
    );
    c.close();
}
