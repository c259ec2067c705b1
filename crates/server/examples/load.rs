//! A bounded load run on loopback (not a test: it asserts only that no call failed).
//!
//! Starts the server in-process on 127.0.0.1:0 (the embedded store, or Redis when REDIS_URL is
//! set), then runs 64 concurrent clients for a fixed time, each doing lock pairs (acquire +
//! release of its own lock) and item claims (claim + complete with the owner token). Prints
//! calls/s and latency percentiles. `LOAD_SECONDS` (default 3), `LOAD_CLIENTS` (default 64).
//!
//! `cargo run --release -p flowguard-server --example load`

use std::time::{Duration, Instant};

use flowguard_core::{Client, OpenOptions};
use flowguard_server::{serve, App, Limits};
use serde_json::{json, Value};

async fn call(http: &reqwest::Client, url: &str, token: &str, body: Value) -> Result<Value, String> {
    let res = http.post(url).bearer_auth(token).json(&body).send().await.map_err(|e| e.to_string())?;
    let status = res.status();
    let v: Value = res.json().await.map_err(|e| e.to_string())?;
    if status.as_u16() != 200 {
        return Err(format!("{status}: {v}"));
    }
    Ok(v)
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main]
async fn main() {
    // reqwest's rustls is built without a provider of its own (this example speaks plain HTTP).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let seconds = env("LOAD_SECONDS", 3);
    let clients = env("LOAD_CLIENTS", 64) as usize;
    let url = std::env::var("REDIS_URL").ok();
    let prefix = format!("load{}:", std::process::id());
    let client = Client::open(OpenOptions { url: url.clone(), prefix: Some(prefix), ..Default::default() })
        .await
        .expect("backend opens");
    let token = "load-token-0123456789".to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server =
        tokio::spawn(serve(listener, App::new(client, Some(token.clone()), Limits::default()), async {
            let _ = stop_rx.await;
        }));

    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|i| {
            let (base, token) = (base.clone(), token.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let (acquire, release) =
                    (format!("{base}/v1/lock/acquire"), format!("{base}/v1/lock/release"));
                let (claim, complete) =
                    (format!("{base}/v1/tracker/claim"), format!("{base}/v1/tracker/complete"));
                let mut lat = Vec::new();
                let mut errors = Vec::new();
                let mut n = 0u64;
                while Instant::now() < deadline {
                    n += 1;
                    let name = format!("lock-{i}");
                    let t = Instant::now();
                    match call(&http, &acquire, &token, json!({"name": name, "timeoutMs": 30000})).await {
                        Ok(v) => {
                            lat.push(t.elapsed());
                            let t = Instant::now();
                            let r = call(&http, &release, &token, json!({"name": name, "owner": v["owner"]}))
                                .await;
                            lat.push(t.elapsed());
                            if let Err(e) = r {
                                errors.push(e);
                            }
                        }
                        Err(e) => errors.push(e),
                    }
                    let id = format!("{i}-{n}");
                    let t = Instant::now();
                    match call(&http, &claim, &token, json!({"group": "load", "id": id})).await {
                        Ok(v) => {
                            lat.push(t.elapsed());
                            let t = Instant::now();
                            let body = json!({"group": "load", "id": id, "owner": v["owner"]});
                            let r = call(&http, &complete, &token, body).await;
                            lat.push(t.elapsed());
                            if let Err(e) = r {
                                errors.push(e);
                            }
                        }
                        Err(e) => errors.push(e),
                    }
                }
                (lat, errors)
            })
        })
        .collect();
    let mut lat = Vec::new();
    let mut errors = Vec::new();
    for w in workers {
        let (l, e) = w.await.unwrap();
        lat.extend(l);
        errors.extend(e);
    }
    let elapsed = started.elapsed();
    let _ = stop_tx.send(());
    server.await.unwrap().unwrap();
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)].as_secs_f64() * 1000.0;
    println!(
        "backend={} clients={clients} seconds={:.1} calls={} calls/s={:.0} p50={:.2}ms p99={:.2}ms max={:.2}ms errors={}",
        if url.is_some() { "redis" } else { "embedded" },
        elapsed.as_secs_f64(),
        lat.len(),
        lat.len() as f64 / elapsed.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        pct(1.0),
        errors.len()
    );
    for e in errors.iter().take(5) {
        eprintln!("error: {e}");
    }
    if !errors.is_empty() {
        std::process::exit(1);
    }
}
