//! The repository's own rules, checked from its files: every Rust file opens with a module
//! doc (what it is for, before any code), and no file sends a reader to a document that does
//! not ship with the repository (the design notes it was built from live elsewhere; what they
//! decided is in the README, ARCHITECTURE.md and `docs/`).

use std::path::{Path, PathBuf};

/// Where the repository's own text is (generated snapshots, vendored specs and fuzz inputs
/// are not).
const ROOTS: &[&str] = &[
    "src",
    "core/src",
    "tests",
    "benches",
    "fake-forge/src",
    "fake-forge/tests",
    "fuzz/fuzz_targets",
    "fuzz-bodies/src",
    "scripts",
    "docs",
    "deploy",
    ".ci",
];
const SKIPPED: &[&str] = &["tests/snapshots"];
const ROOT_FILES: &[&str] = &[
    "README.md",
    "ARCHITECTURE.md",
    "STYLE.md",
    "Cargo.toml",
    "core/Cargo.toml",
    "fuzz/Cargo.toml",
    "fuzz-bodies/Cargo.toml",
];

/// Names of documents that do not ship, written in two parts so that this file does not
/// name them itself.
const ELSEWHERE: &[(&str, &str)] = &[
    ("../sha", "red"),
    ("INTER", "FACE.md"),
    ("DES", "IGN.md"),
    ("ADR ", "0005"),
    ("ADR-", "0005"),
    ("stateless-http", "-auth"),
    ("real-forges", ".md"),
    ("farm-", "studio"),
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let relative = path.strip_prefix(repo()).unwrap_or(&path).to_string_lossy().into_owned();
        if SKIPPED.iter().any(|s| relative.starts_with(s)) {
            continue;
        }
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn all_files() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ROOT_FILES.iter().map(|f| repo().join(f)).collect();
    for root in ROOTS {
        files(&repo().join(root), &mut out);
    }
    out
}

