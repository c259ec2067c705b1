//! The fast statements (`fast`): each is shown taken (the store's count of decided fast
//! statements goes up) and its result, and the record it wrote, equal to what the rule writes at
//! the statement's time (what the transaction writes); each case it leaves is shown left to the
//! transaction, which decides it. Needs FLOWGUARD_TEST_POSTGRES_URL (see `scripts/postgres.mjs`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_postgres::AsyncMessage;

use super::{tracker, transaction, Ctx, Postgres, PostgresOptions, Sql};
use crate::lock::{Attempt, LockBackend, Refusal};
use crate::rules::tracker::{decide, fresh, kept, write, Decision};
use crate::tracker::{ItemOp, ItemStatus, OpResult, Outcome, Record, TrackerBackend, NEVER};
use crate::{Client, OpenOptions};

const RETENTION: u64 = 3_600_000;

fn url() -> String {
    std::env::var("FLOWGUARD_TEST_POSTGRES_URL").expect("FLOWGUARD_TEST_POSTGRES_URL")
}

/// A store on a prefix of its own (the client made the schema).
async fn store() -> Postgres {
    store_with(PostgresOptions { url: url(), ..Default::default() }, "fast").await
}

/// A store of `opts` on a prefix of its own starting with `tag` (the client made the schema).
pub(super) async fn store_with(opts: PostgresOptions, tag: &str) -> Postgres {
    let prefix = format!("{tag}{}:", crate::token::new_token());
    let client = Client::open(OpenOptions {
        postgres: Some(opts.clone()),
        prefix: Some(prefix),
        ..Default::default()
    })
    .await
    .unwrap();
    Postgres::open(&opts, client.config()).await.unwrap()
}

async fn load(c: &Ctx<'_, '_>, group: &str, id: &str) -> Sql<Option<Record>> {
    let ids: Vec<&[u8]> = vec![id.as_bytes()];
    let rows = c.query(tracker::LOAD, &[&c.ns(), &group.as_bytes(), &ids]).await?;
    rows.first().map(|r| tracker::from_row(r).map(|(_, rec)| rec)).transpose()
}

async fn record(store: &Postgres, group: &str, id: &str) -> Option<Record> {
    async fn read(store: &Postgres, group: &str, id: &str) -> crate::error::Result<Option<Record>> {
        transaction!(store, |c| load(&c, group, id))
    }
    read(store, group, id).await.unwrap()
}

/// Makes `n` pooled connections and gives them back, so that `n` calls started together each
/// find one ready and send their statements at once.
pub(super) async fn warm(store: &Postgres, n: usize) {
    let held = futures_util::future::join_all((0..n).map(|_| store.conn())).await;
    assert!(held.iter().all(|c| c.is_ok()));
}

pub(super) fn taken(store: &Postgres) -> u64 {
    store.fast_taken.load(Ordering::Relaxed)
}

/// Applies `op`; when `fast`, asserts its fast statement decided it and wrote what the rule
/// writes at its time (the record's update time), or, for a refusal, wrote nothing; else that
/// the transaction decided it.
async fn apply(store: &Postgres, group: &str, op: ItemOp, fast: bool) -> OpResult {
    let id = op.id().to_string();
    let before = record(store, group, &id).await;
    let count = taken(store);
    let r = store.apply(group, std::slice::from_ref(&op), RETENTION).await.unwrap().remove(0);
    assert_eq!(taken(store) - count, u64::from(fast), "{op:?} on {before:?}: fast statement taken");
    if fast && r.outcome != Outcome::Done {
        // A refusal answered from the record the statement read: nothing written, and the same
        // answer as the transaction's for the same op now (the records here do not change
        // status meanwhile: leases of a minute).
        assert_eq!(record(store, group, &id).await, before, "{op:?}: refused, nothing written");
        async fn by_transaction(
            store: &Postgres,
            group: &str,
            op: &ItemOp,
        ) -> crate::error::Result<Vec<OpResult>> {
            transaction!(store, |c| tracker::apply(&c, group, std::slice::from_ref(op), RETENTION))
        }
        let tx = by_transaction(store, group, &op).await.unwrap().remove(0);
        assert!(matches!(r.outcome, Outcome::Busy(_) | Outcome::Refused(_)), "{op:?}: {:?}", r.outcome);
        assert_eq!(r, tx, "{op:?}: the statement's refusal and the transaction's");
    } else if fast {
        let after = record(store, group, &id).await.expect("a record");
        let now = after.u;
        let before = before.filter(|r| kept(r.x, now));
        assert!(matches!(decide(&op, before.as_ref(), now), Decision::Take | Decision::Finish));
        let mut expected = before.unwrap_or_else(|| fresh(now));
        write(&op, &mut expected, now, RETENTION);
        assert_eq!(after, expected, "{op:?}: the record written");
        assert_eq!(r.item, expected.to_state(&id, now), "{op:?}: the result");
        assert_eq!(r.outcome, Outcome::Done);
    }
    r
}

