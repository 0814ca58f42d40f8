//! The release files of `scripts/package`, installed the way users install them, each driving a
//! real MCP session (the official Python SDK over stdio) against the recording fake forge: the
//! wheel into a fresh venv and through `uvx`, the npm tarballs into an empty folder, the MCP
//! Bundle unpacked and configured by the official MCPB library as Claude Desktop does. And the
//! registry entry checked against the registry's JSON Schema. Real clients (Claude Code, the
//! MCP Inspector) run them in `clients`.
//!
//! The install tests are `#[ignore]`d: they need `target/dist/` (or `AEGIS_DIST`), which
//! `scripts/package` builds in minutes. `scripts/test` builds it and runs them with
//! `--ignored`; run with `--ignored` without it, each fails and says so. The checks of the
//! committed package files run always.
// Tests read their own variables (PATH, AEGIS_DIST), not the server's settings.
#![allow(clippy::disallowed_methods)]

use crate::support;

#[path = "packaging/clients.rs"]
mod clients;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use fake_forge::FakeForge;
use serde_json::{Value, json};
use support::{ALICE_TOKEN, DriverRun, Forge, python_driver, repo_root, run_with_timeout};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const TIMEOUT: Duration = Duration::from_secs(120);

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read_text(relative: &str) -> String {
    std::fs::read_to_string(repo_root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// `owner/name` of the repository Cargo.toml names.
fn repository() -> &'static str {
    env!("CARGO_PKG_REPOSITORY").strip_prefix("https://github.com/").expect("a GitHub repository URL")
}

/// The MCP registry name: GitHub's namespace, which the registry verifies by the owner's login.
fn registry_name() -> String {
    let (owner, name) = repository().split_once('/').unwrap();
    format!("io.github.{owner}/{name}")
}

/// Every environment variable the server reads as a setting of its command line.
fn setting_names() -> Vec<String> {
    use clap::CommandFactory;
    aegis_gitea_mcp::config::Cli::command()
        .get_arguments()
        .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
        .collect()
}

/// Validates `doc` against the registry's schema (kept in the repository, from its `$id`),
/// returning the messages of what does not conform.
fn registry_schema_errors(doc: &Value) -> Vec<String> {
    let schema = read_json(&repo_root().join("packaging/registry/server.schema.json"));
    assert_eq!(doc["$schema"], schema["$id"], "server.json names another schema than the one kept");
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("the registry schema does not compile: {e}"));
    validator.iter_errors(doc).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

#[test]
fn the_registry_entry_conforms_to_the_registry_schema_and_names_real_settings() {
    let server = read_json(&repo_root().join("packaging/server.json"));
    let errors = registry_schema_errors(&server);
    assert!(errors.is_empty(), "packaging/server.json: {errors:#?}");
    // The schema is not as strict as the registry's own checks; these are those that apply.
    assert_eq!(server["name"], registry_name());
    assert_eq!(server["version"], VERSION);
    assert_eq!(server["repository"]["url"], env!("CARGO_PKG_REPOSITORY"));
    let packages = server["packages"].as_array().unwrap();
    let kinds: Vec<&str> = packages.iter().map(|p| p["registryType"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["pypi", "npm"], "the bundles are added by scripts/package, with their hashes");
    let settings = setting_names();
    for p in packages {
        assert_eq!(p["identifier"], "aegis-gitea-mcp", "{p}");
        assert_eq!(p["version"], VERSION, "{p}");
        assert!(p.get("fileSha256").is_none(), "the registry refuses a hash on {p}");
        assert_eq!(
            p["environmentVariables"], packages[0]["environmentVariables"],
            "both run the same binary"
        );
        for var in p["environmentVariables"].as_array().unwrap() {
            let name = var["name"].as_str().unwrap();
            assert!(settings.iter().any(|s| s == name), "{name} is no setting of the server");
        }
    }
    let vars = &packages[0]["environmentVariables"];
    let secret: Vec<&str> = vars
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["isSecret"] == true)
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(secret, ["GITEA_TOKEN"]);
    assert_eq!(vars[0]["name"], "GITEA_URL");
    assert_eq!(vars[0]["isRequired"], true);
    // The remote form: a deployment's own /mcp, each request under its caller's forge token.
    let remote = &server["remotes"][0];
    assert_eq!(remote["type"], "streamable-http");
    assert!(remote["url"].as_str().unwrap().ends_with("/mcp"), "{remote}");
    assert_eq!(remote["headers"][0]["name"], "Authorization");
    assert_eq!(remote["headers"][0]["isSecret"], true);

    // A wrong entry is refused: the check can fail.
    let mut broken = server.clone();
    broken["description"] = json!("x".repeat(101));
    broken["packages"][0]["transport"] = json!({"type": "carrier-pigeon"});
    assert!(registry_schema_errors(&broken).len() >= 2, "{:?}", registry_schema_errors(&broken));
}

#[test]
fn every_package_file_names_the_crate_version_and_repository() {
    let name = registry_name();
    let repo_url = env!("CARGO_PKG_REPOSITORY");

    let npm = read_json(&repo_root().join("packaging/npm/aegis-gitea-mcp/package.json"));
    assert_eq!(npm["version"], VERSION);
    assert_eq!(npm["mcpName"], name.as_str(), "the registry's check of npm ownership");
    assert_eq!(npm["repository"]["url"], format!("git+{repo_url}.git"));
    let platforms = npm["optionalDependencies"].as_object().unwrap();
    let maker = read_text("packaging/npm/make-platform-package.mjs");
    for (pkg, v) in platforms {
        assert_eq!(v, VERSION, "{pkg}");
        let platform = pkg.strip_prefix("aegis-gitea-mcp-").unwrap();
        assert!(maker.contains(&format!("\"{platform}\": {{")), "make-platform-package.mjs lacks {platform}");
    }
    assert_eq!(platforms.len(), 5);

    let manifest = read_json(&repo_root().join("packaging/mcpb/manifest.json"));
    assert_eq!(manifest["version"], VERSION);
    assert_eq!(manifest["repository"]["url"], repo_url);
    // A value left out and without a default would reach the server as the placeholder itself.
    for (key, option) in manifest["user_config"].as_object().unwrap() {
        assert!(
            option["required"] == true || option.get("default").is_some(),
            "user_config.{key}: no default"
        );
    }
    let settings = setting_names();
    for var in manifest["server"]["mcp_config"]["env"].as_object().unwrap().keys() {
        assert!(settings.contains(var), "the bundle sets {var}, which is no setting of the server");
    }

    // PyPI: maturin takes the crate's version; the long description carries the registry's
    // ownership marker, ended as the registry requires (white space, a tag or `-->`).
    let pyproject = read_text("pyproject.toml");
    assert!(pyproject.contains("dynamic = [\"version\"]"), "the wheel's version is the crate's");
    assert!(pyproject.contains(&format!("Repository = \"{repo_url}\"")));
    assert!(pyproject.contains("readme = \"packaging/README.md\""));
    let readme = read_text("packaging/README.md");
    assert!(
        readme.contains(&format!("mcp-name: {name} -->")),
        "packaging/README.md lacks the mcp-name marker"
    );

    let changelog = read_text("CHANGELOG.md");
    assert!(changelog.contains(&format!("## [{VERSION}] - ")), "CHANGELOG.md has no entry for {VERSION}");

    // One binary everywhere: the wheel (and with it every other file scripts/package makes)
    // and the container image are the profile-guided build of scripts/build-release: the
    // release profile, the same lock file, the same profile of the server's work.
    assert!(pyproject.contains("profile = \"release\"") && pyproject.contains("locked = true"));
    let build = read_text("scripts/build-release");
    let final_build = "RUSTFLAGS=\"$flags\" cargo build --release --locked --target-dir \"$target/pgo\"";
    assert!(build.contains(final_build), "scripts/build-release: {final_build} is gone");
    let package = read_text("scripts/package");
    assert!(
        package.contains("flags=$(scripts/build-release --rustflags-only)")
            && package.contains("RUSTFLAGS=\"$flags\" \"$venv_bin/maturin\" build"),
        "scripts/package builds the wheel without the profile of scripts/build-release"
    );
    let containerfile = read_text("deploy/Containerfile");
    assert!(
        containerfile.contains("scripts/build-release")
            && containerfile.contains("install -D -m 0755 target/pgo/release/aegis-gitea-mcp"),
        "deploy/Containerfile builds another binary than the release files carry"
    );
}

/// The part of `text` from the heading `from` to the next `## `.
fn section<'a>(text: &'a str, from: &str) -> &'a str {
    let start = text.find(from).unwrap_or_else(|| panic!("no heading {from:?}"));
    let section = &text[start + from.len()..];
    &section[..section.find("\n## ").unwrap_or(section.len())]
}

