//! The commands besides `serve`: `tools`, `call`, `doctor`, and `--help`.

use crate::support;

use fake_forge::{Flavor, Script, ScriptedResponse};
use serde_json::Value;
use std::process::Output;
use support::{ALICE_PASSWORD, ALICE_TOKEN, Forge, ROOT_TOKEN, bin};

/// The binary with `args` and the environment `env` alone.
pub(crate) async fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = tokio::process::Command::new(bin());
    cmd.args(args).env_clear().env("PATH", support::test_path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().await.unwrap()
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[tokio::test]
async fn help_documents_settings_but_never_prints_secret_values() {
    let secret = "sekrit-token-value-123";
    let o = run(
        &["--help"],
        &[
            ("GITEA_TOKEN", secret),
            ("MCP_BEARER_TOKEN", secret),
            ("GITEA_PASSWORD", secret),
            ("GITEA_URL", "https://g.example"),
        ],
    )
    .await;
    let text = stdout(&o);
    assert!(o.status.success());
    assert!(text.contains("GITEA_TOKEN") && text.contains("MCP_BEARER_TOKEN"));
    assert!(text.contains("GITEA_USERNAME") && text.contains("GITEA_PASSWORD_FILE"));
    assert!(!text.contains(secret), "{text}");
    for sub in ["tools", "call", "doctor", "serve"] {
        let o = run(&[sub, "--help"], &[("GITEA_TOKEN", secret)]).await;
        assert!(o.status.success(), "{sub} --help");
        assert!(!stdout(&o).contains(secret));
    }
}

#[tokio::test]
async fn tools_works_offline_with_a_flavor_and_prints_json_definitions() {
    let o = run(
        &["tools", "--flavor", "forgejo", "--url", "http://127.0.0.1:9", "--json", "--toolsets", "all"],
        &[],
    )
    .await;
    assert!(o.status.success());
    let tools: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(tools.as_array().unwrap().len(), 511);
    assert!(tools[0]["inputSchema"].is_object());
    // The default lists the everyday operations and the ways to the rest.
    let o = run(&["tools", "--flavor", "forgejo", "--url", "http://127.0.0.1:9", "--json"], &[]).await;
    let tools: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.len() < 40, "{names:?}");
    for n in [
        "gitea_search_operations",
        "gitea_get_operation_schema",
        "gitea_call_operation",
        "repoMergePullRequest",
    ] {
        assert!(names.contains(&n), "{n} not listed: {names:?}");
    }
    assert!(!names.contains(&"adminCreateUser"));
    let o =
        run(&["tools", "--flavor", "gitea", "--url", "http://127.0.0.1:9", "--toolsets", "issues,nope"], &[])
            .await;
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown toolset \"nope\""));
    let o = run(
        &["tools", "--flavor", "gitea", "--url", "http://127.0.0.1:9"],
        &[("DISABLED_TOOLS", "repoGet"), ("TOOLSETS", "all")],
    )
    .await;
    let text = stdout(&o);
    assert_eq!(text.lines().count(), 486);
    assert!(!text.lines().any(|l| l.starts_with("repoGet ")));
}

#[tokio::test]
async fn tools_with_an_explicit_flavor_needs_no_url_and_no_token() {
    // The environment is empty: no GITEA_URL, no GITEA_TOKEN.
    let o = run(&["tools", "--flavor", "gitea"], &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout(&o).lines().count(), support::DEFAULT_TOOL_COUNT);
    let o = run(&["tools", "--json", "--toolsets", "all"], &[("GITEA_FLAVOR", "forgejo")]).await;
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&o.stdout).unwrap().as_array().unwrap().len(), 511);
    let o = run(&["tools", "--flavor", "forgejo", "--list-toolsets"], &[]).await;
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("`activitypub`"), "{}", stdout(&o));
    // `auto` asks the forge, so it needs the URL, and says how to give it.
    for args in [&["tools"][..], &["doctor"][..], &["serve"][..]] {
        let o = run(args, &[]).await;
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("GITEA_URL"), "{args:?}");
    }
}

