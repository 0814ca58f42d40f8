//! The entry points of the fuzz targets' bodies (the `aegis-fuzzing` crate, `fuzz-bodies/`)
//! into this crate: the parsers of outside input that are not part of its public API, each
//! behind a function over bytes, text, JSON and public types.
//!
//! Compiled only with the `fuzzing` feature, which that crate turns on: in this crate's test
//! builds (a dev-dependency), never in `cargo build` or the release build. It widens
//! nothing: the parsers stay `pub(crate)`, these functions call them as the server does and
//! hand back what they found, unchanged but for being told in public types; every property
//! is checked by the bodies, none here. What the bodies can reach through the crate's public
//! modules (the core's stages, `oauth::seal`, `audit::AuditKey`, `oauth::OAuth`) they take
//! from there.

use std::time::Duration;

use rmcp::model::{ClientJsonRpcMessage, GetExtensions, JsonRpcMessage};
use secrecy::SecretString;
use serde_json::{Map, Value};

use crate::identity::header;
use crate::oauth::seal::{Kind, Sealer};
use crate::transport::{jsonrpc, sse, stdio};
use aegis_core::args::plan::CallPlan;
use aegis_core::decode::body::Limits;
use aegis_core::error::{CallError, ErrorKind};
use aegis_core::guard::Redactor;

/// How an `Authorization` value reads (`identity/header.rs`).
#[derive(Debug)]
pub enum AuthHeader {
    Token(SecretString),
    TooLong,
    NotText,
    None,
}

/// `identity::header::parse`.
pub fn auth_header(value: Option<&[u8]>) -> AuthHeader {
    match header::parse(value) {
        header::AuthHeader::Token(t) => AuthHeader::Token(t),
        header::AuthHeader::TooLong => AuthHeader::TooLong,
        header::AuthHeader::NotText => AuthHeader::NotText,
        header::AuthHeader::None => AuthHeader::None,
    }
}

/// `identity::header::constant_time_eq`.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    header::constant_time_eq(a, b)
}

/// The JSON-RPC error codes the readers answer with.
pub const PARSE_ERROR: i64 = jsonrpc::PARSE_ERROR;
pub const INVALID_REQUEST: i64 = jsonrpc::INVALID_REQUEST;

/// A client message a reader passed on; it serializes as the message does.
#[derive(Debug, serde::Serialize)]
#[serde(transparent)]
pub struct Message(Box<ClientJsonRpcMessage>);

impl Message {
    /// `None` for a message that is not a request; for a request, whether it carries the
    /// `Oversized` mark (what `oversized` makes of a message too long to read).
    pub fn oversized_mark(&self) -> Option<bool> {
        match &*self.0 {
            JsonRpcMessage::Request(r) => {
                Some(r.request.extensions().get::<crate::mcp::Oversized>().is_some())
            }
            _ => None,
        }
    }
}

/// What a client's bytes are (`transport/jsonrpc.rs`'s `Read`).
#[derive(Debug)]
pub enum Read {
    Message(Message),
    Answer(Value),
    Nothing,
}

impl From<jsonrpc::Read> for Read {
    fn from(r: jsonrpc::Read) -> Read {
        match r {
            jsonrpc::Read::Message(m) => Read::Message(Message(m)),
            jsonrpc::Read::Answer(a) => Read::Answer(a),
            jsonrpc::Read::Nothing => Read::Nothing,
        }
    }
}

/// `jsonrpc::check_values`.
pub fn check_values(bytes: &[u8]) -> Result<(), Value> {
    jsonrpc::check_values(bytes)
}

/// `jsonrpc::read`.
pub fn read(bytes: &[u8]) -> Read {
    jsonrpc::read(bytes).into()
}

/// What a skim found (`jsonrpc::Head`).
#[derive(Debug, PartialEq)]
pub struct Head(jsonrpc::Head);

impl Head {
    pub fn id(&self) -> Option<&Value> {
        self.0.id.as_ref()
    }
    pub fn has_id(&self) -> bool {
        self.0.has_id
    }
    pub fn method(&self) -> Option<&str> {
        self.0.method.as_deref()
    }
    pub fn name(&self) -> Option<&str> {
        self.0.name.as_deref()
    }
    pub fn meta(&self) -> Option<&Value> {
        self.0.meta.as_ref()
    }
}

