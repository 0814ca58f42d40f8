//! The server under attack: each test is one attack found by attacking the server as an
//! outsider (over HTTP and stdio, with a hostile forge behind it), and shows the limit that
//! now holds and what a client sees. Everything runs on loopback; each test is bounded in
//! time (and, where the attack is about memory, in memory).
//!
//! The figures behind these limits (CPU per request, memory per stream, latency under
//! attack) are measured by `cargo bench --bench attack` and written up in
//! `docs/RELIABILITY.md`; the assertions here only tell "holds" from "fell over".

#[macro_use]
mod support;

use std::time::{Duration, Instant};

use fake_forge::{FakeForge, Options};
use serde_json::json;
use support::ALICE_TOKEN;
use support::http::{ACCEPT_BOTH, HttpServer, http_client, stateless_call, tool_result};

/// A fake forge knowing alice, with the repository `alice/demo`.
async fn forge() -> FakeForge {
    let forge = FakeForge::start(Options::default()).await;
    forge.seed_repo("alice", "demo");
    forge
}

/// The server on `transport` with alice's token as the global token, plus `env`.
async fn start(transport: &str, env: &[(&str, &str)]) -> (FakeForge, HttpServer) {
    let forge = forge().await;
    let mut all = vec![("GITEA_TOKEN", ALICE_TOKEN)];
    all.extend_from_slice(env);
    let server = HttpServer::spawn(&forge.base_url(), transport, &all).await;
    (forge, server)
}

/// CPU time (user + system) the process `pid` has used so far, from `/proc/<pid>/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // The command name (field 2) may hold spaces; fields are counted after its `)`.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = after.split(' ').map(|x| x.parse().unwrap_or(0)).collect();
    // utime and stime are fields 14 and 15, in clock ticks (100 per second on Linux).
    Duration::from_millis((f[11] + f[12]) * 10)
}

/// The request that opens a session, `POST /mcp` initialize or `GET /sse`, with `auth` as the
/// raw `Authorization` header value; the response status and body (an open SSE stream is
/// not read).
async fn open_with(server: &HttpServer, auth: &[u8]) -> (u16, String) {
    let http = http_client();
    let auth = reqwest::header::HeaderValue::from_bytes(auth).unwrap();
    let req = match server.transport.as_str() {
        "sse" => http.get(server.url("/sse")).header("accept", "text/event-stream"),
        _ => http
            .post(server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .body(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"}}})
                .to_string(),
            ),
    };
    let resp = req.header("authorization", auth).send().await.unwrap();
    let status = resp.status().as_u16();
    let body = if status == 200 { String::new() } else { resp.text().await.unwrap_or_default() };
    (status, body)
}

// ---------------------------------------------------------------------------------------
// 1. A long token that the forge refuses cost CPU quadratic in its length.

on_both_transports!(
    a_token_longer_than_the_bound_is_refused_with_431_before_any_work,
    a_recognised_scheme_with_a_value_that_is_not_text_is_401_never_global,
);

async fn a_token_longer_than_the_bound_is_refused_with_431_before_any_work(t: &str) {
    let (forge, server) = start(t, &[]).await;
    forge.clear_requests();
    for len in [8 * 1024 + 1, 64 * 1024, 256 * 1024] {
        let (status, body) = open_with(&server, format!("token {}", "A".repeat(len)).as_bytes()).await;
        assert_eq!(status, 431, "a {len}-byte token: {body}");
        assert!(body.contains("longer than 8192 bytes"), "says why: {body}");
        assert!(!body.contains("AAAA"), "does not echo the token: {body}");
    }
    assert!(forge.requests().is_empty(), "nothing reached the forge: {:?}", forge.requests());
}

/// Twenty calls with the longest accepted token, one character repeated (the input that made
/// redaction automata quadratic to build), each refused by the forge.
#[tokio::test]
async fn long_refused_tokens_cost_little_cpu() {
    let (forge, server) = start("http", &[]).await;
    let pid = server.pid().unwrap();
    let http = http_client();
    let before = cpu_time(pid);
    for c in ["A", "B"] {
        for i in 0..10 {
            let token = format!("{}{i}", c.repeat(8 * 1024 - 1));
            let auth = format!("token {token}");
            let args = json!({"owner": "alice", "repo": "demo"});
            let resp = stateless_call(&http, &server.base, "repoGet", args, Some(&auth)).await.unwrap();
            let r = tool_result(&resp);
            assert_eq!(r.kind(), "unauthorized", "{}", r.text);
            assert!(!r.text.contains(&token[..64]), "does not echo the token: {}", r.text);
        }
    }
    let used = cpu_time(pid) - before;
    eprintln!("20 calls with 8 KiB refused tokens: {used:?} of server CPU");
    // Quadratic automata took seconds per call here (0.14 s each in a release build).
    assert!(used < Duration::from_secs(4), "20 calls took {used:?} of CPU");
    assert!(forge.requests().iter().all(|r| r.raw_path == "/api/v1/user" || r.raw_path == "/api/v1/version"));
}

async fn a_recognised_scheme_with_a_value_that_is_not_text_is_401_never_global(t: &str) {
    let (forge, server) = start(t, &[]).await;
    forge.clear_requests();
    for auth in [&b"token \xff\xfe\xfd"[..], b"Bearer abc\xc3\x28def", b"TOKEN \x80"] {
        let (status, body) = open_with(&server, auth).await;
        assert_eq!(status, 401, "{auth:?}: {body}");
        assert!(body.contains("not text"), "says why: {body}");
    }
    assert!(forge.requests().is_empty(), "nothing reached the forge: {:?}", forge.requests());
}

#[tokio::test]
async fn tokens_longer_than_any_header_accepts_stop_the_server_at_start() {
    let forge = forge().await;
    let long = "A".repeat(16 * 1024);
    let started = Instant::now();
    let run = support::run_with_timeout(
        std::process::Command::new(support::bin())
            .args(["serve", "--transport", "http", "--listen", "127.0.0.1:0", "--flavor", "gitea"])
            .args(["--url", &forge.base_url()])
            .env_clear()
            .env("MCP_BEARER_TOKEN", &long),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(run.status.and_then(|s| s.code()), Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("MCP_BEARER_TOKEN is longer than 8192 bytes"), "{}", run.stderr);
    assert!(!run.stderr.contains("AAAA"), "{}", run.stderr);
    eprintln!("refused at start in {:?}", started.elapsed());
}
