//! Streamable HTTP (`/mcp`, rmcp's service, with plain calls answered before it by
//! `direct.rs`) and legacy SSE (`/sse`, `/message`, ours) on one axum router, behind the
//! layers `layers::mcp_layers` lists (in their order), plus `/healthz`, `/readyz` and `/metrics` (unless
//! `METRICS_LISTEN` moves it to a listener of its own), served by our own accept
//! loop (`listener.rs`: connection caps, header and idle timeouts). SIGTERM or Ctrl-C stops
//! accepting, lets in-flight calls finish (up to `DRAIN`), ends open streams, then exits.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use super::layers::{self, LayerConfig};
use super::listener::{self, ConnLimits};
use super::sessions;
use super::sse;
use crate::config::{MetricsListen, TransportChoice};
use crate::mcp::McpHandler;
use crate::mcp::asked::Client;
use crate::server::Server;
use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::get;
use futures::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, InitializeRequestParams, NumberOrString,
    Request, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, create_local_session};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

const SESSION_WORDS: sessions::Words = sessions::Words {
    what: "MCP sessions",
    max_setting: "--max-sessions",
    how_to_close: "close idle sessions (DELETE /mcp)",
    how_to_open: "start a new one with initialize, without Mcp-Session-Id",
};

/// rmcp's in-memory sessions, telling the owners registry when one is created (named for the
/// `initialize` request that opens it, `sessions::OPENING`; without one, none is created) and
/// when one ends — closed by its client, ended by the server or expired.
///
/// A session opened by `direct.rs` has no library session until a request needs one (anything
/// but a plain call and `notifications/initialized`): it exists here as its owner and its
/// handshake, and the library's session is built for it on that first request, told the
/// handshake again as its client sent it. Most sessions never need one, and a library session
/// holds about 120 KiB (its worker, its serving loop and their channels).
struct OwnedSessions {
    inner: Arc<LocalSessionManager>,
    owners: Arc<sessions::Owners>,
    /// This replica's name, at the front of every session id it hands out.
    replica: Option<String>,
    /// What serves a library session built later, and what ends it with the server.
    handler: McpHandler,
    shutdown: CancellationToken,
    /// The library sessions being built, each behind a lock of its own: a request to a session
    /// being built waits for it, and no other session's request does.
    building: Building,
}

/// Sessions whose library session is being built, each with the lock its builder holds.
type Building = std::sync::Mutex<HashMap<SessionId, Arc<tokio::sync::Mutex<()>>>>;

/// A build under way: takes the session's mark out of `Building` when the build ends, however
/// it ends (a request whose client went away is dropped mid-build), then lets go of its lock
/// (a field, dropped after `drop`).
struct Build<'a> {
    building: &'a Building,
    id: &'a SessionId,
    lock: Arc<tokio::sync::Mutex<()>>,
    _held: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for Build<'_> {
    fn drop(&mut self) {
        let mut building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
        if building.get(self.id).is_some_and(|l| Arc::ptr_eq(l, &self.lock)) {
            building.remove(self.id);
        }
    }
}

impl OwnedSessions {
    fn new(
        owners: Arc<sessions::Owners>,
        replica: Option<String>,
        handler: McpHandler,
        shutdown: &CancellationToken,
    ) -> OwnedSessions {
        let mut inner = LocalSessionManager::default();
        // Calls inside a session may be answered without the library (`direct.rs`): it would
        // count the session idle while it is used, so sessions expire here instead.
        inner.session_config.keep_alive = None;
        OwnedSessions {
            inner: Arc::new(inner),
            owners,
            replica,
            handler,
            shutdown: shutdown.clone(),
            building: Building::default(),
        }
    }

