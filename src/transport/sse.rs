//! The legacy HTTP+SSE transport (protocol 2024-11-05), which rmcp no longer ships.
//!
//! `GET /sse` opens a session: the first event (`endpoint`) tells the client where to post,
//! `/message?sessionId=<id>`; every server message follows as a `message` event. Each
//! `POST /message` carries one JSON-RPC message and its own `Authorization` header: its
//! request parts (with the identity the layers put there) travel with the message into the
//! MCP handler, exactly as rmcp does for Streamable HTTP.
//!
//! A stream belongs to the identity that opened it (`sessions.rs`): it is opened only once
//! that identity is established, and a post from any other identity gets 404. What a stream
//! may buffer is bounded: at most `MAX_OUTSTANDING` requests of a session may wait for their
//! answer to be read from the stream (a post beyond that waits, up to the request timeout,
//! for the client to read), at most `OUTBOX` answers wait in the stream itself, and a stream
//! whose client has not read for the stall timeout while answers wait is ended. The session
//! ends when the client disconnects the stream, when it stalls, or when the server shuts down.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, Uri};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt};
use rmcp::RoleServer;
use rmcp::ServiceExt;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::answers::{answer, no_identity, refuse};
use super::jsonrpc::{self, Read};
use super::layers::read_body;
use super::listener::CloseConnection;
use super::sessions::{self, Owners};
use crate::config::Settings;
use crate::identity::Caller;
use crate::mcp::Deadline;
use crate::mcp::McpHandler;
use crate::server::Server;

/// Requests of one session whose answers may wait to be read.
pub(crate) const MAX_OUTSTANDING: usize = 4;
/// Answers that may wait in the stream itself.
const OUTBOX: usize = 2;
/// Messages that may wait for the session's MCP service.
const INBOX: usize = 16;

const WORDS: sessions::Words = sessions::Words {
    what: "SSE streams",
    max_setting: "--max-sse-streams",
    how_to_close: "close idle clients",
    how_to_open: "open a new one with GET /sse",
};

/// The limits of the transport, from the settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_streams: usize,
    pub(crate) per_identity: usize,
    pub(crate) request_timeout: Duration,
    pub(crate) stall: Duration,
}

pub(crate) fn limits(s: &Settings) -> Limits {
    Limits {
        max_streams: s.max_sse_streams,
        per_identity: s.max_sessions_per_identity,
        request_timeout: s.request_timeout,
        stall: s.stream_stall_timeout,
    }
}

/// Open legacy SSE sessions.
struct Sessions {
    open: Mutex<HashMap<String, Arc<Session>>>,
    owners: Arc<Owners>,
    handler: McpHandler,
    server: Arc<Server>,
    shutdown: CancellationToken,
    limits: Limits,
}

/// One session: where its messages go, and what waits to be read.
struct Session {
    inbox: mpsc::Sender<ClientJsonRpcMessage>,
    /// One permit per request whose answer has not been read yet.
    outstanding: Arc<Semaphore>,
    /// The permits, by request id (as JSON text).
    waiting: Mutex<HashMap<String, Vec<OwnedSemaphorePermit>>>,
    cancel: CancellationToken,
}

impl Session {
    /// The answer to request `id` was read: its permit goes back.
    fn answered(&self, id: &str) {
        let mut w = self.waiting.lock().expect("waiting lock");
        if let Some(permits) = w.get_mut(id) {
            permits.pop();
            if permits.is_empty() {
                w.remove(id);
            }
        }
    }
}

/// Removes its session when the client's stream goes away.
struct SessionGuard {
    id: String,
    sessions: Arc<Sessions>,
    cancel: CancellationToken,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.sessions.open.lock().expect("sessions lock").remove(&self.id);
        self.sessions.owners.close(&self.id);
        self.cancel.cancel();
    }
}

