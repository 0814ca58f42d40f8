//! Streamable HTTP speaks every protocol version the MCP layer knows: `initialize` with
//! 2024-11-05 … 2025-11-25 negotiates that version, and 2026-07-28 clients get an answer to
//! `server/discover` and stateless calls without any `initialize`. `http_protocols/metrics.rs`:
//! the `/metrics` endpoint, scraped with the Prometheus Python parser.

use crate::support;

#[path = "http_protocols/metrics.rs"]
mod metrics;

use fake_forge::FakeForge;
use serde_json::{Value, json};
use support::http::HttpServer;
use support::{ALICE_TOKEN, Forge};

/// POST one JSON-RPC message; the JSON-RPC answer (plain or SSE-framed) and the session id.
async fn rpc(url: &str, headers: &[(&str, &str)], body: Value) -> (u16, Option<Value>, Option<String>) {
    let mut r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let resp = r.body(body.to_string()).send().await.unwrap();
    let status = resp.status().as_u16();
    let sid = resp.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned());
    let text = resp.text().await.unwrap();
    let msg = support::http::messages_of(&text)
        .into_iter()
        .find(|v| v.get("result").is_some() || v.get("error").is_some());
    (status, msg, sid)
}

#[tokio::test]
async fn initialize_negotiates_every_handshake_version() {
    let (_forge, s) = Forge::gitea().serve_http("http", &[]).await;
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
        let (status, msg, sid) = rpc(&s.endpoint, &[], init).await;
        assert_eq!(status, 200, "{version}");
        let msg = msg.unwrap();
        assert_eq!(msg["result"]["protocolVersion"], version, "{msg}");
        assert_eq!(msg["result"]["serverInfo"]["name"], "aegis-gitea-mcp");
        let sid = sid.expect("a session id");
        let h = [("mcp-session-id", sid.as_str()), ("mcp-protocol-version", version)];
        rpc(&s.endpoint, &h, json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        let (_, msg, _) =
            rpc(&s.endpoint, &h, json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await;
        assert_eq!(
            msg.unwrap()["result"]["tools"].as_array().unwrap().len(),
            support::DEFAULT_TOOL_COUNT,
            "{version}"
        );
    }
}

#[tokio::test]
async fn newest_clients_discover_and_call_without_initialize() {
    let (_forge, s) = Forge::gitea().repo("alice", "demo").serve_http("http", &[]).await;
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let h = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "server/discover")];
    let (status, msg, _) = rpc(
        &s.endpoint,
        &h,
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}),
    )
    .await;
    assert_eq!(status, 200);
    let msg = msg.unwrap();
    let versions = msg["result"]["supportedVersions"].as_array().cloned().unwrap_or_default();
    assert!(versions.contains(&json!("2026-07-28")) && versions.contains(&json!("2024-11-05")), "{msg}");

    let h = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "repoGet")];
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}, "_meta": meta}});
    let (status, msg, _) = rpc(&s.endpoint, &h, call).await;
    assert_eq!(status, 200);
    let msg = msg.unwrap();
    let text = msg["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{msg}"));
    let envelope: Value = serde_json::from_str(text).unwrap();
    assert_eq!(envelope["data"]["full_name"], "alice/demo");
    assert_eq!(envelope["identity"]["login"], "alice");
}

#[tokio::test]
async fn two_authorization_headers_are_refused() {
    let (forge, s) = Forge::gitea().serve_http("http", &[]).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let (status, msg, _) =
        rpc(&s.endpoint, &[("authorization", "token a-token-1"), ("authorization", "token b-token-2")], init)
            .await;
    assert_eq!(status, 400);
    assert!(msg.unwrap()["error"]["message"].as_str().unwrap().contains("exactly one Authorization"));
    assert!(support::http::not_probes(&forge).is_empty());
}

