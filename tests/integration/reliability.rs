//! The server under attack: each test is one attack found by attacking the server as an
//! outsider (over HTTP and stdio, with a hostile forge behind it), and shows the limit that
//! now holds and what a client sees. Everything runs on loopback; each test is bounded in
//! time (and, where the attack is about memory, in memory).
//!
//! The figures behind these limits (CPU per request, memory per stream, latency under
//! attack) are measured by `cargo bench --bench attack` and written up in
//! `docs/RELIABILITY.md`; the assertions here only tell "holds" from "fell over".

use crate::support;

use std::time::{Duration, Instant};

use fake_forge::{FakeForge, Script, ScriptBody, ScriptedResponse};
use serde_json::{Value, json};
use support::http::{ACCEPT_BOTH, HttpServer, http_client, stateless_call, tool_result};
use support::{ALICE_TOKEN, Forge, Harness, Setup};

/// A fake forge knowing alice, with the repository `alice/demo`.
fn forge() -> Forge {
    Forge::gitea().repo("alice", "demo")
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
    try_open_with(server, auth).await.unwrap_or_else(|e| panic!("no answer: {e}"))
}

/// Whether `e` is the connection closing under a request still being sent (reset or broken
/// pipe), not any other failure.
fn closed_while_sending(e: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return matches!(io.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset);
        }
        source = s.source();
    }
    false
}

/// Like [`open_with`]; `Err` when the request could not be sent whole (the server closed
/// the connection first).
async fn try_open_with(server: &HttpServer, auth: &[u8]) -> Result<(u16, String), reqwest::Error> {
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
    let resp = req.header("authorization", auth).send().await?;
    let status = resp.status().as_u16();
    let body = if status == 200 { String::new() } else { resp.text().await.unwrap_or_default() };
    Ok((status, body))
}

// ---------------------------------------------------------------------------------------
// 1. A long token that the forge refuses cost CPU quadratic in its length.

on_both_transports!(
    a_token_longer_than_the_bound_is_refused_with_431_before_any_work,
    a_recognised_scheme_with_a_value_that_is_not_text_is_401_never_global,
);

async fn a_token_longer_than_the_bound_is_refused_with_431_before_any_work(t: &str) {
    let (forge, server) = forge().spawn_http(t, &[]).await;
    forge.clear_requests();
    for len in [8 * 1024 + 1, 32 * 1024, 64 * 1024, 1024 * 1024] {
        let (status, body) =
            match try_open_with(&server, format!("token {}", "A".repeat(len)).as_bytes()).await {
                Ok(answer) => answer,
                // A head far over the limit is refused after its first 64 KiB: the client may
                // still be writing the rest when the connection closes, and see a reset instead
                // of the 431 (as with any HTTP server that stops reading).
                Err(e) if len >= 64 * 1024 && closed_while_sending(&e) => {
                    eprintln!("a {len}-byte token: the connection closed while it was sent ({e})");
                    continue;
                }
                Err(e) => panic!("a {len}-byte token: no answer: {e}"),
            };
        assert_eq!(status, 431, "a {len}-byte token: {body}");
        assert!(!body.contains("AAAA"), "does not echo the token: {body}");
        // Past 64 KiB the whole request head is refused before it is read (no body then).
        if len < 64 * 1024 {
            assert!(body.contains("longer than 8192 bytes"), "says why: {body}");
        }
    }
    assert!(forge.requests().is_empty(), "nothing reached the forge: {:?}", forge.requests());
    assert!(healthz(&server).await.is_ok(), "still serving");
}

/// Twenty calls with the longest accepted token, one character repeated (the input that made
/// redaction automata quadratic to build), each refused by the forge.
#[tokio::test]
async fn long_refused_tokens_cost_little_cpu() {
    let (forge, server) = forge().spawn_http("http", &[]).await;
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
    // Quadratic automata took seconds per call here (0.14 s each in a release build): 20 s and
    // more for these 20. Linear work takes 2.6–3 s of this debug server's CPU on a quiet
    // machine and up to 4.05 s on a loaded CI machine, whose other tests share its cores.
    assert!(used < Duration::from_secs(10), "20 calls took {used:?} of CPU");
    assert!(forge.requests().iter().all(|r| r.raw_path == "/api/v1/user" || r.raw_path == "/api/v1/version"));
}

