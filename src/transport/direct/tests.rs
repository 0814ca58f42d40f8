//! `direct.rs` driven in-process, behind the layers it stands behind in `serve`
//! (`layers::mcp_layers`), with a stand-in for the MCP library's service that answers 418 with
//! the body it was handed: a test sees what this path answered itself, what it passed on
//! (and that it passed it on unchanged), and which of the two the metrics counted.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use http_body_util::BodyExt;
use rmcp::ErrorData;
use rmcp::model::{ErrorCode, NumberOrString, ServerJsonRpcMessage};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::super::layers::{self, LayerConfig, Route, SessionLayer};
use super::super::sessions::{self, Owners};
use super::{InSession, VERSION, finish, status_of};
use crate::identity::{Caller, Principal};
use crate::mcp::McpHandler;
use crate::server::Server;

/// The address the layers believe they answer at (nothing listens there).
const ADDR: &str = "127.0.0.1:47123";

/// A tool that answers without the forge and never asks the person.
const SEARCH: &str = "gitea_search_operations";

const WORDS: sessions::Words = sessions::Words {
    what: "MCP sessions",
    max_setting: "--max-sessions",
    how_to_close: "close idle sessions",
    how_to_open: "start a new one",
};

/// The MCP routes of one kind behind their layers, with the library stood in for.
struct Stack {
    router: Router,
    server: Arc<Server>,
    owners: Arc<Owners>,
    _forge: fake_forge::FakeForge,
}

impl Stack {
    async fn start(with_sessions: bool) -> Stack {
        let forge = fake_forge::FakeForge::start(fake_forge::Options::default()).await;
        let server = super::super::test_server(&forge.base_url()).await;
        let cfg = Arc::new(LayerConfig::new(server.clone(), ADDR.parse().unwrap()));
        let handler = McpHandler::new(server.clone());
        let owners = Owners::new(8, 8, WORDS, server.metrics.sessions_open());
        let route = if with_sessions {
            Route::Sessions {
                sessions: Arc::new(SessionLayer { server: server.clone(), owners: owners.clone() }),
                in_session: Arc::new(InSession {
                    handler: handler.clone(),
                    owners: owners.clone(),
                    replica: Some("r1".to_owned()),
                }),
            }
        } else {
            Route::Stateless
        };
        let routes = Router::new().route("/mcp", any(library));
        let router = layers::behind(routes, layers::mcp_layers(&cfg, &handler, route));
        Stack { router, server, owners, _forge: forge }
    }

    async fn send(&self, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Bytes) {
        let resp = self.router.clone().oneshot(req).await.expect("the router answers");
        let (parts, body) = resp.into_parts();
        (parts.status, parts.headers, body.collect().await.expect("a whole body").to_bytes())
    }

    /// How many requests each path answered: (here, the library).
    fn counted(&self) -> (u64, u64) {
        let m = self.server.metrics.mcp_requests();
        (m.direct.get(), m.library.get())
    }

    /// Open a session here, as a client does with a plain `initialize`; its id.
    async fn open_session(&self) -> String {
        let (status, headers, body) = self.send(post(&[], &initialize("2025-06-18"))).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        headers["mcp-session-id"].to_str().unwrap().to_owned()
    }
}

/// A case of requests that go on to the library: what differs, the headers, the body.
type Case<'a, V> = (&'a str, Vec<(&'a str, V)>, Value);

/// Stands in for the MCP library's service: 418, with the body it was handed.
async fn library(body: Bytes) -> Response {
    (StatusCode::IM_A_TEAPOT, body).into_response()
}

/// A POST to `/mcp` carrying `body`, JSON in and both answers accepted, with `headers`.
fn post(headers: &[(&str, &str)], body: &Value) -> Request<Body> {
    let mut req = Request::post("/mcp")
        .header("host", ADDR)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(Body::from(body.to_string())).unwrap()
}

/// The standard headers of a stateless `tools/call` of `name`.
fn call_headers(name: &str) -> [(&'static str, String); 3] {
    [
        ("mcp-protocol-version", VERSION.as_str().to_owned()),
        ("mcp-method", "tools/call".to_owned()),
        ("mcp-name", name.to_owned()),
    ]
}

fn as_refs<'a>(headers: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    headers.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// A `tools/call` of `name` with `_meta` (none when `Value::Null`).
fn tools_call(name: &str, meta: Value) -> Value {
    let mut params = json!({"name": name, "arguments": {"query": "issue"}});
    if !meta.is_null() {
        params["_meta"] = meta;
    }
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
}

/// The `_meta` a stateless request of `VERSION` must carry.
fn full_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": VERSION.as_str(),
           "io.modelcontextprotocol/clientCapabilities": {}})
}

