//! The OpenAPI document: generated from the server's types and handlers, served at
//! `/openapi.json`, committed as `crates/server/openapi.json` (kept equal to the generated one),
//! and every route it lists answers.
mod common;

use common::Server;
use flowguard_core::ErrorCode;
use flowguard_server::routes;
use serde_json::Value;

/// Routes outside the API, each `GET`.
const OPEN: &[&str] =
    &["/healthz", "/readyz", "/openapi.json", "/", "/dashboard/app.js", "/dashboard/app.css"];

#[test]
fn the_committed_document_is_the_generated_one() {
    let committed = include_str!("../openapi.json");
    assert!(
        committed == flowguard_server::openapi::json(),
        "crates/server/openapi.json is not the generated document: regenerate it with \
         `cargo run -p flowguard-server -- --print-openapi > crates/server/openapi.json`"
    );
}

#[test]
fn every_error_code_is_listed_with_its_status() {
    let doc: Value = serde_json::from_str(flowguard_server::openapi::json()).unwrap();
    let codes = doc["components"]["schemas"]["Error"]["properties"]["code"]["enum"].as_array().unwrap();
    for c in ErrorCode::ALL {
        assert!(codes.iter().any(|x| x == c.as_str()), "{c} not in the Error code enum");
        let status = flowguard_server::error::status_of(c).as_u16();
        if c == ErrorCode::NotOwner {
            // Documented by the routes that take an owner token.
            continue;
        }
        let shared = &doc["components"]["responses"][format!("E{status}")]["description"];
        assert!(shared.as_str().unwrap().contains(c.as_str()), "{c}: E{status} {shared}");
        let claim = &doc["paths"]["/v1/tracker/claim"]["post"]["responses"][status.to_string()];
        assert_eq!(claim["$ref"], format!("#/components/responses/E{status}"), "{c}");
    }
    let complete = &doc["paths"]["/v1/tracker/complete"]["post"]["responses"]["412"];
    assert_eq!(complete["description"], "ERR_NOT_OWNER");
}

#[tokio::test]
async fn every_route_is_documented_and_every_documented_route_answers() {
    let s = Server::open(None).await;
    let res = s.http.get(s.url("/openapi.json")).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let doc: Value = res.json().await.unwrap();
    assert_eq!(doc, serde_json::from_str::<Value>(flowguard_server::openapi::json()).unwrap());
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    let api = routes::paths();
    assert!(api.len() >= 39 && api.iter().all(|p| p.starts_with("/v1/")), "{api:?}");
    let paths = doc["paths"].as_object().unwrap();
    for p in OPEN.iter().copied().chain(["/metrics"]).chain(api.iter().map(String::as_str)) {
        assert!(paths.contains_key(p), "{p} is not documented");
    }
    assert_eq!(paths.len(), api.len() + OPEN.len() + 1);
    let mut ids = std::collections::BTreeSet::new();
    for (path, item) in paths {
        let methods: Vec<&String> = item.as_object().unwrap().keys().collect();
        assert_eq!(methods.len(), 1, "{path}");
        let method = methods[0].as_str();
        let op = &item[method];
        assert!(ids.insert(op["operationId"].as_str().unwrap().to_string()), "{path}: operationId twice");
        let expected = if api.contains(path) { "post" } else { "get" };
        assert_eq!(method, expected, "{path}");
        // The API and /metrics need the token (the document's default); the rest is open.
        let open = OPEN.contains(&path.as_str());
        assert_eq!(op.get("security") == Some(&Value::Array(vec![])), open, "{path}");
        if method == "post" {
            let body = &op["requestBody"]["content"]["application/json"]["schema"];
            assert_eq!(body["additionalProperties"], false, "{path}: unknown fields are refused");
            for status in ["200", "400", "401", "503"] {
                assert!(op["responses"].get(status).is_some(), "{path}: no {status}");
            }
        }
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
    for r in refs(&doc["components"]) {
        let name = r.rsplit('/').next().unwrap();
        assert!(doc["components"]["schemas"].get(name).is_some(), "components: {r}");
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
