//! HTTP harness: the server binary on `--transport http` (Streamable HTTP at `/mcp`) or
//! `--transport sse` (legacy HTTP+SSE at `/sse` + `/message`), and a small client for each,
//! written against the wire format rather than an SDK so that every request can carry its own
//! `Authorization` header (or none), exactly as a test needs.
//!
//! `auth` arguments are the whole header value (`"token abc"`, `"Bearer abc"`, `"abc"`), or
//! `None` for no header at all.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use serde_json::{Value, json};
use sse_stream::{Sse, SseStream};
use tokio::sync::{mpsc, oneshot};

use super::{Called, bin};

/// The protocol version the clients speak.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// The `Accept` header Streamable HTTP requires on a POST.
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";
/// How long one MCP exchange may take before the client gives up.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the server may take to print its `listening on` line (generous: the machine may
/// be busy building or benchmarking).
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A client error: the HTTP status (0 when there was none: connection failure, timeout, a
/// stream that ended early) and the body or a description.
pub type HttpError = (u16, String);

/// Until `child`, a service just started on loopback, accepts connections on `port`; one
/// that exits first or never listens fails the test, showing `log()`.
pub async fn await_listening(
    child: &mut tokio::process::Child,
    port: u16,
    what: &str,
    log: impl Fn() -> String,
) {
    let listening = format!("{what} listens on port {port}");
    super::wait_for(&listening, super::WAIT_LIMIT, async || {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited ({status}): {}", log());
        }
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok()
    })
    .await;
}

/// A reqwest client suited to talking to the local server: no proxy, no overall timeout
/// (SSE streams stay open), a generous idle pool.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(1024)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .expect("reqwest client")
}

/// A loopback port for a server a test starts with a fixed address (a replica behind a
/// balancer whose configuration names it): one nothing listens on, that no other test of this
/// run was given, and below the kernel's ephemeral range (32768 and up), so that no outgoing
/// connection can take it between this check and the server's bind — a port the kernel hands
/// out for `:0` could be, and was once, in a busy run.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    const FIRST: u16 = 20_000;
    const SPAN: u16 = 12_000;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    // Two test processes at once (two checkouts) start apart.
    let offset = (std::process::id() % u32::from(SPAN)) as u16;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = FIRST + (offset.wrapping_add(n) % SPAN);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Whether `r` is an HTTP server's readiness probe: `GET /api/v1/version` without a token,
/// which every `http`/`sse` server sends at start until the forge has answered (`/readyz`).
pub fn is_readiness_probe(r: &fake_forge::Recorded) -> bool {
    r.method == "GET" && r.raw_path == "/api/v1/version" && r.header("authorization").is_none()
}

/// What the forge received beside the readiness probes.
pub fn not_probes(forge: &fake_forge::FakeForge) -> Vec<fake_forge::Recorded> {
    forge.requests().into_iter().filter(|r| !is_readiness_probe(r)).collect()
}

/// The server serving `http` or `sse`: the binary (`spawn`), killed on drop, or the same
/// application in this process on a loopback socket of its own (`in_process`), stopped on
/// drop.
pub struct HttpServer {
    child: Option<tokio::process::Child>,
    /// The in-process server's stop: its accept loop, connections and streams end with it.
    stop: Option<tokio_util::sync::CancellationToken>,
    /// The in-process server itself (a test may move its sign-in clock).
    server: Option<std::sync::Arc<aegis_gitea_mcp::server::Server>>,
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub base: String,
    /// The announced MCP URL: `{base}/mcp` or `{base}/sse`.
    pub endpoint: String,
    /// `http` or `sse`.
    pub transport: String,
    stderr_path: PathBuf,
    /// Copies the server's stderr, line by line, into `stderr_path` until the server exits:
    /// a thread of its own, so that the server never waits on a full pipe whatever the test's
    /// runtime is doing.
    copier: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

/// Copy `from` (the server's stderr) into the file at `to` a whole line at a time, and send
/// the URL of the first `listening on` line to `listening`: the start is seen the moment
/// the line is written, with no polling.
fn copy_stderr(from: std::fs::File, to: PathBuf, listening: tokio::sync::oneshot::Sender<String>) {
    use std::io::{BufRead, Write};
    let mut file = std::fs::File::create(&to).expect("the stderr file");
    let mut listening = Some(listening);
    for line in std::io::BufReader::new(from).lines() {
        let Ok(line) = line else { break };
        let _ = file.write_all(format!("{line}\n").as_bytes());
        if let Some(at) = line.find("listening on http://") {
            let url = line[at + "listening on ".len()..].split_whitespace().next().unwrap_or("");
            if let Some(tx) = listening.take() {
                let _ = tx.send(url.to_owned());
            }
        }
    }
}

impl HttpServer {
    /// Start `serve --transport <transport> --listen 127.0.0.1:0 --url <forge_url> --flavor gitea`
    /// with a clean environment (PATH plus `env`) and wait for its `listening on` line.
    pub async fn spawn(forge_url: &str, transport: &str, env: &[(&str, &str)]) -> HttpServer {
        HttpServer::spawn_with_files(forge_url, transport, env, None).await
    }

