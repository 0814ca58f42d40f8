//! The HTTP server: accept loop, connection handling and the request pipeline.
//!
//! Hyper is used directly (not a framework router) because the fake must see the path exactly as
//! sent and must own its connections: shutting down aborts every connection task, including
//! ones stuck in a hanging or endless scripted response.
//!
//! Pipeline of one request: read it whole (of the OAuth2 routes' bodies only the first
//! [`oauth::BODY_LIMIT`] bytes are kept); route it; record it; then answer with, in order, a
//! matching script, 413 for a bounded body over its limit, the OAuth2 provider's routes, the
//! attachment download, Forgejo's own version route, 404/405 from the router, authentication
//! errors (an issued OAuth2 access token authenticates like a configured token), sudo, the
//! OAuth2 applications of the caller, the model, or the spec-driven fallback.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use crate::auth::{Caller, caller, sudo_target};
use crate::model::{Ctx, Model, serve_attachment};
use crate::oauth::{self, ApiCtx, Provider};
use crate::paging::RequestUri;
use crate::recorded::Recorded;
use crate::reply::{Body, Reply};
use crate::router::RouteMatch;
use crate::script::{Script, StreamCounters, play, take_match};
use crate::spec::{Api, api};
use crate::{Flavor, Options};

/// State shared by the handle and every connection.
pub(crate) struct Shared {
    pub opts: Options,
    pub root_url: String,
    pub version: String,
    pub api: &'static Api,
    pub recorded: Mutex<Vec<Recorded>>,
    pub scripts: Mutex<Vec<Script>>,
    pub model: Mutex<Model>,
    pub streams: Arc<StreamCounters>,
    /// Whether requests are recorded (off for long load runs).
    pub recording: AtomicBool,
    /// The OAuth2 provider: applications, grants, codes.
    pub oauth: Provider,
}

impl Shared {
    pub(crate) fn new(opts: Options) -> Shared {
        let mut root_url = opts.root_url.clone();
        if !root_url.ends_with('/') {
            root_url.push('/');
        }
        let version = opts.version.clone().unwrap_or_else(|| opts.flavor.default_version().to_string());
        let logins =
            opts.users.iter().map(|(_, login)| login).chain(opts.passwords.iter().map(|(login, _)| login));
        let model = Model::new(logins.cloned());
        let oauth = Provider::new(&opts, &root_url);
        Shared {
            api: api(opts.flavor),
            opts,
            root_url,
            version,
            recorded: Mutex::new(Vec::new()),
            scripts: Mutex::new(Vec::new()),
            model: Mutex::new(model),
            streams: Arc::default(),
            recording: AtomicBool::new(true),
            oauth,
        }
    }
}

/// The accept-loop task; aborting it drops every connection task with it.
pub(crate) struct ServerTask(JoinHandle<()>);

impl ServerTask {
    pub(crate) fn stop(&self) {
        self.0.abort();
    }
}

