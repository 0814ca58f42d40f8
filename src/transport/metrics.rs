//! `/metrics`: the server's metrics (`crate::metrics`) as Prometheus text, for a scraper.
//!
//! By default it is served on the MCP listener beside `/healthz`. It answers the same `Host`
//! and `Origin` rules as `/mcp` (a page that rebinds a name to a loopback server must not read
//! it), but no MCP credential: a scraper carries none, and the answer holds counts only, no
//! identity. With `METRICS_BEARER_TOKEN` a scrape must present it (`Authorization: Bearer`,
//! as Prometheus sends it). With `METRICS_LISTEN` set to an address it is served only there,
//! on a small listener of its own (the same bounded accept loop, a handful of connections,
//! the same rules for that address), so that the MCP address need not expose it; `off`
//! serves it nowhere.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use secrecy::{ExposeSecret, SecretString};
use tokio_util::sync::CancellationToken;

use super::listener::{self, ConnLimits};
use crate::config::MetricsListen;
use crate::server::Server;

/// Most connections the metrics listener holds (scrapers are few), and from one address.
const MAX_CONNECTIONS: usize = 16;
const MAX_CONNECTIONS_PER_PEER: usize = 8;

/// Who may scrape: the `Host` and `Origin` values allowed where it is served, and the token
/// a scrape must present, if one is set.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    hosts: Vec<String>,
    origins: Vec<String>,
    token: Option<SecretString>,
}

impl Rules {
    pub(crate) fn new(hosts: Vec<String>, origins: Vec<String>, s: &crate::config::Settings) -> Rules {
        Rules { hosts, origins, token: s.metrics_bearer_token.clone() }
    }
}

/// `GET /metrics` (axum answers `HEAD` too, and 405 to any other method), behind `rules`.
pub(crate) fn router(server: Arc<Server>, rules: Rules) -> Router {
    let scrape = move || {
        let text = server.metrics.render();
        async move { ([(CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response() }
    };
    Router::new()
        .route("/metrics", get(scrape))
        .layer(axum::middleware::from_fn_with_state(Arc::new(rules), admit))
}

/// A scrape with an allowed `Host` and `Origin`, and the token when one is set; else 403 or
/// 401 (with the challenge a scraper understands).
async fn admit(State(rules): State<Arc<Rules>>, req: Request, next: Next) -> Response {
    if let Some(refused) = super::layers::host_origin_refusal(&rules.hosts, &rules.origins, &req) {
        return refused;
    }
    if let Some(token) = &rules.token {
        let presented =
            crate::identity::header::parse(req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes));
        let ok = matches!(&presented, crate::identity::header::AuthHeader::Token(t)
            if crate::identity::header::constant_time_eq(t.expose_secret().as_bytes(), token.expose_secret().as_bytes()));
        if !ok {
            let mut r = (StatusCode::UNAUTHORIZED, "send Authorization: Bearer <METRICS_BEARER_TOKEN>\n")
                .into_response();
            r.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static(r#"Bearer realm="metrics""#));
            return r;
        }
    }
    next.run(req).await
}

/// With `METRICS_LISTEN` set to an address: bind it now (an address that cannot be had
/// stops the start, as the MCP address does), announce it on stderr, and serve `/metrics`
/// there until the process ends. Otherwise nothing.
pub async fn serve_own(server: &Arc<Server>) -> anyhow::Result<()> {
    let MetricsListen::Own(addr) = server.settings.metrics_listen else { return Ok(()) };
    let tcp = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (METRICS_LISTEN): {e}"))?;
    let addr = tcp.local_addr()?;
    // One write, like the MCP listener's line: scripts may wait for it.
    let line = format!("metrics on http://{addr}/metrics\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    let s = &server.settings;
    let limits = ConnLimits {
        max: MAX_CONNECTIONS,
        per_peer: MAX_CONNECTIONS_PER_PEER,
        header_timeout: s.header_timeout,
        idle_timeout: s.idle_timeout,
        write_stall: s.stream_stall_timeout,
        // Scrapes are GETs: a body here is read only as far as a small one goes.
        drain_bytes: 64 * 1024,
        drain_timeout: s.header_timeout,
    };
    // Never stopped: it serves until the process exits, also while the MCP listener drains.
    let (stop, drain) = (CancellationToken::new(), CancellationToken::new());
    let rules = Rules::new(
        super::layers::allowed_hosts(&s.allowed_hosts, addr),
        super::layers::allowed_origins(&s.allowed_origins, addr),
        s,
    );
    tokio::spawn(listener::serve(tcp, router(server.clone(), rules), limits, stop, drain));
    Ok(())
}
