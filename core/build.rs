//! The forge specs go into the binary without the whitespace between their tokens. The
//! catalog reads an embedded spec whole at start and borrows from it for the life of the
//! process, so every page of it stays resident; the pretty-printed files are 40 % whitespace
//! (0.35 MiB of the Gitea spec's 0.83).

use std::path::{Path, PathBuf};

const SPECS: [&str; 2] = ["gitea-1.27.0.swagger.json", "forgejo-16.0.1.swagger.json"];

// Where cargo wants the output is the one thing a build script reads from its environment.
#[allow(clippy::disallowed_methods)]
fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for name in SPECS {
        let source = Path::new("../specs").join(name);
        println!("cargo::rerun-if-changed={}", source.display());
        let spec = std::fs::read(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        // Members keep their order (`preserve_order`): the catalog lists tools in spec order.
        let spec: serde_json::Value =
            serde_json::from_slice(&spec).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        let compact = serde_json::to_vec(&spec).expect("a JSON value serializes");
        let target = out.join(name);
        std::fs::write(&target, compact).unwrap_or_else(|e| panic!("{}: {e}", target.display()));
    }
}