impl Drop for ServerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Binds `addr` and serves in a background task.
pub(crate) async fn spawn(
    shared: Arc<Shared>,
    addr: SocketAddr,
) -> std::io::Result<(SocketAddr, ServerTask)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let task = tokio::spawn(accept_loop(listener, shared));
    Ok((local, ServerTask(task)))
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    // Dropped (and so aborted) with this task.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of file descriptors or similar: back off instead of spinning.
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                connections.spawn(async move {
                    let service = service_fn(move |req| handle(shared.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// The "error" a connection's service returns to make hyper close the connection without
/// answering ([`crate::ScriptBody::Close`]).
#[derive(Debug)]
struct CloseConnection;

impl std::fmt::Display for CloseConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("scripted close")
    }
}

impl std::error::Error for CloseConnection {}

async fn handle(
    shared: Arc<Shared>,
    req: http::Request<Incoming>,
) -> Result<http::Response<Body>, CloseConnection> {
    let (parts, body) = req.into_parts();
    let raw_path = parts.uri.path();
    let limit = raw_path.starts_with(oauth::PREFIX).then_some(oauth::BODY_LIMIT);
    let Ok((body, too_large)) = read_body(body, limit).await else {
        return Ok(Reply::empty(400).into_response());
    };
    if let Some(what) = raw_path.strip_prefix(CONTROL_PREFIX) {
        return Ok(control(&shared, parts.method.as_str(), what).into_response());
    }
    let routed = match raw_path.strip_prefix("/api/v1") {
        Some(rest) => shared.api.router.route(parts.method.as_str(), rest),
        None => RouteMatch::NotFound,
    };
    let rec = record(&shared, &parts, body, &routed);

    let script = take_match(&mut shared.scripts.lock().unwrap(), &rec.method, &rec.raw_path);
    if let Some(response) = script {
        return play(response, shared.streams.clone()).await.ok_or(CloseConnection);
    }
    if too_large {
        // Go's `http.MaxBytesReader` error text.
        let reply = Reply::bytes(413, "text/plain; charset=utf-8", "http: request body too large\n");
        return Ok(reply.into_response());
    }
    let site = oauth::Site {
        provider: &shared.oauth,
        model: &shared.model,
        root_url: &shared.root_url,
        users: &shared.opts.users,
    };
    if let Some(reply) = oauth::web(&site, &rec) {
        return Ok(reply.into_response());
    }
    Ok(answer(&shared, &rec, routed).into_response())
}

/// Reads the whole body, or with a `limit` keeps at most that many bytes: the first `limit`
/// bytes and `true` when there were more. The rest is read and dropped, so memory stays bounded
/// while the client still gets to read the answer (closing on unread data would reset it).
async fn read_body(mut body: Incoming, limit: Option<usize>) -> Result<(Bytes, bool), hyper::Error> {
    let Some(limit) = limit else {
        return Ok((body.collect().await?.to_bytes(), false));
    };
    let mut buf = Vec::new();
    let mut too_large = false;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            let room = limit - buf.len();
            too_large |= data.len() > room;
            buf.extend_from_slice(&data[..data.len().min(room)]);
        }
    }
    Ok((Bytes::from(buf), too_large))
}

/// Builds the [`Recorded`] of a request and logs it (when recording is on).
fn record(shared: &Shared, parts: &http::request::Parts, body: Bytes, routed: &RouteMatch) -> Recorded {
    let (operation_id, path_params) = match routed {
        RouteMatch::Found { op, params } => (Some(shared.api.ops[*op].id.clone()), params.clone()),
        _ => (None, Vec::new()),
    };
    let headers = parts
        .headers
        .iter()
        .map(|(n, v)| {
            let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
            (n.as_str().to_string(), value)
        })
        .collect();
    let rec = Recorded {
        method: parts.method.as_str().to_string(),
        raw_path: parts.uri.path().to_string(),
        raw_query: parts.uri.query().map(str::to_string),
        headers,
        body: body.to_vec(),
        operation_id,
        path_params,
    };
    if shared.recording.load(Ordering::SeqCst) {
        shared.recorded.lock().unwrap().push(rec.clone());
    }
    rec
}

