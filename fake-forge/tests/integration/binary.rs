//! The `fake-forge` binary: prints its URL, serves, exposes the recording.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use common::send;

/// Kills the child on drop so a failing test leaves no process behind.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn binary_serves_and_records() {
    let (_running, addr) = spawn(&[
        "--flavor",
        "forgejo",
        "--user",
        "t1=bob",
        "--root-url",
        "https://f.invalid",
        "--seed-repo",
        "bob/demo",
        "--seed-issues",
        "3",
        "--version",
        "9.9.9",
    ])
    .await;

    let v = send(addr, "GET", "/api/v1/version", &[], b"").await.json();
    assert_eq!(v["version"], "9.9.9");
    let issues =
        send(addr, "GET", "/api/v1/repos/bob/demo/issues?limit=2", &[("Authorization", "Bearer t1")], b"")
            .await;
    assert_eq!(issues.header("x-total-count"), Some("3"));
    assert!(issues.header("link").unwrap().starts_with("<https://f.invalid/api/v1/"));

    let recorded = send(addr, "GET", "/_fake/requests", &[], b"").await.json();
    assert_eq!(recorded.as_array().unwrap().len(), 2);
    assert_eq!(recorded[1]["operation_id"], "issueListIssues");
    assert_eq!(recorded[1]["raw_query"], "limit=2");
    assert_eq!(send(addr, "DELETE", "/_fake/requests", &[], b"").await.status, 204);
    let recorded = send(addr, "GET", "/_fake/requests", &[], b"").await.json();
    assert_eq!(recorded, serde_json::json!([]));
}

#[tokio::test]
async fn binary_seeds_private_repositories_collaborators_and_visibility() {
    let (_running, addr) = spawn(&[
        "--user",
        "t1=bob",
        "--user",
        "t2=carol",
        "--user",
        "t3=dave",
        "--seed-private-repo",
        "bob/secret",
        "--seed-issues",
        "1",
        "--collaborator",
        "bob/secret=carol",
        "--visibility",
        "bob=limited",
    ])
    .await;
    let status = |token: &'static str| async move {
        let auth = format!("token {token}");
        send(addr, "GET", "/api/v1/repos/bob/secret/issues/1", &[("Authorization", &auth)], b"").await.status
    };
    assert_eq!((status("t1").await, status("t2").await, status("t3").await), (200, 200, 404));
    let bob = send(addr, "GET", "/api/v1/users/bob", &[("Authorization", "token t3")], b"").await;
    assert_eq!(bob.json()["visibility"], "limited");
    assert_eq!(send(addr, "GET", "/api/v1/users/bob", &[], b"").await.status, 404);
}

/// Starts the binary with `args` and returns it with the address it printed.
async fn spawn(args: &[&str]) -> (Running, SocketAddr) {
    let child = Command::new(env!("CARGO_BIN_EXE_fake-forge"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn fake-forge");
    let mut running = Running(child);
    let stdout = running.0.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line
    })
    .await
    .unwrap();
    let url = line.trim_end();
    assert!(url.starts_with("http://127.0.0.1:"), "{line:?}");
    let addr = url.trim_start_matches("http://").parse().unwrap();
    (running, addr)
}

#[tokio::test]
async fn binary_oauth_flags_register_an_application() {
    let (_running, addr) = spawn(&[
        "--user",
        "t1=bob",
        "--user",
        "t2=carol",
        "--oauth-app",
        "cid:csecret:http://127.0.0.1:9999/cb",
        "--oauth-user",
        "carol",
        "--oauth-ttl",
        "60",
    ])
    .await;
    let authorize = "/login/oauth/authorize?client_id=cid&response_type=code&state=s\
                     &redirect_uri=http%3A%2F%2F127.0.0.1%3A9999%2Fcb";
    let r = send(addr, "GET", authorize, &[], b"").await;
    assert_eq!(r.status, 303, "{}", r.text());
    let location = r.header("location").unwrap();
    let code = location.split("code=").nth(1).unwrap().split('&').next().unwrap();
    let body = format!(
        "grant_type=authorization_code&client_id=cid&client_secret=csecret&code={code}\
         &redirect_uri=http%3A%2F%2F127.0.0.1%3A9999%2Fcb"
    );
    let headers = [("Content-Type", "application/x-www-form-urlencoded")];
    let tokens = send(addr, "POST", "/login/oauth/access_token", &headers, body.as_bytes()).await;
    assert_eq!(tokens.status, 200, "{}", tokens.text());
    let tokens = tokens.json();
    assert_eq!(tokens["expires_in"], 60);
    let bearer = format!("Bearer {}", tokens["access_token"].as_str().unwrap());
    let me = send(addr, "GET", "/api/v1/user", &[("Authorization", &bearer)], b"").await;
    assert_eq!(me.json()["login"], "carol");
    // The application belongs to the first user.
    let apps =
        send(addr, "GET", "/api/v1/user/applications/oauth2", &[("Authorization", "token t1")], b"").await;
    assert_eq!(apps.json()[0]["client_id"], "cid");
}

#[test]
fn bad_arguments_exit_2() {
    let status = Command::new(env!("CARGO_BIN_EXE_fake-forge"))
        .args(["--flavor", "gitlab"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
}
