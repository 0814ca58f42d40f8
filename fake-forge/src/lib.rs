//! A recording fake Gitea/Forgejo `/api/v1` server for tests and benchmarks.
//!
//! The fake exists to test an API client against something that routes, authenticates and
//! paginates like a real forge, while recording every request byte for byte. The parts:
//!
//! * the router: routes the *raw* (still percent-encoded) path against the operations of the
//!   flavor's Swagger spec, with chi's rules (`{param}` is one segment, wildcard parameters
//!   capture the rest of the path, static beats param beats catch-all). Tests use it to prove how
//!   a client encodes paths.
//! * a small in-memory model (repositories, contents, branches, tags, releases, issues and
//!   attachments) answering with Gitea's status codes and JSON shapes, and a spec-driven fallback
//!   for every other operation.
//! * authentication like the forges: a token, or HTTP Basic with a login and password (which
//!   alone may create and list access tokens); an unknown token or a wrong password is refused
//!   with 401 on every route — `/api/v1/version` too, which both answer without a token — and a
//!   site admin may act as another user with `Sudo` (header) or `sudo` (query), anyone else is
//!   refused with 403. A Forgejo fake also serves its version at `/api/forgejo/v1/version`, as
//!   Forgejo does.
//! * the forge's OAuth2 provider (`/login/oauth/authorize`, `/login/oauth/access_token`,
//!   `/login/oauth/userinfo`) for the [`OAuthApp`]s of [`Options::oauth_apps`], with Gitea's
//!   checks, error answers and JWT-shaped tokens; the browser is always signed in as
//!   [`Options::oauth_user`] and consents at once, so a test drives a sign-in without one.
//!   Issued access tokens authenticate on `/api/v1` like the configured tokens (their scope is
//!   recorded, not enforced).
//! * [`Script`]s: canned responses (slow, chunked, endless, lying about their length, hanging,
//!   closing the connection) that take precedence over everything else, `/login/oauth/*`
//!   included; a [`Gate`] holds one until the test lets it go.
//! * [`wait`]: how the tests of this workspace wait, for a condition and bounded.
//!
//! Out-of-process users (the binary) can read the recording as JSON at `GET /_fake/requests`
//! and clear it with `DELETE /_fake/requests`; those control requests are not recorded.
//!
//! ```no_run
//! # async fn demo() {
//! use fake_forge::{FakeForge, Options};
//! let forge = FakeForge::start(Options::default()).await;
//! let api = format!("{}/api/v1", forge.base_url());
//! // ... point the client under test at `api`, then inspect what it sent:
//! for r in forge.requests() {
//!     println!("{} {} -> {:?}", r.method, r.raw_path, r.operation_id);
//! }
//! # }
//! ```

// `json!` of a full Repository object nests deeper than the default limit of 128.
#![recursion_limit = "256"]

mod auth;
mod catch_all;
mod fallback;
mod model;
mod multipart;
mod oauth;
mod paging;
mod recorded;
mod reply;
mod router;
mod script;
mod server;
mod spec;
mod util;
pub mod wait;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use oauth::{OAuthAccess, OAuthApp};
pub use recorded::Recorded;
pub use script::{Gate, Script, ScriptBody, ScriptedResponse};

/// Which server the fake imitates; selects the Swagger spec and the catch-all routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// Gitea 1.27.0.
    Gitea,
    /// Forgejo 16.0.1.
    Forgejo,
}

impl Flavor {
    /// The lower-case name, as given to `--flavor` on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Gitea => "gitea",
            Flavor::Forgejo => "forgejo",
        }
    }

    /// The path parameter of operation `operation_id` (`method path` in this flavor's spec) that
    /// the forge captures with a catch-all, so that a literal `/` stays inside it; `None` when
    /// every path parameter of the route is one segment. This is the fake's own table of the
    /// forges' routes, the one its router uses; tests compare a client's encoding against it.
    pub fn catch_all_param(self, method: &str, path: &str, operation_id: &str) -> Option<&'static str> {
        catch_all::param(self, method, path, operation_id)
    }

    /// The version string a real server of this flavor answers on `GET /api/v1/version`.
    pub fn default_version(self) -> &'static str {
        match self {
            Flavor::Gitea => "1.27.0",
            Flavor::Forgejo => "16.0.1+gitea-1.22.0",
        }
    }
}

/// Who may see a user's profile (Gitea's `visibility`): everyone, signed-in users, or only
/// the user and site admins. A public repository of a user others may not see is hidden from
/// them too, as on the forges: it is a *limited* repository to the anonymous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Visibility {
    /// Anyone, signed in or not (the default).
    #[default]
    Public,
    /// Signed-in users only.
    Limited,
    /// The user and site admins only.
    Private,
}

impl Visibility {
    /// The forge's word for it, as `visibility` in a user's JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Public => "public",
            Visibility::Limited => "limited",
            Visibility::Private => "private",
        }
    }

    /// `public`, `limited` or `private` (any letter case).
    pub fn parse(word: &str) -> Option<Visibility> {
        match word.to_ascii_lowercase().as_str() {
            "public" => Some(Visibility::Public),
            "limited" => Some(Visibility::Limited),
            "private" => Some(Visibility::Private),
            _ => None,
        }
    }
}