    /// The library's session for `id`, built from its handshake if the session was opened
    /// without one: the handler served over the library's session transport, as the library
    /// serves the sessions it opens, and told `initialize` (the version agreed, the client's
    /// name and capabilities) and `notifications/initialized` again.
    ///
    /// A library session is registered before it is told its handshake, and a request that
    /// reached it in between (a client's standalone stream and its first request, side by
    /// side) would end it: a request to a session being built waits for the build. Whether the
    /// session is registered is asked before whether it is being built, as a build is marked
    /// before it registers the session and unmarked only once it has told it.
    async fn library_session(&self, id: &SessionId) -> Result<(), SessionError> {
        let _build = loop {
            let registered = self.inner.has_session(id).await?;
            let lock = {
                let mut building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
                match building.get(id) {
                    Some(lock) => lock.clone(),
                    None if registered => return Ok(()),
                    None => building.entry(id.clone()).or_default().clone(),
                }
            };
            let held = lock.clone().lock_owned().await;
            // Still this session's mark? A builder that held the lock before unmarked it when
            // it ended: ask again from the start.
            let marked = {
                let building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
                building.get(id).is_some_and(|l| Arc::ptr_eq(l, &lock))
            };
            if marked {
                break Build { building: &self.building, id, lock, _held: held };
            }
        };
        // Registered by the library itself since it was asked (an `initialize` it served).
        if self.inner.has_session(id).await? {
            return Ok(());
        }
        let Some(client) = self.owners.handshake(id) else {
            return Err(SessionError::Closed);
        };
        let (Some(protocol), Some(info), Some(capabilities)) =
            (client.protocol.clone(), client.info.clone(), client.capabilities.clone())
        else {
            return Err(SessionError::Closed);
        };
        let mut params = InitializeRequestParams::new(capabilities, info);
        params.protocol_version = protocol;
        let (handle, worker) = create_local_session(id.clone(), self.inner.session_config.clone());
        self.inner.sessions.write().await.insert(id.clone(), handle);
        let transport = WorkerTransport::spawn(worker);
        let (inner, owners, handler, ended) =
            (self.inner.clone(), self.owners.clone(), self.handler.clone(), id.clone());
        let stop = self.shutdown.child_token();
        tokio::spawn(async move {
            if let Ok(running) = rmcp::service::serve_server_with_ct(handler, transport, stop).await {
                let _ = running.waiting().await;
            }
            owners.close(&ended);
            let _ = inner.close_session(&ended).await;
        });
        let initialize = ClientJsonRpcMessage::request(
            ClientRequest::InitializeRequest(Request::new(params)),
            NumberOrString::Number(0),
        );
        let initialized =
            ClientNotification::InitializedNotification(rmcp::model::InitializedNotification::default());
        let told = tokio::time::timeout(BUILD_LIMIT, async {
            self.inner.initialize_session(id, initialize).await?;
            self.inner.accept_message(id, ClientJsonRpcMessage::notification(initialized)).await
        })
        .await;
        match told {
            Ok(Ok(())) => {
                tracing::debug!("a library session built for a session opened without one");
                self.handler.mcp_requests().library_sessions.inc();
                Ok(())
            }
            // A session that could not be told its handshake is ended, as the library ends one
            // whose handshake fails.
            failed => {
                let _ = self.close_session(id).await;
                match failed {
                    Ok(Err(e)) => Err(e.into()),
                    _ => Err(SessionError::Closed),
                }
            }
        }
    }

    /// How many library sessions are still served.
    async fn serving(&self) -> usize {
        self.inner.sessions.read().await.len()
    }
}

/// Why a session could not be created or used.
#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error(transparent)]
    Local(#[from] rmcp::transport::streamable_http_server::session::local::LocalSessionManagerError),
    /// rmcp wanted a session for a request our sessions layer did not open one for (its
    /// identity not established, no slot taken): refused, never created unowned.
    #[error("a session was requested outside an initialize the server accepted")]
    NotOpened,
    /// The session ended while its library session was being built.
    #[error("the session was closed")]
    Closed,
}