    /// Like `spawn`, with `program` in place of the binary under test (one a release file
    /// installed).
    pub async fn spawn_program(
        program: &std::path::Path,
        forge_url: &str,
        transport: &str,
        env: &[(&str, &str)],
    ) -> HttpServer {
        HttpServer::start(program, forge_url, transport, env, None).await.ready().await
    }

    /// Like `spawn`, listening on `listen` (an address whose URL must be known before the
    /// server starts, such as `MCP_PUBLIC_URL`'s; see [`free_port`]).
    pub async fn spawn_listening(
        forge_url: &str,
        transport: &str,
        env: &[(&str, &str)],
        listen: &str,
    ) -> HttpServer {
        let mut all = env.to_vec();
        all.push(("MCP_LISTEN", listen));
        HttpServer::spawn_with_files(forge_url, transport, &all, None).await
    }

    /// Like `spawn`, with the server's open-file limit (soft and hard) set to `nofile` first,
    /// as on a host with a low `ulimit -n`.
    pub async fn spawn_with_files(
        forge_url: &str,
        transport: &str,
        env: &[(&str, &str)],
        nofile: Option<u64>,
    ) -> HttpServer {
        HttpServer::start(&bin(), forge_url, transport, env, nofile).await.ready().await
    }

    /// Like `spawn`, without waiting for the forge to answer (a test of `/readyz` itself).
    pub async fn spawn_before_ready(forge_url: &str, transport: &str, env: &[(&str, &str)]) -> HttpServer {
        HttpServer::start(&bin(), forge_url, transport, env, None).await
    }

