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

use crate::support;

use std::process::Command;
use std::time::Duration;

use fake_forge::{Flavor, Recorded};
use serde_json::{Value, json};
use support::http::HttpServer;
use support::{ALICE_TOKEN, DriverRun, Forge, python, python_driver, repo_root};

const BOB_TOKEN: &str = "tok-bob-9876543210abcdef";
const TIMEOUT: Duration = Duration::from_secs(60);
const ENVELOPE_KEYS: [&str; 6] = ["identity", "request", "status", "pagination", "untrusted_content", "data"];

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

/// A forge knowing alice and bob, with `alice/demo`; its server (alice's token the global
/// one) is a process of its own, as the SDK meets it.
fn forge() -> Forge {
    Forge::gitea().user(BOB_TOKEN, "bob").repo("alice", "demo")
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
    let (forge, server) = forge().spawn_http(transport, &[]).await;
    let endpoint = if transport == "http" { "/mcp" } else { "/sse" };
    assert!(server.endpoint.ends_with(endpoint), "unexpected endpoint {}", server.endpoint);

    let calls = json!([
        {"tool": "userGetCurrent", "arguments": {}},
        {"tool": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}},
        {"tool": "noSuchTool", "arguments": {}},
    ]);
    let run = run_driver(transport, mode, &server, &format!("{scheme} {BOB_TOKEN}"), &calls).await;
    // Beside the server's readiness probe at start (no token), every request is the caller's.
    let requests = support::http::not_probes(&forge);
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

