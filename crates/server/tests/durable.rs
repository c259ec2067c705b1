//! The server on the durable store (`--path`): every route, and state that outlives the server.
mod common;

use common::{Server, TOKEN};
use flowguard_core::OpenOptions;
use flowguard_server::Limits;
use serde_json::json;

fn file(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fg-server-durable-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("state.db")
}

async fn on(path: &std::path::Path, prefix: &str) -> Server {
    let opts =
        OpenOptions { path: Some(path.to_path_buf()), prefix: Some(prefix.into()), ..Default::default() };
    Server::start_with(opts, Some(TOKEN), Limits::default()).await
}

#[tokio::test]
async fn state_outlives_the_server() {
    let path = file("restart");
    let s = on(&path, "d:").await;
    let c = s.ok("/v1/tracker/claim", json!({"group": "g", "id": "a"})).await;
    let owner = c["owner"].as_str().unwrap().to_string();
    s.ok("/v1/tracker/complete", json!({"group": "g", "id": "a", "owner": owner})).await;
    s.ok("/v1/tracker/claim", json!({"group": "g", "id": "b"})).await;
    s.ok("/v1/tracker/fail", json!({"group": "g", "id": "b", "reason": "boom"})).await;
    let l = s.ok("/v1/lock/acquire", json!({"name": "n", "timeoutMs": 600000, "label": "run 1"})).await;
    assert_eq!(l["acquired"], true);
    s.ok("/v1/queue/enqueue", json!({"queue": "q", "ids": ["x", "y"]})).await;
    s.shutdown().await;

    let s = on(&path, "d:").await;
    let item = s.ok("/v1/tracker/getItem", json!({"group": "g", "id": "a"})).await;
    assert_eq!(item["status"], "completed", "{item}");
    let item = s.ok("/v1/tracker/getItem", json!({"group": "g", "id": "b"})).await;
    assert_eq!(item["status"], "failed", "{item}");
    assert_eq!(item["lastError"], "boom", "{item}");
    let (status, busy) = s.call("/v1/lock/acquire", json!({"name": "n"})).await;
    assert_eq!(status, 409, "{busy}");
    assert_eq!(busy["holder"], "run 1", "{busy}");
    let size = s.ok("/v1/queue/size", json!({"queue": "q"})).await;
    assert_eq!(size["waiting"], 2, "{size}");
    s.shutdown().await;
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn listing_routes_and_state_gauges() {
    common::suite::catalog_on(&on(&file("catalog"), "c:").await).await;
}