#[tokio::test]
async fn call_prints_the_result_and_exits_by_outcome() {
    let forge = Forge::gitea().repo("alice", "demo").start().await;
    let url = forge.base_url();
    let env = [("GITEA_TOKEN", ALICE_TOKEN)];
    let o =
        run(&["call", "repoGet", "--url", &url, "--args", r#"{"owner":"alice","repo":"demo"}"#], &env).await;
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["identity"]["login"], "alice");
    assert_eq!(v["data"]["name"], "demo");
    let o =
        run(&["call", "repoGet", "--url", &url, "--args", r#"{"owner":"alice","repo":"none"}"#], &env).await;
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(serde_json::from_slice::<Value>(&o.stdout).unwrap()["error"]["kind"], "not_found");
    let o = run(&["call", "nope", "--url", &url], &env).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown tool"));
    let o = run(&["call", "repoGet", "--url", &url, "--args", "[1]"], &env).await;
    assert_eq!(o.status.code(), Some(2));
}

#[tokio::test]
async fn settings_errors_exit_2_with_a_fix() {
    let o = run(&["call", "repoGet"], &[]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("GITEA_URL"));
    let o = run(&["tools", "--url", "https://bob:pw-secret@g.example", "--flavor", "gitea"], &[]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("pw-secret"));
}

#[tokio::test]
async fn a_limit_that_is_not_a_whole_number_stops_serve_naming_its_variable() {
    for name in ["RATE_LIMIT_PER_MINUTE", "RATE_LIMIT_CONCURRENT", "FORGE_MAX_CONCURRENT"] {
        let o = run(&["serve", "--url", "http://127.0.0.1:9", "--flavor", "gitea"], &[(name, "ten")]).await;
        assert_eq!(o.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(name) && err.contains("ten"), "{name}: {err}");
    }
}

#[tokio::test]
async fn basic_auth_settings_need_both_halves_and_no_token_and_never_echo_the_password() {
    let pw = "hunter2-secret-pw";
    for (env, says) in [
        (&[("GITEA_PASSWORD", pw)][..], "GITEA_USERNAME is not"),
        (&[("GITEA_USERNAME", "alice")][..], "no password"),
        (
            &[("GITEA_USERNAME", "alice"), ("GITEA_PASSWORD", pw), ("GITEA_TOKEN", ALICE_TOKEN)][..],
            "both a token",
        ),
    ] {
        for command in ["serve", "doctor"] {
            let o = run(&[command, "--url", "http://127.0.0.1:9"], env).await;
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{env:?}: {err}");
            assert!(err.contains(says), "{env:?}: {err}");
            assert!(!err.contains(pw) && !err.contains(ALICE_TOKEN), "{err}");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pw");
    std::fs::write(&file, format!("  {ALICE_PASSWORD}\n")).unwrap();
    let forge = Forge::gitea().start().await;
    let env = [("GITEA_USERNAME", "alice"), ("GITEA_PASSWORD_FILE", file.to_str().unwrap())];
    let o = run(&["call", "userGetCurrent", "--url", &forge.base_url()], &env).await;
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["identity"], serde_json::json!({"login": "alice", "mode": "basic", "sudo": null}));
}

#[tokio::test]
async fn doctor_and_serve_sign_in_with_a_login_and_password_and_say_when_it_is_refused() {
    let forge = Forge::gitea().start().await;
    let url = forge.base_url();
    let o =
        run(&["doctor", "--url", &url], &[("GITEA_USERNAME", "alice"), ("GITEA_PASSWORD", ALICE_PASSWORD)])
            .await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("signed in as alice with GITEA_USERNAME and GITEA_PASSWORD"), "{text}");
    assert!(!text.contains(ALICE_PASSWORD) && !text.contains("no token"), "{text}");

    let wrong = [("GITEA_USERNAME", "alice"), ("GITEA_PASSWORD", "wrong-password-xyz")];
    let o = run(&["doctor", "--url", &url], &wrong).await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("asked without the login and password"), "{text}");
    assert!(text.contains("FAIL  the forge refused GITEA_USERNAME and GITEA_PASSWORD (401)"), "{text}");
    assert!(!text.contains("wrong-password-xyz"), "{text}");
    let o = run(&["serve", "--url", &url], &wrong).await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("the forge refused GITEA_USERNAME and GITEA_PASSWORD (401)"), "{err}");
    assert!(err.contains("Gitea 1.27.0") && !err.contains("wrong-password-xyz"), "{err}");
}

#[tokio::test]
async fn doctor_says_whether_sudo_can_work_and_a_bad_sudo_setting_exits_2() {
    let forge = Forge::sudo().start().await;
    let url = forge.base_url();
    let o =
        run(&["doctor", "--url", &url], &[("GITEA_TOKEN", ROOT_TOKEN), ("SUDO_ALLOWED_USERS", "bob")]).await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("ok    root is a site administrator"), "{text}");
    let o =
        run(&["doctor", "--url", &url], &[("GITEA_TOKEN", ALICE_TOKEN), ("SUDO_ALLOWED_USERS", "bob")]).await;
    let text = stdout(&o);
    assert!(text.contains("warn  SUDO_ALLOWED_USERS is set but alice is not a site administrator"), "{text}");
    let o = run(&["doctor", "--url", &url], &[("GITEA_TOKEN", ROOT_TOKEN)]).await;
    assert!(!stdout(&o).contains("site administrator"), "{}", stdout(&o));
    let o = run(&["serve", "--url", &url], &[("SUDO_ALLOWED_USERS", "bob, *")]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("SUDO_ALLOWED_USERS"));
}