fn initialize(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "unit", "version": "1"}}})
}

fn json_of(body: &Bytes) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|_| panic!("JSON: {}", String::from_utf8_lossy(body)))
}

#[tokio::test]
async fn a_plain_stateless_call_is_answered_here() {
    let s = Stack::start(false).await;
    let headers = call_headers(SEARCH);
    let (status, headers, body) = s.send(post(&as_refs(&headers), &tools_call(SEARCH, full_meta()))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    let answer = json_of(&body);
    assert_eq!(answer["id"], 7, "{answer}");
    assert!(answer["result"]["content"][0]["text"].is_string(), "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(s.counted(), (1, 0));
}

#[tokio::test]
async fn an_unknown_tool_is_answered_here_with_its_json_rpc_error() {
    let s = Stack::start(false).await;
    let headers = call_headers("no_such_tool");
    let (status, _, body) = s.send(post(&as_refs(&headers), &tools_call("no_such_tool", full_meta()))).await;
    // As the library answers a stateless call's error: 200 for every code but a few.
    assert_eq!(status, StatusCode::OK);
    let answer = json_of(&body);
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["error"]["code"], ErrorCode::INVALID_PARAMS.0, "{answer}");
    assert_eq!(s.counted(), (1, 0));
}

#[tokio::test]
async fn what_is_not_a_plain_stateless_call_goes_to_the_library_unchanged() {
    let s = Stack::start(false).await;
    let plain = call_headers(SEARCH);
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut h: Vec<(&str, String)> = plain.to_vec();
        h.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        h
    };
    let without = |name: &str| plain.iter().filter(|(k, _)| *k != name).cloned().collect::<Vec<_>>();
    let set = |name: &'static str, value: &str| {
        let mut h = without(name);
        h.push((name, value.to_owned()));
        h
    };
    let call = tools_call(SEARCH, full_meta());
    let cases: Vec<Case<String>> = vec![
        ("no Mcp-Name", without("mcp-name"), call.clone()),
        ("Mcp-Name twice", with(&[("mcp-name", SEARCH)]), call.clone()),
        ("Mcp-Name not the body's tool", set("mcp-name", "repoGet"), call.clone()),
        ("an encoded Mcp-Name", set("mcp-name", "=?base64?Z2l0ZWE=?="), call.clone()),
        ("an Mcp-Param header", with(&[("mcp-param-query", "issue")]), call.clone()),
        ("a session id", with(&[("mcp-session-id", "r1.x")]), call.clone()),
        ("another version", set("mcp-protocol-version", "2025-06-18"), call.clone()),
        ("another method header", set("mcp-method", "tools/list"), call.clone()),
        (
            "another method in the body",
            plain.to_vec(),
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}),
        ),
        (
            "_meta without the client's capabilities",
            plain.to_vec(),
            tools_call(SEARCH, json!({"io.modelcontextprotocol/protocolVersion": VERSION.as_str()})),
        ),
        ("no _meta", plain.to_vec(), tools_call(SEARCH, Value::Null)),
        ("a batch", plain.to_vec(), json!([call.clone()])),
        (
            "a notification",
            plain.to_vec(),
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": SEARCH}}),
        ),
    ];
    let mut passed = 0;
    for (case, headers, body) in cases {
        let (status, _, got) = s.send(post(&as_refs(&headers), &body)).await;
        assert_eq!(status, StatusCode::IM_A_TEAPOT, "{case}: {}", String::from_utf8_lossy(&got));
        assert_eq!(json_of(&got), body, "{case}: the body goes on as it came");
        passed += 1;
        assert_eq!(s.counted(), (0, passed), "{case}");
    }
    // Media types the library reads itself.
    for (accept, content) in [
        ("application/json;q=0.9, text/event-stream", "application/json"),
        ("application/json", "application/json"),
        ("application/json, text/event-stream", "text/plain"),
    ] {
        let mut req = post(&as_refs(&plain), &call);
        req.headers_mut().insert("accept", accept.parse().unwrap());
        req.headers_mut().insert("content-type", content.parse().unwrap());
        let (status, _, _) = s.send(req).await;
        assert_eq!(status, StatusCode::IM_A_TEAPOT, "Accept: {accept}, Content-Type: {content}");
    }
    let get = Request::get("/mcp").header("host", ADDR).body(Body::empty()).unwrap();
    assert_eq!(s.send(get).await.0, StatusCode::IM_A_TEAPOT, "a GET");
    assert_eq!(s.counted().0, 0, "nothing answered here");
}