/// How to start a [`FakeForge`].
#[derive(Debug, Clone)]
pub struct Options {
    /// The server flavor to imitate.
    pub flavor: Flavor,
    /// String answered by `GET /api/v1/version`; `None` means [`Flavor::default_version`].
    pub version: Option<String>,
    /// `ROOT_URL` used to build `Link` headers, `html_url`, `browser_download_url` and the like.
    /// Deliberately not the address the fake listens on, like a real forge behind a proxy.
    /// A missing trailing `/` is added.
    pub root_url: String,
    /// Token value -> login. `Authorization: token X` or `Bearer X` (scheme case-insensitive)
    /// with a known `X` acts as that user.
    pub users: Vec<(String, String)>,
    /// Logins that are site admins (`is_admin: true`, may see private repositories, may act
    /// as another user with a `Sudo` header or `sudo` query parameter).
    pub admins: Vec<String>,
    /// The OAuth2 applications registered on the forge (client id, secret, redirect URIs).
    pub oauth_apps: Vec<OAuthApp>,
    /// The login signed in to the forge's web UI: `/login/oauth/authorize` consents for it at
    /// once. `None` means the first login of [`Options::users`].
    pub oauth_user: Option<String>,
    /// The lifetime of issued OAuth2 access tokens, answered as `expires_in` (whole seconds;
    /// the JWT `exp` claim has one-second precision, so a zero lifetime issues tokens that are
    /// already expired).
    pub oauth_access_ttl: Duration,
    /// Login -> password for HTTP Basic (`Authorization: Basic base64(login:password)`); a
    /// wrong password is refused with 401, as on the forges. Creating and listing access
    /// tokens take nothing else.
    pub passwords: Vec<(String, String)>,
}

/// The password of the default user `alice` (HTTP Basic).
pub const ALICE_PASSWORD: &str = "alice-pw-0123456789";

/// The default `ROOT_URL`: a host nothing listens on, so a client that follows it blindly fails.
pub const DEFAULT_ROOT_URL: &str = "https://forge.example.invalid/";

impl Default for Options {
    /// Gitea, with one user: token `tok-alice-0123456789` -> `alice`, whose password is
    /// [`ALICE_PASSWORD`]; no OAuth2 application, access tokens valid for an hour (Gitea's
    /// `ACCESS_TOKEN_EXPIRATION_TIME`).
    fn default() -> Self {
        Options {
            flavor: Flavor::Gitea,
            version: None,
            root_url: DEFAULT_ROOT_URL.to_string(),
            users: vec![("tok-alice-0123456789".to_string(), "alice".to_string())],
            admins: Vec::new(),
            oauth_apps: Vec::new(),
            oauth_user: None,
            oauth_access_ttl: DEFAULT_OAUTH_ACCESS_TTL,
            passwords: vec![("alice".to_string(), ALICE_PASSWORD.to_string())],
        }
    }
}

/// Gitea's default `[oauth2] ACCESS_TOKEN_EXPIRATION_TIME`: one hour.
pub const DEFAULT_OAUTH_ACCESS_TTL: Duration = Duration::from_secs(3600);

/// A running fake forge. Cloning shares the same server; when the last clone is dropped, or on
/// [`FakeForge::shutdown`], the server stops and all its open connections are closed.
#[derive(Clone)]
pub struct FakeForge {
    shared: Arc<server::Shared>,
    addr: SocketAddr,
    task: Arc<server::ServerTask>,
}

impl FakeForge {
    /// Starts a fake on `127.0.0.1:0` (a free port). Panics if no port can be bound.
    pub async fn start(opts: Options) -> FakeForge {
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        match Self::start_on(opts, addr).await {
            Ok(forge) => forge,
            Err(e) => panic!("fake-forge: cannot bind {addr}: {e}"),
        }
    }

