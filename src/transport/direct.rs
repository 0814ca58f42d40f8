//! `tools/call` answered without the MCP library's per-request machinery, stateless or in a
//! session, and sessions opened without the library's session.
//!
//! For a request without a session the library builds a whole service for one message: a
//! one-shot transport, a peer with its channel, a serving loop in a task of its own, and it
//! turns the message into a JSON tree and looks the tool's schema up to check the standard
//! headers. Under load that is about 60 KiB and a task hand-off per request in flight. Inside
//! a session it hands the message from task to task (the session's worker, its serving loop,
//! the handler's task) and streams the answer as events that `plain_json` reads back; and
//! each session it opens holds about 120 KiB for its worker, its serving loop and their
//! channels. The common cases need none of it:
//! - stateless: one `tools/call` of protocol 2026-07-28 whose headers name exactly what its
//!   body says;
//! - opening a session (counted by the sessions layer): one `initialize` without `_meta`
//!   under a version with a handshake. The session is kept as its owner and its handshake;
//!   the library's session is built for it by the session manager (`http.rs`) on its first
//!   request that needs one;
//! - in a session (already admitted by the sessions layer), under the version its handshake
//!   agreed: `notifications/initialized`, and one `tools/call` without `_meta` of a tool
//!   that never asks the person (asking needs the library's way back to the client).
//!
//! This layer parses the message with the library's own types, runs the same handler
//! (`McpHandler::call`, or its `initialize`: the same identity, narrowing, policy, guard and
//! audit), with the client the library would hand it, and answers as the library would: plain
//! JSON with the same status. Anything else (another method, another version, a header that
//! does not match, an unusual `Accept`) goes on to the library unchanged, which answers or
//! refuses it as before: this path only ever takes requests the library would have served.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientJsonRpcMessage, ClientNotification,
    ClientRequest, ErrorCode, GetMeta, InitializeRequestParams, ProtocolVersion, RequestId,
    RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};
use rmcp::{ErrorData, ServerHandler};

use super::sessions::{self, Owners};
use crate::mcp::asked::{Asked, Client};
use crate::mcp::{McpHandler, Oversized};

/// The one protocol version answered here: the first whose requests carry their own version
/// and client in `_meta` and whose method and tool name travel in headers.
const VERSION: &ProtocolVersion = &ProtocolVersion::V_2026_07_28;

