//! A profiles file as a person meets it: the built binary's `doctor` and `serve` with
//! `GITEA_PROFILES`. Each bad profiles file gets one message on stderr (exit 2) naming the
//! file, the profile or the key, and never a secret; a forge that is down, or that refuses its
//! profile's token, is one profile not ready in `doctor` (exit 1) while the others are ready,
//! and `serve` still serves the others.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::cli::{run, stdout};
use crate::support::{ALICE_PASSWORD, DEFAULT_TOOL_COUNT, Forge, Server, write_profiles};

const WORK_TOKEN: &str = "tok-work-alice-7f3a";
const HOME_TOKEN: &str = "tok-home-alice-2c9b";
/// A value no message may show: the token of a file, or a value written in the profiles file.
const SECRET: &str = "sekrit-profile-value-4711";

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `doctor` and `serve` with the profiles file `path` (and `env`) both stop with exit 2 and
/// one line on stderr, which contains every one of `says` and never `SECRET`; that line.
async fn refused(path: &str, env: &[(&str, &str)], says: &[&str]) -> String {
    let mut env = env.to_vec();
    env.push(("GITEA_PROFILES", path));
    let mut lines = Vec::new();
    for command in ["doctor", "serve"] {
        let o = run(&[command], &env).await;
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{command}: {err}");
        assert_eq!(err.lines().count(), 1, "{command}: one message: {err}");
        for s in says {
            assert!(err.contains(s), "{command}: {s:?} not in: {err}");
        }
        assert!(!err.contains(SECRET), "{command}: {err}");
        assert!(stdout(&o).is_empty(), "{command}: {}", stdout(&o));
        lines.push(err);
    }
    assert_eq!(lines[0], lines[1], "doctor and serve say the same");
    lines.remove(0)
}

#[tokio::test]
async fn a_missing_profiles_file_is_one_message_naming_the_file_and_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-forges.toml");
    let path = path.to_str().unwrap();
    let said =
        refused(path, &[], &[&format!("cannot read the profiles file {path}"), "GITEA_PROFILES"]).await;
    assert!(said.contains("not found"), "{said}");
}

#[tokio::test]
async fn an_unknown_key_in_a_profile_is_one_message_naming_the_profile_and_the_key_not_its_value() {
    let (_dir, path) = write_profiles(&format!(
        r#"[forges.work]
url = "https://git.example.com"
tokn_env = "{SECRET}"
"#
    ));
    refused(&path, &[], &["profile work: unknown key \"tokn_env\"", "token_env"]).await;
}

#[tokio::test]
async fn a_profile_defined_twice_is_one_message_naming_the_file_and_the_profile() {
    let (_dir, path) = write_profiles(&format!(
        r#"[forges.work]
url = "https://git.example.com"

[forges.home]
url = "https://home.example.com"

[forges.work]
url = "https://user:{SECRET}@other.example.com"
"#
    ));
    refused(&path, &[], &[&format!("profiles file {path}: the profile work is defined twice (line 7)")])
        .await;
}

#[tokio::test]
async fn a_token_file_other_users_can_read_is_refused_naming_the_profile_and_at_0600_it_is_used() {
    let forge = Forge::gitea().only_users(&[(SECRET, "alice")]).start().await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("work.token");
    std::fs::write(&token, format!("{SECRET}\n")).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (_profiles, path) = write_profiles(&format!(
        "[forges.work]\nurl = \"{}\"\ntoken_file = \"{}\"\n",
        forge.base_url(),
        token.display()
    ));
    refused(
        &path,
        &[],
        &[
            &format!("profile work: token_file {} can be read by other users (mode 0644)", token.display()),
            "chmod 600",
        ],
    )
    .await;
    assert!(forge.requests().is_empty(), "nothing was asked of the forge");

    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = run(&["doctor"], &[("GITEA_PROFILES", &path)]).await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}{}", stderr(&o));
    assert!(text.contains(&format!("token from token_file {}", token.display())), "{text}");
    assert!(text.contains("ok    the token belongs to alice"), "{text}");
    assert_eq!(text.lines().last(), Some("ok    ready: work"), "{text}");
    assert!(!text.contains(SECRET), "{text}");
}