/// Everything but scripts: attachment downloads, router errors, authentication, then the model
/// or the fallback.
fn answer(shared: &Shared, rec: &Recorded, routed: RouteMatch) -> Reply {
    let root = shared.root_url.as_str();
    let method = rec.method.as_str();
    if let Some(uuid) = rec.raw_path.strip_prefix("/attachments/")
        && method == "GET"
    {
        return serve_attachment(&shared.model.lock().unwrap(), root, uuid);
    }
    let who = match caller(rec.header("authorization"), &shared.opts.users, &shared.opts.passwords) {
        Caller::Invalid => {
            shared.oauth.api_login(rec.header("authorization")).map_or(Caller::Invalid, Caller::User)
        }
        known => known,
    };
    if rec.raw_path == FORGEJO_VERSION && method == "GET" && shared.opts.flavor == Flavor::Forgejo {
        return match who {
            Caller::Invalid | Caller::WrongPassword(_) => refused(shared, &who),
            _ => Reply::json(200, &json!({"version": shared.version})),
        };
    }
    let (op, params) = match routed {
        RouteMatch::Found { op, params } => (&shared.api.ops[op], params),
        RouteMatch::MethodNotAllowed => return Reply::empty(405),
        RouteMatch::NotFound => {
            let url = format!("{root}api/swagger");
            return Reply::json(404, &json!({"errors": null, "message": "not found", "url": url}));
        }
    };
    if matches!(who, Caller::Invalid | Caller::WrongPassword(_)) {
        return refused(shared, &who);
    }
    let query = rec.query_pairs();
    let login = match sudo(shared, who.login(), &query, rec.header("sudo")) {
        Ok(login) => login,
        Err(reply) => return reply,
    };
    if login.is_none() && method != "GET" && method != "HEAD" {
        return Reply::error(401, root, "token is required");
    }
    let apps = ApiCtx {
        root_url: root,
        flavor: shared.opts.flavor,
        op_id: &op.id,
        caller: login.as_deref(),
        id: params.iter().find(|(k, _)| k == "id").map_or("", |(_, v)| v.as_str()),
        query: rec.query_pairs(),
        uri: RequestUri { raw_path: &rec.raw_path, raw_query: rec.raw_query.as_deref() },
    };
    if let Some(reply) = shared.oauth.api_reply(&apps) {
        return reply;
    }
    let cx = Ctx {
        root_url: root,
        flavor: shared.opts.flavor,
        version: &shared.version,
        caller: login.as_deref(),
        basic: matches!(who, Caller::Basic(_)),
        admins: &shared.opts.admins,
        op_id: &op.id,
        params: &params,
        query,
        uri: RequestUri { raw_path: &rec.raw_path, raw_query: rec.raw_query.as_deref() },
        content_type: rec.header("content-type"),
        body: &rec.body,
    };
    let reply = shared.model.lock().unwrap().handle(&cx);
    reply.unwrap_or_else(|| op.fallback.reply(op.paginated))
}

/// Gitea's 401 for credentials that match no user: an unknown token, or a login and password
/// that do not sign in (the message names the user the login belongs to, if any).
fn refused(shared: &Shared, who: &Caller) -> Reply {
    let message = match who {
        Caller::WrongPassword(login) => {
            let model = shared.model.lock().unwrap();
            let uid = model.known_user_id(login);
            let name = model.login_of(login).unwrap_or_else(|| login.clone());
            format!("user does not exist [uid: {uid}, name: {name}]")
        }
        _ => "user does not exist [uid: 0, name: ]".to_string(),
    };
    Reply::error(401, &shared.root_url, &message)
}

/// Who the request acts as: the signed-in login, or the user a site admin names with `sudo`
/// (query parameter first, then the `Sudo` header), as Gitea's sudo middleware decides.
fn sudo(
    shared: &Shared,
    login: Option<&str>,
    query: &[(String, String)],
    header: Option<&str>,
) -> Result<Option<String>, Reply> {
    let Some(target) = sudo_target(query, header) else {
        return Ok(login.map(str::to_owned));
    };
    match login {
        Some(l) if shared.opts.admins.iter().any(|a| a.eq_ignore_ascii_case(l)) => {
            match shared.model.lock().unwrap().login_of(target) {
                Some(user) => Ok(Some(user)),
                None => Err(Reply::not_found(&shared.root_url)),
            }
        }
        _ => Err(Reply::json(403, &json!({"message": "Only administrators allowed to sudo."}))),
    }
}

/// Forgejo's own API serves the version outside `/api/v1` too (Gitea has no such route).
pub(crate) const FORGEJO_VERSION: &str = "/api/forgejo/v1/version";

/// Paths under this prefix control the fake itself and are never recorded.
pub(crate) const CONTROL_PREFIX: &str = "/_fake/";

/// `GET /_fake/requests` lists the recorded requests as JSON (for out-of-process tests);
/// `DELETE /_fake/requests` clears them.
fn control(shared: &Shared, method: &str, what: &str) -> Reply {
    match (method, what) {
        ("GET", "requests") => {
            let recorded = shared.recorded.lock().unwrap();
            let list: Vec<serde_json::Value> = recorded.iter().map(Recorded::to_json).collect();
            Reply::json(200, &serde_json::Value::Array(list))
        }
        ("DELETE", "requests") => {
            shared.recorded.lock().unwrap().clear();
            Reply::empty(204)
        }
        _ => Reply::empty(404),
    }
}
