//! A server started in-process on 127.0.0.1:0 and a real HTTP client to call it.
#![allow(dead_code)]

use std::time::Duration;

use flowguard_core::{Client, OpenOptions};
use flowguard_server::{serve, App, Limits};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const TOKEN: &str = "test-token-0123456789";

pub struct Server {
    pub base: String,
    pub http: reqwest::Client,
    pub token: Option<String>,
    stop: Option<oneshot::Sender<()>>,
    pub task: Option<JoinHandle<std::io::Result<()>>>,
}

/// The TLS provider of the test clients (reqwest's rustls is built without one of its own).
pub fn crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A fresh key prefix, so tests sharing the process-wide embedded store (or one Redis) never meet.
pub fn prefix() -> String {
    format!("fgs{:x}:", rand_u64())
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos());
    h.finish()
}

impl Server {
    pub async fn start(url: Option<String>, token: Option<&str>, limits: Limits) -> Server {
        Server::start_with(OpenOptions { url, ..Default::default() }, token, limits).await
    }

    pub async fn start_with(opts: OpenOptions, token: Option<&str>, limits: Limits) -> Server {
        crypto();
        let client =
            Client::open(OpenOptions { prefix: opts.prefix.clone().or_else(|| Some(prefix())), ..opts })
                .await
                .expect("backend opens");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = oneshot::channel::<()>();
        let app = App::new(client, token.map(String::from), limits);
        let task = tokio::spawn(serve(listener, app, async move {
            let _ = rx.await;
        }));
        Server {
            base,
            http: reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap(),
            token: token.map(String::from),
            stop: Some(tx),
            task: Some(task),
        }
    }

    pub async fn open(url: Option<String>) -> Server {
        Server::start(url, Some(TOKEN), Limits::default()).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// POSTs `body` as JSON with the token; the status and the JSON answer.
    pub async fn call(&self, path: &str, body: Value) -> (u16, Value) {
        let mut req = self.http.post(self.url(path)).json(&body);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let res = req.send().await.expect("the server answers");
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// Like `call`, expecting 200.
    pub async fn ok(&self, path: &str, body: Value) -> Value {
        let (status, v) = self.call(path, body.clone()).await;
        assert_eq!(status, 200, "{path} {body} answered {v}");
        v
    }

    /// Sends raw bytes with a content type and optional authorization; status and body text.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        ct: Option<&str>,
        auth: Option<&str>,
        body: Vec<u8>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method.parse().unwrap(), self.url(path)).body(body);
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let res = req.send().await.expect("the server answers");
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// Stops accepting and waits for the calls in flight.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap().unwrap();
        }
    }

    pub fn trigger_shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}
pub mod suite;
