//! Test harness: the built binary over stdio, driven by rmcp's client, against the
//! recording fake forge. Tests read like the spec: start, call, then check what the forge
//! received and what the client got.
//!
//! `forge.rs` is how every test starts the fake forge (and the HTTP server most put in
//! front of it), `http.rs` the HTTP clients and server, `redis.rs` a real Redis.
#![allow(dead_code)]

pub mod forge;
pub mod http;
pub mod redis;

pub use forge::Forge;

/// Run a scenario `async fn name(transport: &str)` on both transports as `name::http` and
/// `name::sse`.
#[allow(unused_macros)]
macro_rules! on_both_transports {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn http() {
                super::$name("http").await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sse() {
                super::$name("sse").await
            }
        }
    )*};
}

use std::io::Read;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use fake_forge::{FakeForge, Flavor, Recorded};
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::{RunningService, ServiceExt};
use serde_json::{Map, Value, json};

/// The one way the tests wait, shared with the fake forge's own tests.
pub use fake_forge::wait::{WAIT_LIMIT, let_time_pass, wait_for, wait_until};

/// How many tools `tools/list` shows by default (`TOOLSETS=core`): the 31 everyday
/// operations and the five built-in tools, on both flavors.
pub const DEFAULT_TOOL_COUNT: usize = 39;

/// The token of the default fake forge user `alice`.
pub const ALICE_TOKEN: &str = "tok-alice-0123456789";

/// The token of `root`, the site administrator of [`Forge::sudo`].
pub const ROOT_TOKEN: &str = "tok-root-a11ce0ffee";

/// The password of the default fake forge user `alice` (HTTP Basic).
pub const ALICE_PASSWORD: &str = fake_forge::ALICE_PASSWORD;

/// The value of HTTP Basic for `login` and `password`: `base64(login:password)`.
pub fn basic_blob(login: &str, password: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("{login}:{password}"))
}

/// `text` written as a profiles file (`GITEA_PROFILES`) of mode 0600 in a new directory: the
/// directory (removed when dropped) and the file's path.
pub fn write_profiles(text: &str) -> (tempfile::TempDir, String) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("forges.toml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    (dir, path.to_str().unwrap().to_owned())
}

/// The audit key the tests write with: 64 hex characters, as `openssl rand -hex 32` makes one.
pub const AUDIT_KEY_HEX: &str = "3f0c9a5e1b7d2468ace013579bdf02468ace13579bdf0246813579bdf0246ace";

/// Write [`AUDIT_KEY_HEX`] to `path` (for `AUDIT_KEY_FILE`); returns `path`.
pub fn write_audit_key(path: &std::path::Path) -> PathBuf {
    std::fs::write(path, format!("{AUDIT_KEY_HEX}\n")).unwrap();
    path.to_owned()
}

/// `aegis-gitea-mcp audit verify --key-file KEY FILE...`: exit success and stdout.
pub fn audit_verify(key: &std::path::Path, files: &[&std::path::Path]) -> (bool, String) {
    let out = std::process::Command::new(bin())
        .args(["audit", "verify", "--key-file"])
        .arg(key)
        .args(files)
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Sends the signal `name` (as `kill -s` takes it: TERM, INT, STOP, …) to the process `pid`,
/// which must receive it.
pub fn signal(pid: u32, name: &str) {
    let sent = std::process::Command::new("kill").args(["-s", name, &pid.to_string()]).status().unwrap();
    assert!(sent.success(), "kill -s {name} {pid}: {sent}");
}

/// The server binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_aegis-gitea-mcp"))
}

/// The repository root (where `Cargo.toml`, `.venv/` and `.tools/` live).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The interpreter of the project venv; panics with the fix when the venv is missing.
pub fn python() -> PathBuf {
    let python = repo_root().join(".venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: the Python SDK tests need the project venv. \
         Run `scripts/setup-test-env` (creates .venv from tests/python/requirements.txt) \
         and re-run the tests.",
        python.display()
    );
    python
}

/// What a child run by [`run_with_timeout`] did.
pub struct ChildRun {
    /// The exit status; `None` when the child was killed for taking longer than the timeout.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    /// From just before the spawn until the child ended (or was killed).
    pub elapsed: Duration,
}