fn claim(id: &str, lease_ms: u64, max_attempts: Option<u32>, reclaim: bool) -> ItemOp {
    ItemOp::Claim {
        id: id.into(),
        owner: crate::token::new_token(),
        lease_ms,
        reclaim_completed: reclaim,
        max_attempts,
        note: Some("n\"ote".into()),
    }
}

fn owner(r: &OpResult) -> Option<String> {
    r.owner.clone()
}

fn complete(id: &str, owner: Option<String>) -> ItemOp {
    ItemOp::Complete { id: id.into(), owner, keep_ms: 60_000, result: Some("{\"ok\":1}".into()) }
}

fn fail(id: &str, owner: Option<String>) -> ItemOp {
    ItemOp::Fail { id: id.into(), owner, error: "bo\"om ü".into(), keep_ms: 60_000 }
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn tracker_fast_statements_write_what_the_rules_write() {
    let s = store().await;
    let g = "g";
    // A new id; then busy: the transaction refuses it.
    let c = apply(&s, g, claim("a", 60_000, Some(2), false), true).await;
    let busy = apply(&s, g, claim("a", 60_000, None, false), true).await;
    assert_eq!(busy.outcome, Outcome::Busy(ItemStatus::InProgress));
    // Failed at its first attempt (timeline implied), claimed again (stored), dead at maxAttempts.
    apply(&s, g, fail("a", owner(&c)), true).await;
    let c = apply(&s, g, claim("a", 60_000, Some(2), false), true).await;
    apply(&s, g, fail("a", owner(&c)), true).await;
    let dead = apply(&s, g, claim("a", 60_000, None, true), true).await;
    assert_eq!(dead.outcome, Outcome::Busy(ItemStatus::Dead));
    // Dead at the first attempt: its implied timeline is stored with the death.
    let c = apply(&s, g, claim("b", 60_000, Some(1), false), true).await;
    apply(&s, g, fail("b", owner(&c)), true).await;
    // Completed by its owner; another owner is refused by the transaction; re-claimed with
    // reclaimCompleted only; completed without an owner.
    let c = apply(&s, g, claim("c", 60_000, None, false), true).await;
    let refused = apply(&s, g, complete("c", Some("other".into())), false).await;
    assert!(matches!(refused.outcome, Outcome::Refused(_)));
    apply(&s, g, complete("c", owner(&c)), true).await;
    let done = apply(&s, g, claim("c", 60_000, None, false), true).await;
    assert_eq!(done.outcome, Outcome::Busy(ItemStatus::Completed));
    apply(&s, g, claim("c", 60_000, None, true), true).await;
    apply(&s, g, complete("c", None), true).await;
    // Abandoned (its lease ended) and claimed again, past the timeline's 20 entries.
    for _ in 0..12 {
        apply(&s, g, claim("d", 1, None, false), true).await;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let d = record(&s, g, "d").await.unwrap();
    assert_eq!((d.a, d.t.len()), (12, 20));
    // A completion of an abandoned item by its owner.
    let c = apply(&s, g, claim("e", 1, None, false), true).await;
    tokio::time::sleep(Duration::from_millis(3)).await;
    apply(&s, g, complete("e", owner(&c)), true).await;
    // An expired record counts as none: a fresh one is written.
    s.apply(g, &[claim("f", 1, None, false)], 0).await.unwrap();
    tokio::time::sleep(Duration::from_millis(3)).await;
    let f = apply(&s, g, claim("f", 60_000, None, false), true).await;
    assert_eq!(f.item.attempts, 1);
    // A completion with nothing to complete, an unset: the transaction.
    apply(&s, g, complete("none", None), false).await;
    apply(&s, g, ItemOp::Unset { id: "c".into() }, false).await;
    // A completion kept forever.
    let c = apply(&s, g, claim("h", 60_000, None, false), true).await;
    let op = ItemOp::Complete { id: "h".into(), owner: owner(&c), keep_ms: u64::MAX, result: None };
    apply(&s, g, op, true).await;
    assert_eq!(record(&s, g, "h").await.unwrap().x, NEVER);
}

/// A connection that listens on the store's channel, as a waiter's, and the payloads it hears
/// for names of the store's own prefix (the channel is the schema's: the stores of the other
/// tests run at the same time send on it too).
pub(super) async fn listen(
    s: &Postgres,
) -> (tokio_postgres::Client, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let (db, mut conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls).await.unwrap();
    let (tx, heard) = tokio::sync::mpsc::unbounded_channel();
    let mut messages = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
    let ns = s.ns.clone();
    tokio::spawn(async move {
        while let Some(Ok(m)) = messages.next().await {
            if let AsyncMessage::Notification(n) = m {
                let ours = matches!(
                    super::notify::parse(n.payload()),
                    Some(crate::wakeup::Release::One { ns: p, .. }) if p == ns
                );
                if ours {
                    let _ = tx.send(n.payload().to_string());
                }
            }
        }
    });
    db.batch_execute(&format!("LISTEN {}", s.schema)).await.unwrap();
    (db, heard)
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn lock_fast_statements_acquire_and_release_as_the_rules_do() {
    let s = store().await;
    let (db, mut heard) = listen(&s).await;

    let acquire = |owner: &'static str, lease_ms: u64| {
        let s = &s;
        async move {
            let count = taken(s);
            let a = s.try_acquire("L", owner, lease_ms, Some("lab")).await.unwrap();
            (a, taken(s) - count == 1)
        }
    };
    let granted = |fence, lease_ms| Attempt {
        acquired: true,
        fence,
        remaining_ms: lease_ms,
        holder: Some("lab".into()),
    };
    // The database's clock in µs: the fence floor (`lock::next_fence`).
    let clock_us = {
        let db = &db;
        move || async move {
            let sql = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::int8";
            db.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) as u64
        }
    };
    // A new name: the clock's fence. Held: refused from the row the statement read.
    let before = clock_us().await;
    let (a, fast) = acquire("o1", 60_000).await;
    assert!(a.fence >= before && a.fence <= clock_us().await, "the clock's fence: {a:?}, {before}");
    assert_eq!((a.clone(), fast), (granted(a.fence, 60_000), true));
    let (held, fast) = acquire("o2", 60_000).await;
    assert!(!held.acquired && fast && held.fence == a.fence, "{held:?}");
    assert!(
        held.holder.as_deref() == Some("lab") && (50_000..=60_000).contains(&held.remaining_ms),
        "{held:?}"
    );
    // Released by another owner: the transaction refuses; by its owner: released, announced.
    let count = taken(&s);
    let r = s.release("L", "o2").await.unwrap();
    assert_eq!((r.released, r.reason, taken(&s) - count), (false, Some(Refusal::NotOwner), 0));
    let r = s.release("L", "o1").await.unwrap();
    assert_eq!((r.released, r.reason, taken(&s) - count), (true, None, 1));
    let payload = tokio::time::timeout(Duration::from_secs(30), heard.recv()).await.unwrap().unwrap();
    assert_eq!(payload, super::notify::payload(crate::wakeup::Topic::Lock, &s.ns, "L"));
    // Released: the clock's fence, past the last. Its lease ended: the clock's again.
    let before = clock_us().await;
    let (b, fast) = acquire("o2", 1).await;
    assert!(b.fence > a.fence && b.fence >= before, "{b:?} after {a:?}");
    assert_eq!((b.clone(), fast), (granted(b.fence, 1), true));
    tokio::time::sleep(Duration::from_millis(3)).await;
    // A last fence ahead of the clock (as after a primary whose clock ran ahead): one above it.
    let ahead = (b.fence + 1_000_000_000) as i64;
    let sql = format!("UPDATE {}.locks SET fence = $3 WHERE ns = $1 AND name = $2", s.schema);
    assert_eq!(db.execute(&sql, &[&s.ns.as_bytes(), &"L".as_bytes(), &ahead]).await.unwrap(), 1);
    assert_eq!(acquire("o3", 60_000).await, (granted(ahead as u64 + 1, 60_000), true));
    // A release by an owner whose lease ended, the lock held by another: the transaction refuses.
    let r = s.release("L", "o2").await.unwrap();
    assert_eq!((r.released, r.reason), (false, Some(Refusal::NotOwner)));
}

/// The row of `id` in shard 0 of queue `q`: (due, first, owner, deadline).
type QueuedRow = (Option<i64>, Option<i64>, Option<String>, Option<i64>);

async fn queued(db: &tokio_postgres::Client, s: &Postgres, q: &str, id: &str) -> Option<QueuedRow> {
    let sql = format!(
        "SELECT due, first, owner, deadline FROM {}.q_ids WHERE ns = $1 AND queue = $2 AND shard = 0 AND id = $3",
        s.schema
    );
    let row = db.query_opt(&sql, &[&s.ns.as_bytes(), &q.as_bytes(), &id.as_bytes()]).await.unwrap();
    row.map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn queue_fast_enqueue_decides_as_the_rules_do() {
    use crate::queue::{Debounce, EnqueueOutcome, QueueBackend, ShardRef};
    use crate::rules::queue::{self as rules, EnqueueWrite, Place};

    let s = store().await;
    let (db, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let at = ShardRef { queue: "Q", shard: 0, shards: 1 };
    let enqueue = |id: &'static str, delay_ms: u64, debounce: Debounce, at: ShardRef<'static>| {
        let s = &s;
        async move {
            let count = taken(s);
            let r = s.enqueue(at, &[id.to_string()], delay_ms, debounce).await;
            (r, taken(s) - count == 1)
        }
    };
    let one = |r: crate::error::Result<Vec<(EnqueueOutcome, i64)>>| r.unwrap().remove(0);

    // A queue with no count recorded: the transaction records it.
    let (r, fast) = enqueue("a", 0, Debounce::Off, at).await;
    assert_eq!((one(r).0, fast), (EnqueueOutcome::Added, false));
    // A new id, with a delay: added by the statement, at its clock + the delay, as the rule says.
    let (r, fast) = enqueue("b", 5_000, Debounce::Off, at).await;
    let (outcome, due) = one(r);
    assert!(fast, "a new id: the fast statement");
    let now = due - 5_000;
    let rule = rules::enqueue(Place::Absent, Debounce::Off, None, rules::due(now, 5_000), now);
    assert_eq!((outcome, due, rule.write), (rule.outcome, rule.due, EnqueueWrite::Wait(due)));
    assert_eq!(queued(&db, &s, "Q", "b").await, Some((Some(due), None, None, None)));
    // Waiting: a duplicate, its due time kept, nothing written.
    let (r, fast) = enqueue("b", 0, Debounce::Off, at).await;
    assert_eq!((one(r), fast), ((EnqueueOutcome::Duplicate, due), true));
    assert_eq!(queued(&db, &s, "Q", "b").await, Some((Some(due), None, None, None)));
    // Debounced: the transaction.
    let (r, fast) = enqueue("b", 0, Debounce::On { max_delay_ms: None }, at).await;
    assert_eq!((one(r).0, fast), (EnqueueOutcome::Debounced, false));
    // Claimed: the transaction writes its enqueue-again time.
    let claim = s.claim(at, "reader", 10, 60_000, None).await.unwrap();
    assert!(claim.items.iter().any(|(id, _)| id == "a"), "{claim:?}");
    let (r, fast) = enqueue("a", 0, Debounce::Off, at).await;
    assert_eq!((one(r).0, fast), (EnqueueOutcome::Claimed, false));
    assert!(queued(&db, &s, "Q", "a").await.unwrap().0.is_some(), "its enqueue-again time");
    // A dead letter stays one: answered by the statement, nothing written.
    let sql = format!(
        "INSERT INTO {}.q_dead (ns, queue, shard, id, died, n) VALUES ($1, $2, 0, $3, 1, 3)",
        s.schema
    );
    db.execute(&sql, &[&s.ns.as_bytes(), &"Q".as_bytes(), &"d".as_bytes()]).await.unwrap();
    let (r, fast) = enqueue("d", 0, Debounce::Off, at).await;
    assert_eq!((one(r), fast), ((EnqueueOutcome::Dead, 0), true));
    assert_eq!(queued(&db, &s, "Q", "d").await, None);
    // Another shard count while the queue holds ids: the transaction refuses it.
    let (r, fast) = enqueue("x", 0, Debounce::Off, ShardRef { queue: "Q", shard: 0, shards: 2 }).await;
    let e = r.unwrap_err();
    assert!(e.message.contains("enqueued with shards = 1"), "{e:?}");
    assert!(!fast);
    assert_eq!(queued(&db, &s, "Q", "x").await, None);
    // Several ids: the transaction.
    let count = taken(&s);
    let r = s.enqueue(at, &["e".to_string(), "d".to_string()], 0, Debounce::Off).await.unwrap();
    assert_eq!((r[0].0, r[1], taken(&s) - count), (EnqueueOutcome::Added, (EnqueueOutcome::Dead, 0), 0));
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn queue_fast_enqueues_of_one_new_id_at_once_add_it_once() {
    use crate::queue::{Debounce, EnqueueOutcome, QueueBackend, ShardRef};

    let s = std::sync::Arc::new(store().await);
    let at = ShardRef { queue: "Q", shard: 0, shards: 1 };
    // The queue's count recorded first, so every enqueue below may take the fast statement.
    s.enqueue(at, &["first".to_string()], 0, Debounce::Off).await.unwrap();
    warm(&s, 8).await;
    let count = taken(&s);
    for round in 0..20 {
        let id = format!("id{round}");
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(8));
        let calls = (0..8).map(|_| {
            let (s, barrier, id) = (s.clone(), barrier.clone(), id.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                s.enqueue(at, &[id], 0, Debounce::Off).await.unwrap().remove(0)
            })
        });
        let got: Vec<(EnqueueOutcome, i64)> =
            futures_util::future::join_all(calls).await.into_iter().map(|r| r.unwrap()).collect();
        let added: Vec<_> = got.iter().filter(|(o, _)| *o == EnqueueOutcome::Added).collect();
        assert_eq!(added.len(), 1, "round {round}: {got:?}");
        let due = added[0].1;
        assert!(
            got.iter().all(|g| *g == (EnqueueOutcome::Added, due) || *g == (EnqueueOutcome::Duplicate, due)),
            "{got:?}"
        );
    }
    // The first insert of each round is the fast statement's (no transaction runs before a fast
    // statement found the id taken).
    assert!(taken(&s) - count >= 20, "fast statements taken: {}", taken(&s) - count);
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn queue_fast_read_claims_as_the_transaction_does() {
    use crate::queue::{Debounce, QueueBackend, ShardRef};

    let s = store().await;
    let (db, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let at = ShardRef { queue: "R", shard: 0, shards: 1 };
    let read = |limit: u64, visibility_ms: u64, max_deliveries: Option<u64>, at: ShardRef<'static>| {
        let s = &s;
        async move {
            let count = taken(s);
            let r = s.claim(at, "reader", limit, visibility_ms, max_deliveries).await;
            (r, taken(s) - count == 1)
        }
    };
    let ids = |r: &crate::queue::ShardClaim| r.items.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>();

    // No count recorded: an empty read, by the statement.
    let (r, fast) = read(10, 60_000, None, at).await;
    let r = r.unwrap();
    assert!(r.items.is_empty() && fast, "{r:?}");
    // Due ids, oldest first, claimed until the statement's clock + the visibility, as the rules
    // say; one not due yet left waiting.
    let new: Vec<String> = ["c", "a", "b"].iter().map(|s| s.to_string()).collect();
    s.enqueue(at, &new, 0, Debounce::Off).await.unwrap();
    s.enqueue(at, &["later".to_string()], 60_000, Debounce::Off).await.unwrap();
    let dues: Vec<i64> = {
        let mut d = Vec::new();
        for id in ["c", "a", "b"] {
            d.push(queued(&db, &s, "R", id).await.unwrap().0.unwrap());
        }
        d
    };
    let (r, fast) = read(2, 60_000, None, at).await;
    let r = r.unwrap();
    assert!(fast);
    let mut want: Vec<(String, i64)> = ["c", "a", "b"].iter().map(|s| s.to_string()).zip(dues).collect();
    want.sort_by(|x, y| (x.1, &x.0).cmp(&(y.1, &y.0)));
    assert_eq!(r.items, want[..2].to_vec());
    for (id, due) in &r.items {
        let now = r.visible_until - 60_000;
        assert!(crate::rules::queue::deliverable(*due, now), "{id} due at {due}, read at {now}");
        let row = queued(&db, &s, "R", id).await.unwrap();
        assert_eq!(row, (None, None, Some("reader".into()), Some(r.visible_until)), "{id}");
    }
    // The rest: the third id; then nothing due (the later one waits).
    let (r, fast) = read(10, 60_000, None, at).await;
    assert_eq!((ids(&r.unwrap()), fast), (vec![want[2].0.clone()], true));
    let (r, fast) = read(10, 60_000, None, at).await;
    assert_eq!((r.unwrap().items, fast), (vec![], true));
    assert_eq!(queued(&db, &s, "R", "later").await.unwrap().2, None);
    // With maxDeliveries: the transaction.
    s.enqueue(at, &["m".to_string()], 0, Debounce::Off).await.unwrap();
    let (r, fast) = read(10, 1, Some(5), at).await;
    assert_eq!((ids(&r.unwrap()), fast), (vec!["m".to_string()], false));
    // An expired claim in the shard ("m", visible 1 ms): the transaction returns it to waiting
    // and claims it again.
    tokio::time::sleep(Duration::from_millis(3)).await;
    let (r, fast) = read(10, 60_000, None, at).await;
    assert_eq!((ids(&r.unwrap()), fast), (vec!["m".to_string()], false));
    // Another shard count while the queue holds ids: the transaction refuses it.
    let (r, fast) = read(10, 60_000, None, ShardRef { queue: "R", shard: 0, shards: 2 }).await;
    assert!(r.unwrap_err().message.contains("enqueued with shards = 1") && !fast);
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn queue_fast_reads_at_once_take_each_id_once() {
    use crate::queue::{Debounce, QueueBackend, ShardRef};

    let s = std::sync::Arc::new(store().await);
    let at = ShardRef { queue: "R", shard: 0, shards: 1 };
    warm(&s, 8).await;
    for round in 0..10 {
        let ids: Vec<String> = (0..60).map(|i| format!("r{round}-{i:02}")).collect();
        s.enqueue(at, &ids, 0, Debounce::Off).await.unwrap();
        let count = taken(&s);
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(8));
        let reads = (0..8).map(|i| {
            let (s, barrier) = (s.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                s.claim(at, &format!("reader{i}"), 10, 60_000, None).await.unwrap()
            })
        });
        let got: Vec<String> = futures_util::future::join_all(reads)
            .await
            .into_iter()
            .flat_map(|r| r.unwrap().items.into_iter().map(|(id, _)| id))
            .collect();
        // Readers skip the rows others hold: each id taken at most once, and the 60 all taken by
        // the 8 reads of 10 unless one read found them all held (then it takes fewer).
        let mut seen = got.clone();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), got.len(), "round {round}: an id taken twice");
        assert!(
            got.len() <= 60 && taken(&s) - count == 8,
            "round {round}: {} ids, fast {}",
            got.len(),
            taken(&s) - count
        );
        // What is left is claimed by the next reads.
        let rest = s.claim(at, "last", 100, 60_000, None).await.unwrap();
        assert_eq!(got.len() + rest.items.len(), 60, "round {round}");
    }
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn queue_fast_ack_removes_as_the_transaction_does() {
    use crate::queue::{Debounce, QueueBackend, SettleAction, SettleOutcome, ShardRef};

    let s = store().await;
    let (db, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let at = ShardRef { queue: "A", shard: 0, shards: 1 };
    let strings = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let ack = |owner: &'static str, ids: Vec<String>, at: ShardRef<'static>| {
        let s = &s;
        async move {
            let count = taken(s);
            let r = s.settle(at, owner, &ids, SettleAction::Ack).await;
            (r, taken(s) - count == 1)
        }
    };
    let done = |requeued| (SettleOutcome::Done { requeued }, None);
    s.enqueue(at, &strings(&["a", "b", "c", "d", "keep"]), 0, Debounce::Off).await.unwrap();
    let r = s.claim(at, "reader", 4, 60_000, None).await.unwrap();
    assert_eq!(r.items.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["a", "b", "c", "d"]);

    // Claimed by the owner, live: acked by the statement, in the caller's order, rows gone.
    let (r, fast) = ack("reader", strings(&["b", "a"]), at).await;
    assert_eq!((r.unwrap(), fast), (vec![done(false), done(false)], true));
    assert_eq!((queued(&db, &s, "A", "a").await, queued(&db, &s, "A", "b").await), (None, None));
    // Another owner; a repeated id; an id enqueued again while claimed: the transaction.
    let (r, fast) = ack("other", strings(&["c"]), at).await;
    assert_eq!((r.unwrap(), fast), (vec![(SettleOutcome::NotOwner, None)], false));
    let (r, fast) = ack("reader", strings(&["c", "c"]), at).await;
    assert_eq!((r.unwrap(), fast), (vec![done(false), (SettleOutcome::NotClaimed, None)], false));
    s.enqueue(at, &strings(&["d"]), 0, Debounce::Off).await.unwrap();
    let (r, fast) = ack("reader", strings(&["d"]), at).await;
    let (outcome, due) = r.unwrap().remove(0);
    assert_eq!((outcome, due.is_some(), fast), (SettleOutcome::Done { requeued: true }, true, false));
    // An id not claimed (d waits again): the transaction answers, nothing written by the statement.
    let (r, fast) = ack("reader", strings(&["d"]), at).await;
    assert_eq!((r.unwrap(), fast), (vec![(SettleOutcome::NotClaimed, None)], false));
    // A delivery count (a read with maxDeliveries) goes with the ack.
    let r = s.claim(at, "counted", 10, 60_000, Some(3)).await.unwrap();
    let counted: Vec<String> = r.items.iter().map(|(id, _)| id.clone()).collect();
    assert!(counted.contains(&"d".to_string()), "{counted:?}");
    let counts =
        format!("SELECT count(*) FROM {}.q_counts WHERE ns = $1 AND queue = $2 AND id = $3", s.schema);
    let n = |id: &'static str| {
        let (db, counts, ns) = (&db, &counts, s.ns.as_bytes().to_vec());
        async move {
            db.query_one(counts, &[&ns, &"A".as_bytes(), &id.as_bytes()]).await.unwrap().get::<_, i64>(0)
        }
    };
    assert_eq!(n("d").await, 1);
    s.enqueue(at, &strings(&["more"]), 60_000, Debounce::Off).await.unwrap();
    let (r, fast) = ack("counted", strings(&["d"]), at).await;
    assert_eq!((r.unwrap(), fast), (vec![done(false)], true));
    assert_eq!(n("d").await, 0);
    // An expired claim in the shard: the transaction (which returns it to waiting after the ack).
    s.enqueue(at, &strings(&["e", "f"]), 0, Debounce::Off).await.unwrap();
    let f = s.claim(at, "long", 1, 60_000, None).await.unwrap();
    let e = s.claim(at, "short", 1, 1, None).await.unwrap();
    assert_eq!((f.items[0].0.as_str(), e.items[0].0.as_str()), ("e", "f"));
    tokio::time::sleep(Duration::from_millis(3)).await;
    let (r, fast) = ack("long", vec![f.items[0].0.clone()], at).await;
    assert_eq!((r.unwrap(), fast), (vec![done(false)], false));
    let back = queued(&db, &s, "A", &e.items[0].0).await.unwrap();
    assert_eq!((back.2, back.0.is_some()), (None, true), "the expired claim waits again");
    // The queue's last ids: the transaction, which drops the queue's count row. "keep" (claimed
    // by the counted read) acked while other ids wait; "more" (not due for a minute) removed by
    // hand; then "f", the last.
    let (r, fast) = ack("counted", strings(&["keep"]), at).await;
    assert_eq!((r.unwrap(), fast), (vec![done(false)], true));
    let sql = format!("DELETE FROM {}.q_ids WHERE ns = $1 AND queue = $2 AND id = $3", s.schema);
    db.execute(&sql, &[&s.ns.as_bytes(), &"A".as_bytes(), &"more".as_bytes()]).await.unwrap();
    let last = s.claim(at, "last", 100, 60_000, None).await.unwrap();
    let all: Vec<String> = last.items.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(all, ["f"]);
    let (r, fast) = ack("last", all, at).await;
    assert_eq!((r.unwrap(), fast), (vec![done(false)], false));
    let sql = format!("SELECT count(*) FROM {}.q_queues WHERE ns = $1 AND queue = $2", s.schema);
    let rows: i64 = db.query_one(&sql, &[&s.ns.as_bytes(), &"A".as_bytes()]).await.unwrap().get(0);
    assert_eq!(rows, 0, "the emptied queue's count row dropped");
}

#[tokio::test]
#[ignore = "needs a PostgreSQL: set FLOWGUARD_TEST_POSTGRES_URL and pass --include-ignored (scripts/postgres.mjs does)"]
async fn queue_fast_acks_of_one_batch_at_once_ack_each_id_once() {
    use crate::queue::{Debounce, QueueBackend, SettleAction, SettleOutcome, ShardRef};

    let s = std::sync::Arc::new(store().await);
    let at = ShardRef { queue: "A", shard: 0, shards: 1 };
    s.enqueue(at, &["keep".to_string()], 60_000, Debounce::Off).await.unwrap();
    warm(&s, 8).await;
    for round in 0..10 {
        let ids: Vec<String> = (0..10).map(|i| format!("k{round}-{i}")).collect();
        s.enqueue(at, &ids, 0, Debounce::Off).await.unwrap();
        let r = s.claim(at, "reader", 10, 60_000, None).await.unwrap();
        assert_eq!(r.items.len(), 10);
        let count = taken(&s);
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(8));
        let acks = (0..8).map(|_| {
            let (s, barrier, ids) = (s.clone(), barrier.clone(), ids.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                s.settle(at, "reader", &ids, SettleAction::Ack).await.unwrap()
            })
        });
        let got: Vec<Vec<(SettleOutcome, Option<i64>)>> =
            futures_util::future::join_all(acks).await.into_iter().map(|r| r.unwrap()).collect();
        // Each id acked once: one call acked them all, the other seven found none claimed.
        for i in 0..10 {
            let done = got.iter().filter(|g| matches!(g[i].0, SettleOutcome::Done { .. })).count();
            assert_eq!(done, 1, "round {round}, id {i}: {got:?}");
        }
        let whole =
            got.iter().filter(|g| g.iter().all(|o| matches!(o.0, SettleOutcome::Done { .. }))).count();
        assert_eq!((whole, taken(&s) - count), (1, 1), "round {round}: {got:?}");
    }
}
