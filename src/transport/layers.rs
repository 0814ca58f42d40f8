//! The HTTP layers in front of every MCP route (`/mcp`, `/sse`, `/message`): each is a
//! function (here, or in `direct.rs` and `plain_json.rs`) whose doc says what it does.
//! `mcp_layers` is the one place their order is set, with why each stands where it does, and
//! `behind` puts them around the routes; docs/TRANSPORT.md walks through them.
//!
//! What a layer learns travels in the request's extensions to the layers after it and to the
//! MCP handler: the `Caller` and its `Deadline` (`authenticate`), the `Narrowing` (`narrow`),
//! `Oversized` (`read_body_within`). Refusals are JSON-RPC error bodies with a message that
//! says what to change (`answers.rs`).

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;

use super::answers::{answer, no_identity, refuse, unauthorized_for};

use super::{direct, jsonrpc, plain_json, sessions};
use crate::identity::Caller;
use crate::identity::header::{self as auth_header, AuthHeader};
use crate::mcp::{Deadline, McpHandler, Oversized};
use crate::oauth::{OAuth, Presented};
use crate::server::Server;
use aegis_core::catalog::toolsets::Selection;
use aegis_core::policy::Narrowing;
use aegis_core::policy::repos::RepoList;

/// What the layers need to know.
#[derive(Debug, Clone)]
pub(crate) struct LayerConfig {
    /// Allowed `Host` values (`host` or `host:port`); empty = any.
    pub(crate) allowed_hosts: Vec<String>,
    /// Allowed `Origin` values (`scheme://host[:port]`); empty = any.
    pub(crate) allowed_origins: Vec<String>,
    pub(crate) bearer: Option<secrecy::SecretString>,
    /// Largest request body.
    pub(crate) max_body_bytes: usize,
    /// How long a request body may take to arrive.
    pub(crate) body_timeout: std::time::Duration,
    /// How long one request may take in all (`MCP_REQUEST_TIMEOUT`).
    pub(crate) request_timeout: std::time::Duration,
    /// Sign-in with the forge, when configured: its tokens are opened here, and a request
    /// without a usable token is told where to sign in.
    pub(crate) oauth: Option<Arc<OAuth>>,
    /// The server: which tokens the forge has confirmed or refused, and each address's budget
    /// of new ones.
    pub(crate) server: Arc<Server>,
}

impl LayerConfig {
    /// The layers' settings for `server` answering at `addr`, whose host makes the default
    /// `Host` and `Origin` allowlists.
    pub(crate) fn new(server: Arc<Server>, addr: std::net::SocketAddr) -> LayerConfig {
        let s = &server.settings;
        LayerConfig {
            allowed_hosts: allowed_hosts(&s.allowed_hosts, addr),
            allowed_origins: allowed_origins(&s.allowed_origins, addr),
            bearer: s.mcp_bearer_token.clone(),
            max_body_bytes: s.max_body_bytes,
            body_timeout: s.body_timeout,
            request_timeout: s.request_timeout,
            oauth: server.oauth.clone(),
            server: server.clone(),
        }
    }
}

/// Which MCP routes the layers stand in front of: they differ after the common ones.
pub(crate) enum Route {
    /// Legacy HTTP+SSE (`sse.rs`): the common layers only.
    Sse,
    /// Streamable HTTP without sessions (`MCP_STATELESS`).
    Stateless,
    /// Streamable HTTP with sessions: the sessions layer, and what `direct.rs` answers in one.
    Sessions { sessions: Arc<SessionLayer>, in_session: Arc<direct::InSession> },
}

/// One layer in front of the MCP routes, with what it holds; `Layer::around` names the
/// function that does its work, whose doc says what that is.
pub(crate) enum Layer {
    HostOrigin(Arc<LayerConfig>),
    Authenticate(Arc<LayerConfig>),
    Narrow,
    ReadBody(Arc<LayerConfig>),
    TrackAnswers(Arc<Server>),
    Scope(Arc<Server>),
    Sessions(Arc<SessionLayer>),
    JsonRpcErrors,
    PlainJson,
    SessionCalls(Arc<direct::InSession>),
    StatelessCalls(McpHandler),
    ToTheLibrary(McpHandler),
}

/// The layers in front of the MCP routes of `route`, outermost first: the one place their
/// order is set (`behind` builds it, a test names it).
pub(crate) fn mcp_layers(cfg: &Arc<LayerConfig>, handler: &McpHandler, route: Route) -> Vec<Layer> {
    let server = &cfg.server;
    let mut layers = vec![
        // Who may ask at all, from the head alone, before anything else is looked at.
        Layer::HostOrigin(cfg.clone()),
        // Who asks decides everything after; no body is read for a request without a usable
        // credential (the listener drains what it left unread).
        Layer::Authenticate(cfg.clone()),
        // Headers only; `scope` and the handler read what it finds.
        Layer::Narrow,
        // The body, read by a known caller only; every layer after reads it from memory.
        Layer::ReadBody(cfg.clone()),
        // Around everything that may answer a call, so that shutdown waits for the answer.
        Layer::TrackAnswers(server.clone()),
        // Needs the identity, the narrowing and the body; before any session or call work.
        Layer::Scope(server.clone()),
    ];
    // Innermost: the plain stateless call answered here, then the count of what reaches the
    // library, so that it counts only what the library itself answers.
    let library =
        |handler: &McpHandler| [Layer::StatelessCalls(handler.clone()), Layer::ToTheLibrary(handler.clone())];
    match route {
        Route::Sse => {}
        Route::Stateless => {
            // Watches the library's answer (415) for a body that is no JSON-RPC message.
            layers.push(Layer::JsonRpcErrors);
            layers.extend(library(handler));
        }
        Route::Sessions { sessions, in_session } => {
            layers.extend([
                // Needs the identity and its deadline; the short paths after it see only
                // requests admitted to their session, and an `initialize` it counted.
                Layer::Sessions(sessions),
                Layer::JsonRpcErrors,
                // Around what may answer as an event stream: the library's session.
                Layer::PlainJson,
                Layer::SessionCalls(in_session),
            ]);
            layers.extend(library(handler));
        }
    }
    layers
}