/// Sign-in with the forge, driven by the official SDK's OAuth client
/// (`mcp.client.auth.OAuthClientProvider`, `tests/python/oauth_client.py`) without a person:
/// it meets the server's 401, discovers, registers, follows the authorize URL through the fake
/// forge's consent (bob is signed in there) and the server's callback, exchanges the code with
/// PKCE, calls as bob, and refreshes. The forge sees only its own token for bob.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_oauth_client_signs_in_with_the_forge_and_calls_as_the_person() {
    let port = support::http::free_port();
    let public = format!("http://127.0.0.1:{port}");
    let forge = Forge::gitea()
        .user(BOB_TOKEN, "bob")
        .options(|o| {
            o.oauth_apps = vec![fake_forge::OAuthApp::confidential(
                "forge-app",
                "gto_forge-app-secret-for-the-sdk-test",
                &format!("{public}/oauth/callback"),
            )];
            o.oauth_user = Some("bob".into());
        })
        .repo("bob", "notes")
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "0f".repeat(32)).unwrap();
    let env = [
        ("GITEA_TOKEN", ALICE_TOKEN),
        ("GITEA_OAUTH_CLIENT_ID", "forge-app"),
        ("GITEA_OAUTH_CLIENT_SECRET", "gto_forge-app-secret-for-the-sdk-test"),
        ("MCP_PUBLIC_URL", public.as_str()),
        ("MCP_OAUTH_KEY_FILE", key.to_str().unwrap()),
    ];
    let server =
        HttpServer::spawn_listening(&forge.base_url(), "http", &env, &format!("127.0.0.1:{port}")).await;
    let mut cmd = support::oauth_client(
        &server.endpoint,
        &["userGetCurrent={}", r#"repoGet={"owner":"bob","repo":"notes"}"#],
    );
    let run = support::run_with_timeout(&mut cmd, TIMEOUT).await;
    let report = || format!("{}\n{}\n--- server stderr ---\n{}", run.stdout, run.stderr, server.stderr());
    assert!(run.status.is_some_and(|s| s.success()), "oauth_client.py failed: {}", report());
    let lines: Vec<Value> = run.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let of = |key: &str| lines.iter().filter(|l| l.get(key).is_some()).collect::<Vec<_>>();
    let auth = &of("authorization")[0]["authorization"];
    let steps = auth["steps"].to_string();
    assert!(
        steps.contains("/authorize")
            && steps.contains("/login/oauth/authorize")
            && steps.contains("/oauth/callback"),
        "{}",
        report()
    );
    assert_eq!(auth["authorize_params"]["code_challenge_method"], "S256", "{}", report());
    assert_eq!(auth["authorize_params"]["resource"], server.endpoint.as_str(), "{}", report());
    let tools = of("tool");
    assert_eq!(tools.len(), 2, "{}", report());
    for t in &tools {
        assert_eq!(t["is_error"], false, "{}", report());
        let envelope: Value = serde_json::from_str(t["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            envelope["identity"],
            json!({"login": "bob", "mode": "oauth", "sudo": null}),
            "{}",
            report()
        );
    }
    let storage = &of("token_storage")[0]["token_storage"];
    assert_eq!(storage["client_id_kind"], "registered", "{}", report());
    assert_eq!(storage["has_refresh_token"], true, "{}", report());
    assert_eq!(storage["tokens_stored"], 2, "the SDK did not refresh: {}", report());
    // The forge saw its own access token for bob on every API call, never ours, never alice's.
    let api: Vec<Recorded> = forge
        .requests()
        .into_iter()
        .filter(|r| r.raw_path.starts_with("/api/v1/") && r.raw_path != "/api/v1/version")
        .collect();
    assert!(!api.is_empty());
    for r in &api {
        let auth = r.header("authorization").unwrap_or_default();
        let t = auth
            .strip_prefix("Bearer ")
            .unwrap_or_else(|| panic!("not a forge OAuth token: {}", describe(&api)));
        assert_eq!(forge.oauth_access(t).map(|a| a.login), Some("bob".to_owned()), "{}", describe(&api));
    }
    assert_eq!(refreshes(&forge), 1, "one refresh reached the forge");
}

/// The same SDK client against a server with two forges, each with its application: its one
/// sign-in walks through both forges' consent and callbacks, its calls reach each forge as bob
/// with that forge's own token, and its refresh refreshes both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_oauth_client_signs_in_on_two_forges_at_once() {
    let port = support::http::free_port();
    let public = format!("http://127.0.0.1:{port}");
    let forge = |builder: Forge, profile: &'static str| {
        let callback = format!("{public}/oauth/callback/{profile}");
        builder
            .user(BOB_TOKEN, "bob")
            .options(move |o| {
                let (id, secret) = (format!("{profile}-app"), format!("gto_{profile}-app-secret"));
                o.oauth_apps = vec![fake_forge::OAuthApp::confidential(&id, &secret, &callback)];
                o.oauth_user = Some("bob".into());
            })
            .repo("bob", "notes")
            .start()
    };
    let (work, home) = (forge(Forge::gitea(), "work").await, forge(Forge::forgejo(), "home").await);
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "0e".repeat(32)).unwrap();
    let profiles = dir.path().join("forges.toml");
    let profile = |name: &str, url: &str, flavor: &str| {
        format!(
            "[forges.{name}]\nurl = \"{url}\"\nflavor = \"{flavor}\"\noauth_client_id = \"{name}-app\"\noauth_client_secret_env = \"{}_APP_SECRET\"\n",
            name.to_uppercase()
        )
    };
    let text = format!(
        "default = \"work\"\n{}{}",
        profile("work", &work.base_url(), "gitea"),
        profile("home", &home.base_url(), "forgejo")
    );
    std::fs::write(&profiles, text).unwrap();
    let listen = format!("127.0.0.1:{port}");
    let env: Vec<(String, String)> = [
        ("GITEA_PROFILES", profiles.to_str().unwrap()),
        ("WORK_APP_SECRET", "gto_work-app-secret"),
        ("HOME_APP_SECRET", "gto_home-app-secret"),
        ("MCP_PUBLIC_URL", public.as_str()),
        ("MCP_OAUTH_KEY_FILE", key.to_str().unwrap()),
    ]
    .iter()
    .map(|(k, v)| ((*k).into(), (*v).into()))
    .collect();
    let args = ["serve", "--transport", "http", "--listen", &listen];
    let server = HttpServer::of_settings(support::settings_of(&args, &env), "http", &listen).await;
    let mut cmd = support::oauth_client(
        &server.endpoint,
        &[
            r#"repoGet={"owner":"bob","repo":"notes"}"#,
            r#"repoGet={"owner":"bob","repo":"notes","forge":"home"}"#,
        ],
    );
    let run = support::run_with_timeout(&mut cmd, TIMEOUT).await;
    let report = || format!("{}\n{}", run.stdout, run.stderr);
    assert!(run.status.is_some_and(|s| s.success()), "oauth_client.py failed: {}", report());
    let lines: Vec<Value> = run.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let steps = lines.iter().find_map(|l| l.get("authorization")).unwrap()["steps"].to_string();
    assert!(steps.contains("/oauth/callback/work") && steps.contains("/oauth/callback/home"), "{}", report());
    let tools: Vec<&Value> = lines.iter().filter(|l| l.get("tool").is_some()).collect();
    assert_eq!(tools.len(), 2, "{}", report());
    for (t, name) in tools.iter().zip(["work", "home"]) {
        assert_eq!(t["is_error"], false, "{}", report());
        let envelope: Value = serde_json::from_str(t["text"].as_str().unwrap()).unwrap();
        assert_eq!(envelope["forge"], name, "{}", report());
        assert_eq!(envelope["identity"]["login"], "bob", "{}", report());
    }
    // Each forge saw only tokens it issued to its own application, and refreshed once.
    for (f, app) in [(&work, "work-app"), (&home, "home-app")] {
        let api: Vec<Recorded> = f
            .requests()
            .into_iter()
            .filter(|r| r.raw_path.starts_with("/api/v1/") && r.raw_path != "/api/v1/version")
            .collect();
        assert!(!api.is_empty(), "{app}");
        for r in &api {
            let t = r.header("authorization").and_then(|a| a.strip_prefix("Bearer ")).unwrap_or_default();
            assert_eq!(f.oauth_access(t).map(|a| a.client_id), Some(app.to_owned()), "{}", describe(&api));
        }
        assert_eq!(refreshes(f), 1, "{app}: one refresh");
    }
}