    /// The process of `program` started, once it has printed where it listens.
    async fn start(
        program: &std::path::Path,
        forge_url: &str,
        transport: &str,
        env: &[(&str, &str)],
        nofile: Option<u64>,
    ) -> HttpServer {
        let dir = tempfile::tempdir().unwrap();
        let stderr_path = dir.path().join("stderr.log");
        let mut cmd = match nofile {
            None => tokio::process::Command::new(program),
            Some(n) => {
                let mut c = tokio::process::Command::new("sh");
                c.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\"")]).arg(program);
                c
            }
        };
        // `--flavor gitea` unless the caller chose with GITEA_FLAVOR (e.g. `auto` for a real forge).
        let flavor = env.iter().find(|(k, _)| *k == "GITEA_FLAVOR").map_or("gitea", |(_, v)| *v);
        let listen = env.iter().find(|(k, _)| *k == "MCP_LISTEN").map_or("127.0.0.1:0", |(_, v)| *v);
        cmd.args([
            "serve",
            "--transport",
            transport,
            "--listen",
            listen,
            "--url",
            forge_url,
            "--flavor",
            flavor,
        ]);
        cmd.env_clear();
        // The tests of the envelope's `data` as the forge's own JSON; the compact shape has its own.
        cmd.env("RESULT_SHAPE", "full");
        cmd.env("PATH", super::test_path());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn the server");
        let (tx, listening) = tokio::sync::oneshot::channel();
        let stderr = child.stderr.take().expect("a piped stderr").into_owned_fd().expect("its descriptor");
        let to = stderr_path.clone();
        let copier = std::thread::spawn(move || copy_stderr(std::fs::File::from(stderr), to, tx));
        let endpoint = match tokio::time::timeout(START_TIMEOUT, listening).await {
            Ok(Ok(url)) => url,
            // The copier ended without the line: the server exited.
            Ok(Err(_)) => {
                let status = child.wait().await.expect("wait for the server");
                let _ = copier.join();
                let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                panic!("the server exited ({status}) before listening; its stderr:\n{log}");
            }
            Err(_) => {
                let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                panic!(
                    "the server did not print `listening on` within {START_TIMEOUT:?}; its stderr:\n{log}"
                );
            }
        };
        let path_at = endpoint["http://".len()..].find('/').map(|i| i + "http://".len());
        let base = match path_at {
            Some(i) => endpoint[..i].to_owned(),
            None => endpoint.clone(),
        };
        HttpServer {
            child: Some(child),
            stop: None,
            server: None,
            base,
            endpoint,
            transport: transport.to_owned(),
            stderr_path,
            copier: Some(copier),
            _dir: dir,
        }
    }

    /// This server, once its readiness probe has had the forge's answer (`/readyz` 200). Most
    /// servers are ready when they print where they listen; on a busy machine the first probe
    /// may take longer than the start waits for it, and the next is asked in the background:
    /// a test that looks at what the forge received, or at the log, starts after it.
    pub async fn ready(self) -> HttpServer {
        let http = http_client();
        let url = self.url("/readyz");
        super::wait_for(&format!("the server at {} is ready", self.base), super::WAIT_LIMIT, async || {
            http.get(&url).send().await.is_ok_and(|r| r.status() == 200)
        })
        .await;
        self
    }

    /// Whether the server's process is still running.
    pub fn running(&mut self) -> bool {
        let child =
            self.child.as_mut().expect("a server of its own process (`spawn`), not an in-process one");
        child.try_wait().expect("the server's status").is_none()
    }

    /// The server's process id, while it has not been reaped.
    pub fn pid(&self) -> Option<u32> {
        self.process().id()
    }

    /// The server an in-process `HttpServer` serves.
    pub fn in_process_server(&self) -> &aegis_gitea_mcp::server::Server {
        self.server.as_deref().expect("an in-process server (`in_process`)")
    }

    fn process(&self) -> &tokio::process::Child {
        self.child.as_ref().expect("a server of its own process (`spawn`), not an in-process one")
    }

    /// The same application as `spawn` starts, built and served in this process (on the test's
    /// runtime, on a loopback socket of its own), for tests of what the server answers rather
    /// than of the process: it has no log, signal or exit of its own to look at (`stderr`,
    /// `pid` and `wait` refuse). `env` takes the settings' environment names, given to the
    /// command line as its flags (the process's own environment is left alone).
    pub async fn in_process(forge_url: &str, transport: &str, env: &[(&str, &str)]) -> HttpServer {
        HttpServer::in_process_before_ready(forge_url, transport, env).await.ready().await
    }

    /// Like `in_process`, without waiting for the forge to answer (a forge that is gone).
    pub async fn in_process_before_ready(
        forge_url: &str,
        transport: &str,
        env: &[(&str, &str)],
    ) -> HttpServer {
        let flavor = env.iter().find(|(k, _)| *k == "GITEA_FLAVOR").map_or("gitea", |(_, v)| *v);
        let listen = env.iter().find(|(k, _)| *k == "MCP_LISTEN").map_or("127.0.0.1:0", |(_, v)| *v);
        let args =
            ["serve", "--transport", transport, "--listen", listen, "--url", forge_url, "--flavor", flavor];
        let env: Vec<(String, String)> = env
            .iter()
            .filter(|(k, _)| *k != "GITEA_FLAVOR" && *k != "MCP_LISTEN")
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        HttpServer::of_settings(super::settings_of(&args, &env), transport, listen).await
    }

    /// The application of `settings` served in this process on `listen`, as `in_process`
    /// (not waiting for the forge to answer).
    pub async fn of_settings(
        settings: aegis_gitea_mcp::config::Settings,
        transport: &str,
        listen: &str,
    ) -> HttpServer {
        let (choice, limits) = (settings.transport, aegis_gitea_mcp::transport::http::conn_limits(&settings));
        let server = std::sync::Arc::new(
            aegis_gitea_mcp::server::Server::start(settings).await.expect("the server starts"),
        );
        // As `serve`: a metrics listener of its own when METRICS_LISTEN asks.
        aegis_gitea_mcp::transport::metrics::serve_own(&server).await.expect("the metrics listener");
        let listener = tokio::net::TcpListener::bind(listen).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = tokio_util::sync::CancellationToken::new();
        let app = aegis_gitea_mcp::transport::http::app(server.clone(), choice, addr, &stop).await;
        let (accept, drain) = (stop.child_token(), stop.child_token());
        tokio::spawn(aegis_gitea_mcp::transport::listener::serve(
            listener, app.router, limits, accept, drain,
        ));
        let base = format!("http://{addr}");
        let endpoint = format!("{base}{}", if transport == "sse" { "/sse" } else { "/mcp" });
        HttpServer {
            child: None,
            stop: Some(stop),
            server: Some(server),
            base,
            endpoint,
            transport: transport.to_owned(),
            stderr_path: PathBuf::new(),
            copier: None,
            _dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Stops the server as an operator does (SIGTERM), waits for it to exit and returns all it
    /// wrote to stderr: a check that a line is absent then reads everything the process ever
    /// logged, not what it had logged by some moment.
    pub async fn stop_and_log(&mut self) -> String {
        super::signal(self.pid().expect("the server is running"), "TERM");
        let status = tokio::time::timeout(super::WAIT_LIMIT, self.wait())
            .await
            .unwrap_or_else(|_| panic!("the server did not exit within {:?} of SIGTERM", super::WAIT_LIMIT));
        assert!(status.success(), "{status:?}\n{}", self.stderr());
        self.stderr()
    }

    /// Waits for the server to exit (after a signal, say) and returns its exit status, once
    /// all it wrote to stderr is in `stderr()`.
    pub async fn wait(&mut self) -> std::process::ExitStatus {
        let child =
            self.child.as_mut().expect("a server of its own process (`spawn`), not an in-process one");
        let status = child.wait().await.expect("wait for the server");
        if let Some(copier) = self.copier.take() {
            let _ = copier.join();
        }
        status
    }

    /// `{base}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// `127.0.0.1:PORT`.
    pub fn authority(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    /// What the server wrote to stderr so far, as far as it has been copied: a line written
    /// before an answer may reach this file after the answer reaches the test. Wait for a line
    /// with `log_line`; look for one's absence in `stop_and_log`'s whole log.
    pub fn stderr(&self) -> String {
        self.process();
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Waits until the server's log has at least `count` lines containing `what`, and
    /// returns the log.
    pub async fn log_lines(&self, what: &str, count: usize) -> String {
        let said = format!("the server logged {count} line(s) with {what:?}");
        super::wait_until(&said, super::WAIT_LIMIT, async || {
            let log = self.stderr();
            (log.lines().filter(|l| l.contains(what)).count() >= count).then_some(log)
        })
        .await
    }

    /// The value of one sample of `/metrics`: `name` with its labels as the text format
    /// writes them (`aegis_mcp_requests_total{path="library"}`); 0 when it is absent.
    pub async fn metric(&self, sample: &str) -> f64 {
        let text = http_client().get(self.url("/metrics")).send().await.unwrap().text().await.unwrap();
        let head = format!("{sample} ");
        text.lines().find_map(|l| l.strip_prefix(head.as_str())).map_or(0.0, |v| v.parse().unwrap())
    }

    /// A client of the right kind for this server's transport.
    pub async fn connect(&self, auth: Option<&str>) -> Result<McpClient, HttpError> {
        McpClient::connect(self, auth).await
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
        }
        if let Some(stop) = &self.stop {
            stop.cancel();
        }
    }
}

/// The events of a `text/event-stream` body as they arrive, read by the parser the server
/// uses: `(event, data)`, `event` being `message` unless named (an empty name is none);
/// events without data (priming events, keep-alives) are passed over.
pub fn events_of<B>(body: B) -> impl Stream<Item = Result<(String, String), sse_stream::Error>> + Unpin
where
    B: http_body::Body + Unpin,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    SseStream::new(body).filter_map(|read| {
        std::future::ready(match read {
            Ok(Sse { data: Some(data), event, .. }) if !data.trim().is_empty() => {
                Some(Ok((event.filter(|e| !e.is_empty()).unwrap_or_else(|| "message".to_owned()), data)))
            }
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
    })
}

/// The JSON messages of a whole reply body: one JSON value (`application/json`), or the data
/// of each event of a `text/event-stream` (which must read as one, its last event ended).
pub fn messages_of(body: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return vec![v];
    }
    let whole = http_body_util::Full::new(bytes::Bytes::copy_from_slice(body.as_bytes()));
    let events = events_of(whole).collect::<Vec<_>>().now_or_never().expect("a whole body is read at once");
    events
        .into_iter()
        .map(|read| read.unwrap_or_else(|e| panic!("not an event stream ({e}): {body}")))
        .filter_map(|(_, data)| serde_json::from_str(&data).ok())
        .collect()
}

/// The JSON-RPC messages of a `text/event-stream` or `application/json` POST reply, read
/// until the response with `id` arrives (the stream need not end).
async fn read_reply(resp: reqwest::Response, id: u64) -> Result<Value, HttpError> {
    let status = resp.status().as_u16();
    let is_sse = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let matches = |v: &Value| v.get("id").and_then(Value::as_u64) == Some(id);
    if !is_sse {
        let text = resp.text().await.map_err(|e| (status, format!("reading the reply: {e}")))?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| (status, format!("not JSON ({e}): {text}")))?;
        return match v {
            Value::Array(items) => {
                items.into_iter().find(matches).ok_or((status, format!("no response with id {id}: {text}")))
            }
            v if matches(&v) => Ok(v),
            v => Err((status, format!("a reply without id {id}: {v}"))),
        };
    }
    let mut events = events_of(reqwest::Body::from(resp));
    let mut seen = Vec::new();
    while let Some(read) = events.next().await {
        let (_, data) = read.map_err(|e| (status, format!("reading the stream: {e}")))?;
        let v: Value = serde_json::from_str(&data)
            .map_err(|e| (status, format!("an SSE event that is not JSON ({e}): {data}")))?;
        if matches(&v) {
            return Ok(v);
        }
        seen.push(v);
    }
    Err((status, format!("the stream ended without a response to id {id}; saw {seen:?}")))
}

/// The `clientInfo` of the test clients.
pub fn test_client_info() -> Value {
    json!({"name": "aegis-http-tests", "version": "0.0.0"})
}

fn initialize_params(client_info: &Value) -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": client_info
    })
}