/// `routes` behind `layers` (outermost first, as `mcp_layers` lists them).
pub(crate) fn behind(routes: Router, layers: Vec<Layer>) -> Router {
    layers.into_iter().rev().fold(routes, |routes, layer| layer.around(routes))
}

impl Layer {
    /// `routes` inside this layer.
    fn around(self, routes: Router) -> Router {
        match self {
            Layer::HostOrigin(cfg) => routes.layer(from_fn_with_state(cfg, guard_host_origin)),
            Layer::Authenticate(cfg) => routes.layer(from_fn_with_state(cfg, authenticate)),
            Layer::Narrow => routes.layer(from_fn(narrow)),
            Layer::ReadBody(cfg) => routes.layer(from_fn_with_state(cfg, read_body_within)),
            Layer::TrackAnswers(server) => routes.layer(from_fn_with_state(server, track_answers)),
            Layer::Scope(server) => routes.layer(from_fn_with_state(server, scope)),
            Layer::Sessions(ctx) => routes.layer(from_fn_with_state(ctx, sessions)),
            Layer::JsonRpcErrors => routes.layer(from_fn(json_rpc_errors)),
            Layer::PlainJson => routes.layer(from_fn(plain_json::plain_json)),
            Layer::SessionCalls(s) => routes.layer(from_fn_with_state(s, direct::session_calls)),
            Layer::StatelessCalls(handler) => {
                routes.layer(from_fn_with_state(handler, direct::stateless_calls))
            }
            Layer::ToTheLibrary(handler) => routes.layer(from_fn_with_state(handler, direct::to_the_library)),
        }
    }

    /// The name of the function that does this layer's work.
    #[cfg(test)]
    fn name(&self) -> &'static str {
        match self {
            Layer::HostOrigin(_) => "guard_host_origin",
            Layer::Authenticate(_) => "authenticate",
            Layer::Narrow => "narrow",
            Layer::ReadBody(_) => "read_body_within",
            Layer::TrackAnswers(_) => "track_answers",
            Layer::Scope(_) => "scope",
            Layer::Sessions(_) => "sessions",
            Layer::JsonRpcErrors => "json_rpc_errors",
            Layer::PlainJson => "plain_json",
            Layer::SessionCalls(_) => "session_calls",
            Layer::StatelessCalls(_) => "stateless_calls",
            Layer::ToTheLibrary(_) => "to_the_library",
        }
    }
}

/// Hold a token of `Server::answers` for a POST until its answer is written (its response
/// body is done or dropped): graceful shutdown waits for these after the calls, so the
/// answer of a call that just finished goes out before the streams end. Streams (GET) are
/// not counted; they end at shutdown.
pub(crate) async fn track_answers(State(server): State<Arc<Server>>, req: Request, next: Next) -> Response {
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    let token = server.answers.token();
    next.run(req).await.map(|body| Body::new(Tracked { body, _token: token }))
}

/// A response body that holds a tracker's token until it is done or dropped.
struct Tracked {
    body: Body,
    _token: tokio_util::task::task_tracker::TaskTrackerToken,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A request body, already read whole by `read_body_within`.
pub(crate) async fn read_body(body: Body) -> Result<Bytes, Response> {
    axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|_| refuse(StatusCode::BAD_REQUEST, -32600, "the request body could not be read"))
}

fn host_allowed(host: &str, allowed: &[String]) -> bool {
    if allowed.is_empty() {
        return true;
    }
    let host = host.trim().to_ascii_lowercase();
    let (name, port) = split_host_port(&host);
    allowed.iter().any(|a| {
        let a = a.trim().to_ascii_lowercase();
        let (an, ap) = split_host_port(&a);
        an == name && (ap.is_none() || ap == port)
    })
}

fn split_host_port(s: &str) -> (&str, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[') {
        // [::1]:8080
        return match rest.split_once(']') {
            Some((h, tail)) => (h, tail.strip_prefix(':')),
            None => (rest, None),
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.chars().all(|c| c.is_ascii_digit()) => (h, Some(p)),
        _ => (s, None),
    }
}

fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    if allowed.is_empty() {
        return true;
    }
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let Some((scheme, authority)) = origin.split_once("://") else { return false };
    allowed.iter().any(|a| {
        let a = a.trim().trim_end_matches('/').to_ascii_lowercase();
        match a.split_once("://") {
            Some((s, auth)) => s == scheme && host_allowed(authority, &[auth.to_owned()]),
            None => host_allowed(authority, std::slice::from_ref(&a)),
        }
    })
}

/// DNS-rebinding protection: `Host` and `Origin` must be in the allowed lists (else 403).
pub(crate) async fn guard_host_origin(
    State(cfg): State<Arc<LayerConfig>>,
    req: Request,
    next: Next,
) -> Response {
    match host_origin_refusal(&cfg.allowed_hosts, &cfg.allowed_origins, &req) {
        Some(refused) => refused,
        None => next.run(req).await,
    }
}

