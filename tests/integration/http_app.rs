//! The HTTP application in-process: the router `serve` serves (`transport::http::app`), driven
//! with `oneshot`, for what depends on the request alone — the Host and Origin checks, health
//! — on both transports. No process and no socket: what only a socket shows (timeouts,
//! connection caps, streams over time) keeps its process tests.

use crate::support;

use std::sync::Arc;

use aegis_gitea_mcp::server::Server;
use aegis_gitea_mcp::transport::http::{App, app};
use axum::body::Body;
use axum::http::{Request, Response};
use fake_forge::FakeForge;
use futures::StreamExt as _;
use http_body_util::BodyExt;
use serde_json::json;
use support::{ALICE_TOKEN, Forge};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// The address the application believes it answers at (nothing listens there).
const ADDR: &str = "127.0.0.1:47123";

/// The application for `transport` in front of a fake forge, with the global token and the
/// settings of `flags`.
struct InProcess {
    app: App,
    _forge: FakeForge,
    _stop: CancellationToken,
}

impl InProcess {
    async fn start(transport: &str, flags: &[&str]) -> InProcess {
        let forge = Forge::gitea().start().await;
        let url = forge.base_url();
        let mut args =
            vec!["serve", "--transport", transport, "--listen", ADDR, "--url", &url, "--flavor", "gitea"];
        args.extend_from_slice(flags);
        let settings = support::settings_of(&args, &[("GITEA_TOKEN".into(), ALICE_TOKEN.into())]);
        let choice = settings.transport;
        let server = Arc::new(Server::start(settings).await.expect("the server starts"));
        let stop = CancellationToken::new();
        let app = app(server, choice, ADDR.parse().unwrap(), &stop).await;
        InProcess { app, _forge: forge, _stop: stop }
    }

    async fn send(&self, req: Request<Body>) -> Response<Body> {
        self.app.router.clone().oneshot(req).await.expect("the router answers")
    }
}

/// What opens an MCP conversation on `transport` (an `initialize` POST, or the SSE stream's
/// GET), with `headers`; the Host is this application's unless given.
fn open(transport: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut req = match transport {
        "sse" => Request::get("/sse").header("accept", "text/event-stream"),
        _ => Request::post("/mcp").header("content-type", "application/json").header("accept", ACCEPT_BOTH),
    };
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req = req.header("host", ADDR);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = match transport {
        "sse" => Body::empty(),
        _ => Body::from(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}})
            .to_string(),
        ),
    };
    req.body(body).unwrap()
}

const ACCEPT_BOTH: &str = "application/json, text/event-stream";

async fn text(resp: Response<Body>) -> String {
    let bytes = resp.into_body().collect().await.expect("a whole body").to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Reads an SSE stream's body until its `endpoint` event, and returns where to post.
async fn endpoint_of(resp: Response<Body>) -> String {
    let mut events = support::http::events_of(resp.into_body());
    while let Some(read) = events.next().await {
        let (event, at) = read.expect("an event stream");
        if event == "endpoint" {
            return at;
        }
    }
    panic!("the stream ended before its endpoint")
}

on_both_transports!(
    host_outside_allowed_list_is_forbidden,
    origin_outside_allowed_list_is_forbidden,
    configured_allowed_hosts_and_origins_are_admitted,
    healthz_answers_200,
);

async fn host_outside_allowed_list_is_forbidden(t: &str) {
    let a = InProcess::start(t, &[]).await;
    for host in ["evil.example", "evil.example:80", "localhost.evil.example"] {
        let resp = a.send(open(t, &[("host", host)])).await;
        assert_eq!(resp.status().as_u16(), 403, "Host: {host}");
        let body = text(resp).await;
        assert!(body.contains("Host"), "a clear message: {body}");
    }
    // Loopback names are allowed by default when listening on loopback.
    for host in [ADDR, "localhost"] {
        let resp = a.send(open(t, &[("host", host)])).await;
        assert_eq!(resp.status().as_u16(), 200, "Host: {host}");
    }
    // Also on a later request of an open session.
    let opened = a.send(open(t, &[])).await;
    assert_eq!(opened.status().as_u16(), 200);
    let later = match t {
        "sse" => Request::post(endpoint_of(opened).await),
        _ => {
            let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_owned();
            Request::post("/mcp").header("mcp-session-id", session)
        }
    };
    let resp = a
        .send(
            later
                .header("host", "evil.example")
                .header("content-type", "application/json")
                .header("accept", ACCEPT_BOTH)
                .body(Body::from(json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string()))
                .unwrap(),
        )
        .await;
    assert_eq!(resp.status().as_u16(), 403);
}

async fn origin_outside_allowed_list_is_forbidden(t: &str) {
    let a = InProcess::start(t, &[]).await;
    for origin in ["http://evil.example", "null", "http://localhost.evil.example"] {
        let resp = a.send(open(t, &[("origin", origin)])).await;
        assert_eq!(resp.status().as_u16(), 403, "Origin: {origin}");
        let body = text(resp).await;
        assert!(body.contains("Origin"), "a clear message: {body}");
    }
    let resp = a.send(open(t, &[("origin", "http://localhost:3000")])).await;
    assert_eq!(resp.status().as_u16(), 200, "a loopback origin is allowed");
}

async fn configured_allowed_hosts_and_origins_are_admitted(t: &str) {
    let a = InProcess::start(
        t,
        &["--allowed-hosts", "mcp.example,other.example:8443", "--allowed-origins", "https://app.example"],
    )
    .await;
    for host in ["mcp.example", "other.example:8443"] {
        let resp = a.send(open(t, &[("host", host)])).await;
        assert_eq!(resp.status().as_u16(), 200, "Host: {host}");
    }
    let resp = a.send(open(t, &[("host", "mcp.example"), ("origin", "https://app.example")])).await;
    assert_eq!(resp.status().as_u16(), 200, "a configured origin");
    // The configured lists replace the loopback defaults.
    let resp = a.send(open(t, &[("host", "mcp.example"), ("origin", "http://localhost")])).await;
    assert_eq!(resp.status().as_u16(), 403, "an origin outside the configured list");
    let resp = a.send(open(t, &[("host", "evil.example")])).await;
    assert_eq!(resp.status().as_u16(), 403, "a host outside the configured list");
    let resp = a.send(open(t, &[("host", "other.example:80")])).await;
    assert_eq!(resp.status().as_u16(), 403, "the wrong port of a host configured with its port");
}

async fn healthz_answers_200(t: &str) {
    let a = InProcess::start(t, &["--mcp-bearer-token", "a-shared-secret-of-the-deployment"]).await;
    let resp = a.send(Request::get("/healthz").header("host", ADDR).body(Body::empty()).unwrap()).await;
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(text(resp).await, "ok");
    // The MCP routes behind it still want the shared token.
    let resp = a.send(open(t, &[])).await;
    assert_eq!(resp.status().as_u16(), 401);
}