/// Runs `cmd` (stdin null, stdout and stderr captured) until it exits or `timeout` passes,
/// then kills it. The pipes are drained on threads so a large output cannot block the child,
/// and the wait is the runtime's own (no polling), so the test's runtime stays free to serve
/// the fake forge living on it. Panics when the program cannot be started.
pub async fn run_with_timeout(cmd: &mut std::process::Command, timeout: Duration) -> ChildRun {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child =
        tokio::process::Command::from(std::mem::replace(cmd, std::process::Command::new(&program)))
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let drain = |fd: std::os::fd::OwnedFd| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = std::fs::File::from(fd).read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(child.stdout.take().unwrap().into_owned_fd().unwrap());
    let err = drain(child.stderr.take().unwrap().into_owned_fd().unwrap());
    let status = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => Some(status.unwrap()),
        Err(_) => {
            let _ = child.kill().await;
            None
        }
    };
    let elapsed = started.elapsed();
    ChildRun { status, stdout: out.join().unwrap(), stderr: err.join().unwrap(), elapsed }
}

/// The settings the server would have with the command line `args` (after the program's
/// name) and the environment `env` alone, as a spawned test server (whose environment is
/// cleared) gets them: the environment's names of the command line's own settings are given
/// as its flags, the others to the settings' own lookup, and this process's environment is
/// not read; the data of envelopes as the forge's JSON (`RESULT_SHAPE=full`) unless `env` says
/// otherwise.
pub fn settings_of(args: &[&str], env: &[(String, String)]) -> aegis_gitea_mcp::config::Settings {
    use aegis_gitea_mcp::config::{Cli, Settings};
    use clap::{CommandFactory, FromArgMatches};
    let command = Cli::command();
    let mut line: Vec<String> =
        std::iter::once("aegis-gitea-mcp").chain(args.iter().copied()).map(str::to_owned).collect();
    let mut env: Vec<(String, String)> = env.to_vec();
    if !env.iter().any(|(k, _)| k == "RESULT_SHAPE") {
        env.push(("RESULT_SHAPE".into(), "full".into()));
    }
    let mut rest = Vec::new();
    for (k, v) in env {
        match command.get_arguments().find(|a| a.get_env().is_some_and(|e| e == k.as_str())) {
            Some(arg) => {
                let long = format!("--{}", arg.get_long().expect("a long flag"));
                if arg.get_action().takes_values() {
                    line.extend([long, v]);
                } else if v == "true" {
                    line.push(long);
                }
            }
            None => rest.push((k, v)),
        }
    }
    // Parsed with no environment names at all, so that nothing of this process's own
    // environment (a developer's shell) leaks into the test's settings.
    let hermetic = Cli::command().mut_args(|a| a.env(None::<&'static str>));
    let matches = hermetic.try_get_matches_from(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    let lookup = move |k: &str| rest.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    Settings::resolve(cli.common, &lookup).expect("the settings resolve")
}

/// `tests/python/oauth_client.py`: the Python SDK signing in as bob (whom the fake forge has
/// signed in) through the MCP server at `url`, then making each call (`TOOL=JSON`) and
/// refreshing its token once.
pub fn oauth_client(url: &str, calls: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(python());
    cmd.current_dir(repo_root()).arg("tests/python/oauth_client.py").args([
        "--url",
        url,
        "--login",
        "bob",
        "--password",
        "unused-the-fake-forge-has-bob-signed-in",
        "--force-refresh",
    ]);
    for c in calls {
        cmd.args(["--call", c]);
    }
    cmd
}

/// A command running the Python driver `tests/python/<script>` with the venv interpreter, from
/// the repository root, with `--mode <mode> --calls <file>` where the file holds `calls`. The
/// returned directory holds that file: keep it until the driver has run.
pub fn python_driver(script: &str, mode: &str, calls: &Value) -> (std::process::Command, tempfile::TempDir) {
    let python = python();
    let root = repo_root();
    let driver = root.join("tests/python").join(script);
    assert!(driver.is_file(), "{} is missing", driver.display());
    let dir = tempfile::tempdir().unwrap();
    let calls_file = dir.path().join("calls.json");
    std::fs::write(&calls_file, serde_json::to_vec(calls).unwrap()).unwrap();
    let mut cmd = std::process::Command::new(python);
    cmd.current_dir(&root).arg(&driver).arg("--mode").arg(mode).arg("--calls").arg(&calls_file);
    (cmd, dir)
}

/// The JSON report a Python driver printed (see `tests/python/mcp_driver_common.py`).
pub struct DriverRun {
    pub doc: Value,
    /// The driver's stdout and stderr (and whatever else the caller added), for failure messages.
    pub context: String,
    pub elapsed: Duration,
}

impl DriverRun {
    /// Runs a [`python_driver`] command and checks that it finished within `timeout`, exited 0
    /// and printed one JSON document. `what` names the run in messages; `more_context` (the
    /// server's stderr, say) is called afterwards and appended to the context.
    pub async fn run(
        cmd: &mut std::process::Command,
        timeout: Duration,
        what: &str,
        more_context: impl FnOnce() -> String,
    ) -> DriverRun {
        let ChildRun { status, stdout, stderr, elapsed } = run_with_timeout(cmd, timeout).await;
        let context =
            format!("--- driver stdout ---\n{stdout}\n--- driver stderr ---\n{stderr}\n{}", more_context());
        let Some(status) = status else {
            panic!("{what} did not finish within {timeout:?}\n{context}");
        };
        assert!(status.success(), "{what} failed with {status}\n{context}");
        let doc: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{what}: output is not JSON ({e})\n{context}"));
        eprintln!("{what}: protocol {} in {elapsed:?}", doc["protocol_version"]);
        DriverRun { doc, context, elapsed }
    }

    /// The record of the `i`-th call.
    pub fn call(&self, i: usize) -> &Value {
        &self.doc["calls"][i]
    }

    /// The parsed text of the `i`-th call, asserting it is a tool result with the wanted
    /// `isError` and exactly one content item.
    pub fn result(&self, i: usize, want_error: bool) -> Value {
        let c = self.call(i);
        assert_eq!(c["is_error"], json!(want_error), "call {i} ({}): {c}\n{}", c["tool"], self.context);
        assert_eq!(c["content_items"], 1, "call {i}: {c}");
        let text = c["text"].as_str().unwrap_or_else(|| panic!("no text: {c}"));
        serde_json::from_str(text).unwrap_or_else(|e| panic!("call {i} text is not JSON ({e}): {text}"))
    }
}

/// What a tool call returned.
#[derive(Debug, Clone)]
pub struct Called {
    pub is_error: bool,
    /// The JSON of the single text content item.
    pub json: Value,
    pub text: String,
}

impl Called {
    /// `error.kind` of an error result.
    pub fn kind(&self) -> &str {
        self.json["error"]["kind"].as_str().unwrap_or("")
    }
    /// `data` of a success result.
    pub fn data(&self) -> &Value {
        &self.json["data"]
    }
}

/// How to start the server.
pub struct Setup {
    pub flavor: Flavor,
    /// The fake forge; `None`: [`Forge::of`] the flavor (alice alone).
    pub forge: Option<Forge>,
    /// `--flavor` value; `auto` makes the server ask the fake forge.
    pub flavor_arg: &'static str,
    pub token: Option<String>,
    pub env: Vec<(String, String)>,
    /// A shell command run before the binary replaces the shell (`exec`), e.g. `trap '' XFSZ`
    /// to start it with a signal ignored (a server of its own process, then).
    pub shell: Option<String>,
    /// The server as a process of its own (the binary over its standard input and output), for
    /// tests of its log, its pid or its exit; otherwise it runs in this process over an
    /// in-memory pipe, through the same stdio transport.
    pub process: bool,
}

impl Setup {
    pub fn gitea() -> Setup {
        Setup {
            flavor: Flavor::Gitea,
            forge: None,
            flavor_arg: "gitea",
            token: Some(ALICE_TOKEN.into()),
            env: Vec::new(),
            shell: None,
            process: false,
        }
    }
    pub fn forgejo() -> Setup {
        Setup { flavor: Flavor::Forgejo, flavor_arg: "forgejo", ..Setup::gitea() }
    }
    /// The server as a process of its own (see `process`).
    pub fn process(mut self) -> Setup {
        self.process = true;
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Setup {
        self.env.push((k.into(), v.into()));
        self
    }
    /// With the audit trail in `log`, keyed with [`AUDIT_KEY_HEX`] from a file beside it
    /// (`audit.key` in the same directory).
    pub fn audit(self, log: &std::path::Path) -> Setup {
        let key = write_audit_key(&log.with_file_name("audit.key"));
        self.env("AUDIT_LOG", log.to_str().unwrap()).env("AUDIT_KEY_FILE", key.to_str().unwrap())
    }
    pub fn no_token(mut self) -> Setup {
        self.token = None;
        self
    }
    pub fn auto(mut self) -> Setup {
        self.flavor_arg = "auto";
        self
    }
    /// Against [`Forge::sudo`] as `token` (`None`: anonymous), with `SUDO_ALLOWED_USERS` set to
    /// `allowed` when given.
    pub fn sudo(token: Option<&str>, allowed: Option<&str>) -> Setup {
        let mut s = Setup { forge: Some(Forge::sudo()), token: token.map(str::to_owned), ..Setup::gitea() };
        if let Some(a) = allowed {
            s = s.env("SUDO_ALLOWED_USERS", a);
        }
        s
    }
    /// The server's identity is alice's login and password (HTTP Basic), not a token.
    pub fn basic(self) -> Setup {
        self.no_token().env("GITEA_USERNAME", "alice").env("GITEA_PASSWORD", ALICE_PASSWORD)
    }
}

/// The server binary over stdio with an rmcp client, pointed at any forge URL (the fake
/// forge, or a real one in the end-to-end tests).
pub struct Server {
    pub client: RunningService<RoleClient, ()>,
    /// Where a spawned server's stderr goes; `None` in process (it has no log of its own).
    stderr_path: Option<PathBuf>,
    /// The server's process (killed on drop); `None` in process.
    child: Option<tokio::process::Child>,
    _dir: tempfile::TempDir,
}

impl Server {
    pub async fn spawn(
        url: &str,
        flavor_arg: &str,
        token: Option<String>,
        env: Vec<(String, String)>,
    ) -> Server {
        Server::spawn_in(url, flavor_arg, token, env, None).await
    }

    /// Like `spawn`, started by `sh -c "<shell>; exec <the binary>"` when `shell` is given.
    pub async fn spawn_in(
        url: &str,
        flavor_arg: &str,
        token: Option<String>,
        env: Vec<(String, String)>,
        shell: Option<&str>,
    ) -> Server {
        let mut env = env;
        if let Some(t) = token {
            env.insert(0, ("GITEA_TOKEN".into(), t));
        }
        Server::spawn_line(&["serve", "--url", url, "--flavor", flavor_arg], env, shell).await
    }

    /// The binary serving over stdio with the command line `line` (`serve` and its flags: a
    /// profiles file, say) and the environment `env` alone.
    pub async fn spawn_args(line: &[&str], env: Vec<(String, String)>) -> Server {
        Server::spawn_line(line, env, None).await
    }

    async fn spawn_line(line: &[&str], env: Vec<(String, String)>, shell: Option<&str>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let stderr_path = dir.path().join("stderr.log");
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut cmd = match shell {
            None => tokio::process::Command::new(bin()),
            Some(shell) => {
                let mut c = tokio::process::Command::new("sh");
                c.args(["-c", &format!("{shell}; exec \"$0\" \"$@\"")]).arg(bin());
                c
            }
        };
        cmd.args(line);
        cmd.env_clear();
        // The tests of the envelope's `data` as the forge's own JSON; the compact shape has its own.
        cmd.env("RESULT_SHAPE", "full");
        cmd.env("PATH", test_path());
        for (k, v) in env {
            cmd.env(k, v);
        }
        // The process is this harness's own (not the client transport's, which kills a server
        // that takes more than a few seconds to exit): it ends when its standard input closes,
        // and is waited for.
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::from(stderr)).kill_on_drop(true);
        let mut child = cmd.spawn().expect("start the server");
        let pipes = (child.stdout.take().expect("piped stdout"), child.stdin.take().expect("piped stdin"));
        let client = match ().serve(pipes).await {
            Ok(c) => c,
            Err(e) => {
                let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                panic!("MCP handshake with the server failed ({e}); its stderr:\n{log}");
            }
        };
        Server { client, stderr_path: Some(stderr_path), child: Some(child), _dir: dir }
    }

    /// The same server in this process, over an in-memory pipe instead of standard input and
    /// output (the server's own stdio transport at the other end): for tests of what it
    /// answers, not of the process — it has no log, no pid and no exit (`stderr` refuses).
    pub async fn in_process(
        url: &str,
        flavor_arg: &str,
        token: Option<String>,
        env: Vec<(String, String)>,
    ) -> Server {
        let mut env = env;
        if let Some(t) = token {
            env.push(("GITEA_TOKEN".into(), t));
        }
        let settings = settings_of(&["serve", "--url", url, "--flavor", flavor_arg], &env);
        Server::of_settings(settings).await
    }

    /// A server of these settings in this process, as `in_process`.
    pub async fn of_settings(settings: aegis_gitea_mcp::config::Settings) -> Server {
        let max_line = settings.max_body_bytes;
        let server = std::sync::Arc::new(
            aegis_gitea_mcp::server::Server::start(settings).await.expect("the server starts"),
        );
        // As `serve` over stdio: a metrics listener of its own when METRICS_LISTEN asks.
        aegis_gitea_mcp::transport::metrics::serve_own(&server).await.expect("the metrics listener");
        let (client_end, server_end) = tokio::io::duplex(1 << 16);
        let (input, output) = tokio::io::split(server_end);
        let handler = aegis_gitea_mcp::mcp::McpHandler::new(server);
        tokio::spawn(aegis_gitea_mcp::transport::stdio::serve_on(handler, input, output, max_line));
        let client = ().serve(client_end).await.expect("the MCP handshake");
        Server { client, stderr_path: None, child: None, _dir: tempfile::tempdir().unwrap() }
    }

    /// What the server wrote to stderr so far; only a server of its own process has one.
    pub fn stderr(&self) -> String {
        let file = self.stderr_path.as_ref().expect("a server of its own process, not an in-process one");
        std::fs::read_to_string(file).unwrap_or_default()
    }

    /// Stops the server as a client ending its session does: its input closed.
    pub async fn stop(self) {
        let _ = self.client.cancel().await;
    }

    /// Call a tool; panics on a JSON-RPC error. A call held for a person's confirmation
    /// (this client cannot be asked) is made again with the `confirm` its error names, as an
    /// agent would once the person agreed (the real-forge tests' deletes).
    pub async fn call(&self, tool: &str, args: Value) -> Called {
        call_confirming(&self.client, tool, args, |_| ()).await
    }
}

/// `call_on`, panicking on a JSON-RPC error; a call the server holds for a person's
/// confirmation (`not_confirmed`: this client cannot be asked) is made again with the
/// `confirm` its error names, as an agent would once the person agreed, after `between` has
/// looked at the first answer.
pub async fn call_confirming(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
    between: impl FnOnce(&Called),
) -> Called {
    let first =
        call_on(client, tool, args.clone()).await.unwrap_or_else(|e| panic!("{tool}: JSON-RPC error {e}"));
    let Some(target) = confirm_asked(&first) else { return first };
    between(&first);
    let mut args = args;
    args.as_object_mut().expect("arguments are an object").insert("confirm".into(), target.into());
    call_on(client, tool, args).await.unwrap_or_else(|e| panic!("{tool}: JSON-RPC error {e}"))
}

/// One `tools/call` through an rmcp client.
pub async fn call_on(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> Result<Called, rmcp::ServiceError> {
    let mut p = CallToolRequestParams::new(tool.to_owned());
    if let Value::Object(m) = args {
        p = p.with_arguments(m);
    }
    let r = client.call_tool(p).await?;
    let text = r.content[0].as_text().expect("a text item").text.clone();
    let json: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("result is not JSON ({e}): {text}"));
    // One text item, and a resource link exactly when the envelope has a `link`.
    match (&r.content[1..], json.get("link")) {
        ([], None) => {}
        ([item], Some(link)) => {
            let l =
                item.as_resource_link().unwrap_or_else(|| panic!("{tool}: a second item that is no link"));
            assert_eq!(
                (json!(l.uri), json!(l.mime_type), json!(l.size)),
                (link["uri"].clone(), link["mime_type"].clone(), link["size"].clone()),
                "{tool}: the resource link differs from the envelope's"
            );
        }
        (more, _) => panic!("{tool}: {} content items: {text}", more.len() + 1),
    }
    let is_error = r.is_error == Some(true);
    // This client speaks a protocol given typed results: a success carries the same JSON in
    // both channels, an error text only.
    let typed = client.peer_info().is_some_and(|i| i.protocol_version.as_str() >= "2025-06-18");
    match (&r.structured_content, is_error) {
        (Some(s), false) => assert_eq!(s, &json, "the structured channel differs from the text"),
        (None, false) => assert!(!typed, "{tool}: a success without structuredContent: {text}"),
        (Some(s), true) => panic!("{tool}: an error result with structuredContent {s}"),
        (None, true) => {}
    }
    Ok(Called { is_error, json, text })
}

/// Minimal valid arguments for a schema: required members only, simple values.
pub fn minimal(schema: &Value, name: &str) -> Value {
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    if name == "content_base64" {
        return json!("aGk=");
    }
    // A secret's value is redacted wherever it occurs: one of its own, not the `x1` of the
    // names a confirmation's target holds.
    if matches!(name, "data" | "password") {
        return json!("s3cret-value-of-its-own");
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("integer") | Some("number") => {
            json!(schema.get("minimum").and_then(Value::as_i64).unwrap_or(1).max(1))
        }
        Some("boolean") => json!(true),
        Some("array") => {
            let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = minimal(schema.get("items").unwrap_or(&json!({"type": "string"})), "");
            Value::Array((0..min).map(|_| item.clone()).collect())
        }
        Some("object") => {
            let mut out = Map::new();
            let props = schema.get("properties").and_then(Value::as_object);
            for r in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                let r = r.as_str().unwrap();
                let sub = props.and_then(|p| p.get(r)).cloned().unwrap_or(json!({"type": "string"}));
                out.insert(r.to_owned(), minimal(&sub, r));
            }
            Value::Object(out)
        }
        _ => json!("x1"),
    }
}

/// The calls of the typed-results tests: the ten everyday tasks as a real Gitea answered
/// them (the fake forge replays the recording: `FakeForge::replay`), in both shapes; every
/// tool `tools/list` shows by default, with minimal arguments on alice's `demo`; a sample of
/// other operations through the call tool; and calls that fail.
pub fn typed_result_calls(flavor: Flavor, forge: &FakeForge) -> Vec<Value> {
    let mut calls = Vec::new();
    if flavor == Flavor::Gitea {
        let recording: Value =
            serde_json::from_str(include_str!("../../../benches/fixtures/everyday-tasks-gitea.json"))
                .unwrap();
        forge.replay(&recording);
        for c in recording["calls"].as_array().unwrap() {
            let mut full = c["args"].clone();
            full["shape"] = json!("full");
            calls.push(json!({"tool": c["tool"], "arguments": c["args"]}));
            calls.push(json!({"tool": c["tool"], "arguments": full}));
        }
    }
    let spec_flavor = match flavor {
        Flavor::Gitea => aegis_core::catalog::Flavor::Gitea,
        Flavor::Forgejo => aegis_core::catalog::Flavor::Forgejo,
    };
    let catalog =
        aegis_core::catalog::Catalog::build(spec_flavor.embedded_spec(), spec_flavor, None).unwrap();
    let on_demo = |schema: &Value| {
        let mut args = minimal(schema, "");
        for (name, value) in [("owner", json!("alice")), ("repo", json!("demo")), ("index", json!(1))] {
            if schema["properties"].get(name).is_some() {
                args[name] = value;
            }
        }
        args
    };
    for t in catalog.operations().filter(|t| t.core) {
        calls.push(
            json!({"tool": t.name, "arguments": on_demo(&Value::Object((**t.input_schema()).clone()))}),
        );
    }
    for id in [
        "repoListTags",
        "repoGetBranch",
        "issueGetMilestonesList",
        "repoListCollaborators",
        "userListRepos",
        "getVersion",
        "repoGetLanguages",
        "orgGetAll",
    ] {
        let t = catalog.get(id).unwrap_or_else(|| panic!("{id} is an operation of {flavor:?}"));
        let arguments = on_demo(&Value::Object((**t.input_schema()).clone()));
        calls.push(json!({"tool": "gitea_call_operation", "arguments": {"operation_id": id, "arguments": arguments}}));
    }
    calls.extend([
        json!({"tool": "gitea_search_operations", "arguments": {"query": "list labels"}}),
        json!({"tool": "gitea_get_operation_schema", "arguments": {"operation_id": "repoGet"}}),
        json!({"tool": "gitea_api_request", "arguments": {"method": "GET", "path": "/repos/alice/demo"}}),
        // Errors: refused before sending, and the forge's.
        json!({"tool": "issueListIssues", "arguments": {"owner": "alice", "repo": "demo", "state": "bogus"}}),
        json!({"tool": "repoGet", "arguments": {"owner": "alice", "repo": "no-such-repo"}}),
        json!({"tool": "gitea_download_attachment", "arguments": {"uuid": "0f1e2d3c-no-such"}}),
    ]);
    calls
}

/// Checks a driver's report of `typed_result_calls`: every tool declares an output schema; a
/// success carries `structuredContent` the SDK accepted, the same JSON as its text and what
/// its operation's typed schema says; an error result was accepted, with text only. At least
/// `successes` calls succeeded.
pub fn assert_typed_report(doc: &Value, successes: usize) {
    assert_eq!(doc["tools_with_output_schema"], doc["tool_count"], "{doc}");
    let calls = doc["calls"].as_array().unwrap();
    let (mut ok, mut typed) = (0, 0);
    for c in calls {
        assert!(c.get("jsonrpc_error").is_none(), "{c}");
        if c["is_error"] == true {
            assert_eq!(c["structured"], false, "an error result with structuredContent: {c}");
            continue;
        }
        ok += 1;
        assert_eq!(c["structured"], true, "a success without structuredContent: {c}");
        assert_eq!(c["channels_equal"], true, "the channels differ: {c}");
        if let Some(errors) = c["typed_errors"].as_array() {
            assert!(errors.is_empty(), "{}: {errors:?}\n{}", c["tool"], c["text"]);
            typed += 1;
        }
    }
    assert!(ok >= successes, "{ok} of {} calls succeeded", calls.len());
    // All but the three built-in tools' successes are operations, checked against their types.
    assert!(typed + 3 >= ok, "only {typed} of {ok} successes were checked against their typed schemas");
    assert!(calls.iter().any(|c| c["is_error"] == true), "no error result was tried");
}

/// A success `result` of `tool` is what the operation's output schema (the schema tool's,
/// for the shape the result has) says.
pub async fn assert_typed(client: &RunningService<RoleClient, ()>, tool: &str, result: &Value) {
    let shape = if result.get("shape").is_some() { "compact" } else { "full" };
    let answer =
        call_on(client, "gitea_get_operation_schema", json!({"operation_id": tool, "output": shape}))
            .await
            .unwrap_or_else(|e| panic!("the schema tool for {tool}: {e}"));
    assert_eq!(answer.json["output_shape"], shape, "{}", answer.text);
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&answer.json["output_schema"])
        .unwrap_or_else(|e| panic!("{tool}: the output schema does not compile: {e}"));
    let errors: Vec<String> =
        validator.iter_errors(result).take(3).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{tool} ({shape}): {errors:?}\n{result}");
}

/// A running server and its fake forge.
pub struct Harness {
    pub forge: FakeForge,
    pub client: RunningService<RoleClient, ()>,
    /// Where a spawned server's stderr goes; `None` in process.
    stderr_path: Option<PathBuf>,
    /// The server's process; `None` in process.
    child: Option<tokio::process::Child>,
    confirmed: std::sync::atomic::AtomicUsize,
    _dir: tempfile::TempDir,
}

/// The target a `not_confirmed` error tells the agent to send as `confirm`, if `c` is one.
pub fn confirm_asked(c: &Called) -> Option<String> {
    if !c.is_error || c.json["error"]["kind"] != "not_confirmed" {
        return None;
    }
    let message = c.json["error"]["message"].as_str()?;
    let at = message.find("\"confirm\": ")? + "\"confirm\": ".len();
    let mut stream = serde_json::Deserializer::from_str(&message[at..]).into_iter::<String>();
    stream.next()?.ok()
}

impl Harness {
    pub async fn start(setup: Setup) -> Harness {
        let forge = setup.forge.unwrap_or_else(|| Forge::of(setup.flavor)).start().await;
        let server = if setup.process || setup.shell.is_some() {
            Server::spawn_in(
                &forge.base_url(),
                setup.flavor_arg,
                setup.token,
                setup.env,
                setup.shell.as_deref(),
            )
            .await
        } else {
            Server::in_process(&forge.base_url(), setup.flavor_arg, setup.token, setup.env).await
        };
        Harness::around(forge, server)
    }

    fn around(forge: FakeForge, server: Server) -> Harness {
        Harness {
            forge,
            client: server.client,
            stderr_path: server.stderr_path,
            child: server.child,
            confirmed: Default::default(),
            _dir: server._dir,
        }
    }

    pub async fn tools(&self) -> Vec<Tool> {
        self.client.list_all_tools().await.unwrap()
    }

    /// Call a tool; panics on a JSON-RPC error (use `call_raw` to see those). A call the
    /// server holds for a person's confirmation (this client cannot be asked) is checked to
    /// have sent nothing, then made again with the `confirm` its error names, as an agent
    /// would once the person agreed; `confirmed` counts those.
    pub async fn call(&self, tool: &str, args: Value) -> Called {
        let before = self.forge.requests().len();
        call_confirming(&self.client, tool, args, |_| {
            // The server's own questions (who the caller is, what goes with the target: reads)
            // are not the call.
            let sent: Vec<String> = self.forge.requests()[before..]
                .iter()
                .filter(|r| r.method != "GET")
                .map(|r| format!("{} {}", r.method, r.raw_path))
                .collect();
            assert!(sent.is_empty(), "{tool}: sent before it was confirmed: {sent:?}");
            self.confirmed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .await
    }

    /// How many calls `call` made again with `confirm`.
    pub fn confirmed(&self) -> usize {
        self.confirmed.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub async fn call_raw(&self, tool: &str, args: Value) -> Result<Called, rmcp::ServiceError> {
        call_on(&self.client, tool, args).await
    }

    /// The requests the forge received, without the server's own `/version` and `/user`.
    pub fn tool_requests(&self) -> Vec<Recorded> {
        self.forge
            .requests()
            .into_iter()
            .filter(|r| r.raw_path != "/api/v1/version" && r.raw_path != "/api/v1/user")
            .collect()
    }

    /// The last request a tool sent.
    pub fn last(&self) -> Recorded {
        self.tool_requests().pop().expect("the forge received a request")
    }

    /// What the server wrote to stderr so far; only a server of its own process has one.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.stderr_file()).unwrap_or_default()
    }

    fn stderr_file(&self) -> &PathBuf {
        self.stderr_path
            .as_ref()
            .expect("a server of its own process (`Setup::process`), not an in-process one")
    }

    /// The server's process id; only a server of its own process has one.
    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .and_then(tokio::process::Child::id)
            .expect("a server of its own process (`Setup::process`), still running")
    }

    /// Stop the server as a client ending its session does: its standard input closed, it
    /// exits (a process of its own is waited for).
    pub async fn stop(self) {
        self.stopped().await;
    }

    /// `stop`, then everything the server wrote to stderr.
    pub async fn stop_with_stderr(self) -> String {
        assert!(
            self.stderr_path.is_some(),
            "a server of its own process (`Setup::process`), not an in-process one"
        );
        self.stopped().await
    }

    /// Stops the server; its whole log, if it has one.
    async fn stopped(mut self) -> String {
        let _ = self.client.cancel().await;
        if let Some(child) = self.child.as_mut() {
            tokio::time::timeout(WAIT_LIMIT, child.wait())
                .await
                .unwrap_or_else(|_| {
                    panic!("the server did not exit within {WAIT_LIMIT:?} of its input closing")
                })
                .expect("wait for the server");
        }
        // Read before `self`, which holds the log's directory, is dropped.
        self.stderr_path.as_ref().map(|p| std::fs::read_to_string(p).unwrap_or_default()).unwrap_or_default()
    }
}

/// Assert a success envelope with the usual shape and return its data.
pub fn assert_envelope(c: &Called) -> &Value {
    assert!(!c.is_error, "expected success, got {}", c.text);
    let mut keys: Vec<&str> = c.json.as_object().unwrap().keys().map(String::as_str).collect();
    // `withheld` ends it when authors' text was withheld (CONTENT_TRUST).
    if keys.last() == Some(&"withheld") {
        keys.pop();
    }
    // `shape` says when `data` is compact; the forge's own JSON has no such member.
    let compact = c.json.get("shape").is_some();
    let expected: &[&str] = if compact {
        &["identity", "request", "status", "pagination", "untrusted_content", "shape", "data"]
    } else {
        &["identity", "request", "status", "pagination", "untrusted_content", "data"]
    };
    assert_eq!(keys, expected, "{}", c.text);
    if compact {
        assert_eq!(c.json["shape"], "compact", "{}", c.text);
    }
    c.data()
}

/// The `PATH` a spawned server is given (its environment is otherwise cleared).
#[allow(clippy::disallowed_methods)]
pub fn test_path() -> String {
    std::env::var("PATH").unwrap_or_default()
}