/// Why a request's `Host` or `Origin` is not allowed (DNS-rebinding protection), if it is not:
/// the MCP routes and `/metrics` apply the same rules.
pub(crate) fn host_origin_refusal(hosts: &[String], origins: &[String], req: &Request) -> Option<Response> {
    if !host_ok(hosts, req) {
        return Some(host_refused());
    }
    let origin = req.headers().get(header::ORIGIN)?;
    if origin.to_str().is_ok_and(|o| origin_allowed(o, origins)) {
        return None;
    }
    Some(refuse(
        StatusCode::FORBIDDEN,
        -32600,
        "Forbidden: the Origin header is not allowed; add it with --allowed-origins",
    ))
}

/// `Host` only: the sign-in routes, which clients of other origins use by design.
pub(crate) async fn guard_host(State(cfg): State<Arc<LayerConfig>>, req: Request, next: Next) -> Response {
    if host_ok(&cfg.allowed_hosts, &req) { next.run(req).await } else { host_refused() }
}

fn host_refused() -> Response {
    refuse(
        StatusCode::FORBIDDEN,
        -32600,
        "Forbidden: the Host header is not allowed (DNS rebinding protection); add it with --allowed-hosts",
    )
}

fn host_ok(allowed: &[String], req: &Request) -> bool {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    host.is_some_and(|h| host_allowed(&h, allowed))
}

/// The request's identity, from its `Authorization` header, per request: the shared
/// `MCP_BEARER_TOKEN` means the server's global identity; a token this server issued opens
/// into the person's grant; any other token is the caller's own forge token; no usable
/// header means the global identity — or 401 when `MCP_BEARER_TOKEN` is set, and with sign-in
/// configured a 401 naming where to sign in. A token that is not text gets 401, one over
/// 8 KiB 431, and a forge token new to the server 429 when its address is over its budget of
/// new tokens (`MCP_NEW_TOKENS_PER_MINUTE`). The identity goes into the request's extensions
/// as a `Caller`, with the request's `Deadline`; the MCP handler reads both there.
pub(crate) async fn authenticate(
    State(cfg): State<Arc<LayerConfig>>,
    mut req: Request,
    next: Next,
) -> Response {
    if req.headers().get_all(header::AUTHORIZATION).iter().count() > 1 {
        return refuse(StatusCode::BAD_REQUEST, -32600, "send exactly one Authorization header");
    }
    let parsed = auth_header::parse(req.headers().get(header::AUTHORIZATION).map(HeaderValue::as_bytes));
    let named = match forge_tokens(&cfg, req.headers()) {
        Ok(named) => named,
        Err(refused) => return *refused,
    };
    if !named.is_empty() {
        return match with_forge_tokens(&cfg, &req, parsed, named) {
            Ok(identity) => {
                req.extensions_mut().insert(identity);
                req.extensions_mut().insert(Deadline(tokio::time::Instant::now() + cfg.request_timeout));
                next.run(req).await
            }
            Err(refused) => *refused,
        };
    }
    let identity = match parsed {
        AuthHeader::Token(t) => match &cfg.bearer {
            Some(b) if is_bearer(&t, b) => Caller::Global,
            _ => match cfg.oauth.as_ref().map(|o| o.verify(&t)) {
                None | Some(Presented::NotOurs) if !crate::oauth::looks_issued(t.expose_secret()) => {
                    Caller::Token(t)
                }
                None | Some(Presented::NotOurs) => {
                    return unauthorized(
                        &cfg,
                        "this server does not issue tokens (sign-in with the forge is not configured); send a forge access token",
                    );
                }
                Some(Presented::Valid(grant)) => Caller::Granted(grant),
                Some(Presented::Forges(grants)) => {
                    let (default, named) = signed_in(&cfg, grants);
                    Caller::Forges(Arc::new(crate::identity::ForgeCredentials { default, named }))
                }
                Some(Presented::Invalid(why)) => return unauthorized(&cfg, why),
            },
        },
        AuthHeader::NotText => {
            return unauthorized(
                &cfg,
                "the Authorization header's token is not text (UTF-8); send the token exactly as the forge issued it",
            );
        }
        AuthHeader::TooLong => {
            return refuse(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                -32600,
                &format!(
                    "the Authorization header's token is longer than {} bytes; forge access tokens are 40 characters",
                    auth_header::MAX_TOKEN_BYTES
                ),
            );
        }
        AuthHeader::None if cfg.oauth.is_some() => {
            return sign_in_needed(
                &cfg,
                "Unauthorized: sign in with the forge (your MCP client finds how from this answer), or send your own forge token as Authorization: token <token>",
            );
        }
        AuthHeader::None if cfg.bearer.is_some() => {
            return unauthorized(
                &cfg,
                "Unauthorized: send Authorization: Bearer <MCP_BEARER_TOKEN>, or your own forge token as Authorization: token <token>",
            );
        }
        AuthHeader::None => Caller::Global,
    };
    if let Caller::Token(token) = &identity {
        if let Some(refused) = new_token_refusal(&cfg, &req, token) {
            return refused;
        }
    }
    req.extensions_mut().insert(identity);
    req.extensions_mut().insert(Deadline(tokio::time::Instant::now() + cfg.request_timeout));
    next.run(req).await
}

/// Whether `token` is `MCP_BEARER_TOKEN` (`bearer`), compared in constant time.
fn is_bearer(token: &secrecy::SecretString, bearer: &secrecy::SecretString) -> bool {
    auth_header::constant_time_eq(token.expose_secret().as_bytes(), bearer.expose_secret().as_bytes())
}