async fn a_recognised_scheme_with_a_value_that_is_not_text_is_401_never_global(t: &str) {
    let (forge, server) = forge().spawn_http(t, &[]).await;
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
    let forge = forge().start().await;
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

// ---------------------------------------------------------------------------------------
// Defects found by reading the code (16–20).

fn echo(path: &str, body: serde_json::Value) -> Script {
    Script::always(None, path, ScriptedResponse::json(200, &body))
}

/// 16, 18: the char bound holds for shapes it used to exceed (many two-item lists of numbers,
/// nothing to shorten), and the pointers of what was cut are escaped.
#[tokio::test]
async fn the_char_bound_always_holds_and_names_cut_places_by_escaped_pointers() {
    let h = Harness::start(Setup::gitea().env("MAX_TOOL_RESPONSE_CHARS", "2000")).await;
    let big = 1.234_567_890_123_456_7e300;
    let wide: serde_json::Map<String, serde_json::Value> =
        (0..100).map(|i| (format!("k{i}"), json!([big, big]))).collect();
    h.forge.script(echo("/api/v1/repos/o/r", serde_json::Value::Object(wide)));
    let c = h.call("repoGet", json!({"owner": "o", "repo": "r"})).await;
    assert!(!c.is_error, "{}", c.text);
    assert!(c.text.chars().count() <= 2000, "{} characters", c.text.chars().count());
    assert!(c.json["truncated"].is_object(), "{}", c.text);

    let issues: Vec<serde_json::Value> =
        (0..60).map(|i| json!({"id": i, "title": format!("t{i}")})).collect();
    h.forge.script(echo("/api/v1/repos/o/r/issues/1", json!({"a/b": issues, "c~d": "x".repeat(3_000)})));
    let c = h.call("issueGetIssue", json!({"owner": "o", "repo": "r", "index": 1})).await;
    assert!(!c.is_error, "{}", c.text);
    let note = c.json["truncated"].to_string();
    assert!(note.contains("/data/a~1b") && note.contains("/data/c~0d"), "{note}");
    h.stop().await;
}

/// 17: an answer over `MAX_RESPONSE_BYTES` names that setting, whatever its media type says.
#[tokio::test]
async fn payload_too_large_names_the_setting_that_applied() {
    let h =
        Harness::start(Setup::gitea().env("MAX_RESPONSE_BYTES", "3000").env("MAX_BINARY_BYTES", "1000000"))
            .await;
    for content_type in [None, Some("application/octet-stream")] {
        // A log (text) declared as octet-stream, and JSON without a media type.
        let (path, tool, args) = match content_type {
            None => ("/api/v1/repos/o/r", "repoGet", json!({"owner": "o", "repo": "r"})),
            Some(_) => (
                "/api/v1/repos/o/r/actions/jobs/1/logs",
                "downloadActionsRunJobLogs",
                json!({"owner": "o", "repo": "r", "job_id": 1}),
            ),
        };
        let mut resp = ScriptedResponse::status(200).with_body(ScriptBody::Bytes(vec![b'x'; 5000]));
        if let Some(ct) = content_type {
            resp = resp.with_header("content-type", ct);
        }
        h.forge.script(Script::always(None, path, resp));
        let c = h.call(tool, args).await;
        assert_eq!(c.kind(), "payload_too_large", "{}", c.text);
        let m = c.json["error"]["message"].as_str().unwrap();
        assert!(m.contains("MAX_RESPONSE_BYTES") && !m.contains("MAX_BINARY_BYTES"), "{content_type:?}: {m}");
    }
    h.stop().await;
}

/// 20: when only part of page 3 fits, the advice names a page size and page that start
/// exactly where page 3 started, and following it gives the next items.
#[tokio::test]
async fn the_advice_for_a_later_page_leads_to_the_items_that_did_not_fit() {
    let h = Harness::start(Setup::gitea().env("MAX_TOOL_RESPONSE_ITEMS", "8")).await;
    h.forge.seed_issues("alice", "demo", 40);
    let c =
        h.call("issueListIssues", json!({"owner": "alice", "repo": "demo", "limit": 10, "page": 3})).await;
    let advice = c.json["truncated"]["how_to_get_more"].as_str().unwrap_or_else(|| panic!("{}", c.text));
    let first_shown = c.data()[0]["number"].as_u64().unwrap();
    // "… ask again with limit=L and page=P …": page P of size L starts at the same item.
    let num = |key: &str| -> u64 {
        let at = advice.find(key).unwrap_or_else(|| panic!("{key} in {advice}")) + key.len();
        advice[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap()
    };
    let (limit, page) = (num("limit="), num("page="));
    assert!(limit <= 8, "{advice}");
    let again = h
        .call("issueListIssues", json!({"owner": "alice", "repo": "demo", "limit": limit, "page": page}))
        .await;
    assert!(!again.is_error, "{}", again.text);
    assert_eq!(again.data()[0]["number"].as_u64(), Some(first_shown), "{advice}");
    h.stop().await;
}

// ---------------------------------------------------------------------------------------
// 11. READ_ONLY handed out credentials through GETs; 15. the raw tool sent routes that no
// operation of the spec has, so no policy decision was made about them.

#[tokio::test]
async fn read_only_refuses_credential_issuing_operations_whatever_their_method() {
    let h = Harness::start(Setup::forgejo().env("READ_ONLY", "true").env("TOOLSETS", "all")).await;
    let listed: Vec<String> = h.tools().await.into_iter().map(|t| t.name.to_string()).collect();
    assert!(!listed.iter().any(|n| n == "repoGetRunnerRegistrationToken"), "not listed");
    let args = json!({"owner": "o", "repo": "r"});
    let calls = [
        ("repoGetRunnerRegistrationToken", args.clone()),
        (
            "gitea_call_operation",
            json!({"operation_id": "repoGetRunnerRegistrationToken", "arguments": args}),
        ),
        (
            "gitea_api_request",
            json!({"method": "GET", "path": "/repos/o/r/actions/runners/registration-token"}),
        ),
    ];
    for (tool, args) in calls {
        let c = h.call(tool, args).await;
        assert_eq!(c.kind(), "denied", "{tool}: {}", c.text);
        assert!(c.text.contains("credential"), "{tool}: {}", c.text);
    }
    let found =
        h.call("gitea_search_operations", json!({"query": "runner registration token", "limit": 25})).await;
    assert!(!found.text.contains("RegistrationToken"), "search hides them: {}", found.text);
    assert!(h.tool_requests().is_empty(), "nothing reached the forge: {:?}", h.tool_requests());
    h.stop().await;
}

#[tokio::test]
async fn the_raw_tool_refuses_routes_no_operation_has() {
    let h = Harness::start(Setup::gitea().env("DISABLED_TOOLS", "repoDelete")).await;
    for (method, path) in
        [("DELETE", "/REPOS/o/r"), ("DELETE", "/repos/o/r/undocumented"), ("GET", "/nope/x")]
    {
        let c = h.call("gitea_api_request", json!({"method": method, "path": path})).await;
        assert_eq!(c.kind(), "denied", "{method} {path}: {}", c.text);
        assert!(c.text.contains("ALLOW_UNKNOWN_ROUTES"), "says what to change: {}", c.text);
    }
    let c = h.call("gitea_api_request", json!({"method": "DELETE", "path": "/repos/o/r"})).await;
    assert!(c.kind() == "denied" && c.text.contains("repoDelete"), "{}", c.text);
    assert!(h.tool_requests().is_empty(), "nothing reached the forge: {:?}", h.tool_requests());
    h.stop().await;

    let h = Harness::start(Setup::gitea().env("ENABLED_TOOLS", "gitea_api_request,repoGet")).await;
    for path in ["/repos/o/r/git/undocumented", "/user/secret-route"] {
        let c = h.call("gitea_api_request", json!({"method": "GET", "path": path})).await;
        assert_eq!(c.kind(), "denied", "{path}: {}", c.text);
    }
    assert!(h.tool_requests().is_empty(), "nothing reached the forge: {:?}", h.tool_requests());
    h.stop().await;

    // Allowed explicitly, the route reaches the forge, which answers for itself.
    let h = Harness::start(Setup::gitea().env("ALLOW_UNKNOWN_ROUTES", "true")).await;
    let c = h.call("gitea_api_request", json!({"method": "GET", "path": "/nope/x"})).await;
    assert_eq!(c.kind(), "not_found", "{}", c.text);
    assert_eq!(h.last().raw_path, "/api/v1/nope/x");
    h.stop().await;
}

// ---------------------------------------------------------------------------------------
// Secrets (6–9): every spelling of a known secret, in every part of every answer.

/// 6: one stray byte made a text body binary, and its base64 carried the token.
#[tokio::test]
async fn text_with_a_stray_byte_stays_text_and_binary_holding_a_secret_is_withheld() {
    let h = Harness::start(Setup::gitea()).await;
    let mut log = format!("step 1\nGITEA_TOKEN={ALICE_TOKEN}\n").into_bytes();
    log.push(0xff);
    log.extend_from_slice(b" done\n");
    h.forge.script(Script::always(
        None,
        "/api/v1/repos/o/r/actions/jobs/1/logs",
        ScriptedResponse::status(200)
            .with_header("content-type", "text/plain; charset=utf-8")
            .with_body(ScriptBody::Bytes(log)),
    ));
    let c = h.call("downloadActionsRunJobLogs", json!({"owner": "o", "repo": "r", "job_id": 1})).await;
    let text = c.data().as_str().unwrap_or_else(|| panic!("text, not binary: {}", c.text));
    assert!(text.contains("[REDACTED]") && text.contains('\u{fffd}') && text.contains("done"), "{text}");
    assert!(!c.text.contains(ALICE_TOKEN), "{}", c.text);

    let mut body = format!("{{\"description\": \"deploy with {ALICE_TOKEN} ").into_bytes();
    body.push(0xfe);
    body.extend_from_slice(b"\"}");
    h.forge.script(Script::always(
        None,
        "/api/v1/repos/o/r",
        ScriptedResponse::status(200)
            .with_header("content-type", "application/json")
            .with_body(ScriptBody::Bytes(body)),
    ));
    let c = h.call("repoGet", json!({"owner": "o", "repo": "r"})).await;
    assert!(
        c.data()["description"].as_str().is_some_and(|d| d.contains("[REDACTED]")),
        "JSON stays JSON: {}",
        c.text
    );

    let mut blob = vec![0x89, b'P', b'N', b'G', 0xff, 0x00];
    blob.extend_from_slice(ALICE_TOKEN.as_bytes());
    blob.extend_from_slice(&[0xfe, 0x01]);
    h.forge.script(Script::always(
        None,
        "/api/v1/repos/o/r/raw/leak.png",
        ScriptedResponse::status(200)
            .with_header("content-type", "image/png")
            .with_body(ScriptBody::Bytes(blob)),
    ));
    let c = h.call("repoGetRawFile", json!({"owner": "o", "repo": "r", "filepath": "leak.png"})).await;
    assert_eq!(c.kind(), "secret_blocked", "{}", c.text);
    assert!(!c.text.contains(ALICE_TOKEN) && !c.text.contains("content_base64"), "{}", c.text);
    // Binary content without a known secret still comes back whole.
    h.forge.script(Script::always(
        None,
        "/api/v1/repos/o/r/raw/ok.png",
        ScriptedResponse::status(200)
            .with_header("content-type", "image/png")
            .with_body(ScriptBody::Bytes(vec![0x89, 0xff, 0x00])),
    ));
    let c = h.call("repoGetRawFile", json!({"owner": "o", "repo": "r", "filepath": "ok.png"})).await;
    assert_eq!(c.data()["content_base64"], "if8A", "{}", c.text);
    h.stop().await;
}

/// 7: the login the forge reports is guarded like data, on stdio and over HTTP.
#[tokio::test]
async fn the_login_the_forge_reports_is_guarded() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.script(echo(
        "/api/v1/user",
        json!({"login": format!("alice{ALICE_TOKEN} ghp_0123456789abcdefghijklmnopqrstuvwxyzAB")}),
    ));
    h.forge.seed_repo("alice", "demo");
    let c = h.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await;
    let login = c.json["identity"]["login"].as_str().unwrap_or_else(|| panic!("{}", c.text));
    assert!(login.starts_with("alice[REDACTED]") && login.contains("[masked:"), "{login}");
    assert!(!c.text.contains(ALICE_TOKEN), "{}", c.text);
    h.stop().await;

    // Over HTTP, a login that holds the caller's own token.
    let bob = "tok-bob-5c0ffee5b0b";
    let forge =
        Forge::gitea().only_users(&[(bob, &format!("bob-{bob}"))]).repo("alice", "demo").start().await;
    let server = HttpServer::spawn(&forge.base_url(), "http", &[]).await;
    let args = json!({"owner": "alice", "repo": "demo"});
    let auth = format!("token {bob}");
    let resp = stateless_call(&http_client(), &server.base, "repoGet", args, Some(&auth)).await.unwrap();
    let c = tool_result(&resp);
    assert_eq!(c.json["identity"]["login"], "bob-[REDACTED]", "{}", c.text);
}

/// 8: JSON-escaped spellings of a token in forge text that was not parsed as JSON — malformed,
/// nested too deep, or an error body that is not an object.
#[tokio::test]
async fn json_escaped_secrets_in_text_that_was_not_parsed_are_redacted() {
    let h = Harness::start(Setup::gitea()).await;
    let escaped: String = ALICE_TOKEN.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
    let half: String = ALICE_TOKEN
        .chars()
        .enumerate()
        .map(|(i, c)| if i % 2 == 1 { format!("\\u{:04X}", c as u32) } else { c.to_string() })
        .collect();
    let bodies = [
        ("malformed", format!("{{\"t\": \"{escaped}\", oops")),
        ("deep", format!("{}\"{half}\"{}", "[".repeat(120), "]".repeat(120))),
    ];
    for (repo, body) in &bodies {
        h.forge.script(Script::always(
            None,
            &format!("/api/v1/repos/o/{repo}"),
            ScriptedResponse::status(200)
                .with_header("content-type", "application/json")
                .with_body(ScriptBody::Bytes(body.clone().into_bytes())),
        ));
        let c = h.call("repoGet", json!({"owner": "o", "repo": repo})).await;
        let text = c.data().as_str().unwrap_or_else(|| panic!("{repo}: kept as text: {}", c.text));
        assert!(
            text.contains("[REDACTED]") && !text.contains(&escaped) && !text.contains(&half),
            "{repo}: {text}"
        );
    }
    // Error bodies that are not objects: a JSON string, a list, plain text.
    for (status, body) in [
        (500, format!("\"boom {escaped}\"")),
        (502, format!("[\"{half}\"]")),
        (503, format!("upstream said {half}")),
    ] {
        h.forge.script(Script::always(
            None,
            "/api/v1/repos/o/err",
            ScriptedResponse::status(status)
                .with_header("content-type", "application/json")
                .with_body(ScriptBody::Bytes(body.into_bytes())),
        ));
        let c = h.call("repoGet", json!({"owner": "o", "repo": "err"})).await;
        assert_eq!(c.kind(), "upstream_error", "{}", c.text);
        let m = c.json["error"]["message"].as_str().unwrap();
        assert!(!m.contains(&escaped) && !m.contains(&half) && !m.contains(ALICE_TOKEN), "{m}");
    }
    h.stop().await;
}

/// 9: the discovery tools' answers pass the same guard and bounds as every other result.
#[tokio::test]
async fn discovery_answers_are_bounded_and_redacted() {
    let h = Harness::start(
        Setup::gitea().env("MAX_TOOL_RESPONSE_CHARS", "2000").env("EXTRA_SECRETS", "archived"),
    )
    .await;
    let c = h.call("gitea_get_operation_schema", json!({"operation_id": "repoEdit"})).await;
    assert!(!c.is_error, "{}", c.text);
    assert!(c.text.chars().count() <= 2000, "{} characters", c.text.chars().count());
    assert!(c.json["truncated"].is_object(), "says what was cut: {}", c.text);
    let c = h.call("gitea_search_operations", json!({"query": "archive a repository", "limit": 25})).await;
    assert!(c.text.chars().count() <= 2000, "{} characters", c.text.chars().count());
    let h2 = Harness::start(Setup::gitea().env("EXTRA_SECRETS", "archived")).await;
    let c = h2.call("gitea_get_operation_schema", json!({"operation_id": "repoEdit"})).await;
    assert!(!c.text.contains("archived") && c.text.contains("[REDACTED]"), "EXTRA_SECRETS apply: {}", c.text);
    h.stop().await;
    h2.stop().await;
}

// ---------------------------------------------------------------------------------------
// 5. A JSON body of small values grew 45-fold in memory when parsed.

/// The server over stdio, driven line by line (no SDK in between), so that a test can send
/// what no SDK would and read the process's own figures.
struct StdioRaw {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
}

impl StdioRaw {
    async fn spawn(forge: &FakeForge, env: &[(&str, &str)]) -> StdioRaw {
        let mut cmd = tokio::process::Command::new(support::bin());
        cmd.args(["serve", "--url", &forge.base_url(), "--flavor", "gitea"])
            .env_clear()
            .env("GITEA_TOKEN", ALICE_TOKEN)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
        let mut s = StdioRaw { child, stdin, stdout };
        s.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}))
        .await;
        let init = s.read().await.expect("an answer to initialize");
        assert!(init.get("result").is_some(), "{init}");
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        s
    }

    async fn send(&mut self, v: &serde_json::Value) {
        self.send_line(v.to_string().as_bytes()).await;
    }

    async fn send_line(&mut self, line: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(line).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next message, or `None` when none came within `support::WAIT_LIMIT`.
    async fn read(&mut self) -> Option<serde_json::Value> {
        use tokio::io::AsyncBufReadExt;
        let mut line = String::new();
        let n =
            tokio::time::timeout(support::WAIT_LIMIT, self.stdout.read_line(&mut line)).await.ok()?.ok()?;
        (n > 0).then(|| serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
    }

    fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }
}

