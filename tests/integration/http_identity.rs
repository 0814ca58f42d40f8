//! Per-request identities over both HTTP transports (the server's stateless-auth rules:
//! README, "Many users over HTTP"): every scenario of the spec, checked where it matters, at the fake forge — which
//! token did each outbound request carry, and which one never arrived.
//!
//! Scenarios that apply to both transports are written once and run as `<scenario>::http`
//! (Streamable HTTP at `/mcp`) and `<scenario>::sse` (legacy HTTP+SSE at `/sse` + `/message`).
//! The server runs with the global token of `alice`; `bob` and `carol` call with their own.
//! A session belongs to the identity that opened it, so each caller calls through a session
//! of its own (`Pool`); a request whose identity cannot be established is refused when it
//! opens a session (HTTP status), and as a tool result when it has none (Streamable HTTP).

use crate::support;

#[path = "http_identity/oauth.rs"]
mod oauth;

#[path = "http_identity/oauth_profiles.rs"]
mod oauth_profiles;

#[path = "http_identity/deployment.rs"]
mod deployment;

#[path = "http_identity/audit.rs"]
mod audit;
#[path = "http_identity/limits.rs"]
mod limits;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use fake_forge::{FakeForge, Recorded, Script, ScriptBody, ScriptedResponse};
use serde_json::{Value, json};
use support::http::{ACCEPT_BOTH, HttpServer, McpClient, http_client, stateless_call, tool_result};
use support::{ALICE_TOKEN, Called, Forge, Harness, Setup};

const BOB_TOKEN: &str = "tok-bob-5c0ffee5b0b";
const CAROL_TOKEN: &str = "tok-carol-7dead0beef";
/// A token the forge does not know.
const REFUSED_TOKEN: &str = "tok-nobody-9e8d7c6b5a";
/// The shared secret of `MCP_BEARER_TOKEN`.
const SHARED_SECRET: &str = "mcp-shared-secret-4242";

fn token(t: &str) -> String {
    format!("token {t}")
}

/// A fake forge knowing alice, bob and carol, with the repository `alice/demo`; its server
/// runs in this process (`serve_http`), since these scenarios are about what each request
/// gets, unless a scenario reads the server's log (`spawn_http`).
fn forge() -> Forge {
    Forge::gitea().user(BOB_TOKEN, "bob").user(CAROL_TOKEN, "carol").repo("alice", "demo")
}

fn is_lookup(r: &Recorded) -> bool {
    r.raw_path == "/api/v1/user" || r.raw_path == "/api/v1/version"
}

/// The requests a tool made (not the server's own identity lookups).
fn tool_requests(recorded: &[Recorded]) -> Vec<&Recorded> {
    recorded.iter().filter(|r| !is_lookup(r)).collect()
}

/// Every recorded request whose `Authorization` header contains `secret`.
fn carrying<'a>(recorded: &'a [Recorded], secret: &str) -> Vec<&'a Recorded> {
    recorded.iter().filter(|r| r.header("authorization").is_some_and(|h| h.contains(secret))).collect()
}