/// A Streamable HTTP client (`/mcp`) holding one session. Each request may carry its own
/// `Authorization` header.
pub struct StreamableClient {
    http: reqwest::Client,
    url: String,
    session: Option<String>,
    ids: AtomicU64,
    /// The `initialize` response.
    pub initialize: Value,
    /// Sent with every later POST (e.g. the `X-MCP-*` narrowing headers).
    pub headers: Vec<(String, String)>,
}

impl StreamableClient {
    /// `initialize` (with `auth`) then `notifications/initialized`. `base` is the server's
    /// base URL, with or without `/mcp`.
    pub async fn connect(base: &str, auth: Option<&str>) -> Result<StreamableClient, HttpError> {
        StreamableClient::connect_with(http_client(), base, auth).await
    }

    /// Like `connect`, sharing a reqwest client (and its connection pool).
    pub async fn connect_with(
        http: reqwest::Client,
        base: &str,
        auth: Option<&str>,
    ) -> Result<StreamableClient, HttpError> {
        StreamableClient::connect_as(http, base, auth, &test_client_info()).await
    }

    /// Like `connect_with`, naming itself with `client_info` in `initialize`.
    pub async fn connect_as(
        http: reqwest::Client,
        base: &str,
        auth: Option<&str>,
        client_info: &Value,
    ) -> Result<StreamableClient, HttpError> {
        let url = if base.ends_with("/mcp") { base.to_owned() } else { format!("{base}/mcp") };
        let mut c = StreamableClient {
            http,
            url,
            session: None,
            ids: AtomicU64::new(1),
            initialize: Value::Null,
            headers: Vec::new(),
        };
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize_params(client_info)});
        let resp = c.post(&body, auth).await?;
        c.session = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let init = tokio::time::timeout(EXCHANGE_TIMEOUT, read_reply(resp, 0))
            .await
            .map_err(|_| (0, "initialize timed out".to_owned()))??;
        if init.get("result").is_none() {
            return Err((200, format!("initialize failed: {init}")));
        }
        c.initialize = init;
        let status = c.notify("notifications/initialized", None, auth).await?;
        if status != 202 {
            return Err((status, "notifications/initialized was not accepted with 202".into()));
        }
        Ok(c)
    }

    /// The session id the server assigned, if any.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// The `/mcp` URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One POST of a JSON-RPC message with this session's headers; an HTTP status other than
    /// 2xx is an error with the body.
    pub async fn post(&self, body: &Value, auth: Option<&str>) -> Result<reqwest::Response, HttpError> {
        let mut req = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, ACCEPT_BOTH)
            .body(body.to_string());
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s).header("mcp-protocol-version", PROTOCOL_VERSION);
        }
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        if let Some(a) = auth {
            req = req.header(reqwest::header::AUTHORIZATION, a);
        }
        let resp = req.send().await.map_err(|e| (0, format!("POST {}: {e}", self.url)))?;
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let text = resp.text().await.unwrap_or_default();
            return Err((status, text));
        }
        Ok(resp)
    }

    /// Send a notification; returns the HTTP status (202 expected).
    pub async fn notify(
        &self,
        method: &str,
        params: Option<Value>,
        auth: Option<&str>,
    ) -> Result<u16, HttpError> {
        let mut body = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            body["params"] = p;
        }
        let resp = self.post(&body, auth).await?;
        Ok(resp.status().as_u16())
    }

    /// A JSON-RPC request; returns the JSON-RPC response (result or error).
    pub async fn request(&self, method: &str, params: Value, auth: Option<&str>) -> Result<Value, HttpError> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let exchange = async {
            let resp = self.post(&body, auth).await?;
            read_reply(resp, id).await
        };
        tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
            .await
            .map_err(|_| (0, format!("{method} timed out")))?
    }

    /// `tools/call`; returns the JSON-RPC response.
    pub async fn call(&self, tool: &str, args: Value, auth: Option<&str>) -> Result<Value, HttpError> {
        self.request("tools/call", json!({"name": tool, "arguments": args}), auth).await
    }
}

