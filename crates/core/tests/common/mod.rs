//! The semantic suite shared by every backend: every test takes a freshly opened client with a
//! prefix of its own.

#![allow(dead_code)]

use std::time::Duration;

use flowguard_core::backend::postgres::PostgresOptions;
use flowguard_core::lock::AcquireOptions;
use flowguard_core::tracker::{BatchOutcome, ItemRequest, ItemStatus, Keep, Outcome};
use flowguard_core::{Client, ErrorCode, OpenOptions};

/// One runtime for the whole suite, as in Node: pooled connections live on the runtime that
/// opened them, so per-test runtimes would tear them down under the next test.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    })
}

/// Where a suite runs: a Redis URL (None: the in-memory embedded store), a durable store file, or
/// a PostgreSQL URL.
pub enum Target {
    Url(Option<String>),
    Path(std::path::PathBuf),
    Postgres(String),
}

impl From<Option<String>> for Target {
    fn from(url: Option<String>) -> Self {
        Target::Url(url)
    }
}

pub async fn open(target: impl Into<Target>) -> Client {
    let n: u64 =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let prefix = format!("rt:{n:x}:{}:", flowguard_core::token::new_token());
    let (url, path, postgres) = match target.into() {
        Target::Url(url) => (url, None, None),
        Target::Path(path) => (None, Some(path), None),
        Target::Postgres(url) => (None, None, Some(PostgresOptions { url, ..Default::default() })),
    };
    Client::open(OpenOptions { url, path, postgres, prefix: Some(prefix), ..Default::default() })
        .await
        .expect("open")
}

fn req(id: &str, status: &str) -> ItemRequest {
    ItemRequest { id: id.into(), status: status.into(), ..Default::default() }
}

async fn sleep(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await
}

/// `maxAttempts`: a failure at the claim's last allowed attempt makes the item dead (kept with
/// its attempts, last error and timeline; counted and listed as dead); a dead item is not
/// claimed again (by a single claim, a batch claim, or with `reclaim_completed`) until it is
/// revived (one more attempt, its attempts kept) or revived with its attempts reset; a claim
/// without `maxAttempts` never makes an item dead.
pub async fn max_attempts_make_items_dead_until_revived(c: Client) {
    let claim = |ids: &[&str], max: Option<u32>| {
        let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        let c = c.clone();
        async move { c.claim_many("g", ids, None, false, max, None).await.unwrap() }
    };
    let fail = |id: &str, owner: Option<String>| {
        let c = c.clone();
        let r = ItemRequest { owner, error: Some(format!("boom {id}")), ..req(id, "failed") };
        async move { c.set_item("g", r).await.unwrap() }
    };
    // Two attempts allowed: the first failure leaves it failed, the second makes it dead.
    let r = claim(&["d", "free"], Some(2)).await;
    assert_eq!(r[0].item.max_attempts, Some(2));
    assert_eq!(fail("d", r[0].owner.clone()).await.item.status, ItemStatus::Failed);
    let r2 = claim(&["d"], Some(2)).await;
    assert!(r2[0].claimed);
    let dead = fail("d", r2[0].owner.clone()).await;
    assert_eq!(dead.item.status, ItemStatus::Dead);
    assert_eq!(dead.item.attempts, 2);
    assert_eq!(dead.item.last_error.as_deref(), Some("boom d"));
    let words: Vec<&str> = dead.item.timeline.iter().map(|t| &*t.status).collect();
    assert_eq!(words, ["in_progress", "failed", "in_progress", "dead"]);
    // Not claimed again: single, batch, reclaim_completed, and without maxAttempts.
    let again = claim(&["d"], None).await;
    assert!(!again[0].claimed);
    assert_eq!(again[0].reason, Some(ItemStatus::Dead));
    let forced = c.claim_many("g", vec!["d".into()], None, true, Some(5), None).await.unwrap();
    assert_eq!(forced[0].reason, Some(ItemStatus::Dead));
    let b =
        c.claim_batch("g", &["d".to_string(), "new".to_string()], None, false, Some(1), None).await.unwrap();
    assert_eq!(b.outcomes, [BatchOutcome::Dead, BatchOutcome::Claimed]);
    assert_eq!(b.attempts, [2, 1]);
    // Shown, counted and listed as dead.
    assert_eq!(c.get_item("g", "d").await.unwrap().status, ItemStatus::Dead);
    let l = c.list_items("g", Some("dead"), None, None).await.unwrap();
    assert_eq!(l.counts.dead, 1);
    assert_eq!(l.counts.failed, 0);
    assert_eq!(l.items.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), ["d"]);
    let all = c.list_items("g", None, None, None).await.unwrap();
    assert_eq!(all.counts.total(), 3);
    assert!(all.items.iter().any(|i| i.id == "d" && i.status == ItemStatus::Dead));
    // A claim without maxAttempts never makes an item dead, however often it fails.
    let mut owner = claim(&["free"], None).await[0].owner.clone();
    for _ in 0..3 {
        assert_eq!(fail("free", owner).await.item.status, ItemStatus::Failed);
        owner = claim(&["free"], None).await[0].owner.clone();
    }
    // A batch claim's maxAttempts of 1: its first failure is dead.
    let nb = fail("new", Some(b.owner.clone())).await;
    assert_eq!(nb.item.status, ItemStatus::Dead);
    // Revive: dead ids only (a failed id is left alone without `failed`), attempts kept.
    let rv = c.revive_items("g", vec!["d".into(), "free".into(), "none".into()], false, false).await.unwrap();
    assert_eq!(rv[0].outcome, Outcome::Done);
    assert_eq!(rv[0].item.status, ItemStatus::Failed);
    assert_eq!(rv[0].item.attempts, 2);
    assert_eq!(rv[0].item.last_error.as_deref(), Some("boom d"));
    assert_eq!(rv[0].item.timeline.last().map(|t| &*t.status), Some("revived"));
    assert_eq!(rv[1].outcome, Outcome::Busy(ItemStatus::InProgress));
    assert_eq!(rv[2].outcome, Outcome::Busy(ItemStatus::None));
    // One more attempt (BullMQ's retry): claimed as attempt 3, dead again at its failure.
    let r3 = claim(&["d"], Some(2)).await;
    assert!(r3[0].claimed);
    assert_eq!(r3[0].item.attempts, 3);
    assert_eq!(fail("d", r3[0].owner.clone()).await.item.status, ItemStatus::Dead);
    // Revived with its attempts reset: a whole new budget.
    let rv = c.revive_items("g", vec!["d".into(), "new".into()], true, true).await.unwrap();
    assert!(rv.iter().all(|r| r.outcome == Outcome::Done && r.item.attempts == 0));
    let r4 = claim(&["d"], Some(2)).await;
    assert_eq!(r4[0].item.attempts, 1);
    assert_eq!(fail("d", r4[0].owner.clone()).await.item.status, ItemStatus::Failed);
    // Unset forgets a dead item: claimable again as new.
    let nd = claim(&["new"], Some(1)).await;
    assert_eq!(fail("new", nd[0].owner.clone()).await.item.status, ItemStatus::Dead);
    c.set_item("g", req("new", "none")).await.unwrap();
    assert!(claim(&["new"], Some(1)).await[0].claimed);
    // A bad maxAttempts is refused, naming the field.
    let e = c.claim_many("g", vec!["x".into()], None, false, Some(0), None).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("requests[0].maxAttempts"));
    let e = c.claim_batch("g", &["x".to_string()], None, false, Some(1001), None).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("maxAttempts"));
}