/// Answer a stateless `tools/call` here when it is the common case; pass anything else on.
pub(crate) async fn stateless_calls(State(handler): State<McpHandler>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST || !plain_call_headers(req.headers()) {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    // The body layer has read it whole already: this takes the bytes it kept.
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some((id, meta, params)) = plain_call(&bytes, &parts.headers, &handler) else {
        return next.run(Request::from_parts(parts, Body::from(bytes))).await;
    };
    let client = Client {
        protocol: meta.protocol_version(),
        info: meta.client_info(),
        capabilities: meta.client_capabilities(),
    };
    handler.mcp_requests().direct.inc();
    let message = call(handler, parts, params, client, id).await;
    answer(status_of(&message), &message)
}

/// Count a request that reaches the MCP library: one the short paths here passed on. The
/// innermost layer, so that it counts only what the library itself answers.
pub(crate) async fn to_the_library(State(handler): State<McpHandler>, req: Request, next: Next) -> Response {
    handler.mcp_requests().library.inc();
    next.run(req).await
}

/// What the session path needs: the handler, the sessions with their handshakes, and this
/// replica's name for the sessions it opens.
pub(crate) struct InSession {
    pub(crate) handler: McpHandler,
    pub(crate) owners: Arc<Owners>,
    pub(crate) replica: Option<String>,
}

/// Answer here, in sessions mode, what needs no library session when it is the common case:
/// a plain `initialize` (the session opened, its handshake kept), `notifications/initialized`
/// and a plain `tools/call` in a session. Anything else goes on. Stands behind the sessions
/// layer (`layers::mcp_layers`), which has admitted a request to its session, or counted the
/// session an `initialize` may open.
pub(crate) async fn session_calls(State(s): State<Arc<InSession>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    if req.method() != Method::POST || !plain_session_headers(headers) {
        return next.run(req).await;
    }
    let Some(session) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) else {
        // Only an `initialize` the sessions layer let through has a session to open.
        if sessions::OPENING.try_with(|o| o.borrow().is_some()) != Ok(true) {
            return next.run(req).await;
        }
        let (parts, bytes) = match whole(req).await {
            Ok(read) => read,
            Err(refused) => return refused,
        };
        return match plain_initialize(&bytes, &parts.headers, &s.handler) {
            Some((id, params, result)) => open(&s, id, params, result),
            None => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        };
    };
    // The session's record is looked up only for a request whose headers may be one of these.
    let Some(handshake) = s.owners.handshake(session) else {
        return next.run(req).await;
    };
    // The version the handshake agreed, once, before 2026-07-28 (whose requests carry their own).
    let agreed = handshake
        .protocol
        .as_ref()
        .is_some_and(|v| *v < *VERSION && once(headers, "mcp-protocol-version") == Some(v.as_str()));
    if !agreed {
        return next.run(req).await;
    }
    let (parts, bytes) = match whole(req).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let Ok(message) = serde_json::from_slice::<ClientJsonRpcMessage>(&bytes) else {
        return next.run(Request::from_parts(parts, Body::from(bytes))).await;
    };
    // As the library answers a notification: accepted, nothing in the body. The handler does
    // nothing on this one.
    if let ClientJsonRpcMessage::Notification(n) = &message
        && matches!(n.notification, ClientNotification::InitializedNotification(_))
    {
        s.handler.mcp_requests().direct.inc();
        return StatusCode::ACCEPTED.into_response();
    }
    let Some((id, params)) = plain_session_call(message, &s.handler) else {
        return next.run(Request::from_parts(parts, Body::from(bytes))).await;
    };
    // As the library hands it to the handlers of a session whose requests carry no `_meta`.
    let client = Client::clone(&handshake);
    tracing::debug!(tool = %params.name, "tools/call in a session, answered without the MCP library's session");
    s.handler.mcp_requests().direct.inc();
    // In a session every answer is the stream's message, the stream itself answered 200.
    answer(StatusCode::OK, &call(s.handler.clone(), parts, params, client, id).await)
}

/// The request's head and its body, which the body layer has read whole already.
async fn whole(req: Request) -> Result<(Parts, Bytes), Response> {
    let (parts, body) = req.into_parts();
    match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => Ok((parts, bytes)),
        Err(_) => Err(StatusCode::BAD_REQUEST.into_response()),
    }
}

/// Open the session the sessions layer counted for this `initialize`, under a new id, keep
/// its handshake (the version agreed, the client's name and capabilities, as the library
/// keeps them), and answer as the library does: the result as plain JSON, the session's id in
/// `Mcp-Session-Id`.
fn open(s: &InSession, id: RequestId, params: InitializeRequestParams, result: ServerResult) -> Response {
    let Ok(Some((opening, fingerprint))) = sessions::OPENING.try_with(|o| o.borrow_mut().take()) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let ServerResult::InitializeResult(init) = &result else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let session = sessions::new_id(s.replica.as_deref());
    let Ok(session_header) = HeaderValue::from_str(&session) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let client = Client {
        protocol: Some(init.protocol_version.clone()),
        info: Some(params.client_info),
        capabilities: Some(params.capabilities),
    };
    opening.opened(session.clone(), fingerprint);
    s.owners.shook_hands(&session, client);
    tracing::debug!("initialize answered without the MCP library's session");
    s.handler.mcp_requests().direct.inc();
    let mut response = answer(StatusCode::OK, &ServerJsonRpcMessage::response(result, id));
    response.headers_mut().insert("mcp-session-id", session_header);
    response
}