/// A `jsonrpc::Skim` fed `pieces` in turn.
pub fn skim<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Head {
    let mut s = jsonrpc::Skim::default();
    for piece in pieces {
        s.feed(piece);
    }
    Head(s.head())
}

/// `jsonrpc::oversized`.
pub fn oversized(head: Head, limit: usize) -> Read {
    jsonrpc::oversized(head.0, limit).into()
}

/// `stdio::read_lines` over `input` to its end, with room for `room` messages and answers:
/// the messages it passed on and the answers it wrote, in order.
pub async fn read_lines(
    input: impl tokio::io::AsyncBufRead + Unpin,
    max: usize,
    room: usize,
) -> (Vec<Message>, Vec<Vec<u8>>) {
    let (m_tx, mut m_rx) = tokio::sync::mpsc::channel(room);
    let (a_tx, mut a_rx) = tokio::sync::mpsc::channel(room);
    stdio::read_lines(input, max, m_tx, a_tx).await;
    let (mut messages, mut answers) = (Vec::new(), Vec::new());
    while let Some(m) = m_rx.recv().await {
        messages.push(Message(Box::new(m)));
    }
    while let Some(a) = a_rx.recv().await {
        answers.push(a);
    }
    (messages, answers)
}

/// `sse::session_of`; a refusal as its status.
pub fn session_of(uri: &http::Uri) -> Result<String, http::StatusCode> {
    sse::session_of(uri).map_err(|refused| refused.status())
}

/// `sse::message_of`.
pub fn message_of(body: &[u8]) -> Result<Option<Message>, Value> {
    sse::message_of(body).map(|m| m.map(|m| Message(Box::new(m))))
}

/// The executor's forge client (`executor::Forge`), for its URL check.
pub struct Forge(crate::executor::Forge);

impl Forge {
    /// `Forge::new`, one timeout for connecting and for the whole request.
    pub fn new(base: url::Url, limits: Limits, timeout: Duration) -> Result<Forge, aegis_core::error::Shown> {
        crate::executor::Forge::new(base, limits, timeout, timeout).map(Forge)
    }

    /// `Forge::url_of`.
    pub fn url_of(&self, plan: &CallPlan) -> Result<url::Url, CallError> {
        self.0.url_of(plan)
    }
}

/// `executor::forge_error` of a forge answer with this status, headers and body.
pub fn forge_error(
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
    kind: ErrorKind,
    redactor: &Redactor,
) -> CallError {
    let received = crate::executor::Received { status, headers, body, over: None, _large: None };
    crate::executor::forge_error(&received, kind, redactor)
}

/// An OAuth error answer (`oauth::OAuthError`).
#[derive(Debug)]
pub struct OAuthError {
    pub status: u16,
    pub code: &'static str,
    pub description: String,
}

impl From<crate::oauth::OAuthError> for OAuthError {
    fn from(e: crate::oauth::OAuthError) -> OAuthError {
        OAuthError { status: e.status, code: e.code, description: e.description }
    }
}

/// A form or query read as one request's typed form (`oauth/form.rs`).
#[derive(Debug)]
pub struct Form {
    pub name: &'static str,
    /// The parameters the request reads: every field of its type.
    pub fields: &'static [&'static str],
    /// Each field's value, in the order of `fields`; or why the form was refused.
    pub read: Result<Vec<Option<String>>, OAuthError>,
}

/// `bytes` read as the typed form `$form`, whose fields are `$field`s.
macro_rules! typed_form {
    ($bytes:expr, $form:ident, [$($field:ident),+ $(,)?]) => {
        Form {
            name: stringify!($form),
            fields: &[$(stringify!($field)),+],
            read: crate::oauth::form::parse::<crate::oauth::form::$form>($bytes)
                .map(|form| vec![$(form.$field.get().map(str::to_owned)),+])
                .map_err(OAuthError::from),
        }
    };
}

