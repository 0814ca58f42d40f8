//! `fake-forge`: runs the fake as a process, for Python tests and `wrk` load runs.
//!
//! ```text
//! fake-forge --flavor gitea|forgejo [--port N] [--user TOKEN=LOGIN]... [--password LOGIN=PW]...
//!            [--root-url URL] [--version V] [--seed-repo owner/name]... [--seed-issues N]
//!            [--seed-private-repo owner/name]... [--collaborator owner/name=LOGIN]...
//!            [--visibility LOGIN=public|limited|private]... [--admin LOGIN]... [--oauth-app CLIENT_ID:CLIENT_SECRET:REDIRECT_URI]...
//!            [--oauth-user LOGIN] [--oauth-ttl SECONDS] [--no-record]
//! ```
//!
//! Prints exactly one line, `http://127.0.0.1:PORT`, once it is listening, then serves until
//! killed. `--seed-issues N` adds N issues to every seeded repository (private ones too);
//! `--seed-private-repo` seeds a repository only its owner, its collaborators
//! (`--collaborator`) and site admins see; `--visibility` sets who sees a user's profile and
//! public repositories. Without `--user`, the
//! default user (token `tok-alice-0123456789`, login `alice`) is configured; without
//! `--password`, alice's default password (for HTTP Basic). Recorded requests
//! are served as JSON at `GET /_fake/requests`; `--no-record` turns recording off so that long
//! load runs (`wrk`) keep memory flat.
//!
//! `--oauth-app` registers an OAuth2 application owned by the first user: the text up to the
//! first `:` is the client id, up to the second the secret (empty for a public client, which
//! must use PKCE), the rest the redirect URI (which may itself contain `:`). Repeating it with
//! the same client id and secret adds a redirect URI. `--oauth-user` is the login that is
//! signed in to the forge and consents at `/login/oauth/authorize` (default: the first user);
//! `--oauth-ttl` is the lifetime of issued access tokens (default 3600).

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use std::time::Duration;

use fake_forge::{FakeForge, Flavor, OAuthApp, Options, Visibility};

const USAGE: &str = "usage: fake-forge --flavor gitea|forgejo [--port N] [--user TOKEN=LOGIN]... \
[--password LOGIN=PW]... [--root-url URL] [--version V] [--seed-repo owner/name]... [--seed-issues N] \
[--seed-private-repo owner/name]... [--collaborator owner/name=LOGIN]... [--visibility LOGIN=public|limited|private]... \
[--admin LOGIN]... [--oauth-app CLIENT_ID:CLIENT_SECRET:REDIRECT_URI]... [--oauth-user LOGIN] [--oauth-ttl SECONDS] \
[--no-record]";

