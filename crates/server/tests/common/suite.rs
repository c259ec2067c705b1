//! Every API route on one backend, through HTTP.

use serde_json::json;

use super::Server;

#[macro_export]
macro_rules! route_suite {
    ($url:expr, [$($attr:tt)*]) => {
        #[tokio::test]
        $($attr)*
        async fn tracker_routes() { common::suite::tracker($url).await }
        #[tokio::test]
        $($attr)*
        async fn tracker_dead_routes() { common::suite::tracker_dead($url).await }
        #[tokio::test]
        $($attr)*
        async fn tracker_result_routes() { common::suite::tracker_results($url).await }
        #[tokio::test]
        $($attr)*
        async fn lock_routes() { common::suite::lock($url).await }
        #[tokio::test]
        $($attr)*
        async fn queue_routes() { common::suite::queue($url).await }
        #[tokio::test]
        $($attr)*
        async fn state_routes() { common::suite::state($url).await }
        #[tokio::test]
        $($attr)*
        async fn ops_routes() { common::suite::ops($url).await }
        #[tokio::test]
        $($attr)*
        async fn listing_routes_and_state_gauges() { common::suite::catalog($url).await }
        #[tokio::test]
        $($attr)*
        async fn pacing_routes() { common::suite::pacing($url).await }
    };
}

pub async fn tracker(url: Option<String>) {
    let s = Server::open(url).await;
    let c = s.ok("/v1/tracker/claim", json!({"group": "g", "id": "a", "timeoutMs": 60000})).await;
    assert_eq!(c["claimed"], true);
    assert_eq!(c["item"]["status"], "in_progress");
    let owner = c["owner"].as_str().unwrap().to_string();
    // A busy item: 409 with the result and a code.
    let (st, busy) = s.call("/v1/tracker/claim", json!({"group": "g", "id": "a"})).await;
    assert_eq!(st, 409, "{busy}");
    assert_eq!(busy["code"], "ERR_ITEM_BUSY");
    assert_eq!(busy["reason"], "in_progress");
    assert_eq!(busy["claimed"], false);
    // A stale owner: 412 ERR_NOT_OWNER.
    let (st, e) =
        s.call("/v1/tracker/complete", json!({"group": "g", "id": "a", "owner": "0".repeat(32)})).await;
    assert_eq!((st, e["code"].as_str()), (412, Some("ERR_NOT_OWNER")), "{e}");
    let done = s.ok("/v1/tracker/complete", json!({"group": "g", "id": "a", "owner": owner})).await;
    assert_eq!(done["status"], "completed");
    // Resent (Retry On Fail): the same state, still 200.
    let again = s.ok("/v1/tracker/complete", json!({"group": "g", "id": "a", "owner": owner})).await;
    assert_eq!((again["status"].as_str(), again["attempts"].as_u64()), (Some("completed"), Some(1)));
    // Strings for numbers and booleans (n8n's "Using Fields Below").
    let c = s
        .ok(
            "/v1/tracker/claim",
            json!({"group": "g", "id": "a", "timeoutMs": "1000", "reclaimCompleted": "true"}),
        )
        .await;
    assert_eq!(c["claimed"], true);
    assert_eq!(c["item"]["attempts"], 2);
    let f = s.ok("/v1/tracker/fail", json!({"group": "g", "id": "b", "reason": "boom"})).await;
    assert_eq!((f["status"].as_str(), f["lastError"].as_str()), (Some("failed"), Some("boom")));
    let b = s.ok("/v1/tracker/claimBatch", json!({"group": "g", "ids": ["b", "c", "c"]})).await;
    assert_eq!(b["results"], json!(["claimed", "claimed", "in_progress"]));
    assert_eq!(b["claimed"], 2);
    assert_eq!(b["owner"].as_str().unwrap().len(), 32);
    let m = s.ok("/v1/tracker/claimMany", json!({"group": "g", "ids": ["d", "b"]})).await;
    assert_eq!(m[0]["claimed"], true);
    assert_eq!((m[1]["claimed"].as_bool(), m[1]["reason"].as_str()), (Some(false), Some("in_progress")));
    let r = s
        .ok(
            "/v1/tracker/setItems",
            json!({"group": "g", "requests": [
                {"id": "e", "status": "in_progress", "timeoutMs": 5000},
                {"id": "c", "status": "completed", "owner": b["owner"]},
                {"id": "d", "status": "completed", "owner": "f".repeat(32)},
                {"id": "x", "status": "none"}
            ]}),
        )
        .await;
    assert_eq!(r[0]["claimed"], true);
    assert_eq!(r[1]["ok"], true);
    assert_eq!((r[2]["ok"].as_bool(), r[2]["code"].as_str()), (Some(false), Some("ERR_NOT_OWNER")));
    assert_eq!(r[3]["action"], "unset");
    let one = s.ok("/v1/tracker/getItem", json!({"group": "g", "id": "c"})).await;
    assert_eq!(one["status"], "completed");
    assert!(one["timeline"].as_array().unwrap().len() >= 2);
    let many = s.ok("/v1/tracker/getItems", json!({"group": "g", "ids": ["a", "zz"]})).await;
    assert_eq!((many[0]["status"].as_str(), many[1]["status"].as_str()), (Some("in_progress"), Some("none")));
    let l = s.ok("/v1/tracker/listItems", json!({"group": "g", "status": "completed"})).await;
    assert_eq!(l["counts"]["completed"], 1);
    assert_eq!(l["counts"]["total"], 5);
    assert_eq!(l["items"][0]["id"], "c");
    let l = s.ok("/v1/tracker/listItems", json!({"group": "g", "limit": 2})).await;
    assert_eq!(l["items"].as_array().unwrap().len(), 2);
    assert_eq!(l["nextOffset"], 2);
    // keepMs "forever": no expiry (complete, fail, setItems); another word is refused, named.
    let kept = s.ok("/v1/tracker/complete", json!({"group": "k", "id": "a", "keepMs": "forever"})).await;
    assert_eq!(kept["status"], "completed");
    assert!(kept.get("expiresAt").is_none(), "{kept}");
    let kept =
        s.ok("/v1/tracker/fail", json!({"group": "k", "id": "b", "reason": "r", "keepMs": "forever"})).await;
    assert!(kept.get("expiresAt").is_none(), "{kept}");
    let r = s
        .ok(
            "/v1/tracker/setItems",
            json!({"group": "k", "requests": [
                {"id": "c", "status": "completed", "keepMs": "forever"},
                {"id": "d", "status": "completed", "keepMs": "60000"}
            ]}),
        )
        .await;
    assert!(r[0]["item"].get("expiresAt").is_none(), "{r}");
    assert!(r[1]["item"]["expiresAt"].as_i64().is_some(), "{r}");
    let (st, e) = s.call("/v1/tracker/complete", json!({"group": "k", "id": "e", "keepMs": "always"})).await;
    assert_eq!(
        (st, e["code"].as_str(), e["field"].as_str()),
        (400, Some("ERR_INVALID_ARGUMENT"), Some("keepMs")),
        "{e}"
    );
    // Unset: safe to resend.
    assert_eq!(s.ok("/v1/tracker/unsetItem", json!({"group": "g", "id": "c"})).await["existed"], true);
    assert_eq!(s.ok("/v1/tracker/unsetItem", json!({"group": "g", "id": "c"})).await["existed"], false);
}