impl SessionManager for OwnedSessions {
    type Error = SessionError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let Ok(Some((opening, fingerprint))) = sessions::OPENING.try_with(|o| o.borrow_mut().take()) else {
            return Err(SessionError::NotOpened);
        };
        // Named here rather than by the library, so that the id carries this replica's name.
        // Like the library's own, without an event store (none is configured: streams are
        // not resumed).
        debug_assert!(self.inner.event_store().is_none());
        let id = SessionId::from(sessions::new_id(self.replica.as_deref()));
        let (handle, worker) = create_local_session(id.clone(), self.inner.session_config.clone());
        self.inner.sessions.write().await.insert(id.clone(), handle);
        opening.opened(id.to_string(), fingerprint);
        Ok((id, WorkerTransport::spawn(worker)))
    }
    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let asked = match &message {
            ClientJsonRpcMessage::Request(r) => match &r.request {
                ClientRequest::InitializeRequest(i) => {
                    Some((i.params.client_info.clone(), i.params.capabilities.clone()))
                }
                _ => None,
            },
            _ => None,
        };
        let answer = self.inner.initialize_session(id, message).await?;
        // Kept as the library keeps it for the session's handlers: the client as it named
        // itself, its capabilities and the version agreed.
        if let (Some((client, capabilities)), ServerJsonRpcMessage::Response(r)) = (asked, &answer) {
            if let ServerResult::InitializeResult(result) = &r.result {
                let protocol = Some(result.protocol_version.clone());
                let client = Client { protocol, info: Some(client), capabilities: Some(capabilities) };
                self.owners.shook_hands(id, client);
            }
        }
        Ok(answer)
    }
    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.owners.handshake(id).is_some() || self.inner.has_session(id).await?)
    }
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.owners.close(id);
        Ok(self.inner.close_session(id).await?)
    }
    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.library_session(id).await?;
        Ok(self.inner.create_stream(id, message).await?)
    }
    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.library_session(id).await?;
        Ok(self.inner.accept_message(id, message).await?)
    }
    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.library_session(id).await?;
        Ok(self.inner.create_standalone_stream(id).await?)
    }
    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.library_session(id).await?;
        Ok(self.inner.resume(id, last_event_id).await?)
    }
    fn event_store(&self) -> Option<Arc<dyn rmcp::transport::streamable_http_server::session::EventStore>> {
        self.inner.event_store()
    }
}

/// The library's Streamable HTTP settings, sessions or not: answers as plain JSON where it can,
/// `Host` checked by our own layer, ended with the server, bodies within `max_body_bytes`.
fn streamable_config(max_body_bytes: usize, shutdown: &CancellationToken) -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default()
        .with_json_response(true)
        .disable_allowed_hosts()
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(max_body_bytes)
}

/// How long a library session may take to be told its handshake (in-process messages only).
const BUILD_LIMIT: Duration = Duration::from_secs(10);

/// How long in-flight calls may run after a shutdown signal.
const DRAIN: Duration = Duration::from_secs(20);

/// How long the sessions' serving loops may take to close once the streams have ended.
const SESSIONS_CLOSE: Duration = Duration::from_secs(2);

/// How long a Streamable HTTP session lives unused by its owner (the MCP library's own default).
/// Kept by this server rather than the library, which sees only the requests it serves.
const SESSION_IDLE: Duration = Duration::from_secs(300);

/// Close the sessions their owners leave unused for `SESSION_IDLE`, until `shutdown`.
fn close_idle_sessions(manager: Arc<OwnedSessions>, shutdown: CancellationToken) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(SESSION_IDLE / 10);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = every.tick() => {}
            }
            for id in manager.owners.idle(SESSION_IDLE) {
                let _ = manager.close_session(&SessionId::from(id)).await;
            }
        }
    });
}

/// The HTTP application `serve` serves, and the readiness it reports.
pub struct App {
    pub router: Router,
    pub(crate) readiness: Arc<super::ready::Readiness>,
    /// The Streamable HTTP sessions, when there are any: waited for on the way out.
    sessions: Option<Arc<OwnedSessions>>,
}