/// The fenced blocks of `lang` in the part of `text` from the heading `from` to the next `## `.
fn blocks<'a>(text: &'a str, from: &str, lang: &str) -> Vec<&'a str> {
    let section = section(text, from);
    let fence = format!("```{lang}\n");
    section.split(fence.as_str()).skip(1).map(|b| &b[..b.find("```").unwrap()]).collect()
}

#[test]
fn the_client_configurations_shown_run_what_the_packages_install() {
    let settings = setting_names();
    // The commands the install tests run: `uvx aegis-gitea-mcp`, `npx -y aegis-gitea-mcp`.
    let installed = [("uvx", json!(["aegis-gitea-mcp"])), ("npx", json!(["-y", "aegis-gitea-mcp"]))];
    for (file, heading) in
        [("README.md", "## Connect a client"), ("packaging/README.md", "## Connect a client")]
    {
        let text = read_text(file);
        let configs = blocks(&text, heading, "json");
        assert!(!configs.is_empty(), "{file}: no configuration shown");
        for block in configs {
            let doc: Value = serde_json::from_str(block).unwrap_or_else(|e| panic!("{file}: {e}\n{block}"));
            let servers =
                doc.get("mcpServers").or_else(|| doc.get("servers")).unwrap_or_else(|| panic!("{block}"));
            for server in servers.as_object().unwrap().values() {
                let ran = (server["command"].as_str().unwrap(), server["args"].clone());
                assert!(installed.iter().any(|(c, a)| (*c, a.clone()) == ran), "{file}: {server}");
                for var in server["env"].as_object().unwrap().keys() {
                    assert!(settings.contains(var), "{file}: {var} is no setting of the server");
                }
            }
        }
        let claude: Vec<&str> = blocks(&text, heading, "sh")
            .into_iter()
            .flat_map(str::lines)
            .filter(|l| l.starts_with("claude mcp add"))
            .collect();
        assert!(!claude.is_empty(), "{file}: no `claude mcp add`");
        for line in claude {
            assert!(line.ends_with(" -- uvx aegis-gitea-mcp"), "{file}: {line}");
            for var in line.split(" --env ").skip(1).map(|v| v.split('=').next().unwrap()) {
                assert!(settings.iter().any(|s| s == var), "{file}: {var} is no setting of the server");
            }
        }
    }
}