/// maxAttempts (numbers or strings of digits), dead items (409 with reason `dead`, listed and
/// counted) and reviveItems.
pub async fn tracker_dead(url: Option<String>) {
    let s = Server::open(url).await;
    let c = s.ok("/v1/tracker/claim", json!({"group": "d", "id": "a", "maxAttempts": "1"})).await;
    assert_eq!(c["item"]["maxAttempts"], 1);
    let dead = s
        .ok("/v1/tracker/fail", json!({"group": "d", "id": "a", "reason": "boom", "owner": c["owner"]}))
        .await;
    assert_eq!((dead["status"].as_str(), dead["attempts"].as_u64()), (Some("dead"), Some(1)));
    let (st, busy) = s.call("/v1/tracker/claim", json!({"group": "d", "id": "a"})).await;
    assert_eq!(
        (st, busy["code"].as_str(), busy["reason"].as_str()),
        (409, Some("ERR_ITEM_BUSY"), Some("dead"))
    );
    let b = s.ok("/v1/tracker/claimBatch", json!({"group": "d", "ids": ["a", "b"], "maxAttempts": 3})).await;
    assert_eq!(b["results"], json!(["dead", "claimed"]));
    let m = s.ok("/v1/tracker/claimMany", json!({"group": "d", "ids": ["a"], "maxAttempts": 3})).await;
    assert_eq!(m[0]["reason"], "dead");
    let l = s.ok("/v1/tracker/listItems", json!({"group": "d", "status": "dead"})).await;
    assert_eq!((l["counts"]["dead"].as_u64(), l["counts"]["total"].as_u64()), (Some(1), Some(2)));
    assert_eq!(l["items"][0]["id"], "a");
    let r = s.ok("/v1/tracker/reviveItems", json!({"group": "d", "ids": ["a", "b"]})).await;
    assert_eq!((r[0]["ok"].as_bool(), r[0]["action"].as_str()), (Some(true), Some("revive")));
    assert_eq!(
        (r[0]["item"]["status"].as_str(), r[0]["item"]["attempts"].as_u64()),
        (Some("failed"), Some(1))
    );
    assert_eq!((r[1]["ok"].as_bool(), r[1]["reason"].as_str()), (Some(false), Some("in_progress")));
    let again = s.ok("/v1/tracker/claim", json!({"group": "d", "id": "a"})).await;
    assert_eq!(again["item"]["attempts"], 2);
    let (st, e) = s.call("/v1/tracker/claim", json!({"group": "d", "id": "z", "maxAttempts": 0})).await;
    assert_eq!((st, e["field"].as_str()), (400, Some("maxAttempts")), "{e}");
    let (st, e) =
        s.call("/v1/tracker/reviveItems", json!({"group": "d", "ids": ["a"], "resetAttempts": "yes"})).await;
    assert_eq!((st, e["code"].as_str()), (400, Some("ERR_INVALID_ARGUMENT")), "{e}");
}