#[tokio::test]
async fn serving_the_global_token_to_anyone_on_a_public_address_warns_at_start_up() {
    let forge = Forge::gitea().start().await;
    // The warning is said before the line that says where the server listens, which the start
    // waits for: whatever is in the log then is all the start will say.
    let start = async |bearer: Option<&str>| {
        let mut env = vec![("GITEA_TOKEN", ALICE_TOKEN)];
        env.extend(bearer.map(|b| ("MCP_BEARER_TOKEN", b)));
        let mut server = HttpServer::spawn_listening(&forge.base_url(), "http", &env, "0.0.0.0:0").await;
        let log = server.stderr();
        server.stop_and_log().await;
        log
    };
    let open = start(None).await;
    assert!(open.contains("WARNING") && open.contains("MCP_BEARER_TOKEN"), "{open}");
    assert!(!open.contains(ALICE_TOKEN));
    let guarded = start(Some("a-long-shared-secret-value")).await;
    assert!(guarded.contains("listening on") && !guarded.contains("WARNING"), "{guarded}");
}

/// At the default log level a request leaves no line: the MCP and HTTP libraries log each
/// request at `info`, so they are held to `warn` unless the log filter names them. Plain
/// stateless calls do not pass through the MCP library; a session's handshake does.
#[tokio::test]
async fn requests_leave_no_log_lines_unless_the_libraries_are_asked_for() {
    let forge = Forge::gitea().repo("alice", "demo").start().await;
    for (level, expect_library_lines) in [(None, false), (Some("info,rmcp=info"), true)] {
        let mut env = vec![("GITEA_TOKEN", ALICE_TOKEN)];
        env.extend(level.map(|l| ("LOG_LEVEL", l)));
        let mut server = HttpServer::spawn(&forge.base_url(), "http", &env).await;
        let http = support::http::http_client();
        for _ in 0..3 {
            let r = support::http::stateless_call(
                &http,
                &server.url(""),
                "repoGet",
                json!({"owner": "alice", "repo": "demo"}),
                None,
            )
            .await
            .expect("call");
            assert!(r["result"]["isError"] != json!(true), "{r}");
        }
        let session = support::http::StreamableClient::connect(&server.url(""), None).await.expect("session");
        session.call("repoGet", json!({"owner": "alice", "repo": "demo"}), None).await.expect("call");
        // A request the library serves in the session (its session is built for it).
        session.request("tools/list", json!({}), None).await.expect("tools/list");
        // Everything the server ever logged (it has exited), but for its own words on the way out.
        let log = server.stop_and_log().await;
        let added = requests_lines(&log);
        if expect_library_lines {
            assert!(added.iter().any(|l| l.contains("INFO")), "rmcp=info asked for its lines: {log}");
        } else {
            assert!(added.is_empty(), "{level:?}: requests logged {added:#?}");
        }
    }
}

/// A call inside a session is answered as plain JSON with a length (its answer is its only
/// message), and the server logs one line to say where it listens and nothing when clients
/// go away: a standalone stream dropped, a call dropped before its answer, a session closed.
#[tokio::test]
async fn session_answers_are_plain_json_and_clients_that_leave_leave_no_log_lines() {
    use support::http::StreamableClient;
    // Its own process: the test reads the server's log.
    let (forge, mut server) = Forge::gitea().repo("alice", "demo").spawn_http("http", &[]).await;
    forge.seed_issues("alice", "demo", 3);
    let client = StreamableClient::connect(&server.url(""), None).await.expect("session");
    let sid = client.session_id().expect("a session id").to_owned();
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}}});
    let resp = client.post(&call, None).await.expect("call");
    let kind = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(kind.as_deref(), Some("application/json"));
    let length: usize = resp.headers()["content-length"].to_str().unwrap().parse().unwrap();
    let bytes = resp.bytes().await.unwrap();
    assert_eq!(bytes.len(), length);
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["id"], 9);
    assert!(body["result"]["content"][0]["text"].as_str().unwrap().contains("\"full_name\":\"alice/demo\""));

    let http = support::http::http_client();
    let session = |r: reqwest::RequestBuilder| {
        r.header("mcp-session-id", &sid).header("mcp-protocol-version", support::http::PROTOCOL_VERSION)
    };
    // The standalone stream, opened and dropped.
    let stream =
        session(http.get(server.url("/mcp")).header("accept", "text/event-stream")).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    drop(stream);
    // A call whose client leaves before the answer: dropped once the forge has the request,
    // which it answers only later.
    let held = hold_the_next_issue_list(&forge);
    let slow = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
        "params": {"name": "issueListIssues", "arguments": {"owner": "alice", "repo": "demo"}}});
    let left = tokio::spawn(
        session(http.post(server.url("/mcp")))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(slow.to_string())
            .send(),
    );
    leave_once_the_forge_is_asked(&forge, held, left).await;
    let closed = session(http.delete(server.url("/mcp"))).send().await.unwrap();
    assert_eq!(closed.status(), 200);
    await_issue_list_counted(&server).await;
    assert_logged_only_where_it_listens(&mut server).await;
}