/// The peak resident memory of `pid` so far (`VmHWM`), in bytes.
fn peak_memory(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[tokio::test]
async fn a_large_json_body_of_small_values_costs_about_its_size_in_memory() {
    let forge = forge().start().await;
    let n = 7 * 1024 * 1024; // "1," × n: a 14 MiB array of numbers
    let mut body = Vec::with_capacity(2 * n + 1);
    body.push(b'[');
    for i in 0..n {
        body.extend_from_slice(if i + 1 < n { b"1," } else { b"1" });
    }
    body.push(b']');
    let size = body.len() as u64;
    forge.script(Script::always(
        None,
        "/api/v1/repos/o/r/issues",
        ScriptedResponse::status(200)
            .with_header("content-type", "application/json")
            .with_body(ScriptBody::Bytes(body)),
    ));
    let mut s = StdioRaw::spawn(&forge, &[]).await;
    let before = peak_memory(s.pid());
    for id in 1..=8 {
        s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "issueListIssues", "arguments": {"owner": "o", "repo": "r"}}}))
            .await;
    }
    for _ in 1..=8 {
        let r = s.read().await.expect("an answer");
        let text = r["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{r}"));
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(v["data"].as_array().map(Vec::len), Some(100), "{}", &text[..300.min(text.len())]);
        assert_eq!(v["truncated"]["items"][0], json!({"path": "/data", "returned": 100, "total": n}));
    }
    let grew = peak_memory(s.pid()).saturating_sub(before);
    eprintln!("8 calls of a {size}-byte array: peak grew by {} MiB", grew >> 20);
    // Parsed whole, one call took 630 MB; eight at once 1.16 GB. Now a body is held at most
    // twice over (read, then parsed), and at most four large bodies at once.
    assert!(grew < 10 * size, "peak grew by {grew} bytes for {size}-byte bodies");
}

