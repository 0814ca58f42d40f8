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
            &["executor", "limits", "audit", "reads"],
            &["oauth", "trust"],
            &["forges"],
            &["server"],
            &["identify", "confirm", "flow"],
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
    ("toml::", &["src/config/profiles.rs"]),
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
        "tests/integration/e2e_real_forge/flow.rs",
        1,
        "an address outside the forge must hear nothing: absence is seen only once a delivery could have come",
    ),
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

/// The numbered stages of a call, `(number, name)`: in `call.rs`, the `// N. name` lines of
/// `run_asking` (the conductor); in ARCHITECTURE.md, the `  N name` lines of its pipeline.
fn stages(text: &str, numbered: impl Fn(&str) -> Option<&str>) -> Vec<(u32, String)> {
    text.lines()
        .filter_map(|line| {
            let rest = numbered(line.trim_start())?;
            let (n, rest) = rest.split_once(['.', ' '])?;
            let name = rest.trim_start().split([':', ' ']).next()?;
            Some((n.parse().ok()?, name.to_owned()))
        })
        .collect()
}

#[test]
fn the_stages_of_a_call_are_named_alike_in_call_rs_and_architecture() {
    let call = std::fs::read_to_string(repo().join("src/call.rs")).expect("call.rs");
    let conductor = call.split("async fn run_asking(").nth(1).expect("run_asking in call.rs");
    let conductor = &conductor[..conductor.find("\n}\n").expect("the end of run_asking")];
    let in_code =
        stages(conductor, |l| l.strip_prefix("// ").filter(|r| r.starts_with(|c: char| c.is_ascii_digit())));
    let architecture = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let pipeline = architecture.split("```\nMCP client").nth(1).expect("the pipeline in ARCHITECTURE.md");
    let pipeline = &pipeline[..pipeline.find("```").expect("the end of the pipeline")];
    let in_docs = stages(pipeline, |l| Some(l).filter(|l| l.starts_with(|c: char| c.is_ascii_digit())));
    let numbers: Vec<u32> = (1..=in_code.len() as u32).collect();
    assert_eq!(
        in_code.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        numbers,
        "call.rs numbers its stages 1, 2, …"
    );
    assert_eq!(in_code, in_docs, "the stages of run_asking (call.rs) against ARCHITECTURE.md's pipeline");
    assert!(in_code.len() >= 5, "call.rs names its stages: {in_code:?}");
    let body_lines = conductor.lines().count();
    assert!(body_lines <= 60, "run_asking is a conductor on one screen: {body_lines} lines");
}

/// The bullets of a Markdown text (a line opening with `- ` and the lines after it, up to
/// the next bullet, blank line or heading), each with its number of words.
fn bullets(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for line in text.lines() {
        if line.starts_with("- ") {
            out.push((0, line.chars().take(60).collect()));
            open = true;
        } else if line.trim().is_empty() || line.starts_with('#') || line.starts_with("```") {
            open = false;
        }
        if open {
            // A bullet's dash (or a dash standing alone) is not a word.
            let words = line.split_whitespace().filter(|w| *w != "-").count();
            out.last_mut().expect("a bullet is open").0 += words;
        }
    }
    out
}

#[test]
fn the_readme_and_architecture_are_read_to_the_end() {
    let read = |name: &str| std::fs::read_to_string(repo().join(name)).expect("a document");
    let (readme, architecture) = (read("README.md"), read("ARCHITECTURE.md"));
    assert!(readme.lines().count() <= 400, "README.md is for users, ≤ 400 lines: reference goes in docs/");
    assert!(
        architecture.lines().count() <= 250,
        "ARCHITECTURE.md fits 250 lines: detail goes in module docs"
    );
    let long: Vec<_> = bullets(&architecture).into_iter().filter(|(words, _)| *words > 80).collect();
    assert!(long.is_empty(), "ARCHITECTURE.md's bullets over 80 words: {long:#?}");
    assert_eq!(bullets("- a b\n  c\n\n- d\n"), [(3, "- a b".to_owned()), (1, "- d".to_owned())]);
}