#[tokio::test]
async fn doctor_reports_flavor_version_and_identity() {
    let forge = Forge::forgejo().start().await;
    let url = forge.base_url();
    let o = run(&["doctor", "--url", &url], &[("GITEA_TOKEN", ALICE_TOKEN)]).await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("Forgejo 16.0.1+gitea-1.22.0"), "{text}");
    assert!(text.contains("belongs to alice"), "{text}");
    assert!(text.contains("511 tools"), "{text}");
    assert!(!text.contains(ALICE_TOKEN));

    let o = run(&["doctor", "--url", &url], &[("GITEA_TOKEN", "wrong-token-xyz")]).await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("FAIL") && text.contains("refused the token"), "{text}");
    assert!(!text.contains("wrong-token-xyz"));

    let o = run(&["doctor", "--url", &url, "--flavor", "gitea"], &[("GITEA_TOKEN", ALICE_TOKEN)]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("but the forge is Forgejo"));

    drop(forge);
    let o = run(&["doctor", "--url", "http://127.0.0.1:9"], &[]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("connection_failed") || stdout(&o).contains("could not connect"),
        "{}",
        stdout(&o)
    );
}

#[tokio::test]
async fn serve_with_auto_flavor_and_no_forge_fails_fast_with_a_hint() {
    let o = run(&["serve", "--url", "http://127.0.0.1:9", "--connect-timeout", "2"], &[]).await;
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--flavor"), "{err}");
}

/// A 401 to `/api/v1/version` itself, as both forges answer a wrong token there.
fn refusal() -> ScriptedResponse {
    ScriptedResponse::json(401, &serde_json::json!({"message": "user does not exist [uid: 0, name: ]"}))
}

#[tokio::test]
async fn serve_with_a_refused_token_says_so_and_names_the_forge_instead_of_doubting_the_url() {
    for (flavor, named) in [(Flavor::Forgejo, "Forgejo 16.0.1+gitea-1.22.0"), (Flavor::Gitea, "Gitea 1.27.0")]
    {
        let forge = Forge::of(flavor).start().await;
        let url = forge.base_url();
        let o = run(&["serve", "--url", &url], &[("GITEA_TOKEN", "wrong-token-xyz")]).await;
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("the forge refused GITEA_TOKEN (401)"), "{err}");
        assert!(err.contains(named), "{err}");
        assert!(!err.contains("Gitea or Forgejo instance") && !err.contains("wrong-token-xyz"), "{err}");
        // Asked with the token, refused, asked again without it.
        let asked: Vec<Option<String>> = forge
            .requests()
            .iter()
            .filter(|r| r.raw_path == "/api/v1/version")
            .map(|r| r.header("authorization").map(str::to_owned))
            .collect();
        assert_eq!(asked, [Some("token wrong-token-xyz".to_owned()), None], "{flavor:?}");
    }

    // A forge that tells its version to nobody without a token: the words say that.
    let gitea = Forge::gitea().start().await;
    gitea.script(Script::always(Some("GET"), "/api/v1/version", refusal()));
    let o = run(&["serve", "--url", &gitea.base_url()], &[]).await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("only to signed-in users") && err.contains("--flavor"), "{err}");
    assert!(!err.contains("Gitea or Forgejo instance"), "{err}");
}

