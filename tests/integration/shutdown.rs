//! A signal to stop (SIGTERM, SIGINT), over HTTP and stdio: no new work is accepted, the call
//! in flight finishes and is answered, then the process exits cleanly, logging the head of its
//! audit chain last.

use crate::support;

use std::time::Duration;

use fake_forge::{Gate, Script, ScriptedResponse};
use serde_json::{Value, json};
use support::http::HttpServer;
use support::{ALICE_TOKEN, Forge};

async fn post(client: &reqwest::Client, url: &str, session: Option<&str>, body: Value) -> reqwest::Response {
    let mut r = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(s) = session {
        r = r.header("mcp-session-id", s);
    }
    r.body(body.to_string()).send().await.unwrap()
}

#[tokio::test]
async fn sigterm_drains_the_call_in_flight_and_exits() {
    let forge = Forge::gitea().repo("alice", "demo").start().await;
    // The forge answers the slow call only once the server is shutting down.
    let held = Gate::new();
    forge.script(Script::always(
        None,
        "/api/v1/repos/alice/slow",
        ScriptedResponse::json(200, &json!({"name": "slow"})).held_until(&held),
    ));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let key = support::write_audit_key(&dir.path().join("audit.key"));
    let env = [
        ("GITEA_TOKEN", ALICE_TOKEN),
        ("AUDIT_LOG", log.to_str().unwrap()),
        ("AUDIT_KEY_FILE", key.to_str().unwrap()),
    ];
    let mut server = HttpServer::spawn(&forge.base_url(), "http", &env).await;
    let url = server.endpoint.clone();
    let client = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let r = post(&client, &url, None, init).await;
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let _ = r.text().await;
    post(&client, &url, Some(&sid), json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;

    let call = {
        let (client, url, sid) = (client.clone(), url.clone(), sid.clone());
        tokio::spawn(async move {
            let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "repoGet", "arguments": {"owner": "alice", "repo": "slow"}}});
            post(&client, &url, Some(&sid), body).await.text().await.unwrap()
        })
    };
    // Signal only once the slow call is really in flight: the forge has received it.
    support::wait_for("the slow call reached the forge", support::WAIT_LIMIT, async || {
        forge.requests().iter().any(|r| r.raw_path == "/api/v1/repos/alice/slow")
    })
    .await;
    let pid = server.pid().expect("the server is running");
    support::signal(pid, "TERM");
    server.log_lines("shutting down", 1).await;
    held.open();

    let answer =
        tokio::time::timeout(support::WAIT_LIMIT, call).await.expect("the call was answered").unwrap();
    assert!(answer.contains(r#"\"name\":\"slow\""#), "the in-flight call finished: {answer}");
    let status = tokio::time::timeout(support::WAIT_LIMIT, server.wait()).await.expect("the server exited");
    assert!(status.success(), "{status:?}");
    let text = server.stderr();
    assert!(!text.contains("still running"), "the drain ended before the call: {text}");
    // The drained call's line is the last: the head logged at shutdown names it.
    let lines: Vec<Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let head = format!("seq=1 mac={}", lines.last().unwrap()["mac"].as_str().unwrap());
    assert!(text.lines().any(|l| l.contains("audit chain head at shutdown") && l.contains(&head)), "{text}");
}

/// Over stdio too: SIGTERM ends the session like a closed stdin — the call in flight is
/// answered (also one that runs longer than the MCP library's own drain of 2 s), and the head
/// of the audit chain is logged last, naming the last line.
#[tokio::test]
async fn sigterm_over_stdio_finishes_the_call_and_logs_the_chain_head() {
    use support::{Harness, Setup};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let h = Harness::start(Setup::gitea().process().audit(&log)).await;
    h.forge.seed_repo("alice", "demo");
    let held = Gate::new();
    h.forge.script(Script::always(
        None,
        "/api/v1/repos/alice/slow",
        ScriptedResponse::json(200, &json!({"name": "slow"})).held_until(&held),
    ));
    assert!(!h.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await.is_error);
    let pid = h.pid();
    let slow = h.call("repoGet", json!({"owner": "alice", "repo": "slow"}));
    let kill = async {
        support::wait_for("the slow call reached the forge", support::WAIT_LIMIT, async || {
            h.forge.requests().iter().any(|r| r.raw_path == "/api/v1/repos/alice/slow")
        })
        .await;
        support::signal(pid, "TERM");
        support::wait_for("the server took the signal", support::WAIT_LIMIT, async || {
            h.stderr().contains("shutting down on a signal")
        })
        .await;
        support::let_time_pass(Duration::from_millis(2500), "longer than the MCP library's own drain").await;
        held.open();
    };
    let (answer, ()) = tokio::time::timeout(support::WAIT_LIMIT, async { tokio::join!(slow, kill) })
        .await
        .expect("the call in flight was answered");
    assert!(!answer.is_error && answer.data()["name"] == "slow", "{}", answer.text);
    support::wait_for("the chain head was logged at shutdown", support::WAIT_LIMIT, async || {
        h.stderr().contains("audit chain head at shutdown")
    })
    .await;
    let text = h.stderr();
    let lines: Vec<Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let head = format!("seq=2 mac={}", lines.last().unwrap()["mac"].as_str().unwrap());
    assert!(text.lines().any(|l| l.contains("audit chain head at shutdown") && l.contains(&head)), "{text}");
    assert!(text.contains("shutting down on a signal"), "{text}");
}

/// With MCP_SHUTDOWN_DELAY, SIGTERM first takes the replica out of its balancer's rotation
/// (`/readyz` 503) and keeps accepting; the delay ends by itself, then the server stops
/// accepting and exits. (Accepting during the delay, and a second signal ending it, are in
/// `http_identity/deployment.rs`.)
#[tokio::test]
async fn the_shutdown_delay_ends_by_itself() {
    let (_forge, mut server) = Forge::gitea().spawn_http("http", &[("MCP_SHUTDOWN_DELAY", "1")]).await;
    let pid = server.pid().expect("the server is running");
    let signalled = std::time::Instant::now();
    support::signal(pid, "TERM");
    let status = tokio::time::timeout(support::WAIT_LIMIT, server.wait()).await.expect("the server exited");
    let took = signalled.elapsed();
    assert!(status.success(), "{status:?}");
    let log = server.stderr();
    let delayed = log.find("still accepting for 1s").unwrap_or_else(|| panic!("{log}"));
    let stopped = log.find("no new requests").unwrap_or_else(|| panic!("{log}"));
    assert!(delayed < stopped, "{log}");
    assert!(took >= Duration::from_secs(1), "it stopped accepting before its delay was over: {took:?}");
}

/// A client that stops its stdio server with a signal while keeping its end of stdin open
/// (Claude Code does, on a socket as Node gives its children) sees it exit at once: the read
/// of stdin still blocked in the runtime's pool does not hold the process until it is killed.
#[tokio::test]
async fn sigint_over_stdio_exits_while_the_client_keeps_stdin_open() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use tokio::io::AsyncBufReadExt;
    let forge = Forge::gitea().start().await;
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    // Killed if the test fails: a server that does not exit is what it looks for.
    let mut child = tokio::process::Command::new(support::bin())
        .args(["serve", "--url", &forge.base_url(), "--flavor", "gitea"])
        .env("GITEA_TOKEN", ALICE_TOKEN)
        .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(ours, "{initialize}").unwrap();
    let mut answer = String::new();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    tokio::time::timeout(support::WAIT_LIMIT, stdout.read_line(&mut answer))
        .await
        .expect("the server answered initialize")
        .unwrap();
    assert!(answer.contains("\"serverInfo\""), "{answer}");
    let pid = child.id().unwrap();
    support::signal(pid, "INT");
    let exited = tokio::time::timeout(support::WAIT_LIMIT, child.wait())
        .await
        .expect("the server exited on SIGINT, stdin still open")
        .unwrap();
    assert_eq!(exited.code(), Some(0));
    drop(ours);
}
