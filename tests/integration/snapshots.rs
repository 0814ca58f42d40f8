//! Committed snapshots of what clients see by default: the `tools/list` tools of each flavor
//! (`tests/snapshots/tools-list-<flavor>.json`, one pretty-printed tool after another, so a
//! changed definition is a small diff in review), and the README's toolset table.
//!
//! `UPDATE_SNAPSHOTS=1 cargo test --test integration snapshots::` rewrites them. A missing or different
//! snapshot fails, and the current output is written to `target/snapshots/` to compare.
// Tests read their own variables (PATH, AEGIS_E2E_*, UPDATE_SNAPSHOTS), not the server's settings.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::path::PathBuf;

use aegis_core::catalog::{Catalog, Flavor, toolsets};

fn update() -> bool {
    std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Compare `actual` with the committed file `name` (or write it when updating).
fn check(name: &str, committed: PathBuf, actual: &str) {
    if update() {
        std::fs::create_dir_all(committed.parent().unwrap()).unwrap();
        std::fs::write(&committed, actual).unwrap();
        return;
    }
    let out = support::repo_root().join("target/snapshots").join(name);
    let Ok(expected) = std::fs::read_to_string(&committed) else {
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::write(&out, actual).unwrap();
        panic!(
            "{} is missing: run `UPDATE_SNAPSHOTS=1 cargo test --test integration snapshots::` and commit it (current output in {})",
            committed.display(),
            out.display()
        );
    };
    if expected != actual {
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::write(&out, actual).unwrap();
        let first = expected.lines().zip(actual.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{} differs from the current output (first at line {}: {:?} vs {:?}); compare with {}, and if the change is meant, run `UPDATE_SNAPSHOTS=1 cargo test --test integration snapshots::` and commit",
            committed.display(),
            first + 1,
            expected.lines().nth(first).unwrap_or(""),
            actual.lines().nth(first).unwrap_or(""),
            out.display()
        );
    }
}

#[tokio::test]
async fn default_tools_list_of_each_flavor_matches_its_snapshot() {
    for flavor in ["gitea", "forgejo"] {
        let o = support::run_with_timeout(
            std::process::Command::new(support::bin())
                .args(["tools", "--json", "--flavor", flavor, "--url", "http://127.0.0.1:9"])
                .env_clear(),
            std::time::Duration::from_secs(30),
        )
        .await;
        assert_eq!(o.status.and_then(|s| s.code()), Some(0), "{}", o.stderr);
        let tools: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        assert_eq!(tools.as_array().unwrap().len(), support::DEFAULT_TOOL_COUNT);
        let name = format!("tools-list-{flavor}.json");
        check(&name, support::repo_root().join("tests/snapshots").join(&name), &o.stdout);
    }
}

#[test]
fn readme_toolset_table_matches_the_catalogs() {
    let g = Catalog::build(Flavor::Gitea.embedded_spec(), Flavor::Gitea, None).unwrap();
    let f = Catalog::build(Flavor::Forgejo.embedded_spec(), Flavor::Forgejo, None).unwrap();
    let table = toolsets::table(&[&g, &f]);
    let readme_path = support::repo_root().join("README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    const START: &str = "<!-- toolsets:start -->\n";
    const END: &str = "<!-- toolsets:end -->";
    let (Some(a), Some(b)) = (readme.find(START), readme.find(END)) else {
        panic!("README.md lacks the {START:?} … {END:?} markers around the toolset table")
    };
    let current = &readme[a + START.len()..b];
    if current != table {
        if update() {
            let new = format!("{}{table}{}", &readme[..a + START.len()], &readme[b..]);
            std::fs::write(&readme_path, new).unwrap();
            return;
        }
        panic!(
            "README.md's toolset table is out of date; run `UPDATE_SNAPSHOTS=1 cargo test --test integration snapshots::`:\n{table}"
        );
    }
}
