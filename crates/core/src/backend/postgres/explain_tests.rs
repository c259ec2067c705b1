//! The plans of the hot statements: none reads a whole table. Each statement is explained (not
//! run) with sequential scans disabled, so that a statement with an index to use uses it, and
//! one without still shows a `Seq Scan`. Needs FLOWGUARD_TEST_POSTGRES_URL (see
//! `scripts/postgres.mjs`).

use tokio_postgres::types::ToSql;

use super::{
    catalog, limiter, limiter_fast, lock, once_fast, queue, queue_fast, semaphore, semaphore_fast, state,
    state_fast, sweep, tracker, tracker_fast, PostgresOptions, Purged, DEFAULT_SCHEMA,
};
use crate::{Client, OpenOptions};

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn hot_statements_use_an_index() {
    let url = std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL");
    // Opening a client makes the schema.
    let pg = PostgresOptions { url: url.clone(), ..Default::default() };
    Client::open(OpenOptions { postgres: Some(pg), ..Default::default() }).await.unwrap();
    let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    db.batch_execute("SET enable_seqscan = off").await.unwrap();

    let (ns, name): (&[u8], &[u8]) = (b"fg:", b"n");
    let ids: Vec<&[u8]> = vec![b"a", b"b"];
    let one: &[u8] = b"a";
    let now = 1_000i64;
    let none_i16: Vec<i16> = Vec::new();
    let none_i32: Vec<i32> = Vec::new();
    let none_i64: Vec<i64> = Vec::new();
    let none_text: Vec<Option<&str>> = Vec::new();
    let none_bytes: Vec<Option<&[u8]>> = Vec::new();
    let none_ids: Vec<&[u8]> = Vec::new();
    let columns: [&(dyn ToSql + Sync); 15] = [
        &ns,
        &name,
        &none_ids,
        &none_i16,
        &none_i32,
        &none_text,
        &none_i64,
        &none_i64,
        &none_i64,
        &none_i64,
        &none_bytes,
        &none_i64,
        &none_text,
        &none_text,
        &none_text,
    ];
    let (shard, limit, owner) = (0i32, 10i64, "o");
    let (first_class, last_class) = (0i32, 4i32);
    let none_opt_i64: Vec<Option<i64>> = Vec::new();
    let none_ttl: Option<i64> = None;
    let queue_columns: [&(dyn ToSql + Sync); 8] =
        [&ns, &name, &shard, &none_ids, &none_opt_i64, &none_opt_i64, &none_text, &none_opt_i64];
    let (status, no_text, no_bytes, yes): (i16, Option<&str>, Option<&[u8]>, bool) = (1, None, None, true);
    let statements: Vec<(&str, &str, Vec<&(dyn ToSql + Sync)>)> = vec![
        ("lock fast acquire", lock::ACQUIRE_FAST, vec![&ns, &name, &owner, &no_bytes, &limit]),
        ("lock fast release", lock::RELEASE_FAST, vec![&ns, &name, &owner, &owner, &owner]),
        (
            "item fast claim",
            tracker_fast::CLAIM,
            vec![&ns, &name, &name, &owner, &limit, &limit, &status, &no_text, &yes],
        ),
        ("item fast completion", tracker_fast::COMPLETE, vec![&ns, &name, &name, &no_text, &limit, &no_text]),
        ("item fast failure", tracker_fast::FAIL, vec![&ns, &name, &name, &no_text, &limit, &name, &owner]),
        ("purge items, fast", tracker_fast::PURGE, vec![]),
        ("queue fast enqueue", queue_fast::ENQUEUE, vec![&ns, &name, &shard, &name, &shard, &limit]),
        ("queue fast read", queue_fast::READ, vec![&ns, &name, &shard, &shard, &limit, &owner, &limit]),
        ("queue fast ack", queue_fast::ACK, vec![&ns, &name, &shard, &shard, &ids, &owner]),
        ("lock load", lock::LOAD, vec![&ns, &name]),
        ("lock load for update", lock::LOAD_LOCKED, vec![&ns, &name]),
        ("value for update", state::VALUE_LOCKED, vec![&ns, &name]),
        ("value fast set", state_fast::SET, vec![&ns, &name, &owner, &status, &limit]),
        ("value fast delete", state_fast::DELETE, vec![&ns, &name]),
        ("value fast increment", state_fast::INCREMENT, vec![&ns, &name, &limit, &none_ttl]),
        ("purge values, fast", state_fast::PURGE, vec![]),
        ("values", state::VALUES, vec![&ns, &ids]),
        ("idempotency key for update", state::IDEM_LOCKED, vec![&ns, &name]),
        ("key fast claim", once_fast::CLAIM, vec![&ns, &name, &owner, &limit]),
        (
            "key fast completion",
            once_fast::COMPLETE,
            vec![&ns, &name, &owner, &owner, &limit, &owner, &owner],
        ),
        ("key fast release", once_fast::RELEASE, vec![&ns, &name, &owner, &owner, &owner]),
        ("purge keys, fast", once_fast::PURGE, vec![]),
        ("items for update", tracker::LOAD_LOCKED, vec![&ns, &name, &ids]),
        ("items", tracker::LOAD, vec![&ns, &name, &ids]),
        ("one item and the time", tracker::LOAD_ONE, vec![&ns, &name, &one]),
        (
            "a page of a group's items",
            tracker::LIST,
            vec![&ns, &name, &first_class, &last_class, &now, &limit],
        ),
        ("items update", tracker::UPDATE, columns.to_vec()),
        ("items delete", tracker::DELETE, vec![&ns, &name, &ids]),
        ("purge values", Purged::Vals.statement(), vec![&now]),
        ("purge keys", Purged::Idem.statement(), vec![&now]),
        ("purge items", Purged::Items.statement(), vec![&now]),
        ("forget lock names", Purged::Locks.statement(), vec![&now]),
        ("limiter load", limiter::LOAD, vec![&ns, &name]),
        ("limiter load for update", limiter::LOAD_LOCKED, vec![&ns, &name]),
        ("limiter fast take", limiter_fast::TAKE, vec![&ns, &name, &limit, &limit, &limit]),
        ("purge limiters, fast", limiter_fast::PURGE, vec![]),
        ("purge limiters", Purged::Limiters.statement(), vec![&now]),
        ("semaphore name for update", semaphore::NAME_LOCKED, vec![&ns, &name]),
        ("semaphore name", semaphore::NAME, vec![&ns, &name]),
        ("semaphore fast release", semaphore_fast::RELEASE, vec![&ns, &name, &owner, &owner, &owner]),
        ("semaphore clock and holders", semaphore::CLOCK_AND_HOLDERS, vec![&ns, &name]),
        ("purge semaphore holders", Purged::SemHolders.statement(), vec![&now]),
        ("forget semaphore names", Purged::Sems.statement(), vec![&now]),
        ("catalog groups", catalog::GROUPS, vec![&ns, &name, &now]),
        ("catalog locks", catalog::LOCKS, vec![&ns, &name, &now, &now]),
        ("catalog limiters", catalog::LIMITERS, vec![&ns, &name, &now, &now]),
        ("catalog semaphores", catalog::SEMAPHORES, vec![&ns, &name, &now, &now]),
        ("catalog queues", catalog::QUEUES, vec![&ns, &name, &limit]),
        ("queue shard count", queue::COUNT, vec![&ns, &name]),
        ("queue holds ids", queue::HOLDS_IDS, vec![&ns, &name]),
        ("queue shard count dropped", queue::DROP, vec![&ns, &name]),
        ("queued ids for update", queue::LOAD_LOCKED, vec![&ns, &name, &shard, &ids]),
        ("queued ids update", queue::UPDATE, queue_columns.to_vec()),
        ("queued ids delete", queue::DELETE, vec![&ns, &name, &shard, &ids]),
        ("queue expired claims", queue::EXPIRED, vec![&ns, &name, &shard, &now]),
        ("queue claims back", queue::BACK, vec![&ns, &name, &shard, &none_ids, &none_i64]),
        ("queue claim", queue::CLAIM, vec![&ns, &name, &shard, &now, &limit, &owner, &now]),
        ("queue peek", queue::PEEK, vec![&ns, &name, &shard, &limit]),
        ("queue size", queue::SIZE, vec![&ns, &name, &shard, &now]),
        ("queue due ids locked", queue::DUE_LOCKED, vec![&ns, &name, &shard, &now, &limit]),
        ("queue delivery counts", queue::COUNTS, vec![&ns, &name, &shard, &ids]),
        ("queue delivery counts dropped", queue::COUNTS_DROP, vec![&ns, &name, &shard, &ids]),
        ("queue dead letters of ids", queue::DEAD_OF, vec![&ns, &name, &shard, &ids]),
        ("queue dead letters", queue::DEAD_LIST, vec![&ns, &name, &shard, &limit]),
        ("queue dead count", queue::DEAD_COUNT, vec![&ns, &name, &shard]),
    ];
    // The sweep's slices (`sweep`): the purges' statements with the slice a parameter.
    let sweeps: Vec<(String, String)> = sweep::TABLES
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("sweep slice {i}"), sweep::statement(*t)))
        .collect();
    let mut statements = statements;
    for (what, sql) in &sweeps {
        statements.push((what, sql, vec![&now, &limit]));
    }
    for (what, sql, params) in statements {
        let sql = format!("EXPLAIN {}", sql.replace("{s}", DEFAULT_SCHEMA));
        let plan: Vec<String> = db.query(&sql, &params).await.unwrap().iter().map(|r| r.get(0)).collect();
        let plan = plan.join("\n");
        assert!(!plan.contains("Seq Scan"), "{what} reads a whole table:\n{plan}");
        assert!(plan.contains("Index"), "{what} uses an index:\n{plan}");
    }
    // The list reads the group twice (its counts, then its page) from the primary key's index
    // alone: the index includes each record's status, lease end and expiry.
    let sql = format!("EXPLAIN {}", tracker::LIST.replace("{s}", DEFAULT_SCHEMA));
    let params: [&(dyn ToSql + Sync); 6] = [&ns, &name, &first_class, &last_class, &now, &limit];
    let plan: Vec<String> = db.query(&sql, &params).await.unwrap().iter().map(|r| r.get(0)).collect();
    let plan = plan.join("\n");
    assert_eq!(plan.matches("Index Only Scan using items_pkey").count(), 2, "the list's two passes:\n{plan}");
}