#[tokio::test]
async fn doctor_with_a_refused_token_reports_the_right_flavor_and_the_refusal() {
    for (flavor, forge_says, tools) in [
        (Flavor::Forgejo, "ok    Forgejo 16.0.1+gitea-1.22.0 answers at", "511 tools from the Forgejo"),
        (Flavor::Gitea, "ok    Gitea 1.27.0 answers at", "487 tools from the Gitea"),
    ] {
        let forge = Forge::of(flavor).start().await;
        let o = run(&["doctor", "--url", &forge.base_url()], &[("GITEA_TOKEN", "wrong-token-xyz")]).await;
        let text = stdout(&o);
        assert_eq!(o.status.code(), Some(1), "{text}");
        assert!(text.contains(forge_says) && text.contains(tools), "{flavor:?}: {text}");
        // Both refuse the token on /version and tell their version without it.
        assert!(text.contains("asked without the token"), "{flavor:?}: {text}");
        assert!(text.contains("FAIL  the forge refused the token (401)"), "{text}");
        assert!(!text.contains("wrong-token-xyz"), "{text}");
    }
}

#[tokio::test]
async fn doctor_finds_forgejo_at_its_own_version_route_when_api_v1_version_refuses_everyone() {
    let forge = Forge::forgejo().start().await;
    forge.script(Script::always(Some("GET"), "/api/v1/version", refusal()));
    let o = run(&["doctor", "--url", &forge.base_url()], &[("GITEA_TOKEN", "wrong-token-xyz")]).await;
    let text = stdout(&o);
    assert!(text.contains("ok    Forgejo 16.0.1+gitea-1.22.0 answers at"), "{text}");
    assert!(text.contains("511 tools from the Forgejo"), "{text}");
    let own = forge.requests().into_iter().find(|r| r.raw_path == "/api/forgejo/v1/version");
    assert_eq!(
        own.expect("asked Forgejo's own route").header("authorization"),
        None,
        "sent without the token"
    );
}

/// A proxy in front of the forge that hides `/api/v1/version` (404 to everyone, to keep the
/// version to the operator): a Forgejo is still found at its own route, and a token it accepts
/// is not called refused; a Gitea, which has no such route, is not guessed at, and the words
/// name the 404 and `--flavor`. A refused token on top of the hidden route is named as refused.
#[tokio::test]
async fn auto_flavor_finds_forgejo_at_its_own_route_when_a_proxy_hides_api_v1_version() {
    let hidden = || Script::always(Some("GET"), "/api/v1/version", ScriptedResponse::status(404));
    let forgejo = Forge::forgejo().start().await;
    forgejo.script(hidden());
    let o = run(&["doctor", "--url", &forgejo.base_url()], &[("GITEA_TOKEN", ALICE_TOKEN)]).await;
    let text = stdout(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("ok    Forgejo 16.0.1+gitea-1.22.0 answers at"), "{text}");
    assert!(text.contains("511 tools from the Forgejo") && !text.contains("refused"), "{text}");
    let o = run(&["serve", "--url", &forgejo.base_url()], &[("GITEA_TOKEN", "wrong-token-xyz")]).await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the forge refused GITEA_TOKEN (401): Forgejo 16.0.1+gitea-1.22.0 answers"),
        "{err}"
    );

    let gitea = Forge::gitea().start().await;
    gitea.script(hidden());
    let o = run(&["serve", "--url", &gitea.base_url()], &[("GITEA_TOKEN", ALICE_TOKEN)]).await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("GET /api/v1/version answered 404") && err.contains("--flavor"), "{err}");
    let asked: Vec<String> = gitea.requests().iter().map(|r| r.raw_path.clone()).collect();
    assert!(asked.iter().any(|p| p == "/api/forgejo/v1/version"), "{asked:?}");
    // A proxy that hides the version only from those without a token.
    let gitea = Forge::gitea().start().await;
    gitea.script(hidden());
    gitea.script(Script::once(Some("GET"), "/api/v1/version", refusal()));
    let o = run(&["serve", "--url", &gitea.base_url()], &[("GITEA_TOKEN", "wrong-token-xyz")]).await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the forge refused GITEA_TOKEN (401), and GET /api/v1/version answered 404"),
        "{err}"
    );
    assert!(!err.contains("wrong-token-xyz"), "{err}");
    // A Forgejo that tells its version to no one, behind the same proxy: the token it refused at
    // its own route is still named, not taken for a wrong URL.
    let forgejo = Forge::forgejo().start().await;
    forgejo.script(hidden());
    forgejo.script(Script::always(Some("GET"), "/api/forgejo/v1/version", refusal()));
    let o = run(&["serve", "--url", &forgejo.base_url()], &[("GITEA_TOKEN", "wrong-token-xyz")]).await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the forge refused GITEA_TOKEN (401), and GET /api/v1/version answered 404"),
        "{err}"
    );
}