/// The message, when it is one `initialize` request without `_meta` whose version, if a header
/// names one too, is that one and known; with the result the handler gives it, as the library
/// finishes it. A handshake the handler refuses is the library's to answer.
fn plain_initialize(
    bytes: &Bytes,
    headers: &HeaderMap,
    handler: &McpHandler,
) -> Option<(RequestId, InitializeRequestParams, ServerResult)> {
    let ClientJsonRpcMessage::Request(request) = serde_json::from_slice(bytes).ok()? else {
        return None;
    };
    let bare = request.request.get_meta().0.is_empty();
    let ClientRequest::InitializeRequest(initialize) = request.request else {
        return None;
    };
    let params = initialize.params;
    let asked = &params.protocol_version;
    let named = match headers.get("mcp-protocol-version") {
        None => true,
        Some(_) => {
            once(headers, "mcp-protocol-version") == Some(asked.as_str())
                && ProtocolVersion::KNOWN_VERSIONS.contains(asked)
        }
    };
    if !(bare && named && asked.has_initialize()) {
        return None;
    }
    // The library asks the handler with the client's version as the session's, then agrees
    // the version again the same way, which gives the same one.
    let result = handler.negotiate_initialize(&params).ok()?;
    let result = finish(Ok(ServerResult::InitializeResult(result)), Some(asked)).ok()?;
    Some((request.id, params, result))
}

/// The handler's answer to one call, as the library turns it into a message. Run in a task of
/// its own, as the library runs its handlers: a client that leaves before its answer does not
/// cut its call short — the call finishes, recorded in the audit trail and counted, and its
/// answer goes nowhere.
async fn call(
    handler: McpHandler,
    parts: Parts,
    params: CallToolRequestParams,
    client: Client,
    id: RequestId,
) -> ServerJsonRpcMessage {
    let run = tokio::spawn(async move {
        let tasks = client.capabilities.as_ref().is_some_and(|c| c.supports_tasks());
        let protocol = client.protocol.clone();
        let asked = Asked {
            parts: Some(&parts),
            oversized: parts.extensions.get::<Oversized>().copied(),
            client,
            peer: None,
        };
        as_the_library_finishes(handler.call(params, asked).await, tasks, protocol.as_ref())
    });
    match run.await {
        Ok(Ok(result)) => ServerJsonRpcMessage::response(result, id),
        Ok(Err(error)) => ServerJsonRpcMessage::error(error, Some(id)),
        Err(_) => ServerJsonRpcMessage::error(
            ErrorData::internal_error("the call failed on the server", None),
            Some(id),
        ),
    }
}

/// A handler's `tools/call` answer as the library finishes it for a client of `protocol`: a
/// task handle only to a client that declared tasks, then as every result (`finish`).
fn as_the_library_finishes(
    answer: Result<CallToolResponse, ErrorData>,
    tasks: bool,
    protocol: Option<&ProtocolVersion>,
) -> Result<ServerResult, ErrorData> {
    let result = match answer {
        Ok(CallToolResponse::Task(_)) if !tasks => Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        )),
        Ok(response) => Ok(ServerResult::from(response)),
        Err(error) => Err(error),
    };
    finish(result, protocol)
}

/// A handler's answer as the library finishes it for a client of `protocol`: a question over
/// rounds only from 2026-07-28 on; before that, results in their older shape (no
/// `resultType`, structured output only as an object); from it, cache hints filled in and a
/// missing resource an invalid parameter.
fn finish(
    result: Result<ServerResult, ErrorData>,
    protocol: Option<&ProtocolVersion>,
) -> Result<ServerResult, ErrorData> {
    let later = protocol.is_some_and(|v| *v >= *VERSION);
    let result = result.and_then(|mut result| {
        if matches!(result, ServerResult::InputRequiredResult(_)) && !later {
            return Err(ErrorData::invalid_request(
                "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                None,
            ));
        }
        if later {
            result.fill_missing_cache_hints();
        } else {
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
        }
        Ok(result)
    });
    result.map_err(|mut error| {
        if later && error.code == ErrorCode::RESOURCE_NOT_FOUND {
            error.code = ErrorCode::INVALID_PARAMS;
        }
        error
    })
}