/// The headers that carry a token per forge: `X-MCP-Forge-Authorization-<profile>`.
const FORGE_HEADER: &str = "x-mcp-forge-authorization-";

/// The forge tokens a request carries in `X-MCP-Forge-Authorization-<profile>` headers, each
/// for a profile of the server, once, as `token <T>` or `Bearer <T>`; or the answer that says
/// what is wrong with one. A header that names its forge is never dropped silently (as an
/// unusable `Authorization` is): a typo must not leave a forge without its credential, and
/// none of these answers is a 401, so that no client starts a sign-in because of them.
fn forge_tokens(
    cfg: &LayerConfig,
    headers: &axum::http::HeaderMap,
) -> Result<Vec<(String, secrecy::SecretString)>, Box<Response>> {
    let bad = |message: String| Box::new(refuse(StatusCode::BAD_REQUEST, -32600, &message));
    let mut out: Vec<(String, secrecy::SecretString)> = Vec::new();
    for name in headers.keys() {
        let Some(profile) = name.as_str().strip_prefix(FORGE_HEADER) else { continue };
        // The client's header name, echoed no longer than a profile's name may be.
        let clipped: String = profile.chars().take(63).collect();
        let shown = format!("X-MCP-Forge-Authorization-{clipped}");
        let forges = &cfg.server.forges;
        if !forges.names_all().any(|n| n == profile) {
            let names: Vec<&str> = forges.names_all().collect();
            return Err(bad(match names.is_empty() {
                true => format!(
                    "{shown}: this server serves one forge; send its token as Authorization: token <token>"
                ),
                false => {
                    format!("{shown} names no forge of this server; its forges are {}", names.join(", "))
                }
            }));
        }
        if headers.get_all(name).iter().count() > 1 {
            return Err(bad(format!("send the {shown} header once")));
        }
        let value = headers.get(name).map(HeaderValue::as_bytes);
        match auth_header::parse(value) {
            AuthHeader::Token(t) if crate::oauth::looks_issued(t.expose_secret()) => {
                return Err(bad(format!(
                    "{shown} carries a token this server issued; send it as Authorization: Bearer <token>"
                )));
            }
            AuthHeader::Token(t) => out.push((profile.to_owned(), t)),
            AuthHeader::TooLong => {
                return Err(Box::new(refuse(
                    StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                    -32600,
                    &format!("{shown}'s token is longer than {} bytes", auth_header::MAX_TOKEN_BYTES),
                )));
            }
            AuthHeader::None | AuthHeader::NotText => {
                return Err(bad(format!(
                    "{shown} must be \"token <token>\" or \"Bearer <token>\": an access token of that forge, as text"
                )));
            }
        }
    }
    Ok(out)
}

/// The identity of a request that carries forge tokens by profile, beside what
/// `Authorization` carries for the default forge (a forge token, a sign-in, or nothing): one
/// credential per forge, never two, and never `MCP_BEARER_TOKEN` beside them (it stands for
/// the server's own identity on every forge). Each new token counts against its address's
/// budget of new tokens, as a token in `Authorization` does.
fn with_forge_tokens(
    cfg: &LayerConfig,
    req: &Request,
    parsed: AuthHeader,
    named: Vec<(String, secrecy::SecretString)>,
) -> Result<Caller, Box<Response>> {
    let bad = |message: &str| Box::new(refuse(StatusCode::BAD_REQUEST, -32600, message));
    // The grants of a sign-in on several forges, beside the default forge's.
    let mut signed: Vec<(String, Caller)> = Vec::new();
    let default = match parsed {
        AuthHeader::None => None,
        AuthHeader::NotText | AuthHeader::TooLong => {
            return Err(bad("the Authorization header's token is unusable (not text, or too long)"));
        }
        AuthHeader::Token(t) => match &cfg.bearer {
            Some(b) if is_bearer(&t, b) => {
                return Err(bad(
                    "Authorization carries MCP_BEARER_TOKEN (the server's own identity on every forge); do not send X-MCP-Forge-Authorization-* with it",
                ));
            }
            _ => match cfg.oauth.as_ref().map(|o| o.verify(&t)) {
                Some(Presented::Valid(grant)) => Some(Caller::Granted(grant)),
                Some(Presented::Forges(grants)) => {
                    let (default, others) = signed_in(cfg, grants);
                    signed = others;
                    default
                }
                Some(Presented::Invalid(why)) => return Err(Box::new(unauthorized(cfg, why))),
                None | Some(Presented::NotOurs) => Some(Caller::Token(t)),
            },
        },
    };
    let forges = &cfg.server.forges;
    let primary = forges.primary();
    if let (Some(_), Some(name)) = (&default, primary.name()) {
        if named.iter().any(|(n, _)| n == name) {
            return Err(bad(&format!(
                "two credentials for the forge {name}: Authorization (which stands for the default forge {name}) and X-MCP-Forge-Authorization-{name}; send one"
            )));
        }
    }
    if let Some((name, _)) = named.iter().find(|(n, _)| signed.iter().any(|(s, _)| s == n)) {
        return Err(bad(&format!(
            "two credentials for the forge {name}: the sign-in in Authorization holds one, and X-MCP-Forge-Authorization-{name} another; send one"
        )));
    }
    if let Some(Caller::Token(token)) = &default {
        if let Some(refused) = new_token_refusal(cfg, req, token) {
            return Err(Box::new(refused));
        }
    }
    for (name, token) in &named {
        let Some(profile) = forges.all().find(|p| p.name() == Some(name.as_str())) else { continue };
        if let Some(refused) = new_token_refusal_on(cfg, req, profile, token) {
            return Err(Box::new(refused));
        }
    }
    let named = named.into_iter().map(|(n, t)| (n, Caller::Token(t))).chain(signed).collect();
    Ok(Caller::Forges(Arc::new(crate::identity::ForgeCredentials { default, named })))
}