pub async fn claim_is_exclusive_and_completion_sticks(c: Client) {
    let r = c
        .claim_many("g", vec!["a".into()], Some(Duration::from_millis(60_000)), false, None, None)
        .await
        .unwrap();
    assert!(r[0].claimed);
    let owner = r[0].owner.clone().unwrap();
    assert_eq!(r[0].item.status, ItemStatus::InProgress);
    assert_eq!(r[0].item.attempts, 1);

    let again = c.claim_many("g", vec!["a".into()], None, false, None, None).await.unwrap();
    assert!(!again[0].claimed);
    assert_eq!(again[0].reason, Some(ItemStatus::InProgress));
    assert!(again[0].owner.is_none());

    let done = c.set_item("g", ItemRequest { owner: Some(owner), ..req("a", "completed") }).await.unwrap();
    assert_eq!(done.item.status, ItemStatus::Completed);
    assert!(done.item.finished_at.is_some());
    assert!(done.item.lease_expires_at.is_none());

    let after = c.claim_many("g", vec!["a".into()], None, false, None, None).await.unwrap();
    assert!(!after[0].claimed);
    assert_eq!(after[0].reason, Some(ItemStatus::Completed));

    let forced = c.claim_many("g", vec!["a".into()], None, true, None, None).await.unwrap();
    assert!(forced[0].claimed);
    assert_eq!(forced[0].item.attempts, 2);
}

pub async fn failed_items_keep_reason_and_can_be_claimed_again(c: Client) {
    let r = c.claim_many("g", vec!["x".into()], None, false, None, None).await.unwrap();
    let owner = r[0].owner.clone();
    let f = c
        .set_item("g", ItemRequest { owner, error: Some("HTTP 503 from API".into()), ..req("x", "failed") })
        .await
        .unwrap();
    assert_eq!(f.item.status, ItemStatus::Failed);
    assert_eq!(f.item.last_error.as_deref(), Some("HTTP 503 from API"));
    let again = c.claim_many("g", vec!["x".into()], None, false, None, None).await.unwrap();
    assert!(again[0].claimed);
    assert_eq!(again[0].item.attempts, 2);
    assert_eq!(again[0].item.last_error.as_deref(), Some("HTTP 503 from API"));
    let statuses: Vec<&str> = again[0].item.timeline.iter().map(|t| &*t.status).collect();
    assert_eq!(statuses, ["in_progress", "failed", "in_progress"]);
    assert_eq!(again[0].item.timeline[1].error.as_deref(), Some("HTTP 503 from API"));
}

pub async fn expired_lease_shows_abandoned_and_is_claimable(c: Client) {
    let r = c
        .claim_many("g", vec!["s".into()], Some(Duration::from_millis(150)), false, None, None)
        .await
        .unwrap();
    assert!(r[0].claimed);
    let stale_owner = r[0].owner.clone();
    sleep(300).await;
    let got = c.get_items("g", vec!["s".into()]).await.unwrap();
    assert_eq!(got[0].status, ItemStatus::Abandoned);
    let list = c.list_items("g", Some("abandoned"), None, None).await.unwrap();
    assert_eq!(list.counts.abandoned, 1);
    assert_eq!(list.items[0].id, "s");

    let r2 = c
        .claim_many("g", vec!["s".into()], Some(Duration::from_millis(60_000)), false, None, None)
        .await
        .unwrap();
    assert!(r2[0].claimed);
    let statuses: Vec<&str> = r2[0].item.timeline.iter().map(|t| &*t.status).collect();
    assert_eq!(statuses, ["in_progress", "abandoned", "in_progress"]);

    // The worker whose lease ran out cannot overwrite the newer claim.
    let e = c
        .set_item("g", ItemRequest { owner: stale_owner.clone(), ..req("s", "completed") })
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotOwner);
    let e = c
        .set_item("g", ItemRequest { owner: stale_owner, error: Some("late".into()), ..req("s", "failed") })
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotOwner);
    let now = c.get_items("g", vec!["s".into()]).await.unwrap();
    assert_eq!(now[0].status, ItemStatus::InProgress);
    assert_eq!(now[0].attempts, 2);
}

pub async fn batch_apply_is_ordered_and_reports_each_item(c: Client) {
    let ids: Vec<String> = (0..500).map(|i| format!("p-{i}")).collect();
    let mut with_dup = ids.clone();
    with_dup.push("p-7".into());
    let r = c.claim_many("batch", with_dup, None, false, None, None).await.unwrap();
    assert_eq!(r.len(), 501);
    assert_eq!(r.iter().filter(|x| x.claimed).count(), 500);
    assert!(!r[500].claimed, "a duplicate id in one batch is claimed once");

    let mut reqs = Vec::new();
    for (i, x) in r.iter().take(10).enumerate() {
        let mut q = req(&x.item.id, if i % 2 == 0 { "completed" } else { "failed" });
        q.owner = x.owner.clone();
        q.error = Some(format!("e{i}"));
        reqs.push(q);
    }
    reqs.push(ItemRequest { owner: Some(flowguard_core::token::new_token()), ..req("p-20", "completed") });
    reqs.push(req("p-21", "none"));
    let out = c.set_items("batch", reqs).await.unwrap();
    assert_eq!(out.len(), 12);
    assert!(out[..10].iter().all(|o| o.outcome == Outcome::Done));
    assert!(matches!(&out[10].outcome, Outcome::Refused(e) if e.code == ErrorCode::NotOwner));
    assert_eq!(out[11].outcome, Outcome::Done);

    let list = c.list_items("batch", None, None, None).await.unwrap();
    assert_eq!(list.counts.completed, 5);
    assert_eq!(list.counts.failed, 5);
    assert_eq!(list.counts.in_progress, 489);
    assert_eq!(list.counts.total(), 499);
    assert_eq!(list.items.len(), 100);
    assert_eq!(list.next_offset, Some(100));

    let failed = c.list_items("batch", Some("failed"), None, Some(3)).await.unwrap();
    assert_eq!(failed.items.len(), 3);
    assert!(failed.items.iter().all(|i| i.status == ItemStatus::Failed));
    let rest = c.list_items("batch", Some("failed"), Some(3), Some(3)).await.unwrap();
    assert_eq!(rest.items.len(), 2);
    assert_eq!(rest.next_offset, None);
    let mut seen: Vec<String> = failed.items.iter().chain(&rest.items).map(|i| i.id.clone()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 5);

    // Paging over everything visits each item exactly once.
    let mut all = Vec::new();
    let mut offset = 0;
    loop {
        let page = c.list_items("batch", Some("all"), Some(offset), Some(128)).await.unwrap();
        all.extend(page.items.into_iter().map(|i| i.id));
        match page.next_offset {
            Some(n) => offset = n,
            None => break,
        }
    }
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 499);
}