/// An answer as the byte-for-byte comparisons read it: status, content type, body.
async fn status_type_body(req: reqwest::RequestBuilder) -> (u16, Option<String>, String) {
    let r = req.send().await.expect("POST");
    let status = r.status().as_u16();
    let kind = r.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned());
    (status, kind, r.text().await.expect("body"))
}

/// The forge holds its answer to the next issue-list request until the gate returned opens.
fn hold_the_next_issue_list(forge: &FakeForge) -> fake_forge::Gate {
    let gate = fake_forge::Gate::new();
    forge.script(fake_forge::Script::once(
        Some("GET"),
        "/api/v1/repos/alice/demo/issues*",
        fake_forge::ScriptedResponse::json(200, &json!([])).held_until(&gate),
    ));
    gate
}

/// Drop `call`, the request of a client, once the forge has the issue-list request it makes,
/// then let the forge answer it.
async fn leave_once_the_forge_is_asked<T>(
    forge: &FakeForge,
    held: fake_forge::Gate,
    call: tokio::task::JoinHandle<T>,
) {
    support::wait_for("the call reached the forge", support::WAIT_LIMIT, async || {
        forge.requests().iter().any(|r| r.raw_path.starts_with("/api/v1/repos/alice/demo/issues"))
    })
    .await;
    call.abort();
    assert!(call.await.is_err_and(|e| e.is_cancelled()), "the client left before the answer");
    held.open();
}

/// Wait until the server has counted an `issueListIssues` call: it has finished (it is counted
/// once it has its answer, which may then have nowhere to go), and been recorded.
async fn await_issue_list_counted(server: &HttpServer) {
    let http = support::http::http_client();
    support::wait_for("the call whose client left finished", support::WAIT_LIMIT, async || {
        let metrics = http.get(server.url("/metrics")).send().await.unwrap().text().await.unwrap();
        metrics.lines().any(|l| l.starts_with("aegis_calls_total{") && l.contains("issueListIssues"))
    })
    .await;
}

/// The lines of a server's whole log but for its own words at start and on the way out: where
/// it listens, the catalog loaded, the forge's first answer (said when the first probe took
/// longer than the start waits for it), shutting down.
fn requests_lines(log: &str) -> Vec<&str> {
    const OWN: [&str; 4] =
        ["listening on", "catalog ready", "the forge has answered: ready", "shutting down"];
    log.lines().filter(|l| !OWN.iter().any(|own| l.contains(own))).collect()
}

/// Stop the server: everything it ever logged is its own words at start and on the way out,
/// among them the line that says where it listens.
async fn assert_logged_only_where_it_listens(server: &mut HttpServer) {
    let log = server.stop_and_log().await;
    assert!(log.contains(&format!("listening on {}", server.url("/mcp"))), "{log}");
    assert!(requests_lines(&log).is_empty(), "{log}");
}

/// A stateless call whose client leaves before the answer is not cut short: it finishes,
/// counted (and so recorded in the audit trail), and the server logs nothing about it.
#[tokio::test]
async fn a_stateless_call_whose_client_leaves_still_finishes() {
    let (forge, mut server) =
        Forge::gitea().repo("alice", "demo").spawn_http("http", &[("MCP_STATELESS", "true")]).await;
    let held = hold_the_next_issue_list(&forge);
    let http = support::http::http_client();
    let left = {
        let (http, url) = (http.clone(), server.url("/mcp"));
        tokio::spawn(async move {
            support::http::stateless_call(
                &http,
                &url,
                "issueListIssues",
                json!({"owner": "alice", "repo": "demo"}),
                None,
            )
            .await
        })
    };
    leave_once_the_forge_is_asked(&forge, held, left).await;
    await_issue_list_counted(&server).await;
    assert_logged_only_where_it_listens(&mut server).await;
}