/// The whole HTTP application for `server` answering at `addr` (whose host and port make the
/// default Host and Origin allowlists): the MCP routes of `transport` behind their layers,
/// `/healthz`, `/readyz`, `/metrics` (unless on a listener of its own) and the sign-in
/// routes; `shutdown` ends the MCP streams. Built by this one function so that tests drive
/// exactly what `serve` serves, in-process (`tower::ServiceExt::oneshot`), and keep their
/// processes for what only a socket shows (timeouts, connection caps, streams).
pub async fn app(
    server: Arc<Server>,
    transport: TransportChoice,
    addr: SocketAddr,
    shutdown: &CancellationToken,
) -> App {
    let s = &server.settings;
    let cfg = Arc::new(LayerConfig::new(server.clone(), addr));
    warn_if_open(&server, addr, &cfg);
    let readiness = super::ready::Readiness::new(server.clone());
    readiness.watch_forge(shutdown.clone()).await;
    let handler = McpHandler::new(server.clone());
    let mut open_sessions = None;
    let (routes, route) = match transport {
        TransportChoice::Sse => (
            sse::router(handler.clone(), sse::limits(s), server.clone(), shutdown.clone()),
            layers::Route::Sse,
        ),
        // No sessions: `initialize` is answered without a session id and every request
        // stands alone (its identity established per call), so any replica serves any request.
        _ if s.stateless => {
            let config = streamable_config(s.max_body_bytes, shutdown).with_legacy_session_mode(false);
            let library = handler.clone();
            let service = StreamableHttpService::new(
                move || Ok(library.clone()),
                Arc::new(NeverSessionManager::default()),
                config,
            );
            (Router::new().route_service("/mcp", service), layers::Route::Stateless)
        }
        _ => {
            let owners = sessions::Owners::new(
                s.max_sessions,
                s.max_sessions_per_identity,
                SESSION_WORDS,
                server.metrics.sessions_open(),
            );
            let manager =
                Arc::new(OwnedSessions::new(owners.clone(), s.replica_id.clone(), handler.clone(), shutdown));
            close_idle_sessions(manager.clone(), shutdown.clone());
            // A request that needs no stream (one whose handler sends nothing before its
            // answer) gets plain JSON with a length: less for clients to parse. The library
            // does that for stateless requests; `plain_json` for those in a session.
            let config = streamable_config(s.max_body_bytes, shutdown);
            let in_session = Arc::new(super::direct::InSession {
                handler: handler.clone(),
                owners: owners.clone(),
                replica: s.replica_id.clone(),
            });
            open_sessions = Some(manager.clone());
            let library = handler.clone();
            let service = StreamableHttpService::new(move || Ok(library.clone()), manager, config);
            let sessions = Arc::new(layers::SessionLayer { server: server.clone(), owners });
            // Requests without a session (protocol 2026-07-28) are as stateless here as there.
            (Router::new().route_service("/mcp", service), layers::Route::Sessions { sessions, in_session })
        }
    };
    let mut app = layers::behind(routes, layers::mcp_layers(&cfg, &handler, route))
        .route("/healthz", get(|| async { "ok" }))
        .merge(readiness.router());
    if s.metrics_listen == MetricsListen::Main {
        let rules = super::metrics::Rules::new(cfg.allowed_hosts.clone(), cfg.allowed_origins.clone(), s);
        app = app.merge(super::metrics::router(server.clone(), rules));
    }
    if let Some(oauth) = &server.oauth {
        app = app.merge(
            super::oauth::routes(server.clone(), oauth.clone())
                .layer(from_fn_with_state(cfg.clone(), layers::guard_host)),
        );
    }
    App { router: app, readiness, sessions: open_sessions }
}

/// The connection limits of `settings`, as the accept loop applies them.
pub fn conn_limits(settings: &crate::config::Settings) -> ConnLimits {
    ConnLimits {
        max: listener::connections_that_fit(settings.max_connections),
        per_peer: settings.max_connections_per_peer,
        header_timeout: settings.header_timeout,
        idle_timeout: settings.idle_timeout,
        write_stall: settings.stream_stall_timeout,
        drain_bytes: settings.max_body_bytes,
        drain_timeout: settings.body_timeout,
    }
}

