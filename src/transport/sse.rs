//! The legacy HTTP+SSE transport (protocol 2024-11-05), which rmcp no longer ships.
//!
//! `GET /sse` opens a session: the first event (`endpoint`) tells the client where to post,
//! `/message?sessionId=<id>`; every server message follows as a `message` event. Each
//! `POST /message` carries one JSON-RPC message and its own `Authorization` header: its
//! request parts (with the identity the layers put there) travel with the message into the
//! MCP handler, exactly as rmcp does for Streamable HTTP. The session ends when the client
//! disconnects the stream or the server shuts down.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt};
use rmcp::ServiceExt;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::{CancellationToken, PollSender};

use super::layers::{read_body, refuse};
use crate::mcp::McpHandler;

/// Open legacy SSE sessions.
struct Sessions {
    senders: Mutex<HashMap<String, mpsc::Sender<ClientJsonRpcMessage>>>,
    max: usize,
    handler: McpHandler,
    shutdown: CancellationToken,
}

/// Removes its session when the client's stream goes away.
struct SessionGuard {
    id: String,
    sessions: Arc<Sessions>,
    cancel: CancellationToken,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.sessions.senders.lock().expect("sessions lock").remove(&self.id);
        self.cancel.cancel();
    }
}

/// The `/sse` and `/message` routes.
pub fn router(handler: McpHandler, max_streams: usize, shutdown: CancellationToken) -> Router {
    let sessions =
        Arc::new(Sessions { senders: Mutex::new(HashMap::new()), max: max_streams, handler, shutdown });
    Router::new().route("/sse", get(open)).route("/message", post(message)).with_state(sessions)
}

async fn open(State(sessions): State<Arc<Sessions>>) -> Response {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (in_tx, in_rx) = mpsc::channel::<ClientJsonRpcMessage>(64);
    let (out_tx, out_rx) = mpsc::channel::<ServerJsonRpcMessage>(64);
    {
        let mut map = sessions.senders.lock().expect("sessions lock");
        if map.len() >= sessions.max {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                &format!(
                    "too many open SSE streams ({}); close idle clients or raise --max-sse-streams",
                    sessions.max
                ),
            );
        }
        map.insert(id.clone(), in_tx);
    }
    let cancel = sessions.shutdown.child_token();
    let handler = sessions.handler.clone();
    let task_cancel = cancel.clone();
    tokio::spawn(async move {
        let transport = (PollSender::new(out_tx), ReceiverStream::new(in_rx));
        match handler.serve_with_ct(transport, task_cancel).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::debug!(error = %e, "legacy SSE session ended before initialization"),
        }
    });
    let guard = SessionGuard { id: id.clone(), sessions: sessions.clone(), cancel: cancel.clone() };
    let endpoint = futures::stream::once(async move {
        Ok::<_, Infallible>(Event::default().event("endpoint").data(format!("/message?sessionId={id}")))
    });
    let messages = ReceiverStream::new(out_rx).map(move |msg| {
        let _keep = &guard;
        let data = serde_json::to_string(&msg).unwrap_or_default();
        Ok::<_, Infallible>(Event::default().event("message").data(data))
    });
    let stream: std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>> =
        Box::pin(endpoint.chain(messages).take_until(cancel.cancelled_owned()));
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

#[derive(serde::Deserialize)]
struct SessionQuery {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

async fn message(
    State(sessions): State<Arc<Sessions>>,
    Query(q): Query<SessionQuery>,
    req: Request,
) -> Response {
    let Some(id) = q.session_id else {
        return refuse(
            StatusCode::BAD_REQUEST,
            -32600,
            "missing sessionId: post to the endpoint the /sse stream announced",
        );
    };
    let sender = sessions.senders.lock().expect("sessions lock").get(&id).cloned();
    let Some(sender) = sender else {
        return refuse(
            StatusCode::NOT_FOUND,
            -32600,
            "unknown or closed session: open a new one with GET /sse",
        );
    };
    let (parts, body) = req.into_parts();
    let bytes = match read_body(body).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let mut msg: ClientJsonRpcMessage = match serde_json::from_slice(&bytes) {
        Ok(m) => m,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, -32700, &format!("not a JSON-RPC message: {e}")),
    };
    // The POST's own headers and identity travel with the message (see layers.rs).
    msg.insert_extension(parts);
    if sender.send(msg).await.is_err() {
        return refuse(StatusCode::NOT_FOUND, -32600, "the session has closed: open a new one with GET /sse");
    }
    StatusCode::ACCEPTED.into_response()
}