/// A plain stateless `tools/call` is answered before the MCP library, by the same handler:
/// its answer is the library's to the byte (status, type, body) for a result, a tool error, an
/// unknown tool and invalid arguments, and the library never sees it (the server counts which
/// path answered each request); a request the short path does not take (a weighted `Accept`, a
/// name that does not match its header, `_meta` without capabilities) is the library's to
/// answer or refuse, as before.
#[tokio::test]
async fn plain_stateless_calls_are_answered_as_the_library_answers_them() {
    let forge = Forge::gitea().repo("alice", "demo").start().await;
    for mode in ["true", "false"] {
        let env = [("GITEA_TOKEN", ALICE_TOKEN), ("MCP_STATELESS", mode)];
        let server = HttpServer::in_process(&forge.base_url(), "http", &env).await;
        let http = support::http::http_client();
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}});
        let post = |params: Value, accept: &'static str, name: Option<&'static str>| {
            let tool = params["name"].as_str().unwrap_or_default().to_owned();
            let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
            let req = http
                .post(server.url("/mcp"))
                .header("content-type", "application/json")
                .header("accept", accept)
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", name.map(str::to_owned).unwrap_or(tool))
                .body(body.to_string());
            status_type_body(req)
        };
        let answered = async || (server.metric(DIRECT).await, server.metric(LIBRARY).await);
        let cases = [
            json!({"name": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}, "_meta": meta}),
            json!({"name": "repoGet", "arguments": {"owner": "alice", "repo": "absent"}, "_meta": meta}),
            json!({"name": "noSuchTool", "arguments": {}, "_meta": meta}),
            json!({"name": "repoGet", "arguments": {"owner": 5}, "_meta": meta}),
        ];
        for params in cases {
            let (direct, library) = answered().await;
            let short = post(params.clone(), support::http::ACCEPT_BOTH, None).await;
            assert_eq!(
                answered().await,
                (direct + 1.0, library),
                "MCP_STATELESS={mode}: the library saw {params}"
            );
            let by_library = post(params.clone(), "application/json;q=1, text/event-stream", None).await;
            assert_eq!(answered().await, (direct + 1.0, library + 1.0), "MCP_STATELESS={mode}: {params}");
            assert_eq!(short, by_library, "MCP_STATELESS={mode}: {params}");
        }
        // Not taken: the library refuses a name that does not match its header, and `_meta`
        // without the capabilities 2026-07-28 requires.
        let args = json!({"owner": "alice", "repo": "demo"});
        let library = server.metric(LIBRARY).await;
        let (status, _, body) = post(
            json!({"name": "repoGet", "arguments": args, "_meta": meta}),
            support::http::ACCEPT_BOTH,
            Some("issueGetIssue"),
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("does not match"), "{body}");
        let bare = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
        let (status, _, body) = post(
            json!({"name": "repoGet", "arguments": args, "_meta": bare}),
            support::http::ACCEPT_BOTH,
            None,
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("clientCapabilities"), "{body}");
        assert_eq!(server.metric(LIBRARY).await, library + 2.0, "the library answered both");
    }
}

/// `/metrics`' count of the requests answered without the MCP library, and by it.
const DIRECT: &str = r#"aegis_mcp_requests_total{path="direct"}"#;
const LIBRARY: &str = r#"aegis_mcp_requests_total{path="library"}"#;