#[test]
fn every_rust_file_opens_with_its_module_doc() {
    let missing: Vec<String> = all_files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter(|p| !std::fs::read_to_string(p).unwrap_or_default().starts_with("//!"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(missing.is_empty(), "files without a module doc at the top: {missing:#?}");
}

#[test]
fn no_file_points_to_a_document_that_does_not_ship() {
    let names: Vec<String> = ELSEWHERE.iter().map(|(a, b)| format!("{a}{b}")).collect();
    let mut found = Vec::new();
    for path in all_files() {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        for (n, line) in text.lines().enumerate() {
            if let Some(name) = names.iter().find(|name| line.contains(name.as_str())) {
                found.push(format!("{}:{}: {name}", path.display(), n + 1));
            }
        }
    }
    assert!(found.is_empty(), "references to documents outside the repository: {found:#?}");
}

#[test]
fn the_rules_see_the_files_they_judge() {
    let all = all_files();
    for expected in [
        "src/call.rs",
        "core/src/guard/mod.rs",
        "tests/integration/support/mod.rs",
        "fake-forge/src/lib.rs",
        "README.md",
        "docs/PERFORMANCE.md",
    ] {
        assert!(all.contains(&repo().join(expected)), "{expected} is not read");
    }
    assert!(!all.iter().any(|p| p.starts_with(repo().join("tests/snapshots"))));
}

/// The modules of each crate in layers, lowest first. A module imports only modules of lower
/// layers (never one of its own layer, so no two modules can import each other), so a new
/// import that runs back up, or a new module not placed here, fails this test.
const LAYERS: &[(&str, &[&[&str]])] = &[
    (
        "core/src",
        &[
            &["identity", "error"],
            &["catalog"],
            &["path"],
            &["args"],
            &["decode"],
            &["shape", "envelope"],
            &["guard"],
            &["policy"],
            &["discovery"],
            &["admission"],
        ],
    ),
    (
        "src",
        &[
            &["config", "log", "metrics"],
            &["identity", "state"],
            &["executor", "limits", "audit"],
            &["oauth"],
            &["server"],
            &["confirm"],
            &["call"],
            &["resources"],
            &["mcp"],
            &["transport"],
            &["doctor", "fuzzing"],
        ],
    ),
    (
        "fake-forge/src",
        &[
            &["util", "reply", "recorded", "auth", "multipart", "router", "catch_all", "wait"],
            &["paging", "fallback", "script"],
            &["model", "spec"],
            &["oauth"],
            &["server"],
        ],
    ),
];

/// Files that are a crate's root or only its tests, not a layer of its pipeline.
const UNLAYERED: &[&str] = &["lib", "main", "tidy"];

/// The top-level modules of the crate that `file` (inside `src`) imports with `crate::…`,
/// its tests left out (they may build whatever they check from anywhere).
fn imports(text: &str) -> Vec<String> {
    let code = text.find("#[cfg(test)]\nmod tests").map_or(text, |at| &text[..at]);
    let mut out = Vec::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a, b::c}`: every first segment inside the braces.
                let inner = group.split('}').next().unwrap_or("");
                out.extend(inner.split(',').filter_map(|p| first_segment(p.trim())));
            } else if let Some(name) = first_segment(rest) {
                out.push(name);
            }
        }
    }
    out
}

fn first_segment(path: &str) -> Option<String> {
    let name: String =
        path.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit()).collect();
    (!name.is_empty()).then_some(name)
}

/// Every import of `root` that breaks its layers, as `file: module -> module`.
fn layering_breaks(root: &str, layers: &[&[&str]]) -> Vec<String> {
    let layer_of = |module: &str| layers.iter().position(|l| l.contains(&module));
    let mut files_found = Vec::new();
    files(&repo().join(root), &mut files_found);
    let mut breaks = Vec::new();
    for path in files_found.iter().filter(|p| p.extension().is_some_and(|e| e == "rs")) {
        let relative = path.strip_prefix(repo().join(root)).expect("under its root");
        let module = relative.iter().next().and_then(|m| m.to_str()).unwrap_or("").trim_end_matches(".rs");
        if UNLAYERED.contains(&module) {
            continue;
        }
        let Some(own) = layer_of(module) else {
            breaks.push(format!("{root}/{}: module `{module}` is in no layer", relative.display()));
            continue;
        };
        let text = std::fs::read_to_string(path).expect("a source file");
        for target in imports(&text) {
            if target == module {
                continue;
            }
            match layer_of(&target) {
                Some(l) if l < own => {}
                _ => breaks.push(format!("{root}/{}: {module} -> {target}", relative.display())),
            }
        }
    }
    breaks.sort();
    breaks.dedup();
    breaks
}

#[test]
fn every_module_imports_only_layers_below_its_own() {
    for (root, layers) in LAYERS {
        let breaks = layering_breaks(root, layers);
        assert!(breaks.is_empty(), "imports that run up or across a layer in {root}: {breaks:#?}");
    }
}

#[test]
fn the_layering_rule_sees_imports_as_they_are_written() {
    let text = "use crate::catalog::Catalog;\nuse crate::{audit, identity::Caller};\n// crate::server in a comment\nlet x = crate::call::run(); // crate::mcp\n#[cfg(test)]\nmod tests {\n    use crate::transport;\n}\n";
    assert_eq!(imports(text), ["catalog", "audit", "identity", "call"]);
}

/// The core crate is the pipeline alone: no async runtime, HTTP or MCP library, and none of
/// this repository's other crates, among everything it builds on (as Cargo resolves it).
#[test]
fn the_core_crate_builds_on_no_runtime_http_or_mcp_crate() {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["tree", "--offline", "-p", "aegis-core", "-e", "normal", "--prefix", "none", "-f", "{p}"])
        .current_dir(repo())
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).expect("text");
    let names: Vec<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(names.contains(&"aegis-core") && names.contains(&"serde_json"), "{tree}");
    for forbidden in [
        "tokio",
        "reqwest",
        "rmcp",
        "axum",
        "hyper",
        "hyper-util",
        "http",
        "http-body",
        "tower",
        "futures",
        "mio",
        "aegis-gitea-mcp",
        "fake-forge",
    ] {
        assert!(!names.contains(&forbidden), "aegis-core builds on {forbidden}:\n{tree}");
    }
}

/// Every crate of the root workspace takes its lints from the workspace (`[lints]` with
/// `workspace = true`), so that they are declared once, in the root `Cargo.toml`.
#[test]
fn every_crate_of_the_workspace_takes_the_workspace_lints() {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).expect("the root manifest");
    let members = manifest
        .split_once("\nmembers = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("the workspace's members");
    let members: Vec<&str> =
        members.split(',').map(|m| m.trim().trim_matches('"')).filter(|m| !m.is_empty()).collect();
    assert!(members.contains(&"fuzz-bodies") && members.contains(&"core"), "{members:?}");
    for member in members {
        let text =
            std::fs::read_to_string(repo().join(member).join("Cargo.toml")).expect("a member's manifest");
        assert!(
            text.contains("\n[lints]\nworkspace = true\n"),
            "{member}/Cargo.toml declares lints of its own"
        );
    }
}

/// Where each library whose types must not spread may be named (outside string literals and
/// tests): the MCP library in the MCP glue and the transports (and the fuzz bodies' entry
/// points, `src/fuzzing.rs`, which tell a transport's messages in public types; the bodies
/// themselves, `fuzz-bodies/`, name none of these), the HTTP client in the executor and the credential, the
/// event-stream parser in the one module that reads event streams, the store's client in the
/// module of the shared store.
const CONFINED: &[(&str, &[&str])] = &[
    ("rmcp::", &["src/mcp/", "src/transport/", "src/fuzzing.rs"]),
    ("reqwest::", &["src/executor/", "src/identity/mod.rs"]),
    ("sse_stream::", &["src/transport/plain_json.rs"]),
    ("redis::", &["src/state/"]),
];

/// A line without what its string literals say.
fn outside_strings(line: &str) -> String {
    let (mut out, mut quoted, mut escaped) = (String::new(), false, false);
    for c in line.chars() {
        match (quoted, escaped, c) {
            (true, false, '\\') => escaped = true,
            (true, true, _) => escaped = false,
            (_, _, '"') => quoted = !quoted,
            (false, _, c) => out.push(c),
            _ => {}
        }
    }
    out
}

#[test]
fn libraries_stay_in_the_modules_that_wrap_them() {
    let mut found = Vec::new();
    let mut sources = Vec::new();
    files(&repo().join("src"), &mut sources);
    files(&repo().join("fuzz-bodies/src"), &mut sources);
    for path in sources.iter().filter(|p| p.extension().is_some_and(|e| e == "rs")) {
        let relative = path.strip_prefix(repo()).expect("in the repository").to_string_lossy().into_owned();
        if relative == "src/tidy.rs" {
            continue; // the rule names what it looks for
        }
        let text = std::fs::read_to_string(path).expect("a source file");
        let code = text.find("#[cfg(test)]\nmod tests").map_or(text.as_str(), |at| &text[..at]);
        for (n, line) in code.lines().enumerate() {
            let line = outside_strings(line);
            let line = line.split("//").next().unwrap_or("");
            for (library, allowed) in CONFINED {
                if line.contains(library) && !allowed.iter().any(|a| relative.starts_with(a)) {
                    found.push(format!("{relative}:{}: {library}", n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "libraries named outside their modules: {found:#?}");
    assert_eq!(
        outside_strings(r#"tracing::info!(target: "rmcp::service", "a \"q\" b"); rmcp::x"#),
        "tracing::info!(target: , ); rmcp::x"
    );
}

/// Where time itself is what an integration test does to the server, the one kind of pause a
/// test may make: each file's calls of `fake_forge::wait::let_time_pass` (Rust) or of
/// `sleep` (the Python drivers), with the reason. Anything else waits for what it needs,
/// bounded, with `fake_forge::wait::wait_until` (or the drivers' `wait_until`): a fixed sleep
/// passes on a quiet machine and fails on a loaded one.
const TIME_AS_STIMULUS: &[(&str, usize, &str)] = &[
    ("tests/integration/confirm.rs", 1, "a question's lifetime (one second) runs out before it is answered"),
    (
        "tests/integration/reliability.rs",
        1,
        "a request's body comes in a second write after its head, as Python's httpx sends it",
    ),
    ("tests/integration/shutdown.rs", 1, "a call in flight outlives the MCP library's own drain of 2 s"),
    (
        "tests/python/mcp_driver_common.py",
        2,
        "a person who answers only after CONFIRM_TIMEOUT; the poll of the drivers' wait_until",
    ),
    ("tests/python/probe_gitea_oauth.py", 3, "a forge's tokens minted in the same second are the same token"),
];

/// The files of the integration tests and their drivers, as paths relative to the repository,
/// with their text.
fn integration_test_files() -> Vec<(String, String)> {
    let mut paths = Vec::new();
    for dir in ["tests", "fake-forge/tests"] {
        files(&repo().join(dir), &mut paths);
    }
    paths
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs" || e == "py"))
        .map(|p| {
            let relative = p.strip_prefix(repo()).expect("in the repository").to_string_lossy().into_owned();
            (relative, std::fs::read_to_string(&p).expect("a test file"))
        })
        .collect()
}

#[test]
fn integration_tests_wait_for_conditions_not_for_time() {
    // The waiting helpers themselves live in `fake-forge/src/wait.rs`, not among the tests.
    let mut bare = Vec::new();
    let mut pauses = std::collections::BTreeMap::new();
    for (file, text) in integration_test_files() {
        let python = file.ends_with(".py");
        for (n, line) in text.lines().enumerate() {
            let code = outside_strings(line);
            let code = code.split(if python { "#" } else { "//" }).next().unwrap_or("");
            if python && code.contains("sleep(") || code.contains("let_time_pass(") && !code.contains("fn ") {
                *pauses.entry(file.clone()).or_insert(0) += 1;
            } else if !python && code.contains("sleep(") {
                bare.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(bare.is_empty(), "sleeps in integration tests (wait with support::wait_until): {bare:#?}");
    let listed: std::collections::BTreeMap<String, usize> =
        TIME_AS_STIMULUS.iter().map(|(f, n, _)| ((*f).to_owned(), *n)).collect();
    assert_eq!(pauses, listed, "pauses in the tests, against TIME_AS_STIMULUS (file, count, why)");
}
