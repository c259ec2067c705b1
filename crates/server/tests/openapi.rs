//! The served OpenAPI document lists exactly the routes the server has, each answering.
mod common;

use std::collections::BTreeSet;

use common::Server;
use flowguard_server::dashboard;
use flowguard_server::routes::PATHS;
use serde_json::Value;

const OPS: &[&str] = &["/healthz", "/readyz", "/metrics", "/openapi.json"];

#[tokio::test]
async fn every_route_is_documented_and_every_documented_route_exists() {
    let s = Server::open(None).await;
    let res = s.http.get(s.url("/openapi.json")).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let doc: Value = res.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.0.3");
    let documented: BTreeSet<&str> = doc["paths"].as_object().unwrap().keys().map(|k| k.as_str()).collect();
    let served: BTreeSet<&str> = PATHS.iter().chain(OPS).chain(dashboard::PATHS).copied().collect();
    assert_eq!(documented, served);
    for (path, item) in doc["paths"].as_object().unwrap() {
        let methods: Vec<&String> = item.as_object().unwrap().keys().collect();
        assert_eq!(methods.len(), 1, "{path}");
        let method = methods[0].as_str();
        let expected = if PATHS.contains(&path.as_str()) { "post" } else { "get" };
        assert_eq!(method, expected, "{path}");
        // The documented method reaches a handler (never the 404 or 405 fallbacks).
        let (status, body) = s
            .raw(
                &method.to_uppercase(),
                path,
                Some("application/json"),
                Some(&format!("Bearer {}", common::TOKEN)),
                b"{}".to_vec(),
            )
            .await;
        assert!(
            status == 200 || (status == 400 && body["code"] == "ERR_INVALID_ARGUMENT"),
            "{path}: {status} {body}"
        );
        // Every $ref points at a defined component.
        for r in refs(item) {
            let name = r.rsplit('/').next().unwrap();
            let kind = if r.contains("/responses/") { "responses" } else { "schemas" };
            assert!(doc["components"][kind].get(name).is_some(), "{path}: {r}");
        }
    }
}

fn refs(v: &Value) -> Vec<String> {
    match v {
        Value::Object(m) => m
            .iter()
            .flat_map(|(k, v)| if k == "$ref" { vec![v.as_str().unwrap().to_string()] } else { refs(v) })
            .collect(),
        Value::Array(a) => a.iter().flat_map(refs).collect(),
        _ => vec![],
    }
}