/// Its own refusal: a body it cannot read. Behind the body layer the body is in memory and
/// this cannot happen; alone, it answers 400 rather than pass on half a request.
#[tokio::test]
async fn a_body_that_cannot_be_read_is_400() {
    let s = Stack::start(false).await;
    let handler = McpHandler::new(s.server.clone());
    let alone =
        Router::new().route("/mcp", any(library)).layer(from_fn_with_state(handler, super::stateless_calls));
    let broken = futures::stream::iter([Err::<Bytes, std::io::Error>(std::io::Error::other("cut"))]);
    let mut req = post(&as_refs(&call_headers(SEARCH)), &Value::Null);
    *req.body_mut() = Body::from_stream(broken);
    let resp = alone.oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_plain_initialize_opens_a_session_here() {
    let s = Stack::start(true).await;
    let (status, headers, body) = s.send(post(&[], &initialize("2025-06-18"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    let session = headers["mcp-session-id"].to_str().unwrap();
    assert!(session.starts_with("r1."), "named for this replica: {session}");
    let answer = json_of(&body);
    assert_eq!(answer["id"], 0, "{answer}");
    assert_eq!(answer["result"]["protocolVersion"], "2025-06-18", "{answer}");
    // Kept as its owner and its handshake, for the requests that follow.
    let handshake = s.owners.handshake(session).expect("the session's handshake is kept");
    assert_eq!(handshake.protocol.as_ref().map(|v| v.as_str()), Some("2025-06-18"));
    assert_eq!(handshake.info.as_ref().map(|i| i.name.as_str()), Some("unit"));
    assert_eq!(s.counted(), (1, 0));
}

#[tokio::test]
async fn an_initialize_that_is_not_plain_goes_to_the_library() {
    let s = Stack::start(true).await;
    let mut with_meta = initialize("2025-06-18");
    with_meta["params"]["_meta"] = json!({"progressToken": 1});
    let cases = [
        ("_meta", vec![], with_meta),
        (
            "a version header that is not the body's",
            vec![("mcp-protocol-version", "2025-03-26")],
            initialize("2025-06-18"),
        ),
        ("a version without a handshake", vec![], initialize(VERSION.as_str())),
        (
            "an unknown version named in a header",
            vec![("mcp-protocol-version", "1999-01-01")],
            initialize("1999-01-01"),
        ),
    ];
    for (case, headers, body) in cases {
        let (status, headers, got) = s.send(post(&headers, &body)).await;
        assert_eq!(status, StatusCode::IM_A_TEAPOT, "{case}: {}", String::from_utf8_lossy(&got));
        assert!(!headers.contains_key("mcp-session-id"), "{case}");
        assert_eq!(json_of(&got), body, "{case}");
    }
    assert_eq!(s.counted(), (0, 4));
}

#[tokio::test]
async fn in_a_session_initialized_and_plain_calls_are_answered_here() {
    let s = Stack::start(true).await;
    let session = s.open_session().await;
    let in_session = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, body) = s.send(post(&in_session, &initialized)).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(body.is_empty());
    let (status, headers, body) = s.send(post(&in_session, &tools_call(SEARCH, Value::Null))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    let answer = json_of(&body);
    assert_eq!(answer["id"], 7, "{answer}");
    assert!(answer["result"]["content"][0]["text"].is_string(), "{answer}");
    // The shape of the version the handshake agreed, as the library finishes it.
    assert!(answer["result"].get("resultType").is_none(), "{answer}");
    assert_eq!(s.counted(), (3, 0));
}

#[tokio::test]
async fn in_a_session_what_is_not_plain_goes_to_the_library_unchanged() {
    let s = Stack::start(true).await;
    let session = s.open_session().await;
    let id = session.as_str();
    let agreed = ("mcp-protocol-version", "2025-06-18");
    let call = tools_call(SEARCH, Value::Null);
    let cases: Vec<Case<&str>> = vec![
        ("no version header", vec![("mcp-session-id", id)], call.clone()),
        (
            "another version",
            vec![("mcp-session-id", id), ("mcp-protocol-version", "2025-03-26")],
            call.clone(),
        ),
        (
            "an Mcp-Method header",
            vec![("mcp-session-id", id), agreed, ("mcp-method", "tools/call")],
            call.clone(),
        ),
        (
            "tools/list",
            vec![("mcp-session-id", id), agreed],
            json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}),
        ),
        ("_meta", vec![("mcp-session-id", id), agreed], tools_call(SEARCH, json!({"progressToken": 1}))),
        // It may ask the person, which needs the library's way back to the client.
        (
            "a tool that may ask",
            vec![("mcp-session-id", id), agreed],
            tools_call("gitea_call_operation", Value::Null),
        ),
        ("not a JSON-RPC message", vec![("mcp-session-id", id), agreed], json!({"hello": 1})),
    ];
    let n = cases.len() as u64;
    for (case, headers, body) in cases {
        let (status, _, got) = s.send(post(&headers, &body)).await;
        assert_eq!(status, StatusCode::IM_A_TEAPOT, "{case}: {}", String::from_utf8_lossy(&got));
        assert_eq!(json_of(&got), body, "{case}: the body goes on as it came");
    }
    assert_eq!(s.counted(), (1, n), "only the session's opening was answered here");
}

/// A session the sessions layer admits but whose handshake this server did not keep (the
/// library's to answer).
#[tokio::test]
async fn a_session_without_a_handshake_goes_to_the_library() {
    let s = Stack::start(true).await;
    let opening = s.owners.open(Principal::Global).map_err(|_| "a slot").unwrap();
    opening.opened("r1.without-handshake".to_owned(), sessions::fingerprint(&Caller::Global));
    let headers = [("mcp-session-id", "r1.without-handshake"), ("mcp-protocol-version", "2025-06-18")];
    let (status, _, _) = s.send(post(&headers, &tools_call(SEARCH, Value::Null))).await;
    assert_eq!(status, StatusCode::IM_A_TEAPOT);
    assert_eq!(s.counted(), (0, 1));
}

#[test]
fn errors_get_the_status_the_library_gives_them() {
    let status = |code: ErrorCode| {
        status_of(&ServerJsonRpcMessage::error(
            ErrorData::new(code, "x", None),
            Some(NumberOrString::Number(1)),
        ))
    };
    for code in [
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        ErrorCode::HEADER_MISMATCH,
    ] {
        assert_eq!(status(code), StatusCode::BAD_REQUEST, "{code:?}");
    }
    assert_eq!(status(ErrorCode::METHOD_NOT_FOUND), StatusCode::NOT_FOUND);
    for code in [ErrorCode::INVALID_PARAMS, ErrorCode::INTERNAL_ERROR, ErrorCode::RESOURCE_NOT_FOUND] {
        assert_eq!(status(code), StatusCode::OK, "{code:?}");
    }
}

#[test]
fn a_missing_resource_is_an_invalid_parameter_from_the_stateless_version_on() {
    let missing = || Err(ErrorData::new(ErrorCode::RESOURCE_NOT_FOUND, "gone", None));
    let code = |protocol| finish(missing(), protocol).unwrap_err().code;
    assert_eq!(code(Some(VERSION)), ErrorCode::INVALID_PARAMS);
    let older = rmcp::model::ProtocolVersion::V_2025_06_18;
    assert_eq!(code(Some(&older)), ErrorCode::RESOURCE_NOT_FOUND);
    assert_eq!(code(None), ErrorCode::RESOURCE_NOT_FOUND);
}