#[tokio::test]
async fn spec_file_replaces_the_embedded_spec() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("mini.json");
    std::fs::write(
        &spec,
        r#"{"swagger":"2.0","info":{"version":"9.9.9"},"basePath":"/api/v1","paths":{
            "/version":{"get":{"operationId":"getVersion","summary":"Version","responses":{"200":{"description":"ok"}}}},
            "/repos/{owner}/{repo}":{"get":{"operationId":"repoGet","summary":"Get a repo","parameters":[
                {"name":"owner","in":"path","required":true,"type":"string"},
                {"name":"repo","in":"path","required":true,"type":"string"}],"responses":{"200":{"description":"ok"}}}}}}"#,
    )
    .unwrap();
    let o = run(
        &["tools", "--flavor", "gitea", "--url", "http://127.0.0.1:9", "--spec", spec.to_str().unwrap()],
        &[],
    )
    .await;
    let names: Vec<String> =
        stdout(&o).lines().map(|l| l.split_whitespace().next().unwrap().to_owned()).collect();
    assert_eq!(names[..3], ["gitea_search_operations", "gitea_get_operation_schema", "gitea_call_operation"]);
    assert_eq!(names[3..], ["gitea_api_request", "gitea_download_attachment", "repoGet"]);
    std::fs::write(&spec, "{not json").unwrap();
    let o = run(
        &["tools", "--flavor", "gitea", "--url", "http://127.0.0.1:9", "--spec", spec.to_str().unwrap()],
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not valid JSON"));
}

/// The default `tools/list` of each forge stays under its 40,000-byte budget, for a client
/// given typed results (an output schema on every tool) and for one without.
#[tokio::test]
async fn the_default_tool_list_fits_its_budget_with_and_without_output_schemas() {
    for flavor in ["gitea", "forgejo"] {
        for from in ["2025-06-18", "never"] {
            let o = run(&["tools", "--json", "--flavor", flavor], &[("STRUCTURED_CONTENT_FROM", from)]).await;
            assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
            let tools: Value = serde_json::from_slice(&o.stdout).unwrap();
            let typed = tools.as_array().unwrap().iter().all(|t| t.get("outputSchema").is_some());
            assert_eq!(typed, from != "never", "{flavor} {from}");
            let bytes = serde_json::to_vec(&serde_json::json!({"tools": tools})).unwrap().len();
            assert!(bytes < 40_000, "{flavor}, STRUCTURED_CONTENT_FROM={from}: {bytes} bytes");
        }
    }
}