/// A sign-in on several forges as credentials by forge: the default forge's grant, and the
/// others' by profile name. Each grant is its own forge's only.
fn signed_in(
    cfg: &LayerConfig,
    grants: Vec<(String, crate::identity::Grant)>,
) -> (Option<Caller>, Vec<(String, Caller)>) {
    let default_name = cfg.server.forges.primary().name().map(str::to_owned);
    let mut default = None;
    let mut named = Vec::with_capacity(grants.len());
    for (profile, grant) in grants {
        if default_name.as_deref() == Some(profile.as_str()) {
            default = Some(Caller::Granted(grant));
        } else {
            named.push((profile, Caller::Granted(grant)));
        }
    }
    (default, named)
}

/// What a forge token costs that the server has not seen in the last minute nor had
/// confirmed: it counts against its address's budget of new tokens
/// (`MCP_NEW_TOKENS_PER_MINUTE`, 429 above it), before anything else is done for its request
/// — each would cost a lookup at the forge.
fn new_token_refusal(cfg: &LayerConfig, req: &Request, token: &secrecy::SecretString) -> Option<Response> {
    new_token_refusal_on(cfg, req, cfg.server.forges.primary(), token)
}

/// `new_token_refusal` for a token of the forge `profile`.
fn new_token_refusal_on(
    cfg: &LayerConfig,
    req: &Request,
    profile: &crate::forges::ForgeProfile,
    token: &secrecy::SecretString,
) -> Option<Response> {
    if !profile.logins.first_sight(token) {
        return None;
    }
    let peer = req.extensions().get::<super::listener::Peer>()?;
    let aegis_core::error::CallError::Result(f) = cfg.server.new_tokens.admit(peer.0).err()? else {
        return None;
    };
    let mut r = refuse(StatusCode::TOO_MANY_REQUESTS, -32000, &f.message);
    if let Some(wait) = f.retry_after {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(wait));
    }
    Some(r)
}

/// A 401 with the challenge clients expect; with sign-in configured it names the resource
/// metadata, where a client finds how to sign in (RFC 9728).
fn unauthorized(cfg: &LayerConfig, message: &str) -> Response {
    unauthorized_for(cfg.oauth.as_deref(), message)
}

/// A 401 for a request without credentials on a server with sign-in: where to sign in, and
/// no error (RFC 6750 §3.1: none was presented). No `scope` either: a client then asks for
/// the scopes the resource metadata lists, or for fewer if its user wants only reads — a
/// scope here would override that choice in clients that prefer the challenge's.
fn sign_in_needed(cfg: &LayerConfig, message: &str) -> Response {
    let mut r = refuse(StatusCode::UNAUTHORIZED, -32001, message);
    if let Some(oauth) = &cfg.oauth {
        let challenge = format!(
            r#"Bearer realm="aegis-gitea-mcp", resource_metadata="{}""#,
            oauth.resource_metadata_url()
        );
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
    }
    r
}

/// After the body is read: a tools/call from a read-only sign-in that only a write sign-in
/// could make is answered 403 `insufficient_scope` (the client may ask the person to sign in
/// with more); the call itself would be refused by the policy anyway.
pub(crate) async fn scope(State(server): State<Arc<Server>>, req: Request, next: Next) -> Response {
    let read_only = req.extensions().get::<Caller>().is_some_and(Caller::read_only);
    let (Some(oauth), true) = (&server.oauth, read_only) else { return next.run(req).await };
    // What the headers narrow (the sign-in's own read-only part is added by the handler):
    // the call is judged with and without reads-only.
    let Some(narrowing) = req.extensions().get::<Narrowing>().cloned() else { return no_identity() };
    let (parts, body) = req.into_parts();
    let bytes = match read_body(body).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    #[derive(serde::Deserialize)]
    struct Call {
        method: Option<String>,
        params: Option<CallParams>,
    }
    #[derive(serde::Deserialize)]
    struct CallParams {
        name: Option<String>,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
    }
    let calls: Vec<Call> = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Array(items)) => {
            items.into_iter().filter_map(|v| serde_json::from_value(v).ok()).collect()
        }
        Ok(v) => serde_json::from_value(v).ok().into_iter().collect(),
        Err(_) => Vec::new(),
    };
    let writes = calls.into_iter().any(|c| {
        c.method.as_deref() == Some("tools/call")
            && c.params.is_some_and(|p| {
                p.name.as_deref().is_some_and(|name| {
                    crate::call::refused_only_for_reads(
                        &server,
                        &narrowing,
                        name,
                        p.arguments.unwrap_or_default(),
                    )
                })
            })
    });
    if writes {
        let mut r = refuse(
            StatusCode::FORBIDDEN,
            -32001,
            "this sign-in is read-only (scope read) and the call writes; sign in again with scope write",
        );
        let challenge = format!(
            r#"Bearer error="insufficient_scope", scope="{}", resource_metadata="{}", error_description="the call needs scope write""#,
            OAuth::full_scope(),
            oauth.resource_metadata_url()
        );
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        return r;
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// What the request narrows for itself (`X-MCP-Readonly`, `X-MCP-Toolsets`,
/// `X-MCP-Allowed-Repos`, `X-MCP-Write-Allowed-Repos`, `X-MCP-Disabled-Tools`,
/// `X-MCP-Content-Trust`, each at most once), as a `Narrowing` in its extensions; the handler adds a read-only sign-in's hold on
/// reads. 400 when a header cannot be understood: a request that meant to narrow must not run
/// wider.
pub(crate) async fn narrow(mut req: Request, next: Next) -> Response {
    match narrowing(req.headers()) {
        Ok(n) => {
            req.extensions_mut().insert(n);
            next.run(req).await
        }
        Err(message) => refuse(StatusCode::BAD_REQUEST, -32600, &message),
    }
}

/// The `Narrowing` the `X-MCP-*` headers ask for.
///
/// The error is text, as are those of `header_once` and `repo_list` that it passes on: each is
/// only shown, as the message of the one answer `narrow` gives every failure (400), and no
/// caller tells one failure from another.
fn narrowing(headers: &axum::http::HeaderMap) -> Result<Narrowing, String> {
    let one = |name: &str| header_once(headers, name);
    let read_only = match one("x-mcp-readonly")?.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("" | "false" | "0" | "no" | "off") => false,
        Some("true" | "1" | "yes" | "on") => true,
        Some(_) => return Err("X-MCP-Readonly must be true or false".into()),
    };
    let toolsets = one("x-mcp-toolsets")?
        .map(|v| Selection::parse(&v).map_err(|e| format!("X-MCP-Toolsets: {e}")))
        .transpose()?;
    let disabled = match one("x-mcp-disabled-tools")? {
        Some(v) if aegis_core::policy::repos::too_many_entries(&v) => {
            return Err(format!(
                "X-MCP-Disabled-Tools names more than {} tools; choose fewer with X-MCP-Toolsets",
                aegis_core::policy::repos::MAX_REQUEST_ENTRIES
            ));
        }
        Some(v) => v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect(),
        None => Default::default(),
    };
    let repos = repo_list(headers, "X-MCP-Allowed-Repos")?;
    let write_repos = repo_list(headers, "X-MCP-Write-Allowed-Repos")?;
    // Only ever on: a request may not turn off what CONTENT_TRUST=withhold holds it to.
    let withhold = match one("x-mcp-content-trust")?.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("") => false,
        Some("withhold") => true,
        Some(_) => {
            return Err(
                "X-MCP-Content-Trust may only be withhold (a request turns withholding on, never off)".into(),
            );
        }
    };
    Ok(Narrowing { read_only, disabled, toolsets, repos, write_repos, withhold })
}