/// The `/sse` and `/message` routes.
pub(crate) fn router(
    handler: McpHandler,
    limits: Limits,
    server: Arc<Server>,
    shutdown: CancellationToken,
) -> Router {
    let sessions = Arc::new(Sessions {
        open: Mutex::new(HashMap::new()),
        owners: Owners::new(limits.max_streams, limits.per_identity, WORDS, server.metrics.streams_open()),
        handler,
        server,
        shutdown,
        limits,
    });
    Router::new().route("/sse", get(open)).route("/message", post(message)).with_state(sessions)
}

/// What the stream of a session carries: frames (serialized messages, with the id of the
/// request a frame answers), how many wait, and when the client last took one.
struct Outbox {
    queued: AtomicUsize,
    /// Milliseconds since `started` when the client last took a frame.
    last_read: AtomicU64,
    started: Instant,
}

impl Outbox {
    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}

async fn open(State(sessions): State<Arc<Sessions>>, req: Request) -> Response {
    let Some(identity) = req.extensions().get::<Caller>().cloned() else {
        return no_identity();
    };
    let connection = req.extensions().get::<CloseConnection>().cloned();
    let limit = Deadline::of(req.extensions(), sessions.limits.request_timeout).left();
    let owner = match sessions::establish(&sessions.server, &identity, limit).await {
        Ok(o) => o,
        Err(refused) => return *refused,
    };
    let opening = match sessions.owners.open(owner) {
        Ok(o) => o,
        Err(refused) => return *refused,
    };
    let id = sessions::new_id(sessions.server.settings.replica_id.as_deref());
    let (in_tx, in_rx) = mpsc::channel::<ClientJsonRpcMessage>(INBOX);
    let (out_tx, out_rx) = mpsc::channel::<(Option<String>, Bytes)>(OUTBOX);
    let cancel = sessions.shutdown.child_token();
    let session = Arc::new(Session {
        inbox: in_tx,
        outstanding: Arc::new(Semaphore::new(MAX_OUTSTANDING)),
        waiting: Mutex::default(),
        cancel: cancel.clone(),
    });
    sessions.open.lock().expect("sessions lock").insert(id.clone(), session.clone());
    opening.opened(id.clone(), sessions::fingerprint(&identity));
    let guard = SessionGuard { id: id.clone(), sessions: sessions.clone(), cancel: cancel.clone() };

    let outbox = Arc::new(Outbox {
        queued: AtomicUsize::new(0),
        last_read: AtomicU64::new(0),
        started: Instant::now(),
    });
    let transport = SseTransport { inbox: in_rx, outbox: out_tx, counts: outbox.clone() };
    let handler = sessions.handler.clone();
    let task_cancel = cancel.clone();
    tokio::spawn(async move {
        match handler.serve_with_ct(transport, task_cancel).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::debug!(error = %e, "legacy SSE session ended before initialization"),
        }
    });
    let stalled = Stalled { sessions: sessions.clone(), id: id.clone(), cancel: cancel.clone(), connection };
    tokio::spawn(watch_for_stall(outbox.clone(), sessions.limits.stall, stalled));

    let endpoint = futures::stream::once(async move {
        Ok::<_, Infallible>(Event::default().event("endpoint").data(format!("/message?sessionId={id}")))
    });
    let messages = drain_then_end(out_rx, cancel.clone()).map(move |(answers, frame)| {
        let _keep = &guard;
        outbox.queued.fetch_sub(1, Ordering::SeqCst);
        outbox.last_read.store(outbox.now(), Ordering::SeqCst);
        if let Some(id) = answers {
            session.answered(&id);
        }
        Ok::<_, Infallible>(Event::default().event("message").data(String::from_utf8_lossy(&frame)))
    });
    let stream: std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>> =
        Box::pin(endpoint.chain(messages));
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