/// complete's `result` and a claim's `note`, returned by every read; a new claim clears the
/// result; past their bounds, 400 naming the field and nothing written.
pub async fn tracker_results(url: Option<String>) {
    let s = Server::open(url).await;
    let c = s.ok("/v1/tracker/claim", json!({"group": "r", "id": "a", "note": "page 3"})).await;
    assert_eq!(c["item"]["note"], "page 3");
    assert!(c["item"].get("result").is_none(), "{c}");
    let result = json!({"rows": 12, "ids": ["x"], "none": null});
    let done = s
        .ok("/v1/tracker/complete", json!({"group": "r", "id": "a", "owner": c["owner"], "result": result}))
        .await;
    assert_eq!((&done["result"], &done["note"]), (&result, &json!("page 3")));
    let got = s.ok("/v1/tracker/getItem", json!({"group": "r", "id": "a"})).await;
    assert_eq!(got["result"], result);
    let items = s.ok("/v1/tracker/getItems", json!({"group": "r", "ids": ["a"]})).await;
    assert_eq!(items[0]["result"], result);
    let list = s.ok("/v1/tracker/listItems", json!({"group": "r"})).await;
    assert_eq!((&list["items"][0]["result"], &list["items"][0]["note"]), (&result, &json!("page 3")));
    // A present null is a result.
    s.ok("/v1/tracker/claim", json!({"group": "r", "id": "n"})).await;
    let null = s.ok("/v1/tracker/complete", json!({"group": "r", "id": "n", "result": null})).await;
    assert_eq!(null.get("result"), Some(&json!(null)), "{null}");
    let m = s
        .ok(
            "/v1/tracker/claimMany",
            json!({"group": "r", "ids": ["a"], "reclaimCompleted": true, "note": "m"}),
        )
        .await;
    assert_eq!(m[0]["item"]["note"], "m");
    assert!(m[0]["item"].get("result").is_none(), "a new claim clears the result: {m}");
    let b = s.ok("/v1/tracker/claimBatch", json!({"group": "r", "ids": ["b"], "note": "batch"})).await;
    let set = s
        .ok(
            "/v1/tracker/setItems",
            json!({"group": "r", "requests": [{"id": "b", "status": "completed", "owner": b["owner"], "result": [1, 2]}]}),
        )
        .await;
    assert_eq!((&set[0]["item"]["result"], &set[0]["item"]["note"]), (&json!([1, 2]), &json!("batch")));
    let big = json!({"text": "x".repeat(4096)});
    let (st, e) = s.call("/v1/tracker/complete", json!({"group": "r", "id": "c", "result": big})).await;
    assert_eq!(
        (st, e["code"].as_str(), e["field"].as_str()),
        (400, Some("ERR_INVALID_ARGUMENT"), Some("result"))
    );
    assert!(e["message"].as_str().unwrap_or("").contains("4096"), "{e}");
    let (st, e) =
        s.call("/v1/tracker/claim", json!({"group": "r", "id": "c", "note": "n".repeat(257)})).await;
    assert_eq!((st, e["field"].as_str()), (400, Some("note")), "{e}");
    let (st, e) =
        s.call("/v1/tracker/fail", json!({"group": "r", "id": "c", "reason": "x", "result": 1})).await;
    assert_eq!((st, e["field"].as_str()), (400, Some("result")), "{e}");
    let none = s.ok("/v1/tracker/getItem", json!({"group": "r", "id": "c"})).await;
    assert_eq!(none["status"], "none", "nothing written");
}

pub async fn lock(url: Option<String>) {
    let s = Server::open(url).await;
    let a = s.ok("/v1/lock/acquire", json!({"name": "L", "timeoutMs": 30000, "label": "run-1"})).await;
    assert_eq!(a["acquired"], true);
    let owner = a["owner"].as_str().unwrap().to_string();
    let fence = a["fence"].as_u64().unwrap();
    // Held: 409 with the holder, the time left and the fence.
    let (st, held) = s.call("/v1/lock/acquire", json!({"name": "L", "waitMs": 50})).await;
    assert_eq!(st, 409, "{held}");
    assert_eq!(held["code"], "ERR_LOCK_HELD");
    assert_eq!(held["holder"], "run-1");
    assert_eq!(held["fence"], fence);
    assert!(held["remainingMs"].as_u64().unwrap() > 20_000, "{held}");
    assert!(held.get("owner").is_none());
    assert!(held["waitedMs"].as_u64().unwrap() >= 40, "{held}");
    // Milliseconds as the addon reads them (the core's one rule): a fraction is kept, as a number
    // or as a string, and a fraction of a millisecond still waits (0.5 ms: held, 409).
    for (name, timeout) in [("F1", json!(2500.5)), ("F2", json!(" 2500.5 "))] {
        let f = s.ok("/v1/lock/acquire", json!({"name": name, "timeoutMs": timeout})).await;
        let left = f["remainingMs"].as_u64().unwrap();
        assert!(f["acquired"] == true && left > 2000 && left <= 2501, "{f}");
    }
    let (st, held) = s.call("/v1/lock/acquire", json!({"name": "L", "waitMs": 0.5})).await;
    assert_eq!(st, 409, "{held}");
    assert_eq!(held["code"], "ERR_LOCK_HELD", "{held}");
    let g = s.ok("/v1/lock/get", json!({"name": "L"})).await;
    assert_eq!((g["locked"].as_bool(), g["holder"].as_str()), (Some(true), Some("run-1")));
    let e = s.ok("/v1/lock/extend", json!({"name": "L", "owner": owner, "timeoutMs": 90000})).await;
    assert_eq!(e["extended"], true);
    assert!(e["remainingMs"].as_u64().unwrap() > 60_000);
    let (st, e) = s.call("/v1/lock/extend", json!({"name": "L", "owner": "a".repeat(32)})).await;
    assert_eq!(
        (st, e["code"].as_str(), e["reason"].as_str()),
        (412, Some("ERR_NOT_OWNER"), Some("not_owner")),
        "{e}"
    );
    assert_eq!(
        s.ok("/v1/lock/release", json!({"name": "L", "owner": owner})).await,
        json!({"released": true})
    );
    // A resent release changes nothing and is still 200.
    assert_eq!(
        s.ok("/v1/lock/release", json!({"name": "L", "owner": owner})).await,
        json!({"released": false, "reason": "not_held"})
    );
    let (st, e) = s.call("/v1/lock/extend", json!({"name": "L", "owner": owner})).await;
    assert_eq!((st, e["reason"].as_str()), (412, Some("not_held")));
    let a2 = s.ok("/v1/lock/acquire", json!({"name": "L"})).await;
    assert!(a2["fence"].as_u64().unwrap() > fence);
    assert_eq!(s.ok("/v1/lock/get", json!({"name": "free"})).await["locked"], false);
}

