//! `listItems` by the one statement `tracker::LIST` against the rule it writes again,
//! `rules::tracker::page`: a group with records of every status (ties in lease end and expiry,
//! ids that sort by their bytes, expired records), listed by every filter at several offsets and
//! limits, equals `page` of the same records (read by `tracker::LOAD`) at the database's time.
//! Every record's status is fixed while the test lists: the leases either ended before or run
//! for an hour, and the records either expired before or are kept an hour or more. Needs
//! FLOWGUARD_TEST_POSTGRES_URL (see `scripts/postgres.mjs`).

use std::time::Duration;

use super::{tracker, transaction, Ctx, Postgres, PostgresOptions, Sql};
use crate::error::ErrorCode;
use crate::rules::tracker::{kept, page};
use crate::tracker::{
    ItemList, ItemOp, ListFilter, ListQuery, OpResult, Record, TrackerBackend, KEEP_FOREVER_MS,
};

const HOUR: u64 = 3_600_000;

/// A store on a prefix of its own, without the sweep: only writes remove expired rows (none
/// while the test lists).
async fn store() -> Postgres {
    let url = std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL");
    let opts = PostgresOptions { url, sweep_interval_ms: Some(0), ..Default::default() };
    super::fast_tests::store_with(opts, "list").await
}

fn claim(id: &str, lease_ms: u64, max_attempts: Option<u32>) -> ItemOp {
    ItemOp::Claim {
        id: id.into(),
        owner: crate::token::new_token(),
        lease_ms,
        reclaim_completed: true,
        max_attempts,
        note: None,
    }
}

fn complete(id: &str, keep_ms: u64) -> ItemOp {
    ItemOp::Complete { id: id.into(), owner: None, keep_ms, result: Some(format!("{{\"id\":{}}}", id.len())) }
}

fn fail(id: &str, keep_ms: u64) -> ItemOp {
    ItemOp::Fail { id: id.into(), owner: None, error: format!("boom {id}"), keep_ms }
}

