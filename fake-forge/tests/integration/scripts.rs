//! Scripted responses: each body variant on the wire, and the server surviving bad clients.

use crate::common;

use std::time::{Duration, Instant};

use common::{find, get, parse, request_bytes, send};
use fake_forge::wait::{WAIT_LIMIT, wait_for, wait_until};
use fake_forge::{FakeForge, Options, Script, ScriptBody, ScriptedResponse};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn open(forge: &FakeForge, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(forge.addr()).await.unwrap();
    s.write_all(&request_bytes("GET", path, &[], b"")).await.unwrap();
    s
}

/// Reads until the end of the response head; returns (head, body bytes already read).
async fn read_head(s: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "EOF before the head ended");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            return (head, buf[end + 4..].to_vec());
        }
    }
}

#[tokio::test]
async fn bytes_with_delay_and_headers() {
    let forge = FakeForge::start(Options::default()).await;
    let resp = ScriptedResponse::json(503, &serde_json::json!({"message": "busy"}))
        .with_header("Retry-After", "1")
        .with_delay(Duration::from_millis(200));
    forge.script(Script::once(Some("GET"), "/api/v1/version", resp));
    let start = Instant::now();
    let r = get(forge.addr(), "/api/v1/version").await;
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.header("content-length"), Some("18"));
    assert_eq!(r.json()["message"], "busy");
    assert_eq!(forge.requests()[0].operation_id.as_deref(), Some("getVersion"));
    // Used up: the next request gets the real answer.
    assert_eq!(get(forge.addr(), "/api/v1/version").await.status, 200);
}

#[tokio::test]
async fn prefix_scripts_and_newest_wins() {
    let forge = FakeForge::start(Options::default()).await;
    forge.script(Script::always(None, "/api/v1/repos/*", ScriptedResponse::status(500)));
    forge.script(Script::once(Some("GET"), "/api/v1/repos/o/r", ScriptedResponse::status(502)));
    assert_eq!(get(forge.addr(), "/api/v1/repos/o/r").await.status, 502);
    assert_eq!(get(forge.addr(), "/api/v1/repos/o/r").await.status, 500);
    assert_eq!(get(forge.addr(), "/api/v1/repos/o/r/issues").await.status, 500);
    forge.clear_scripts();
    assert_eq!(get(forge.addr(), "/api/v1/repos/o/r/issues").await.status, 404);
}

#[tokio::test]
async fn chunked_body() {
    let forge = FakeForge::start(Options::default()).await;
    let body = ScriptBody::Chunked {
        chunks: vec![b"ab".to_vec(), b"cd".to_vec(), b"ef".to_vec()],
        delay_between: Duration::from_millis(100),
    };
    forge.script(Script::once(None, "/slow", ScriptedResponse::status(200).with_body(body)));
    let start = Instant::now();
    let r = send(forge.addr(), "GET", "/slow", &[], b"").await;
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.header("content-length"), None);
    assert_eq!(r.body, b"abcdef");
    assert_eq!(forge.open_streams(), 0);
}

#[tokio::test]
async fn lying_length_closes_early() {
    let forge = FakeForge::start(Options::default()).await;
    let body = ScriptBody::LyingLength { declared: 100, actual: b"short".to_vec() };
    forge.script(Script::once(None, "/lie", ScriptedResponse::status(200).with_body(body)));
    let mut s = open(&forge, "/lie").await;
    let mut raw = Vec::new();
    tokio::time::timeout(WAIT_LIMIT, s.read_to_end(&mut raw))
        .await
        .expect("the server closes the connection")
        .unwrap();
    let r = parse(&raw);
    assert_eq!(r.header("content-length"), Some("100"));
    assert_eq!(r.body, b"short");
    assert_eq!(get(forge.addr(), "/api/v1/version").await.status, 200);
}

#[tokio::test]
async fn endless_body_follows_the_reader_and_stops_on_disconnect() {
    let forge = FakeForge::start(Options::default()).await;
    let body = ScriptBody::Endless { chunk: vec![b'z'; 8192] };
    forge.script(Script::always(None, "/endless", ScriptedResponse::status(200).with_body(body)));
    let mut s = open(&forge, "/endless").await;
    let (head, mut got) = read_head(&mut s).await;
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    let mut chunk = vec![0u8; 64 * 1024];
    while got.len() < 4 * 1024 * 1024 {
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0);
        got.extend_from_slice(&chunk[..n]);
    }
    // Stop reading: production must stall once the socket buffers are full, far short of
    // what an unbounded producer would have made by then.
    let (mut last, mut same) = (forge.streamed_bytes(), 0);
    let stalled = wait_until("the endless body stopped growing", WAIT_LIMIT, async || {
        let now = forge.streamed_bytes();
        assert!(now < got.len() as u64 + 64 * 1024 * 1024, "buffered {now} bytes");
        same = if std::mem::replace(&mut last, now) == now { same + 1 } else { 0 };
        (same >= 3).then_some(now)
    })
    .await;
    assert!(stalled < got.len() as u64 + 64 * 1024 * 1024, "buffered {stalled} bytes");
    assert_eq!(forge.open_streams(), 1);

    drop(s);
    wait_for("the endless body ended with its client", WAIT_LIMIT, async || forge.open_streams() == 0).await;
    assert_eq!(get(forge.addr(), "/api/v1/version").await.status, 200);
}