// ---- the installed packages, each running a session ------------------------------------

/// The folder scripts/package filled.
fn dist() -> PathBuf {
    let dir = std::env::var_os("AEGIS_DIST").map_or_else(|| repo_root().join("target/dist"), PathBuf::from);
    assert!(
        dir.join("SHA256SUMS").is_file(),
        "{} holds no release files: run `scripts/package` first (scripts/test does)",
        dir.display()
    );
    dir
}

/// The one file in the dist folder whose name starts with `prefix` and ends with `suffix`.
fn dist_file(prefix: &str, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dist())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(prefix) && n.ends_with(suffix)
        })
        .collect();
    assert_eq!(found.len(), 1, "not one {prefix}*{suffix} in the dist folder: {found:?}");
    found.into_iter().next().unwrap()
}

/// Runs `cmd` to its end, asserting it succeeded; returns its stdout.
async fn run_ok(cmd: &mut Command, what: &str) -> String {
    let run = run_with_timeout(cmd, TIMEOUT).await;
    assert!(
        run.status.is_some_and(|s| s.success()),
        "{what}: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        run.status,
        run.stdout,
        run.stderr
    );
    run.stdout
}

/// A session of the Python SDK with the server started as `command` under `env` (the only
/// settings it gets: the developer's own are removed): tools listed, one call answered by the
/// forge as alice.
async fn session(forge: &FakeForge, command: &[OsString], env: &[(&str, &str)], what: &str) -> DriverRun {
    let calls = json!([{"tool": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}}]);
    let (mut cmd, _calls_dir) = python_driver("mcp_stdio_client.py", "legacy", &calls);
    cmd.arg("--").args(command);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if setting_names().iter().any(|s| *s == k) || k.starts_with("GITEA_") || k.starts_with("FORGEJO_") {
            cmd.env_remove(&*k);
        }
    }
    cmd.envs(env.iter().copied());
    let run = DriverRun::run(&mut cmd, TIMEOUT, what, String::new).await;
    assert_eq!(run.doc["server_name"], "aegis-gitea-mcp", "{}", run.doc);
    assert_eq!(run.doc["server_version"], VERSION, "{}", run.doc);
    assert_eq!(run.doc["tool_count"], support::DEFAULT_TOOL_COUNT, "{}", run.doc);
    let repo = run.result(0, false);
    assert_eq!(repo["identity"]["login"], "alice", "{repo}");
    assert_eq!(repo["request"], json!({"method": "GET", "path": "/repos/alice/demo"}), "{repo}");
    let asked = forge.requests().into_iter().filter(|r| r.raw_path == "/api/v1/repos/alice/demo").count();
    assert_eq!(asked, 1, "{what}: the forge was not asked for the repository once");
    run
}