/// The newest protocol version, which calls without `initialize` or a session.
pub const STATELESS_VERSION: &str = "2026-07-28";

static STATELESS_IDS: AtomicU64 = AtomicU64::new(1);

/// One `tools/call` POSTed to `/mcp` without a session (protocol 2026-07-28: no
/// `initialize`, the version and capabilities travel in `_meta` and headers), with `auth`.
pub async fn stateless_call(
    http: &reqwest::Client,
    base: &str,
    tool: &str,
    args: Value,
    auth: Option<&str>,
) -> Result<Value, HttpError> {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
                      "io.modelcontextprotocol/clientCapabilities": {}});
    stateless_tools_call(http, base, json!({"name": tool, "arguments": args, "_meta": meta}), auth).await
}

/// `stateless_call` with the whole `params` given (other capabilities, a retry's
/// `inputResponses` and `requestState`): the JSON-RPC response.
pub async fn stateless_tools_call(
    http: &reqwest::Client,
    base: &str,
    params: Value,
    auth: Option<&str>,
) -> Result<Value, HttpError> {
    let url = if base.ends_with("/mcp") { base.to_owned() } else { format!("{base}/mcp") };
    let id = STATELESS_IDS.fetch_add(1, Ordering::Relaxed);
    let tool = params["name"].as_str().unwrap_or_default().to_owned();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let mut req = http
        .post(&url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::ACCEPT, ACCEPT_BOTH)
        .header("mcp-protocol-version", STATELESS_VERSION)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body.to_string());
    if let Some(a) = auth {
        req = req.header(reqwest::header::AUTHORIZATION, a);
    }
    let exchange = async {
        let resp = req.send().await.map_err(|e| (0, format!("POST {url}: {e}")))?;
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            return Err((status, resp.text().await.unwrap_or_default()));
        }
        read_reply(resp, id).await
    };
    tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
        .await
        .map_err(|_| (0, "stateless tools/call timed out".into()))?
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// A legacy HTTP+SSE client: `GET /sse` streams in a background task that routes each
/// `message` event to the request with its id; requests are POSTed to the announced
/// `/message?sessionId=…`, each with its own `Authorization` header.
pub struct SseClient {
    http: reqwest::Client,
    post_url: String,
    pending: Pending,
    /// Server messages that answer no pending request (notifications, server requests).
    others: tokio::sync::Mutex<mpsc::UnboundedReceiver<Value>>,
    ids: AtomicU64,
    /// Sent with every later POST (e.g. the `X-MCP-*` narrowing headers).
    pub headers: Vec<(String, String)>,
    reader: tokio::task::JoinHandle<()>,
    /// The `initialize` response.
    pub initialize: Value,
}

