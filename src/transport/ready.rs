//! `/readyz`: whether a load balancer should send this replica requests. `/healthz` says the
//! process is alive; `/readyz` says it can also do its work: the catalog is loaded (it is,
//! before the address is bound), the forge has answered at least once, and the server is not
//! shutting down. Until the forge has answered, it is asked for its version (anonymously) in
//! the background, at growing intervals; any call a client makes counts as well.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::executor::flavor::simple_get;
use crate::identity::Credential;
use crate::server::Server;

/// How long the first question to the forge may hold up the start.
const FIRST_PROBE: Duration = Duration::from_secs(2);
/// The longest wait between two questions to a forge that has not answered.
const MAX_PROBE_INTERVAL: Duration = Duration::from_secs(10);

/// What `/readyz` looks at.
pub(crate) struct Readiness {
    server: Arc<Server>,
    draining: AtomicBool,
}

impl Readiness {
    pub(crate) fn new(server: Arc<Server>) -> Arc<Readiness> {
        Arc::new(Readiness { server, draining: AtomicBool::new(false) })
    }

    /// From now on `/readyz` answers 503: the server is draining and takes no new requests.
    pub(crate) fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Why this replica is not ready, if it is not.
    fn not_ready(&self) -> Option<String> {
        if self.draining.load(Ordering::SeqCst) {
            return Some("not ready: shutting down (in-flight calls are finishing)".to_owned());
        }
        if !self.server.forges.any_answered() {
            // Not its address: /readyz answers anyone who can reach the server.
            return Some("not ready: the forge has not answered yet".to_owned());
        }
        None
    }

    /// Ask the forge for its version: once now (for at most `FIRST_PROBE`, so that a replica
    /// whose forge answers at once is ready when its address is announced), then in the
    /// background until it has answered once (or `stop`).
    pub(crate) async fn watch_forge(self: &Arc<Self>, stop: CancellationToken) {
        if self.server.forges.any_answered() {
            return;
        }
        let _ = tokio::time::timeout(FIRST_PROBE, self.ask_forge()).await;
        if self.server.forges.any_answered() {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            let mut wait = Duration::from_millis(250);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                // A client's call may have had its answer meanwhile: then the forge is not
                // asked again.
                if !this.server.forges.any_answered() {
                    this.ask_forge().await;
                }
                if this.server.forges.any_answered() {
                    tracing::info!("the forge has answered: ready");
                    return;
                }
                wait = (wait * 2).min(MAX_PROBE_INTERVAL);
            }
        });
    }

    /// Every forge asked at once: one that answers makes the replica ready.
    async fn ask_forge(&self) {
        let asked = self.server.forges.all().map(|p| async move {
            if let Err(e) = p.forge.send(&simple_get("/version"), &Credential::anonymous()).await {
                tracing::debug!(error = %e, forge = p.name().unwrap_or_default(), "the forge has not answered the readiness probe");
            }
        });
        futures::future::join_all(asked).await;
    }

    pub(crate) fn router(self: &Arc<Self>) -> Router {
        Router::new().route("/readyz", get(readyz)).with_state(self.clone())
    }
}

async fn readyz(State(r): State<Arc<Readiness>>) -> Response {
    match r.not_ready() {
        None => "ready".into_response(),
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

/// `aegis-gitea-mcp ready`: whether the server listening at `listen` (an unspecified address
/// means this machine) answers `/readyz` with 200, all within `PROBE_LIMIT`. Prints why not.
pub fn probe(listen: &str) -> std::process::ExitCode {
    let fail = |why: String| {
        eprintln!("aegis-gitea-mcp: not ready: {why}");
        std::process::ExitCode::FAILURE
    };
    // An address, never a name to look up (a lookup has no time limit of ours).
    let listen = listen.replace("localhost:", "127.0.0.1:");
    let Ok(mut addr) = listen.parse::<std::net::SocketAddr>() else {
        return fail(format!("MCP_LISTEN {listen:?} is not an IP address and port"));
    };
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    match ask_readyz(addr) {
        Ok(a) if a.starts_with(b"HTTP/1.1 200 ") => std::process::ExitCode::SUCCESS,
        Ok(a) => {
            // Whatever answered is shown as printable text, and not much of it.
            let text: String = String::from_utf8_lossy(&a)
                .chars()
                .map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { ' ' })
                .take(200)
                .collect();
            fail(format!("{addr} answered: {}", text.split_whitespace().collect::<Vec<_>>().join(" ")))
        }
        Err(e) => fail(format!("{addr}: {e}")),
    }
}

/// How long `ready` may take in all: connecting, asking and reading the answer.
const PROBE_LIMIT: Duration = Duration::from_secs(2);

/// `GET /readyz` at `addr`: the first 4 KiB of the answer, read before `PROBE_LIMIT` is over.
fn ask_readyz(addr: std::net::SocketAddr) -> std::io::Result<Vec<u8>> {
    use std::io::{ErrorKind, Read, Write};
    let deadline = std::time::Instant::now() + PROBE_LIMIT;
    let left = || {
        deadline
            .checked_duration_since(std::time::Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| std::io::Error::new(ErrorKind::TimedOut, "no answer in time"))
    };
    let mut conn = std::net::TcpStream::connect_timeout(&addr, left()?)?;
    conn.set_write_timeout(Some(left()?))?;
    conn.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 1024];
    while answer.len() < 4096 {
        conn.set_read_timeout(Some(left()?))?;
        match conn.read(&mut chunk)? {
            0 => break,
            n => answer.extend_from_slice(&chunk[..n]),
        }
    }
    Ok(answer)
}
