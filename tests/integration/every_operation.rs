//! The sweep: every operation of both specs, through the binary and a real MCP client.
//! For each tool: its schema (as the client received it) compiles; a call with generated
//! minimal arguments reaches the forge with the spec's method, every path parameter
//! substituted, and lands on the spec's route; the result is a well-formed envelope or error.
//! A second sweep sends a `/` in every free-text path parameter and checks it arrives the way
//! the fake forge's own route table says the forge routes it.

use crate::support;

use serde_json::{Map, Value, json};
use support::{Harness, Setup};

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

/// Each operation once, as its tool, in one session: what reaches the forge, and which tools
/// take `confirm` for what they destroy. The flow guard, which asks about writes after
/// private reads, is off: its own tests (`flow.rs`) judge it.
async fn sweep(setup: Setup, spec: &[u8], expected_ops: usize) {
    let setup = setup.env("FLOW_GUARD", "off");
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
        // This client is given typed results: every tool says its result is an object.
        assert_eq!(tool.output_schema.as_deref(), Some(&Map::from_iter([("type".into(), json!("object"))])));
        if tool.name.starts_with("gitea_") {
            continue; // the built-in tools have tests of their own
        }
        let (method, path) =
            routes.get(tool.name.as_ref()).unwrap_or_else(|| panic!("{} not in spec", tool.name));
        let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
        assert_eq!(read_only, method == "GET", "{}: read-only hint follows the method", tool.name);

        let args = support::minimal(&schema, "");
        h.forge.clear_requests();
        let asked = h.confirmed();
        let c = h.call(&tool.name, args.clone()).await;
        // A call that always destroys was held for its `confirm` (nothing sent); one that
        // destroys only with some arguments or only when a look-up finds what it replaces may
        // be; only those offer it.
        use aegis_core::policy::confirm::{IRREVERSIBLE_WITH, row_of};
        let offers = tool.input_schema.get("properties").and_then(|p| p.get("confirm")).is_some();
        let sometimes = IRREVERSIBLE_WITH.iter().any(|r| r.operation == tool.name);
        assert_eq!(
            offers,
            row_of(&tool.name).is_some() || sometimes || (offers && method == "DELETE"),
            "{}",
            tool.name
        );
        let held = h.confirmed() > asked;
        assert!(!held || offers, "{}: held for a confirmation it does not offer", tool.name);
        assert!(held || !offers || sometimes, "{}: always needs a confirmation, and was not held", tool.name);
        if c.is_error {
            let kind = c.kind();
            assert!(KINDS.contains(&kind), "{}: unexpected error kind {kind}: {}", tool.name, c.text);
            assert!(c.json["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
        } else {
            let data = support::assert_envelope(&c);
            assert_eq!(c.json["request"]["method"], method.as_str());
            if c.json.get("shape").is_some() {
                aegis_fuzzing::compact_holds(data, &[]);
            }
        }
        // The look-ups of a call that may destroy are reads of the server's own, and so are
        // those of who may write to the repository of a compact result with authors
        // (CONTENT_TRUST), after it.
        let trust_read = |r: &fake_forge::Recorded| {
            let op = r.operation_id.as_deref().unwrap_or("");
            op != tool.name && ["repoGet", "repoGetAssignees", "repoListCollaborators"].contains(&op)
        };
        let sent: Vec<_> = h
            .forge
            .requests()
            .into_iter()
            .filter(|r| !offers || r.method != "GET" || method == "GET")
            .filter(|r| !trust_read(r))
            .collect();
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
        if !c.is_error {
            support::assert_typed(&h.client, &tool.name, &c.json).await;
        }
        swept += 1;
    }
    assert_eq!(swept, expected_ops);
    h.stop().await;
}

#[tokio::test]
async fn every_gitea_operation() {
    sweep(
        Setup::gitea().env("TOOLSETS", "all"),
        include_bytes!("../../specs/gitea-1.27.0.swagger.json"),
        482,
    )
    .await;
}

#[tokio::test]
async fn every_forgejo_operation() {
    sweep(
        Setup::forgejo().env("TOOLSETS", "all"),
        include_bytes!("../../specs/forgejo-16.0.1.swagger.json"),
        506,
    )
    .await;
}

#[tokio::test]
async fn every_gitea_operation_in_the_compact_shape() {
    let setup = Setup::gitea().env("TOOLSETS", "all").env("RESULT_SHAPE", "compact");
    sweep(setup, include_bytes!("../../specs/gitea-1.27.0.swagger.json"), 482).await;
}

#[tokio::test]
async fn every_forgejo_operation_in_the_compact_shape() {
    let setup = Setup::forgejo().env("TOOLSETS", "all").env("RESULT_SHAPE", "compact");
    sweep(setup, include_bytes!("../../specs/forgejo-16.0.1.swagger.json"), 506).await;
}

/// A free-text value that needs both encoding rules: a `/`, and a character to percent-encode.
const SLASHED: &str = "a/b c";

/// Every operation again, with every free-text path parameter set to [`SLASHED`]: the call
/// reaches the spec's route with the value intact, and the raw path carries the `/` the way the
/// forge routes it — literal in a catch-all of the fake forge's own route table, `%2F` in every
/// other parameter. That table is written from the forges' routers, not from the server's
/// `specs/wildcard-params.json`, so a catch-all missing from the server's table, or one too
/// many, fails here.
async fn slash_sweep(setup: Setup, spec: &[u8], expected: (usize, usize)) {
    // Only the operations' own requests are looked at: the flow guard's look-ups are not.
    let setup = setup.env("FLOW_GUARD", "off");
    let flavor = setup.flavor;
    let spec: Value = serde_json::from_slice(spec).unwrap();
    let mut ops = std::collections::HashMap::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let params: Vec<&Value> = item["parameters"]
                .as_array()
                .into_iter()
                .chain(op["parameters"].as_array())
                .flatten()
                .filter(|p| p["in"] == "path")
                .collect();
            ops.insert(op["operationId"].as_str().unwrap(), (method.to_uppercase(), path.as_str(), params));
        }
    }
    let h = Harness::start(setup).await;
    support::assert_envelope(&h.call("userGetCurrent", json!({})).await);
    let (mut swept, mut catch_alls) = (0, 0);
    for tool in h.tools().await.iter().filter(|t| !t.name.starts_with("gitea_")) {
        let name = tool.name.as_ref();
        let (method, path, params) = &ops[name];
        let catch_all = flavor.catch_all_param(method, path, name);
        let mut args = support::minimal(&Value::Object((*tool.input_schema).clone()), "");
        let mut raw_path = format!("/api/v1{path}");
        let mut slashed = Vec::new();
        for p in params {
            let p_name = p["name"].as_str().unwrap();
            let sent = if p["type"] == "string" && p.get("enum").is_none() {
                args[p_name] = json!(SLASHED);
                slashed.push(p_name);
                if catch_all == Some(p_name) { "a/b%20c" } else { "a%2Fb%20c" }.to_owned()
            } else {
                let v = &args[p_name];
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                assert!(v.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)), "{name}: {v}");
                v
            };
            raw_path = raw_path.replace(&format!("{{{p_name}}}"), &sent);
        }
        if slashed.is_empty() {
            continue;
        }
        h.forge.clear_requests();
        let c = h.call(name, args).await;
        assert_ne!(c.kind(), "invalid_arguments", "{name}: {}", c.text);
        let r = h.last();
        let wanted = if catch_all.is_some() { "literal in its catch-all" } else { "as %2F" };
        assert_eq!(r.raw_path, raw_path, "{name}: the forge routes `/` {wanted} ({method} {path})");
        assert_eq!(r.operation_id.as_deref(), Some(name), "{name}: {} reached another route", r.raw_path);
        for p in &slashed {
            let got = r.path_params.iter().find(|(k, _)| k == p).map(|(_, v)| v.as_str());
            assert_eq!(got, Some(SLASHED), "{name}: {p} as the forge read it");
        }
        swept += 1;
        catch_alls += usize::from(catch_all.is_some());
    }
    // (operations with a free-text path parameter, of which catch-all routes)
    assert_eq!((swept, catch_alls), expected);
    h.stop().await;
}

#[tokio::test]
async fn every_gitea_path_parameter_with_a_slash_is_sent_as_the_forge_routes_it() {
    slash_sweep(
        Setup::gitea().env("TOOLSETS", "all"),
        include_bytes!("../../specs/gitea-1.27.0.swagger.json"),
        (390, 22),
    )
    .await;
}

#[tokio::test]
async fn every_forgejo_path_parameter_with_a_slash_is_sent_as_the_forge_routes_it() {
    slash_sweep(
        Setup::forgejo().env("TOOLSETS", "all"),
        include_bytes!("../../specs/forgejo-16.0.1.swagger.json"),
        (389, 15),
    )
    .await;
}