/// The value of header `name` (lower case), trimmed, when it is sent once. The error is the
/// text `narrow` shows the client (see `narrowing`).
fn header_once(headers: &axum::http::HeaderMap, name: &str) -> Result<Option<String>, String> {
    let mut values = headers.get_all(name).iter();
    let Some(v) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(format!("send the {name} header once"));
    }
    v.to_str().map(|s| Some(s.trim().to_owned())).map_err(|_| format!("the {name} header is not text"))
}

/// The repository list header `name` (as the client reads it) asks for. The error is the text
/// `narrow` shows the client (see `narrowing`).
fn repo_list(headers: &axum::http::HeaderMap, name: &str) -> Result<Option<Arc<RepoList>>, String> {
    header_once(headers, &name.to_ascii_lowercase())?
        .map(|v| RepoList::parse_request(&v).map(Arc::new).map_err(|e| format!("{name}: {e}")))
        .transpose()
}

/// Most bytes of a body over `MCP_MAX_BODY_BYTES` read (and skimmed, not kept) to find what
/// it asked, so that its answer goes to its id; beyond, it gets a plain 413.
const MAX_SKIMMED: usize = 64 << 20;

/// A request body as read: whole, or too long to keep and skimmed.
enum Read {
    Whole(Bytes),
    Skimmed(jsonrpc::Skim),
}

/// Why a body was not read.
enum Unread {
    TooLong,
    Broken,
}

/// Read `body`: kept while within `max` bytes, then skimmed up to `MAX_SKIMMED`.
async fn read_within(body: Body, max: usize) -> Result<Read, Unread> {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut kept = Vec::new();
    let mut skim: Option<(jsonrpc::Skim, usize)> = None;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(|_| Unread::Broken)?.into_data() else { continue };
        match &mut skim {
            Some((s, total)) => {
                *total += data.len();
                if *total > MAX_SKIMMED {
                    return Err(Unread::TooLong);
                }
                s.feed(&data);
            }
            None if kept.len() + data.len() > max => {
                let mut s = jsonrpc::Skim::default();
                s.feed(&kept);
                s.feed(&data);
                skim = Some((s, kept.len() + data.len()));
                kept = Vec::new();
            }
            None => kept.extend_from_slice(&data),
        }
    }
    Ok(match skim {
        Some((s, _)) => Read::Skimmed(s),
        None => Read::Whole(Bytes::from(kept)),
    })
}