pub async fn keep_ms_expires_completed_marks(c: Client) {
    let r = c.claim_many("weekly", vec!["w".into()], None, false, None, None).await.unwrap();
    c.set_item(
        "weekly",
        ItemRequest {
            owner: r[0].owner.clone(),
            keep: Some(Keep::For(Duration::from_millis(150))),
            ..req("w", "completed")
        },
    )
    .await
    .unwrap();
    assert!(!c.claim_many("weekly", vec!["w".into()], None, false, None, None).await.unwrap()[0].claimed);
    sleep(300).await;
    let st = c.get_items("weekly", vec!["w".into()]).await.unwrap();
    assert_eq!(st[0].status, ItemStatus::None, "the completed mark expired");
    let list = c.list_items("weekly", None, None, None).await.unwrap();
    assert_eq!(list.counts.total(), 0);
    assert!(c.claim_many("weekly", vec!["w".into()], None, false, None, None).await.unwrap()[0].claimed);
}

pub async fn keep_forever_has_no_expiry_until_unset(c: Client) {
    let r = c.claim_many("forever", vec!["f".into(), "g".into()], None, false, None, None).await.unwrap();
    let done = c
        .set_item(
            "forever",
            ItemRequest { owner: r[0].owner.clone(), keep: Some(Keep::Forever), ..req("f", "completed") },
        )
        .await
        .unwrap();
    assert_eq!(done.item.status, ItemStatus::Completed);
    assert_eq!(done.item.expires_at, None, "a mark kept forever has no expiry");
    // A failure can be kept forever too, in a batch beside a bounded one.
    let rs = c
        .set_items(
            "forever",
            vec![
                ItemRequest { keep: Some(Keep::Forever), error: Some("boom".into()), ..req("g", "failed") },
                ItemRequest { keep: Some(Keep::For(Duration::from_secs(60))), ..req("h", "completed") },
            ],
        )
        .await
        .unwrap();
    assert_eq!(rs[0].item.expires_at, None);
    let h_expires = rs[1].item.expires_at.expect("a bounded keep has an expiry");
    assert!(
        h_expires > rs[1].item.updated_at.unwrap() && h_expires <= rs[1].item.updated_at.unwrap() + 60_000
    );
    let again = c.claim_many("forever", vec!["f".into()], None, false, None, None).await.unwrap();
    assert!(!again[0].claimed, "a completed mark kept forever is skipped by a claim");
    let list = c.list_items("forever", Some("completed"), None, None).await.unwrap();
    assert_eq!(list.counts.completed, 2);
    let f = list.items.iter().find(|i| i.id == "f").unwrap();
    assert_eq!(f.expires_at, None);
    // Completing it again with a bounded keep bounds it again.
    let bounded = c
        .set_item(
            "forever",
            ItemRequest { keep: Some(Keep::For(Duration::from_millis(100))), ..req("f", "completed") },
        )
        .await
        .unwrap();
    assert!(bounded.item.expires_at.is_some());
    sleep(250).await;
    assert_eq!(c.get_item("forever", "f").await.unwrap().status, ItemStatus::None);
    // Unset forgets a record kept forever.
    c.set_item("forever", req("g", "none")).await.unwrap();
    assert_eq!(c.get_item("forever", "g").await.unwrap().status, ItemStatus::None);
    // Over 365 days is refused, naming the field; the word is the way to ask for no expiry.
    let e = c
        .set_item(
            "forever",
            ItemRequest { keep: Some(Keep::For(Duration::from_secs(366 * 86_400))), ..req("x", "completed") },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("keep"));
    let e = Keep::from_word("keep", "for ever").unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert_eq!(Keep::from_word("keep", "forever").unwrap(), Keep::Forever);
}

pub async fn unset_forgets(c: Client) {
    c.claim_many("g", vec!["u".into()], None, false, None, None).await.unwrap();
    let r = c.set_item("g", req("u", "none")).await.unwrap();
    assert_eq!(r.item.status, ItemStatus::InProgress, "unset reports the state it removed");
    let r = c.set_item("g", req("u", "none")).await.unwrap();
    assert_eq!(r.item.status, ItemStatus::None);
    assert_eq!(c.list_items("g", None, None, None).await.unwrap().counts.total(), 0);
}

pub async fn names_with_any_characters_are_distinct(c: Client) {
    let names = ["a:b", "a", "a%3Ab", "{a}", "}", "日本", "x".repeat(1024).leak() as &str];
    for g in names {
        for id in names {
            let r = c.claim_many(g, vec![id.to_string()], None, false, None, None).await.unwrap();
            assert!(r[0].claimed, "group {g:?} id {id:?} collided with an earlier one");
        }
    }
    for g in names {
        assert_eq!(c.list_items(g, None, None, None).await.unwrap().counts.in_progress, names.len() as u64);
    }
}

pub async fn bad_input_is_refused_before_writing(c: Client) {
    let e = c.claim_many("", vec!["a".into()], None, false, None, None).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert_eq!(e.field.as_ref().unwrap().to_string(), "group");
    let e = c.claim_many("g", vec!["ok".into(), "".into()], None, false, None, None).await.unwrap_err();
    assert_eq!(e.field.as_ref().unwrap().to_string(), "requests[1].id", "{e}");
    let e = c.claim_many("g", vec!["ok".into()], Some(Duration::ZERO), false, None, None).await.unwrap_err();
    assert_eq!(e.field.as_ref().unwrap().to_string(), "requests[0].timeout");
    let e = c
        .set_item("g", ItemRequest { owner: Some("nope".into()), ..req("ok", "completed") })
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert_eq!(e.field.as_ref().unwrap().to_string(), "owner", "{e}");
    let e = c.set_item("g", req("ok", "done")).await.unwrap_err();
    assert_eq!(e.field.as_ref().unwrap().to_string(), "status");
    let e = c.list_items("g", Some("all"), None, Some(0)).await.unwrap_err();
    assert_eq!(e.field.as_ref().unwrap().to_string(), "limit");
    // Nothing was written by any of the refused calls.
    assert_eq!(c.list_items("g", None, None, None).await.unwrap().counts.total(), 0);
}

pub async fn concurrent_claims_have_one_winner(c: Client) {
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            c.claim_many("race", vec!["one".into()], None, false, None, None).await.unwrap()
        }));
    }
    let mut winners = 0;
    for t in tasks {
        if t.await.unwrap()[0].claimed {
            winners += 1;
        }
    }
    assert_eq!(winners, 1);
}

/// Claims racing (released together by a barrier) for an item that has a record and may be
/// claimed again (it failed): exactly one wins, and its attempt is the second.
pub async fn concurrent_claims_of_a_known_item_have_one_winner(c: Client) {
    let first = c.claim_many("race", vec!["known".into()], None, false, None, None).await.unwrap();
    let failed =
        ItemRequest { owner: first[0].owner.clone(), error: Some("retry".into()), ..req("known", "failed") };
    c.set_item("race", failed).await.unwrap();
    const TASKS: usize = 20;
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(TASKS));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (c, barrier) = (c.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            c.claim_many("race", vec!["known".into()], None, false, None, None).await.unwrap()
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        let r = t.await.unwrap().remove(0);
        if r.claimed {
            winners.push(r.item.attempts);
        }
    }
    assert_eq!(winners, [2], "one winner, on the second attempt");
}

