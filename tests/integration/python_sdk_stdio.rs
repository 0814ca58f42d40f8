//! The server over stdio driven by the official MCP Python SDK (`mcp` 2.3.0, high-level
//! `Client`), against the in-process recording fake forge. This proves interoperability with a
//! second, independent client implementation besides rmcp: the handshake (`legacy`, and `auto`,
//! which probes `server/discover` first), `tools/list`, tool results and JSON-RPC errors.
//!
//! The driver is `tests/python/mcp_stdio_client.py`, run with the interpreter of the
//! project venv `.venv` (created by `scripts/setup-test-env` from
//! `tests/python/requirements.txt`). A missing venv fails the test, it is never skipped.
// Tests read their own variables (PATH, AEGIS_E2E_*, UPDATE_SNAPSHOTS), not the server's settings.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use fake_forge::{FakeForge, Flavor, Recorded};
use serde_json::{Value, json};
use support::{ALICE_TOKEN, DriverRun, Forge, bin, python_driver};

const TIMEOUT: Duration = Duration::from_secs(60);
const ENVELOPE_KEYS: [&str; 6] = ["identity", "request", "status", "pagination", "untrusted_content", "data"];

/// Runs the Python driver with `calls` against the server pointed at `forge`.
async fn run_driver(mode: &str, forge: &FakeForge, calls: &Value) -> DriverRun {
    run_driver_with(mode, forge, calls, &[]).await
}

/// `run_driver` with more settings for the server.
async fn run_driver_with(mode: &str, forge: &FakeForge, calls: &Value, env: &[(&str, &str)]) -> DriverRun {
    let (mut cmd, _calls_dir) = python_driver("mcp_stdio_client.py", mode, calls);
    cmd.arg("--")
        .arg(bin())
        .args(["serve", "--url", &forge.base_url(), "--flavor", "gitea"])
        .env("GITEA_TOKEN", ALICE_TOKEN)
        .envs(env.iter().copied());
    // Settings the developer's shell might carry that would change what the server offers.
    for var in [
        "GITEA_URL",
        "GITEA_FLAVOR",
        "GITEA_SPEC",
        "GITEA_TOKEN_FILE",
        "MCP_TRANSPORT",
        "DISABLED_TOOLS",
        "SECRET_DETECTION_MODE",
        "MAX_TOOL_RESPONSE_ITEMS",
        "MAX_TOOL_RESPONSE_CHARS",
    ] {
        cmd.env_remove(var);
    }
    // The driver's stderr carries the server's too.
    DriverRun::run(&mut cmd, TIMEOUT, &format!("the Python driver (mode {mode})"), String::new).await
}

/// A forge with alice's `demo` and 25 issues in it.
fn forge() -> Forge {
    Forge::gitea().repo("alice", "demo").issues("alice", "demo", 25)
}

fn assert_envelope(v: &Value) {
    let keys: Vec<&str> =
        v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().map(String::as_str).collect();
    // A tool's JSON result comes in the default, compact shape and says so; text, binary
    // content and resources have none.
    if v.get("shape").is_some() {
        assert_eq!(v["shape"], "compact", "{v}");
        let without: Vec<&str> = keys.iter().copied().filter(|k| *k != "shape").collect();
        assert_eq!(without, ENVELOPE_KEYS, "{v}");
        assert_eq!(keys[5], "shape", "{v}");
    } else {
        assert_eq!(keys, ENVELOPE_KEYS, "{v}");
    }
    assert_eq!(v["identity"], json!({"login": "alice", "mode": "token", "sudo": null}), "{v}");
}

fn received<'a>(requests: &'a [Recorded], method: &str, raw_path: &str) -> Option<&'a Recorded> {
    requests.iter().find(|r| r.method == method && r.raw_path == raw_path)
}

fn describe(requests: &[Recorded]) -> String {
    requests.iter().map(|r| format!("{} {}", r.method, r.raw_path)).collect::<Vec<_>>().join("\n")
}