/// Serve until SIGTERM/SIGINT.
pub async fn serve(server: Arc<Server>, transport: TransportChoice) -> anyhow::Result<()> {
    let s = &server.settings;
    let listener = tokio::net::TcpListener::bind(&s.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", s.listen))?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let App { router: app, readiness, sessions } = app(server.clone(), transport, addr, &shutdown).await;
    // Bound before the MCP address is announced: whoever waits for that line can scrape.
    super::metrics::serve_own(&server).await?;
    let path = if transport == TransportChoice::Sse { "/sse" } else { "/mcp" };
    // Always printed, whatever the log level: scripts wait for it. One write, so that a reader
    // polling stderr never sees half the address (stderr is unbuffered and `eprintln!` writes
    // each formatted piece separately).
    let line = format!("listening on http://{addr}{path}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());

    let limits = conn_limits(s);
    let stop = CancellationToken::new();
    let drain = CancellationToken::new();
    let (on_signal, give_up) = (stop.clone(), drain.clone());
    let stop_streams = shutdown.clone();
    let (calls, answers) = (server.calls.clone(), server.answers.clone());
    let delay = s.shutdown_delay;
    tokio::spawn(async move {
        wait_for_signal().await;
        readiness.drain();
        if !delay.is_zero() {
            tracing::info!(
                "shutting down: /readyz answers 503, still accepting for {}s (a second signal skips the wait)",
                delay.as_secs_f64()
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = wait_for_signal() => {}
            }
        }
        tracing::info!("shutting down: no new requests, draining in-flight calls");
        on_signal.cancel();
        // Let running calls finish and their answers go out, then end the open streams
        // (which would otherwise keep their connections, and the server, alive).
        let deadline = tokio::time::Instant::now() + DRAIN;
        calls.close();
        answers.close();
        let _ = tokio::time::timeout_at(deadline, async {
            calls.wait().await;
            answers.wait().await;
        })
        .await;
        stop_streams.cancel();
        // Connections still open at the deadline are closed.
        tokio::time::sleep_until(deadline).await;
        let running = calls.len();
        if running > 0 {
            tracing::warn!("{running} calls still running after {}s; exiting", DRAIN.as_secs());
        }
        give_up.cancel();
    });
    listener::serve(listener, app, limits, stop, drain).await;
    // The library sessions' serving loops, ended with the streams, close their transports: let
    // them finish (each leaves the library's registry when it has) rather than cut them off
    // with the runtime, which the library reports as an error.
    if let Some(sessions) = sessions {
        let _ = tokio::time::timeout(SESSIONS_CLOSE, async {
            while sessions.serving().await > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
    }
    Ok(())
}

/// SIGTERM or SIGINT (Ctrl-C).
pub(crate) async fn wait_for_signal() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn warn_if_open(server: &Server, addr: SocketAddr, cfg: &LayerConfig) {
    if addr.ip().is_loopback() {
        return;
    }
    if server.forges.all().any(|p| p.global.credential.header().is_some()) && cfg.bearer.is_none() {
        tracing::warn!(
            "listening on {addr} (not loopback) with a global token or password and no MCP_BEARER_TOKEN: any client that can reach this address calls the forge as its owner; set MCP_BEARER_TOKEN or remove GITEA_TOKEN (GITEA_PASSWORD)"
        );
        eprintln!(
            "WARNING: listening on {addr} with a global token or password and no MCP_BEARER_TOKEN: unauthenticated clients act as its owner"
        );
    }
    if cfg.allowed_hosts.is_empty() {
        tracing::warn!("listening on {addr} with no --allowed-hosts: any Host header is accepted");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session's library session being built (its lock held, as by a build that waits for
    /// its handshake's answer) holds up that session's requests, and no other session's.
    #[tokio::test]
    async fn a_build_holds_up_its_own_session_only() {
        let forge = fake_forge::FakeForge::start(fake_forge::Options::default()).await;
        let server = super::super::test_server(&forge.base_url()).await;
        let owners = sessions::Owners::new(8, 8, SESSION_WORDS, server.metrics.sessions_open());
        let shutdown = CancellationToken::new();
        let manager = Arc::new(OwnedSessions::new(owners, None, McpHandler::new(server), &shutdown));
        let register = |id: &SessionId| {
            let manager = manager.clone();
            let id = id.clone();
            async move {
                let (handle, _worker) =
                    create_local_session(id.clone(), manager.inner.session_config.clone());
                manager.inner.sessions.write().await.insert(id, handle);
            }
        };
        let (building, other) = (SessionId::from("building"), SessionId::from("other"));
        register(&building).await;
        register(&other).await;
        // The build of `building`, as `library_session` marks and holds it, mid-way.
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        manager.building.lock().unwrap().insert(building.clone(), lock.clone());
        let held = lock.clone().lock_owned().await;
        let waiting = tokio::spawn({
            let manager = manager.clone();
            let building = building.clone();
            async move { manager.library_session(&building).await }
        });
        let limit = Duration::from_secs(30);
        tokio::time::timeout(limit, manager.library_session(&other))
            .await
            .expect("another session's request is not held up by the build")
            .unwrap();
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished(), "the session's own request waits for its build");
        // The build ends: unmarked, then its lock let go.
        drop(Build { building: &manager.building, id: &building, lock, _held: held });
        tokio::time::timeout(limit, waiting).await.expect("answered once built").unwrap().unwrap();
        assert!(manager.building.lock().unwrap().is_empty());
        shutdown.cancel();
    }
}