    /// Starts a fake on the given address (the binary's `--port`).
    pub async fn start_on(opts: Options, addr: SocketAddr) -> std::io::Result<FakeForge> {
        let shared = Arc::new(server::Shared::new(opts));
        let (addr, task) = server::spawn(shared.clone(), addr).await?;
        Ok(FakeForge { shared, addr, task: Arc::new(task) })
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash and without `/api/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The socket address the fake listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The `ROOT_URL` in use, always ending with `/`.
    pub fn root_url(&self) -> String {
        self.shared.root_url.clone()
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.recorded.lock().unwrap().clone()
    }

    /// Turns recording on (the default) or off; off keeps memory flat during load runs.
    pub fn set_recording(&self, on: bool) {
        self.shared.recording.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        self.shared.recorded.lock().unwrap().clear();
    }

    /// Queues a scripted response. Scripts are consulted before anything else; the newest
    /// matching one answers.
    pub fn script(&self, s: Script) {
        self.shared.scripts.lock().unwrap().push(s);
    }

    /// Answers every call of a recording as the forge answered it: `doc["calls"]` is a list of
    /// `{request: {method, path}, status, pagination: {total_count}, data}` (what the
    /// end-to-end tests write with `AEGIS_E2E_RECORD`), `path` relative to `/api/v1`; `data`
    /// a string is sent as text, anything else as JSON, with `X-Total-Count` when known.
    pub fn replay(&self, doc: &serde_json::Value) {
        for c in doc["calls"].as_array().into_iter().flatten() {
            let (json, body) = match &c["data"] {
                serde_json::Value::String(text) => (false, text.clone().into_bytes()),
                other => (true, serde_json::to_vec(other).expect("data serializes")),
            };
            let media = if json { "application/json;charset=utf-8" } else { "text/plain;charset=utf-8" };
            let mut headers = vec![("content-type".to_owned(), media.to_owned())];
            if let Some(total) = c["pagination"]["total_count"].as_u64() {
                headers.push(("x-total-count".to_owned(), total.to_string()));
            }
            self.script(Script {
                method: c["request"]["method"].as_str().map(str::to_owned),
                path: format!("/api/v1{}", c["request"]["path"].as_str().unwrap_or("/")),
                times: usize::MAX,
                response: ScriptedResponse {
                    headers,
                    ..ScriptedResponse::status(c["status"].as_u64().unwrap_or(200) as u16)
                        .with_body(ScriptBody::Bytes(body))
                },
            });
        }
    }

    /// Drops every queued script.
    pub fn clear_scripts(&self) {
        self.shared.scripts.lock().unwrap().clear();
    }

    /// Creates a repository `owner/name` with a branch `main` holding one empty commit.
    /// Does nothing if it exists.
    pub fn seed_repo(&self, owner: &str, name: &str) {
        self.shared.model.lock().unwrap().seed_repo(owner, name);
    }

    /// Creates a private repository `owner/name` (as [`FakeForge::seed_repo`]), or makes an
    /// existing one private. Only its owner, its collaborators and site admins see it; anyone
    /// else is answered 404 on every route under `/repos/{owner}/{name}`, and it is left out
    /// of their listings, as on the forges.
    pub fn seed_private_repo(&self, owner: &str, name: &str) {
        self.shared.model.lock().unwrap().seed_private_repo(owner, name);
    }

    /// Sets who may see `login`'s profile (registering the login if needed): it shows in
    /// `GET /users/{login}`, `GET /user` and as `owner.visibility` of its repositories, and a
    /// caller who may not see the user gets 404 for the profile and for the user's public
    /// repositories alike.
    pub fn set_visibility(&self, login: &str, visibility: Visibility) {
        self.shared.model.lock().unwrap().set_visibility(login, visibility);
    }

    /// Puts the file `path` holding `content` on the default branch of `owner/repo` (created
    /// first if needed), as of its head commit; an existing file of that path is replaced.
    pub fn seed_file(&self, owner: &str, repo: &str, path: &str, content: &[u8]) {
        self.shared.model.lock().unwrap().seed_file(owner, repo, path, content);
    }

    /// Creates `n` open issues titled `issue 1` .. `issue n` (numbered after any existing ones),
    /// posted by the repository owner. Creates the repository first if needed.
    pub fn seed_issues(&self, owner: &str, repo: &str, n: usize) {
        self.shared.model.lock().unwrap().seed_issues(owner, repo, n);
    }

    /// Makes `login` a collaborator of `owner/repo` with `permission` (`read`, `write` or
    /// `admin`), as `PUT /repos/{owner}/{repo}/collaborators/{login}` would: it sees the
    /// repository even when it is private, and its own listing shows it. Creates the
    /// repository first if needed.
    pub fn seed_collaborator(&self, owner: &str, repo: &str, login: &str, permission: &str) {
        self.shared.model.lock().unwrap().seed_collaborator(owner, repo, login, permission);
    }

    /// What an OAuth2 access token issued by this fake stands for (user, application, scope),
    /// or `None` if it is not one, or no longer valid (expired, or its grant is gone). Gitea's
    /// access tokens carry only their grant; the scope is the grant's, as on the forge.
    pub fn oauth_access(&self, access_token: &str) -> Option<OAuthAccess> {
        self.shared.oauth.access(access_token)
    }

    /// How many scripted responses are still in progress: streaming bodies
    /// ([`ScriptBody::Chunked`], [`ScriptBody::Endless`], [`ScriptBody::LyingLength`]) being
    /// sent and [`ScriptBody::Hang`] requests still waiting. Each one ends when its client goes
    /// away, so tests can check that a client really gave up or disconnected.
    pub fn open_streams(&self) -> usize {
        self.shared.streams.open.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Total bytes handed to the connection by streaming scripted bodies so far. Lets tests
    /// check that an endless body is not produced faster than the client reads it.
    pub fn streamed_bytes(&self) -> u64 {
        self.shared.streams.bytes.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Stops accepting connections and closes every open one (also done when the last clone
    /// is dropped). Returns at once; the socket is released shortly after.
    pub fn shutdown(&self) {
        self.task.stop();
    }
}

impl std::fmt::Debug for FakeForge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeForge")
            .field("addr", &self.addr)
            .field("flavor", &self.shared.opts.flavor)
            .finish_non_exhaustive()
    }
}