impl Drop for SseClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Open `GET {base}/sse` with `auth`; the response, whatever its status.
pub async fn open_sse_stream(
    http: &reqwest::Client,
    base: &str,
    auth: Option<&str>,
) -> Result<reqwest::Response, HttpError> {
    let url = format!("{}/sse", base.trim_end_matches("/sse"));
    let mut req = http.get(&url).header(reqwest::header::ACCEPT, "text/event-stream");
    if let Some(a) = auth {
        req = req.header(reqwest::header::AUTHORIZATION, a);
    }
    req.send().await.map_err(|e| (0, format!("GET {url}: {e}")))
}

impl SseClient {
    /// Open the stream and run the handshake; panics on failure (see `try_connect`).
    pub async fn connect(base: &str, auth: Option<&str>) -> SseClient {
        SseClient::try_connect(base, auth).await.unwrap_or_else(|e| panic!("SSE connect failed: {e:?}"))
    }

    pub async fn try_connect(base: &str, auth: Option<&str>) -> Result<SseClient, HttpError> {
        SseClient::connect_with(http_client(), base, auth).await
    }

    /// `GET /sse` (with `auth`), wait for the `endpoint` event, then `initialize` and
    /// `notifications/initialized` through `/message` (both with `auth`).
    pub async fn connect_with(
        http: reqwest::Client,
        base: &str,
        auth: Option<&str>,
    ) -> Result<SseClient, HttpError> {
        SseClient::connect_as(http, base, auth, &test_client_info()).await
    }