/// flowguard's sessions run with sequential scans and JIT compilation off (startup options), and
/// the URL's own options still apply: its `jit` comes after flowguard's default and wins.
#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn sessions_run_without_seqscans_and_jit() {
    let url = std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL");
    let show = |s: super::Postgres| async move {
        let conn = s.conn().await.map_err(|e| e.to_string()).unwrap();
        let mut got = Vec::new();
        for name in ["enable_seqscan", "jit", "work_mem"] {
            let row = conn.query_one(&format!("SHOW {name}"), &[]).await.unwrap();
            got.push(row.get::<_, String>(0));
        }
        got
    };
    let plain =
        super::fast_tests::store_with(PostgresOptions { url: url.clone(), ..Default::default() }, "pjit")
            .await;
    let plain = show(plain).await;
    assert_eq!(plain[..2], ["off", "off"]);
    assert_ne!(plain[2], "8MB", "the cluster's own work_mem, not the one the URL below sets");
    let sep = if url.contains('?') { '&' } else { '?' };
    let own = format!("{url}{sep}options=-c%20jit%3Don%20-c%20work_mem%3D8MB");
    let theirs =
        super::fast_tests::store_with(PostgresOptions { url: own, ..Default::default() }, "pjit").await;
    assert_eq!(show(theirs).await, ["off", "on", "8MB"]);
}
