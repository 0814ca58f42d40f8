//! The server over Streamable HTTP (`/mcp`) and the legacy HTTP+SSE transport (`/sse` +
//! `/message`) driven by the official MCP Python SDK (`mcp` 2.3.0, high-level `Client`), with an
//! `Authorization` header carrying a caller's own forge token, against the in-process recording
//! fake forge. The server's global token belongs to alice; every call is made as bob. This proves
//! that an independent client implementation connects in both SDK modes (`legacy`: `initialize`;
//! `auto`: `server/discover` first) and that each call runs under the caller's identity: the
//! result envelope names bob, and the forge saw bob's token — never alice's — on every request.
//!
//! The driver is `tests/python/mcp_http_client.py`, run with the interpreter of the project venv
//! `.venv` (created by `scripts/setup-test-env` from `tests/python/requirements.txt`). A missing
//! venv fails the test, it is never skipped.

mod support;

use std::process::Command;
use std::time::Duration;

use fake_forge::{FakeForge, Flavor, Options, Recorded};
use serde_json::{Value, json};
use support::http::HttpServer;
use support::{ALICE_TOKEN, DriverRun, python, python_driver, repo_root};

const BOB_TOKEN: &str = "tok-bob-9876543210abcdef";
const TIMEOUT: Duration = Duration::from_secs(60);
const ENVELOPE_KEYS: [&str; 6] = ["identity", "request", "status", "pagination", "untrusted_content", "data"];

/// Starts `serve --transport <transport>` on a free loopback port with alice's token as the
/// global token and no `MCP_BEARER_TOKEN`; returns once it prints its endpoint.
async fn start_server(transport: &str, forge: &FakeForge) -> HttpServer {
    HttpServer::spawn(&forge.base_url(), transport, &[("GITEA_TOKEN", ALICE_TOKEN)]).await
}

/// Runs the Python driver against `server` with one `Authorization` header value.
async fn run_driver(
    transport: &str,
    mode: &str,
    server: &HttpServer,
    authorization: &str,
    calls: &Value,
) -> DriverRun {
    let (mut cmd, _calls_dir) = python_driver("mcp_http_client.py", mode, calls);
    cmd.args(["--transport", transport, &server.endpoint])
        .arg("--header")
        .arg(format!("Authorization: {authorization}"));
    let what = format!("the Python driver ({transport}, mode {mode})");
    DriverRun::run(&mut cmd, TIMEOUT, &what, || format!("--- server stderr ---\n{}", server.stderr())).await
}

async fn start_forge() -> FakeForge {
    let forge = FakeForge::start(Options {
        flavor: Flavor::Gitea,
        users: vec![(ALICE_TOKEN.to_owned(), "alice".to_owned()), (BOB_TOKEN.to_owned(), "bob".to_owned())],
        ..Options::default()
    })
    .await;
    forge.seed_repo("alice", "demo");
    forge
}