pub async fn queue(url: Option<String>) {
    let s = Server::open(url).await;
    let e = s.ok("/v1/queue/enqueue", json!({"queue": "q", "ids": ["a", "b", "c"], "shards": 2})).await;
    assert_eq!(e["added"], 3);
    // Resent: duplicates, nothing doubled.
    let e = s.ok("/v1/queue/enqueue", json!({"queue": "q", "ids": ["a", "b", "c"], "shards": 2})).await;
    assert_eq!(e["duplicates"], 3);
    let e = s.ok("/v1/queue/enqueue", json!({"queue": "q", "ids": "d", "shards": 2, "delayMs": 60000})).await;
    assert_eq!(e["items"][0]["outcome"], "added");
    let size = s.ok("/v1/queue/size", json!({"queue": "q", "shards": 2})).await;
    assert_eq!((size["waiting"].as_u64(), size["due"].as_u64()), (Some(4), Some(3)));
    assert_eq!(size["shards"].as_array().unwrap().len(), 2);
    let p = s.ok("/v1/queue/peek", json!({"queue": "q", "shards": 2, "limit": 10})).await;
    assert_eq!(p.as_array().unwrap().len(), 4);
    assert_eq!(p[3]["id"], "d");
    assert_eq!(p[3]["due"], false);
    let b = s
        .ok(
            "/v1/queue/readBatch",
            json!({"queue": "q", "shards": 2, "limit": 2, "visibilityTimeoutMs": 30000}),
        )
        .await;
    let ids: Vec<String> =
        b["ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    assert_eq!(ids.len(), 2);
    let owner = b["owner"].as_str().unwrap().to_string();
    let a = s.ok("/v1/queue/ack", json!({"queue": "q", "owner": owner, "ids": [ids[0]], "shards": 2})).await;
    assert_eq!((a["done"].as_u64(), a["refused"].as_u64()), (Some(1), Some(0)));
    // A resent ack: not_claimed, 200, nothing changes.
    let a = s.ok("/v1/queue/ack", json!({"queue": "q", "owner": owner, "ids": [ids[0]], "shards": 2})).await;
    assert_eq!((a["done"].as_u64(), a["items"][0]["reason"].as_str()), (Some(0), Some("not_claimed")));
    let r =
        s.ok("/v1/queue/release", json!({"queue": "q", "owner": owner, "ids": ids[1], "shards": 2})).await;
    assert_eq!(r["done"], 1);
    assert!(r["items"][0]["dueAt"].as_i64().is_some());
    let size = s.ok("/v1/queue/size", json!({"queue": "q", "shards": 2, "shard": 0})).await;
    assert_eq!(size["shards"].as_array().unwrap().len(), 1);
    let all = s.ok("/v1/queue/size", json!({"queue": "q", "shards": 2})).await;
    assert_eq!((all["waiting"].as_u64(), all["claimed"].as_u64()), (Some(3), Some(0)));
    // A shard count that disagrees with the queue's: 400, coded.
    let (st, e) = s.call("/v1/queue/size", json!({"queue": "q", "shards": 3})).await;
    assert_eq!((st, e["code"].as_str()), (400, Some("ERR_INVALID_ARGUMENT")), "{e}");

    // maxDelayMs caps a debounce: re-enqueued, the id stays due at its first enqueue + 1 s,
    // not at the last enqueue + delayMs.
    let capped =
        json!({"queue": "capped", "ids": "x", "debounce": true, "delayMs": 60000, "maxDelayMs": 1000});
    let first = s.ok("/v1/queue/enqueue", capped.clone()).await;
    let due = first["items"][0]["dueAt"].as_i64().unwrap();
    let again = s.ok("/v1/queue/enqueue", capped.clone()).await;
    assert_eq!((again["debounced"].as_u64(), again["items"][0]["dueAt"].as_i64()), (Some(1), Some(due)));
    let p = s.ok("/v1/queue/peek", json!({"queue": "capped"})).await;
    assert_eq!(p[0]["dueAt"].as_i64(), Some(due));
    // Refused, coded, naming the field: without debounce, 0, negative, past 365 days, not a number.
    for bad in [
        json!({"queue": "capped", "ids": "x", "maxDelayMs": 1000}),
        json!({"queue": "capped", "ids": "x", "debounce": true, "maxDelayMs": 0}),
        json!({"queue": "capped", "ids": "x", "debounce": true, "maxDelayMs": -1}),
        json!({"queue": "capped", "ids": "x", "debounce": true, "maxDelayMs": 31_622_400_000u64}),
        json!({"queue": "capped", "ids": "x", "debounce": true, "maxDelayMs": "soon"}),
    ] {
        let (st, e) = s.call("/v1/queue/enqueue", bad.clone()).await;
        assert_eq!(
            (st, e["code"].as_str(), e["field"].as_str()),
            (400, Some("ERR_INVALID_ARGUMENT"), Some("maxDelayMs")),
            "{bad} {e}"
        );
    }
    // Dead letters: read with maxDeliveries 1, released, read again: x dies instead.
    let dl = |extra: serde_json::Value| {
        let mut b = json!({"queue": "dl", "maxDeliveries": 1, "visibilityTimeoutMs": 60000});
        b.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        b
    };
    s.ok("/v1/queue/enqueue", json!({"queue": "dl", "ids": ["x", "y"]})).await;
    let b = s.ok("/v1/queue/readBatch", dl(json!({}))).await;
    assert_eq!(b["ids"], json!(["x", "y"]));
    s.ok("/v1/queue/release", json!({"queue": "dl", "owner": b["owner"], "ids": ["x"]})).await;
    s.ok("/v1/queue/ack", json!({"queue": "dl", "owner": b["owner"], "ids": ["y"]})).await;
    assert_eq!(s.ok("/v1/queue/readBatch", dl(json!({}))).await["ids"], json!([]));
    let size = s.ok("/v1/queue/size", json!({"queue": "dl"})).await;
    assert_eq!((size["dead"].as_u64(), size["shards"][0]["dead"].as_u64()), (Some(1), Some(1)));
    let page = s.ok("/v1/queue/deadLetters", json!({"queue": "dl", "limit": 10})).await;
    assert_eq!(
        (page["items"][0]["id"].as_str(), page["items"][0]["deliveries"].as_u64()),
        (Some("x"), Some(1))
    );
    assert!(page["items"][0]["diedAt"].as_i64().is_some() && page.get("nextOffset").is_none(), "{page}");
    let e = s.ok("/v1/queue/enqueue", json!({"queue": "dl", "ids": "x"})).await;
    assert_eq!((e["dead"].as_u64(), e["items"][0]["outcome"].as_str()), (Some(1), Some("dead")));
    let r = s.ok("/v1/queue/requeueDead", json!({"queue": "dl", "ids": ["x", "z"]})).await;
    assert_eq!((r["requeued"].as_u64(), r["notDead"].as_u64()), (Some(1), Some(1)));
    assert_eq!(
        (r["items"][0]["outcome"].as_str(), r["items"][1]["outcome"].as_str()),
        (Some("requeued"), Some("not_dead"))
    );
    assert_eq!(s.ok("/v1/queue/readBatch", dl(json!({}))).await["ids"], json!(["x"]));
    let (st, e) = s.call("/v1/queue/readBatch", dl(json!({"maxDeliveries": 0}))).await;
    assert_eq!((st, e["field"].as_str()), (400, Some("maxDeliveries")), "{e}");
}

pub async fn state(url: Option<String>) {
    let s = Server::open(url).await;
    let v = json!({"n": 1, "big": 12345678901234567890u64, "s": "x", "l": [null, true]});
    let r = s.ok("/v1/state/set", json!({"key": "k", "value": v, "ttlMs": 60000})).await;
    assert_eq!(r["written"], true);
    assert!(r["expiresAt"].as_i64().is_some());
    let g = s.ok("/v1/state/get", json!({"key": "k"})).await;
    assert_eq!((g["found"].as_bool(), &g["value"]), (Some(true), &v));
    let raw = s
        .http
        .post(s.url("/v1/state/get"))
        .bearer_auth(super::TOKEN)
        .json(&json!({"key": "k"}))
        .send()
        .await
        .unwrap();
    assert!(raw.text().await.unwrap().contains("12345678901234567890"), "big numbers pass unrounded");
    let r = s.ok("/v1/state/set", json!({"key": "k", "value": 2, "ifAbsent": true})).await;
    assert_eq!((r["written"].as_bool(), &r["value"]), (Some(false), &v));
    let r =
        s.ok("/v1/state/set", json!({"key": "n", "value": null, "expiresAt": 8_000_000_000_000u64})).await;
    assert_eq!((r["value"].is_null(), r["expiresAt"].as_i64()), (true, Some(8_000_000_000_000)));
    let m = s.ok("/v1/state/getMany", json!({"keys": ["k", "missing", "n"]})).await;
    assert_eq!(
        (m[0]["found"].as_bool(), m[1]["found"].as_bool(), m[2]["found"].as_bool()),
        (Some(true), Some(false), Some(true))
    );
    assert_eq!(s.ok("/v1/state/delete", json!({"key": "k"})).await["deleted"], true);
    assert_eq!(s.ok("/v1/state/delete", json!({"key": "k"})).await["deleted"], false);
    assert_eq!(s.ok("/v1/state/increment", json!({"key": "c"})).await["value"], 1);
    assert_eq!(s.ok("/v1/state/increment", json!({"key": "c", "by": -5, "ttlMs": 60000})).await["value"], -4);
    let (st, e) = s.call("/v1/state/increment", json!({"key": "n"})).await;
    assert_eq!((st, e["code"].as_str()), (400, Some("ERR_INVALID_ARGUMENT")), "{e}");
    // Idempotency keys.
    let c = s.ok("/v1/state/claimKey", json!({"key": "job", "leaseMs": 30000})).await;
    assert_eq!(c["status"], "claimed");
    let owner = c["owner"].as_str().unwrap().to_string();
    let (st, p) = s.call("/v1/state/claimKey", json!({"key": "job"})).await;
    assert_eq!(
        (st, p["status"].as_str(), p["code"].as_str()),
        (409, Some("pending"), Some("ERR_KEY_PENDING")),
        "{p}"
    );
    assert!(p["remainingMs"].as_u64().unwrap() > 20_000);
    let done = s.ok("/v1/state/completeKey", json!({"key": "job", "owner": owner, "value": {"ok": 1}})).await;
    assert_eq!(done, json!({"stored": true}));
    let d = s.ok("/v1/state/claimKey", json!({"key": "job"})).await;
    assert_eq!((d["status"].as_str(), &d["value"]), (Some("done"), &json!({"ok": 1})));
    let (st, e) = s.call("/v1/state/completeKey", json!({"key": "job", "owner": owner, "value": 2})).await;
    assert_eq!((st, e["code"].as_str()), (412, Some("ERR_NOT_OWNER")), "{e}");
    let c = s.ok("/v1/state/claimKey", json!({"key": "job2"})).await;
    let o2 = c["owner"].as_str().unwrap().to_string();
    assert_eq!(s.ok("/v1/state/releaseKey", json!({"key": "job2", "owner": o2})).await["released"], true);
    assert_eq!(s.ok("/v1/state/releaseKey", json!({"key": "job2", "owner": o2})).await["released"], false);
    assert_eq!(s.ok("/v1/state/claimKey", json!({"key": "job2"})).await["status"], "claimed");
}

pub async fn ops(url: Option<String>) {
    let kind = if url.is_some() { "redis" } else { "embedded" };
    let s = Server::open(url).await;
    let h: serde_json::Value = s.http.get(s.url("/healthz")).send().await.unwrap().json().await.unwrap();
    assert_eq!(h["status"], "ok");
    let r = s.http.get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r: serde_json::Value = r.json().await.unwrap();
    assert_eq!(r["backend"], kind);
    s.ok("/v1/lock/get", json!({"name": "m"})).await;
    s.call("/v1/lock/get", json!({"name": ""})).await;
    let m = s.http.get(s.url("/metrics")).bearer_auth(super::TOKEN).send().await.unwrap();
    assert_eq!(m.status().as_u16(), 200);
    let text = m.text().await.unwrap();
    assert!(
        text.contains(r#"flowguard_http_requests_total{code="OK",route="/v1/lock/get",status="200"} 1"#),
        "{text}"
    );
    assert!(text.contains(
        r#"flowguard_http_requests_total{code="ERR_INVALID_ARGUMENT",route="/v1/lock/get",status="400"} 1"#
    ));
    assert!(text.contains("flowguard_http_request_duration_seconds_bucket"));
    assert_eq!(s.http.get(s.url("/metrics")).send().await.unwrap().status().as_u16(), 401);
}

/// Every page of a listing route, a name at a time.
async fn all_pages(s: &Server, path: &str, field: &str) -> Vec<serde_json::Value> {
    let (mut out, mut cursor) = (Vec::new(), None::<String>);
    for _ in 0..10_000 {
        let mut body = json!({"limit": 1});
        if let Some(c) = &cursor {
            body["cursor"] = json!(c);
        }
        let page = s.ok(path, body).await;
        out.extend(page[field].as_array().unwrap().iter().cloned());
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
    panic!("{path} never ended");
}

pub async fn catalog(url: Option<String>) {
    catalog_on(&Server::open(url).await).await
}

pub async fn catalog_on(s: &Server) {
    s.ok(
        "/v1/tracker/setItems",
        json!({"group": "g-a", "requests": [{"id": "1", "status": "completed"}, {"id": "2", "status": "failed", "error": "boom"}]}),
    )
    .await;
    s.ok("/v1/tracker/setItems", json!({"group": "g-b", "requests": [{"id": "1", "status": "completed"}]}))
        .await;
    let lock = s.ok("/v1/lock/acquire", json!({"name": "L", "label": "w1", "timeoutMs": 600000})).await;
    let free = s.ok("/v1/lock/acquire", json!({"name": "free"})).await;
    s.ok("/v1/lock/release", json!({"name": "free", "owner": free["owner"]})).await;
    let ids: Vec<String> = (0..6).map(|i| format!("id-{i}")).collect();
    s.ok("/v1/queue/enqueue", json!({"queue": "q", "ids": ids, "shards": 3})).await;
    s.ok("/v1/queue/readBatch", json!({"queue": "q", "shards": 3, "limit": 2})).await;
    // 1 of 4 tokens per 10 min taken: full again in 150 s.
    let rule = json!({"name": "api", "limit": 4, "periodMs": 600000, "burst": 4});
    s.ok("/v1/limiter/take", rule).await;
    s.ok("/v1/limiter/take", json!({"name": "idle", "limit": 1, "cost": 0})).await;
    let held = s
        .ok("/v1/semaphore/acquire", json!({"name": "S", "permits": 3, "label": "w2", "timeoutMs": 600000}))
        .await;
    let gone = s.ok("/v1/semaphore/acquire", json!({"name": "gone", "permits": 3})).await;
    s.ok("/v1/semaphore/release", json!({"name": "gone", "owner": gone["owner"]})).await;

    let mut groups = all_pages(s, "/v1/tracker/listGroups", "groups").await;
    groups.sort_by_key(|g| g["group"].as_str().unwrap().to_string());
    groups.dedup();
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert_eq!(groups[0]["group"], "g-a");
    assert_eq!(
        groups[0]["counts"],
        json!({"inProgress": 0, "abandoned": 0, "completed": 1, "failed": 1, "dead": 0, "total": 2})
    );
    assert_eq!(groups[1]["counts"]["completed"], 1);

    let locks = all_pages(s, "/v1/lock/list", "locks").await;
    assert_eq!(locks.len(), 1, "{locks:?}");
    assert_eq!(
        (&locks[0]["name"], &locks[0]["holder"], &locks[0]["fence"]),
        (&json!("L"), &json!("w1"), &lock["fence"])
    );
    assert!(locks[0]["remainingMs"].as_u64().unwrap() > 590_000);

    let queues = all_pages(s, "/v1/queue/list", "queues").await;
    assert_eq!(queues.len(), 1, "{queues:?}");
    let q = &queues[0];
    assert_eq!(
        (&q["queue"], &q["shardCount"], &q["waiting"], &q["claimed"]),
        (&json!("q"), &json!(3), &json!(4), &json!(2))
    );
    assert_eq!(q["shards"].as_array().unwrap().len(), 3);

    let limiters = all_pages(s, "/v1/limiter/list", "limiters").await;
    assert_eq!(limiters.len(), 1, "{limiters:?}");
    assert_eq!(limiters[0]["name"], "api");
    let reset = limiters[0]["resetAfterMs"].as_f64().unwrap();
    assert!(reset > 140_000.0 && reset <= 150_000.0, "{limiters:?}");

    let semaphores = all_pages(s, "/v1/semaphore/list", "semaphores").await;
    assert_eq!(semaphores.len(), 1, "{semaphores:?}");
    let sem = &semaphores[0];
    // The fence of its one acquisition (1 in memory and in the file, from the clock on Redis).
    assert_eq!((&sem["name"], &sem["fence"]), (&json!("S"), &held["fence"]));
    let holders = sem["holders"].as_array().unwrap();
    assert_eq!(
        (holders.len(), &holders[0]["label"], &holders[0]["fence"]),
        (1, &json!("w2"), &held["fence"])
    );
    assert!(holders[0]["remainingMs"].as_u64().unwrap() > 590_000, "{sem}");

    for path in ["/v1/queue/list", "/v1/limiter/list", "/v1/semaphore/list"] {
        for bad in [json!({"limit": 0}), json!({"limit": 101}), json!({"cursor": ""}), json!({"other": 1})] {
            let (st, e) = s.call(path, bad.clone()).await;
            assert_eq!(st, 400, "{path} {bad} answered {e}");
            assert!(e["code"] == "ERR_INVALID_ARGUMENT" || e["code"] == "ERR_INVALID_JSON", "{e}");
        }
    }

    let text =
        s.http.get(s.url("/metrics")).bearer_auth(super::TOKEN).send().await.unwrap().text().await.unwrap();
    for line in [
        "flowguard_locks_held 1",
        r#"flowguard_items{group="g-a",status="failed"} 1"#,
        r#"flowguard_items{group="g-a",status="completed"} 1"#,
        r#"flowguard_items{group="g-b",status="completed"} 1"#,
        r#"flowguard_queue_ids{queue="q",state="waiting"} 4"#,
        r#"flowguard_queue_ids{queue="q",state="claimed"} 2"#,
        r#"flowguard_listing_complete{kind="groups"} 1"#,
        r#"flowguard_listing_complete{kind="queues"} 1"#,
        "flowguard_limiters_in_use 1",
        r#"flowguard_semaphore_holders{semaphore="S"} 1"#,
        r#"flowguard_listing_complete{kind="semaphores"} 1"#,
        "flowguard_state_up 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
}

/// Rate Limiter and Semaphore routes.
pub async fn pacing(url: Option<String>) {
    let s = Server::open(url).await;
    let t = s.ok("/v1/limiter/take", json!({"name": "api", "limit": 2})).await;
    assert_eq!((t["allowed"].as_bool(), t["remaining"].as_u64()), (Some(true), Some(0)), "{t}");
    let (st, over) = s.call("/v1/limiter/take", json!({"name": "api", "limit": 2})).await;
    assert_eq!((st, over["code"].as_str()), (429, Some("ERR_RATE_LIMITED")), "{over}");
    let retry = over["retryAfterMs"].as_f64().unwrap();
    assert!(retry > 0.0 && retry <= 500.0, "{over}");
    // Reserve: the slot is given, and /wait answers once it has come.
    let r = s.ok("/v1/limiter/take", json!({"name": "api", "limit": 2, "maxWaitMs": 1000})).await;
    assert!(r["slotsMs"][0].as_f64().unwrap() > 0.0, "{r}");
    let t0 = std::time::Instant::now();
    let w = s.ok("/v1/limiter/wait", json!({"name": "api", "limit": 2, "maxWaitMs": "2000"})).await;
    assert!(t0.elapsed().as_millis() as f64 + 5.0 >= w["waitMs"].as_f64().unwrap(), "{w}");
    let (st, e) = s.call("/v1/limiter/take", json!({"name": "api"})).await;
    assert_eq!(
        (st, e["code"].as_str(), e["field"].as_str()),
        (400, Some("ERR_INVALID_ARGUMENT"), Some("limit")),
        "{e}"
    );

    // An upstream's 429: a pause refuses takes until its end, a shorter one changes nothing,
    // the listing shows its end.
    let p = s.ok("/v1/limiter/pause", json!({"name": "up", "retryAfter": 60})).await;
    let end = p["pausedUntil"].as_f64().unwrap();
    assert!(p["pauseMs"].as_f64().unwrap() > 59_000.0, "{p}");
    let (st, over) = s.call("/v1/limiter/take", json!({"name": "up", "limit": 100})).await;
    assert_eq!((st, over["code"].as_str()), (429, Some("ERR_RATE_LIMITED")), "{over}");
    let retry_at = over["decidedAt"].as_f64().unwrap() + over["retryAfterMs"].as_f64().unwrap();
    assert!((retry_at - end).abs() < 0.01, "{over} {p}");
    let date = "Sun, 06 Nov 1994 08:49:37 GMT";
    for shorter in [json!({"name": "up", "retryAfter": "5"}), json!({"name": "up", "retryAfter": date})] {
        assert_eq!(s.ok("/v1/limiter/pause", shorter).await["pausedUntil"].as_f64(), Some(end));
    }
    let listed = all_pages(&s, "/v1/limiter/list", "limiters").await;
    let up = listed.iter().find(|l| l["name"] == "up").expect("the paused limiter is listed");
    assert_eq!(up["pausedUntil"].as_f64(), Some(end), "{listed:?}");
    for (body, field) in [
        (json!({"name": "up", "retryAfter": "soon"}), "retryAfter"),
        (json!({"name": "up", "retryAfter": 1.5}), "retryAfter"),
        (json!({"name": "up", "untilMs": 4_102_444_800_000u64}), "untilMs"),
        (json!({"name": "up"}), "retryAfter"),
    ] {
        let (st, e) = s.call("/v1/limiter/pause", body.clone()).await;
        assert_eq!(
            (st, e["code"].as_str(), e["field"].as_str()),
            (400, Some("ERR_INVALID_ARGUMENT"), Some(field)),
            "{body} {e}"
        );
    }

    let a = s.ok("/v1/semaphore/acquire", json!({"name": "pool", "permits": 1, "label": "run-1"})).await;
    let owner = a["owner"].as_str().unwrap().to_string();
    let fence = a["fence"].as_u64().unwrap_or(0);
    assert!(fence >= 1 && a["holders"].as_u64() == Some(1), "{a}");
    let (st, full) = s.call("/v1/semaphore/acquire", json!({"name": "pool", "permits": 1})).await;
    assert_eq!(
        (st, full["code"].as_str(), full["holders"].as_u64()),
        (409, Some("ERR_SEMAPHORE_FULL"), Some(1)),
        "{full}"
    );
    let g = s.ok("/v1/semaphore/get", json!({"name": "pool"})).await;
    assert_eq!((g["holders"][0]["label"].as_str(), g["fence"].as_u64()), (Some("run-1"), Some(fence)), "{g}");
    let x = s.ok("/v1/semaphore/extend", json!({"name": "pool", "owner": owner, "timeoutMs": 5000})).await;
    assert_eq!(x["extended"], true);
    assert_eq!(
        s.ok("/v1/semaphore/release", json!({"name": "pool", "owner": owner})).await["released"],
        true
    );
    let again = s.ok("/v1/semaphore/release", json!({"name": "pool", "owner": owner})).await;
    assert_eq!((again["released"].as_bool(), again["reason"].as_str()), (Some(false), Some("not_held")));
    let (st, lost) = s.call("/v1/semaphore/extend", json!({"name": "pool", "owner": owner})).await;
    assert_eq!((st, lost["code"].as_str()), (412, Some("ERR_NOT_OWNER")), "{lost}");
}
