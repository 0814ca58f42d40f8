//! The sweep: every operation of both specs, through the binary and a real MCP client.
//! For each tool: its schema (as the client received it) compiles; a call with generated
//! minimal arguments reaches the forge with the spec's method, every path parameter
//! substituted, and lands on the spec's route; the result is a well-formed envelope or error.

mod support;

use serde_json::{Map, Value, json};
use support::{Harness, Setup};

/// Minimal valid arguments for a schema: required members only, simple values.
fn minimal(schema: &Value, name: &str) -> Value {
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    if name == "content_base64" {
        return json!("aGk=");
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("integer") | Some("number") => {
            json!(schema.get("minimum").and_then(Value::as_i64).unwrap_or(1).max(1))
        }
        Some("boolean") => json!(true),
        Some("array") => {
            let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = minimal(schema.get("items").unwrap_or(&json!({"type": "string"})), "");
            Value::Array((0..min).map(|_| item.clone()).collect())
        }
        Some("object") => {
            let mut out = Map::new();
            let props = schema.get("properties").and_then(Value::as_object);
            for r in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                let r = r.as_str().unwrap();
                let sub = props.and_then(|p| p.get(r)).cloned().unwrap_or(json!({"type": "string"}));
                out.insert(r.to_owned(), minimal(&sub, r));
            }
            Value::Object(out)
        }
        _ => json!("x1"),
    }
}

const KINDS: &[&str] = &[
    "bad_request",
    "unauthorized",
    "forbidden",
    "not_found",
    "method_not_allowed",
    "conflict",
    "payload_too_large",
    "validation_failed",
    "locked",
    "rate_limited",
    "upstream_error",
    "unexpected_status",
];

async fn sweep(setup: Setup, spec: &[u8], expected_ops: usize) {
    let spec: Value = serde_json::from_slice(spec).unwrap();
    let mut routes = std::collections::HashMap::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            routes.insert(
                op["operationId"].as_str().unwrap().to_owned(),
                (method.to_uppercase(), path.clone()),
            );
        }
    }
    let h = Harness::start(setup).await;
    let tools = h.tools().await;
    // The spec's operations and the five built-in tools.
    assert_eq!(tools.len(), expected_ops + 5);
    // Resolve and cache the login first, so that every request below is the tool's own.
    support::assert_envelope(&h.call("userGetCurrent", json!({})).await);
    let mut swept = 0;
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        for draft in [jsonschema::Draft::Draft202012, jsonschema::Draft::Draft4] {
            jsonschema::options()
                .with_draft(draft)
                .build(&schema)
                .unwrap_or_else(|e| panic!("{}: schema does not compile as {draft:?}: {e}", tool.name));
        }
        assert!(!tool.description.as_deref().unwrap_or("").is_empty(), "{} has a description", tool.name);
        if tool.name.starts_with("gitea_") {
            continue; // the built-in tools have tests of their own
        }
        let (method, path) =
            routes.get(tool.name.as_ref()).unwrap_or_else(|| panic!("{} not in spec", tool.name));
        let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
        assert_eq!(read_only, method == "GET", "{}: read-only hint follows the method", tool.name);

        let args = minimal(&schema, "");
        h.forge.clear_requests();
        let c = h.call(&tool.name, args.clone()).await;
        if c.is_error {
            let kind = c.kind();
            assert!(KINDS.contains(&kind), "{}: unexpected error kind {kind}: {}", tool.name, c.text);
            assert!(c.json["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
        } else {
            support::assert_envelope(&c);
            assert_eq!(c.json["request"]["method"], method.as_str());
        }
        let sent = h.forge.requests();
        assert_eq!(sent.len(), 1, "{}: exactly one request reached the forge ({args})", tool.name);
        let r = &sent[0];
        assert_eq!(&r.method, method, "{}", tool.name);
        assert!(!r.raw_path.contains('{') && !r.raw_path.contains('}'), "{}: {}", tool.name, r.raw_path);
        assert_eq!(
            r.operation_id.as_deref(),
            Some(tool.name.as_ref()),
            "{}: {} {} reached another route ({path})",
            tool.name,
            r.method,
            r.raw_path
        );
        swept += 1;
    }
    assert_eq!(swept, expected_ops);
    h.stop().await;
}

#[tokio::test]
async fn every_gitea_operation() {
    sweep(Setup::gitea().env("TOOLSETS", "all"), include_bytes!("../specs/gitea-1.27.0.swagger.json"), 482)
        .await;
}

#[tokio::test]
async fn every_forgejo_operation() {
    sweep(
        Setup::forgejo().env("TOOLSETS", "all"),
        include_bytes!("../specs/forgejo-16.0.1.swagger.json"),
        506,
    )
    .await;
}
