//! Graceful shutdown: a call in flight when shutdown begins is answered; new connections are not.
mod common;

use std::time::{Duration, Instant};

use common::{Server, TOKEN};
use serde_json::json;

#[tokio::test]
async fn a_call_in_flight_finishes_after_shutdown_begins() {
    let mut s = Server::open(None).await;
    let held = s.ok("/v1/lock/acquire", json!({"name": "L", "timeoutMs": 700})).await;
    assert_eq!(held["acquired"], true);
    // Waits for the lease to run out (~700 ms), then takes the lock.
    let waiting = {
        let http = s.http.clone();
        let url = s.url("/v1/lock/acquire");
        tokio::spawn(async move {
            let res = http
                .post(url)
                .bearer_auth(TOKEN)
                .json(&json!({"name": "L", "waitMs": 5000}))
                .send()
                .await
                .unwrap();
            (res.status().as_u16(), res.json::<serde_json::Value>().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    s.trigger_shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // New connections are refused while the call in flight goes on.
    let fresh = reqwest::Client::new();
    assert!(
        fresh.get(s.url("/healthz")).send().await.is_err(),
        "a new connection was accepted during shutdown"
    );
    let task = s.task.take().unwrap();
    assert!(!task.is_finished(), "the server stopped before answering the call in flight");
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["acquired"], true);
    assert!(body["waitedMs"].as_u64().unwrap() >= 300, "{body}");
    tokio::time::timeout(Duration::from_secs(5), task).await.expect("the server stops").unwrap().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
}
