//! HTTPS with a certificate and key given as PEM files.
mod common;

use std::sync::Arc;

use common::TOKEN;
use flowguard_core::{Client, OpenOptions};
use flowguard_server::{tls, App, Limits};
use serde_json::json;

#[tokio::test]
async fn the_server_speaks_https_with_the_given_certificate() {
    common::crypto();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let dir = std::env::temp_dir().join(format!("fgs-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    let config = tls::config(&cert, &key).unwrap();
    let e = tls::config(&cert, &dir.join("missing.pem")).err().unwrap();
    assert!(e.contains("missing.pem"), "{e}");
    let e = tls::config(&key, &key).err().unwrap();
    assert!(e.contains("no PEM certificate"), "{e}");

    let client =
        Client::open(OpenOptions { prefix: Some(common::prefix()), ..Default::default() }).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let app = App::new(client, Some(TOKEN.into()), Limits::default());
    let server = tokio::spawn(tls::serve_tls(listener, app, config, async move {
        let _ = rx.await;
    }));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(ck.cert.der().clone()).unwrap();
    let tls_client =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let http = reqwest::Client::builder().use_preconfigured_tls(tls_client).build().unwrap();
    let url = format!("https://localhost:{port}/v1/lock/acquire");
    let res = http.post(&url).bearer_auth(TOKEN).json(&json!({"name": "L"})).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["acquired"], true);
    let res = http.post(&url).json(&json!({"name": "L"})).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 401);
    // Plain HTTP to the TLS port gets no answer.
    let plain = reqwest::Client::new().get(format!("http://127.0.0.1:{port}/healthz")).send().await;
    assert!(plain.map(|r| !r.status().is_success()).unwrap_or(true));
    let _ = tx.send(());
    server.await.unwrap().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