// ---------------------------------------------------------------------------------------
// 2. Slow clients: partial headers and bodies that never end held their connections forever;
// 1,100 of them under a 1,024-descriptor limit locked everyone else out.

/// A TCP connection to `server` from the loopback address `from` (127.0.0.x: one machine, many
/// peers).
async fn connect_from(
    server: &HttpServer,
    from: std::net::Ipv4Addr,
) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(std::net::SocketAddr::from((from, 0)))?;
    socket.connect(server.authority().parse().unwrap()).await
}

/// Whether the server closed `conn` (reading gives end of file or an error) within `wait`.
async fn closed_within(conn: &mut tokio::net::TcpStream, wait: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let deadline = Instant::now() + wait;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline.into(), conn.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {} // an answer (408, 503) before the close
        }
    }
}

/// `GET /healthz` from 127.0.0.1 on a fresh connection; its latency, or why it failed.
async fn healthz(server: &HttpServer) -> Result<Duration, String> {
    let started = Instant::now();
    let client = reqwest::Client::builder().no_proxy().pool_max_idle_per_host(0).build().unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), client.get(server.url("/healthz")).send())
        .await
        .map_err(|_| "no answer within 10 s".to_owned())?
        .map_err(|e| e.to_string())?;
    if resp.status() != 200 {
        return Err(format!("status {}", resp.status()));
    }
    Ok(started.elapsed())
}

on_both_transports!(slow_clients_do_not_lock_out_well_behaved_ones);