#[tokio::test]
async fn doctor_checks_the_shared_store_and_names_what_is_wrong() {
    let forge = Forge::gitea().start().await;
    let url = forge.base_url();
    let redis = support::redis::Redis::start().await;
    let store = redis.env();
    let mut env: Vec<(&str, &str)> = store.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.push(("GITEA_TOKEN", ALICE_TOKEN));
    let o = run(&["doctor", "--url", &url], &env).await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!("ok    the shared store at redis://127.0.0.1:{}/ answers", redis.port)),
        "{text}"
    );
    assert!(!text.contains("warn  the shared store"), "{text}");
    // A store that may evict keys is a warning.
    assert_eq!(redis.cli(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]).await.trim(), "OK");
    let text = stdout(&run(&["doctor", "--url", &url], &env).await);
    assert!(text.contains("warn  the shared store's maxmemory-policy is not noeviction"), "{text}");
    // A wrong password fails, without showing it.
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("password");
    std::fs::write(&wrong, "not-the-store-password-77").unwrap();
    let wrong = wrong.to_str().unwrap().to_owned();
    let mut bad = env.clone();
    bad.retain(|(k, _)| *k != "MCP_STATE_PASSWORD_FILE");
    bad.push(("MCP_STATE_PASSWORD_FILE", &wrong));
    let o = run(&["doctor", "--url", &url], &bad).await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAIL  the shared store (MCP_STATE_URL) cannot be used: it refused the connection (a wrong password"),
        "{text}"
    );
    assert!(!text.contains("not-the-store-password-77"), "{text}");
    // Nothing listens: it does not answer.
    let mut gone = env.clone();
    let nowhere = format!("redis://127.0.0.1:{}/", support::http::free_port());
    gone.retain(|(k, _)| *k != "MCP_STATE_URL");
    gone.push(("MCP_STATE_URL", &nowhere));
    let text = stdout(&run(&["doctor", "--url", &url], &gone).await);
    assert!(text.contains("FAIL  the shared store (MCP_STATE_URL)"), "{text}");
}

/// Every secret of the table of settings set at once: no form of help shows one, and `doctor`
/// lists each setting given — a secret only as set — before its checks.
#[tokio::test]
async fn help_and_doctor_never_show_a_secret_of_the_settings() {
    let secret = "sekrit-value-4711-long-enough";
    let secrets = [
        "GITEA_TOKEN",
        "GITEA_PASSWORD",
        "MCP_BEARER_TOKEN",
        "EXTRA_SECRETS",
        "GITEA_OAUTH_CLIENT_SECRET",
        "METRICS_BEARER_TOKEN",
    ];
    let env: Vec<(&str, &str)> = secrets.iter().map(|k| (*k, secret)).collect();
    // A URL may carry a password too, whatever the setting: help shows no value of any.
    let (forge_url, store_url) =
        (format!("https://bob:{secret}@git.example"), format!("redis://u:{secret}@store.example:6379"));
    let mut help_env = env.clone();
    help_env.extend([("GITEA_URL", forge_url.as_str()), ("MCP_STATE_URL", store_url.as_str())]);
    for args in
        [&["--help"][..], &["-h"], &["doctor", "--help"], &["serve", "-h"], &["audit", "verify", "--help"]]
    {
        let o = run(args, &help_env).await;
        let text = stdout(&o);
        assert!(o.status.success(), "{args:?}");
        assert!(text.contains("METRICS_BEARER_TOKEN") && !text.contains(secret), "{args:?}: {text}");
    }
    let forge = Forge::gitea().start().await;
    let url = forge.base_url();
    let mut env: Vec<(&str, &str)> = env.into_iter().filter(|(k, _)| *k != "GITEA_PASSWORD").collect();
    env[0] = ("GITEA_TOKEN", ALICE_TOKEN);
    env.push(("GITEA_HOST", &url));
    let o = run(&["doctor", "--read-only"], &env).await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    for line in [
        &format!("      GITEA_URL = {url} (GITEA_HOST)"),
        "      GITEA_TOKEN is set (environment)",
        "      MCP_BEARER_TOKEN is set (environment)",
        "      EXTRA_SECRETS is set (environment)",
        "      READ_ONLY = true (--read-only)",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} not in:\n{text}");
    }
    assert!(!text.contains(secret) && !text.contains(ALICE_TOKEN), "{text}");
    assert!(!text.contains("MCP_LISTEN"), "a setting at its default is not listed: {text}");
}
