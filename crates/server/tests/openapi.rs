//! The OpenAPI document: generated from the server's types and handlers, served at
//! `/openapi.json`, committed as `crates/server/openapi.json` (kept equal to the generated one),
//! and every route it lists answers.
mod common;

use common::Server;
use flowguard_core::ErrorCode;
use flowguard_server::routes;
use serde_json::{json, Value};

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

/// The answers of real calls (results, results answered with a status, errors) have the shape the
/// document gives for their route and status: every required property present, no property it
/// does not list, each value of the listed type, within the listed words.
#[tokio::test]
async fn answers_match_the_document() {
    let s = Server::open(None).await;
    let doc: Value = serde_json::from_str(flowguard_server::openapi::json()).unwrap();
    let calls: Vec<(&str, Value, u16)> = vec![
        ("/v1/tracker/claim", json!({"group": "g", "id": "a"}), 200),
        ("/v1/tracker/claim", json!({"group": "g", "id": "a"}), 409),
        ("/v1/tracker/complete", json!({"group": "g", "id": "a", "owner": "0".repeat(32)}), 412),
        ("/v1/tracker/fail", json!({"group": "g", "id": "b", "reason": "boom", "keepMs": "forever"}), 200),
        ("/v1/tracker/claimBatch", json!({"group": "g", "ids": ["a", "c"], "timeoutMs": "60000"}), 200),
        ("/v1/tracker/claimMany", json!({"group": "g", "ids": ["a", "d"]}), 200),
        (
            "/v1/tracker/setItems",
            json!({"group": "g", "requests": [{"id": "a", "status": "completed", "owner": "0".repeat(32)}, {"id": "e", "status": "in_progress"}]}),
            200,
        ),
        ("/v1/tracker/getItems", json!({"group": "g", "ids": ["a", "b", "z"]}), 200),
        ("/v1/tracker/listItems", json!({"group": "g", "status": "all", "limit": 1}), 200),
        ("/v1/tracker/unsetItem", json!({"group": "g", "id": "e"}), 200),
        ("/v1/tracker/listGroups", json!({}), 200),
        ("/v1/lock/acquire", json!({"name": "l", "label": "me"}), 200),
        ("/v1/lock/acquire", json!({"name": "l"}), 409),
        ("/v1/lock/extend", json!({"name": "l", "owner": "0".repeat(32)}), 412),
        ("/v1/lock/release", json!({"name": "l", "owner": "0".repeat(32)}), 200),
        ("/v1/lock/get", json!({"name": "l"}), 200),
        ("/v1/lock/list", json!({"limit": "5"}), 200),
        ("/v1/queue/enqueue", json!({"queue": "q", "ids": ["x", "y"], "debounce": "true"}), 200),
        ("/v1/queue/readBatch", json!({"queue": "q", "limit": 1}), 200),
        ("/v1/queue/ack", json!({"queue": "q", "owner": "0".repeat(32), "ids": "x"}), 200),
        ("/v1/queue/size", json!({"queue": "q"}), 200),
        ("/v1/queue/peek", json!({"queue": "q"}), 200),
        ("/v1/queue/list", json!({}), 200),
        ("/v1/state/set", json!({"key": "k", "value": {"n": 1}, "ttlMs": 60000}), 200),
        ("/v1/state/getMany", json!({"keys": ["k", "missing"]}), 200),
        ("/v1/state/increment", json!({"key": "c", "by": "-2"}), 200),
        ("/v1/state/delete", json!({"key": "c"}), 200),
        ("/v1/state/claimKey", json!({"key": "once"}), 200),
        ("/v1/state/claimKey", json!({"key": "once"}), 409),
        ("/v1/state/releaseKey", json!({"key": "once", "owner": "0".repeat(32)}), 200),
        ("/v1/limiter/take", json!({"name": "r", "limit": 1, "periodMs": 60000}), 200),
        ("/v1/limiter/take", json!({"name": "r", "limit": 1, "periodMs": 60000}), 429),
        ("/v1/limiter/list", json!({}), 200),
        ("/v1/semaphore/acquire", json!({"name": "s", "permits": 1}), 200),
        ("/v1/semaphore/acquire", json!({"name": "s", "permits": 1}), 409),
        ("/v1/semaphore/get", json!({"name": "s"}), 200),
        ("/v1/semaphore/list", json!({}), 200),
        ("/v1/lock/get", json!({"name": "l", "extra": 1}), 400),
    ];
    for (path, body, expected) in calls {
        let (status, answer) = s.call(path, body.clone()).await;
        assert_eq!(status, expected, "{path} {body}: {answer}");
        let response = resolve(&doc, &doc["paths"][path]["post"]["responses"][status.to_string()]);
        let schema = &response["content"]["application/json"]["schema"];
        assert!(schema.is_object(), "{path}: no schema for {status}");
        conforms(&doc, schema, &answer, &format!("{path} {status}"));
    }
    for path in ["/healthz", "/readyz"] {
        let (status, answer) = s.raw("GET", path, None, None, vec![]).await;
        let schema = &doc["paths"][path]["get"]["responses"][status.to_string()]["content"]
            ["application/json"]["schema"];
        conforms(&doc, schema, &answer, path);
    }
}

fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => resolve(doc, r.trim_start_matches("#/").split('/').fold(doc, |d, k| &d[k])),
        None => v,
    }
}

/// Whether `v` has the shape of `schema` (the parts of JSON Schema the generated document uses).
fn conforms(doc: &Value, schema: &Value, v: &Value, at: &str) {
    assert!(matches(doc, schema, v, at), "{at}: {v} does not match {schema}");
}

fn matches(doc: &Value, schema: &Value, v: &Value, at: &str) -> bool {
    let schema = resolve(doc, schema);
    if let Some(all) = schema["allOf"].as_array() {
        // allOf of objects (a result with its code): each part's properties, together.
        let mut props = serde_json::Map::new();
        for part in all {
            let part = resolve(doc, part);
            for r in part["required"].as_array().into_iter().flatten() {
                assert!(v.get(r.as_str().unwrap()).is_some(), "{at}: {r} missing in {v}");
            }
            props.extend(part["properties"].as_object().cloned().unwrap_or_default());
        }
        let object = json!({"type": "object", "properties": props});
        return matches(doc, &object, v, at);
    }
    if let Some(one) = schema["oneOf"].as_array() {
        return one.iter().filter(|s| matches(doc, s, v, at)).count() == 1;
    }
    if schema.as_object().is_some_and(|o| o.is_empty() || !o.contains_key("type")) {
        return true; // any value (a stored JSON value)
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let typed = types.iter().any(|t| match *t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    });
    if !typed {
        return false;
    }
    if let Some(words) = schema["enum"].as_array() {
        assert!(words.contains(v), "{at}: {v} is not one of {words:?}");
    }
    if let Some(min) = schema["minimum"].as_f64() {
        assert!(v.as_f64().unwrap() >= min, "{at}: {v} < {min}");
    }
    if let Value::Array(items) = v {
        return items.iter().all(|x| matches(doc, &schema["items"], x, at));
    }
    if let Value::Object(m) = v {
        let props = schema["properties"].as_object().cloned().unwrap_or_default();
        for r in schema["required"].as_array().into_iter().flatten() {
            assert!(m.contains_key(r.as_str().unwrap()), "{at}: {r} missing in {v}");
        }
        for (k, x) in m {
            let Some(p) = props.get(k) else {
                panic!("{at}: {k} is not in the document ({v})");
            };
            assert!(matches(doc, p, x, &format!("{at}.{k}")), "{at}.{k}: {x} does not match {p}");
        }
    }
    true
}