fn describe(requests: &[Recorded]) -> String {
    requests
        .iter()
        .map(|r| format!("{} {} authorization={:?}", r.method, r.raw_path, r.header("authorization")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks one envelope: its keys in order, and that it ran as bob with his own token.
fn assert_bob_envelope(v: &Value) {
    let keys: Vec<&str> =
        v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().map(String::as_str).collect();
    assert_eq!(keys, ENVELOPE_KEYS, "{v}");
    assert_eq!(v["identity"], json!({"login": "bob", "mode": "token", "sudo": null}), "{v}");
}

/// The whole scenario for one transport, SDK mode and `Authorization` scheme.
async fn scenario(transport: &str, mode: &str, scheme: &str) {
    let forge = start_forge().await;
    let server = start_server(transport, &forge).await;
    let endpoint = if transport == "http" { "/mcp" } else { "/sse" };
    assert!(server.endpoint.ends_with(endpoint), "unexpected endpoint {}", server.endpoint);

    let calls = json!([
        {"tool": "userGetCurrent", "arguments": {}},
        {"tool": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}},
        {"tool": "noSuchTool", "arguments": {}},
    ]);
    let run = run_driver(transport, mode, &server, &format!("{scheme} {BOB_TOKEN}"), &calls).await;
    let requests = forge.requests();
    let doc = &run.doc;

    // The handshake: `legacy` sends `initialize` (newest handshake version); `auto` probes
    // `server/discover`, which the server answers, so the modern version is adopted.
    let want_version = if mode == "legacy" { "2025-11-25" } else { "2026-07-28" };
    assert_eq!(doc["protocol_version"], want_version, "{doc}\n{}", run.context);
    assert_eq!(doc["tool_count"], support::DEFAULT_TOOL_COUNT, "{doc}");
    if mode == "legacy" {
        assert_eq!(doc["server_name"], "aegis-gitea-mcp", "{doc}");
    }
    assert_eq!(doc["calls"].as_array().map(Vec::len), Some(3), "{doc}");

    // userGetCurrent: the envelope and the data both name bob.
    let me = run.result(0, false);
    assert_bob_envelope(&me);
    assert_eq!(me["request"], json!({"method": "GET", "path": "/user"}), "{me}");
    assert_eq!(me["status"], 200, "{me}");
    assert_eq!(me["data"]["login"], "bob", "{me}");

    // repoGet on a seeded repository (public, owned by alice) succeeds as bob.
    let repo = run.result(1, false);
    assert_bob_envelope(&repo);
    assert_eq!(repo["request"], json!({"method": "GET", "path": "/repos/alice/demo"}), "{repo}");
    assert_eq!(repo["status"], 200, "{repo}");
    assert_eq!(repo["data"]["full_name"], "alice/demo", "{repo}");

    // Unknown tool: a JSON-RPC invalid-params error, not a tool result.
    let unknown = run.call(2);
    assert_eq!(unknown["tool"], "noSuchTool");
    assert_eq!(unknown["jsonrpc_error"]["code"], -32602, "{unknown}\n{}", run.context);
    assert!(unknown.get("is_error").is_none(), "{unknown}");

    // At the forge: both tool requests carried bob's token, and nothing at all carried
    // alice's (the global token must never stand in for a caller that sent a header).
    let bob = format!("token {BOB_TOKEN}");
    for path in ["/api/v1/user", "/api/v1/repos/alice/demo"] {
        let seen: Vec<&Recorded> =
            requests.iter().filter(|r| r.method == "GET" && r.raw_path == path).collect();
        assert!(!seen.is_empty(), "no GET {path}; the forge saw:\n{}", describe(&requests));
        for r in seen {
            assert_eq!(r.header("authorization"), Some(bob.as_str()), "GET {path}:\n{}", describe(&requests));
        }
    }
    let alice: Vec<&Recorded> = requests
        .iter()
        .filter(|r| r.header("authorization").is_some_and(|a| a.contains(ALICE_TOKEN)))
        .collect();
    assert!(alice.is_empty(), "requests made with the global (alice's) token:\n{}", describe(&requests));
    assert!(
        requests.iter().all(|r| r.header("authorization") == Some(bob.as_str())),
        "a forge request without bob's token:\n{}",
        describe(&requests)
    );
    // The token is not echoed in the server's log.
    let log = server.stderr();
    assert!(!log.contains(BOB_TOKEN) && !log.contains(ALICE_TOKEN), "a token in the server log:\n{log}");

    drop(server);
    forge.shutdown();
}

#[tokio::test]
async fn streamable_http_legacy_mode_bearer_runs_as_the_caller() {
    scenario("http", "legacy", "Bearer").await;
}

#[tokio::test]
async fn streamable_http_auto_mode_bearer_runs_as_the_caller() {
    scenario("http", "auto", "Bearer").await;
}

#[tokio::test]
async fn streamable_http_legacy_mode_token_scheme_runs_as_the_caller() {
    scenario("http", "legacy", "token").await;
}

#[tokio::test]
async fn sse_legacy_mode_bearer_runs_as_the_caller() {
    scenario("sse", "legacy", "Bearer").await;
}

#[tokio::test]
async fn sse_auto_mode_bearer_runs_as_the_caller() {
    scenario("sse", "auto", "Bearer").await;
}

#[tokio::test]
async fn sse_legacy_mode_token_scheme_runs_as_the_caller() {
    scenario("sse", "legacy", "token").await;
}

#[test]
fn driver_rejects_a_malformed_header_argument() {
    // The driver's own usage check, so a typo in a test cannot silently drop the header.
    let out = Command::new(python())
        .arg(repo_root().join("tests/python/mcp_http_client.py"))
        .args(["--transport", "http", "http://127.0.0.1:9/mcp", "--header", "no-colon", "--calls", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--header must be"), "{out:?}");
}