pub async fn lock_basics_and_owner_checks(c: Client) {
    let a = c
        .acquire_lock("wf", AcquireOptions { label: Some("run-1".into()), ..Default::default() })
        .await
        .unwrap();
    assert!(a.acquired);
    assert!(
        a.remaining_ms > 590_000 && a.remaining_ms <= 600_000,
        "default lease is 600 s: {}",
        a.remaining_ms
    );
    let owner = a.owner.clone().unwrap();

    let b = c.acquire_lock("wf", AcquireOptions::default()).await.unwrap();
    assert!(!b.acquired);
    assert!(b.owner.is_none());
    assert_eq!(b.holder.as_deref(), Some("run-1"));
    assert_eq!(b.fence, a.fence);

    let info = c.get_lock("wf").await.unwrap();
    assert!(info.locked);
    assert_eq!(info.fence, a.fence);

    let other = flowguard_core::token::new_token();
    let r = c.release_lock("wf", &other).await.unwrap();
    assert!(!r.released);
    assert_eq!(r.reason, Some(flowguard_core::lock::Refusal::NotOwner));
    assert!(c.get_lock("wf").await.unwrap().locked, "the holder keeps the lock");
    let x = c.extend_lock("wf", &other, Some(Duration::from_millis(1000))).await.unwrap();
    assert!(!x.extended);

    let x = c.extend_lock("wf", &owner, Some(Duration::from_millis(2_000))).await.unwrap();
    assert!(x.extended);
    assert!(c.get_lock("wf").await.unwrap().remaining_ms <= 2_000);

    assert!(c.release_lock("wf", &owner).await.unwrap().released);
    let r = c.release_lock("wf", &owner).await.unwrap();
    assert_eq!(r.reason, Some(flowguard_core::lock::Refusal::NotHeld));
    let info = c.get_lock("wf").await.unwrap();
    assert!(!info.locked);
    assert_eq!(info.fence, a.fence, "a free lock reports the last fencing token");
}

/// An operator's release by fence frees the grant shown, and only that one: a lock taken again
/// since is left alone, a free lock is not held, and the old holder is refused afterwards.
pub async fn lock_force_release_by_fence(c: Client) {
    let a = c
        .acquire_lock("stuck", AcquireOptions { label: Some("crashed run".into()), ..Default::default() })
        .await
        .unwrap();
    let owner = a.owner.clone().unwrap();
    let r = c.force_release_lock("stuck", a.fence + 1).await.unwrap();
    assert_eq!(
        (r.released, r.reason),
        (false, Some(flowguard_core::lock::Refusal::NotOwner)),
        "another fence"
    );
    assert!(c.get_lock("stuck").await.unwrap().locked, "the holder keeps it");
    let r = c.force_release_lock("stuck", a.fence).await.unwrap();
    assert!(r.released);
    let info = c.get_lock("stuck").await.unwrap();
    assert!(!info.locked);
    assert_eq!(info.fence, a.fence, "a free lock reports the last fencing token");
    let r = c.release_lock("stuck", &owner).await.unwrap();
    assert_eq!(
        r.reason,
        Some(flowguard_core::lock::Refusal::NotHeld),
        "the old holder learns it at its release"
    );
    let r = c.force_release_lock("stuck", a.fence).await.unwrap();
    assert_eq!((r.released, r.reason), (false, Some(flowguard_core::lock::Refusal::NotHeld)));
    let b = c.acquire_lock("stuck", AcquireOptions::default()).await.unwrap();
    assert!(b.acquired && b.fence > a.fence, "the next grant gets a higher fence");
    let r = c.force_release_lock("stuck", a.fence).await.unwrap();
    assert!(!r.released, "the fence shown before names an old grant");
    assert!(c.get_lock("stuck").await.unwrap().locked);
    let e = c.force_release_lock("stuck", 0).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert_eq!(e.field.map(|f| f.to_string()).as_deref(), Some("fence"));
    let e = c.force_release_lock("", 1).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
}

pub async fn lock_expiry_and_fencing(c: Client) {
    let mut last = 0;
    for i in 0..5 {
        let a = c
            .acquire_lock(
                "f",
                AcquireOptions { timeout: Some(Duration::from_millis(100)), ..Default::default() },
            )
            .await
            .unwrap();
        assert!(a.acquired, "round {i}");
        assert!(a.fence > last, "fencing tokens strictly increase");
        last = a.fence;
        if i % 2 == 0 {
            c.release_lock("f", a.owner.as_deref().unwrap()).await.unwrap();
        } else {
            sleep(200).await; // let it expire
            let r = c.release_lock("f", a.owner.as_deref().unwrap()).await.unwrap();
            assert!(!r.released, "an expired hold cannot be released");
        }
    }
}

pub async fn lock_wait_gets_it_when_freed_and_never_waits_longer(c: Client) {
    let a = c
        .acquire_lock("w", AcquireOptions { timeout: Some(Duration::from_millis(250)), ..Default::default() })
        .await
        .unwrap();
    assert!(a.acquired);
    let t = std::time::Instant::now();
    let b = c
        .acquire_lock("w", AcquireOptions { wait: Some(Duration::from_millis(100)), ..Default::default() })
        .await
        .unwrap();
    assert!(!b.acquired);
    let waited = t.elapsed().as_millis();
    assert!(waited >= 100, "waited {waited} ms");
    assert!(b.attempts >= 2);
    let c2 = c
        .acquire_lock("w", AcquireOptions { wait: Some(Duration::from_millis(3000)), ..Default::default() })
        .await
        .unwrap();
    assert!(c2.acquired, "acquired once the first lease ran out");
    assert!(c2.fence > a.fence);
}

pub async fn concurrent_lock_sets_have_one_winner(c: Client) {
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let c = c.clone();
        tasks.push(tokio::spawn(
            async move { c.acquire_lock("one", AcquireOptions::default()).await.unwrap() },
        ));
    }
    let mut winners = 0;
    for t in tasks {
        if t.await.unwrap().acquired {
            winners += 1;
        }
    }
    assert_eq!(winners, 1);
}

