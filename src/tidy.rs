//! The repository's own rules, checked from its files: every Rust file opens with a module
//! doc (what it is for, before any code), and no file sends a reader to a document that does
//! not ship with the repository (the design notes it was built from live elsewhere; what they
//! decided is in the README, ARCHITECTURE.md and `docs/`).

use std::path::{Path, PathBuf};

/// Where the repository's own text is (generated snapshots, vendored specs and fuzz inputs
/// are not).
const ROOTS: &[&str] = &[
    "src",
    "tests",
    "benches",
    "fake-forge/src",
    "fake-forge/tests",
    "fuzz/fuzz_targets",
    "scripts",
    "docs",
    "deploy",
    ".ci",
];
const SKIPPED: &[&str] = &["tests/snapshots"];
const ROOT_FILES: &[&str] = &["README.md", "ARCHITECTURE.md", "STYLE.md", "Cargo.toml", "fuzz/Cargo.toml"];

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
    for expected in
        ["src/call.rs", "tests/support/mod.rs", "fake-forge/src/lib.rs", "README.md", "docs/PERFORMANCE.md"]
    {
        assert!(all.contains(&repo().join(expected)), "{expected} is not read");
    }
    assert!(!all.iter().any(|p| p.starts_with(repo().join("tests/snapshots"))));
}