async fn slow_clients_do_not_lock_out_well_behaved_ones(t: &str) {
    use tokio::io::AsyncWriteExt;
    let forge = forge().start().await;
    let env = [
        ("GITEA_TOKEN", ALICE_TOKEN),
        ("MCP_HEADER_TIMEOUT", "3"),
        ("MCP_BODY_TIMEOUT", "3"),
        ("LOG_LEVEL", "warn"),
    ];
    let server = HttpServer::spawn_with_files(&forge.base_url(), t, &env, Some(1024)).await;
    let endpoint = if t == "sse" { "/message?sessionId=x" } else { "/mcp" };
    // 1,100 connections from eight addresses holding half a request head each…
    let mut slow = Vec::new();
    for i in 0..1_100u32 {
        let from = std::net::Ipv4Addr::new(127, 0, 0, 2 + (i % 8) as u8);
        let Ok(mut c) = connect_from(&server, from).await else { continue };
        let head = format!("POST {endpoint} HTTP/1.1\r\nHost: {}\r\nX-Slow: ", server.authority());
        if c.write_all(head.as_bytes()).await.is_ok() {
            slow.push(c);
        }
    }
    // …and 200 chunked bodies from another address that never end.
    let mut endless = Vec::new();
    for _ in 0..200 {
        let Ok(mut c) = connect_from(&server, std::net::Ipv4Addr::new(127, 0, 0, 20)).await else { continue };
        let head = format!(
            "POST {endpoint} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{{\"a\":\r\n",
            server.authority()
        );
        if c.write_all(head.as_bytes()).await.is_ok() {
            endless.push(c);
        }
    }
    eprintln!("[{t}] holding {} slow heads and {} endless bodies", slow.len(), endless.len());
    // A well-behaved client is served meanwhile: /healthz, and a tool call.
    for _ in 0..5 {
        let took = healthz(&server)
            .await
            .unwrap_or_else(|e| panic!("/healthz under attack: {e}\n{}", server.stderr()));
        eprintln!("[{t}] /healthz under attack: {took:?}");
    }
    let c = server.connect(None).await.unwrap_or_else(|e| panic!("a session under attack: {e:?}"));
    let r = c.call_ok("repoGet", json!({"owner": "alice", "repo": "demo"}), None).await;
    assert!(!r.is_error, "{}", r.text);
    // The slow heads are closed after the header timeout; the endless bodies get 408 and close.
    let mut still_open = 0;
    for c in slow.iter_mut().step_by(50) {
        still_open += usize::from(!closed_within(c, Duration::from_secs(8)).await);
    }
    assert_eq!(still_open, 0, "slow heads still open after the header timeout");
    for c in endless.iter_mut().step_by(20) {
        assert!(closed_within(c, Duration::from_secs(8)).await, "an endless body still open");
    }
    assert!(healthz(&server).await.is_ok());
}

/// One address may hold at most MCP_MAX_CONNECTIONS_PER_PEER connections; the next one is
/// answered 503 at once, and other addresses are served.
#[tokio::test]
async fn one_address_may_hold_only_its_share_of_connections() {
    use tokio::io::AsyncReadExt;
    let forge = forge().start().await;
    let env = [("GITEA_TOKEN", ALICE_TOKEN), ("MCP_MAX_CONNECTIONS_PER_PEER", "20")];
    let server = HttpServer::spawn_with_files(&forge.base_url(), "http", &env, None).await;
    let from = std::net::Ipv4Addr::new(127, 0, 0, 5);
    let mut held = Vec::new();
    for _ in 0..20 {
        held.push(connect_from(&server, from).await.unwrap());
    }
    // The server takes connections from the kernel's queue in the order they came, and counts
    // each as it takes it: the twenty are counted before the next is judged.
    let mut extra = connect_from(&server, from).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(support::WAIT_LIMIT, extra.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("too many connections from this address"), "{answer}");
    assert!(healthz(&server).await.is_ok(), "another address is served");
}

/// A connection that finished its request and stays silent is closed after MCP_IDLE_TIMEOUT.
#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let forge = forge().start().await;
    let env = [("GITEA_TOKEN", ALICE_TOKEN), ("MCP_IDLE_TIMEOUT", "2"), ("MCP_HEADER_TIMEOUT", "10")];
    let server = HttpServer::spawn_with_files(&forge.base_url(), "http", &env, None).await;
    let mut c = connect_from(&server, std::net::Ipv4Addr::LOCALHOST).await.unwrap();
    let req = format!("GET /healthz HTTP/1.1\r\nHost: {}\r\n\r\n", server.authority());
    // Before the request: the server's idle time starts later, once it has answered.
    let started = Instant::now();
    c.write_all(req.as_bytes()).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = c.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    assert!(closed_within(&mut c, Duration::from_secs(10)).await, "an idle connection stays open");
    let after = started.elapsed();
    assert!(after >= Duration::from_millis(1500), "closed after {after:?}, before the idle timeout");
}

/// An answer given before the request's body arrived (a 401 to an unauthenticated POST, whose
/// client wrote the body after the head, as httpx does) reaches the client whole, and the
/// kept-alive connection serves the next request: the rest of the body is read, not left for
/// the kernel to answer with a reset.
#[tokio::test]
async fn an_answer_before_the_body_arrived_keeps_its_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_forge, server) =
        forge().serve_http("http", &[("MCP_BEARER_TOKEN", "operator-shared-secret")]).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        server.authority(),
        body.len()
    );
    let health = format!("GET /healthz HTTP/1.1\r\nHost: {}\r\n\r\n", server.authority());
    for round in 0..5 {
        let mut c = connect_from(&server, std::net::Ipv4Addr::LOCALHOST).await.unwrap();
        c.write_all(head.as_bytes()).await.unwrap();
        // The server answers once it has read what is left of the body (up to its bound): the
        // body comes in a second write, after the server has begun on the head.
        support::let_time_pass(
            Duration::from_millis(50),
            "the body comes in a second write, as httpx sends it",
        )
        .await;
        c.write_all(body.as_bytes()).await.unwrap();
        // The 401, whole: its head and as many body bytes as it announces.
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let whole = |got: &[u8]| {
            let text = String::from_utf8_lossy(got);
            let (head, rest) = text.split_once("\r\n\r\n")?;
            let length: usize = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned))?
                .trim()
                .parse()
                .ok()?;
            (rest.len() >= length).then(|| head.to_owned())
        };
        let first = loop {
            let n = tokio::time::timeout(support::WAIT_LIMIT, c.read(&mut buf))
                .await
                .expect("an answer")
                .unwrap_or_else(|e| panic!("round {round}: reading the 401: {e}"));
            assert!(
                n > 0,
                "round {round}: closed before the 401 was whole: {:?}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
            if let Some(head) = whole(&got) {
                break head;
            }
        };
        assert!(first.starts_with("HTTP/1.1 401"), "{first}");
        assert!(!first.to_ascii_lowercase().contains("connection: close"), "{first}");
        // The same connection serves the next request.
        c.write_all(health.as_bytes()).await.unwrap_or_else(|e| panic!("round {round}: {e}"));
        let n = tokio::time::timeout(support::WAIT_LIMIT, c.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap_or_else(|e| panic!("round {round}: reading the second answer: {e}"));
        let second = String::from_utf8_lossy(&buf[..n]);
        assert!(second.starts_with("HTTP/1.1 200"), "round {round}: {second:?}");
    }
}

