//! Stateless `tools/call` answered without the MCP library's per-request machinery.
//!
//! For a request without a session the library builds a whole service for one message: a
//! one-shot transport, a peer with its channel, a serving loop in a task of its own, and it
//! turns the message into a JSON tree and looks the tool's schema up to check the standard
//! headers. Under load that is about 60 KiB and a task hand-off per request in flight. The
//! common case — one `tools/call` of protocol 2026-07-28 whose headers name exactly what its
//! body says — needs none of it: this layer parses the message with the library's own types,
//! runs the same handler (`McpHandler::call`: the same identity, narrowing, policy, guard and
//! audit) and answers as the library would, plain JSON with the same status. Anything else
//! (another method, another version, a header that does not match, an unusual `Accept`) goes
//! on to the library unchanged, which answers or refuses it as before: this path only ever
//! takes requests the library would have served.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientJsonRpcMessage, ClientRequest,
    ErrorCode, GetMeta, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};
use rmcp::{ErrorData, ServerHandler};

use crate::mcp::asked::Asked;
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
    let capabilities = meta.client_capabilities();
    let tasks = capabilities.as_ref().is_some_and(|c| c.supports_tasks());
    let asked = Asked {
        parts: Some(&parts),
        oversized: parts.extensions.get::<Oversized>().copied(),
        protocol: meta.protocol_version(),
        client: meta.client_info(),
        capabilities,
        peer: None,
    };
    let message = match handler.call(params, asked).await {
        // As the library does: a task handle only to a client that declared tasks.
        Ok(CallToolResponse::Task(_)) if !tasks => ServerJsonRpcMessage::error(
            ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ),
            Some(id),
        ),
        Ok(result) => ServerJsonRpcMessage::response(ServerResult::from(result), id),
        Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
    };
    answer(&message)
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
    let once = |name: &str| {
        let mut values = headers.get_all(name).iter();
        match (values.next(), values.next()) {
            (Some(v), None) => v.to_str().ok(),
            _ => None,
        }
    };
    let content_json = once(header::CONTENT_TYPE.as_str())
        .is_some_and(|v| v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"));
    // Media types without parameters only: weights and their grammar are the library's to read.
    let accepts = |essence: &str| {
        once(header::ACCEPT.as_str()).is_some_and(|v| {
            !v.contains(';')
                && !v.contains('"')
                && v.split(',').any(|t| t.trim().eq_ignore_ascii_case(essence))
        })
    };
    content_json
        && accepts("application/json")
        && accepts("text/event-stream")
        && once("mcp-protocol-version") == Some(VERSION.as_str())
        && once("mcp-method") == Some("tools/call")
        // A plain name: an encoded one (`=?base64?...?=`) is the library's to decode.
        && once("mcp-name").is_some_and(|n| !n.is_empty() && !n.starts_with("=?"))
        && !headers.contains_key("mcp-session-id")
        && !headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
}

/// The answer as the library writes a stateless one: plain JSON, with the status its
/// JSON-RPC error code maps to (the codes a `tools/call` handler can give).
fn answer(message: &ServerJsonRpcMessage) -> Response {
    let status = match message {
        ServerJsonRpcMessage::Error(e) => match e.error.code {
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
            ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        },
        _ => StatusCode::OK,
    };
    match serde_json::to_vec(message) {
        Ok(body) => (status, [(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}