/// The messages of `rx` until `cancel`, then the ones already queued, then the end: at
/// shutdown the answers of calls that finished still go out (a stalled stream is ended by
/// closing its connection instead, so this never waits for a client that does not read).
fn drain_then_end<T: Send + 'static>(
    rx: mpsc::Receiver<T>,
    cancel: CancellationToken,
) -> impl Stream<Item = T> {
    futures::stream::unfold((rx, cancel, false), |(mut rx, cancel, closed)| async move {
        if !closed {
            tokio::select! {
                biased;
                item = rx.recv() => return item.map(|i| (i, (rx, cancel, false))),
                _ = cancel.cancelled() => rx.close(),
            }
        }
        rx.recv().await.map(|i| (i, (rx, cancel, true)))
    })
}

/// What ending a stalled session takes.
struct Stalled {
    sessions: Arc<Sessions>,
    id: String,
    cancel: CancellationToken,
    /// The stream's connection, when the listener put its handle into the request.
    connection: Option<CloseConnection>,
}

/// End a session whose client has answers waiting and has not read any for `stall`: its slot
/// is given back at once, its MCP service stops, and its connection is closed — ending the
/// stream itself would wait for a client that does not read.
async fn watch_for_stall(outbox: Arc<Outbox>, stall: Duration, s: Stalled) {
    let tick = (stall / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = s.cancel.cancelled() => return,
            _ = tokio::time::sleep(tick) => {}
        }
        let waiting = outbox.queued.load(Ordering::SeqCst) > 0;
        let since = outbox.now().saturating_sub(outbox.last_read.load(Ordering::SeqCst));
        if waiting && since > stall.as_millis() as u64 {
            tracing::debug!("ending an SSE stream whose client stopped reading");
            s.sessions.open.lock().expect("sessions lock").remove(&s.id);
            s.sessions.owners.close(&s.id);
            s.cancel.cancel();
            if let Some(c) = &s.connection {
                c.0.cancel();
            }
            return;
        }
    }
}

/// The session's MCP service reads the posted messages and writes its own into the stream.
struct SseTransport {
    inbox: mpsc::Receiver<ClientJsonRpcMessage>,
    outbox: mpsc::Sender<(Option<String>, Bytes)>,
    counts: Arc<Outbox>,
}

/// The stream is gone.
#[derive(Debug, thiserror::Error)]
#[error("the SSE stream has closed")]
struct StreamClosed;

impl Transport<RoleServer> for SseTransport {
    type Error = StreamClosed;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), StreamClosed>> + Send + 'static {
        let outbox = self.outbox.clone();
        let counts = self.counts.clone();
        async move {
            let answers = match &item {
                ServerJsonRpcMessage::Response(r) => serde_json::to_string(&r.id).ok(),
                ServerJsonRpcMessage::Error(e) => e.id.as_ref().and_then(|id| serde_json::to_string(id).ok()),
                _ => None,
            };
            let frame = Bytes::from(serde_json::to_vec(&item).unwrap_or_default());
            if counts.queued.fetch_add(1, Ordering::SeqCst) == 0 {
                // Nothing was waiting: the stall clock starts now, not at the last read.
                counts.last_read.store(counts.now(), Ordering::SeqCst);
            }
            outbox.send((answers, frame)).await.map_err(|_| StreamClosed)
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        self.inbox.recv().await
    }

    async fn close(&mut self) -> Result<(), StreamClosed> {
        Ok(())
    }
}