// ---------------------------------------------------------------------------------------
// 3. Garbage tokens filled the session and stream limits; 14. a session answered any identity
// that held its id.

on_both_transports!(
    refused_tokens_take_no_session_slot_and_no_identity_takes_more_than_its_share,
    another_identity_holding_a_session_id_gets_404_and_reaches_nothing,
);

async fn refused_tokens_take_no_session_slot_and_no_identity_takes_more_than_its_share(t: &str) {
    let env = [
        ("MCP_BEARER_TOKEN", "operator-shared-secret"),
        ("MCP_MAX_SESSIONS", "5"),
        ("MCP_MAX_SSE_STREAMS", "5"),
        ("MCP_MAX_SESSIONS_PER_IDENTITY", "3"),
    ];
    let (_forge, server) = forge().spawn_http(t, &env).await;
    // Garbage tokens are refused by the forge: 401, and they never count.
    for i in 0..8 {
        let (status, body) = open_with(&server, format!("token garbage{i}").as_bytes()).await;
        assert_eq!(status, 401, "{body}");
    }
    // The operator's own bearer still opens sessions — up to its share.
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(
            server.connect(Some("Bearer operator-shared-secret")).await.expect("the operator's session"),
        );
    }
    match server.connect(Some("Bearer operator-shared-secret")).await {
        Err((429, body)) => assert!(body.contains("MCP_MAX_SESSIONS_PER_IDENTITY"), "{body}"),
        other => panic!("a fourth session of one identity must be 429: {:?}", other.err()),
    }
    // Another identity gets the rest, then the overall limit holds.
    let alice = format!("token {ALICE_TOKEN}");
    held.push(server.connect(Some(&alice)).await.unwrap());
    held.push(server.connect(Some(&alice)).await.unwrap());
    match server.connect(Some(&alice)).await {
        Err((503, body)) => assert!(body.contains("too many open"), "{body}"),
        other => panic!("a sixth session must be 503: {:?}", other.err()),
    }
    let r = held[0]
        .call_ok("repoGet", json!({"owner": "alice", "repo": "demo"}), Some("Bearer operator-shared-secret"))
        .await;
    assert!(!r.is_error, "{}", r.text);
}

async fn another_identity_holding_a_session_id_gets_404_and_reaches_nothing(t: &str) {
    let bob = "tok-bob-5c0ffee5b0b";
    let carol = "tok-carol-7dead0beef";
    let (forge, server) = Forge::gitea()
        .only_users(&[(bob, "bob"), (carol, "carol")])
        .repo("alice", "demo")
        .spawn_http(t, &[])
        .await;
    let carols = server.connect(Some(&format!("token {carol}"))).await.unwrap();
    let args = json!({"owner": "alice", "repo": "demo"});
    forge.clear_requests();
    // Bob's posts into carol's session: 404, no tool request, and (SSE) nothing in her stream.
    for auth in [format!("token {bob}"), format!("Bearer {bob}")] {
        match carols.call("repoGet", args.clone(), Some(&auth)).await {
            Err((404, _)) => {}
            other => panic!("bob on carol's session: {other:?}"),
        }
    }
    // Carol's own call, after bob's posts: its answer comes after anything they could have
    // set going in her session, and its request after anything they sent the forge.
    let carol_auth = format!("token {carol}");
    let r = carols.call_ok("repoGet", args.clone(), Some(&carol_auth)).await;
    assert_eq!(r.json["identity"]["login"], "carol", "{}", r.text);
    if let support::http::McpClient::Sse(c) = &carols {
        assert!(c.next_other(Duration::ZERO).await.is_none(), "nothing arrived in carol's stream");
    }
    let sent = forge.requests();
    let called: Vec<_> = sent.iter().filter(|r| r.raw_path != "/api/v1/user").collect();
    assert_eq!(called.len(), 1, "only carol's call and the login lookups: {sent:?}");
    assert!(called[0].header("authorization").is_some_and(|a| a.contains(carol)), "{sent:?}");
    if let support::http::McpClient::Streamable(c) = &carols {
        // Bob cannot close carol's session; carol can.
        let delete = |auth: String| {
            http_client()
                .delete(c.url())
                .header("mcp-session-id", c.session_id().unwrap())
                .header("mcp-protocol-version", "2025-06-18")
                .header("authorization", auth)
                .send()
        };
        assert_eq!(delete(format!("token {bob}")).await.unwrap().status(), 404);
        let r = carols.call_ok("repoGet", args.clone(), Some(&format!("token {carol}"))).await;
        assert_eq!(r.json["identity"]["login"], "carol", "{}", r.text);
        // 200, as the official clients expect of a session closed.
        assert_eq!(delete(format!("token {carol}")).await.unwrap().status(), 200);
        match carols.call("repoGet", args.clone(), Some(&format!("token {carol}"))).await {
            Err((404, _)) => {}
            other => panic!("a closed session: {other:?}"),
        }
    }
}

/// The CPU of long refused tokens, on the session path (a session is opened only for an
/// established identity).
#[tokio::test]
async fn long_refused_tokens_cost_little_cpu_when_opening_sessions() {
    for t in ["http", "sse"] {
        let (_forge, server) = forge().spawn_http(t, &[]).await;
        let pid = server.pid().unwrap();
        let before = cpu_time(pid);
        for i in 0..20 {
            let token = format!("{}{i}", "A".repeat(8 * 1024 - 2));
            let (status, body) = open_with(&server, format!("token {token}").as_bytes()).await;
            assert_eq!(status, 401, "the forge refuses the token: {body}");
            assert!(!body.contains(&token[..64]), "does not echo the token: {body}");
        }
        let used = cpu_time(pid) - before;
        eprintln!("[{t}] 20 session openings with 8 KiB refused tokens: {used:?} of server CPU");
        assert!(used < Duration::from_secs(4), "20 requests took {used:?} of CPU");
    }
}

// ---------------------------------------------------------------------------------------
// 4. Unread SSE streams buffered every answer.

