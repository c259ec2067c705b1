//! A Redis that goes away or stops answering: 503 and 504 with coded bodies, and /readyz says so.
//! Needs REDIS_URL (`npm test` sets it and passes `--include-ignored`).
mod common;

use std::time::Duration;

use common::{Server, TOKEN};
use flowguard_core::OpenOptions;
use flowguard_server::Limits;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Forward,
    /// Every connection is closed, new ones are closed at once.
    Down,
    /// Every open connection stops carrying bytes (and stays open); new ones are forwarded.
    Silent,
}

/// A TCP proxy on loopback to Redis whose mode the test switches.
async fn proxy(upstream: String) -> (String, watch::Sender<Mode>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", l.local_addr().unwrap());
    let (tx, rx) = watch::channel(Mode::Forward);
    tokio::spawn(async move {
        while let Ok((mut down, _)) = l.accept().await {
            let mut rx = rx.clone();
            if *rx.borrow() == Mode::Down {
                continue;
            }
            let Ok(mut up) = TcpStream::connect(&upstream).await else { continue };
            tokio::spawn(async move {
                let silent = tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut down, &mut up) => false,
                    r = rx.wait_for(|m| *m != Mode::Forward) => r.map(|m| *m == Mode::Silent).unwrap_or(false),
                };
                if silent {
                    // Hold both sockets open, carrying nothing.
                    std::future::pending::<()>().await;
                    drop((down, up));
                }
            });
        }
    });
    (url, tx)
}

fn redis() -> String {
    let url = std::env::var("REDIS_URL").expect("REDIS_URL must point at a Redis");
    url.trim_start_matches("redis://").trim_end_matches('/').to_string()
}

async fn ready(s: &Server) -> (u16, serde_json::Value) {
    let r = s.http.get(s.url("/readyz")).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test]
#[ignore = "needs a Redis: set REDIS_URL and pass --include-ignored (npm test does)"]
async fn redis_down_is_503_and_silent_is_504() {
    let (url, mode) = proxy(redis()).await;
    let opts = OpenOptions {
        url: Some(url),
        connect_timeout: Some(Duration::from_millis(300)),
        command_timeout: Some(Duration::from_millis(300)),
        ..Default::default()
    };
    let s = Server::start_with(opts, Some(TOKEN), Limits::default()).await;
    s.ok("/v1/lock/acquire", json!({"name": "L"})).await;
    assert_eq!(ready(&s).await.0, 200);

    mode.send(Mode::Down).unwrap();
    let (st, e) = s.call("/v1/lock/acquire", json!({"name": "M"})).await;
    assert_eq!((st, e["code"].as_str()), (503, Some("ERR_BACKEND_UNAVAILABLE")), "{e}");
    assert!(!e.to_string().contains(TOKEN));
    let (st, e) = ready(&s).await;
    assert_eq!((st, e["code"].as_str()), (503, Some("ERR_BACKEND_UNAVAILABLE")), "{e}");
    // The metrics still answer: the call counters, and the state gauges marked as not read.
    let m = s.http.get(s.url("/metrics")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(m.status().as_u16(), 200);
    let text = m.text().await.unwrap();
    assert!(text.lines().any(|l| l == "flowguard_state_up 0"), "{text}");
    assert!(
        text.contains("flowguard_http_requests_total") && !text.contains("flowguard_locks_held"),
        "{text}"
    );

    mode.send(Mode::Forward).unwrap();
    let mut back = false;
    for _ in 0..50 {
        if s.call("/v1/lock/get", json!({"name": "L"})).await.0 == 200 {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(back, "calls succeed again once Redis is reachable");
    assert_eq!(s.ok("/v1/lock/get", json!({"name": "L"})).await["locked"], true, "state kept");

    mode.send(Mode::Silent).unwrap();
    let (st, e) = s.call("/v1/state/get", json!({"key": "k"})).await;
    assert_eq!((st, e["code"].as_str()), (504, Some("ERR_TIMEOUT")), "{e}");
}