#[derive(serde::Deserialize)]
struct SessionQuery {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

/// The session a `POST /message` names in its query: a query that does not read as one is
/// answered as axum's `Query` extractor answers it (400), a missing `sessionId` with a
/// JSON-RPC error (400). Pure, so that it can be tested and fuzzed on its own.
pub(crate) fn session_of(uri: &Uri) -> Result<String, Box<Response>> {
    let Query(q) = Query::<SessionQuery>::try_from_uri(uri).map_err(|e| Box::new(e.into_response()))?;
    q.session_id.ok_or_else(|| {
        Box::new(refuse(
            StatusCode::BAD_REQUEST,
            -32600,
            "missing sessionId: post to the endpoint the /sse stream announced",
        ))
    })
}

/// What a `POST /message` body carries (already counted by the body layer): a message for
/// the session, nothing to pass on (answered 202), or the JSON-RPC error to answer with 400.
pub(crate) fn message_of(body: &[u8]) -> Result<Option<ClientJsonRpcMessage>, serde_json::Value> {
    match jsonrpc::read(body) {
        Read::Message(m) => Ok(Some(*m)),
        Read::Answer(error) => Err(error),
        Read::Nothing => Ok(None),
    }
}

async fn message(State(sessions): State<Arc<Sessions>>, req: Request) -> Response {
    let id = match session_of(req.uri()) {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let Some(identity) = req.extensions().get::<Caller>().cloned() else {
        return no_identity();
    };
    let deadline = Deadline::of(req.extensions(), sessions.limits.request_timeout);
    if let Err(refused) =
        sessions::admit(&sessions.owners, &sessions.server, &id, &identity, deadline.left()).await
    {
        return *refused;
    }
    let session = sessions.open.lock().expect("sessions lock").get(&id).cloned();
    let Some(session) = session else { return sessions.owners.unknown() };
    let (parts, body) = req.into_parts();
    let bytes = match read_body(body).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let mut msg = match message_of(&bytes) {
        Ok(Some(m)) => m,
        Ok(None) => return StatusCode::ACCEPTED.into_response(),
        Err(error) => return answer(StatusCode::BAD_REQUEST, &error),
    };
    // A request waits until fewer than MAX_OUTSTANDING answers of this session are unread.
    if let ClientJsonRpcMessage::Request(r) = &msg {
        let key = serde_json::to_string(&r.id).unwrap_or_default();
        let permit = tokio::select! {
            p = tokio::time::timeout_at(deadline.0, session.outstanding.clone().acquire_owned()) => p,
            _ = session.cancel.cancelled() => return sessions.owners.unknown(),
        };
        let Ok(Ok(permit)) = permit else {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                &format!(
                    "{MAX_OUTSTANDING} answers of this session wait to be read from its /sse stream; read them before posting more"
                ),
            );
        };
        session.waiting.lock().expect("waiting lock").entry(key).or_default().push(permit);
    }
    // The POST's own headers and identity travel with the message (see layers.rs).
    msg.insert_extension(parts);
    match tokio::time::timeout_at(deadline.0, session.inbox.send(msg)).await {
        Ok(Ok(())) => StatusCode::ACCEPTED.into_response(),
        Ok(Err(_)) => sessions.owners.unknown(),
        Err(_) => {
            refuse(StatusCode::SERVICE_UNAVAILABLE, -32000, "the session is not taking messages; try again")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(target: &str) -> Result<String, StatusCode> {
        session_of(&target.parse().unwrap()).map_err(|r| r.status())
    }

    #[test]
    fn a_post_names_its_session_by_the_one_session_id_of_its_query() {
        assert_eq!(session("/message?sessionId=r1.abc"), Ok("r1.abc".into()));
        assert_eq!(session("/message?x=1&sessionId=a%20b"), Ok("a b".into()));
        assert_eq!(session("/message?x=1"), Err(StatusCode::BAD_REQUEST));
        assert_eq!(session("/message"), Err(StatusCode::BAD_REQUEST));
        // As axum's extractor answered it: a repeated field does not read.
        assert_eq!(session("/message?sessionId=a&sessionId=b"), Err(StatusCode::BAD_REQUEST));
    }

    #[test]
    fn a_post_body_is_a_message_nothing_or_the_error_to_answer() {
        assert!(matches!(message_of(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), Ok(Some(_))));
        assert!(matches!(message_of(b"  "), Ok(None)));
        assert_eq!(message_of(b"{oops").unwrap_err()["error"]["code"], jsonrpc::PARSE_ERROR);
    }
}