/// Applies `ops` in one call (one time: the claims give one lease end, the finishes one expiry).
async fn apply(s: &Postgres, group: &str, ops: Vec<ItemOp>, retention_ms: u64) -> Vec<OpResult> {
    let r = s.apply(group, &ops, retention_ms).await.unwrap();
    assert!(r.iter().all(|r| r.outcome == crate::tracker::Outcome::Done), "{r:?}");
    r
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// The records of `ids` (by `tracker::LOAD`) and the database's time, read after them.
async fn records(s: &Postgres, group: &str, ids: &[String]) -> (Vec<(String, Record)>, i64) {
    async fn read(c: &Ctx<'_, '_>, group: &str, ids: &[String]) -> Sql<(Vec<(String, Record)>, i64)> {
        let wanted: Vec<&[u8]> = ids.iter().map(|id| id.as_bytes()).collect();
        let rows = c.query(tracker::LOAD, &[&c.ns(), &group.as_bytes(), &wanted]).await?;
        let now = c.now().await?;
        Ok((rows.iter().map(tracker::from_row).collect::<Sql<Vec<_>>>()?, now))
    }
    async fn run(
        s: &Postgres,
        group: &str,
        ids: &[String],
    ) -> crate::error::Result<(Vec<(String, Record)>, i64)> {
        transaction!(s, |c| read(&c, group, ids))
    }
    run(s, group, ids).await.unwrap()
}

/// A page by `tracker::LIST` with its clock replaced by `$7` (`tracker::list_by`), at `now`.
async fn list_at(s: &Postgres, sql: &str, group: &str, q: ListQuery, now: i64) -> ItemList {
    async fn run(
        s: &Postgres,
        sql: &str,
        group: &str,
        q: ListQuery,
        now: i64,
    ) -> crate::error::Result<ItemList> {
        transaction!(s, |c| tracker::list_by(&c, sql, group, q, Some(now)))
    }
    run(s, sql, group, q, now).await.unwrap()
}

/// A completion or a failure of an id, kept so long.
type Finish = fn(&str, u64) -> ItemOp;

const FILTERS: [ListFilter; 6] = [
    ListFilter::All,
    ListFilter::InProgress,
    ListFilter::Abandoned,
    ListFilter::Failed,
    ListFilter::Dead,
    ListFilter::Completed,
];

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn list_items_equals_the_rule() {
    let s = store().await;
    let g = "g";
    let mut all: Vec<String> = Vec::new();
    // Ids whose bytes sort otherwise than their characters might (a NUL, upper case, UTF-8).
    let odd = ["a\u{0}", "a", "B", "b", "é", "z", "ü", "Ω\u{0}x"];

    // Expired before the lists: completions kept 1 ms, a claim of 1 ms kept 0 ms after its lease.
    let gone = ids("gone-", 3);
    apply(&s, g, gone.iter().map(|id| claim(id, HOUR, None)).collect(), HOUR).await;
    apply(&s, g, gone.iter().map(|id| complete(id, 1)).collect(), HOUR).await;
    apply(&s, g, vec![claim("gone-lease", 1, None)], 0).await;
    all.extend(gone);
    all.push("gone-lease".into());

    // Abandoned: leases of 1 ms (ties in lease end within a call), in two calls.
    for (n, prefix) in [(5, "ab-"), (3, "ab2-")] {
        let batch = ids(prefix, n);
        apply(&s, g, batch.iter().map(|id| claim(id, 1, None)).collect(), HOUR).await;
        all.extend(batch);
    }
    // In progress: leases of an hour, in two calls (ties within each), the odd ids among them.
    let mut live = ids("ip-", 6);
    live.extend(odd.iter().map(|id| id.to_string()));
    apply(&s, g, live.iter().map(|id| claim(id, HOUR, None)).collect(), HOUR).await;
    all.extend(live);
    let live2 = ids("ip2-", 2);
    apply(&s, g, live2.iter().map(|id| claim(id, 2 * HOUR, None)).collect(), HOUR).await;
    all.extend(live2);

    // Completed (ties in expiry within a call; some kept forever), failed, dead (maxAttempts 1).
    let finished: Vec<(Vec<String>, Option<u32>, Finish, u64)> = vec![
        (ids("c-", 7), None, complete, HOUR),
        (odd.iter().map(|id| format!("c{id}")).collect(), None, complete, 2 * HOUR),
        (ids("cf-", 3), None, complete, KEEP_FOREVER_MS),
        (ids("f-", 5), None, fail, HOUR),
        (odd.iter().map(|id| format!("f{id}")).collect(), Some(3), fail, 2 * HOUR),
        (ids("d-", 4), Some(1), fail, HOUR),
        (ids("d2-", 2), Some(1), fail, KEEP_FOREVER_MS),
    ];
    for (batch, max, finish, keep) in finished {
        apply(&s, g, batch.iter().map(|id| claim(id, HOUR, max)).collect(), HOUR).await;
        apply(&s, g, batch.iter().map(|id| finish(id, keep)).collect(), HOUR).await;
        all.extend(batch);
    }
    // Every 1 ms lease and keep over.
    tokio::time::sleep(Duration::from_millis(20)).await;

    // (The expired records' rows may be gone already: purged by a write or swept.)
    let (recs, now) = records(&s, g, &all).await;
    let kept_recs: Vec<&(String, Record)> = recs.iter().filter(|(_, r)| kept(r.x, now)).collect();
    assert_eq!(kept_recs.len(), all.len() - 4, "the expired ones are not kept");
    let rule = |q: ListQuery| page(kept_recs.iter().map(|(id, r)| (id, r)), now, q);

    // Every status is there, and ties are.
    let counts = rule(ListQuery { filter: ListFilter::All, offset: 0, limit: 10_000 }).counts;
    assert_eq!(
        (counts.in_progress, counts.abandoned, counts.completed, counts.failed, counts.dead),
        (16, 8, 18, 13, 6)
    );
    let total = counts.total();
    let mut checked = 0;
    for filter in FILTERS {
        let n = counts.of(filter);
        let pairs = [
            (0, 1),
            (0, 3),
            (1, 1),
            (2, 5),
            (0, 100),
            (3, 10_000),
            (n.saturating_sub(1), 1),
            (n.saturating_sub(2), 5),
            (n, 1),
            (n + 5, 10),
            (total, 100),
            (u64::from(u32::MAX), 10_000),
        ];
        // For all: pages that start just before, at and after each class's first item.
        let mut starts = Vec::new();
        if filter == ListFilter::All {
            let mut before = 0u64;
            for n in [counts.in_progress, counts.abandoned, counts.failed, counts.dead, counts.completed] {
                starts.extend([(before.saturating_sub(1), 3), (before, 2), (before + 1, 40)]);
                before += n;
            }
        }
        for (offset, limit) in pairs.into_iter().chain(starts) {
            let q = ListQuery { filter, offset, limit };
            let got = s.list(g, q, HOUR).await.unwrap();
            let want = rule(q);
            assert_eq!(got, want, "{q:?}");
            checked += 1;
        }
        // Paged by 1 to the end: each item once, in the rule's order.
        let mut offset = Some(0);
        let mut seen = Vec::new();
        while let Some(o) = offset {
            let got = s.list(g, ListQuery { filter, offset: o, limit: 1 }, HOUR).await.unwrap();
            seen.extend(got.items.into_iter().map(|i| i.id));
            offset = got.next_offset;
        }
        let want: Vec<String> =
            rule(ListQuery { filter, offset: 0, limit: 10_000 }).items.into_iter().map(|i| i.id).collect();
        assert_eq!(seen, want, "{filter:?} paged by 1");
    }
    assert_eq!(checked, 72 + 15);

    // At each lease end and expiry of the group's rows (the expired ones' included), a ms before
    // and a ms after: the statement with its clock given equals the rule at that time (the rows
    // at `l == now` abandoned, at `x == now` no longer kept).
    let clock = "floor(extract(epoch FROM clock_timestamp()) * 1000)::int8";
    assert_eq!(tracker::LIST.matches(clock).count(), 1, "LIST reads the clock once");
    let at_sql = tracker::LIST.replace(clock, "$7::int8");
    let times: std::collections::BTreeSet<i64> =
        recs.iter().flat_map(|(_, r)| [r.l, r.x]).flat_map(|t| [t - 1, t, t + 1]).collect();
    let mut checked = 0;
    for &at in &times {
        let at_rule =
            |q: ListQuery| page(recs.iter().filter(|(_, r)| kept(r.x, at)).map(|(id, r)| (id, r)), at, q);
        for filter in FILTERS {
            let n = at_rule(ListQuery { filter, offset: 0, limit: 1 }).counts.of(filter);
            let total = at_rule(ListQuery { filter, offset: 0, limit: 1 }).counts.total();
            for (offset, limit) in [(0, 10_000), (1, 2), (n.saturating_sub(1), 1), (n, 3), (total / 2, 7)] {
                let q = ListQuery { filter, offset, limit };
                assert_eq!(list_at(&s, &at_sql, g, q, at).await, at_rule(q), "{q:?} at {at}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 6 * 5 * 3 * 8, "{checked} lists at {} times", times.len());

    // A group without records: one row, nothing in it.
    for filter in FILTERS {
        let q = ListQuery { filter, offset: 0, limit: 10 };
        let empty = s.list("none", q, HOUR).await.unwrap();
        assert_eq!(empty, ItemList { counts: Default::default(), items: Vec::new(), next_offset: None });
    }
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn list_items_refuses_a_status_code_no_record_has() {
    let s = store().await;
    apply(&s, "g", vec![claim("a", HOUR, None), claim("b", HOUR, None)], HOUR).await;
    let (db, conn) = tokio_postgres::connect(
        &std::env::var("FLOWGUARD_TEST_POSTGRES_URL").unwrap(),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let sql = format!("UPDATE {}.items SET s = 5 WHERE ns = $1 AND grp = $2 AND id = $3", s.schema);
    assert_eq!(db.execute(&sql, &[&s.ns.as_bytes(), &"g".as_bytes(), &"b".as_bytes()]).await.unwrap(), 1);
    // Even on a page that does not show it.
    let q = ListQuery { filter: ListFilter::All, offset: 0, limit: 1 };
    let e = s.list("g", q, HOUR).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Storage, "{e:?}");
}
