//! Graceful shutdown: a call in flight when shutdown begins is answered; new connections are not.
mod common;

use std::time::{Duration, Instant};

use common::{Server, TOKEN};
use serde_json::json;

#[tokio::test]
async fn a_call_in_flight_finishes_after_shutdown_begins() {
    let mut s = Server::open(None).await;
    let held = s.ok("/v1/lock/acquire", json!({"name": "L", "timeoutMs": 1500})).await;
    assert_eq!(held["acquired"], true);
    // Waits for the lease to run out (~1.5 s), then takes the lock.
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
    // Shutdown begins only once the waiting call is being answered (a barrier, not a sleep): the
    // server's own gauge counts it beside the /metrics call that reads the gauge.
    loop {
        let text =
            s.http.get(s.url("/metrics")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
        let in_flight = text
            .lines()
            .find_map(|l| l.strip_prefix("flowguard_http_requests_in_flight "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        if in_flight >= 2.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    s.trigger_shutdown();
    // New connections are refused (once the listener is closed) while the call in flight goes on.
    let mut refused = false;
    for _ in 0..100 {
        // A new client each time: a new connection, not one kept alive.
        if reqwest::Client::new().get(s.url("/healthz")).send().await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "new connections were still accepted 2 s into shutdown");
    let task = s.task.take().unwrap();
    assert!(!task.is_finished(), "the server stopped before answering the call in flight");
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["acquired"], true);
    assert!(body["waitedMs"].as_u64().unwrap() >= 300, "{body}");
    tokio::time::timeout(Duration::from_secs(5), task).await.expect("the server stops").unwrap().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
}