/// The parsed command line.
struct Args {
    opts: Options,
    port: u16,
    /// `(owner, name, private)`, in the order given.
    seed_repos: Vec<(String, String, bool)>,
    seed_issues: usize,
    /// `(owner, name, login)`.
    collaborators: Vec<(String, String, String)>,
    visibility: Vec<(String, Visibility)>,
    record: bool,
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        opts: Options::default(),
        port: 0,
        seed_repos: Vec::new(),
        seed_issues: 0,
        collaborators: Vec::new(),
        visibility: Vec::new(),
        record: true,
    };
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
            "--seed-repo" | "--seed-private-repo" => {
                let (owner, name) =
                    value.split_once('/').ok_or_else(|| format!("{flag} wants owner/name, got {value:?}"))?;
                args.seed_repos.push((owner.to_string(), name.to_string(), flag == "--seed-private-repo"));
            }
            "--collaborator" => {
                let parsed =
                    value.split_once('=').and_then(|(repo, login)| Some((repo.split_once('/')?, login)));
                let Some(((owner, name), login)) = parsed else {
                    return Err(format!("--collaborator wants owner/name=LOGIN, got {value:?}"));
                };
                args.collaborators.push((owner.to_string(), name.to_string(), login.to_string()));
            }
            "--visibility" => {
                let parsed =
                    value.split_once('=').and_then(|(login, v)| Some((login, Visibility::parse(v)?)));
                let Some((login, visibility)) = parsed else {
                    return Err(format!("--visibility wants LOGIN=public|limited|private, got {value:?}"));
                };
                args.visibility.push((login.to_string(), visibility));
            }
            "--seed-issues" => {
                args.seed_issues = value.parse().map_err(|_| format!("bad count {value:?}"))?
            }
            "--oauth-app" => add_oauth_app(&mut args.opts.oauth_apps, &value)?,
            "--oauth-user" => args.opts.oauth_user = Some(value),
            "--oauth-ttl" => {
                let secs = value.parse().map_err(|_| format!("bad --oauth-ttl {value:?}"))?;
                args.opts.oauth_access_ttl = Duration::from_secs(secs);
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

/// Adds `CLIENT_ID:CLIENT_SECRET:REDIRECT_URI` to `apps`: a new application, or one more
/// redirect URI of an application already given with the same id and secret.
fn add_oauth_app(apps: &mut Vec<OAuthApp>, value: &str) -> Result<(), String> {
    let mut parts = value.splitn(3, ':');
    let (Some(id), Some(secret), Some(uri)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("--oauth-app wants CLIENT_ID:CLIENT_SECRET:REDIRECT_URI, got {value:?}"));
    };
    if id.is_empty() || uri.is_empty() {
        return Err(format!("--oauth-app needs a client id and a redirect URI, got {value:?}"));
    }
    match apps.iter_mut().find(|a| a.client_id == id) {
        Some(app) if app.client_secret == secret => app.redirect_uris.push(uri.to_string()),
        Some(_) => return Err(format!("--oauth-app {id:?} given twice with different secrets")),
        None if secret.is_empty() => apps.push(OAuthApp::public(id, uri)),
        None => apps.push(OAuthApp::confidential(id, secret, uri)),
    }
    Ok(())
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
    for (login, visibility) in &args.visibility {
        forge.set_visibility(login, *visibility);
    }
    for (owner, name, private) in &args.seed_repos {
        if *private {
            forge.seed_private_repo(owner, name);
        } else {
            forge.seed_repo(owner, name);
        }
        forge.seed_issues(owner, name, args.seed_issues);
    }
    for (owner, name, login) in &args.collaborators {
        forge.seed_collaborator(owner, name, login, "write");
    }
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{}", forge.base_url()).and_then(|_| out.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    drop(out);
    std::future::pending::<()>().await;
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Args, String> {
        parse(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn oauth_flags() {
        let a = args(&[
            "--oauth-app",
            "cid:sec:http://127.0.0.1:8080/cb?x=1",
            "--oauth-app=cid:sec:https://app.example/cb",
            "--oauth-app",
            "pub::myapp:/cb",
            "--oauth-user",
            "bob",
            "--oauth-ttl",
            "5",
        ])
        .unwrap();
        let apps = &a.opts.oauth_apps;
        assert_eq!(apps.len(), 2);
        assert_eq!(apps[0].client_secret, "sec");
        assert!(apps[0].confidential);
        assert_eq!(apps[0].redirect_uris, ["http://127.0.0.1:8080/cb?x=1", "https://app.example/cb"]);
        assert_eq!((apps[1].client_id.as_str(), apps[1].confidential), ("pub", false));
        assert_eq!(apps[1].redirect_uris, ["myapp:/cb"]);
        assert_eq!(a.opts.oauth_user.as_deref(), Some("bob"));
        assert_eq!(a.opts.oauth_access_ttl, Duration::from_secs(5));
        assert!(args(&["--oauth-app", "cid:sec"]).is_err());
        assert!(args(&["--oauth-app", "a:b:c", "--oauth-app", "a:x:d"]).is_err());
        assert!(args(&["--oauth-ttl", "-1"]).is_err());
        let d = args(&[]).unwrap();
        assert_eq!(d.opts.oauth_access_ttl, Duration::from_secs(3600));
        assert!(d.opts.oauth_apps.is_empty());
    }

    #[test]
    fn who_sees_what_flags() {
        let a = args(&[
            "--seed-private-repo",
            "alice/secret",
            "--seed-repo=alice/open",
            "--collaborator",
            "alice/secret=bob",
            "--visibility",
            "carol=LIMITED",
        ])
        .unwrap();
        let repos: Vec<_> = a.seed_repos.iter().map(|(o, n, p)| (o.as_str(), n.as_str(), *p)).collect();
        assert_eq!(repos, [("alice", "secret", true), ("alice", "open", false)]);
        assert_eq!(a.collaborators, [("alice".into(), "secret".into(), "bob".into())]);
        assert_eq!(a.visibility, [("carol".into(), Visibility::Limited)]);
        assert!(args(&["--collaborator", "alice/secret"]).is_err());
        assert!(args(&["--collaborator", "secret=bob"]).is_err());
        assert!(args(&["--visibility", "carol=hidden"]).is_err());
        assert!(args(&["--seed-private-repo", "secret"]).is_err());
    }
}