fn assert_tools(run: &DriverRun) {
    assert_eq!(run.doc["tool_count"], support::DEFAULT_TOOL_COUNT, "{}", run.doc);
    assert_eq!(run.doc["server_name"], "aegis-gitea-mcp", "{}", run.doc);
    let sample = run.doc["tool_names_sample"].as_array().unwrap();
    assert_eq!(sample.len(), 5, "{}", run.doc);
}

#[tokio::test]
async fn python_sdk_legacy_mode_lists_calls_and_reports_errors() {
    let forge = forge().start().await;
    // "hello from python\n"
    let content = "aGVsbG8gZnJvbSBweXRob24K";
    let calls = json!([
        {"tool": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}},
        {"tool": "issueListIssues", "arguments": {"owner": "alice", "repo": "demo", "limit": 10}},
        {"tool": "repoCreateFile", "arguments": {"owner": "alice", "repo": "demo",
            "filepath": "docs/a b.md", "body": {"content": content, "message": "m"}}},
        {"tool": "repoGetContents", "arguments": {"owner": "alice", "repo": "demo",
            "filepath": "docs/a b.md"}},
        {"tool": "repoGetReleaseByTag", "arguments": {"owner": "alice", "repo": "demo",
            "tag": "rel/1.0"}},
        {"tool": "issueListIssues", "arguments": {"owner": "alice", "repo": "demo",
            "state": "bogus"}},
        {"tool": "noSuchTool", "arguments": {}},
    ]);
    let run = run_driver("legacy", &forge, &calls).await;
    let requests = forge.requests();

    assert_eq!(run.doc["protocol_version"], "2025-11-25", "{}", run.doc);
    assert_tools(&run);
    assert_eq!(run.doc["calls"].as_array().unwrap().len(), 7);

    // repoGet: the full envelope.
    let repo = run.result(0, false);
    assert_envelope(&repo);
    assert_eq!(repo["request"], json!({"method": "GET", "path": "/repos/alice/demo"}));
    assert_eq!(repo["status"], 200);
    assert_eq!(repo["pagination"], Value::Null);
    assert_eq!(repo["data"]["full_name"], "alice/demo");

    // issueListIssues: pagination from the forge's headers.
    let issues = run.result(1, false);
    assert_envelope(&issues);
    assert_eq!(
        issues["pagination"],
        json!({"page": 1, "limit": 10, "total_count": 25, "next_page": 2, "last_page": 3})
    );
    assert_eq!(issues["data"].as_array().unwrap().len(), 10);

    // A file path with a `/` (kept) and a space (encoded) in the wildcard parameter.
    let created = run.result(2, false);
    assert_envelope(&created);
    assert_eq!(created["status"], 201, "{created}");
    let path = "/api/v1/repos/alice/demo/contents/docs/a%20b.md";
    let post = received(&requests, "POST", path)
        .unwrap_or_else(|| panic!("no POST {path}; forge saw:\n{}", describe(&requests)));
    assert_eq!(post.json_body().unwrap(), json!({"content": content, "message": "m"}));
    let contents = run.result(3, false);
    assert_envelope(&contents);
    assert_eq!(contents["status"], 200);
    assert_eq!(contents["data"]["path"], "docs/a b.md", "{contents}");
    assert!(received(&requests, "GET", path).is_some(), "no GET {path}; forge saw:\n{}", describe(&requests));

    // A `/` inside a single-segment parameter is encoded as %2F.
    let release = run.result(4, true);
    assert_eq!(release["error"]["kind"], "not_found", "{release}");
    assert_eq!(release["error"]["status"], 404, "{release}");
    let path = "/api/v1/repos/alice/demo/releases/tags/rel%2F1.0";
    assert!(received(&requests, "GET", path).is_some(), "no GET {path}; forge saw:\n{}", describe(&requests));

    // Schema validation fails before anything is sent.
    let invalid = run.result(5, true);
    assert_eq!(invalid["error"]["kind"], "invalid_arguments", "{invalid}");
    assert_eq!(invalid["error"]["path"], "/state", "{invalid}");
    assert_eq!(invalid["error"]["status"], Value::Null, "{invalid}");
    assert!(
        !requests.iter().any(|r| r.raw_query.as_deref().unwrap_or("").contains("bogus")),
        "the invalid call reached the forge:\n{}",
        describe(&requests)
    );

    // Unknown tool: a JSON-RPC error, not a tool result.
    let unknown = run.call(6);
    assert_eq!(unknown["tool"], "noSuchTool");
    assert_eq!(unknown["jsonrpc_error"]["code"], -32602, "{unknown}\n{}", run.context);
    assert!(unknown.get("is_error").is_none(), "{unknown}");
    forge.shutdown();
}