#[tokio::test]
async fn gitea_url_or_gitea_token_beside_a_profiles_file_is_refused_saying_where_they_go() {
    let (_dir, path) = write_profiles("[forges.work]\nurl = \"https://git.example.com\"\n");
    for (name, value, said) in [
        (
            "GITEA_URL",
            "https://git.example.com",
            "GITEA_URL (--url) is set beside a profiles file (GITEA_PROFILES)",
        ),
        (
            "GITEA_TOKEN",
            SECRET,
            "GITEA_TOKEN (--token, --token-file) is set beside a profiles file (GITEA_PROFILES)",
        ),
    ] {
        refused(&path, &[(name, value)], &[said, "go in its profile; unset it"]).await;
    }
}

/// `work`, a fake Gitea answering alice's token; `down`, a closed port its flavor must be
/// asked of (`auto`). Port 9 (discard) refuses connections here.
fn work_and_down(work: &str) -> String {
    format!(
        r#"default = "work"

[forges.work]
url = "{work}"
token_env = "WORK_TOKEN"

[forges.down]
url = "http://127.0.0.1:9/"
flavor = "auto"
"#
    )
}

#[tokio::test]
async fn an_unreachable_forge_is_not_ready_in_doctor_while_the_other_is_and_serve_serves_the_other() {
    let work = Forge::gitea().only_users(&[(WORK_TOKEN, "alice")]).repo("alice", "demo").start().await;
    let (_dir, path) = write_profiles(&work_and_down(&work.base_url()));
    let env = [("GITEA_PROFILES", path.as_str()), ("WORK_TOKEN", WORK_TOKEN)];
    let o = run(&["doctor"], &env).await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}{}", stderr(&o));
    // Each profile under its name, in the file's order, after the checks of the server.
    let at =
        |line: &str| text.lines().position(|l| l == line).unwrap_or_else(|| panic!("{line:?} in:\n{text}"));
    let (flow, work_at, down_at) = (
        text.lines().position(|l| l.starts_with("ok    FLOW_GUARD=")).expect("the server's checks"),
        at("      profile work:"),
        at("      profile down:"),
    );
    assert!(flow < work_at && work_at < down_at, "{text}");
    let work_lines = text.lines().skip(work_at).take(down_at - work_at).collect::<Vec<_>>().join("\n");
    assert!(work_lines.contains("ok    Gitea 1.27.0 answers at"), "{work_lines}");
    assert!(work_lines.contains("ok    the token belongs to alice"), "{work_lines}");
    assert!(!work_lines.contains("FAIL"), "{work_lines}");
    let down_lines = text.lines().skip(down_at).collect::<Vec<_>>().join("\n");
    assert!(
        down_lines.contains(
            "FAIL  GET /api/v1/version: connection_failed: could not connect to http://127.0.0.1:9/"
        ) && down_lines.contains("check the url of the profile down and that the forge is running"),
        "{down_lines}"
    );
    let last = text.lines().last().unwrap();
    assert!(last.starts_with("FAIL  not ready: down (GET /api/v1/version: connection_failed: could not connect to http://127.0.0.1:9/"), "{last}");
    assert!(last.ends_with("); ready: work"), "{last}");
    assert!(!text.contains(WORK_TOKEN), "{text}");

    // `serve` starts, lists the tools, serves work, and refuses down's calls naming it.
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
    let server = Server::spawn_args(&["serve"], env).await;
    let tools = server.client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), DEFAULT_TOOL_COUNT);
    let got = server.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await;
    assert!(!got.is_error, "{}", got.text);
    assert_eq!(got.json["forge"], "work");
    let got = server.call("repoGet", json!({"owner": "alice", "repo": "demo", "forge": "down"})).await;
    assert_eq!(got.kind(), "connection_failed", "{}", got.text);
    let message = got.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("the forge down (http://127.0.0.1:9/) could not be served"), "{message}");
    let log = server.stderr();
    assert!(log.contains("the forge down cannot be served until the server restarts"), "{log}");
    assert!(!log.contains(WORK_TOKEN), "{log}");
    server.stop().await;
}