/// A setting is documented once: in docs/SETTINGS.md, made from the table of settings
/// (src/config/args.rs; `config::reference`'s test holds the file to the table, a row each).
/// No other document of the repository keeps a settings table (a row that starts with a
/// setting's flag and names its variable): it links to the reference instead.
#[test]
fn a_setting_is_documented_once() {
    use crate::config::REFERENCE;
    let settings = crate::config::settings();
    let rows_of = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|line| {
                settings.iter().any(|s| {
                    line.starts_with(&format!("| `{}`", s.flag)) && line.contains(&format!("`{}`", s.env))
                })
            })
            .map(str::to_owned)
            .collect()
    };
    for path in all_files() {
        let relative = path.strip_prefix(repo()).expect("in the repository").to_string_lossy().into_owned();
        if path.extension().is_none_or(|e| e != "md") || relative == REFERENCE {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let rows = rows_of(&text);
        assert!(
            rows.is_empty(),
            "{relative} documents settings again ({} rows such as {:?}); a setting is documented once, in {REFERENCE}, made from src/config/args.rs: change the table there and link to {REFERENCE} instead",
            rows.len(),
            rows[0]
        );
    }
}

/// The public functions (any `pub` visibility) of `text` whose signature has a `Result` with a
/// bare `String` as its error, as `line: signature`; a file's `mod tests` is left out (a test
/// may read a failure's words).
fn string_errors(text: &str) -> Vec<String> {
    let code = text.find("#[cfg(test)]\nmod tests").map_or(text, |at| &text[..at]);
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        if !is_public_fn(line.trim_start()) {
            continue;
        }
        // The signature runs to its body's `{` (or a declaration's `;`), over as many lines.
        let (mut signature, mut depth) = (String::new(), 0i32);
        for more in &lines[n..] {
            let more = more.split("//").next().unwrap_or("").trim();
            let mut end = None;
            for (at, c) in more.char_indices() {
                match c {
                    '(' | '[' => depth += 1,
                    ')' | ']' => depth -= 1,
                    '{' => end = Some(at),
                    ';' if depth == 0 => end = Some(at),
                    _ => {}
                }
                if end.is_some() {
                    break;
                }
            }
            signature.push_str(&more[..end.unwrap_or(more.len())]);
            signature.push(' ');
            if end.is_some() {
                break;
            }
        }
        if results_failing_with_string(&signature) {
            found.push(format!("{}: {}", n + 1, signature.trim()));
        }
    }
    found
}

/// Whether a line opens a function with a `pub` visibility (`pub`, `pub(crate)`, …).
fn is_public_fn(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("pub") else { return false };
    let rest = match rest.strip_prefix('(') {
        Some(inner) => inner.split_once(')').map_or("", |(_, after)| after),
        None if rest.starts_with(' ') => rest,
        None => return false,
    };
    let mut rest = rest.trim_start();
    while let Some(after) =
        ["const ", "async ", "unsafe ", "extern \"C\" "].iter().find_map(|q| rest.strip_prefix(q))
    {
        rest = after.trim_start();
    }
    rest.starts_with("fn ")
}