/// The message, when it is one `tools/call` request without `_meta` of a tool that never asks
/// the person.
fn plain_session_call(
    message: ClientJsonRpcMessage,
    handler: &McpHandler,
) -> Option<(RequestId, CallToolRequestParams)> {
    let ClientJsonRpcMessage::Request(request) = message else {
        return None;
    };
    let bare = request.request.get_meta().0.is_empty();
    let ClientRequest::CallToolRequest(call) = request.request else {
        return None;
    };
    (bare && !handler.may_ask(&call.params.name)).then_some((request.id, call.params))
}

/// The message, when it is one `tools/call` request of `VERSION` with the `_meta` that version
/// requires, whose tool is the one `Mcp-Name` names.
fn plain_call(
    bytes: &Bytes,
    headers: &HeaderMap,
    handler: &McpHandler,
) -> Option<(RequestId, RequestMetaObject, CallToolRequestParams)> {
    let ClientJsonRpcMessage::Request(mut request) = serde_json::from_slice(bytes).ok()? else {
        return None;
    };
    // Taken out of the request, as the library hands it to a handler beside the parameters.
    let meta = std::mem::take(request.request.get_meta_mut());
    let ClientRequest::CallToolRequest(call) = request.request else {
        return None;
    };
    let named = headers.get("mcp-name")?.as_bytes() == call.params.name.as_bytes();
    let versioned = meta.protocol_version().as_ref() == Some(VERSION)
        && meta.missing_required_keys(VERSION).is_empty()
        && handler.supported_protocol_versions().contains(VERSION);
    (named && versioned).then_some((request.id, meta, call.params))
}

/// Whether the headers are those of a plain stateless `tools/call` of `VERSION`, as the
/// library checks them: JSON in, JSON and event streams accepted, the version, method and a
/// plain tool name in their headers once each, no session, no `Mcp-Param-*` header.
fn plain_call_headers(headers: &HeaderMap) -> bool {
    let once = |name: &str| once(headers, name);
    json_both_ways(headers)
        && once("mcp-protocol-version") == Some(VERSION.as_str())
        && once("mcp-method") == Some("tools/call")
        // A plain name: an encoded one (`=?base64?...?=`) is the library's to decode.
        && once("mcp-name").is_some_and(|n| !n.is_empty() && !n.starts_with("=?"))
        && !headers.contains_key("mcp-session-id")
        && !headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
}

/// Whether the headers are those of a plain `tools/call` in a session: JSON in, JSON and event
/// streams accepted, none of the standard headers of later versions (the version is the
/// session's to check).
fn plain_session_headers(headers: &HeaderMap) -> bool {
    json_both_ways(headers)
        && !headers.contains_key("mcp-method")
        && !headers.contains_key("mcp-name")
        && !headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
}

/// The value of a header sent once, as text.
fn once<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (Some(v), None) => v.to_str().ok(),
        _ => None,
    }
}

/// JSON in, JSON and event streams accepted, as the library checks them.
fn json_both_ways(headers: &HeaderMap) -> bool {
    let content_json = once(headers, header::CONTENT_TYPE.as_str())
        .is_some_and(|v| v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"));
    // Media types without parameters only: weights and their grammar are the library's to read.
    let accepts = |essence: &str| {
        once(headers, header::ACCEPT.as_str()).is_some_and(|v| {
            !v.contains(';')
                && !v.contains('"')
                && v.split(',').any(|t| t.trim().eq_ignore_ascii_case(essence))
        })
    };
    content_json && accepts("application/json") && accepts("text/event-stream")
}

/// The status the library gives a stateless answer: the one its JSON-RPC error code maps to
/// (the codes a `tools/call` handler can give).
fn status_of(message: &ServerJsonRpcMessage) -> StatusCode {
    match message {
        ServerJsonRpcMessage::Error(e) => match e.error.code {
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
            ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        },
        _ => StatusCode::OK,
    }
}

/// The message as plain JSON, with `status`.
fn answer(status: StatusCode, message: &ServerJsonRpcMessage) -> Response {
    match serde_json::to_vec(message) {
        Ok(body) => (status, [(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

#[cfg(test)]
mod tests;