/// A legacy SSE stream opened on a raw socket that is never read after its `endpoint` event;
/// the message URL it announced.
async fn unread_stream(server: &HttpServer) -> (tokio::net::TcpStream, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = connect_from(server, std::net::Ipv4Addr::LOCALHOST).await.unwrap();
    let req =
        format!("GET /sse HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n", server.authority());
    c.write_all(req.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    let announced = |seen: &[u8]| {
        let text = String::from_utf8_lossy(seen);
        text.find("sessionId=").is_some_and(|at| text[at..].contains('\n'))
    };
    while !announced(&seen) {
        let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "the stream ended: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&seen);
    let at = text.find("/message?sessionId=").unwrap();
    let url = text[at..].split_whitespace().next().unwrap().to_owned();
    (c, server.url(&url))
}

async fn post(url: &str, body: serde_json::Value) -> u16 {
    let r = http_client()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await;
    r.map(|r| r.status().as_u16()).unwrap_or(0)
}

#[tokio::test]
async fn unread_sse_streams_buffer_a_bounded_number_of_answers_and_are_ended() {
    let forge = forge().start().await;
    // About 1 MB per answer: more than the sockets between us hold.
    forge.script(echo("/api/v1/repos/o/r", json!({"description": "d".repeat(1 << 20)})));
    let (streams, posts) = (4, 40);
    let max = streams.to_string();
    let env = [
        ("GITEA_TOKEN", ALICE_TOKEN),
        ("MAX_TOOL_RESPONSE_CHARS", "2000000"),
        ("MCP_STREAM_STALL_TIMEOUT", "2"),
        ("MCP_REQUEST_TIMEOUT", "4"),
        ("MCP_MAX_SSE_STREAMS", max.as_str()),
        ("LOG_LEVEL", "warn"),
    ];
    let server = HttpServer::spawn(&forge.base_url(), "sse", &env).await;
    let pid = server.pid().unwrap();
    let before = peak_memory(pid);
    let mut held = Vec::new();
    let mut urls = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..streams {
        let (socket, url) = unread_stream(&server).await;
        held.push(socket);
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "unread", "version": "0"}}});
        assert_eq!(post(&url, init).await, 202);
        assert_eq!(post(&url, json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await, 202);
        for id in 1..=posts {
            let url = url.clone();
            tasks.push(tokio::spawn(async move {
                post(
                    &url,
                    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "repoGet", "arguments": {"owner": "o", "repo": "r"}}}),
                )
                .await
            }));
        }
        urls.push(url);
    }
    let started = Instant::now();
    let statuses: Vec<u16> = futures::future::join_all(tasks).await.into_iter().map(|r| r.unwrap()).collect();
    let accepted = statuses.iter().filter(|s| **s == 202).count();
    eprintln!("posts: {accepted} accepted, in {:?}", started.elapsed());
    // Each stream took its outstanding answers (and what the sockets between us held, a few
    // MB); the rest were refused (503 while it stalled, 404 once it was ended). All 40 of each
    // were taken and buffered before.
    assert!(accepted <= streams * 24, "{accepted} posts accepted for {streams} unread streams");
    assert!(statuses.iter().all(|s| [202, 503, 404].contains(s)), "{statuses:?}");
    let grew = peak_memory(pid).saturating_sub(before);
    eprintln!("{streams} unread streams, {posts} answers of 1 MB each: peak grew by {} MiB", grew >> 20);
    // Buffering every answer, 40 answers of 1 MB per stream took over 300 MiB here.
    assert!(grew < 200 << 20, "peak grew by {} MiB", grew >> 20);
    // The stalled streams were ended: their sessions are gone, their connections closed, and
    // their slots free again (the limit is as many streams as were opened).
    for url in &urls {
        assert_eq!(post(url, json!({"jsonrpc": "2.0", "method": "ping", "id": 1})).await, 404, "{url}");
    }
    for socket in &mut held {
        assert!(
            closed_within(socket, Duration::from_secs(10)).await,
            "a stalled stream's connection is open"
        );
    }
    let (_fresh, _) = unread_stream(&server).await;
    assert!(healthz(&server).await.is_ok());
}

/// The same for any connection: a client that does not read a large answer (here a
/// Streamable HTTP call without a session) has its connection closed after the stall timeout.
#[tokio::test]
async fn a_connection_whose_client_stopped_reading_is_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let forge = forge().start().await;
    forge.script(echo("/api/v1/repos/o/r", json!({"description": "d".repeat(8 << 20)})));
    let env = [
        ("GITEA_TOKEN", ALICE_TOKEN),
        ("MAX_TOOL_RESPONSE_CHARS", "10000000"),
        ("MCP_STREAM_STALL_TIMEOUT", "2"),
        ("LOG_LEVEL", "warn,aegis_gitea_mcp::transport::listener=debug"),
    ];
    let server = HttpServer::spawn(&forge.base_url(), "http", &env).await;
    let mut c = connect_from(&server, std::net::Ipv4Addr::LOCALHOST).await.unwrap();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "repoGet", "arguments": {"owner": "o", "repo": "r"}, "_meta": meta}})
    .to_string();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: repoGet\r\nContent-Length: {}\r\n\r\n{body}",
        server.authority(),
        body.len()
    );
    c.write_all(req.as_bytes()).await.unwrap();
    // Wait for the answer to begin (the call may take long on a busy machine), then read
    // nothing until the server says it closes the connection: the rest of the answer (8 MB) is
    // more than the sockets hold, so the server's writes stall.
    let mut first = [0u8; 1];
    let started = tokio::time::timeout(support::WAIT_LIMIT, c.read_exact(&mut first)).await;
    assert!(matches!(started, Ok(Ok(_))), "the answer did not begin: {started:?}");
    server.log_lines("the client stopped reading", 1).await;
    let mut got = Vec::new();
    let read = tokio::time::timeout(support::WAIT_LIMIT, c.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "the connection was not closed");
    assert!(got.len() < 8 << 20, "the whole answer arrived ({} bytes): nothing stalled", got.len());
    assert!(healthz(&server).await.is_ok());
}

// ---------------------------------------------------------------------------------------
// 13. A message that could not be parsed got no answer over stdio (the client waited forever)
// and 415 over HTTP.