/// Whether any `Result<…, String>` in `signature` (also a `std::string::String`) has the
/// bare string as its error.
fn results_failing_with_string(signature: &str) -> bool {
    let mut rest = signature;
    while let Some(at) = rest.find("Result<") {
        let word_starts = rest[..at].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        rest = &rest[at + "Result<".len()..];
        if !word_starts {
            continue;
        }
        // The type's arguments, split at the commas of its own level (`->` is no bracket).
        let (mut depth, mut args, mut start, mut last) = (0i32, Vec::new(), 0, ' ');
        for (i, c) in rest.char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' if last == '-' => {}
                '>' | ')' | ']' if depth > 0 => depth -= 1,
                '>' => {
                    args.push(&rest[start..i]);
                    break;
                }
                ',' if depth == 0 => {
                    args.push(&rest[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
            last = c;
        }
        if let [_, error] = args.as_slice() {
            if matches!(error.trim(), "String" | "std::string::String" | "alloc::string::String") {
                return true;
            }
        }
    }
    false
}

/// A public function does not fail with a bare `String`, which leaves a reader to find out
/// whether any caller tells its failures apart (and tempts one to do it by the words): its
/// error is a type, or `Shown`, which says no caller does.
#[test]
fn no_public_function_fails_with_a_bare_string() {
    let mut found = Vec::new();
    for root in ["src", "core/src"] {
        let mut sources = Vec::new();
        files(&repo().join(root), &mut sources);
        for path in sources.iter().filter(|p| p.extension().is_some_and(|e| e == "rs")) {
            let relative =
                path.strip_prefix(repo()).expect("in the repository").to_string_lossy().into_owned();
            let text = std::fs::read_to_string(path).expect("a source file");
            found.extend(string_errors(&text).into_iter().map(|at| format!("{relative}:{at}")));
        }
    }
    assert!(
        found.is_empty(),
        "public functions that fail with a bare String: when a caller acts on which failure it was, return a type (aegis_core::error::CallError in a call, else an enum deriving thiserror::Error); when every caller only shows the text, write its error as aegis_core::error::Shown: {found:#?}"
    );
}

#[test]
fn the_string_error_rule_reads_signatures_as_they_are_written() {
    let text = "pub fn a() -> Result<(), String> {\npub(crate) async fn b(\n    x: u8,\n) -> std::io::Result<[u8; 2]> {\npub(super) fn c(f: impl Fn() -> u8) -> Result<Vec<Result<u8, String>>, Error> {\nfn d() -> Result<(), String> {\npub fn e() -> Result<(), Shown> {\npub(crate) fn f(\n    x: u8,\n) -> Result<HashMap<String, u8>, std::string::String>;\npub fn g() -> MyResult<(), String> {\n// pub fn h() -> Result<(), String> {\n#[cfg(test)]\nmod tests {\n    pub fn i() -> Result<(), String> {}\n}\n";
    assert_eq!(
        string_errors(text),
        [
            "1: pub fn a() -> Result<(), String>",
            "5: pub(super) fn c(f: impl Fn() -> u8) -> Result<Vec<Result<u8, String>>, Error>",
            "8: pub(crate) fn f( x: u8, ) -> Result<HashMap<String, u8>, std::string::String>",
        ]
    );
}

/// The module path of each Rust file of `root` (`transport/direct.rs` → `transport::direct`,
/// a `mod.rs` → its directory's), test modules left out.
fn module_files(root: &str) -> std::collections::BTreeMap<Vec<String>, String> {
    let mut found = Vec::new();
    files(&repo().join(root), &mut found);
    found
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter_map(|p| {
            let relative = p.strip_prefix(repo().join(root)).expect("under its root");
            let mut path: Vec<String> = relative.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            let last = path.pop()?.trim_end_matches(".rs").to_owned();
            if !matches!(last.as_str(), "mod" | "lib" | "main") {
                path.push(last);
            }
            let is_test = path.last().is_some_and(|l| l == "tests" || l == "tidy");
            (!is_test).then(|| (path, relative.to_string_lossy().into_owned()))
        })
        .collect()
}

/// The module paths that the code of the file of `module` names with `crate::`, `super::`,
/// `self::` or a child module's name, as absolute paths (what follows a module's name may be
/// an item, a crate's or its own: the caller keeps the longest path that is a module file).
fn named_modules(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let code = text.find("#[cfg(test)]\nmod tests").map_or(text, |at| &text[..at]);
    // One line of code, comments and strings left out, a `use` group's members written
    // without the spaces and line breaks rustfmt puts between them.
    let mut flat = String::new();
    for line in code.lines() {
        let line = outside_strings(line);
        let line = line.split("//").next().unwrap_or("");
        // A module's re-export of its own child is its face, not an import of it.
        let reexport = ["pub use ", "pub(crate) use "].iter().any(|p| line.trim_start().starts_with(p));
        if reexport && !["crate::", "super::", "self::"].iter().any(|p| line.contains(p)) {
            continue;
        }
        flat.push_str(line);
        flat.push(' ');
    }
    let mut tight = String::with_capacity(flat.len());
    for word in flat.split_whitespace() {
        if !(tight.ends_with('{') || tight.ends_with(',') || word.starts_with('}')) {
            tight.push(' ');
        }
        tight.push_str(word);
    }
    let parent = &module[..module.len().saturating_sub(1)];
    let mut out = Vec::new();
    let is_path = |c: char| c.is_alphanumeric() || c == '_' || c == ':' || c == '{' || c == ',';
    for word in tight.split(|c: char| !is_path(c)) {
        let (mut base, mut rest) = match word.strip_prefix("crate::") {
            Some(r) => (Vec::new(), r),
            None => (module.to_vec(), word),
        };
        if let Some(r) = rest.strip_prefix("super::") {
            (base, rest) = (parent.to_vec(), r);
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
        } else if let Some(r) = rest.strip_prefix("self::") {
            rest = r;
        } else if !rest.contains("::") {
            continue;
        }
        let mut groups = Vec::new();
        for s in rest.split("::") {
            if let Some(group) = s.strip_prefix('{') {
                groups.extend(group.split(',').filter_map(first_segment));
                break;
            }
            match first_segment(s) {
                Some(name) if name.len() == s.len() => base.push(name),
                _ => break,
            }
        }
        out.extend(groups.into_iter().map(|g| [base.clone(), vec![g]].concat()));
        out.push(base);
    }
    out
}

/// Circles among the files of `root`: `a -> b -> … -> a`, each file taken as the module it
/// is, an import as the longest module path it names; a module and the modules inside it
/// (a `mod.rs` and its parts) are not told apart.
fn file_circles(root: &str) -> Vec<String> {
    let modules = module_files(root);
    let mut edges: std::collections::BTreeMap<&str, std::collections::BTreeSet<&str>> = Default::default();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(repo().join(root).join(file)).expect("a source file");
        for mut named in named_modules(&text, module) {
            while !named.is_empty() && !modules.contains_key(&named) {
                named.pop();
            }
            // A module and the modules inside it are one: `mod.rs` holds what its parts share
            // and uses them. Between them an import is not a circle's arrow.
            let nested = named.starts_with(module) || module.starts_with(&named);
            if let Some(target) = modules.get(&named).filter(|_| !nested) {
                edges.entry(file.as_str()).or_default().insert(target.as_str());
            }
        }
    }
    let mut circles = Vec::new();
    for start in edges.keys() {
        let mut stack = vec![(*start, vec![*start])];
        let mut seen = std::collections::BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for next in edges.get(at).into_iter().flatten() {
                if next == start {
                    circles.push(path.join(" -> ") + " -> " + start);
                } else if *next > *start && seen.insert(*next) {
                    stack.push((next, [path.clone(), vec![*next]].concat()));
                }
            }
        }
    }
    circles
}

#[test]
fn no_files_import_each_other_through_any_circle() {
    for root in ["src", "core/src", "fake-forge/src"] {
        let circles = file_circles(root);
        assert!(circles.is_empty(), "files of {root} that import each other, through: {circles:#?}");
    }
    let named = named_modules(
        "use super::sessions::{self, Owners};\nuse crate::identity::{Caller, cache};\npub(crate) use client::Forge;\n",
        &["transport".to_owned(), "direct".to_owned()],
    );
    let path = |p: &str| p.split("::").map(str::to_owned).collect::<Vec<_>>();
    assert!(named.contains(&path("transport::sessions")), "{named:?}");
    assert!(named.contains(&path("identity::cache")), "{named:?}");
    assert!(
        !named.contains(&path("transport::direct::client")),
        "a leaf file has no child modules: {named:?}"
    );
}