/// The server's settings as a user sets them, in the environment.
fn user_env(forge: &FakeForge) -> [(&'static str, String); 2] {
    [("GITEA_URL", forge.base_url()), ("GITEA_TOKEN", ALICE_TOKEN.to_owned())]
}

fn borrowed<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test]
#[ignore = "needs target/dist from scripts/package (scripts/test builds it)"]
async fn the_wheel_installs_into_a_fresh_venv_and_serves_a_session() {
    let wheel = dist_file("aegis_gitea_mcp-", ".whl");
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    run_ok(Command::new("python3").arg("-m").arg("venv").arg(&venv), "python3 -m venv").await;
    let pip = venv.join("bin/pip");
    run_ok(
        Command::new(&pip).args(["install", "--no-index", "--disable-pip-version-check", "-q"]).arg(&wheel),
        "pip install",
    )
    .await;
    let installed = venv.join("bin/aegis-gitea-mcp");
    let version = run_ok(Command::new(&installed).arg("--version"), "the installed --version").await;
    assert_eq!(version.trim(), format!("aegis-gitea-mcp {VERSION}"));
    // The wheel is the binary and nothing else: no Python module to import, no dependency.
    let show = run_ok(Command::new(&pip).args(["show", "-f", "aegis-gitea-mcp"]), "pip show").await;
    assert!(show.contains("Requires: \n") || show.contains("Requires:\n"), "{show}");
    let files: Vec<&str> =
        show.lines().skip_while(|l| !l.starts_with("Files:")).skip(1).map(str::trim).collect();
    assert!(files.iter().any(|f| f.ends_with("bin/aegis-gitea-mcp")), "{files:?}");
    assert!(!files.iter().any(|f| f.ends_with(".py")), "{files:?}");
    for licence in ["LICENSE-MIT", "LICENSE-APACHE"] {
        assert!(files.iter().any(|f| f.ends_with(&format!("licenses/{licence}"))), "{licence}: {files:?}");
    }
    // What PyPI shows, and where the registry looks for its ownership marker.
    let location =
        show.lines().find_map(|l| l.strip_prefix("Location: ")).expect("pip show names a location");
    let metadata = Path::new(location).join(format!("aegis_gitea_mcp-{VERSION}.dist-info/METADATA"));
    let metadata = std::fs::read_to_string(metadata).expect("the installed METADATA");
    assert!(metadata.contains(&format!("<!-- mcp-name: {} -->", registry_name())), "{metadata}");
    assert!(metadata.contains("License-Expression: MIT OR Apache-2.0"), "{metadata}");

    let forge = Forge::gitea().repo("alice", "demo").start().await;
    let env = user_env(&forge);
    session(&forge, &[installed.into_os_string(), "serve".into()], &borrowed(&env), "the wheel's binary")
        .await;
}