pub async fn lock_bad_input(c: Client) {
    let e = c.acquire_lock("", AcquireOptions::default()).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    let e = c
        .acquire_lock("n", AcquireOptions { timeout: Some(Duration::ZERO), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(e.field.as_ref().unwrap().to_string(), "timeout");
    let e = c
        .acquire_lock(
            "n",
            AcquireOptions { wait: Some(Duration::from_secs(400 * 86400)), ..Default::default() },
        )
        .await
        .unwrap_err();
    assert_eq!(e.field.as_ref().unwrap().to_string(), "wait");
    let e = c.release_lock("n", "short").await.unwrap_err();
    assert_eq!(e.field.as_ref().unwrap().to_string(), "owner");
    assert!(!c.get_lock("n").await.unwrap().locked);
    assert_eq!(c.get_lock("n").await.unwrap().fence, 0);
}

pub async fn claim_batch_matches_claim_rules(c: Client) {
    use flowguard_core::tracker::BatchOutcome::{Claimed, Completed, InProgress};
    let busy = c
        .claim_many("g", vec!["busy".into()], Some(Duration::from_millis(60_000)), false, None, None)
        .await
        .unwrap();
    assert!(busy[0].claimed);
    c.set_item("g", req("done", "completed")).await.unwrap();
    let ids: Vec<String> = ["new", "busy", "done", "new"].iter().map(|s| s.to_string()).collect();
    let b = c.claim_batch("g", &ids, Some(Duration::from_millis(60_000)), false, None, None).await.unwrap();
    assert_eq!(b.outcomes, vec![Claimed, InProgress, Completed, InProgress]);
    assert_eq!(b.attempts, vec![1, 1, 0, 1]);
    assert_eq!(b.owner.len(), 32);
    // The batch's owner token owns what it claimed.
    let done = c
        .set_item("g", ItemRequest { owner: Some(b.owner.clone()), ..req("new", "completed") })
        .await
        .unwrap();
    assert_eq!(done.item.status, ItemStatus::Completed);
    let e =
        c.claim_batch("g", &["ok".to_string(), String::new()], None, false, None, None).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert_eq!(e.field.as_ref().unwrap().to_string(), "ids[1]", "{e}");
    let st = c.get_items("g", vec!["ok".into()]).await.unwrap();
    assert_eq!(st[0].status, ItemStatus::None);
}

pub async fn empty_label_reads_back_as_no_label(c: Client) {
    let a = c
        .acquire_lock("l", AcquireOptions { label: Some(String::new()), ..Default::default() })
        .await
        .unwrap();
    assert!(a.acquired);
    assert_eq!(a.holder, None);
    assert_eq!(c.get_lock("l").await.unwrap().holder, None);
    let b = c.acquire_lock("l", AcquireOptions::default()).await.unwrap();
    assert!(!b.acquired);
    assert_eq!(b.holder, None);
}

fn shards(n: u32) -> Option<u64> {
    Some(n as u64)
}

/// The error of a call made with `shards: n` on a queue holding ids enqueued with `stored`.
fn assert_mismatch(e: flowguard_core::Error, n: u32, stored: u32) {
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{}", e.message);
    assert!(e.message.contains(&format!("shards is {n}")), "{}", e.message);
    assert!(e.message.contains(&format!("shards = {stored}")), "{}", e.message);
}

pub async fn queue_shard_count_is_kept_per_queue(c: Client) {
    use flowguard_core::queue::{EnqueueOptions, ReadOptions, ShardSelect};
    let ids: Vec<String> = (0..20).map(|i| format!("id-{i}")).collect();
    let eight = EnqueueOptions { shards: shards(8), ..Default::default() };
    c.enqueue("q", ids.clone(), eight.clone()).await.unwrap();
    // Every call with another count is refused, whichever shards it touches: the ones holding
    // ids, the ones that do not, or one shard alone.
    let read4 = ReadOptions { shards: shards(4), ..Default::default() };
    assert_mismatch(c.read_batch("q", read4.clone()).await.unwrap_err(), 4, 8);
    let one = ReadOptions { shards: shards(16), shard: Some(15), ..Default::default() };
    assert_mismatch(c.read_batch("q", one).await.unwrap_err(), 16, 8);
    assert_mismatch(
        c.queue_size("q", ShardSelect { shards: shards(4), shard: None }).await.unwrap_err(),
        4,
        8,
    );
    assert_mismatch(
        c.peek("q", ShardSelect { shards: shards(2), shard: None }, None).await.unwrap_err(),
        2,
        8,
    );
    let four = EnqueueOptions { shards: shards(4), ..Default::default() };
    assert_mismatch(c.enqueue("q", vec!["x".into()], four.clone()).await.unwrap_err(), 4, 8);
    let t = flowguard_core::token::new_token();
    assert_mismatch(c.ack("q", &t, vec!["id-1".into()], shards(4)).await.unwrap_err(), 4, 8);
    // Nothing was lost or added.
    assert_eq!(c.queue_size("q", ShardSelect { shards: shards(8), shard: None }).await.unwrap().waiting, 20);

    // Once the queue is empty, another count is recorded by the next write.
    let b = c
        .read_batch("q", ReadOptions { shards: shards(8), limit: Some(100), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(b.items.len(), 20);
    assert_mismatch(
        c.queue_size("q", ShardSelect { shards: shards(4), shard: None }).await.unwrap_err(),
        4,
        8,
    );
    let got: Vec<String> = b.items.iter().map(|d| d.id.clone()).collect();
    c.ack("q", &b.owner, got, shards(8)).await.unwrap();
    assert_eq!(c.queue_size("q", ShardSelect { shards: shards(4), shard: None }).await.unwrap().waiting, 0);
    c.enqueue("q", vec!["y".into(), "z".into()], four).await.unwrap();
    assert_eq!(c.queue_size("q", ShardSelect { shards: shards(4), shard: None }).await.unwrap().waiting, 2);
    assert_mismatch(
        c.queue_size("q", ShardSelect { shards: shards(8), shard: None }).await.unwrap_err(),
        8,
        4,
    );
    assert_mismatch(c.enqueue("q", vec!["w".into()], eight).await.unwrap_err(), 8, 4);
    let b = c.read_batch("q", read4).await.unwrap();
    assert_eq!(b.items.len(), 2);
    // Claimed ids still count: the queue is not empty while a reader holds them.
    assert_mismatch(
        c.queue_size("q", ShardSelect { shards: shards(1), shard: None }).await.unwrap_err(),
        1,
        4,
    );
    let got: Vec<String> = b.items.iter().map(|d| d.id.clone()).collect();
    c.release("q", &b.owner, got.clone(), shards(4), None).await.unwrap();
    assert_eq!(c.queue_size("q", ShardSelect { shards: shards(4), shard: None }).await.unwrap().waiting, 2);
}

/// Every page of a catalog listing, with a small limit so it takes several pages.
pub async fn all_names(c: &Client, kind: flowguard_core::catalog::Kind) -> Vec<(String, Option<u32>)> {
    let (mut out, mut cursor) = (Vec::new(), None::<String>);
    for _ in 0..100_000 {
        let p = c.list_names(kind, cursor.as_deref(), Some(2)).await.unwrap();
        out.extend(p.entries.into_iter().map(|e| (e.name, e.shards)));
        cursor = p.cursor;
        if cursor.is_none() {
            break;
        }
    }
    assert!(cursor.is_none(), "the listing ended");
    out.sort();
    out.dedup();
    out
}

pub async fn catalog_lists_the_names_in_use(c: Client) {
    use flowguard_core::catalog::Kind;
    use flowguard_core::limiter::LimitOptions;
    use flowguard_core::queue::{EnqueueOptions, ReadOptions};
    use flowguard_core::semaphore::PermitOptions;
    let groups = ["g:1", "g{2}", "g%3", "g4", "g5"];
    for g in groups {
        c.set_items(g, vec![req("a", "completed")]).await.unwrap();
    }
    let want: Vec<(String, Option<u32>)> = groups.iter().map(|g| (g.to_string(), None)).collect();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(all_names(&c, Kind::Groups).await, want_sorted);

    let held = c.acquire_lock("held:1", AcquireOptions::default()).await.unwrap();
    assert!(held.acquired);
    let freed = c.acquire_lock("freed", AcquireOptions::default()).await.unwrap();
    c.release_lock("freed", freed.owner.as_deref().unwrap()).await.unwrap();
    assert_eq!(all_names(&c, Kind::Locks).await, vec![("held:1".to_string(), None)]);

    let three = EnqueueOptions { shards: shards(3), ..Default::default() };
    c.enqueue("q:a", (0..10).map(|i| format!("id-{i}")).collect(), three).await.unwrap();
    c.enqueue("q:done", vec!["x".into()], EnqueueOptions::default()).await.unwrap();
    let b = c.read_batch("q:done", ReadOptions::default()).await.unwrap();
    c.ack("q:done", &b.owner, vec!["x".into()], None).await.unwrap();
    c.enqueue("q:claimed", vec!["y".into()], EnqueueOptions::default()).await.unwrap();
    c.read_batch("q:claimed", ReadOptions::default()).await.unwrap();
    assert_eq!(
        all_names(&c, Kind::Queues).await,
        vec![("q:a".to_string(), Some(3)), ("q:claimed".to_string(), Some(1))]
    );

    let slow = LimitOptions { limit: 1, period: Some(Duration::from_secs(600)), ..Default::default() };
    for n in ["rl:a", "rl{b}"] {
        assert!(c.rate_limit(n, slow.clone()).await.unwrap().allowed);
    }
    let nothing = LimitOptions { cost: Some(0), ..slow.clone() };
    c.rate_limit("rl:untaken", nothing).await.unwrap();
    // A paused limiter is in use until its pause ends, tokens taken or not.
    let back_off = flowguard_core::limiter::PauseFor::RetryAfter("600".into());
    c.pause_rate_limit("rl:paused", back_off).await.unwrap();
    assert_eq!(
        all_names(&c, Kind::Limiters).await,
        vec![("rl:a".to_string(), None), ("rl:paused".to_string(), None), ("rl{b}".to_string(), None)]
    );
    let i = c.get_limiter("rl:a").await.unwrap();
    assert!(i.active && i.reset_after_ms > 590_000.0 && i.reset_after_ms <= 600_000.0, "{i:?}");
    let i = c.get_limiter("rl:untaken").await.unwrap();
    assert!(!i.active && i.reset_after_ms == 0.0, "{i:?}");

    let two = PermitOptions { permits: 2, label: Some("w".into()), ..Default::default() };
    assert!(c.acquire_permit("sem:held", two.clone()).await.unwrap().acquired);
    let p = c.acquire_permit("sem:freed", two).await.unwrap();
    c.release_permit("sem:freed", p.owner.as_deref().unwrap()).await.unwrap();
    assert_eq!(all_names(&c, Kind::Semaphores).await, vec![("sem:held".to_string(), None)]);

    let e = c.list_names(Kind::Groups, None, Some(0)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{}", e.message);
    assert!(e.to_string().contains("limit"), "{e}");
    let e = c.list_names(Kind::Groups, Some(""), None).await.unwrap_err();
    assert!(e.to_string().contains("cursor"), "{e}");
}

/// A pause (an upstream's 429) refuses every take until its end, never shortens a longer one,
/// takes `Retry-After` as seconds or an HTTP-date, and is bounded.
pub async fn limiter_pause_refuses_takes_until_its_end(c: Client) {
    use flowguard_core::limiter::{LimitOptions, PauseFor};
    use std::time::SystemTime;
    let fast = LimitOptions { limit: 1000, burst: Some(10), ..Default::default() };
    let same = |a: f64, b: f64| (a - b).abs() < 0.01;
    let now_ms = || SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!(c.rate_limit("api", fast.clone()).await.unwrap().allowed);
    let i = c.pause_rate_limit("api", PauseFor::RetryAfter("60".into())).await.unwrap();
    let end = i.paused_until.expect("paused");
    assert!(i.active && i.pause_ms > 59_000.0 && i.pause_ms <= 60_000.0, "{i:?}");
    assert!(same(end, i.read_at + i.pause_ms), "{i:?}");
    let r = c.rate_limit("api", fast.clone()).await.unwrap();
    assert!(!r.allowed && r.remaining == 0, "{r:?}");
    assert!(same(r.decided_at + r.retry_after_ms, end), "{r:?}");
    assert_eq!(c.get_limiter("api").await.unwrap().paused_until, Some(end));
    // A shorter pause, or a date in the past, changes nothing.
    let i = c.pause_rate_limit("api", PauseFor::UntilMs(now_ms() + 1_000)).await.unwrap();
    assert_eq!(i.paused_until, Some(end));
    let past = PauseFor::RetryAfter("Sun, 06 Nov 1994 08:49:37 GMT".into());
    assert_eq!(c.pause_rate_limit("api", past.clone()).await.unwrap().paused_until, Some(end));
    let i = c.pause_rate_limit("fresh", past).await.unwrap();
    assert!(!i.active && i.paused_until.is_none(), "{i:?}");
    assert!(c.rate_limit("fresh", fast.clone()).await.unwrap().allowed);
    // An HTTP-date lengthens it (whole seconds).
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
    let i = c.pause_rate_limit("api", PauseFor::RetryAfter(date)).await.unwrap();
    let end = i.paused_until.unwrap();
    assert!(i.pause_ms > 118_000.0 && i.pause_ms <= 120_000.0 && end % 1000.0 == 0.0, "{i:?}");
    // A wait that reaches the end reserves a slot at it; one that does not is refused at once.
    let wait = |ms| LimitOptions { max_wait: Some(Duration::from_millis(ms)), ..fast.clone() };
    let r = c.rate_limit_wait("api", wait(1_000)).await.unwrap();
    assert!(!r.allowed && same(r.decided_at + r.retry_after_ms, end), "{r:?}");
    let r = c.rate_limit("api", wait(200_000)).await.unwrap();
    assert!(r.allowed && same(r.decided_at + r.wait_ms, end), "{r:?}");
    // A short pause: waitRateLimit sleeps until its end.
    let i = c.pause_rate_limit("short", PauseFor::UntilMs(now_ms() + 300)).await.unwrap();
    let r = c.rate_limit_wait("short", wait(5_000)).await.unwrap();
    assert!(r.allowed && same(r.decided_at + r.wait_ms, i.paused_until.unwrap()), "{r:?} {i:?}");
    assert!(now_ms() as f64 >= i.paused_until.unwrap().floor(), "it waited");
    // Bounds and bad input: coded errors naming the field and the value.
    let too_far = [
        (PauseFor::RetryAfter("31536001".into()), "retry_after", "31536001"),
        (PauseFor::UntilMs(now_ms() + 366 * 86_400_000), "until_ms", "ms"),
        (PauseFor::UntilMs(-1), "until_ms", "-1"),
        (PauseFor::RetryAfter("soon".into()), "retry_after", "soon"),
    ];
    for (p, field, named) in too_far {
        let e = c.pause_rate_limit("api", p).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{e}");
        assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some(field), "{e}");
        assert!(e.message.contains(named), "{e}");
    }
    assert_eq!(c.get_limiter("api").await.unwrap().paused_until, Some(end), "nothing changed");
}

/// Job State's values: set and get, `ifAbsent`, an expiry in the past refused, TTLs running
/// out, increments (a new counter's TTL, a value that is not a counter refused), deletes.
pub async fn state_values_set_get_increment_delete(c: Client) {
    use flowguard_core::state::SetOptions;
    let set = c.set_state("k", r#"{"a":1}"#, SetOptions::default()).await.unwrap();
    assert!(set.written);
    let got = c.get_state(vec!["k".into(), "absent".into()]).await.unwrap();
    assert_eq!(got[0].as_ref().unwrap().json, r#"{"a":1}"#);
    assert_eq!(got[0].as_ref().unwrap().expires_at, None);
    assert_eq!(got[1], None);
    let kept = c.set_state("k", "2", SetOptions { if_absent: true, ..Default::default() }).await.unwrap();
    assert!(!kept.written);
    assert_eq!(kept.current.json, r#"{"a":1}"#);
    let fresh = c.set_state("n", "3", SetOptions { if_absent: true, ..Default::default() }).await.unwrap();
    assert!(fresh.written);
    let e =
        c.set_state("k", "1", SetOptions { expires_at: Some(1), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{e}");
    assert_eq!(e.field.as_ref().map(|f| f.to_string()).as_deref(), Some("expires_at"));
    let short = SetOptions { ttl: Some(Duration::from_millis(150)), ..Default::default() };
    let s = c.set_state("t", "1", short).await.unwrap();
    assert!(s.current.expires_at.is_some());
    sleep(300).await;
    assert_eq!(c.get_state(vec!["t".into()]).await.unwrap()[0], None, "the value ran out");
    let again = c.set_state("t", "5", SetOptions { if_absent: true, ..Default::default() }).await.unwrap();
    assert!(again.written, "an expired value counts as absent");

    assert_eq!(c.increment("ctr", None, Some(Duration::from_millis(150))).await.unwrap(), 1);
    assert_eq!(c.increment("ctr", Some(41), None).await.unwrap(), 42);
    sleep(300).await;
    assert_eq!(c.increment("ctr", Some(-2), None).await.unwrap(), -2, "the counter's TTL ran out");
    let e = c.increment("k", None, None).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{e}");
    assert!(c.delete_state("k").await.unwrap());
    assert!(!c.delete_state("k").await.unwrap());
    assert_eq!(c.get_state(vec!["k".into()]).await.unwrap()[0], None);
}

/// Idempotency keys: one claim takes a free key, another sees it pending; only its owner
/// completes (then every claim gets the result) or releases it; a lease that ran out frees it.
pub async fn idempotency_keys_claim_complete_release(c: Client) {
    use flowguard_core::state::KeyClaim;
    let first = c.claim_key("job", Some(Duration::from_millis(60_000))).await.unwrap();
    let KeyClaim::Claimed { owner, .. } = first else { panic!("claimed: {first:?}") };
    let second = c.claim_key("job", None).await.unwrap();
    assert!(matches!(second, KeyClaim::Pending { remaining_ms } if remaining_ms > 50_000), "{second:?}");
    let other = flowguard_core::token::new_token();
    assert_eq!(c.complete_key("job", &other, "1", None).await.unwrap_err().code, ErrorCode::NotOwner);
    assert!(!c.release_key("job", &other).await.unwrap());
    c.complete_key("job", &owner, r#"{"done":true}"#, None).await.unwrap();
    let done = c.claim_key("job", None).await.unwrap();
    assert!(matches!(&done, KeyClaim::Done { json, .. } if json == r#"{"done":true}"#), "{done:?}");

    let KeyClaim::Claimed { owner, .. } = c.claim_key("rel", None).await.unwrap() else { panic!() };
    assert!(c.release_key("rel", &owner).await.unwrap());
    assert!(matches!(c.claim_key("rel", None).await.unwrap(), KeyClaim::Claimed { .. }));

    let KeyClaim::Claimed { owner, .. } =
        c.claim_key("short", Some(Duration::from_millis(150))).await.unwrap()
    else {
        panic!()
    };
    sleep(300).await;
    assert!(matches!(c.claim_key("short", None).await.unwrap(), KeyClaim::Claimed { .. }));
    assert_eq!(c.complete_key("short", &owner, "1", None).await.unwrap_err().code, ErrorCode::NotOwner);
}

/// Two clients race for one free lock, released together by a barrier: exactly one wins, and
/// the loser is told the winner's fence. Twice: for a name never taken (no stored lock yet), and
/// again once the winner released it (a stored lock that is free).
pub async fn two_clients_race_for_one_lock(a: Client, b: Client) {
    let name = format!("contended-{}", flowguard_core::token::new_token());
    let mut last_fence = 0;
    for round in 0..2 {
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(2));
        let race = |c: Client| {
            let (barrier, name) = (barrier.clone(), name.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                c.acquire_lock(&name, AcquireOptions::default()).await.unwrap()
            })
        };
        let (ta, tb) = (race(a.clone()), race(b.clone()));
        let (ra, rb) = (ta.await.unwrap(), tb.await.unwrap());
        assert_eq!(
            [ra.acquired, rb.acquired].iter().filter(|w| **w).count(),
            1,
            "round {round}: {ra:?} {rb:?}"
        );
        assert_eq!(ra.fence, rb.fence, "the loser sees the winner's fence");
        assert!(ra.fence > last_fence, "round {round}: the fence increased");
        last_fence = ra.fence;
        let winner = if ra.acquired { ra } else { rb };
        assert!(a.release_lock(&name, winner.owner.as_deref().unwrap()).await.unwrap().released);
    }
}

/// Readers of one queue racing for its ids (four, on clients `a` and `b` in turn, released
/// together by a barrier, each asking for more than its share of one shard): while the visibility
/// leases hold, no id is delivered to two readers, a read after them gets nothing, and each id is
/// acked by the reader it was delivered to. Ten rounds, a queue each.
pub async fn concurrent_readers(a: Client, b: Client) {
    use flowguard_core::queue::SettleOutcome;
    use flowguard_core::queue::{EnqueueOptions, ReadOptions};
    const IDS: usize = 40;
    const READERS: usize = 4;
    for round in 0..10 {
        let queue = format!("race-{round}");
        let ids: Vec<String> = (0..IDS).map(|i| format!("id-{i:02}")).collect();
        a.enqueue(&queue, ids.clone(), EnqueueOptions::default()).await.unwrap();
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(READERS));
        let read = ReadOptions {
            limit: Some(15),
            visibility_timeout: Some(Duration::from_secs(60)),
            ..Default::default()
        };
        let tasks: Vec<_> = (0..READERS)
            .map(|i| {
                let c = if i % 2 == 0 { a.clone() } else { b.clone() };
                let (barrier, queue, read) = (barrier.clone(), queue.clone(), read.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    c.read_batch(&queue, read).await.unwrap()
                })
            })
            .collect();
        let mut batches = Vec::new();
        for t in tasks {
            batches.push(t.await.unwrap());
        }
        // The ids the race left (a reader may skip rows another one holds) go to one more read.
        batches.push(b.read_batch(&queue, ReadOptions { limit: Some(100), ..read.clone() }).await.unwrap());
        let mut seen: Vec<String> =
            batches.iter().flat_map(|x| x.items.iter().map(|d| d.id.clone())).collect();
        seen.sort();
        let delivered = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), delivered, "round {round}: an id was delivered to two readers");
        assert_eq!(seen, ids, "round {round}: every id was delivered");
        let after = a.read_batch(&queue, read.clone()).await.unwrap();
        assert!(after.items.is_empty(), "round {round}: delivered again while leased: {:?}", after.items);
        for (i, batch) in batches.iter().enumerate() {
            let mine: Vec<String> = batch.items.iter().map(|d| d.id.clone()).collect();
            let c = if i % 2 == 0 { &a } else { &b };
            for s in c.ack(&queue, &batch.owner, mine, None).await.unwrap() {
                assert_eq!(s.outcome, SettleOutcome::Done { requeued: false }, "round {round}: {s:?}");
            }
        }
    }
}

/// [`concurrent_readers`] on one client.
pub async fn concurrent_reads_never_share_an_id(c: Client) {
    concurrent_readers(c.clone(), c).await;
}

/// Fencing tokens strictly increase per name, across tasks taking turns on one lock at once
/// (each waits for it, holds it, releases it): every acquisition's fence is new and larger than
/// the one before it.
pub async fn fences_strictly_increase_under_contention(c: Client) {
    const TASKS: usize = 6;
    const ROUNDS: usize = 8;
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(TASKS));
    // The fences in the order the holders took the lock: appended while holding it.
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (c, barrier, order) = (c.clone(), barrier.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            for _ in 0..ROUNDS {
                let wait = AcquireOptions { wait: Some(Duration::from_secs(30)), ..Default::default() };
                let a = c.acquire_lock("fenced", wait).await.unwrap();
                assert!(a.acquired);
                order.lock().unwrap().push(a.fence);
                assert!(c.release_lock("fenced", a.owner.as_deref().unwrap()).await.unwrap().released);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(order.len(), TASKS * ROUNDS);
    assert!(order.windows(2).all(|w| w[0] < w[1]), "fences in the order taken: {order:?}");
    assert_eq!(c.get_lock("fenced").await.unwrap().fence, *order.last().unwrap());
}

/// Takes racing for one limiter (released together by a barrier): exactly its burst is allowed,
/// the others refused with when to retry.
pub async fn concurrent_takes_allow_exactly_the_burst(c: Client) {
    use flowguard_core::limiter::LimitOptions;
    const TASKS: usize = 20;
    let slow = LimitOptions {
        limit: 1,
        period: Some(Duration::from_secs(600)),
        burst: Some(5),
        ..Default::default()
    };
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(TASKS));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (c, barrier, slow) = (c.clone(), barrier.clone(), slow.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            c.rate_limit("burst", slow).await.unwrap()
        }));
    }
    let mut allowed = 0;
    for t in tasks {
        let r = t.await.unwrap();
        if r.allowed {
            allowed += 1;
        } else {
            assert!(r.retry_after_ms > 0.0, "{r:?}");
        }
    }
    assert_eq!(allowed, 5);
    assert!(c.get_limiter("burst").await.unwrap().active);
}

/// Acquisitions racing for a semaphore of 3 permits (released together by a barrier): exactly 3
/// get one, each with its own fence; only an owner releases or extends its permit; a freed permit
/// is taken again with a larger fence.
pub async fn concurrent_permits_never_exceed_the_permits(c: Client) {
    use flowguard_core::semaphore::PermitOptions;
    const TASKS: usize = 20;
    let three = PermitOptions { permits: 3, label: Some("w".into()), ..Default::default() };
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(TASKS));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (c, barrier, three) = (c.clone(), barrier.clone(), three.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            c.acquire_permit("pool", three).await.unwrap()
        }));
    }
    let mut won = Vec::new();
    for t in tasks {
        let r = t.await.unwrap();
        if r.acquired {
            won.push(r);
        } else {
            assert_eq!(r.holders, 3, "{r:?}");
        }
    }
    assert_eq!(won.len(), 3);
    let mut fences: Vec<u64> = won.iter().map(|r| r.fence).collect();
    fences.sort();
    fences.dedup();
    assert_eq!(fences.len(), 3, "each permit has its own fence");
    let info = c.get_semaphore("pool").await.unwrap();
    assert_eq!(info.holders.len(), 3);
    assert_eq!(info.fence, *fences.last().unwrap());
    assert!(info.holders.iter().all(|h| h.label.as_deref() == Some("w")));
    let other = flowguard_core::token::new_token();
    assert!(!c.release_permit("pool", &other).await.unwrap().released);
    assert!(!c.extend_permit("pool", &other, None).await.unwrap().extended);
    let first = won[0].owner.as_deref().unwrap();
    assert!(c.extend_permit("pool", first, Some(Duration::from_secs(60))).await.unwrap().extended);
    assert!(c.release_permit("pool", first).await.unwrap().released);
    assert!(!c.release_permit("pool", first).await.unwrap().released, "released once");
    let again = c.acquire_permit("pool", three).await.unwrap();
    assert!(again.acquired && again.fence > info.fence, "{again:?}");
}

