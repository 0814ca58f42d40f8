//! `/metrics`: the server's metrics (`crate::metrics`) as Prometheus text, for a scraper.
//!
//! By default it is served on the MCP listener beside `/healthz`, and like it outside the
//! MCP layers (no Host/Origin check, no token): a scraper addresses the server by IP and
//! carries no MCP credential, and the answer holds counts only, no identity. With
//! `METRICS_LISTEN` set to an address it is served only there, on a small listener of its
//! own (the same bounded accept loop, a handful of connections), so that the MCP address
//! need not expose it; `off` serves it nowhere.

use std::sync::Arc;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use super::listener::{self, ConnLimits};
use crate::config::MetricsListen;
use crate::server::Server;

/// Most connections the metrics listener holds (scrapers are few), and from one address.
const MAX_CONNECTIONS: usize = 16;
const MAX_CONNECTIONS_PER_PEER: usize = 8;

/// `GET /metrics` (axum answers `HEAD` too, and 405 to any other method).
pub(crate) fn router(server: Arc<Server>) -> Router {
    let scrape = move || {
        let text = server.metrics.render();
        async move { ([(CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response() }
    };
    Router::new().route("/metrics", get(scrape))
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
    };
    // Never stopped: it serves until the process exits, also while the MCP listener drains.
    let (stop, drain) = (CancellationToken::new(), CancellationToken::new());
    tokio::spawn(listener::serve(tcp, router(server.clone()), limits, stop, drain));
    Ok(())
}
