//! `fake-forge`: runs the fake as a process, for Python tests and `wrk` load runs.
//!
//! ```text
//! fake-forge --flavor gitea|forgejo [--port N] [--user TOKEN=LOGIN]... [--password LOGIN=PW]...
//!            [--root-url URL] [--version V] [--seed-repo owner/name]... [--seed-issues N]
//!            [--admin LOGIN]... [--no-record]
//! ```
//!
//! Prints exactly one line, `http://127.0.0.1:PORT`, once it is listening, then serves until
//! killed. `--seed-issues N` adds N issues to every seeded repository. Without `--user`, the
//! default user (token `tok-alice-0123456789`, login `alice`) is configured; without
//! `--password`, alice's default password (for HTTP Basic). Recorded requests
//! are served as JSON at `GET /_fake/requests`; `--no-record` turns recording off so that long
//! load runs (`wrk`) keep memory flat.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use fake_forge::{FakeForge, Flavor, Options};

const USAGE: &str = "usage: fake-forge --flavor gitea|forgejo [--port N] [--user TOKEN=LOGIN]... \
[--password LOGIN=PW]... [--root-url URL] [--version V] [--seed-repo owner/name]... [--seed-issues N] [--admin LOGIN]... \
[--no-record]";

/// The parsed command line.
struct Args {
    opts: Options,
    port: u16,
    seed_repos: Vec<(String, String)>,
    seed_issues: usize,
    record: bool,
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args =
        Args { opts: Options::default(), port: 0, seed_repos: Vec::new(), seed_issues: 0, record: true };
    let mut users = Vec::new();
    let mut passwords = Vec::new();
    while let Some(flag) = argv.next() {
        if flag == "--help" || flag == "-h" {
            return Err(String::new());
        }
        if flag == "--no-record" {
            args.record = false;
            continue;
        }
        let (flag, inline) = match flag.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (flag, None),
        };
        let value = match inline.or_else(|| argv.next()) {
            Some(v) => v,
            None => return Err(format!("{flag} needs a value")),
        };
        match flag.as_str() {
            "--flavor" => {
                args.opts.flavor = match value.to_ascii_lowercase().as_str() {
                    "gitea" => Flavor::Gitea,
                    "forgejo" => Flavor::Forgejo,
                    other => return Err(format!("unknown flavor {other:?}")),
                }
            }
            "--port" => args.port = value.parse().map_err(|_| format!("bad port {value:?}"))?,
            "--user" => {
                let (token, login) = value
                    .split_once('=')
                    .ok_or_else(|| format!("--user wants TOKEN=LOGIN, got {value:?}"))?;
                users.push((token.to_string(), login.to_string()));
            }
            "--password" => {
                let (login, password) =
                    value.split_once('=').ok_or_else(|| "--password wants LOGIN=PASSWORD".to_string())?;
                passwords.push((login.to_string(), password.to_string()));
            }
            "--admin" => args.opts.admins.push(value),
            "--root-url" => args.opts.root_url = value,
            "--version" => args.opts.version = Some(value),
            "--seed-repo" => {
                let (owner, name) = value
                    .split_once('/')
                    .ok_or_else(|| format!("--seed-repo wants owner/name, got {value:?}"))?;
                args.seed_repos.push((owner.to_string(), name.to_string()));
            }
            "--seed-issues" => {
                args.seed_issues = value.parse().map_err(|_| format!("bad count {value:?}"))?
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if !users.is_empty() {
        args.opts.users = users;
    }
    if !passwords.is_empty() {
        args.opts.passwords = passwords;
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("fake-forge: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
    let forge = match FakeForge::start_on(args.opts, addr).await {
        Ok(f) => f,
        Err(e) => {
            eprintln!("fake-forge: cannot listen on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    forge.set_recording(args.record);
    for (owner, name) in &args.seed_repos {
        forge.seed_repo(owner, name);
        forge.seed_issues(owner, name, args.seed_issues);
    }
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{}", forge.base_url()).and_then(|_| out.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    drop(out);
    std::future::pending::<()>().await;
    ExitCode::SUCCESS
}