#[tokio::test]
async fn python_sdk_auto_mode_discovers_or_falls_back_and_calls_work() {
    let forge = forge().start().await;
    let calls = json!([
        {"tool": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}},
        {"tool": "issueListIssues", "arguments": {"owner": "alice", "repo": "demo", "limit": 10}},
        {"tool": "noSuchTool", "arguments": {}},
    ]);
    let run = run_driver("auto", &forge, &calls).await;

    // `auto` sends `server/discover` first; the server either answers it (2026-07-28) or
    // rejects it and the SDK falls back to `initialize` (2025-11-25). Both are fine.
    let version = run.doc["protocol_version"].as_str().unwrap_or("");
    assert!(["2026-07-28", "2025-11-25"].contains(&version), "unexpected protocol version: {}", run.doc);
    assert_tools(&run);

    let repo = run.result(0, false);
    assert_envelope(&repo);
    assert_eq!(repo["status"], 200);
    assert_eq!(repo["data"]["full_name"], "alice/demo");

    let issues = run.result(1, false);
    assert_envelope(&issues);
    assert_eq!(issues["pagination"]["total_count"], 25, "{issues}");

    assert_eq!(run.call(2)["jsonrpc_error"]["code"], -32602, "{}", run.doc);
    forge.shutdown();
}

/// The discovery tools and the resources through the official SDK, in both connect modes.
#[tokio::test]
async fn python_sdk_uses_the_discovery_tools_and_reads_resources() {
    for mode in ["legacy", "auto"] {
        let forge = forge().start().await;
        let calls = json!([
            {"tool": "gitea_search_operations", "arguments": {"query": "create a release", "limit": 3}},
            {"tool": "gitea_call_operation", "arguments": {"operation_id": "repoListTags",
                "arguments": {"owner": "alice", "repo": "demo"}}},
            {"tool": "repoCreateFile", "arguments": {"owner": "alice", "repo": "demo",
                "filepath": "docs/a b.md", "body": {"content": "aGVsbG8gZnJvbSBweXRob24K", "message": "m"}}},
            {"resource": "gitea://repos/alice/demo/contents/docs/a%20b.md"},
            {"resource": "gitea://repos/alice/demo/issues/3"},
            {"resource": "gitea://repos/alice/demo/pulls/999"},
        ]);
        let run = run_driver(mode, &forge, &calls).await;
        assert_eq!(
            run.doc["resource_templates"],
            json!([
                "gitea://repos/{owner}/{repo}/contents/{+path}{?ref}",
                "gitea://repos/{owner}/{repo}/issues/{index}",
                "gitea://repos/{owner}/{repo}/pulls/{index}",
                "gitea://attachments/{uuid}"
            ]),
            "{mode}: {}",
            run.doc
        );
        let found = run.result(0, false);
        let ids: Vec<&str> =
            found["results"].as_array().unwrap().iter().filter_map(|r| r["operation_id"].as_str()).collect();
        assert!(ids.contains(&"repoCreateRelease"), "{mode}: {found}");
        let tags = run.result(1, false);
        assert_envelope(&tags);
        assert_eq!(tags["request"], json!({"method": "GET", "path": "/repos/alice/demo/tags"}), "{mode}");
        run.result(2, false);

        let file = run.call(3);
        assert_eq!(file["mime_type"], "application/json", "{mode}: {file}");
        let file: Value = serde_json::from_str(file["text"].as_str().unwrap()).unwrap();
        assert_envelope(&file);
        assert_eq!(file["data"], "hello from python\n", "{mode}");
        let issue: Value = serde_json::from_str(run.call(4)["text"].as_str().unwrap()).unwrap();
        assert_eq!(issue["data"]["issue"]["number"], 3, "{mode}: {issue}");
        assert_eq!(issue["data"]["comments"], json!([]), "{mode}");
        // Resource not found: -32002, or -32602 from protocol 2026-07-28 on (SEP-2164).
        let code = if run.doc["protocol_version"] == "2026-07-28" { -32602 } else { -32002 };
        let missing = &run.call(5)["jsonrpc_error"];
        assert_eq!(missing["code"], code, "{mode}: {}", run.doc);
        assert!(missing["message"].as_str().unwrap().contains("404"), "{mode}: {missing}");
        forge.shutdown();
    }
}

