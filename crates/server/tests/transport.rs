//! The transport's limits, over raw TCP: silent, trickling and idle connections are closed after
//! their timeouts, a stalled body is answered 408, and the connection cap keeps /healthz reachable
//! once the connections holding it are cut. Timeouts are small here; every wait on the server is
//! bounded by a generous deadline, never measured.
mod common;

use std::time::Duration;

use flowguard_core::{Client, OpenOptions};
use flowguard_server::{router, transport, App, Limits, Transport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// Longer than any timeout configured here by far: a wait that passes it is a failure.
const GENEROUS: Duration = Duration::from_secs(20);

struct Running {
    addr: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start(t: Transport, limits: Limits) -> Running {
    common::crypto();
    let client =
        Client::open(OpenOptions { prefix: Some(common::prefix()), ..Default::default() }).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let app = App::new(client, None, limits);
    let task = tokio::spawn(transport::serve(listener, router(app), None, t, async move {
        let _ = rx.await;
    }));
    Running { addr, stop: Some(tx), task }
}

const LONG: Duration = Duration::from_secs(600);

fn timeouts(header: Duration, idle: Duration) -> Transport {
    Transport { header_timeout: header, idle_timeout: idle, ..Transport::default() }
}

/// Reads until the server closes the connection (EOF or reset); what it sent before.
async fn until_closed(c: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let read = tokio::time::timeout(GENEROUS, async {
        let mut buf = [0u8; 4096];
        loop {
            match c.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server did not close the connection: {}", String::from_utf8_lossy(&got));
    String::from_utf8_lossy(&got).into_owned()
}

/// Reads one answer to a request sent with `Connection: keep-alive` (its head and a body of
/// Content-Length bytes).
async fn one_answer(c: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(GENEROUS, async {
        loop {
            let n = c.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before answering: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let len = text[..end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string())
                    })
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                if got.len() >= end + 4 + len {
                    return;
                }
            }
        }
    })
    .await
    .expect("an answer");
    String::from_utf8_lossy(&got).into_owned()
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n";

#[tokio::test]
async fn a_silent_or_trickling_client_is_cut_after_the_header_timeout() {
    let s = start(timeouts(Duration::from_millis(300), LONG), Limits::default()).await;
    let mut silent = TcpStream::connect(s.addr).await.unwrap();
    assert_eq!(until_closed(&mut silent).await, "", "a silent connection gets no answer, it is closed");
    // A head sent one byte every 50 ms (about 3 s in all): cut once 300 ms have passed.
    let trickle = TcpStream::connect(s.addr).await.unwrap();
    let (mut rd, mut wr) = trickle.into_split();
    let writer = tokio::spawn(async move {
        for b in HEALTHZ {
            if wr.write_all(&[*b]).await.is_err() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    });
    let mut got = Vec::new();
    let closed = tokio::time::timeout(GENEROUS, rd.read_to_end(&mut got)).await;
    assert!(closed.is_ok(), "the trickling connection was not cut");
    assert!(!String::from_utf8_lossy(&got).contains("200 OK"), "{}", String::from_utf8_lossy(&got));
    writer.abort();
    // The header timeout runs from the first byte of a later head, not from the connection's
    // opening: a kept-alive connection whose calls come one after the other is served.
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    for _ in 0..3 {
        c.write_all(HEALTHZ).await.unwrap();
        assert!(one_answer(&mut c).await.starts_with("HTTP/1.1 200"));
    }
    drop(s.stop);
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let s = start(timeouts(LONG, Duration::from_millis(300)), Limits::default()).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(HEALTHZ).await.unwrap();
    let answer = one_answer(&mut c).await;
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains(r#"{"status":"ok"}"#), "{answer}");
    assert_eq!(until_closed(&mut c).await, "", "the idle connection was closed without a word");
    drop(s.stop);
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_stalled_body_is_answered_408_after_the_body_timeout() {
    let limits = Limits { body_timeout: Duration::from_millis(300), ..Limits::default() };
    let s = start(timeouts(LONG, LONG), limits).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(
        b"POST /v1/lock/acquire HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":",
    )
    .await
    .unwrap();
    let answer = until_closed(&mut c).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains(r#""code":"ERR_BODY_TIMEOUT""#), "{answer}");
    drop(s.stop);
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn beyond_the_connection_cap_callers_wait_until_a_place_is_free() {
    let s = start(Transport { max_connections: 2, ..timeouts(LONG, LONG) }, Limits::default()).await;
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let healthz = format!("http://{}/healthz", s.addr);
    let a = TcpStream::connect(s.addr).await.unwrap();
    let _b = TcpStream::connect(s.addr).await.unwrap();
    // Both places are held by silent connections: a third caller waits in the backlog.
    let waiting = tokio::time::timeout(Duration::from_millis(500), http.get(&healthz).send()).await;
    assert!(waiting.is_err(), "a third connection was served beyond the cap of 2");
    // One place freed: the next caller is served.
    drop(a);
    let res = tokio::time::timeout(GENEROUS, http.get(&healthz).send()).await.expect("served").unwrap();
    assert_eq!(res.status().as_u16(), 200);
    drop(s.stop);
    let _ = tokio::time::timeout(GENEROUS, s.task).await.expect("the server stops");
}

#[tokio::test]
async fn a_flood_of_silent_connections_cannot_hold_the_cap_past_the_header_timeout() {
    let t = Transport { max_connections: 8, ..timeouts(Duration::from_millis(300), LONG) };
    let s = start(t, Limits::default()).await;
    let mut flood = Vec::new();
    for _ in 0..40 {
        flood.push(TcpStream::connect(s.addr).await.unwrap());
    }
    // They are cut 8 at a time, each after the header timeout; the caller behind them is served.
    let http = reqwest::Client::new();
    let res = tokio::time::timeout(GENEROUS, http.get(format!("http://{}/healthz", s.addr)).send())
        .await
        .expect("/healthz answered behind the flood")
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    for c in &mut flood {
        assert_eq!(until_closed(c).await, "");
    }
    drop(s.stop);
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_closes_a_half_sent_head_and_a_stalled_body_within_the_drain_timeout() {
    let t = Transport { drain_timeout: Duration::from_millis(300), ..timeouts(LONG, LONG) };
    let mut s = start(t, Limits::default()).await;
    let mut head = TcpStream::connect(s.addr).await.unwrap();
    head.write_all(b"POST /v1/lock/acquire HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let mut body = TcpStream::connect(s.addr).await.unwrap();
    body.write_all(
        b"POST /v1/lock/acquire HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    )
    .await
    .unwrap();
    // A complete call on a third connection is answered before the stop.
    let mut done = TcpStream::connect(s.addr).await.unwrap();
    done.write_all(HEALTHZ).await.unwrap();
    assert!(one_answer(&mut done).await.starts_with("HTTP/1.1 200"));
    let _ = s.stop.take().unwrap().send(());
    tokio::time::timeout(GENEROUS, &mut s.task).await.expect("the server stops").unwrap().unwrap();
    until_closed(&mut head).await;
    until_closed(&mut body).await;
    until_closed(&mut done).await;
}