/// `bytes` read as each request's typed form.
pub fn forms(bytes: &[u8]) -> Vec<Form> {
    vec![
        typed_form!(
            bytes,
            AuthorizeQuery,
            [
                client_id,
                redirect_uri,
                response_type,
                state,
                code_challenge,
                code_challenge_method,
                scope,
                resource
            ]
        ),
        typed_form!(bytes, ApproveForm, [pending, granted]),
        typed_form!(bytes, CallbackQuery, [state, code, error]),
        typed_form!(bytes, TokenGrant, [grant_type]),
        typed_form!(bytes, CodeGrant, [client_id, code, redirect_uri, code_verifier, resource]),
        typed_form!(bytes, RefreshGrant, [client_id, refresh_token, scope, resource]),
    ]
}

/// `oauth::valid_redirect_uri`, with no app schemes beyond the standard ones.
pub fn valid_redirect_uri(uri: &str) -> Result<(), aegis_core::error::Shown> {
    crate::oauth::valid_redirect_uri(uri, &[])
}

/// `oauth::same_redirect`.
pub fn same_redirect(registered: &str, asked: &str) -> bool {
    crate::oauth::same_redirect(registered, asked)
}

/// `oauth::opens_as`.
pub fn opens_as(sealer: &Sealer, kind: Kind, text: &str) -> bool {
    crate::oauth::opens_as(sealer, kind, text)
}

/// `oauth::seal::MAX_SEALED_BYTES`.
pub const MAX_SEALED_BYTES: usize = crate::oauth::seal::MAX_SEALED_BYTES;

/// An authorization server (`OAuth::new`) for the MCP endpoint `/mcp`, no app schemes.
pub fn oauth_server(
    client_id: &str,
    client_secret: &str,
    public_url: &str,
    key: [u8; 32],
) -> crate::oauth::OAuth {
    let settings = crate::config::OAuthSettings {
        apps: vec![crate::config::SignInApp {
            profile: None,
            client_id: client_id.into(),
            client_secret: SecretString::from(client_secret.to_owned()),
        }],
        public_url: public_url.into(),
        key: std::sync::Arc::new(secrecy::SecretBox::new(Box::new(key))),
        redirect_schemes: Vec::new(),
    };
    crate::oauth::OAuth::new(&settings, "/mcp")
}

/// Whether `OAuth::verify` takes `token` as a valid access token.
pub fn verifies(oauth: &crate::oauth::OAuth, token: &SecretString) -> bool {
    matches!(oauth.verify(token), crate::oauth::Presented::Valid(_))
}

/// `audit::GENESIS`.
pub const GENESIS: &str = crate::audit::GENESIS;

/// `audit::seal`.
pub fn seal(key: &crate::audit::AuditKey, line: &Map<String, Value>) -> (Vec<u8>, String) {
    crate::audit::seal(key, line)
}

/// What `audit verify` found in one file (`audit::FileReport`).
#[derive(Debug)]
pub struct FileReport {
    pub lines: u64,
    pub last: Option<(u64, String)>,
    pub broken: Option<(u64, String)>,
    pub notes: Vec<String>,
}

/// `audit::verify_reader`.
pub fn verify_reader(
    reader: impl std::io::BufRead,
    key: &crate::audit::AuditKey,
) -> std::io::Result<FileReport> {
    crate::audit::verify_reader(reader, key).map(|r| FileReport {
        lines: r.lines,
        last: r.last,
        broken: r.broken,
        notes: r.notes,
    })
}

/// `audit::verify_each`.
pub fn verify_each<R: std::io::BufRead>(
    files: impl IntoIterator<Item = (String, std::io::Result<R>)>,
    key: &crate::audit::AuditKey,
) -> (String, bool) {
    crate::audit::verify_each(files, key)
}

/// One read a resource URI stands for (`call::Read`).
#[derive(Debug)]
pub struct ResourceRead {
    pub operation: &'static str,
    pub args: Map<String, Value>,
}

/// `resources::reads_of`.
pub fn reads_of(uri: &str) -> Result<Vec<ResourceRead>, CallError> {
    crate::resources::reads_of(uri).map(|reads| {
        reads.into_iter().map(|r| ResourceRead { operation: r.operation, args: r.args }).collect()
    })
}