    /// Like `connect_with`, naming itself with `client_info` in `initialize`.
    pub async fn connect_as(
        http: reqwest::Client,
        base: &str,
        auth: Option<&str>,
        client_info: &Value,
    ) -> Result<SseClient, HttpError> {
        let base = base.trim_end_matches("/sse").to_owned();
        let resp = open_sse_stream(&http, &base, auth).await?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err((status, resp.text().await.unwrap_or_default()));
        }
        let pending: Pending = Arc::default();
        let (others_tx, others_rx) = mpsc::unbounded_channel();
        let (endpoint_tx, endpoint_rx) = oneshot::channel::<String>();
        let reader = tokio::spawn(read_stream(resp, pending.clone(), others_tx, endpoint_tx));
        let endpoint = tokio::time::timeout(EXCHANGE_TIMEOUT, endpoint_rx)
            .await
            .map_err(|_| (200, "no endpoint event within 10 s".to_owned()))?
            .map_err(|_| (200, "the stream ended before the endpoint event".to_owned()))?;
        let post_url = if endpoint.starts_with("http") { endpoint } else { format!("{base}{endpoint}") };
        let mut c = SseClient {
            http,
            post_url,
            pending,
            others: tokio::sync::Mutex::new(others_rx),
            ids: AtomicU64::new(1),
            headers: Vec::new(),
            reader,
            initialize: Value::Null,
        };
        let init = c.request("initialize", initialize_params(client_info), auth).await?;
        if init.get("result").is_none() {
            return Err((200, format!("initialize failed: {init}")));
        }
        c.initialize = init;
        let status = c
            .post_raw(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(), auth)
            .await?;
        if status.0 != 202 {
            return Err(status);
        }
        Ok(c)
    }

    /// The announced `/message?sessionId=…` URL.
    pub fn post_url(&self) -> &str {
        &self.post_url
    }

    /// POST a body to the message endpoint; the HTTP status and body (no status check).
    pub async fn post_raw(&self, body: String, auth: Option<&str>) -> Result<HttpError, HttpError> {
        let mut req = self
            .http
            .post(&self.post_url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        if let Some(a) = auth {
            req = req.header(reqwest::header::AUTHORIZATION, a);
        }
        let resp = req.send().await.map_err(|e| (0, format!("POST {}: {e}", self.post_url)))?;
        let status = resp.status().as_u16();
        Ok((status, resp.text().await.unwrap_or_default()))
    }

    /// A JSON-RPC request: POST (must be 202), then the response from the stream.
    pub async fn request(&self, method: &str, params: Value, auth: Option<&str>) -> Result<Value, HttpError> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let posted = self.post_raw(body.to_string(), auth).await;
        match posted {
            Ok((202, _)) => {}
            Ok(other) => {
                self.pending.lock().unwrap().remove(&id);
                return Err(other);
            }
            Err(e) => {
                self.pending.lock().unwrap().remove(&id);
                return Err(e);
            }
        }
        match tokio::time::timeout(EXCHANGE_TIMEOUT, rx).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err((0, format!("the SSE stream ended before the response to {method}"))),
            Err(_) => {
                self.pending.lock().unwrap().remove(&id);
                Err((0, format!("{method}: no response on the SSE stream within {EXCHANGE_TIMEOUT:?}")))
            }
        }
    }

    /// `tools/call`; returns the JSON-RPC response or the HTTP refusal of the POST.
    pub async fn try_call(&self, tool: &str, args: Value, auth: Option<&str>) -> Result<Value, HttpError> {
        self.request("tools/call", json!({"name": tool, "arguments": args}), auth).await
    }

    /// `tools/call`; panics when the POST is refused or no response arrives.
    pub async fn call(&self, tool: &str, args: Value, auth: Option<&str>) -> Value {
        self.try_call(tool, args, auth).await.unwrap_or_else(|e| panic!("{tool} over SSE: {e:?}"))
    }

    /// The next server message that answered no request, if one arrives within `wait`.
    pub async fn next_other(&self, wait: Duration) -> Option<Value> {
        let mut rx = self.others.lock().await;
        tokio::time::timeout(wait, rx.recv()).await.ok().flatten()
    }
}