/// A call longer than the server reads (a file of 1.5 MiB as base64 with
/// `MCP_MAX_BODY_BYTES` at 1 MiB and `MAX_BINARY_BYTES` at 1 KiB) is answered to its own
/// request at once with the tool error `payload_too_large` — not left for the SDK to time out
/// on — and nothing is sent; the next call works.
#[tokio::test]
async fn python_sdk_gets_payload_too_large_for_a_call_longer_than_the_server_reads() {
    use base64::Engine;
    let forge = forge().start().await;
    let file = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 1_536 * 1024]);
    let calls = json!([
        {"tool": "repoCreateFile", "arguments": {"owner": "alice", "repo": "demo",
            "filepath": "big.bin", "body": {"content": file, "message": "m"}}},
        {"tool": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}},
    ]);
    let env = [("MCP_MAX_BODY_BYTES", "1048576"), ("MAX_BINARY_BYTES", "1024")];
    let run = run_driver_with("legacy", &forge, &calls, &env).await;
    let big = run.result(0, true);
    assert_eq!(big["error"]["kind"], "payload_too_large", "{big}");
    assert_eq!(big["error"]["status"], Value::Null, "{big}");
    let message = big["error"]["message"].as_str().unwrap();
    assert!(message.contains("MCP_MAX_BODY_BYTES") && message.contains("MAX_BINARY_BYTES"), "{message}");
    assert_eq!(run.result(1, false)["data"]["full_name"], "alice/demo");
    assert!(
        !forge.requests().iter().any(|r| r.raw_path.contains("big.bin")),
        "the call reached the forge:\n{}",
        describe(&forge.requests())
    );
    forge.shutdown();
}

/// Typed results through the SDK over stdio, for both forges and both of the SDK's protocol
/// versions (legacy: 2025-11-25; auto: 2026-07-28): every default tool declares an output
/// schema; each success carries `structuredContent`, which the SDK checks against it (a
/// mismatch raises, failing the driver), holds the same JSON as the text item and is what
/// the operation's typed schema says (checked by the SDK's own `jsonschema`, on real Gitea
/// answers replayed and on the fake forge's own); error results come back as results.
#[tokio::test]
async fn python_sdk_checks_typed_results_of_every_default_tool_and_a_sample_of_others() {
    for flavor in [Flavor::Gitea, Flavor::Forgejo] {
        for mode in ["legacy", "auto"] {
            let forge = Forge::of(flavor).repo("alice", "demo").issues("alice", "demo", 3).start().await;
            let calls = Value::Array(support::typed_result_calls(flavor, &forge));
            let (mut cmd, _calls_dir) = python_driver("mcp_stdio_client.py", mode, &calls);
            let name = if flavor == Flavor::Gitea { "gitea" } else { "forgejo" };
            cmd.arg("--check-typed")
                .arg("--")
                .arg(bin())
                .args(["serve", "--url", &forge.base_url(), "--flavor", name])
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("GITEA_TOKEN", ALICE_TOKEN);
            let what = format!("the Python driver ({name}, mode {mode}, typed)");
            let run = DriverRun::run(&mut cmd, TIMEOUT, &what, String::new).await;
            let version = if mode == "legacy" { "2025-11-25" } else { "2026-07-28" };
            assert_eq!(run.doc["protocol_version"], version, "{}", run.context);
            // The recorded answers add 22 successes on Gitea.
            support::assert_typed_report(&run.doc, if flavor == Flavor::Gitea { 45 } else { 23 });
        }
    }
}