#[tokio::test]
async fn every_line_over_stdio_gets_an_answer_and_the_server_keeps_serving() {
    let forge = forge().start().await;
    let mut s = StdioRaw::spawn(&forge, &[]).await;
    let deep = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{}1{},\"method\":\"ping\"}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let digits = format!("{{\"jsonrpc\":\"2.0\",\"id\":1{},\"method\":\"ping\"}}", "0".repeat(100_000));
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}",
        "x".repeat(100 << 20)
    );
    let lines: Vec<(&str, Vec<u8>, i64, Value)> = vec![
        (
            "an id that is not UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}".to_vec(),
            -32700,
            Value::Null,
        ),
        ("nesting 10,000 deep", deep.into_bytes(), -32700, Value::Null),
        ("a 100,000-digit id", digits.into_bytes(), -32700, Value::Null),
        // Too long to read, but its id is skimmed: the answer goes to that request.
        ("a 100 MB line", huge.into_bytes(), -32600, json!(1)),
        ("not JSON", b"{oops".to_vec(), -32700, Value::Null),
        ("JSON that is no message", br#"{"jsonrpc":"2.0","id":9,"method":7}"#.to_vec(), -32600, json!(9)),
        // Read as its first value by one reader and its last by another: refused, unsent.
        (
            "an argument given twice",
            br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"repoDelete","arguments":{"owner":"alice","repo":"demo","repo":"other"}}}"#.to_vec(),
            -32600,
            json!(8),
        ),
    ];
    for (what, line, code, id) in lines {
        s.send_line(&line).await;
        let a = s.read().await.unwrap_or_else(|| panic!("{what}: no answer"));
        assert_eq!(a["error"]["code"], code, "{what}: {a}");
        assert_eq!(a["id"], id, "{what}: the id is kept when it can be read: {a}");
        // And the server goes on.
        s.send(&json!({"jsonrpc": "2.0", "id": 100, "method": "ping"})).await;
        let pong = s.read().await.unwrap_or_else(|| panic!("after {what}: no answer to ping"));
        assert_eq!(pong["id"], 100, "{pong}");
    }
}

on_both_transports!(a_body_that_is_no_json_rpc_message_gets_400_with_the_json_rpc_error);

async fn a_body_that_is_no_json_rpc_message_gets_400_with_the_json_rpc_error(t: &str) {
    let (forge, server) = forge().spawn_http(t, &[]).await;
    let c = server.connect(None).await.unwrap();
    let url = match &c {
        support::http::McpClient::Sse(c) => c.post_url().to_owned(),
        support::http::McpClient::Streamable(c) => c.url().to_owned(),
    };
    let session = match &c {
        support::http::McpClient::Streamable(c) => c.session_id().map(str::to_owned),
        _ => None,
    };
    for (body, code, id) in [
        (b"{oops".to_vec(), -32700, serde_json::Value::Null),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}".to_vec(),
            -32700,
            serde_json::Value::Null,
        ),
        (br#"{"jsonrpc":"2.0","id":5,"method":7}"#.to_vec(), -32600, json!(5)),
        (
            br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"repoDelete","name":"repoGet","arguments":{"owner":"alice","repo":"demo"}}}"#.to_vec(),
            -32600,
            json!(6),
        ),
    ] {
        for with_session in [true, false] {
            if with_session && t == "sse" || !with_session && t == "http" && session.is_none() {
                continue;
            }
            let mut req = http_client()
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", ACCEPT_BOTH)
                .body(body.clone());
            if let (true, Some(s)) = (with_session, &session) {
                req = req.header("mcp-session-id", s).header("mcp-protocol-version", "2025-06-18");
            }
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status().as_u16(), 400, "{}", String::from_utf8_lossy(&body));
            let a: serde_json::Value = resp.json().await.unwrap();
            assert_eq!((a["error"]["code"].as_i64(), &a["id"]), (Some(code), &id), "{a}");
        }
    }
    assert!(
        forge.requests().iter().all(|r| r.method == "GET"),
        "nothing of a refused body was sent: {:?}",
        forge.requests()
    );
    let r = c.call_ok("repoGet", json!({"owner": "alice", "repo": "demo"}), None).await;
    assert!(!r.is_error, "{}", r.text);
}

/// 1 (the timeout part): MCP_REQUEST_TIMEOUT bounds the whole call — establishing a new
/// token's identity included — even when the forge's own timeout is far longer: the answer
/// names the request's timeout, and comes while the client still waits (its exchange
/// timeout, 30 s, is a twentieth of the forge's).
#[tokio::test]
async fn the_request_timeout_bounds_identity_resolution_too() {
    for t in ["http", "sse"] {
        let (forge, server) =
            forge().spawn_http(t, &[("MCP_REQUEST_TIMEOUT", "2"), ("GITEA_TIMEOUT", "600")]).await;
        forge.script(Script::always(
            None,
            "/api/v1/user",
            ScriptedResponse::status(200).with_body(ScriptBody::Hang),
        ));
        let auth = "token tok-never-answered-123";
        let started = Instant::now();
        match server.connect(Some(auth)).await {
            Err((503, body)) => {
                assert!(
                    body.contains("could not establish") && body.contains("MCP_REQUEST_TIMEOUT"),
                    "{body}"
                )
            }
            other => panic!("[{t}] opening a session while /user hangs: {:?}", other.err()),
        }
        if t == "http" {
            let resp = stateless_call(
                &http_client(),
                &server.base,
                "repoGet",
                json!({"owner": "alice", "repo": "demo"}),
                Some(auth),
            )
            .await
            .unwrap();
            let r = tool_result(&resp);
            assert_eq!(r.kind(), "timeout", "{resp}");
            assert!(r.text.contains("MCP_REQUEST_TIMEOUT"), "{resp}");
        }
        eprintln!("[{t}] refused within {:?}", started.elapsed());
    }
}

/// 19: a spec fix of one flavor described the other flavor's tool of the same name.
#[tokio::test]
async fn tool_descriptions_carry_only_their_own_flavors_fixes() {
    let describe = async |flavor: &str| {
        let run = support::run_with_timeout(
            std::process::Command::new(support::bin())
                .args([
                    "tools",
                    "--json",
                    "--flavor",
                    flavor,
                    "--url",
                    "http://127.0.0.1:9",
                    "--toolsets",
                    "all",
                ])
                .env_clear(),
            Duration::from_secs(60),
        )
        .await;
        let tools: serde_json::Value =
            serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stderr));
        tools.as_array().unwrap().iter().find(|t| t["name"] == "repoGetArchive").unwrap()["description"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let gitea = describe("gitea").await;
    let forgejo = describe("forgejo").await;
    assert!(gitea.contains("Returns the archive as binary data"), "{gitea}");
    assert!(
        !forgejo.contains("Returns the archive as binary data"),
        "Gitea's fix on Forgejo's tool: {forgejo}"
    );
    assert!(forgejo.contains("content_base64"), "{forgejo}");
}