/// A session whose identity lookup hangs at the forge: the SDK is told, as a JSON-RPC error to
/// its `initialize`, that the forge did not answer in time — well before it would give up on
/// its own (30 s), and never by a dropped connection.
#[tokio::test]
async fn a_session_whose_identity_lookup_hangs_gets_a_json_rpc_error_in_time() {
    let forge = forge().start().await;
    forge.script(fake_forge::Script::always(
        Some("GET"),
        "/api/v1/user",
        fake_forge::ScriptedResponse::json(200, &json!({"login": "bob"}))
            .with_delay(Duration::from_secs(120)),
    ));
    let server = HttpServer::spawn(&forge.base_url(), "http", &[("GITEA_TOKEN", ALICE_TOKEN)]).await;
    let calls = json!([{"tool": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}}]);
    let (mut cmd, _calls_dir) = python_driver("mcp_http_client.py", "legacy", &calls);
    cmd.args(["--transport", "http", &server.endpoint])
        .arg("--header")
        .arg(format!("Authorization: token {BOB_TOKEN}"));
    let run = support::run_with_timeout(&mut cmd, TIMEOUT).await;
    let said = format!("{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.status.and_then(|s| s.code()), Some(1), "the connection fails: {said}");
    assert!(said.contains("-32000") && said.contains("did not answer within 10s"), "{said}");
    // The server's 10 s, not the SDK's own 30 s (which says "timed out").
    assert!(!said.contains("timed out") && !said.contains("BrokenResource"), "{said}");
}

/// Typed results through the SDK over Streamable HTTP, with sessions and stateless, for both
/// forges and both SDK modes: the same checks as over stdio (`support::assert_typed_report`).
#[tokio::test]
async fn python_sdk_checks_typed_results_over_streamable_http_with_sessions_and_stateless() {
    for flavor in [Flavor::Gitea, Flavor::Forgejo] {
        for stateless in [false, true] {
            let forge = Forge::of(flavor).repo("alice", "demo").issues("alice", "demo", 3).start().await;
            let calls = Value::Array(support::typed_result_calls(flavor, &forge));
            let name = if flavor == Flavor::Gitea { "gitea" } else { "forgejo" };
            let mut env =
                vec![("GITEA_TOKEN", ALICE_TOKEN), ("GITEA_FLAVOR", name), ("RESULT_SHAPE", "compact")];
            if stateless {
                env.push(("MCP_STATELESS", "true"));
            }
            let server = HttpServer::spawn(&forge.base_url(), "http", &env).await;
            for mode in ["legacy", "auto"] {
                let (mut cmd, _calls_dir) = python_driver("mcp_http_client.py", mode, &calls);
                cmd.args(["--check-typed", "--transport", "http", &server.endpoint])
                    .arg("--header")
                    .arg(format!("Authorization: Bearer {ALICE_TOKEN}"));
                let what = format!("the Python driver ({name}, stateless {stateless}, mode {mode}, typed)");
                let run = DriverRun::run(&mut cmd, TIMEOUT, &what, || {
                    format!("--- server stderr ---\n{}", server.stderr())
                })
                .await;
                support::assert_typed_report(&run.doc, if flavor == Flavor::Gitea { 45 } else { 23 });
            }
        }
    }
}

/// How many refreshes of a token reached `forge`'s token endpoint.
fn refreshes(forge: &fake_forge::FakeForge) -> usize {
    let refresh = |r: &fake_forge::Recorded| {
        r.raw_path == "/login/oauth/access_token"
            && String::from_utf8_lossy(&r.body).contains("grant_type=refresh_token")
    };
    forge.requests().iter().filter(|r| refresh(r)).count()
}