/// What the README's `uvx aegis-gitea-mcp` runs, with the wheel in place of PyPI: the command
/// and the environment it needs, which keeps uv offline and its cache and tools in `tmp`.
fn uvx_of_the_wheel(tmp: &Path) -> (Vec<OsString>, Vec<(&'static str, String)>) {
    let wheel = dist_file("aegis_gitea_mcp-", ".whl");
    let uvx = repo_root().join(".tools/package-venv/bin/uvx");
    assert!(uvx.is_file(), "{} is missing: run scripts/setup-package-env", uvx.display());
    let path = |name: &str| tmp.join(name).into_os_string().into_string().unwrap();
    let env = vec![
        ("UV_CACHE_DIR", path("uv-cache")),
        ("UV_TOOL_DIR", path("uv-tools")),
        ("UV_PYTHON_DOWNLOADS", "never".to_owned()),
        ("UV_OFFLINE", "1".to_owned()),
    ];
    (vec![uvx.into(), "--from".into(), wheel.into(), "aegis-gitea-mcp".into()], env)
}

#[tokio::test]
#[ignore = "needs target/dist from scripts/package (scripts/test builds it)"]
async fn uvx_runs_the_wheel_as_a_person_would() {
    let tmp = tempfile::tempdir().unwrap();
    let (command, uv_env) = uvx_of_the_wheel(tmp.path());
    let forge = Forge::gitea().repo("alice", "demo").start().await;
    let mut env = user_env(&forge).to_vec();
    env.extend(uv_env);
    session(&forge, &command, &borrowed(&env), "uvx aegis-gitea-mcp").await;
}

/// The npm tarballs installed into an empty folder as a person's `npm install` does (offline:
/// the platform package from its file, not the registry); the folder, and the name of the
/// platform package, which holds the binary.
async fn npm_installed() -> (tempfile::TempDir, String) {
    let main = dist().join(format!("aegis-gitea-mcp-{VERSION}.tgz"));
    let platform = dist_file("aegis-gitea-mcp-linux-", ".tgz");
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("package.json"), r#"{"private": true}"#).unwrap();
    let mut install = Command::new("npm");
    install
        .current_dir(folder.path())
        .args(["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error"])
        .arg(&platform)
        .arg(&main);
    run_ok(&mut install, "npm install").await;
    let platform_dir =
        platform.file_name().unwrap().to_string_lossy().replace(&format!("-{VERSION}.tgz"), "");
    (folder, platform_dir)
}

/// The README's "from a checkout, today" line of the install table's row starting `row`: the
/// first code of its last column.
fn readme_checkout_line(row: &str) -> String {
    let text = read_text("README.md");
    let line = section(&text, "## Install")
        .lines()
        .find(|l| l.starts_with(row))
        .unwrap_or_else(|| panic!("README.md, Install: no row {row:?}"));
    let last = line.trim_end_matches('|').rsplit('|').next().unwrap();
    last.split('`').nth(1).unwrap_or_else(|| panic!("README.md: no code in {last:?}")).to_owned()
}

/// The README's lines for the files `scripts/package` made, run as written by a shell in a
/// checkout's folder (the globs too), with nothing from a registry (offline): the wheel through
/// `uvx`, both npm tarballs installed globally (here into a prefix of the test's own).
#[tokio::test]
#[ignore = "needs target/dist from scripts/package (scripts/test builds it)"]
async fn the_readme_lines_for_a_checkout_run_the_release_files_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("target")).unwrap();
    std::os::unix::fs::symlink(dist(), tmp.path().join("target/dist")).unwrap();
    let shell = |line: &str| {
        let mut cmd = Command::new("bash");
        cmd.current_dir(tmp.path()).args(["-c", line]);
        cmd
    };

    let uv = readme_checkout_line("| [uv]");
    assert!(uv.starts_with("uvx "), "{uv}");
    let (_, uv_env) = uvx_of_the_wheel(tmp.path());
    let tools = repo_root().join(".tools/package-venv/bin");
    let path = format!("{}:{}", tools.display(), support::test_path());
    let said = run_ok(shell(&format!("{uv} --version")).env("PATH", &path).envs(uv_env), &uv).await;
    assert_eq!(said.trim(), format!("aegis-gitea-mcp {VERSION}"), "{uv}");

    let npm = readme_checkout_line("| Node");
    assert!(npm.starts_with("npm install -g "), "{npm}");
    let prefix = tmp.path().join("global");
    run_ok(
        shell(&npm)
            .env("npm_config_prefix", &prefix)
            .env("npm_config_offline", "true")
            .env("npm_config_audit", "false")
            .env("npm_config_fund", "false"),
        &npm,
    )
    .await;
    let said =
        run_ok(Command::new(prefix.join("bin/aegis-gitea-mcp")).arg("--version"), "the npm command").await;
    assert_eq!(said.trim(), format!("aegis-gitea-mcp {VERSION}"), "{npm}");
}