fn describe(recorded: &[Recorded]) -> String {
    recorded
        .iter()
        .map(|r| format!("{} {} [{}]", r.method, r.raw_path, r.header("authorization").unwrap_or("-")))
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// `repoGet alice/demo` with `auth`; the result and everything the forge received for it.
async fn repo_get(c: &McpClient, forge: &FakeForge, auth: Option<&str>) -> (Called, Vec<Recorded>) {
    forge.clear_requests();
    let r = c.call_ok("repoGet", json!({"owner": "alice", "repo": "demo"}), auth).await;
    (r, forge.requests())
}

/// The call succeeded as `login`, and every request the forge received for it — the tool's
/// and any login lookup — carried exactly `token <secret>`.
fn assert_ran_as(c: &Called, sent: &[Recorded], secret: &str, login: &str) {
    assert!(!c.is_error, "expected success as {login}, got {}", c.text);
    assert_eq!(c.json["identity"], json!({"login": login, "mode": "token", "sudo": null}), "{}", c.text);
    let tool = tool_requests(sent);
    assert_eq!(tool.len(), 1, "one tool request:\n  {}", describe(sent));
    assert_eq!(tool[0].operation_id.as_deref(), Some("repoGet"));
    let expected = token(secret);
    for r in sent {
        assert_eq!(
            r.header("authorization"),
            Some(expected.as_str()),
            "{} {} must carry {login}'s token; the forge received:\n  {}",
            r.method,
            r.raw_path,
            describe(sent)
        );
    }
}

fn assert_never_sent(forge: &FakeForge, secret: &str, what: &str) {
    let all = forge.requests();
    let leaked = carrying(&all, secret);
    assert!(leaked.is_empty(), "{what} reached the forge:\n  {}", describe(&all));
}

/// The request that opens a session, with extra headers: `POST /mcp` initialize, or
/// `GET /sse`. Returns the raw response (an SSE stream stays open until dropped).
async fn open_raw(server: &HttpServer, headers: &[(&str, &str)]) -> reqwest::Response {
    let http = http_client();
    let mut req = match server.transport.as_str() {
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
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

/// One session per `Authorization` value, opened on first use: a session belongs to the
/// identity that opened it, so each caller calls through a session of its own.
struct Pool<'a> {
    server: &'a HttpServer,
    clients: Vec<(Option<String>, McpClient)>,
}

impl<'a> Pool<'a> {
    fn new(server: &'a HttpServer) -> Pool<'a> {
        Pool { server, clients: Vec::new() }
    }

    /// The session of `auth`, opened with `auth` when it is the first call.
    async fn client(&mut self, auth: Option<&str>) -> Result<&McpClient, support::http::HttpError> {
        let key = auth.map(str::to_owned);
        if let Some(i) = self.clients.iter().position(|(k, _)| *k == key) {
            return Ok(&self.clients[i].1);
        }
        let c = self.server.connect(auth).await?;
        self.clients.push((key, c));
        Ok(&self.clients.last().unwrap().1)
    }

    /// `repoGet alice/demo` as `auth` in its own session; the result and what the forge got.
    async fn repo_get(&mut self, forge: &FakeForge, auth: Option<&str>) -> (Called, Vec<Recorded>) {
        forge.clear_requests();
        let c = self.client(auth).await.unwrap_or_else(|e| panic!("a session as {auth:?}: {e:?}"));
        repo_get(c, forge, auth).await
    }
}

/// The answer a caller gets for a request its identity cannot be established for: over a
/// session, the HTTP refusal of the request that opens it (`status`); without a session
/// (Streamable HTTP, protocol 2026-07-28), a tool result of `kind`. Either way the forge
/// received no tool request and nothing under the global token, and no text holds `secret`.
async fn assert_refused_without_downgrade(
    server: &HttpServer,
    forge: &FakeForge,
    auth: &str,
    status: u16,
    kind: &str,
    secret: &str,
) {
    assert_refused_saying(server, forge, auth, (status, kind), secret, "").await
}

/// [`assert_refused_without_downgrade`], each refusal saying `says`.
async fn assert_refused_saying(
    server: &HttpServer,
    forge: &FakeForge,
    auth: &str,
    (status, kind): (u16, &str),
    secret: &str,
    says: &str,
) {
    forge.clear_requests();
    match server.connect(Some(auth)).await {
        Err((got, body)) => {
            assert_eq!(got, status, "opening a session as {auth:?}: {body}");
            assert!(!body.contains(secret), "{body}");
            assert!(body.contains(says), "{body}");
        }
        Ok(_) => panic!("a session opened for {auth:?}, whose identity cannot be established"),
    }
    if server.transport == "http" {
        let args = json!({"owner": "alice", "repo": "demo"});
        let resp = stateless_call(&http_client(), &server.base, "repoGet", args, Some(auth)).await.unwrap();
        let r = tool_result(&resp);
        assert!(r.is_error, "{}", r.text);
        assert_eq!(r.kind(), kind, "{}", r.text);
        assert!(!r.text.contains(secret), "{}", r.text);
        assert!(r.text.contains(says), "{}", r.text);
    }
    let sent = forge.requests();
    assert!(tool_requests(&sent).is_empty(), "no tool request may be sent:\n  {}", describe(&sent));
    assert!(carrying(&sent, ALICE_TOKEN).is_empty(), "no global-token request:\n  {}", describe(&sent));
}

// ---------------------------------------------------------------------------------------
// Sudo is judged for each request's own identity.

on_both_transports!(sudo_is_judged_for_each_requests_own_identity);

/// With `SUDO_ALLOWED_USERS`, whether a call may act as another user depends on who makes
/// it: bob (a site administrator, with his own token) may; carol (not one) and the server's
/// own identity (alice, not one) may not, and nothing is sent for their calls.
async fn sudo_is_judged_for_each_requests_own_identity(t: &str) {
    let (forge, server) = forge().admin("bob").serve_http(t, &[("SUDO_ALLOWED_USERS", "carol")]).await;
    let mut pool = Pool::new(&server);
    let args = json!({"sudo": "carol"});
    let bob = token(BOB_TOKEN);
    for _ in 0..2 {
        forge.clear_requests();
        let c =
            pool.client(Some(&bob)).await.unwrap().call_ok("userGetCurrent", args.clone(), Some(&bob)).await;
        assert!(!c.is_error, "{}", c.text);
        assert_eq!(
            c.json["identity"],
            json!({"login": "bob", "mode": "token", "sudo": "carol"}),
            "{}",
            c.text
        );
        assert_eq!(c.json["data"]["login"], "carol");
        let sent = forge.requests();
        let acting: Vec<&Recorded> = sent.iter().filter(|r| r.header("sudo").is_some()).collect();
        assert_eq!(acting.len(), 1, "{}", describe(&sent));
        assert_eq!(acting[0].header("sudo"), Some("carol"));
        assert_eq!(acting[0].header("authorization"), Some(bob.as_str()));
    }
    let carol = token(CAROL_TOKEN);
    for (auth, who) in [(Some(carol.as_str()), "carol"), (None, "alice")] {
        forge.clear_requests();
        let c = pool
            .client(auth)
            .await
            .unwrap()
            .call_ok("repoGet", json!({"owner": "alice", "repo": "demo", "sudo": "carol"}), auth)
            .await;
        assert_eq!(c.json["error"]["kind"], "denied", "{who}: {}", c.text);
        let message = c.json["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("the caller ({who}) is not a site administrator")), "{message}");
        let sent = forge.requests();
        assert!(
            tool_requests(&sent).is_empty() && sent.iter().all(|r| r.header("sudo").is_none()),
            "{}",
            describe(&sent)
        );
    }
}

// ---------------------------------------------------------------------------------------
// Requirement: HTTP / SSE transport extracts the per-request token from Authorization.

on_both_transports!(
    request_with_token_scheme_injects_the_token,
    request_with_bearer_scheme_injects_the_token,
    scheme_matching_is_case_insensitive,
    absent_header_falls_through_to_global_client,
    bare_token_is_rejected_and_falls_through_to_global_client,
    with_mcp_bearer_token_absent_header_is_401_and_shared_secret_is_global,
    a_session_belongs_to_the_identity_that_opened_it,
    per_request_client_is_distinct_from_the_global_singleton,
    ephemeral_construction_failure_5xx_surfaces_identity_failed_without_downgrade,
    ephemeral_construction_timeout_surfaces_identity_failed_without_downgrade,
    ephemeral_construction_network_error_surfaces_identity_failed,
    unknown_token_is_unauthorized_without_downgrade,
    token_absent_from_logs_and_error_text,
    attachment_upload_and_download_use_per_request_token,
    body_over_max_body_bytes_is_413,
    concurrent_calls_over_50_tokens_never_cross_identities,
);

async fn request_with_token_scheme_injects_the_token(t: &str) {
    runs_as_bob_with(t, "token").await;
}

/// Also the spec's "SSE request with `Bearer` scheme injects the token" (`::sse`).
async fn request_with_bearer_scheme_injects_the_token(t: &str) {
    runs_as_bob_with(t, "Bearer").await;
}

/// A session opened and called with `<scheme> <bob's token>` runs as bob: the server sends
/// the forge's own `token` scheme for an access token, whatever the client used.
async fn runs_as_bob_with(t: &str, scheme: &str) {
    let (forge, server) = forge().serve_http(t, &[]).await;
    let auth = format!("{scheme} {BOB_TOKEN}");
    let c = server.connect(Some(&auth)).await.unwrap();
    let (r, sent) = repo_get(&c, &forge, Some(&auth)).await;
    assert_ran_as(&r, &sent, BOB_TOKEN, "bob");
    assert_never_sent(&forge, ALICE_TOKEN, "the global token");
}

async fn scheme_matching_is_case_insensitive(t: &str) {
    let (forge, server) = forge().serve_http(t, &[]).await;
    let mut pool = Pool::new(&server);
    for (auth, secret, login) in [
        (format!("bearer {BOB_TOKEN}"), BOB_TOKEN, "bob"),
        (format!("TOKEN {CAROL_TOKEN}"), CAROL_TOKEN, "carol"),
        (format!("BeArEr {CAROL_TOKEN}"), CAROL_TOKEN, "carol"),
        (format!("ToKeN {BOB_TOKEN}"), BOB_TOKEN, "bob"),
    ] {
        let (r, sent) = pool.repo_get(&forge, Some(&auth)).await;
        assert_ran_as(&r, &sent, secret, login);
    }
    assert_never_sent(&forge, ALICE_TOKEN, "the global token");
}

async fn absent_header_falls_through_to_global_client(t: &str) {
    let (forge, server) = forge().serve_http(t, &[]).await;
    let c = server.connect(None).await.unwrap();
    let (r, sent) = repo_get(&c, &forge, None).await;
    assert_ran_as(&r, &sent, ALICE_TOKEN, "alice");
}

async fn bare_token_is_rejected_and_falls_through_to_global_client(t: &str) {
    let (forge, server) = forge().serve_http(t, &[]).await;
    let mut pool = Pool::new(&server);
    let basic = "Basic Ym9iOnB3"; // bob:pw
    for auth in [BOB_TOKEN, "", "   ", "Bearer", "token ", basic, &format!("Basic {BOB_TOKEN}")] {
        let (r, sent) = pool.repo_get(&forge, Some(auth)).await;
        assert_ran_as(&r, &sent, ALICE_TOKEN, "alice");
    }
    assert_never_sent(&forge, BOB_TOKEN, "a token sent without a recognised scheme");
    assert_never_sent(&forge, "Ym9iOnB3", "an unrecognised scheme's credential");
}

async fn with_mcp_bearer_token_absent_header_is_401_and_shared_secret_is_global(t: &str) {
    let (forge, server) = forge().serve_http(t, &[("MCP_BEARER_TOKEN", SHARED_SECRET)]).await;
    // Opening a session without a usable header: 401 with a challenge.
    for headers in [vec![], vec![("authorization", SHARED_SECRET)], vec![("authorization", "Basic eDp5")]] {
        let resp = open_raw(&server, &headers).await;
        assert_eq!(resp.status().as_u16(), 401, "{headers:?}");
        let challenge = resp.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned());
        let challenge = challenge.unwrap_or_else(|| panic!("401 without WWW-Authenticate ({headers:?})"));
        assert!(challenge.to_ascii_lowercase().starts_with("bearer"), "{challenge}");
    }
    let shared = format!("Bearer {SHARED_SECRET}");
    let c = server.connect(Some(&shared)).await.unwrap();
    // The shared secret is the server's global identity, and never goes to the forge.
    let (r, sent) = repo_get(&c, &forge, Some(&shared)).await;
    assert_ran_as(&r, &sent, ALICE_TOKEN, "alice");
    let (r, sent) = repo_get(&c, &forge, Some(&format!("token {SHARED_SECRET}"))).await;
    assert_ran_as(&r, &sent, ALICE_TOKEN, "alice");
    // A caller's own token still runs as that caller, in a session of its own.
    let (r, sent) = Pool::new(&server).repo_get(&forge, Some(&token(BOB_TOKEN))).await;
    assert_ran_as(&r, &sent, BOB_TOKEN, "bob");
    // Every request is checked, not only the one that opened the session.
    forge.clear_requests();
    let refused = c.call("repoGet", json!({"owner": "alice", "repo": "demo"}), None).await;
    match refused {
        Err((401, body)) => assert!(body.contains("Authorization"), "{body}"),
        other => panic!("a call without a header in an authenticated session must be 401: {other:?}"),
    }
    assert!(forge.requests().is_empty(), "nothing reached the forge:\n  {}", describe(&forge.requests()));
    assert_never_sent(&forge, SHARED_SECRET, "the MCP_BEARER_TOKEN");
}

on_both_transports!(recognised_scheme_with_malformed_token_never_runs_as_global);

/// The spec treats only an absent or empty header, a bare value and an unknown scheme as "no
/// header". A header that names a recognised scheme carries a credential: if it is unusable
/// the request must fail, not silently run as the server's own identity (a caller who pasted a
/// token with a stray space would otherwise act as the global token's owner unawares).
async fn recognised_scheme_with_malformed_token_never_runs_as_global(t: &str) {
    let (forge, server) = forge().serve_http(t, &[]).await;
    for auth in [format!("token {BOB_TOKEN} {CAROL_TOKEN}"), format!("Bearer {BOB_TOKEN} x")] {
        assert_refused_without_downgrade(&server, &forge, &auth, 401, "unauthorized", BOB_TOKEN).await;
    }
}

/// Each request runs under its own header's identity, and a session belongs to the identity
/// that opened it: the same identity may present another spelling of its credential, any
/// other identity is told the session does not exist (so a leaked session id is useless).
async fn a_session_belongs_to_the_identity_that_opened_it(t: &str) {
    let (forge, server) = forge().serve_http(t, &[]).await;
    // Opened by carol: each of carol's requests stands on its own header, whichever scheme.
    let carols = server.connect(Some(&token(CAROL_TOKEN))).await.unwrap();
    for auth in [format!("Bearer {CAROL_TOKEN}"), token(CAROL_TOKEN)] {
        let (r, sent) = repo_get(&carols, &forge, Some(&auth)).await;
        assert_ran_as(&r, &sent, CAROL_TOKEN, "carol");
    }
    // Another identity holding carol's session id — bob, or the global identity — is told the
    // session does not exist, and nothing runs.
    for auth in [Some(token(BOB_TOKEN)), None] {
        forge.clear_requests();
        match carols.call("repoGet", json!({"owner": "alice", "repo": "demo"}), auth.as_deref()).await {
            Err((404, body)) => assert!(body.contains("unknown or closed session"), "{body}"),
            other => panic!("{auth:?} on carol's session must get 404: {other:?}"),
        }
        assert!(tool_requests(&forge.requests()).is_empty(), "{}", describe(&forge.requests()));
    }
    // Each identity runs as itself in its own session.
    let mut pool = Pool::new(&server);
    for (auth, secret, login) in [
        (Some(token(BOB_TOKEN)), BOB_TOKEN, "bob"),
        (None, ALICE_TOKEN, "alice"),
        (Some(token(BOB_TOKEN)), BOB_TOKEN, "bob"),
    ] {
        let (r, sent) = pool.repo_get(&forge, auth.as_deref()).await;
        assert_ran_as(&r, &sent, secret, login);
    }
    // Carol's session is untouched.
    let (r, sent) = repo_get(&carols, &forge, Some(&token(CAROL_TOKEN))).await;
    assert_ran_as(&r, &sent, CAROL_TOKEN, "carol");
}

/// "Context with token returns ephemeral client" / "Context without token returns singleton":
/// with the global client warmed up, a per-request call still never carries the global token;
/// the global identity is resolved once and reused.
async fn per_request_client_is_distinct_from_the_global_singleton(t: &str) {
    let (forge, server) = forge().serve_http(t, &[]).await;
    let mut pool = Pool::new(&server);
    pool.client(None).await.unwrap();
    pool.client(Some(&token(BOB_TOKEN))).await.unwrap();
    forge.clear_requests();
    let mut all = Vec::new();
    for round in 0..3 {
        let (r, sent) = pool.repo_get(&forge, None).await;
        assert_ran_as(&r, &sent, ALICE_TOKEN, "alice");
        all.extend(sent);
        let (r, sent) = pool.repo_get(&forge, Some(&token(BOB_TOKEN))).await;
        assert_ran_as(&r, &sent, BOB_TOKEN, "bob");
        assert!(carrying(&sent, ALICE_TOKEN).is_empty(), "round {round}");
        all.extend(sent);
    }
    let global_lookups = all
        .iter()
        .filter(|r| r.raw_path == "/api/v1/user" && carrying(std::slice::from_ref(r), ALICE_TOKEN).len() == 1)
        .count();
    assert!(global_lookups <= 1, "the global identity is resolved once:\n  {}", describe(&all));
}

/// The forge's `/api/v1/user` fails: the request fails (a session is not opened: 503; a call
/// without a session: `identity_failed`), and nothing is sent under the global token, not even
/// the tool request.
async fn ephemeral_construction_failure_5xx_surfaces_identity_failed_without_downgrade(t: &str) {
    let (forge, server) = forge().serve_http(t, &[]).await;
    let mut pool = Pool::new(&server);
    // Warm the global identity first: a fallback would have it at hand.
    let (r, _) = pool.repo_get(&forge, None).await;
    assert!(!r.is_error, "{}", r.text);
    forge.script(Script::always(
        None,
        "/api/v1/user",
        ScriptedResponse::json(500, &json!({"message": "boom"})),
    ));
    assert_refused_without_downgrade(&server, &forge, &token(BOB_TOKEN), 503, "identity_failed", BOB_TOKEN)
        .await;
    // bob's token was used for the lookup only, and the global session cannot be borrowed.
    forge.clear_requests();
    match pool
        .client(None)
        .await
        .unwrap()
        .call("repoGet", json!({"owner": "alice", "repo": "demo"}), Some(&token(BOB_TOKEN)))
        .await
    {
        Err((503, body)) => assert!(!body.contains(BOB_TOKEN), "{body}"),
        other => panic!("bob on the global session while the forge fails: {other:?}"),
    }
    let sent = forge.requests();
    assert!(
        !carrying(&sent, BOB_TOKEN).is_empty(),
        "the login lookup used bob's token:\n  {}",
        describe(&sent)
    );
    assert!(
        tool_requests(&sent).is_empty() && carrying(&sent, ALICE_TOKEN).is_empty(),
        "{}",
        describe(&sent)
    );
    // The failure is not remembered: once the forge recovers, bob's call runs as bob.
    forge.clear_scripts();
    let (r, sent) = pool.repo_get(&forge, Some(&token(BOB_TOKEN))).await;
    assert_ran_as(&r, &sent, BOB_TOKEN, "bob");
}

/// A lookup the forge never answers ends after GITEA_TIMEOUT (here 1 s, a tenth of the
/// lookups' own bound), as the refusals say.
async fn ephemeral_construction_timeout_surfaces_identity_failed_without_downgrade(t: &str) {
    let (forge, server) = forge().serve_http(t, &[("GITEA_TIMEOUT", "1")]).await;
    let (r, _) = Pool::new(&server).repo_get(&forge, None).await;
    assert!(!r.is_error, "{}", r.text);
    forge.script(Script::always(
        None,
        "/api/v1/user",
        ScriptedResponse::status(200).with_body(ScriptBody::Hang),
    ));
    let (auth, refused) = (token(CAROL_TOKEN), (503, "identity_failed"));
    assert_refused_saying(&server, &forge, &auth, refused, CAROL_TOKEN, "did not answer within 1s").await;
}

async fn ephemeral_construction_network_error_surfaces_identity_failed(t: &str) {
    // A forge that is not there: connection refused.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let server =
        HttpServer::in_process_before_ready(&format!("http://{gone}"), t, &[("GITEA_TOKEN", ALICE_TOKEN)])
            .await;
    match server.connect(Some(&token(BOB_TOKEN))).await {
        Err((503, body)) => assert!(!body.contains(BOB_TOKEN), "{body}"),
        other => panic!("a session as bob with the forge gone: {:?}", other.err()),
    }
    if t == "http" {
        let args = json!({"owner": "alice", "repo": "demo"});
        let auth = token(BOB_TOKEN);
        let resp = stateless_call(&http_client(), &server.base, "repoGet", args, Some(&auth)).await.unwrap();
        let r = tool_result(&resp);
        assert!(r.is_error, "{}", r.text);
        assert_eq!(r.kind(), "identity_failed", "{}", r.text);
        assert_eq!(r.json["error"]["status"], Value::Null, "the forge was not reached: {}", r.text);
        assert!(!r.text.contains(BOB_TOKEN), "{}", r.text);
    }
}

async fn unknown_token_is_unauthorized_without_downgrade(t: &str) {
    let (forge, server) = forge().serve_http(t, &[]).await;
    let (r, _) = Pool::new(&server).repo_get(&forge, None).await;
    assert!(!r.is_error, "{}", r.text);
    assert_refused_without_downgrade(
        &server,
        &forge,
        &token(REFUSED_TOKEN),
        401,
        "unauthorized",
        REFUSED_TOKEN,
    )
    .await;
    if t == "http" {
        let args = json!({"owner": "alice", "repo": "demo"});
        let auth = token(REFUSED_TOKEN);
        let resp = stateless_call(&http_client(), &server.base, "repoGet", args, Some(&auth)).await.unwrap();
        assert_eq!(tool_result(&resp).json["error"]["status"], 401);
    }
}

async fn token_absent_from_logs_and_error_text(t: &str) {
    let (forge, mut server) = forge().spawn_http(t, &[("LOG_LEVEL", "trace")]).await;
    let mut pool = Pool::new(&server);
    let http = http_client();
    // Every answer a caller gets — a result, or the HTTP refusal of its request — as text;
    // over Streamable HTTP also the answer without a session.
    let mut texts: Vec<String> = Vec::new();
    let demo = json!({"owner": "alice", "repo": "demo"});
    let missing = json!({"owner": "alice", "repo": "missing"});
    let mut run = async |auth: Option<String>, args: &Value| -> String {
        let auth = auth.as_deref();
        let answer = match pool.client(auth).await {
            Err((status, body)) => format!("HTTP {status}: {body}"),
            Ok(c) => match c.call("repoGet", args.clone(), auth).await {
                Ok(resp) => tool_result(&resp).text,
                Err((status, body)) => format!("HTTP {status}: {body}"),
            },
        };
        texts.push(answer.clone());
        if t == "http" {
            let resp = stateless_call(&http, &server.base, "repoGet", args.clone(), auth).await.unwrap();
            texts.push(tool_result(&resp).text);
        }
        answer
    };
    assert!(run(Some(token(BOB_TOKEN)), &demo).await.contains("\"login\":\"bob\""));
    assert!(run(Some(format!("Bearer {BOB_TOKEN}")), &demo).await.contains("\"login\":\"bob\""));
    assert!(run(Some(token(BOB_TOKEN)), &missing).await.contains("not_found"));
    assert!(run(None, &demo).await.contains("\"login\":\"alice\""));
    assert!(run(Some(token(REFUSED_TOKEN)), &demo).await.starts_with("HTTP 401"));
    forge.script(Script::always(
        None,
        "/api/v1/user",
        ScriptedResponse::json(500, &json!({"message": "boom"})),
    ));
    assert!(run(Some(token(CAROL_TOKEN)), &demo).await.starts_with("HTTP 503"));
    // The refused token once more: refused again without asking the forge (whose lookups
    // now fail), as it was refused moments ago.
    assert!(run(Some(token(REFUSED_TOKEN)), &demo).await.starts_with("HTTP 401"));
    // Everything the server ever logged: it has exited.
    let log = server.stop_and_log().await;
    assert!(log.contains("tools/call"), "trace logging is on and covers calls:\n{log}");
    assert!(texts.len() >= 7);
    for (name, secret) in [
        ("bob's", BOB_TOKEN),
        ("carol's", CAROL_TOKEN),
        ("the refused", REFUSED_TOKEN),
        ("the global", ALICE_TOKEN),
    ] {
        for text in &texts {
            assert!(!text.contains(secret), "{name} token in a result: {text}");
        }
        if let Some(at) = log.find(secret) {
            let from = log[..at].rfind('\n').map_or(0, |i| i + 1);
            let line = log[from..].lines().next().unwrap_or("");
            panic!("{name} token appears in the server log (LOG_LEVEL=trace):\n{line}");
        }
    }
}

/// The spec's "Attachment upload uses per-request token", plus the binary download paths
/// (attachment bytes, raw file).
async fn attachment_upload_and_download_use_per_request_token(t: &str) {
    let (forge, server) = forge().serve_http(t, &[]).await;
    let c = server.connect(None).await.unwrap();
    let issue = c
        .call_ok("issueCreateIssue", json!({"owner": "alice", "repo": "demo", "body": {"title": "t"}}), None)
        .await;
    assert!(!issue.is_error, "{}", issue.text);
    let bob = token(BOB_TOKEN);
    let c = server.connect(Some(&bob)).await.unwrap();
    forge.clear_requests();
    let up = c
        .call_ok(
            "issueCreateIssueAttachment",
            json!({"owner": "alice", "repo": "demo", "index": 1,
                   "attachment": {"content_base64": "AAEC/w==", "filename": "bin.dat"}}),
            Some(&bob),
        )
        .await;
    assert!(!up.is_error, "{}", up.text);
    assert_eq!(up.json["identity"]["login"], "bob", "{}", up.text);
    let sent = forge.requests();
    let post = tool_requests(&sent);
    assert_eq!(post.len(), 1, "{}", describe(&sent));
    assert_eq!(post[0].operation_id.as_deref(), Some("issueCreateIssueAttachment"));
    assert!(post[0].header("content-type").unwrap_or("").starts_with("multipart/form-data"));
    assert_eq!(post[0].header("authorization"), Some(bob.as_str()), "the multipart POST carries bob's token");
    assert!(carrying(&sent, ALICE_TOKEN).is_empty(), "{}", describe(&sent));

    let uuid = up.json["data"]["uuid"].as_str().unwrap().to_owned();
    forge.clear_requests();
    let down = c.call_ok("gitea_download_attachment", json!({"uuid": uuid}), Some(&bob)).await;
    assert!(!down.is_error, "{}", down.text);
    assert_eq!(down.json["data"]["content_base64"], "AAEC/w==", "{}", down.text);
    assert_eq!(down.json["identity"]["login"], "bob", "{}", down.text);
    let sent = forge.requests();
    let get = tool_requests(&sent);
    assert_eq!(get.len(), 1, "{}", describe(&sent));
    assert_eq!(get[0].raw_path, format!("/attachments/{uuid}"));
    assert_eq!(get[0].header("authorization"), Some(bob.as_str()), "the download carries bob's token");

    forge.clear_requests();
    let raw = c
        .call_ok(
            "repoGetRawFile",
            json!({"owner": "alice", "repo": "demo", "filepath": "README.md"}),
            Some(&bob),
        )
        .await;
    let sent = forge.requests();
    let get = tool_requests(&sent);
    assert_eq!(get.len(), 1, "{} / {}", raw.text, describe(&sent));
    assert_eq!(
        get[0].header("authorization"),
        Some(bob.as_str()),
        "the raw file download carries bob's token"
    );
    assert_never_sent(&forge, ALICE_TOKEN, "the global token, after the issue was created");
}

// ---------------------------------------------------------------------------------------
// Requirement: stdio transport preserves the pre-existing global-token behaviour.

#[tokio::test]
async fn stdio_handler_receives_global_token_client() {
    // Even with MCP_BEARER_TOKEN set, stdio extracts nothing and runs as the global token.
    let h = Harness::start(Setup::gitea().env("MCP_BEARER_TOKEN", SHARED_SECRET)).await;
    h.forge.seed_repo("alice", "demo");
    for _ in 0..3 {
        let c = h.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await;
        assert!(!c.is_error, "{}", c.text);
        assert_eq!(c.json["identity"], json!({"login": "alice", "mode": "token", "sudo": null}));
        assert_eq!(h.last().header("authorization"), Some(token(ALICE_TOKEN).as_str()));
    }
    let all = h.forge.requests();
    assert!(
        all.iter().all(|r| r.header("authorization") == Some(token(ALICE_TOKEN).as_str())),
        "{}",
        describe(&all)
    );
    let lookups = all.iter().filter(|r| r.raw_path == "/api/v1/user").count();
    assert_eq!(lookups, 1, "the singleton's login is resolved once:\n  {}", describe(&all));
    h.stop().await;
}

// ---------------------------------------------------------------------------------------
// HTTP hygiene: body size (the Host and Origin checks and health are in-process, `http_app`).

async fn body_over_max_body_bytes_is_413(t: &str) {
    let (forge, server) = forge().serve_http(t, &[("MCP_MAX_BODY_BYTES", "2048")]).await;
    let c = server.connect(Some(&token(BOB_TOKEN))).await.unwrap();
    let big = "x".repeat(4096);
    // A tool call over the limit is answered to its own request with the tool error
    // payload_too_large, before anything of it is decoded or sent.
    let r = c.call("repoGet", json!({"owner": "alice", "repo": big}), Some(&token(BOB_TOKEN))).await;
    let called =
        tool_result(&r.unwrap_or_else(|e| panic!("a tool call over the limit gets its result: {e:?}")));
    assert_eq!(called.kind(), "payload_too_large", "{}", called.text);
    assert_eq!(called.json["error"]["status"], Value::Null, "{}", called.text);
    assert!(called.text.contains("MCP_MAX_BODY_BYTES"), "{}", called.text);
    if t == "http" {
        let args = json!({"owner": "alice", "repo": big});
        let resp =
            stateless_call(&http_client(), &server.base, "repoGet", args, Some(&token(BOB_TOKEN))).await;
        let called = tool_result(&resp.unwrap());
        assert_eq!(called.kind(), "payload_too_large", "{}", called.text);
    }
    // The session is still usable, and the refused call reached nothing.
    let (r, sent) = repo_get(&c, &forge, Some(&token(BOB_TOKEN))).await;
    assert_ran_as(&r, &sent, BOB_TOKEN, "bob");
    if t == "http" {
        // An oversized initialize (no session yet) as well.
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": big, "version": "0"}}});
        let resp = http_client()
            .post(server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 413);
        let answer: Value = resp.json().await.unwrap();
        assert_eq!(
            (answer["id"].clone(), answer["error"]["code"].clone()),
            (json!(0), json!(-32600)),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn max_sessions_refuses_a_third_initialize_with_503() {
    let (_forge, server) = forge().serve_http("http", &[("MCP_MAX_SESSIONS", "2")]).await;
    let _a = server.connect(None).await.unwrap();
    let _b = server.connect(Some(&token(BOB_TOKEN))).await.unwrap();
    match server.connect(None).await {
        Err((503, body)) => {
            assert!(body.contains("too many open MCP sessions"), "a clear message: {body}");
            assert!(body.contains("max-sessions"), "says what to change: {body}");
        }
        Err(e) => panic!("the third session must be refused with 503: {e:?}"),
        Ok(_) => panic!("the third session must be refused with 503, it was accepted"),
    }
    // The open sessions keep working.
    let r = _a.call_ok("repoGet", json!({"owner": "alice", "repo": "demo"}), None).await;
    assert!(!r.is_error, "{}", r.text);
}

#[tokio::test]
async fn max_sse_streams_refuses_a_second_stream_with_503() {
    let (_forge, server) = forge().serve_http("sse", &[("MCP_MAX_SSE_STREAMS", "1")]).await;
    let first = server.connect(None).await.unwrap();
    let resp = open_raw(&server, &[]).await;
    assert_eq!(resp.status().as_u16(), 503);
    let body = resp.text().await.unwrap();
    assert!(body.contains("too many open SSE streams") && body.contains("max-sse-streams"), "{body}");
    let r = first.call_ok("repoGet", json!({"owner": "alice", "repo": "demo"}), None).await;
    assert!(!r.is_error, "{}", r.text);
    // Closing the stream frees its slot.
    drop(first);
    support::wait_for("the closed stream's slot was freed", support::WAIT_LIMIT, async || {
        server.metric("aegis_streams_open").await == 0.0
    })
    .await;
    assert_eq!(open_raw(&server, &[]).await.status().as_u16(), 200);
}

// ---------------------------------------------------------------------------------------
// Requirement: per-request clients are isolated across concurrent requests.

const USERS: usize = 50;
const CALLS_PER_USER: usize = 10;
const GLOBAL_CALLS: usize = 60;
const GLOBAL_TOKEN: &str = "tok-global-000000";

/// 560 concurrent `repoGet` calls: 500 spread over 50 tokens (`tok-user-NN` → `userNN`) and 60
/// without a header (the global token → `global`), shuffled, each through its caller's own
/// session (Streamable HTTP: every fifth call is a stateless 2026-07-28 POST without one). Each call asks for a repository of its own (`<owner>/c<index>`), so the
/// forge's recording shows who asked for what: every request must carry exactly its caller's
/// token.
async fn concurrent_calls_over_50_tokens_never_cross_identities(t: &str) {
    let isolation = Isolation::start().await;
    let server = HttpServer::spawn(&isolation.forge.base_url(), t, &Isolation::ENV).await;
    isolation.run(t, &server.base, &|| server.stderr()).await;
}

/// The forge and the plan of the 560-call test, to run against one server or several behind
/// a load balancer.
pub(crate) struct Isolation {
    pub forge: FakeForge,
    /// (owner, token, repository) of each call, in the order they start.
    plan: Vec<(String, Option<String>, String)>,
}

impl Isolation {
    /// The server's settings: the global token, quiet logs, and room for 560 connections from
    /// one address (a single client never needs that many; a reverse proxy does, and raises
    /// the cap).
    pub const ENV: [(&'static str, &'static str); 3] =
        [("GITEA_TOKEN", GLOBAL_TOKEN), ("LOG_LEVEL", "warn"), ("MCP_MAX_CONNECTIONS_PER_PEER", "1024")];

    pub async fn start() -> Isolation {
        let forge = Forge::gitea().numbered_users(USERS).user(GLOBAL_TOKEN, "global").start().await;
        // (owner, token): 500 token calls and 60 without a header, in a fixed pseudo-random
        // order (a stride coprime with the length), then (owner, token, repo `c<index>`).
        let callers: Vec<(String, Option<String>)> = (0..USERS * CALLS_PER_USER)
            .map(|i| (format!("user{:02}", i % USERS), Some(Self::user_token(i % USERS))))
            .chain((0..GLOBAL_CALLS).map(|_| ("global".to_owned(), None)))
            .collect();
        let n = callers.len();
        assert_ne!(n % 97, 0, "the stride (a prime) must be coprime with {n}");
        let plan: Vec<(String, Option<String>, String)> = (0..n)
            .map(|i| {
                let (owner, tok) = callers[(i * 97) % n].clone();
                (owner, tok, format!("c{i}"))
            })
            .collect();
        for (owner, _, repo) in &plan {
            forge.seed_repo(owner, repo);
        }
        Isolation { forge, plan }
    }

    fn user_token(n: usize) -> String {
        support::forge::numbered_token(n)
    }

    /// Every call at once against the server (or balancer) at `base` speaking `t`; panics
    /// with what went wrong (and `log()`) unless each call ran as its caller, exactly once.
    pub async fn run(&self, t: &str, base: &str, log: &dyn Fn() -> String) {
        let (forge, plan) = (&self.forge, &self.plan);
        let token_calls = plan.iter().filter(|p| p.1.is_some()).count();
        let global_calls = plan.len() - token_calls;
        let distinct: HashSet<&String> = plan.iter().filter_map(|p| p.1.as_ref()).collect();
        assert!(token_calls >= 500 && distinct.len() >= 50 && global_calls >= 50);
        let http = http_client();
        // One session per caller (a session belongs to the identity that opened it), opened
        // with the caller's own header.
        let mut clients: std::collections::HashMap<Option<String>, Arc<McpClient>> = Default::default();
        for tok in plan.iter().map(|p| p.1.clone()).collect::<std::collections::BTreeSet<_>>() {
            let opener = tok.as_ref().map(|t| token(t));
            // A transport-level failure (status 0: a pooled connection closed under us) is
            // retried once; any answer from the server is final.
            let client = match McpClient::connect_to(http.clone(), base, t, opener.as_deref()).await {
                Err((0, e)) => {
                    eprintln!("opening a session for {tok:?}: transport error ({e}); retrying once");
                    McpClient::connect_to(http.clone(), base, t, opener.as_deref()).await
                }
                other => other,
            };
            let client = client.unwrap_or_else(|e| {
                panic!("opening a session for {tok:?} failed: {e:?}\nserver stderr:\n{}", log())
            });
            clients.insert(tok, Arc::new(client));
        }
        let sessions = clients.len();
        let stateless = |i: usize| t == "http" && i % 5 == 4;
        let stateless_calls = (0..plan.len()).filter(|&i| stateless(i)).count();
        forge.clear_requests();
        let started = Instant::now();
        let tasks: Vec<_> = plan
            .iter()
            .enumerate()
            .map(|(i, (owner, tok, repo))| {
                let c = clients[tok].clone();
                let auth = tok.as_ref().map(|t| token(t));
                let args = json!({"owner": owner, "repo": repo});
                let (http, base, stateless) = (http.clone(), base.to_owned(), stateless(i));
                tokio::spawn(async move {
                    if stateless {
                        stateless_call(&http, &base, "repoGet", args, auth.as_deref()).await
                    } else {
                        c.call("repoGet", args, auth.as_deref()).await
                    }
                })
            })
            .collect();
        let results = futures::future::join_all(tasks).await;
        let elapsed = started.elapsed();

        // Every call got its own, successful result, as its caller.
        let mut failures = Vec::new();
        for ((owner, _, repo), r) in plan.iter().zip(results) {
            match r.expect("task") {
                Ok(resp) => {
                    let c = tool_result(&resp);
                    let ok = !c.is_error
                        && c.json["identity"]["login"] == owner.as_str()
                        && c.json["data"]["name"] == repo.as_str()
                        && c.json["data"]["owner"]["login"] == owner.as_str();
                    if !ok {
                        failures.push(format!(
                            "{owner}/{repo}: {}",
                            c.text.chars().take(300).collect::<String>()
                        ));
                    }
                }
                Err(e) => failures.push(format!("{owner}/{repo}: HTTP {e:?}")),
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} calls failed, e.g.:\n{}",
            failures.len(),
            plan.len(),
            failures[..failures.len().min(10)].join("\n")
        );

        // At the forge: one request per call, each with exactly its caller's token.
        let recorded = forge.requests();
        let tool: Vec<&Recorded> =
            recorded.iter().filter(|r| r.operation_id.as_deref() == Some("repoGet")).collect();
        assert_eq!(tool.len(), plan.len(), "one forge request per call");
        let mut cross_talk = Vec::new();
        let mut repos = HashSet::new();
        for r in &tool {
            let owner = r.path_param("owner").unwrap();
            let expected = match owner.strip_prefix("user") {
                Some(n) => token(&format!("tok-user-{n}")),
                None => token(GLOBAL_TOKEN),
            };
            if r.header("authorization") != Some(expected.as_str()) {
                cross_talk.push(format!(
                    "{} carried {:?}, expected {expected}",
                    r.raw_path,
                    r.header("authorization")
                ));
            }
            repos.insert(r.path_param("repo").unwrap().to_owned());
        }
        assert!(
            cross_talk.is_empty(),
            "{} requests carried another caller's token:\n{}",
            cross_talk.len(),
            cross_talk.join("\n")
        );
        assert_eq!(repos.len(), plan.len(), "every call reached the forge exactly once");
        // The login lookups carried known tokens only, and nothing else reached the forge (a
        // replica's readiness probe asks the version, without a token).
        let lookups: Vec<&Recorded> = recorded.iter().filter(|r| r.raw_path == "/api/v1/user").collect();
        let known: HashSet<String> =
            (0..USERS).map(|n| token(&Self::user_token(n))).chain([token(GLOBAL_TOKEN)]).collect();
        assert!(lookups.iter().all(|r| r.header("authorization").is_some_and(|h| known.contains(h))));
        let probes = recorded.iter().filter(|r| support::http::is_readiness_probe(r)).count();
        assert_eq!(tool.len() + lookups.len() + probes, recorded.len(), "no other request reached the forge");
        eprintln!(
            "[{t} via {base}] {} concurrent calls ({token_calls} over {} tokens + {global_calls} without header) on {sessions} clients (a session each where the server keeps them){} in {elapsed:.2?}: {} forge tool requests, {} login lookups, 0 cross-talk",
            plan.len(),
            distinct.len(),
            if stateless_calls > 0 { format!(" + {stateless_calls} stateless posts") } else { String::new() },
            tool.len(),
            lookups.len(),
        );
    }
}