async fn read_stream(
    resp: reqwest::Response,
    pending: Pending,
    others: mpsc::UnboundedSender<Value>,
    endpoint: oneshot::Sender<String>,
) {
    let mut endpoint = Some(endpoint);
    let mut events = events_of(reqwest::Body::from(resp));
    while let Some(read) = events.next().await {
        let (event, data) = match read {
            Ok(read) => read,
            // The body broke off (the server went away): as its end.
            Err(sse_stream::Error::Body(_)) => break,
            Err(e) => {
                let _ = others.send(json!({"unreadable": e.to_string()}));
                break;
            }
        };
        match event.as_str() {
            "endpoint" => {
                if let Some(tx) = endpoint.take() {
                    let _ = tx.send(data.trim().to_owned());
                }
            }
            "message" => {
                let Ok(v) = serde_json::from_str::<Value>(&data) else {
                    let _ = others.send(json!({"unparsable": data}));
                    continue;
                };
                let is_response = v.get("result").is_some() || v.get("error").is_some();
                let id = v.get("id").and_then(Value::as_u64);
                let waiter = match (is_response, id) {
                    (true, Some(id)) => pending.lock().unwrap().remove(&id),
                    _ => None,
                };
                match waiter {
                    Some(tx) => {
                        let _ = tx.send(v);
                    }
                    None => {
                        let _ = others.send(v);
                    }
                }
            }
            _ => {}
        }
    }
    // The stream is gone: every waiter learns it (its sender is dropped).
    pending.lock().unwrap().clear();
}

/// Either client, chosen by the server's transport.
pub enum McpClient {
    Streamable(StreamableClient),
    Sse(SseClient),
}

impl McpClient {
    pub async fn connect(server: &HttpServer, auth: Option<&str>) -> Result<McpClient, HttpError> {
        McpClient::connect_with(http_client(), server, auth).await
    }

    pub async fn connect_with(
        http: reqwest::Client,
        server: &HttpServer,
        auth: Option<&str>,
    ) -> Result<McpClient, HttpError> {
        McpClient::connect_to(http, &server.base, &server.transport, auth).await
    }

    /// A client of the server's transport that names itself with `client_info`.
    pub async fn connect_as(
        server: &HttpServer,
        auth: Option<&str>,
        client_info: &Value,
    ) -> Result<McpClient, HttpError> {
        match server.transport.as_str() {
            "sse" => Ok(McpClient::Sse(
                SseClient::connect_as(http_client(), &server.base, auth, client_info).await?,
            )),
            _ => Ok(McpClient::Streamable(
                StreamableClient::connect_as(http_client(), &server.base, auth, client_info).await?,
            )),
        }
    }

    /// A client speaking `transport` (`http` or `sse`) to the server or balancer at `base`.
    pub async fn connect_to(
        http: reqwest::Client,
        base: &str,
        transport: &str,
        auth: Option<&str>,
    ) -> Result<McpClient, HttpError> {
        match transport {
            "sse" => Ok(McpClient::Sse(SseClient::connect_with(http, base, auth).await?)),
            _ => Ok(McpClient::Streamable(StreamableClient::connect_with(http, base, auth).await?)),
        }
    }

    /// Send `headers` with every later request.
    pub fn set_headers(&mut self, headers: &[(&str, &str)]) {
        let h = headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        match self {
            McpClient::Streamable(c) => c.headers = h,
            McpClient::Sse(c) => c.headers = h,
        }
    }

    /// Any JSON-RPC request; the response, or the HTTP refusal.
    pub async fn request(&self, method: &str, params: Value, auth: Option<&str>) -> Result<Value, HttpError> {
        match self {
            McpClient::Streamable(c) => c.request(method, params, auth).await,
            McpClient::Sse(c) => c.request(method, params, auth).await,
        }
    }

    /// `tools/call`; the JSON-RPC response, or the HTTP refusal.
    pub async fn call(&self, tool: &str, args: Value, auth: Option<&str>) -> Result<Value, HttpError> {
        match self {
            McpClient::Streamable(c) => c.call(tool, args, auth).await,
            McpClient::Sse(c) => c.try_call(tool, args, auth).await,
        }
    }

    /// `tools/call` that must produce a tool result; returns it.
    pub async fn call_ok(&self, tool: &str, args: Value, auth: Option<&str>) -> Called {
        let resp = self.call(tool, args, auth).await.unwrap_or_else(|e| panic!("{tool}: HTTP refusal {e:?}"));
        tool_result(&resp)
    }
}

/// The tool result of a `tools/call` JSON-RPC response: `result.content[0].text` parsed as
/// JSON, and `result.isError`. Panics on a JSON-RPC error or another shape.
pub fn tool_result(resp: &Value) -> Called {
    let result = resp.get("result").unwrap_or_else(|| panic!("a JSON-RPC error, not a tool result: {resp}"));
    let content = result["content"].as_array().unwrap_or_else(|| panic!("no content array: {resp}"));
    assert_eq!(content.len(), 1, "exactly one content item: {resp}");
    assert_eq!(content[0]["type"], "text", "a text item: {resp}");
    let text = content[0]["text"].as_str().unwrap().to_owned();
    let json =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("result text is not JSON ({e}): {text}"));
    Called { is_error: result["isError"] == Value::Bool(true), json, text }
}