#[tokio::test]
async fn doctor_says_which_profile_s_token_is_refused_and_which_flavor_is_wrong_and_the_rest_are_ready() {
    let work = Forge::gitea().only_users(&[(WORK_TOKEN, "alice")]).start().await;
    let home = Forge::forgejo().only_users(&[(HOME_TOKEN, "alice")]).start().await;
    let (_dir, path) = write_profiles(&format!(
        r#"default = "work"

[forges.work]
url = "{work}"
token_env = "WORK_TOKEN"

[forges.home]
url = "{home}"
token_env = "HOME_TOKEN"

[forges.mislabelled]
url = "{home}"
flavor = "gitea"
token_env = "MISLABELLED_TOKEN"

[forges.basic]
url = "{work}"
username = "alice"
password_env = "ALICE_PW"
"#,
        work = work.base_url(),
        home = home.base_url()
    ));
    let env = [
        ("GITEA_PROFILES", path.as_str()),
        ("WORK_TOKEN", WORK_TOKEN),
        ("HOME_TOKEN", SECRET),
        ("MISLABELLED_TOKEN", HOME_TOKEN),
        ("ALICE_PW", ALICE_PASSWORD),
    ];
    let o = run(&["doctor"], &env).await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}{}", stderr(&o));
    assert!(
        text.contains("FAIL  the forge refused the token (401): create a new access token and set HOME_TOKEN (token_env of the profile home)"),
        "{text}"
    );
    assert!(
        text.contains("FAIL  flavor = \"gitea\", but the forge is Forgejo: set flavor = \"forgejo\" or \"auto\" in the profile mislabelled"),
        "{text}"
    );
    assert_eq!(
        text.lines().last(),
        Some(
            "FAIL  not ready: home (the forge refused the token (401): create a new access token and set HOME_TOKEN (token_env of the profile home)), mislabelled (flavor = \"gitea\", but the forge is Forgejo: set flavor = \"forgejo\" or \"auto\" in the profile mislabelled); ready: work, basic"
        ),
        "{text}"
    );
    assert!(
        text.contains("ok    signed in as alice with its username and password (username and password_env of the profile basic)"),
        "{text}"
    );
    for secret in [SECRET, WORK_TOKEN, HOME_TOKEN, ALICE_PASSWORD] {
        assert!(!text.contains(secret), "{text}");
    }

    // `serve` refuses the calls of the profile whose token its forge refused, naming it.
    let owned: Vec<(String, String)> = env.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
    let server = Server::spawn_args(&["serve"], owned).await;
    let got = server.call("userGetCurrent", json!({"forge": "home"})).await;
    assert_eq!(got.kind(), "connection_failed", "{}", got.text);
    let message = got.json["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("the forge home (http://127.0.0.1:"), "{message}");
    assert!(message.contains(") could not be served: at start"), "{message}");
    assert!(message.contains("the forge refused its token (401)"), "{message}");
    let got = server.call("userGetCurrent", json!({"forge": "basic"})).await;
    assert_eq!(got.json["identity"]["login"], "alice", "{}", got.text);
    assert!(!server.stderr().contains(SECRET), "{}", server.stderr());
    server.stop().await;

    // With the right token, every profile but the mislabelled one is ready.
    let env = [("HOME_TOKEN", HOME_TOKEN), env[0], env[1], env[3], env[4]];
    let text = stdout(&run(&["doctor"], &env).await);
    assert!(text.lines().last().unwrap().ends_with("; ready: work, home, basic"), "{text}");
}

#[tokio::test]
async fn sign_in_settings_beside_a_profiles_file_say_where_each_forges_application_goes() {
    let (_dir, path) = write_profiles("[forges.work]\nurl = \"https://git.example.com\"\n");
    for (name, value) in [("GITEA_OAUTH_CLIENT_ID", "app-1"), ("GITEA_OAUTH_CLIENT_SECRET", SECRET)] {
        refused(
            &path,
            &[(name, value)],
            &[
                &format!("{name} (--"),
                "beside a profiles file",
                "each forge's OAuth2 application goes in its profile (oauth_client_id",
            ],
        )
        .await;
    }
    let key_dir = tempfile::tempdir().unwrap();
    let key = key_dir.path().join("key");
    std::fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let key = key.to_str().unwrap();
    // The server-wide sign-in settings without any profile's application.
    refused(
        &path,
        &[("MCP_PUBLIC_URL", "https://mcp.example.com"), ("MCP_OAUTH_KEY_FILE", key)],
        &["no profile of the profiles file has an OAuth2 application: add oauth_client_id"],
    )
    .await;
    // A profile's application without the server-wide settings.
    let (_dir, path) = write_profiles(
        "[forges.work]\nurl = \"https://git.example.com\"\noauth_client_id = \"app-1\"\noauth_client_secret_env = \"WORK_APP_SECRET\"\n",
    );
    refused(
        &path,
        &[("WORK_APP_SECRET", SECRET), ("MCP_OAUTH_KEY_FILE", key)],
        &["sign-in with the forge (oauth_client_id of profile work) needs MCP_PUBLIC_URL and MCP_OAUTH_KEY_FILE; missing: MCP_PUBLIC_URL"],
    )
    .await;
}

#[tokio::test]
async fn doctor_checks_each_profiles_application_at_its_own_callback() {
    let public = "http://127.0.0.1:8975";
    let app = |id: &str, secret: &str, profile: &str| {
        fake_forge::OAuthApp::confidential(id, secret, &format!("{public}/oauth/callback/{profile}"))
    };
    let (work_app, home_app) =
        (app("work-app", "work-app-secret", "work"), app("home-app", "home-app-secret", "home"));
    let work = Forge::gitea()
        .only_users(&[(WORK_TOKEN, "alice")])
        .options(move |o| o.oauth_apps = vec![work_app.clone()])
        .start()
        .await;
    let home = Forge::forgejo()
        .only_users(&[(HOME_TOKEN, "alice")])
        .options(move |o| o.oauth_apps = vec![home_app.clone()])
        .start()
        .await;
    let (dir, path) = write_profiles(&format!(
        "default = \"work\"\n[forges.work]\nurl = \"{}\"\ntoken_env = \"WORK_TOKEN\"\noauth_client_id = \"work-app\"\noauth_client_secret_env = \"WORK_APP_SECRET\"\n[forges.home]\nurl = \"{}\"\ntoken_env = \"HOME_TOKEN\"\noauth_client_id = \"home-app\"\noauth_client_secret_env = \"HOME_APP_SECRET\"\n",
        work.base_url(),
        home.base_url()
    ));
    let key = std::path::Path::new(&path).with_file_name("key");
    std::fs::write(&key, format!("{}\n", "cd".repeat(32))).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let env = |home_secret: &'static str| {
        vec![
            ("GITEA_PROFILES", path.clone()),
            ("WORK_TOKEN", WORK_TOKEN.to_owned()),
            ("HOME_TOKEN", HOME_TOKEN.to_owned()),
            ("WORK_APP_SECRET", "work-app-secret".to_owned()),
            ("HOME_APP_SECRET", home_secret.to_owned()),
            ("MCP_PUBLIC_URL", public.to_owned()),
            ("MCP_OAUTH_KEY_FILE", key.to_str().unwrap().to_owned()),
        ]
    };
    let run_with = async |home_secret: &'static str| {
        let env = env(home_secret);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        run(&["doctor"], &env).await
    };
    let o = run_with("home-app-secret").await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}{}", stderr(&o));
    for (id, profile) in [("work-app", "work"), ("home-app", "home")] {
        let line = format!(
            "ok    sign-in with the forge: the OAuth2 application {id} accepts this server's secret and redirect URI {public}/oauth/callback/{profile}"
        );
        assert!(text.contains(&line), "{line:?} not in:\n{text}");
    }
    // home's secret wrong: home is not ready, named with where its secret is set.
    let o = run_with("not-the-secret").await;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}{}", stderr(&o));
    assert!(
        text.contains(
            "the forge refused the oauth_client_secret_env or oauth_client_secret_file of profile home"
        ),
        "{text}"
    );
    assert!(text.lines().last().unwrap().contains("not ready: home"), "{text}");
    assert!(!text.contains("not-the-secret") && !text.contains("work-app-secret"), "{text}");
    drop(dir);
}