/// Generates one `#[tokio::test]` per suite function for a backend.
#[macro_export]
macro_rules! suite {
    ($url:expr, $attrs:tt) => {
        suite!(@each $url, $attrs,
            claim_is_exclusive_and_completion_sticks,
            max_attempts_make_items_dead_until_revived,
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
            lock_force_release_by_fence,
            lock_expiry_and_fencing,
            lock_wait_gets_it_when_freed_and_never_waits_longer,
            concurrent_lock_sets_have_one_winner,
            lock_bad_input,
            empty_label_reads_back_as_no_label,
            queue_shard_count_is_kept_per_queue,
            catalog_lists_the_names_in_use,
            limiter_pause_refuses_takes_until_its_end,
            concurrent_takes_allow_exactly_the_burst,
            concurrent_permits_never_exceed_the_permits,
            concurrent_reads_never_share_an_id,
            state_values_set_get_increment_delete,
            idempotency_keys_claim_complete_release,
            fences_strictly_increase_under_contention
        );
    };
    (@each $url:expr, $attrs:tt, $($name:ident),*) => {
        $( suite!(@one $url, $attrs, $name); )*
    };
    (@one $url:expr, [$(#[$m:meta])*], $name:ident) => {
        #[test]
        $(#[$m])*
        fn $name() {
            common::runtime().block_on(async { common::$name(common::open($url).await).await });
        }
    };
}