/// The request body, read whole within `body_timeout` and `max_body_bytes` (a body that
/// never ends holds nothing for long: 408), then handed on in memory. JSON-RPC messages are
/// small; every later step may read the body at once. A body over the limit is skimmed as it
/// arrives: a tool call goes on as a call of its tool marked `Oversized` (the handler answers
/// it with the tool error `payload_too_large`), another request gets 413 with its own id.
pub(crate) async fn read_body_within(
    State(cfg): State<Arc<LayerConfig>>,
    req: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = req.into_parts();
    let too_large = || {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            &format!("the request body is larger than {} bytes (MCP_MAX_BODY_BYTES)", cfg.max_body_bytes),
        )
    };
    let bytes = match tokio::time::timeout(cfg.body_timeout, read_within(body, cfg.max_body_bytes)).await {
        Ok(Ok(Read::Whole(bytes))) => bytes,
        Ok(Ok(Read::Skimmed(skim))) => match jsonrpc::oversized(skim.head(), cfg.max_body_bytes) {
            jsonrpc::Read::Message(m) => {
                parts.extensions.insert(Oversized { limit: cfg.max_body_bytes });
                match serde_json::to_vec(&*m) {
                    Ok(small) => Bytes::from(small),
                    Err(_) => return too_large(),
                }
            }
            jsonrpc::Read::Answer(error) => return answer(StatusCode::PAYLOAD_TOO_LARGE, &error),
            jsonrpc::Read::Nothing => return too_large(),
        },
        Ok(Err(Unread::TooLong)) => return too_large(),
        Ok(Err(Unread::Broken)) => {
            return refuse(StatusCode::BAD_REQUEST, -32600, "the request body could not be read");
        }
        Err(_) => {
            return refuse(
                StatusCode::REQUEST_TIMEOUT,
                -32600,
                &format!(
                    "the request body did not arrive within {}s (MCP_BODY_TIMEOUT)",
                    cfg.body_timeout.as_secs_f64()
                ),
            );
        }
    };
    // Counted before anything parses it: a body of many small values would grow 40-fold.
    if let Err(error) = jsonrpc::check_values(&bytes) {
        return answer(StatusCode::BAD_REQUEST, &error);
    }
    // Every layer after this one and the MCP library read the body again, each its own way:
    // a key given twice could be read as one thing by a check and as another by the call.
    if let Err(error) = jsonrpc::check_distinct(&bytes) {
        return answer(StatusCode::BAD_REQUEST, &error);
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// Sessions (Streamable HTTP): a request naming a session must come from the session's
/// owner (else 404, see `sessions.rs`); an `initialize` without one opens a session only
/// once its identity is established (401 for a token the forge refuses) and while the
/// limits allow (503 overall, 429 for an identity over its share). Other requests without a
/// session (the stateless 2026-07-28 protocol) pass: each call establishes its identity.
pub(crate) async fn sessions(State(ctx): State<Arc<SessionLayer>>, req: Request, next: Next) -> Response {
    let Some(identity) = req.extensions().get::<Caller>().cloned() else {
        return no_identity();
    };
    let limit = Deadline::of(req.extensions(), ctx.server.settings.request_timeout).left();
    if let Some(id) = req.headers().get("mcp-session-id") {
        let id = id.to_str().unwrap_or_default().to_owned();
        let delete = req.method() == axum::http::Method::DELETE;
        return match sessions::admit(&ctx.owners, &ctx.server, &id, &identity, limit).await {
            // A session closed is answered 200, as the official clients expect (the MCP
            // library says 202, which the Python SDK reports as a failed termination).
            Ok(()) if delete => match next.run(req).await {
                r if r.status() == StatusCode::ACCEPTED => StatusCode::OK.into_response(),
                r => r,
            },
            Ok(()) => next.run(req).await,
            Err(refused) => *refused,
        };
    }
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match read_body(body).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let req = Request::from_parts(parts, Body::from(bytes.clone()));
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    let initialize =
        serde_json::from_slice::<Probe>(&bytes).is_ok_and(|p| p.method.as_deref() == Some("initialize"));
    if !initialize {
        return next.run(req).await;
    }
    let owner = match sessions::establish(&ctx.server, &identity, limit).await {
        Ok(owner) => owner,
        Err(refused) => return *refused,
    };
    let opening = match ctx.owners.open(owner) {
        Ok(o) => o,
        Err(refused) => return *refused,
    };
    // The session manager names the session while this request runs (`OwnedSessions`).
    sessions::OPENING
        .scope(std::cell::RefCell::new(Some((opening, sessions::fingerprint(&identity)))), next.run(req))
        .await
}

/// Streamable HTTP: a POST whose JSON body is not a JSON-RPC message gets 400 with
/// the JSON-RPC error that says why (parse error, or invalid request with its id), where the
/// MCP library would answer 415 as if the media type were wrong.
pub(crate) async fn json_rpc_errors(req: Request, next: Next) -> Response {
    let json = req.method() == axum::http::Method::POST
        && req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
            v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json")
        });
    if !json {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match read_body(body).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let response = next.run(Request::from_parts(parts, Body::from(bytes.clone()))).await;
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return response;
    }
    match jsonrpc::read(&bytes) {
        jsonrpc::Read::Answer(error) => answer(StatusCode::BAD_REQUEST, &error),
        _ => response,
    }
}

/// What the sessions layer needs.
pub(crate) struct SessionLayer {
    pub(crate) server: Arc<Server>,
    pub(crate) owners: Arc<sessions::Owners>,
}

const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Configured hosts, or the loopback names when listening on loopback (any port), or any
/// host otherwise (a warning says so).
pub(super) fn allowed_hosts(configured: &[String], addr: std::net::SocketAddr) -> Vec<String> {
    if !configured.is_empty() {
        return configured.to_vec();
    }
    if addr.ip().is_loopback() { LOOPBACK_NAMES.iter().map(|s| s.to_string()).collect() } else { Vec::new() }
}