/// What the README's `npx -y aegis-gitea-mcp` runs, with `folder` (see [`npm_installed`]) in
/// place of the registry.
fn npx_of_the_folder(folder: &Path) -> Vec<OsString> {
    vec![
        "npx".into(),
        "--offline".into(),
        "--prefix".into(),
        folder.into(),
        "-y".into(),
        "aegis-gitea-mcp".into(),
    ]
}

#[tokio::test]
#[ignore = "needs target/dist from scripts/package (scripts/test builds it)"]
async fn the_npm_tarballs_install_into_an_empty_folder_and_serve_a_session() {
    let (folder, platform_dir) = npm_installed().await;
    // The main package holds no binary: the platform package does.
    let installed = folder.path().join("node_modules");
    assert!(!installed.join("aegis-gitea-mcp/bin/aegis-gitea-mcp").exists());
    assert!(installed.join(&platform_dir).join("bin/aegis-gitea-mcp").is_file());
    for licence in ["LICENSE-MIT", "LICENSE-APACHE"] {
        for pkg in ["aegis-gitea-mcp", platform_dir.as_str()] {
            assert!(installed.join(pkg).join(licence).is_file(), "{pkg} lacks {licence}");
        }
    }

    let mut npx = Command::new("npx");
    npx.current_dir(folder.path()).args(["--offline", "aegis-gitea-mcp", "--version"]);
    assert_eq!(
        run_ok(&mut npx, "npx aegis-gitea-mcp --version").await.trim(),
        format!("aegis-gitea-mcp {VERSION}")
    );

    // The launcher hands the binary's exit status back: 2 for an unknown tool.
    let bin = installed.join(".bin/aegis-gitea-mcp");
    let mut unknown = Command::new(&bin);
    unknown.args(["call", "noSuchTool", "--flavor", "gitea", "--url", "http://127.0.0.1:9"]);
    let run = run_with_timeout(&mut unknown, TIMEOUT).await;
    assert_eq!(run.status.and_then(|s| s.code()), Some(2), "{}", run.stderr);

    let forge = Forge::gitea().repo("alice", "demo").start().await;
    let env = user_env(&forge);
    let binary = installed.join(&platform_dir).join("bin/aegis-gitea-mcp");
    a_signal_to_the_launcher_stops_the_binary(&bin, &binary, &env).await;
    session(&forge, &npx_of_the_folder(folder.path()), &borrowed(&env), "npx -y aegis-gitea-mcp").await;
}

