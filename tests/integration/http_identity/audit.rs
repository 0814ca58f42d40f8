//! The audit trail over HTTP: each line names the transport, the client, and the identity the
//! call ran as — per request, not the server's — including resource reads and refusals; the
//! chain verifies; no token, argument value or forge data reaches the file.

use serde_json::{Value, json};

use super::support::http::{McpClient, tool_result};
use super::{BOB_TOKEN, forge, token};

on_both_transports!(audit_lines_name_each_requests_own_identity_and_transport);

async fn audit_lines_name_each_requests_own_identity_and_transport(t: &str) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let key = super::support::write_audit_key(&dir.path().join("audit.key"));
    let env = [
        ("AUDIT_LOG", log.to_str().unwrap()),
        ("AUDIT_KEY_FILE", key.to_str().unwrap()),
        ("ALLOWED_REPOS", "alice/*"),
    ];
    let (_forge, server) = forge().issues("alice", "demo", 1).serve_http(t, &env).await;
    let bob = token(BOB_TOKEN);
    let as_bob = McpClient::connect(&server, Some(&bob)).await.expect("bob connects");
    let as_server = McpClient::connect(&server, None).await.expect("connects");
    let ok = tool_result(
        &as_bob.call("repoGet", json!({"owner": "alice", "repo": "demo"}), Some(&bob)).await.unwrap(),
    );
    assert!(!ok.is_error, "{}", ok.text);
    let denied = tool_result(
        &as_bob.call("repoGet", json!({"owner": "carol", "repo": "ARGVALUE-H5"}), Some(&bob)).await.unwrap(),
    );
    assert_eq!(denied.kind(), "denied", "{}", denied.text);
    let read = as_server
        .request("resources/read", json!({"uri": "gitea://repos/alice/demo/issues/1"}), None)
        .await
        .expect("read");
    assert!(read["result"]["contents"].is_array(), "{read}");
    drop((as_bob, as_server));
    drop(server);

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let transport = if t == "sse" { "sse" } else { "http" };
    let summary: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| {
            assert_eq!(l["transport"], transport, "{l}");
            (
                l["tool"].as_str().unwrap_or("").to_owned(),
                l["identity"]["login"].as_str().unwrap_or("").to_owned(),
                l["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let s = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    assert_eq!(
        summary,
        [s("repoGet", "bob", "ok"), s("repoGet", "bob", "denied"), s("resources/read", "alice", "ok")],
        "{text}"
    );
    assert_eq!(lines[2]["operation"], "issueGetIssue", "{text}");
    // A refused call names the operation it would have reached, and that nothing was sent.
    assert_eq!((&lines[1]["operation"], &lines[1]["method"]), (&json!("repoGet"), &Value::Null), "{text}");
    for never in [BOB_TOKEN, super::ALICE_TOKEN, "ARGVALUE-H5"] {
        assert!(!text.contains(never), "{never} reached the audit log: {text}");
    }
    let (ok, report) = super::support::audit_verify(&key, &[&log]);
    assert!(ok, "{report}");
}

on_both_transports!(what_a_client_names_itself_reaches_the_audit_log_only_redacted);

/// `clientInfo` is the client's text: a client naming itself with the server's token, with
/// `MCP_BEARER_TOKEN` or with its own token, in any spelling, leaves none of them in the file.
async fn what_a_client_names_itself_reaches_the_audit_log_only_redacted(t: &str) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let key = super::support::write_audit_key(&dir.path().join("audit.key"));
    let env = [
        ("MCP_BEARER_TOKEN", super::SHARED_SECRET),
        ("AUDIT_LOG", log.to_str().unwrap()),
        ("AUDIT_KEY_FILE", key.to_str().unwrap()),
    ];
    let (_forge, server) = forge().serve_http(t, &env).await;
    let percent = |s: &str| s.bytes().map(|b| format!("%{b:02x}")).collect::<String>();
    let demo = json!({"owner": "alice", "repo": "demo"});
    let shared = format!("Bearer {}", super::SHARED_SECRET);
    let named = json!({"name": format!("agent {}", super::ALICE_TOKEN), "version": super::SHARED_SECRET});
    let as_server = McpClient::connect_as(&server, Some(&shared), &named).await.expect("connects");
    let bob = token(BOB_TOKEN);
    let named = json!({"name": format!("pasted {BOB_TOKEN} here"), "version": percent(BOB_TOKEN)});
    let as_bob = McpClient::connect_as(&server, Some(&bob), &named).await.expect("bob connects");
    assert!(!as_server.call_ok("repoGet", demo.clone(), Some(&shared)).await.is_error);
    assert!(!as_bob.call_ok("repoGet", demo, Some(&bob)).await.is_error);
    drop((as_bob, as_server));
    drop(server);

    let text = std::fs::read_to_string(&log).unwrap();
    for never in [super::ALICE_TOKEN, super::SHARED_SECRET, BOB_TOKEN, &percent(BOB_TOKEN)] {
        assert!(!text.contains(never), "{never} reached the audit log: {text}");
    }
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["client"], json!({"name": "agent [REDACTED]", "version": "[REDACTED]"}), "{text}");
    assert_eq!(
        lines[1]["client"],
        json!({"name": "pasted [REDACTED] here", "version": "[REDACTED]"}),
        "{text}"
    );
    let (ok, report) = super::support::audit_verify(&key, &[&log]);
    assert!(ok, "{report}");
}