pub(super) fn allowed_origins(configured: &[String], addr: std::net::SocketAddr) -> Vec<String> {
    if !configured.is_empty() {
        return configured.to_vec();
    }
    if addr.ip().is_loopback() {
        LOOPBACK_NAMES.iter().flat_map(|h| [format!("http://{h}"), format!("https://{h}")]).collect()
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_with_or_without_port() {
        let allowed = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "[::1]".to_owned(),
            "mcp.example:8443".to_owned(),
        ];
        for ok in ["localhost", "localhost:8080", "127.0.0.1:1", "[::1]:80", "mcp.example:8443"] {
            assert!(host_allowed(ok, &allowed), "{ok}");
        }
        for bad in ["evil.example", "evil.example:8080", "mcp.example", "mcp.example:80", "localhost.evil"] {
            assert!(!host_allowed(bad, &allowed), "{bad}");
        }
    }

    #[test]
    fn narrowing_headers_parse_and_refuse_what_they_cannot_mean() {
        let h = |pairs: &[(&'static str, &'static str)]| {
            let mut m = axum::http::HeaderMap::new();
            for (k, v) in pairs {
                m.append(*k, HeaderValue::from_static(v));
            }
            narrowing(&m)
        };
        assert_eq!(h(&[]).unwrap(), Narrowing::default());
        let n = h(&[
            ("x-mcp-readonly", "TRUE"),
            ("x-mcp-toolsets", "issues, pulls"),
            ("x-mcp-disabled-tools", "a, b,"),
        ])
        .unwrap();
        assert!(n.read_only);
        assert_eq!(n.toolsets, Some(Selection::parse("issues,pulls").unwrap()));
        assert_eq!(n.disabled.into_iter().collect::<Vec<_>>(), ["a", "b"]);
        assert!(!h(&[("x-mcp-readonly", "false")]).unwrap().read_only);
        assert!(h(&[("x-mcp-readonly", "maybe")]).unwrap_err().contains("true or false"));
        assert!(h(&[("x-mcp-toolsets", "issues,nope")]).unwrap_err().contains("\"nope\""));
        assert!(h(&[("x-mcp-readonly", "true"), ("x-mcp-readonly", "false")]).unwrap_err().contains("once"));
        // Withholding authors' text: on, never off.
        assert!(h(&[("x-mcp-content-trust", "Withhold")]).unwrap().withhold);
        assert!(!h(&[("x-mcp-content-trust", "")]).unwrap().withhold);
        for off in ["mark", "off", "no"] {
            let mut m = axum::http::HeaderMap::new();
            m.insert("x-mcp-content-trust", HeaderValue::from_static(off));
            assert!(narrowing(&m).unwrap_err().contains("never off"), "{off}");
        }
        // A request names at most 256 tools to hide, counted before any is kept.
        let names = |n: usize| (0..n).map(|i| format!("t{i}")).collect::<Vec<_>>().join(",");
        let with = |v: String| {
            let mut m = axum::http::HeaderMap::new();
            m.insert("x-mcp-disabled-tools", HeaderValue::from_str(&v).unwrap());
            narrowing(&m)
        };
        assert_eq!(with(names(256)).unwrap().disabled.len(), 256);
        assert!(with(names(257)).unwrap_err().contains("more than 256"));
    }

    /// The order `mcp_layers` sets, once, for each kind of MCP route; and docs/TRANSPORT.md,
    /// which walks through the layers, lists them in that order.
    #[tokio::test]
    async fn the_mcp_routes_stand_behind_their_layers_in_this_order() {
        let forge = fake_forge::FakeForge::start(fake_forge::Options::default()).await;
        let server = super::super::test_server(&forge.base_url()).await;
        let cfg = Arc::new(LayerConfig::new(server.clone(), "127.0.0.1:1".parse().unwrap()));
        let handler = McpHandler::new(server.clone());
        let names = |route| mcp_layers(&cfg, &handler, route).iter().map(Layer::name).collect::<Vec<_>>();
        let common =
            ["guard_host_origin", "authenticate", "narrow", "read_body_within", "track_answers", "scope"];
        assert_eq!(names(Route::Sse), common);
        let stateless = [&common[..], &["json_rpc_errors", "stateless_calls", "to_the_library"]].concat();
        assert_eq!(names(Route::Stateless), stateless);
        let words = sessions::Words { what: "", max_setting: "", how_to_close: "", how_to_open: "" };
        let owners = sessions::Owners::new(1, 1, words, server.metrics.sessions_open());
        let route = Route::Sessions {
            sessions: Arc::new(SessionLayer { server: server.clone(), owners: owners.clone() }),
            in_session: Arc::new(direct::InSession { handler: handler.clone(), owners, replica: None }),
        };
        let with_sessions = names(route);
        let tail = [
            "sessions",
            "json_rpc_errors",
            "plain_json",
            "session_calls",
            "stateless_calls",
            "to_the_library",
        ];
        assert_eq!(with_sessions, [&common[..], &tail[..]].concat());

        let transport_md = include_str!("../../docs/TRANSPORT.md");
        let section = transport_md.split("\n## Layers").nth(1).expect("TRANSPORT.md has a Layers section");
        let section = section.split("\n## ").next().unwrap_or(section);
        // The table's first column, row by row: exactly the layers, in their order.
        let rows: Vec<&str> = section
            .lines()
            .filter_map(|l| l.strip_prefix("| `")?.split_once('`').map(|(name, _)| name))
            .collect();
        assert_eq!(rows, with_sessions, "TRANSPORT.md's Layers table against mcp_layers");
    }

    #[test]
    fn origins_match_scheme_and_host() {
        let allowed = vec!["http://localhost".to_owned(), "https://app.example".to_owned()];
        assert!(origin_allowed("http://localhost:3000", &allowed));
        assert!(origin_allowed("https://app.example", &allowed));
        assert!(!origin_allowed("http://evil.example", &allowed));
        assert!(!origin_allowed("http://app.example", &allowed));
        assert!(!origin_allowed("null", &allowed));
    }
}