#[tokio::test]
async fn hang_never_answers_and_shutdown_closes_it() {
    let forge = FakeForge::start(Options::default()).await;
    forge.script(Script::always(None, "/hang", ScriptedResponse::status(200).with_body(ScriptBody::Hang)));
    let mut first = open(&forge, "/hang").await;
    wait_for("the hanging request is open", WAIT_LIMIT, async || forge.open_streams() == 1).await;
    let mut buf = [0u8; 16];
    let waited = tokio::time::timeout(Duration::from_millis(300), first.read(&mut buf)).await;
    assert!(waited.is_err(), "a hanging script answered");
    drop(first);
    wait_for("the hanging request ended with its client", WAIT_LIMIT, async || forge.open_streams() == 0)
        .await;
    assert_eq!(get(forge.addr(), "/api/v1/version").await.status, 200);
    assert_eq!(forge.requests().len(), 2, "the hanging request is recorded too");

    let mut second = open(&forge, "/hang").await;
    wait_for("the second hanging request is open", WAIT_LIMIT, async || forge.open_streams() == 1).await;
    let addr = forge.addr();
    forge.shutdown();
    let n = tokio::time::timeout(WAIT_LIMIT, second.read(&mut buf))
        .await
        .expect("shutdown closes open connections");
    assert!(matches!(n, Ok(0) | Err(_)));
    wait_for("the forge stopped accepting", WAIT_LIMIT, async || TcpStream::connect(addr).await.is_err())
        .await;
}

#[tokio::test]
async fn dropping_the_last_handle_stops_the_server() {
    let forge = FakeForge::start(Options::default()).await;
    let clone = forge.clone();
    let addr = forge.addr();
    drop(forge);
    assert_eq!(get(addr, "/api/v1/version").await.status, 200, "a clone keeps it alive");
    drop(clone);
    wait_for("the forge stopped accepting", WAIT_LIMIT, async || TcpStream::connect(addr).await.is_err())
        .await;
}

#[tokio::test]
async fn scripts_take_over_the_oauth_routes() {
    let forge = FakeForge::start(Options::default()).await;
    let token = "/login/oauth/access_token";
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    forge.script(Script::once(
        Some("POST"),
        token,
        ScriptedResponse::json(503, &serde_json::json!({"busy": 1})),
    ));
    let r = send(forge.addr(), "POST", token, &form, b"grant_type=refresh_token").await;
    assert_eq!(r.status, 503);
    // Used up: the provider answers again (here: Gitea's error for an unknown client).
    let r = send(forge.addr(), "POST", token, &form, b"grant_type=refresh_token").await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"], "invalid_client");

    // A prefix script catches every provider route; a closed connection sends nothing at all.
    forge.script(Script::once(
        None,
        "/login/oauth/*",
        ScriptedResponse::status(200).with_body(ScriptBody::Close),
    ));
    let mut s = TcpStream::connect(forge.addr()).await.unwrap();
    s.write_all(&request_bytes("POST", token, &form, b"grant_type=x")).await.unwrap();
    let mut raw = Vec::new();
    let read = tokio::time::timeout(WAIT_LIMIT, s.read_to_end(&mut raw))
        .await
        .expect("the server closes the connection");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(raw.is_empty(), "{:?}", String::from_utf8_lossy(&raw));

    forge.script(Script::once(
        None,
        "/login/oauth/userinfo",
        ScriptedResponse::status(200).with_body(ScriptBody::Hang),
    ));
    let mut hung = open(&forge, "/login/oauth/userinfo").await;
    wait_for("the hanging request is open", WAIT_LIMIT, async || forge.open_streams() == 1).await;
    let mut buf = [0u8; 16];
    let waited = tokio::time::timeout(Duration::from_millis(300), hung.read(&mut buf)).await;
    assert!(waited.is_err(), "a hanging script answered");
    drop(hung);

    // Every one of them was recorded, with its body.
    let recorded = forge.requests();
    assert_eq!(recorded.len(), 4);
    assert_eq!(recorded[2].body, b"grant_type=x");
    assert_eq!(recorded[3].raw_path, "/login/oauth/userinfo");
    assert_eq!(get(forge.addr(), "/api/v1/version").await.status, 200);
}