/// Starts `program serve` with stdin kept open, waits for it to be ready, sends it SIGTERM and
/// returns how it ended, what it wrote to stderr, and whether any process it started is
/// still running afterwards.
async fn stopped_by_sigterm(
    program: &Path,
    env: &[(&'static str, String)],
) -> (std::process::ExitStatus, String, bool) {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("stderr");
    let mut started = tokio::process::Command::new(program)
        .arg("serve")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = started.id().unwrap();
    let stderr = || std::fs::read_to_string(&log).unwrap_or_default();
    let children = || -> Vec<u32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|p| {
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                // The parent's pid is the fourth field, after the name in parentheses.
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
            .collect()
    };
    let started_what = format!("{} said `catalog ready`", program.display());
    support::wait_for(&started_what, TIMEOUT, async || stderr().contains("catalog ready")).await;
    let spawned = children();
    support::signal(pid, "TERM");
    let status = tokio::time::timeout(Duration::from_secs(20), started.wait())
        .await
        .unwrap_or_else(|_| panic!("{} did not end after SIGTERM: {}", program.display(), stderr()))
        .unwrap();
    let left = spawned.iter().any(|p| Path::new(&format!("/proc/{p}")).exists());
    (status, stderr(), left)
}

/// A client stops a server over stdio with SIGTERM to the process it started, here the
/// launcher: it must end as the binary itself ends on SIGTERM, and leave nothing running.
async fn a_signal_to_the_launcher_stops_the_binary(
    launcher: &Path,
    binary: &Path,
    env: &[(&'static str, String)],
) {
    let (direct, direct_err, _) = stopped_by_sigterm(binary, env).await;
    let (launched, launched_err, left) = stopped_by_sigterm(launcher, env).await;
    assert_eq!(
        (launched.code(), std::os::unix::process::ExitStatusExt::signal(&launched)),
        (direct.code(), std::os::unix::process::ExitStatusExt::signal(&direct)),
        "the launcher ended otherwise than the binary\n--- launched ---\n{launched_err}\n--- direct ---\n{direct_err}"
    );
    assert!(!left, "the binary was left running after the launcher ended: {launched_err}");
}

#[tokio::test]
#[ignore = "needs target/dist from scripts/package (scripts/test builds it)"]
async fn the_bundle_validates_unpacks_and_serves_with_the_values_a_person_entered() {
    let bundle = dist_file("aegis-gitea-mcp-", ".mcpb");
    let library = repo_root().join(".tools/mcpb/node_modules/@anthropic-ai/mcpb");
    let mcpb = repo_root().join(".tools/mcpb/node_modules/.bin/mcpb");
    assert!(mcpb.is_file(), "{} is missing: run scripts/setup-package-env", mcpb.display());
    let tmp = tempfile::tempdir().unwrap();
    let unpacked = tmp.path().join("bundle");
    run_ok(Command::new(&mcpb).arg("unpack").arg(&bundle).arg(&unpacked), "mcpb unpack").await;
    let validated =
        run_ok(Command::new(&mcpb).arg("validate").arg(unpacked.join("manifest.json")), "mcpb validate")
            .await;
    assert!(validated.contains("validation passes"), "{validated}");

    assert!(unpacked.join("LICENSE-MIT").is_file() && unpacked.join("LICENSE-APACHE").is_file());
    let manifest = read_json(&unpacked.join("manifest.json"));
    assert_eq!(manifest["version"], VERSION);
    assert_eq!(manifest["compatibility"]["platforms"], json!(["linux"]));
    let listed: Vec<&Value> = manifest["tools"].as_array().unwrap().iter().map(|t| &t["name"]).collect();
    assert_eq!(manifest["user_config"]["gitea_token"]["sensitive"], true);

    let resolve = |user_config: Value| {
        let mut cmd = Command::new("node");
        cmd.arg(repo_root().join("tests/node/mcpb_config.mjs"))
            .arg(&library)
            .arg(&unpacked)
            .arg(user_config.to_string());
        cmd
    };
    // Without the required URL the client starts nothing.
    let refused =
        run_ok(&mut resolve(json!({"gitea_token": "t"})), "the bundle's configuration without a URL").await;
    assert_eq!(refused.trim(), "null");

    let forge = Forge::gitea().repo("alice", "demo").start().await;
    let out = run_ok(
        &mut resolve(json!({"gitea_url": forge.base_url(), "gitea_token": ALICE_TOKEN})),
        "the bundle's configuration",
    )
    .await;
    let config: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    let command = config["command"].as_str().unwrap();
    assert_eq!(Path::new(command), unpacked.join("server/aegis-gitea-mcp"), "{config}");
    let env: Vec<(&str, &str)> =
        config["env"].as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap())).collect();
    // Every placeholder was filled: the defaults of the values left alone, too.
    assert!(env.iter().all(|(_, v)| !v.contains("${")), "{config}");
    assert!(env.contains(&("READ_ONLY", "false")) && env.contains(&("TOOLSETS", "core")), "{config}");
    let mut line: Vec<OsString> = vec![command.into()];
    line.extend(config["args"].as_array().unwrap().iter().map(|a| OsString::from(a.as_str().unwrap())));
    let run = session(&forge, &line, &env, "the bundle's entry point").await;
    // The tools the bundle shows before it is installed are those the server then lists.
    let served: Vec<&Value> = run.doc["tool_names"].as_array().unwrap().iter().collect();
    assert_eq!(listed, served);
}

#[test]
#[ignore = "needs target/dist from scripts/package (scripts/test builds it)"]
fn the_built_registry_entry_names_every_built_file_with_its_hash() {
    use sha2::{Digest, Sha256};
    let dir = dist();
    let server = read_json(&dir.join("server.json"));
    let errors = registry_schema_errors(&server);
    assert!(errors.is_empty(), "target/dist/server.json: {errors:#?}");
    let sha = |p: &Path| format!("{:x}", Sha256::digest(std::fs::read(p).unwrap()));
    let bundles: Vec<&Value> =
        server["packages"].as_array().unwrap().iter().filter(|p| p["registryType"] == "mcpb").collect();
    assert!(!bundles.is_empty(), "{server}");
    let releases = format!("{}/releases/download/v{VERSION}/", env!("CARGO_PKG_REPOSITORY"));
    for b in bundles {
        let url = b["identifier"].as_str().unwrap();
        let file =
            url.strip_prefix(&releases).unwrap_or_else(|| panic!("{url} is not among the release's files"));
        // The registry accepts a bundle URL only if it says "mcp".
        assert!(file.to_ascii_lowercase().contains("mcp"), "{url}");
        assert_eq!(b["fileSha256"], sha(&dir.join(file)), "{url}");
        assert_eq!(b["version"], VERSION);
    }
    // SHA256SUMS lists every release file, with its hash.
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    let mut listed = 0;
    for line in sums.lines() {
        let (hash, name) = line.split_once("  ").unwrap();
        assert_eq!(hash, sha(&dir.join(name)), "{name}");
        assert!(name.contains(VERSION) || name == "server.json", "{name} does not carry the version");
        listed += 1;
    }
    assert_eq!(listed, 5, "{sums}");
}