/// Inside a session, a plain `tools/call` (the session's version in its header, no `_meta`, a
/// tool that never asks the person) is answered before the MCP library: its answer is the
/// library's to the byte for a result, a tool error, an unknown tool and invalid arguments
/// (the server counts which path answered each request). A call with `_meta`, or of a tool
/// that may ask for a confirmation, is still the library's; and once the session is closed,
/// no call finds it.
#[tokio::test]
async fn plain_calls_in_a_session_are_answered_as_the_library_answers_them() {
    let (forge, server) = Forge::gitea().repo("alice", "demo").serve_http("http", &[]).await;
    let client = support::http::StreamableClient::connect(&server.url(""), None).await.expect("a session");
    let session = client.session_id().expect("a session id").to_owned();
    let http = support::http::http_client();
    let post = |params: Value, accept: &'static str| {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
        let req = http
            .post(server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", accept)
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", support::http::PROTOCOL_VERSION)
            .body(body.to_string());
        status_type_body(req)
    };
    let answered = async || (server.metric(DIRECT).await, server.metric(LIBRARY).await);
    let cases = [
        json!({"name": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}}),
        json!({"name": "repoGet", "arguments": {"owner": "alice", "repo": "absent"}}),
        json!({"name": "noSuchTool", "arguments": {}}),
        json!({"name": "repoGet", "arguments": {"owner": 5}}),
    ];
    for params in &cases {
        let (direct, library) = answered().await;
        let short = post(params.clone(), support::http::ACCEPT_BOTH).await;
        assert_eq!(answered().await, (direct + 1.0, library), "the short path did not take {params}");
        assert_eq!(short.0, 200, "{short:?}");
        let by_library = post(params.clone(), "application/json;q=1, text/event-stream").await;
        assert_eq!(answered().await, (direct + 1.0, library + 1.0), "the short path took a weighted Accept");
        assert_eq!(short, by_library, "{params}");
    }
    // Not taken: `_meta` (a progress token), and a tool that may ask the person first.
    for params in [
        json!({"name": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}, "_meta": {"progressToken": 1}}),
        json!({"name": "repoDelete", "arguments": {"owner": "alice", "repo": "demo"}}),
    ] {
        let (direct, library) = answered().await;
        let (status, _, body) = post(params.clone(), support::http::ACCEPT_BOTH).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains(r#""id":7"#), "{body}");
        assert_eq!(answered().await, (direct, library + 1.0), "the library serves {params}");
    }
    assert!(forge.requests().iter().all(|r| r.method != "DELETE"), "the repository was not deleted unasked");
    // Closed, the session answers nothing, on either path.
    let closed = http
        .delete(server.url("/mcp"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", support::http::PROTOCOL_VERSION)
        .send()
        .await
        .expect("DELETE");
    assert_eq!(closed.status(), 200);
    let (status, _, body) = post(cases[0].clone(), support::http::ACCEPT_BOTH).await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test]
async fn sessions_are_opened_without_the_library_until_a_request_needs_it() {
    let (forge, server) = Forge::gitea().repo("alice", "demo").serve_http("http", &[]).await;
    let http = support::http::http_client();
    const WEIGHTED: &str = "application/json;q=1, text/event-stream";
    let post = |session: Option<&str>, accept: &'static str, body: Value| {
        let mut req = http
            .post(server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", accept)
            .body(body.to_string());
        if let Some(s) = session {
            req = req
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", support::http::PROTOCOL_VERSION);
        }
        req
    };
    let built = async || server.metric("aegis_library_sessions_total").await;
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": support::http::PROTOCOL_VERSION, "capabilities": {"elicitation": {}},
        "clientInfo": support::http::test_client_info()}});
    let open = |accept: &'static str| {
        let req = post(None, accept, initialize.clone());
        async move {
            let r = req.send().await.expect("initialize");
            let mut names: Vec<String> = r
                .headers()
                .keys()
                .map(|k| k.as_str().to_owned())
                .filter(|k| k != "date" && k != "content-length")
                .collect();
            names.sort();
            let session =
                r.headers().get("mcp-session-id").expect("a session id").to_str().unwrap().to_owned();
            let kind = r.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned());
            (session, (r.status().as_u16(), kind, names, r.text().await.expect("body")))
        }
    };
    // The handshake, answered here and by the library, byte for byte the same.
    let (here, here_answer) = open(support::http::ACCEPT_BOTH).await;
    assert_eq!((server.metric(DIRECT).await, server.metric(LIBRARY).await), (1.0, 0.0), "answered here");
    let (library, library_answer) = open(WEIGHTED).await;
    assert_eq!((server.metric(DIRECT).await, server.metric(LIBRARY).await), (1.0, 1.0), "by the library");
    assert_eq!(here_answer, library_answer);
    assert_eq!(here_answer.0, 200);
    assert_ne!(here, library);
    assert_eq!(here.len(), library.len(), "{here} {library}");
    // `notifications/initialized`: here, and by the library's session.
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let a = status_type_body(post(Some(&here), support::http::ACCEPT_BOTH, initialized.clone())).await;
    let b = status_type_body(post(Some(&library), WEIGHTED, initialized.clone())).await;
    assert_eq!(a, b);
    assert_eq!(a.0, 202, "{a:?}");
    // Plain calls need no library session.
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}}});
    for _ in 0..3 {
        let (status, _, body) =
            status_type_body(post(Some(&here), support::http::ACCEPT_BOTH, call.clone())).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains(r#""name":"demo""#), "{body}");
    }
    assert_eq!(built().await, 0.0, "no library session yet");
    // The first request that needs one builds it, once, told the same handshake: the same
    // tools, and the client's capabilities as it declared them (a tool that asks the person
    // asks it, on the call's own stream).
    let list = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"});
    let a = status_type_body(post(Some(&here), support::http::ACCEPT_BOTH, list.clone())).await;
    let b = status_type_body(post(Some(&library), support::http::ACCEPT_BOTH, list.clone())).await;
    assert_eq!(a, b);
    assert_eq!(a.0, 200);
    let delete = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "repoDelete", "arguments": {"owner": "alice", "repo": "demo"}}});
    let mut r = post(Some(&here), support::http::ACCEPT_BOTH, delete).send().await.expect("repoDelete");
    let first = tokio::time::timeout(support::WAIT_LIMIT, async {
        let mut seen = String::new();
        while let Ok(Some(chunk)) = r.chunk().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("elicitation/create") {
                break;
            }
        }
        seen
    })
    .await
    .expect("the question in time");
    assert!(first.contains("elicitation/create"), "{first}");
    drop(r);
    let a = status_type_body(post(Some(&here), support::http::ACCEPT_BOTH, list.clone())).await;
    assert_eq!(a, b);
    assert_eq!(built().await, 1.0, "built once");
    // First requests side by side, as clients send them (the standalone stream and a request):
    // one library session, built before either reaches it.
    for _ in 0..5 {
        let (fresh, _) = open(support::http::ACCEPT_BOTH).await;
        let stream = http
            .get(server.url("/mcp"))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &fresh)
            .header("mcp-protocol-version", support::http::PROTOCOL_VERSION)
            .send();
        let listed = status_type_body(post(Some(&fresh), support::http::ACCEPT_BOTH, list.clone()));
        let (stream, (status, _, body)) = tokio::join!(stream, listed);
        let stream = stream.expect("GET");
        assert_eq!(stream.status(), 200);
        assert!(body.contains(r#""tools":["#), "{status} {body}");
        drop(stream);
    }
    assert_eq!(built().await, 6.0, "built once for each");
    // A session closed before it needed one leaves nothing behind.
    let (unused, _) = open(support::http::ACCEPT_BOTH).await;
    for s in [&here, &unused] {
        let closed = http
            .delete(server.url("/mcp"))
            .header("mcp-session-id", s.as_str())
            .header("mcp-protocol-version", support::http::PROTOCOL_VERSION)
            .send()
            .await
            .expect("DELETE");
        assert_eq!(closed.status(), 200);
        for body in [&call, &list] {
            let (status, _, answer) =
                status_type_body(post(Some(s), support::http::ACCEPT_BOTH, body.clone())).await;
            assert_eq!(status, 404, "{answer}");
        }
    }
    assert_eq!(built().await, 6.0);
    assert!(forge.requests().iter().all(|r| r.method != "DELETE"), "the repository was not deleted unasked");
}
