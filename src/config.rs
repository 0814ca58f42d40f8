//! Flags and environment → resolved `Settings`. The only place that reads the environment.
//!
//! `Cli` is the raw form clap fills in; `Settings` is what the rest of the program uses,
//! built once by `Settings::resolve` after every check (URL shape, token file, numbers).
//! Secrets are `SecretString` from the moment they are read: `Debug` prints `[REDACTED]`
//! and clap never shows their environment values in `--help` (`hide_env_values`).

use std::collections::BTreeSet;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use aegis_core::guard::{ContentHygiene, DetectionMode};
use clap::{Args, Parser, Subcommand, ValueEnum};
use secrecy::{ExposeSecret, SecretString};
use url::Url;

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "aegis-gitea-mcp",
    version,
    about = "MCP server for the whole REST API of a Gitea or Forgejo instance",
    long_about = "MCP server for the whole REST API of a Gitea or Forgejo instance.\n\n\
        Every operation of the forge's OpenAPI spec is a tool named by its operationId, with a JSON \
        Schema checked before anything is sent. Results come back in one envelope that marks forge \
        data as untrusted.\n\nFlags beat environment variables. Secrets are never printed."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP (the default when no command is given).
    Serve,
    /// Print the tools that `serve` would offer with the same settings.
    ///
    /// Works offline, without a URL or token, when --flavor is gitea or forgejo.
    Tools {
        /// Print the full tool definitions as JSON (the `tools` array of tools/list).
        #[arg(long)]
        json: bool,
        /// Print the toolsets instead: name, number of operations, what they hold.
        #[arg(long, conflicts_with = "json")]
        list_toolsets: bool,
    },
    /// Run one tool once and print its result: the same JSON text an MCP client gets.
    ///
    /// Exits 1 when the result is an error result, 2 when the tool does not exist.
    Call {
        /// The tool name (an operationId such as repoGet, or gitea_api_request).
        tool: String,
        /// The arguments as a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
    },
    /// Ask a running http or sse server (at MCP_LISTEN, on this machine) whether it is ready
    /// (`GET /readyz`): exits 0 when it is, 1 otherwise. For container health checks.
    Ready,
    /// Check the URL, detect the forge and its version, resolve the identity, and report
    /// problems in plain words. Exits 1 when something needs fixing.
    Doctor,
    /// Work with the audit trail (AUDIT_LOG).
    Audit {
        #[command(subcommand)]
        action: AuditCommand,
    },
}

/// What `audit` does.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check that audit log files are complete and unedited, with the audit key: every line's
    /// MAC, each file's chain from its first line, and, given several files oldest first,
    /// that each continues the one before. Exits 1 at a break, naming the line and why, 2
    /// without a usable key.
    ///
    /// Lines cut from the end of the newest file leave no trace in it: compare its last seq
    /// and mac with the head the server logged ("audit chain head").
    Verify {
        /// The key file the server writes with (its AUDIT_KEY_FILE; also read from that
        /// variable, or from --audit-key-file).
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// The files, oldest first (e.g. audit.jsonl.1 audit.jsonl).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Print the args_hmac an audit line holds for these arguments (a JSON object), to match
    /// a call you know of; needs the key like `verify`.
    ArgsHmac {
        /// The key file the server writes with (its AUDIT_KEY_FILE; also read from that
        /// variable, or from --audit-key-file).
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// The arguments as a JSON object, or for a resource read {"uri": "…"}.
        args: String,
    },
}

/// Which forge the spec is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlavorChoice {
    /// Ask GET /api/v1/version at start-up.
    Auto,
    Gitea,
    Forgejo,
}

/// Which MCP transport `serve` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportChoice {
    /// JSON-RPC over standard input and output, for one person.
    Stdio,
    /// Streamable HTTP at /mcp.
    Http,
    /// Legacy HTTP+SSE at /sse and /message.
    Sse,
}

/// What the limits do when the shared store cannot be reached (`MCP_STATE_FAIL`); single-use
/// checks refuse whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StateFail {
    /// Each replica judges by its own limits meanwhile (as without a store).
    Open,
    /// Calls are refused as rate_limited meanwhile.
    Closed,
}

/// Schemes never accepted for a redirect URI, whatever the operator lists: a browser runs,
/// shows, downloads or forwards such an address itself (and http, https keep their own rules).
pub(crate) const NEVER_REDIRECT_SCHEMES: &[&str] = &[
    "http",
    "https",
    "javascript",
    "data",
    "file",
    "vbscript",
    "about",
    "blob",
    "filesystem",
    "view-source",
    "jar",
    "mailto",
    "ftp",
    "ws",
    "wss",
    "chrome",
    "chrome-extension",
    "moz-extension",
    "resource",
    "intent",
    "tel",
    "sms",
    "urn",
];

/// Settings shared by every command.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Base URL of the Gitea or Forgejo instance (also read: GITEA_HOST, FORGEJO_URL).
    #[arg(long, env = "GITEA_URL", global = true)]
    pub(crate) url: Option<String>,
    /// The server's own access token (also read: GITEA_ACCESS_TOKEN, FORGEJO_ACCESS_TOKEN).
    /// Prefer the environment or --token-file: a flag is visible to other local users.
    #[arg(long, env = "GITEA_TOKEN", hide_env_values = true, global = true)]
    pub(crate) token: Option<SecretString>,
    /// Read the global token from this file (surrounding white space is ignored).
    #[arg(long, env = "GITEA_TOKEN_FILE", global = true)]
    pub(crate) token_file: Option<PathBuf>,
    /// Which forge the tools are generated for.
    #[arg(long, env = "GITEA_FLAVOR", value_enum, default_value = "auto", global = true)]
    pub(crate) flavor: FlavorChoice,
    /// A Swagger 2.0 file to generate the tools from instead of the embedded spec.
    #[arg(long, env = "GITEA_SPEC", global = true)]
    pub(crate) spec: Option<PathBuf>,
    /// MCP transport for `serve`.
    #[arg(long, env = "MCP_TRANSPORT", value_enum, default_value = "stdio", global = true)]
    pub(crate) transport: TransportChoice,
    /// Address for the http and sse transports.
    #[arg(long, env = "MCP_LISTEN", default_value = "127.0.0.1:8080", global = true)]
    pub listen: String,
    /// Streamable HTTP without sessions: every request stands alone, so any replica behind a
    /// load balancer can serve it (`initialize` is answered without an Mcp-Session-Id).
    #[arg(long, env = "MCP_STATELESS", global = true)]
    pub(crate) stateless: bool,
    /// This replica's name (a DNS label: lowercase letters, digits, '-'), put in front of
    /// every session id it hands out (`<replica-id>.<random>`) so that a load balancer can
    /// send a session's requests back to it. Unset: session ids carry no name.
    #[arg(long, env = "MCP_REPLICA_ID", global = true)]
    pub(crate) replica_id: Option<String>,
    /// Seconds to go on accepting requests after SIGTERM, with /readyz answering 503, before
    /// draining: time for a load balancer to stop sending new requests here.
    #[arg(long, env = "MCP_SHUTDOWN_DELAY", default_value_t = 0.0, global = true)]
    pub(crate) shutdown_delay: f64,
    /// Shared secret HTTP clients present as `Authorization: Bearer …` to act as the
    /// server's global identity.
    #[arg(long, env = "MCP_BEARER_TOKEN", hide_env_values = true, global = true)]
    pub(crate) mcp_bearer_token: Option<SecretString>,
    /// Largest binary body returned as base64, and largest base64 upload, in bytes.
    #[arg(long, env = "MAX_BINARY_BYTES", default_value_t = 1_048_576, global = true)]
    pub(crate) max_binary_bytes: u64,
    /// Largest binary content (a raw file, an attachment) a resource read serves, in bytes:
    /// a tool result links content over MAX_BINARY_BYTES up to this size to the resource.
    #[arg(long, env = "MAX_RESOURCE_BYTES", default_value_t = 32 * 1_048_576, global = true)]
    pub(crate) max_resource_bytes: u64,
    /// Largest binary content (a raw file, an attachment) a result holds inline as base64;
    /// larger comes as a `resource_link` to the `gitea://` resource that reads it.
    #[arg(long, env = "MAX_INLINE_BINARY_BYTES", default_value_t = 8_192, global = true)]
    pub(crate) max_inline_binary_bytes: u64,
    /// Largest JSON or text body read from the forge, in bytes; larger answers fail with
    /// payload_too_large instead of filling memory.
    #[arg(long, env = "MAX_RESPONSE_BYTES", default_value_t = 16 * 1_048_576, global = true)]
    pub(crate) max_response_bytes: u64,
    /// What pattern masking does with credential-looking strings in results.
    #[arg(long, env = "SECRET_DETECTION_MODE", value_enum, default_value = "mask", global = true)]
    pub(crate) secret_detection_mode: DetectionMode,
    /// Most list items in one result; longer lists are cut and the cut is reported.
    #[arg(long, env = "MAX_TOOL_RESPONSE_ITEMS", default_value_t = 100, global = true)]
    pub(crate) max_tool_response_items: usize,
    /// Most characters in one result's text; longer results are cut and the cut is reported.
    #[arg(long, env = "MAX_TOOL_RESPONSE_CHARS", default_value_t = 40_000, global = true)]
    pub(crate) max_tool_response_chars: usize,
    /// How a call that cannot be undone (deleting a repository, a branch, a release, …) is
    /// confirmed: `ask` the person through the client (a client that cannot be asked sends
    /// `confirm` with the exact target), always by the `argument`, or `off`.
    #[arg(long, env = "CONFIRM_IRREVERSIBLE", value_enum, default_value = "ask", global = true)]
    pub(crate) confirm_irreversible: aegis_core::policy::confirm::Mode,
    /// Seconds a person has to answer a confirmation before the call fails with
    /// `not_confirmed` (over HTTP within MCP_REQUEST_TIMEOUT, which counts the wait too).
    #[arg(long, env = "CONFIRM_TIMEOUT", default_value_t = 60.0, global = true)]
    pub(crate) confirm_timeout: f64,
    /// How results are rendered unless a call asks (`shape`): compact or the forge's full JSON.
    #[arg(long, env = "RESULT_SHAPE", value_enum, default_value = "compact", global = true)]
    pub(crate) result_shape: aegis_core::shape::Shape,
    /// Which clients get typed results (`structuredContent`, and an `outputSchema` on every
    /// tool): those of this protocol version (YYYY-MM-DD) or later, or `never`.
    #[arg(long, env = "STRUCTURED_CONTENT_FROM", default_value = "2025-06-18", global = true)]
    pub(crate) structured_content_from: String,
    /// More literal values to redact from every result and log line (comma-separated).
    #[arg(long, env = "EXTRA_SECRETS", hide_env_values = true, global = true)]
    pub(crate) extra_secrets: Option<SecretString>,
    /// A file of more literal values to redact, one per line.
    #[arg(long, env = "EXTRA_SECRETS_FILE", global = true)]
    pub(crate) extra_secrets_file: Option<PathBuf>,
    /// Client id of the OAuth2 application registered on the forge (OAuth mode).
    #[arg(long, env = "GITEA_OAUTH_CLIENT_ID", global = true)]
    pub(crate) oauth_client_id: Option<String>,
    /// Client secret of that OAuth2 application; redacted from every result.
    #[arg(long, env = "GITEA_OAUTH_CLIENT_SECRET", hide_env_values = true, global = true)]
    pub(crate) oauth_client_secret: Option<SecretString>,
    /// The URL MCP clients reach this server at (scheme and host, no path), e.g.
    /// https://mcp.example.com; with the OAuth client id and secret it turns on sign-in with
    /// the forge. It may differ from --listen behind a reverse proxy.
    #[arg(long, env = "MCP_PUBLIC_URL", global = true)]
    pub(crate) public_url: Option<String>,
    /// A file holding the key (64 hex characters) that seals the tokens this server issues;
    /// replicas that share it accept each other's tokens. Create one with
    /// `openssl rand -hex 32`.
    #[arg(long, env = "MCP_OAUTH_KEY_FILE", global = true)]
    pub(crate) oauth_key_file: Option<PathBuf>,
    /// Comma-separated app schemes a client may register as redirect URIs besides https,
    /// http on loopback and schemes in reverse-domain form (com.example.app), e.g. `cursor`
    /// for Cursor's `cursor://…` callback.
    #[arg(long, env = "MCP_OAUTH_REDIRECT_SCHEMES", global = true)]
    pub(crate) oauth_redirect_schemes: Option<String>,
    /// Offer and allow only operations that read (GET); the raw tool accepts only GET.
    #[arg(long, env = "READ_ONLY", global = true)]
    pub(crate) read_only: bool,
    /// Let gitea_api_request send routes that no operation of the spec has (a route the spec
    /// lacks); by default they are refused, since no policy can judge them.
    #[arg(long, env = "ALLOW_UNKNOWN_ROUTES", global = true)]
    pub(crate) allow_unknown_routes: bool,
    /// Comma-separated `owner/repo`, `owner/*` or `*`: the repositories calls may touch (unset:
    /// every one). Matched case-insensitively; listings across repositories are filtered.
    #[arg(long, env = "ALLOWED_REPOS", global = true)]
    pub(crate) allowed_repos: Option<String>,
    /// The same for calls that write (any method but GET); narrows ALLOWED_REPOS, never widens it.
    #[arg(long, env = "WRITE_ALLOWED_REPOS", global = true)]
    pub(crate) write_allowed_repos: Option<String>,
    /// Comma-separated tool names: when set, only these are offered and callable, besides
    /// the three discovery tools, which then reach only these (DISABLED_TOOLS still removes).
    #[arg(long, env = "ENABLED_TOOLS", value_delimiter = ',', global = true)]
    pub(crate) enabled_tools: Vec<String>,
    /// Comma-separated tool names that are neither offered nor callable.
    #[arg(long, env = "DISABLED_TOOLS", value_delimiter = ',', global = true)]
    pub(crate) disabled_tools: Vec<String>,
    /// Comma-separated toolsets whose operations tools/list shows: `core` (the everyday
    /// ones), area names (`issues`, `pulls`, `actions`, … see `tools --list-toolsets`), `all`,
    /// or `none` (only the built-in tools).
    /// Every other operation stays callable through gitea_call_operation.
    #[arg(long, env = "TOOLSETS", default_value = "core", global = true)]
    pub(crate) toolsets: String,
    /// Seconds to wait for a TCP/TLS connection to the forge.
    #[arg(long, env = "GITEA_CONNECT_TIMEOUT", default_value_t = 10.0, global = true)]
    pub(crate) connect_timeout: f64,
    /// Seconds one forge request may take in total, body included.
    #[arg(long, env = "GITEA_TIMEOUT", default_value_t = 60.0, global = true)]
    pub(crate) timeout: f64,
    /// Host header values accepted over HTTP (comma-separated `host` or `host:port`); by
    /// default the loopback names when listening on loopback, else any.
    #[arg(long, env = "MCP_ALLOWED_HOSTS", value_delimiter = ',', global = true)]
    pub(crate) allowed_hosts: Vec<String>,
    /// Origin header values accepted over HTTP (comma-separated `scheme://host[:port]`); by
    /// default the loopback origins when listening on loopback, else any.
    #[arg(long, env = "MCP_ALLOWED_ORIGINS", value_delimiter = ',', global = true)]
    pub(crate) allowed_origins: Vec<String>,
    /// Largest HTTP request body, in bytes.
    #[arg(long, env = "MCP_MAX_BODY_BYTES", default_value_t = 4 * 1_048_576, global = true)]
    pub(crate) max_body_bytes: usize,
    /// Seconds one MCP request (a tool call) may take over HTTP before it fails with timeout.
    #[arg(long, env = "MCP_REQUEST_TIMEOUT", default_value_t = 120.0, global = true)]
    pub(crate) request_timeout: f64,
    /// Seconds a client may take to send a request's headers, from their first byte.
    #[arg(long, env = "MCP_HEADER_TIMEOUT", default_value_t = 10.0, global = true)]
    pub(crate) header_timeout: f64,
    /// Seconds a client may take to send a request's body.
    #[arg(long, env = "MCP_BODY_TIMEOUT", default_value_t = 30.0, global = true)]
    pub(crate) body_timeout: f64,
    /// Seconds a connection may stay open between requests.
    #[arg(long, env = "MCP_IDLE_TIMEOUT", default_value_t = 60.0, global = true)]
    pub(crate) idle_timeout: f64,
    /// Most open HTTP connections (fewer when the open-file limit is lower).
    #[arg(long, env = "MCP_MAX_CONNECTIONS", default_value_t = 1024, global = true)]
    pub(crate) max_connections: usize,
    /// Most open HTTP connections from one address (raise it behind a reverse proxy, where
    /// every connection comes from the proxy).
    #[arg(long, env = "MCP_MAX_CONNECTIONS_PER_PEER", default_value_t = 256, global = true)]
    pub(crate) max_connections_per_peer: usize,
    /// Most open Streamable HTTP sessions.
    #[arg(long, env = "MCP_MAX_SESSIONS", default_value_t = 1000, global = true)]
    pub(crate) max_sessions: usize,
    /// Most open legacy SSE streams.
    #[arg(long, env = "MCP_MAX_SSE_STREAMS", default_value_t = 1000, global = true)]
    pub(crate) max_sse_streams: usize,
    /// Seconds a client may leave answers unread before its connection is closed (a legacy SSE
    /// stream with answers waiting, or any connection whose writes are blocked).
    #[arg(long, env = "MCP_STREAM_STALL_TIMEOUT", default_value_t = 30.0, global = true)]
    pub(crate) stream_stall_timeout: f64,
    /// Most open sessions (or SSE streams) one identity may hold.
    #[arg(long, env = "MCP_MAX_SESSIONS_PER_IDENTITY", default_value_t = 100, global = true)]
    pub(crate) max_sessions_per_identity: usize,
    /// Log filter (tracing syntax, e.g. `info`, `aegis_gitea_mcp=debug`). Logs go to stderr.
    #[arg(long, env = "LOG_LEVEL", default_value = "info", global = true)]
    pub log_level: String,
    /// Login of the server's own identity with HTTP Basic, together with GITEA_PASSWORD (or
    /// --password-file) instead of a token: the forges create and list access tokens only
    /// for a login and password.
    #[arg(long, env = "GITEA_USERNAME", global = true)]
    pub(crate) username: Option<String>,
    /// The password of GITEA_USERNAME. Prefer the environment or --password-file: a flag is
    /// visible to other local users.
    #[arg(long, env = "GITEA_PASSWORD", hide_env_values = true, global = true)]
    pub(crate) password: Option<SecretString>,
    /// Read the password of GITEA_USERNAME from this file (surrounding white space is ignored).
    #[arg(long, env = "GITEA_PASSWORD_FILE", global = true)]
    pub(crate) password_file: Option<PathBuf>,
    /// Comma-separated logins that calls may act as with their `sudo` argument (the forge's
    /// Sudo header; the caller must be a site administrator), or `*` for any. Unset: no tool
    /// takes `sudo`.
    #[arg(long, env = "SUDO_ALLOWED_USERS", global = true)]
    pub(crate) sudo_allowed_users: Option<String>,
    /// Forge text a reader would not see — invisible and bidirectional-control characters,
    /// HTML comments: `mark` shows them in place, `strip` removes them, `off` leaves them.
    #[arg(long, env = "CONTENT_HYGIENE", value_enum, default_value = "mark", global = true)]
    pub(crate) content_hygiene: ContentHygiene,
    /// Append one JSON line per tool call and resource read to this file, each authenticated
    /// with the key of --audit-key-file and chained to the one before (see `audit verify`).
    /// Unset: no audit trail.
    #[arg(long, env = "AUDIT_LOG", global = true)]
    pub(crate) audit_log: Option<PathBuf>,
    /// A file of 64 hex characters: the key of the audit trail's MACs and of args_hmac
    /// (`openssl rand -hex 32`), readable only by the server and whoever verifies. Needed
    /// with AUDIT_LOG; `audit verify` reads it too.
    #[arg(long, env = "AUDIT_KEY_FILE", global = true)]
    pub audit_key_file: Option<PathBuf>,
    /// When the audit log cannot be written, run calls anyway with a warning instead of
    /// failing them with audit_failed.
    #[arg(long, env = "AUDIT_FAIL_OPEN", global = true)]
    pub(crate) audit_fail_open: bool,
    /// Where Prometheus metrics are served at /metrics: unset, on the MCP address (http and
    /// sse only); an IP address and port such as 127.0.0.1:9464, only there, on a listener of
    /// its own (with every transport, stdio too); `off`, nowhere.
    #[arg(long, env = "METRICS_LISTEN", global = true)]
    pub(crate) metrics_listen: Option<String>,
    /// A token a scrape of /metrics must present as `Authorization: Bearer <token>`; unset,
    /// /metrics needs none (it holds counts only).
    #[arg(long, env = "METRICS_BEARER_TOKEN", hide_env_values = true, global = true)]
    pub(crate) metrics_bearer_token: Option<SecretString>,
    /// Tool calls and resource reads one identity may make per minute (at most this many at
    /// once, then one every 60/N s); above it calls fail with rate_limited. 0: no limit.
    #[arg(long, env = "RATE_LIMIT_PER_MINUTE", default_value_t = 0, global = true)]
    pub(crate) rate_limit_per_minute: u32,
    /// Calls one identity may have running at once; above it calls fail with rate_limited.
    /// 0: no limit.
    #[arg(long, env = "RATE_LIMIT_CONCURRENT", default_value_t = 0, global = true)]
    pub(crate) rate_limit_concurrent: u32,
    /// Requests to the forge running at once, for all identities together; a request that
    /// finds no slot within 200 ms fails with rate_limited. 0: no limit.
    #[arg(long, env = "FORGE_MAX_CONCURRENT", default_value_t = 0, global = true)]
    pub(crate) forge_max_concurrent: u32,
    /// Tokens this server has not seen confirmed that one client address may present per
    /// minute over HTTP (each costs a login lookup at the forge); above it requests get 429.
    /// Raise it behind a reverse proxy, where every client has the proxy's address. 0: no limit.
    #[arg(long, env = "MCP_NEW_TOKENS_PER_MINUTE", default_value_t = 60, global = true)]
    pub(crate) new_tokens_per_minute: u32,
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

/// The shared store's settings (`MCP_STATE_*`), apart so that they are read as one.
#[derive(Args, Debug, Clone)]
pub(crate) struct StateArgs {
    /// A Redis (or Valkey) the replicas share, redis://host:port[/db] or rediss://…: codes
    /// and refresh tokens are used once across them, and the limits hold for them together.
    /// No password in the URL (use --state-password-file). Unset: each replica on its own.
    #[arg(id = "state_url", long = "state-url", env = "MCP_STATE_URL", global = true)]
    pub(crate) url: Option<String>,
    /// A file holding the shared store's password.
    #[arg(
        id = "state_password_file",
        long = "state-password-file",
        env = "MCP_STATE_PASSWORD_FILE",
        global = true
    )]
    pub(crate) password_file: Option<PathBuf>,
    /// A PEM file of the CA certificates a rediss:// store's certificate is checked against
    /// (default: the system's).
    #[arg(id = "state_ca_file", long = "state-ca-file", env = "MCP_STATE_CA_FILE", global = true)]
    pub(crate) ca_file: Option<PathBuf>,
    /// A file of 64 hex characters, the same on every replica (`openssl rand -hex 32`): every
    /// key the shared store sees is a keyed hash made with it. Needed with MCP_STATE_URL.
    #[arg(id = "state_key_file", long = "state-key-file", env = "MCP_STATE_KEY_FILE", global = true)]
    pub(crate) key_file: Option<PathBuf>,
    /// What the limits do while the shared store cannot be reached: `open`, each replica
    /// applies them on its own; `closed`, calls are refused. Codes and refresh tokens are
    /// refused either way.
    #[arg(
        id = "state_fail",
        long = "state-fail",
        env = "MCP_STATE_FAIL",
        value_enum,
        default_value = "open",
        global = true
    )]
    pub(crate) fail: StateFail,
    /// The prefix of every key in the shared store (1 to 32 of a-z, 0-9, '-'), so that
    /// deployments may share one store.
    #[arg(
        id = "state_namespace",
        long = "state-namespace",
        env = "MCP_STATE_NAMESPACE",
        default_value = "aegis",
        global = true
    )]
    pub(crate) namespace: String,
}

/// A replica's name as session ids carry it: one DNS label, so that a proxy can route on it
/// and, where it becomes part of a host name, reach nothing outside one domain.
fn replica_id(id: String) -> Result<String, ConfigError> {
    let label = id.len() <= 63
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !id.starts_with('-')
        && !id.ends_with('-');
    if label {
        Ok(id)
    } else {
        Err(ConfigError(format!(
            "MCP_REPLICA_ID (--replica-id) {id:?}: use at most 63 lowercase letters, digits and '-', not starting or ending with '-' (a DNS label, such as a pod name)"
        )))
    }
}

/// Resolved settings: checked, typed, secrets wrapped.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Base URL of the forge with a trailing `/`, without `/api/v1`; `None` when none was
    /// given, which only `tools` with an explicit flavor accepts (see `forge_url`).
    pub(crate) url: Option<Url>,
    pub(crate) token: Option<SecretString>,
    pub flavor: FlavorChoice,
    pub(crate) spec: Option<PathBuf>,
    pub transport: TransportChoice,
    pub(crate) listen: String,
    pub(crate) stateless: bool,
    pub(crate) replica_id: Option<String>,
    pub(crate) shutdown_delay: Duration,
    pub(crate) mcp_bearer_token: Option<SecretString>,
    pub max_binary_bytes: u64,
    pub(crate) max_resource_bytes: u64,
    pub(crate) max_inline_binary_bytes: u64,
    pub(crate) max_response_bytes: u64,
    pub(crate) disabled_tools: BTreeSet<String>,
    pub(crate) read_only: bool,
    /// Whether the raw tool may send routes that no operation of the spec has.
    pub(crate) allow_unknown_routes: bool,
    /// `ALLOWED_REPOS` (`None`: every repository).
    pub(crate) allowed_repos: Option<aegis_core::policy::repos::RepoList>,
    /// `WRITE_ALLOWED_REPOS`.
    pub(crate) write_allowed_repos: Option<aegis_core::policy::repos::RepoList>,
    /// Empty: every tool; otherwise only these.
    pub(crate) enabled_tools: BTreeSet<String>,
    /// Which operations `tools/list` shows.
    pub(crate) toolsets: aegis_core::catalog::toolsets::Selection,
    pub(crate) secret_detection: DetectionMode,
    pub max_tool_response_items: usize,
    pub max_tool_response_chars: usize,
    pub(crate) result_shape: aegis_core::shape::Shape,
    pub(crate) confirm_irreversible: aegis_core::policy::confirm::Mode,
    pub(crate) confirm_timeout: Duration,
    /// `STRUCTURED_CONTENT_FROM`: the oldest protocol version given typed results (`None`: never).
    pub structured_content_from: Option<String>,
    /// `EXTRA_SECRETS` and the lines of `EXTRA_SECRETS_FILE`.
    pub(crate) extra_secrets: Vec<SecretString>,
    pub(crate) oauth_client_secret: Option<SecretString>,
    /// Sign-in with the forge, when the client id, secret, public URL and key are all set.
    pub(crate) oauth: Option<OAuthSettings>,
    pub(crate) connect_timeout: Duration,
    pub(crate) timeout: Duration,
    pub(crate) allowed_hosts: Vec<String>,
    pub(crate) allowed_origins: Vec<String>,
    pub max_body_bytes: usize,
    pub(crate) request_timeout: Duration,
    pub(crate) header_timeout: Duration,
    pub(crate) body_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_connections: usize,
    pub(crate) max_connections_per_peer: usize,
    pub(crate) max_sessions: usize,
    pub(crate) max_sse_streams: usize,
    pub(crate) max_sessions_per_identity: usize,
    pub(crate) stream_stall_timeout: Duration,
    /// The global identity's login and password for HTTP Basic: both or neither, and never
    /// with `token`.
    pub(crate) username: Option<String>,
    pub(crate) password: Option<SecretString>,
    /// Who calls may act as with `sudo`; `None`: no tool takes the argument.
    pub(crate) sudo_allowed_users: Option<aegis_core::args::sudo::Allowed>,
    pub(crate) content_hygiene: ContentHygiene,
    /// The audit trail's file; `None`: none.
    pub(crate) audit_log: Option<PathBuf>,
    /// The key of the audit trail (`AUDIT_KEY_FILE`); always given with `audit_log`.
    pub(crate) audit_key: Option<std::sync::Arc<secrecy::SecretBox<[u8; 32]>>>,
    /// Run calls unrecorded (with a warning) when the audit log cannot be written.
    pub(crate) audit_fail_open: bool,
    /// Calls per identity per minute; `None`: no limit.
    pub(crate) rate_limit_per_minute: Option<NonZeroU32>,
    /// Calls of one identity running at once; `None`: no limit.
    pub(crate) rate_limit_concurrent: Option<NonZeroU32>,
    /// Requests to the forge running at once, overall; `None`: no limit.
    pub(crate) forge_max_concurrent: Option<NonZeroU32>,
    /// Tokens not yet confirmed one address may present per minute; `None`: no limit.
    pub(crate) new_tokens_per_minute: Option<NonZeroU32>,
    /// Where `/metrics` is served.
    pub(crate) metrics_listen: MetricsListen,
    /// The token a scrape must present (`METRICS_BEARER_TOKEN`).
    pub(crate) metrics_bearer_token: Option<SecretString>,
    /// The store the replicas share (`MCP_STATE_*`); `None`: none.
    pub(crate) state: Option<StateSettings>,
}

/// The shared store's settings, checked.
#[derive(Debug, Clone)]
pub(crate) struct StateSettings {
    /// `redis://` or `rediss://`, a host, perhaps a user name and a database, no password.
    pub(crate) url: Url,
    pub(crate) password: Option<SecretString>,
    /// PEM roots for `rediss://` (`None`: the system's).
    pub(crate) ca: Option<Vec<u8>>,
    /// The key of every hash the store sees.
    pub(crate) key: std::sync::Arc<secrecy::SecretBox<[u8; 32]>>,
    pub(crate) fail: StateFail,
    pub(crate) namespace: String,
}

/// `METRICS_LISTEN`: where `/metrics` is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricsListen {
    /// On the MCP listener, beside `/mcp` (the HTTP transports; stdio has no listener).
    Main,
    /// Only on a listener of its own at this address, so that it need not be exposed with
    /// the MCP routes.
    Own(std::net::SocketAddr),
    /// Nowhere.
    Off,
}

impl MetricsListen {
    /// Unset or empty: `Main`; `off`: `Off`; else an IP address and port.
    pub(crate) fn parse(text: Option<&str>) -> Result<MetricsListen, ConfigError> {
        let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok(MetricsListen::Main);
        };
        if text.eq_ignore_ascii_case("off") {
            return Ok(MetricsListen::Off);
        }
        text.parse().map(MetricsListen::Own).map_err(|_| {
            ConfigError(format!(
                "METRICS_LISTEN must be an IP address and port such as 127.0.0.1:9464, or off (not {text:?})"
            ))
        })
    }
}

/// What sign-in with the forge needs: the OAuth2 application registered on the forge, where
/// clients reach this server, and the key that seals the tokens it issues.
#[derive(Clone)]
pub(crate) struct OAuthSettings {
    pub(crate) client_id: String,
    pub(crate) client_secret: SecretString,
    /// Scheme, host and port, without a path or trailing `/`.
    pub(crate) public_url: String,
    /// The sealing key (32 bytes, read from 64 hex characters).
    pub(crate) key: std::sync::Arc<secrecy::SecretBox<[u8; 32]>>,
    /// App schemes accepted in redirect URIs beyond the standard ones (lower-case).
    pub(crate) redirect_schemes: Vec<String>,
}

impl std::fmt::Debug for OAuthSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthSettings")
            .field("client_id", &self.client_id)
            .field("public_url", &self.public_url)
            .finish_non_exhaustive()
    }
}

/// A setting that cannot be used, with the words to fix it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Where the alternative environment names are read from; a function so tests can inject.
pub(crate) type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// What the pipeline's stages are built from.
impl Settings {
    /// The configured secrets: global token, MCP bearer token, OAuth client secret, extra
    /// secrets, the global password with the HTTP Basic value made of it (base64 of
    /// `login:password`, which gives the password away to anyone who decodes it), the sealing
    /// key and the audit key.
    pub fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> =
            [&self.token, &self.mcp_bearer_token, &self.oauth_client_secret, &self.metrics_bearer_token]
                .into_iter()
                .flatten()
                .map(|s| s.expose_secret().to_owned())
                .collect();
        out.extend(self.extra_secrets.iter().map(|s| s.expose_secret().to_owned()));
        if let Some(password) = self.state.as_ref().and_then(|s| s.password.as_ref()) {
            out.push(password.expose_secret().to_owned());
        }
        let state_key = self.state.as_ref().map(|s| &s.key);
        for key in
            [self.oauth.as_ref().map(|o| &o.key), self.audit_key.as_ref(), state_key].into_iter().flatten()
        {
            // A key as it is written in its file.
            let hex: String = key.expose_secret().iter().map(|b| format!("{b:02x}")).collect();
            out.push(hex.to_ascii_uppercase());
            out.push(hex);
        }
        if let Some(password) = &self.password {
            out.push(password.expose_secret().to_owned());
            if let Some(username) = &self.username {
                out.push(aegis_core::identity::basic_blob(username, password).expose_secret().to_owned());
            }
        }
        out
    }

    /// The server-wide guard: the configured secrets, the masking mode, the bounds and the
    /// hygiene.
    pub(crate) fn guard(&self) -> aegis_core::guard::Guard {
        aegis_core::guard::Guard::new(
            self.secrets(),
            self.secret_detection,
            aegis_core::guard::Bounds {
                max_items: self.max_tool_response_items,
                max_chars: self.max_tool_response_chars,
            },
        )
        .with_hygiene(self.content_hygiene)
    }

    /// What is listed and allowed, from `READ_ONLY`, the tool lists, the toolsets and the
    /// repository allowlists (the forge's addresses are added once they are looked up).
    pub fn policy(&self) -> aegis_core::policy::Policy {
        aegis_core::policy::Policy {
            read_only: self.read_only,
            unknown_routes: self.allow_unknown_routes,
            enabled: self.enabled_tools.clone(),
            disabled: self.disabled_tools.clone(),
            toolsets: self.toolsets.clone(),
            repos: self.allowed_repos.clone().map(std::sync::Arc::new),
            write_repos: self.write_allowed_repos.clone().map(std::sync::Arc::new),
            forge: aegis_core::policy::repos::ForgeHost::new(self.url.clone(), Vec::new()),
            confirm: self.confirm_irreversible,
        }
    }
}

impl Settings {
    /// Resolve the raw arguments, reading the alternative environment names through `env`.
    pub fn resolve(args: CommonArgs, env: EnvLookup<'_>) -> Result<Settings, ConfigError> {
        let url = args
            .url
            .filter(|u| !u.trim().is_empty())
            .or_else(|| non_empty(env("GITEA_HOST")))
            .or_else(|| non_empty(env("FORGEJO_URL")))
            .map(|text| parse_base_url(&text))
            .transpose()?;

        let token = match (args.token, &args.token_file) {
            (Some(t), _) if !t.expose_secret().trim().is_empty() => {
                Some(SecretString::from(t.expose_secret().trim().to_owned()))
            }
            (_, Some(path)) => Some(read_token_file(path)?),
            _ => non_empty(env("GITEA_ACCESS_TOKEN"))
                .or_else(|| non_empty(env("FORGEJO_ACCESS_TOKEN")))
                .map(|t| SecretString::from(t.trim().to_owned())),
        };

        let seconds = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 && v <= 86_400.0 {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(ConfigError(format!("{name} must be a number of seconds between 0 and 86400")))
            }
        };
        if args.max_binary_bytes == 0 {
            return Err(ConfigError("MAX_BINARY_BYTES must be at least 1".into()));
        }
        if args.max_resource_bytes < args.max_binary_bytes || args.max_resource_bytes > 256 << 20 {
            return Err(ConfigError(
                "MAX_RESOURCE_BYTES must be at least MAX_BINARY_BYTES and at most 268435456 (256 MiB: a read holds about four times its bytes, and four such reads may run at once)".into(),
            ));
        }
        if args.max_response_bytes == 0 {
            return Err(ConfigError("MAX_RESPONSE_BYTES must be at least 1".into()));
        }
        if args.max_tool_response_items == 0 {
            return Err(ConfigError("MAX_TOOL_RESPONSE_ITEMS must be at least 1".into()));
        }
        if args.max_tool_response_chars < 2_000 {
            return Err(ConfigError(
                "MAX_TOOL_RESPONSE_CHARS must be at least 2000 (the envelope alone needs a few hundred)"
                    .into(),
            ));
        }
        let mut extra_secrets: Vec<SecretString> = args
            .extra_secrets
            .as_ref()
            .map(|s| {
                s.expose_secret()
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| SecretString::from(s.to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(path) = &args.extra_secrets_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                ConfigError(format!("cannot read EXTRA_SECRETS_FILE {}: {}", path.display(), e.kind()))
            })?;
            extra_secrets.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(|l| SecretString::from(l.to_owned())),
            );
        }
        let mcp_bearer_token = args.mcp_bearer_token.filter(|t| !t.expose_secret().trim().is_empty());
        let metrics_bearer_token = args.metrics_bearer_token.filter(|t| !t.expose_secret().trim().is_empty());
        let (username, password) =
            basic_auth(args.username, args.password, args.password_file.as_deref(), token.is_some())?;
        // A bearer token longer than any Authorization header the server accepts could never
        // be presented; a longer global token is no forge's.
        let max = aegis_core::identity::MAX_TOKEN_BYTES;
        for (name, secret) in [
            ("GITEA_TOKEN", &token),
            ("MCP_BEARER_TOKEN", &mcp_bearer_token),
            ("GITEA_PASSWORD", &password),
            ("METRICS_BEARER_TOKEN", &metrics_bearer_token),
        ] {
            if secret.as_ref().is_some_and(|t| t.expose_secret().len() > max) {
                return Err(ConfigError(format!(
                    "{name} is longer than {max} bytes; check that it holds only the token"
                )));
            }
        }
        let oauth_client_id = args.oauth_client_id.filter(|s| !s.trim().is_empty());
        let oauth_client_secret = args.oauth_client_secret.filter(|t| !t.expose_secret().trim().is_empty());
        let oauth = oauth_settings(
            oauth_client_id.as_deref(),
            oauth_client_secret.as_ref(),
            args.public_url.as_deref().filter(|u| !u.trim().is_empty()),
            args.oauth_key_file.as_deref(),
            args.oauth_redirect_schemes.as_deref(),
        )?;
        let audit_log = args.audit_log.filter(|p| !p.as_os_str().is_empty());
        let audit_key = audit_key(audit_log.is_some(), args.audit_key_file.as_deref(), oauth.as_ref())?;
        let state = state_settings(&args.state, oauth.as_ref(), audit_key.as_ref())?;
        Ok(Settings {
            url,
            token,
            flavor: args.flavor,
            spec: args.spec,
            transport: args.transport,
            listen: args.listen,
            stateless: match (args.stateless, args.transport) {
                (true, TransportChoice::Sse) => {
                    return Err(ConfigError(
                        "MCP_STATELESS (--stateless) applies to Streamable HTTP (--transport http): a legacy SSE client always holds a stream, which lives on one replica".into(),
                    ));
                }
                (stateless, _) => stateless,
            },
            replica_id: args.replica_id.filter(|r| !r.is_empty()).map(replica_id).transpose()?,
            shutdown_delay: match args.shutdown_delay {
                0.0 => Duration::ZERO,
                v if v.is_finite() && v > 0.0 && v <= 600.0 => Duration::from_secs_f64(v),
                _ => {
                    return Err(ConfigError(
                        "--shutdown-delay must be a number of seconds from 0 to 600".into(),
                    ));
                }
            },
            mcp_bearer_token,
            max_binary_bytes: args.max_binary_bytes,
            max_resource_bytes: args.max_resource_bytes,
            max_response_bytes: args.max_response_bytes,
            disabled_tools: args
                .disabled_tools
                .iter()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect(),
            read_only: args.read_only,
            allow_unknown_routes: args.allow_unknown_routes,
            allowed_repos: repo_list("ALLOWED_REPOS", args.allowed_repos.as_deref())?,
            write_allowed_repos: repo_list("WRITE_ALLOWED_REPOS", args.write_allowed_repos.as_deref())?,
            enabled_tools: clean_list(args.enabled_tools).into_iter().collect(),
            toolsets: aegis_core::catalog::toolsets::Selection::parse(&args.toolsets)
                .map_err(|e| ConfigError(format!("TOOLSETS: {e}")))?,
            secret_detection: args.secret_detection_mode,
            max_tool_response_items: args.max_tool_response_items,
            max_tool_response_chars: args.max_tool_response_chars,
            result_shape: args.result_shape,
            confirm_irreversible: args.confirm_irreversible,
            confirm_timeout: seconds("--confirm-timeout", args.confirm_timeout)?,
            max_inline_binary_bytes: args.max_inline_binary_bytes,
            structured_content_from: parse_structured_from(&args.structured_content_from)?,
            extra_secrets,
            oauth_client_secret,
            oauth,
            connect_timeout: seconds("--connect-timeout", args.connect_timeout)?,
            timeout: seconds("--timeout", args.timeout)?,
            allowed_hosts: clean_list(args.allowed_hosts),
            allowed_origins: clean_list(args.allowed_origins),
            max_body_bytes: args.max_body_bytes.max(1024),
            request_timeout: seconds("--request-timeout", args.request_timeout)?,
            header_timeout: seconds("--header-timeout", args.header_timeout)?,
            body_timeout: seconds("--body-timeout", args.body_timeout)?,
            idle_timeout: seconds("--idle-timeout", args.idle_timeout)?,
            max_connections: args.max_connections.max(1),
            max_connections_per_peer: args.max_connections_per_peer.max(1),
            max_sessions: args.max_sessions.max(1),
            max_sse_streams: args.max_sse_streams.max(1),
            max_sessions_per_identity: args.max_sessions_per_identity.max(1),
            stream_stall_timeout: seconds("--stream-stall-timeout", args.stream_stall_timeout)?,
            username,
            password,
            sudo_allowed_users: args
                .sudo_allowed_users
                .as_deref()
                .map(aegis_core::args::sudo::Allowed::parse)
                .transpose()
                .map_err(|e| ConfigError(format!("SUDO_ALLOWED_USERS: {e}")))?
                .flatten(),
            content_hygiene: args.content_hygiene,
            audit_log,
            audit_key,
            audit_fail_open: args.audit_fail_open,
            rate_limit_per_minute: NonZeroU32::new(args.rate_limit_per_minute),
            rate_limit_concurrent: NonZeroU32::new(args.rate_limit_concurrent),
            forge_max_concurrent: NonZeroU32::new(args.forge_max_concurrent),
            new_tokens_per_minute: NonZeroU32::new(args.new_tokens_per_minute),
            metrics_listen: MetricsListen::parse(args.metrics_listen.as_deref())?,
            metrics_bearer_token,
            state,
        })
    }

    /// The forge's base URL, or the words to set one: every command needs it but `tools`
    /// with `--flavor gitea|forgejo`, which asks no forge.
    pub fn forge_url(&self) -> Result<&Url, ConfigError> {
        self.url.as_ref().ok_or_else(|| {
            ConfigError("no forge URL: pass --url https://gitea.example.com or set GITEA_URL".into())
        })
    }
}

/// A repository allowlist setting, if set.
fn repo_list(
    name: &str,
    text: Option<&str>,
) -> Result<Option<aegis_core::policy::repos::RepoList>, ConfigError> {
    text.map(|t| {
        aegis_core::policy::repos::RepoList::parse(t).map_err(|e| ConfigError(format!("{name}: {e}")))
    })
    .transpose()
}

fn clean_list(v: Vec<String>) -> Vec<String> {
    v.into_iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect()
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.trim().is_empty())
}

/// Accepts `https://host`, `https://host/sub/`, and forgives a trailing `/api/v1`.
/// Refuses credentials in the URL: they would end up in logs and error messages.
pub(crate) fn parse_base_url(text: &str) -> Result<Url, ConfigError> {
    let mut url = Url::parse(text.trim()).map_err(|e| {
        ConfigError(format!(
            "the forge URL is not a valid URL ({e}); expected e.g. https://gitea.example.com"
        ))
    })?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(ConfigError("the forge URL must start with http:// or https://".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ConfigError(
            "the forge URL must not contain a user name or password; pass the token with GITEA_TOKEN or --token-file".into(),
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ConfigError("the forge URL must not have a query string or fragment".into()));
    }
    let mut path = url.path().trim_end_matches('/').to_owned();
    if let Some(stripped) = path.strip_suffix("/api/v1") {
        path = stripped.to_owned();
    }
    url.set_path(&format!("{path}/"));
    Ok(url)
}

/// Sign-in is on when the OAuth2 application and the public URL are given; it then needs the
/// key. Half a configuration is an error that names what is missing, never a server that
/// quietly runs without sign-in.
fn oauth_settings(
    client_id: Option<&str>,
    client_secret: Option<&SecretString>,
    public_url: Option<&str>,
    key_file: Option<&std::path::Path>,
    redirect_schemes: Option<&str>,
) -> Result<Option<OAuthSettings>, ConfigError> {
    let given = [client_id.is_some(), client_secret.is_some(), public_url.is_some(), key_file.is_some()];
    if given == [false; 4] || (public_url.is_none() && key_file.is_none()) {
        // The client id and secret alone are only redacted, as before sign-in existed.
        return Ok(None);
    }
    let missing: Vec<&str> = [
        ("GITEA_OAUTH_CLIENT_ID", given[0]),
        ("GITEA_OAUTH_CLIENT_SECRET", given[1]),
        ("MCP_PUBLIC_URL", given[2]),
        ("MCP_OAUTH_KEY_FILE", given[3]),
    ]
    .into_iter()
    .filter(|(_, set)| !set)
    .map(|(name, _)| name)
    .collect();
    if !missing.is_empty() {
        return Err(ConfigError(format!(
            "sign-in with the forge needs GITEA_OAUTH_CLIENT_ID, GITEA_OAUTH_CLIENT_SECRET, MCP_PUBLIC_URL and MCP_OAUTH_KEY_FILE; missing: {}",
            missing.join(", ")
        )));
    }
    let (Some(client_id), Some(client_secret), Some(public_url), Some(key_file)) =
        (client_id, client_secret, public_url, key_file)
    else {
        unreachable!("every part was checked above");
    };
    Ok(Some(OAuthSettings {
        client_id: client_id.trim().to_owned(),
        client_secret: client_secret.clone(),
        public_url: parse_public_url(public_url)?,
        key: read_key_file(key_file, "MCP_OAUTH_KEY_FILE")?,
        redirect_schemes: redirect_schemes.map(parse_redirect_schemes).transpose()?.unwrap_or_default(),
    }))
}

/// `MCP_OAUTH_REDIRECT_SCHEMES`: URI scheme names; never one whose address a browser itself
/// runs, shows or sends elsewhere, nor http(s), whose rules stay the standard ones.
/// `STRUCTURED_CONTENT_FROM`: `never`, or a protocol version as the protocol writes them
/// (`2025-06-18`); versions compare as their text does.
fn parse_structured_from(text: &str) -> Result<Option<String>, ConfigError> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("never") {
        return Ok(None);
    }
    let b = t.as_bytes();
    let dated = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() });
    if !dated {
        return Err(ConfigError(format!(
            "STRUCTURED_CONTENT_FROM: {t:?} is neither `never` nor a protocol version such as 2025-06-18"
        )));
    }
    Ok(Some(t.to_owned()))
}

fn parse_redirect_schemes(text: &str) -> Result<Vec<String>, ConfigError> {
    let mut out = Vec::new();
    for scheme in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let lower = scheme.to_ascii_lowercase();
        let syntax = lower.starts_with(|c: char| c.is_ascii_lowercase())
            && lower.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b));
        if !syntax || lower.len() > 64 {
            return Err(ConfigError(format!("MCP_OAUTH_REDIRECT_SCHEMES: {scheme:?} is not a URI scheme")));
        }
        if NEVER_REDIRECT_SCHEMES.contains(&lower.as_str()) {
            return Err(ConfigError(format!(
                "MCP_OAUTH_REDIRECT_SCHEMES: {lower} cannot receive a sign-in's code safely (a browser runs, shows or forwards such an address itself)"
            )));
        }
        out.push(lower);
    }
    Ok(out)
}

/// `MCP_PUBLIC_URL`: http(s), a host, no credentials, path, query or fragment; returned
/// without a trailing `/` (the issuer and the resource are built from it).
fn parse_public_url(text: &str) -> Result<String, ConfigError> {
    let url = Url::parse(text.trim()).map_err(|e| {
        ConfigError(format!("MCP_PUBLIC_URL is not a valid URL ({e}); expected e.g. https://mcp.example.com"))
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(ConfigError(
            "MCP_PUBLIC_URL must start with https:// (or http:// for a local test)".into(),
        ));
    }
    if !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
        || url.path() != "/"
    {
        return Err(ConfigError(
            "MCP_PUBLIC_URL must be only a scheme, host and port (e.g. https://mcp.example.com): serve the server at the root of its host".into(),
        ));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// The audit key (`AUDIT_KEY_FILE`): required with `AUDIT_LOG`, since a chain without a key
/// can be rewritten by anyone who can write the file; never the sealing key (one key, one
/// use).
fn audit_key(
    audit_log: bool,
    key_file: Option<&std::path::Path>,
    oauth: Option<&OAuthSettings>,
) -> Result<Option<std::sync::Arc<secrecy::SecretBox<[u8; 32]>>>, ConfigError> {
    let Some(path) = key_file.filter(|p| !p.as_os_str().is_empty()) else {
        if audit_log {
            return Err(ConfigError(
                "AUDIT_LOG (--audit-log) needs AUDIT_KEY_FILE (--audit-key-file): the audit trail is keyed so that nobody without the key can rewrite it unnoticed; create a key with `openssl rand -hex 32 > /etc/aegis/audit.key`, readable only by the server, and set AUDIT_KEY_FILE to that file".into(),
            ));
        }
        return Ok(None);
    };
    let key = read_audit_key(path)?;
    if oauth.is_some_and(|o| o.key.expose_secret() == key.expose_secret()) {
        return Err(ConfigError(
            "AUDIT_KEY_FILE (--audit-key-file) and MCP_OAUTH_KEY_FILE (--oauth-key-file) hold the same key: give the audit trail a key of its own (`openssl rand -hex 32`)".into(),
        ));
    }
    Ok(Some(key))
}

/// The shared store's settings (`MCP_STATE_*`), or `None` without `MCP_STATE_URL`. Errors
/// never echo the URL: it is checked to hold no password, but it may hold one.
fn state_settings(
    args: &StateArgs,
    oauth: Option<&OAuthSettings>,
    audit_key: Option<&std::sync::Arc<secrecy::SecretBox<[u8; 32]>>>,
) -> Result<Option<StateSettings>, ConfigError> {
    let Some(text) = args.url.as_deref().map(str::trim).filter(|u| !u.is_empty()) else {
        return Ok(None);
    };
    let wrong = |why: &str| {
        ConfigError(format!(
            "MCP_STATE_URL (--state-url) {why}: use redis://host:port[/db] or rediss://host:port[/db], a user name if the store has users, and the password in MCP_STATE_PASSWORD_FILE"
        ))
    };
    let url = Url::parse(text).map_err(|_| wrong("is not a URL"))?;
    if !matches!(url.scheme(), "redis" | "rediss") {
        return Err(wrong(
            "must start with redis:// or rediss:// (unix sockets, Cluster and Sentinel are not supported)",
        ));
    }
    if url.password().is_some() {
        return Err(wrong("holds a password, which would sit in the environment"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(wrong("names no host"));
    }
    let db = url.path().trim_start_matches('/');
    if !(db.is_empty() || db.len() <= 5 && db.bytes().all(|b| b.is_ascii_digit()))
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(wrong("may end only in a database number"));
    }
    let key_file = args.key_file.as_deref().filter(|p| !p.as_os_str().is_empty()).ok_or_else(|| {
        ConfigError(
            "MCP_STATE_URL (--state-url) needs MCP_STATE_KEY_FILE (--state-key-file): the store sees only hashes keyed with it, so it never holds a code, a token or a login; create one with `openssl rand -hex 32`, the same file on every replica".into(),
        )
    })?;
    let key = read_key_file(key_file, "MCP_STATE_KEY_FILE")?;
    let same = |other: Option<&std::sync::Arc<secrecy::SecretBox<[u8; 32]>>>| {
        other.is_some_and(|k| k.expose_secret() == key.expose_secret())
    };
    if same(oauth.map(|o| &o.key)) || same(audit_key) {
        return Err(ConfigError(
            "MCP_STATE_KEY_FILE (--state-key-file) holds the same key as MCP_OAUTH_KEY_FILE or AUDIT_KEY_FILE: give the shared store a key of its own (`openssl rand -hex 32`)".into(),
        ));
    }
    let password = args
        .password_file
        .as_deref()
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| read_secret_file(p, "shared store's password file (MCP_STATE_PASSWORD_FILE)"))
        .transpose()?;
    let ca = match args.ca_file.as_deref().filter(|p| !p.as_os_str().is_empty()) {
        None => None,
        Some(_) if url.scheme() == "redis" => {
            return Err(ConfigError(
                "MCP_STATE_CA_FILE (--state-ca-file) is set but MCP_STATE_URL is redis://, which has no TLS: use rediss://".into(),
            ));
        }
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            ConfigError(format!("cannot read MCP_STATE_CA_FILE {}: {}", path.display(), e.kind()))
        })?),
    };
    let namespace = args.namespace.clone();
    if namespace.is_empty()
        || namespace.len() > 32
        || !namespace.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(ConfigError(format!(
            "MCP_STATE_NAMESPACE (--state-namespace) {namespace:?}: use 1 to 32 of a-z, 0-9 and '-'"
        )));
    }
    Ok(Some(StateSettings { url, password, ca, key, fail: args.fail, namespace }))
}

/// The audit key from its file (`AUDIT_KEY_FILE`, or `audit verify --key-file`).
pub fn read_audit_key(
    path: &std::path::Path,
) -> Result<std::sync::Arc<secrecy::SecretBox<[u8; 32]>>, ConfigError> {
    read_key_file(path, "AUDIT_KEY_FILE")
}

/// A key file of the setting `name`: 64 hex characters (surrounding white space ignored).
/// The error never shows the file's content.
fn read_key_file(
    path: &std::path::Path,
    name: &str,
) -> Result<std::sync::Arc<secrecy::SecretBox<[u8; 32]>>, ConfigError> {
    let text = secrecy::SecretString::from(
        std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read {name} {}: {}", path.display(), e.kind())))?,
    );
    let hex = text.expose_secret().trim().as_bytes();
    let wrong = || {
        ConfigError(format!(
            "{name} {} must hold 64 hex characters (32 random bytes); create it with `openssl rand -hex 32 > {}`",
            path.display(),
            path.display()
        ))
    };
    if hex.len() != 64 {
        return Err(wrong());
    }
    let mut key = Box::new([0u8; 32]);
    for (i, pair) in hex.chunks(2).enumerate() {
        let digit = |b: u8| (b as char).to_digit(16);
        match (digit(pair[0]), digit(pair[1])) {
            (Some(h), Some(l)) => key[i] = (h * 16 + l) as u8,
            _ => return Err(wrong()),
        }
    }
    Ok(std::sync::Arc::new(secrecy::SecretBox::new(key)))
}

/// The login and password of HTTP Basic: both or neither, and not besides a token (`token`:
/// whether one was given). The password is taken as given (it may hold white space); a
/// password file is trimmed like the token file. Errors never echo a value.
fn basic_auth(
    username: Option<String>,
    password: Option<SecretString>,
    password_file: Option<&std::path::Path>,
    token: bool,
) -> Result<(Option<String>, Option<SecretString>), ConfigError> {
    let username = username.as_deref().map(str::trim).filter(|u| !u.is_empty()).map(str::to_owned);
    let password = match (password, password_file) {
        (Some(p), _) if !p.expose_secret().is_empty() => Some(p),
        (_, Some(path)) => Some(read_secret_file(path, "password file")?),
        _ => None,
    };
    match (&username, &password) {
        (None, None) => return Ok((None, None)),
        (None, Some(_)) => {
            return Err(ConfigError(
                "GITEA_PASSWORD (or GITEA_PASSWORD_FILE) is set but GITEA_USERNAME is not: HTTP Basic needs the login too".into(),
            ));
        }
        (Some(_), None) => {
            return Err(ConfigError(
                "GITEA_USERNAME is set but no password: set GITEA_PASSWORD or GITEA_PASSWORD_FILE as well"
                    .into(),
            ));
        }
        (Some(_), Some(_)) => {}
    }
    if token {
        return Err(ConfigError(
            "both a token (GITEA_TOKEN) and a password (GITEA_USERNAME with GITEA_PASSWORD) are set: the server has one identity, so unset one of them".into(),
        ));
    }
    if username.as_deref().is_some_and(|u| u.contains(':') || u.chars().any(char::is_control)) {
        return Err(ConfigError("GITEA_USERNAME must be a login: no ':' and no control characters".into()));
    }
    Ok((username, password))
}

fn read_token_file(path: &std::path::Path) -> Result<SecretString, ConfigError> {
    read_secret_file(path, "token file")
}

/// A secret read from a file, surrounding white space removed; the file must hold one.
fn read_secret_file(path: &std::path::Path, what: &str) -> Result<SecretString, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("cannot read the {what} {}: {}", path.display(), e.kind())))?;
    let secret = text.trim();
    if secret.is_empty() {
        return Err(ConfigError(format!("the {what} {} is empty", path.display())));
    }
    Ok(SecretString::from(secret.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> CommonArgs {
        let mut v = vec!["aegis-gitea-mcp"];
        v.extend_from_slice(extra);
        Cli::try_parse_from(v).unwrap().common
    }

    #[test]
    fn base_url_gets_a_trailing_slash_and_loses_api_v1() {
        assert_eq!(parse_base_url("https://g.example").unwrap().as_str(), "https://g.example/");
        assert_eq!(parse_base_url("https://g.example/sub").unwrap().as_str(), "https://g.example/sub/");
        assert_eq!(
            parse_base_url("https://g.example/sub/api/v1/").unwrap().as_str(),
            "https://g.example/sub/"
        );
    }

    #[test]
    fn base_url_with_credentials_is_refused_without_echoing_them() {
        let e = parse_base_url("https://bob:hunter22@g.example").unwrap_err();
        assert!(!e.to_string().contains("hunter22"));
        assert!(parse_base_url("ftp://g.example").is_err());
    }

    #[test]
    fn alternative_environment_names_are_read() {
        let env = |k: &str| match k {
            "FORGEJO_URL" => Some("https://f.example".to_owned()),
            "FORGEJO_ACCESS_TOKEN" => Some(" abc \n".to_owned()),
            _ => None,
        };
        let s = Settings::resolve(args(&[]), &env).unwrap();
        assert_eq!(s.forge_url().unwrap().as_str(), "https://f.example/");
        assert_eq!(s.token.unwrap().expose_secret(), "abc");
    }

    #[test]
    fn flag_beats_environment_fallbacks_and_token_file_is_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t");
        std::fs::write(&f, "  filetoken\n").unwrap();
        let env = |_: &str| Some("https://ignored.example".to_owned());
        let a = args(&["--url", "https://flag.example", "--token-file", f.to_str().unwrap()]);
        let s = Settings::resolve(a, &env).unwrap();
        assert_eq!(s.forge_url().unwrap().as_str(), "https://flag.example/");
        assert_eq!(s.token.unwrap().expose_secret(), "filetoken");
    }

    #[test]
    fn metrics_listen_is_the_mcp_address_an_address_of_its_own_or_off() {
        assert_eq!(Settings::resolve(args(&[]), &|_| None).unwrap().metrics_listen, MetricsListen::Main);
        for (text, want) in [
            ("", MetricsListen::Main),
            (" OFF ", MetricsListen::Off),
            ("127.0.0.1:9464", MetricsListen::Own("127.0.0.1:9464".parse().unwrap())),
            ("[::1]:9464", MetricsListen::Own("[::1]:9464".parse().unwrap())),
        ] {
            let s = Settings::resolve(args(&["--metrics-listen", text]), &|_| None).unwrap();
            assert_eq!(s.metrics_listen, want, "{text:?}");
        }
        for bad in ["localhost:9464", "9464", "127.0.0.1", "on", "127.0.0.1:99999"] {
            let e = Settings::resolve(args(&["--metrics-listen", bad]), &|_| None).unwrap_err();
            assert!(e.to_string().contains("METRICS_LISTEN"), "{bad}: {e}");
        }
    }

    #[test]
    fn missing_url_says_how_to_set_it_when_it_is_needed() {
        let s = Settings::resolve(args(&[]), &|_| None).unwrap();
        assert!(s.url.is_none());
        assert!(s.forge_url().unwrap_err().to_string().contains("GITEA_URL"));
    }

    #[test]
    fn debug_of_settings_hides_the_token() {
        let s =
            Settings::resolve(args(&["--url", "https://g.example", "--token", "s3cr3t-value"]), &|_| None)
                .unwrap();
        assert!(!format!("{s:?}").contains("s3cr3t-value"));
    }

    #[test]
    fn tokens_longer_than_any_header_accepts_are_refused_without_echoing_them() {
        let long = "A".repeat(aegis_core::identity::MAX_TOKEN_BYTES + 1);
        for flag in ["--token", "--mcp-bearer-token"] {
            let e = Settings::resolve(args(&["--url", "https://g.example", flag, &long]), &|_| None)
                .unwrap_err()
                .to_string();
            assert!(e.contains("longer than") && !e.contains("AAAA"), "{e}");
        }
    }

    #[test]
    fn a_login_and_password_make_basic_auth_and_the_password_file_is_trimmed() {
        let s =
            Settings::resolve(args(&["--username", "alice", "--password", " pw with spaces "]), &|_| None)
                .unwrap();
        assert_eq!(s.username.as_deref(), Some("alice"));
        assert_eq!(s.password.unwrap().expose_secret(), " pw with spaces ");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pw");
        std::fs::write(&f, "  from-file\n").unwrap();
        let s = Settings::resolve(
            args(&["--username", "alice", "--password-file", f.to_str().unwrap()]),
            &|_| None,
        )
        .unwrap();
        assert_eq!(s.password.unwrap().expose_secret(), "from-file");
        assert!(
            !format!(
                "{:?}",
                Settings::resolve(args(&["--username", "a", "--password", "hunter22"]), &|_| None).unwrap()
            )
            .contains("hunter22")
        );
    }

    #[test]
    fn basic_auth_needs_both_halves_and_no_token_and_never_echoes_the_password() {
        let err = |a: &[&str]| Settings::resolve(args(a), &|_| None).unwrap_err().to_string();
        let e = err(&["--password", "hunter22"]);
        assert!(e.contains("GITEA_USERNAME is not") && !e.contains("hunter22"), "{e}");
        let e = err(&["--username", "alice"]);
        assert!(e.contains("no password"), "{e}");
        let e = err(&["--username", "alice", "--password", "hunter22", "--token", "t0k3n"]);
        assert!(e.contains("both a token") && !e.contains("hunter22") && !e.contains("t0k3n"), "{e}");
        let token_env = |k: &str| (k == "GITEA_ACCESS_TOKEN").then(|| "t0k3n".to_owned());
        let e = Settings::resolve(args(&["--username", "alice", "--password", "hunter22"]), &token_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("both a token"), "{e}");
        let e = err(&["--username", "al:ice", "--password", "hunter22"]);
        assert!(e.contains("no ':'"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("empty");
        std::fs::write(&f, " \n").unwrap();
        let e = err(&["--username", "alice", "--password-file", f.to_str().unwrap()]);
        assert!(e.contains("password file") && e.contains("is empty"), "{e}");
    }

    #[test]
    fn limits_are_off_by_default_and_zero_means_no_limit() {
        let s = Settings::resolve(args(&[]), &|_| None).unwrap();
        assert_eq!(
            (s.rate_limit_per_minute, s.rate_limit_concurrent, s.forge_max_concurrent),
            (None, None, None)
        );
        let s = Settings::resolve(
            args(&[
                "--rate-limit-per-minute",
                "120",
                "--rate-limit-concurrent",
                "0",
                "--forge-max-concurrent",
                "8",
            ]),
            &|_| None,
        )
        .unwrap();
        assert_eq!(s.rate_limit_per_minute, NonZeroU32::new(120));
        assert_eq!(s.rate_limit_concurrent, None);
        assert_eq!(s.forge_max_concurrent, NonZeroU32::new(8));
    }

    #[test]
    fn a_limit_that_is_not_a_whole_number_is_refused_naming_its_variable() {
        for (flag, name) in [
            ("--rate-limit-per-minute", "RATE_LIMIT_PER_MINUTE"),
            ("--rate-limit-concurrent", "RATE_LIMIT_CONCURRENT"),
            ("--forge-max-concurrent", "FORGE_MAX_CONCURRENT"),
        ] {
            for bad in ["-1", "ten", "1.5", "99999999999"] {
                let arg = format!("{flag}={bad}");
                let e = Cli::try_parse_from(["aegis-gitea-mcp", &arg]).unwrap_err().to_string();
                assert!(e.contains(name), "{flag} {bad}: {e}");
            }
        }
    }

    #[test]
    fn disabled_tools_are_split_and_trimmed() {
        let s = Settings::resolve(
            args(&["--url", "https://g.example", "--disabled-tools", "repoDelete, adminCreateUser,"]),
            &|_| None,
        )
        .unwrap();
        assert_eq!(s.disabled_tools.into_iter().collect::<Vec<_>>(), ["adminCreateUser", "repoDelete"]);
    }

    #[test]
    fn a_replica_id_is_one_dns_label_and_stateless_is_for_streamable_http() {
        let resolve = |extra: &[&str]| {
            let mut v = vec!["--url", "https://g.example"];
            v.extend_from_slice(extra);
            Settings::resolve(args(&v), &|_| None)
        };
        assert_eq!(resolve(&[]).unwrap().replica_id, None);
        assert_eq!(resolve(&["--replica-id", ""]).unwrap().replica_id, None);
        for ok in ["r1", "aegis-gitea-mcp-6d4cf56db6-x7k2p", &"a".repeat(63)] {
            assert_eq!(resolve(&["--replica-id", ok]).unwrap().replica_id.as_deref(), Some(ok));
        }
        for bad in ["R1", "r.1", "-r1", "r1-", "r_1", "r1/", &"a".repeat(64)] {
            let e = resolve(&[&format!("--replica-id={bad}")]).unwrap_err().0;
            assert!(e.contains("MCP_REPLICA_ID") && e.contains("DNS label"), "{bad}: {e}");
        }
        assert!(resolve(&["--transport", "http", "--stateless"]).unwrap().stateless);
        assert!(!resolve(&["--transport", "http"]).unwrap().stateless);
        let e = resolve(&["--transport", "sse", "--stateless"]).unwrap_err().0;
        assert!(e.contains("MCP_STATELESS") && e.contains("--transport http"), "{e}");
    }

    #[test]
    fn a_shared_store_needs_a_key_of_its_own_and_no_password_in_its_url() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("state.key");
        std::fs::write(&key, format!("{}\n", "cd".repeat(32))).unwrap();
        let key = key.to_str().unwrap();
        let password = dir.path().join("password");
        std::fs::write(&password, "  store-secret-pw \n").unwrap();
        let password = password.to_str().unwrap();
        let resolve = |extra: &[&str]| {
            let mut v = vec!["--url", "https://g.example"];
            v.extend_from_slice(extra);
            Settings::resolve(args(&v), &|_| None)
        };
        assert!(resolve(&[]).unwrap().state.is_none());
        let with = |url: &str| resolve(&["--state-url", url, "--state-key-file", key]);
        let s = resolve(&["--state-url", "rediss://aegis@store.internal:6380/2", "--state-key-file", key])
            .unwrap()
            .state
            .unwrap();
        assert_eq!((s.fail, s.namespace.as_str()), (StateFail::Open, "aegis"));
        for (url, why) in [
            ("redis://:hunter2-in-url@store:6379", "holds a password"),
            ("redis://user:hunter2-in-url@store:6379", "holds a password"),
            ("unix:///run/redis.sock", "must start with redis://"),
            ("http://store:6379", "must start with redis://"),
            ("redis://store:6379/db?x=1", "may end only in a database number"),
            ("not a url hunter2-in-url", "is not a URL"),
        ] {
            let e = with(url).unwrap_err().0;
            assert!(e.contains(why) && !e.contains("hunter2"), "{url}: {e}");
        }
        let e = resolve(&["--state-url", "redis://store:6379"]).unwrap_err().0;
        assert!(e.contains("MCP_STATE_KEY_FILE") && e.contains("openssl rand -hex 32"), "{e}");
        // One key, one use: not the sealing key, not the audit key.
        let e = resolve(&[
            "--state-url",
            "redis://s",
            "--state-key-file",
            key,
            "--audit-log",
            "/tmp/a",
            "--audit-key-file",
            key,
        ])
        .unwrap_err()
        .0;
        assert!(e.contains("same key"), "{e}");
        let e = resolve(&["--state-url", "redis://s", "--state-key-file", key, "--state-ca-file", key])
            .unwrap_err()
            .0;
        assert!(e.contains("rediss://"), "{e}");
        for bad in ["", "Aegis", "a_b", &"x".repeat(33)] {
            let e = resolve(&["--state-url", "redis://s", "--state-key-file", key, "--state-namespace", bad]);
            assert!(e.unwrap_err().0.contains("MCP_STATE_NAMESPACE"), "{bad:?}");
        }
        // The password and the key are secrets: in no Debug, in the list the guard redacts.
        let s = resolve(&[
            "--state-url",
            "redis://s",
            "--state-key-file",
            key,
            "--state-password-file",
            password,
            "--state-fail",
            "closed",
        ])
        .unwrap();
        assert_eq!(s.state.as_ref().unwrap().fail, StateFail::Closed);
        let debug = format!("{s:?}");
        assert!(!debug.contains("store-secret-pw") && !debug.contains("cdcd"), "{debug}");
        let secrets = s.secrets();
        assert!(secrets.iter().any(|x| x == "store-secret-pw"));
        assert!(secrets.iter().any(|x| x == &"cd".repeat(32)));
    }

    #[test]
    fn an_audit_log_needs_a_key_of_its_own_and_a_bad_key_is_never_echoed() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let log = log.to_str().unwrap();
        let key = dir.path().join("audit.key");
        std::fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
        let key = key.to_str().unwrap();
        let resolve = |extra: &[&str]| {
            let mut v = vec!["--url", "https://g.example"];
            v.extend_from_slice(extra);
            Settings::resolve(args(&v), &|_| None)
        };
        let e = resolve(&["--audit-log", log]).unwrap_err().0;
        assert!(
            e.contains("AUDIT_LOG") && e.contains("AUDIT_KEY_FILE") && e.contains("openssl rand -hex 32"),
            "{e}"
        );
        let s = resolve(&["--audit-log", log, "--audit-key-file", key]).unwrap();
        assert_eq!(s.audit_key.map(|k| *k.expose_secret()), Some([0xab; 32]));
        assert!(
            !format!("{:?}", resolve(&["--audit-log", log, "--audit-key-file", key]).unwrap())
                .contains("abab")
        );
        // The sealing key is not the audit key.
        let sign_in = [
            "--oauth-client-id",
            "id",
            "--oauth-client-secret",
            "s",
            "--public-url",
            "https://mcp.example",
            "--oauth-key-file",
            key,
        ];
        let e =
            resolve(&[&sign_in[..], &["--audit-log", log, "--audit-key-file", key]].concat()).unwrap_err().0;
        assert!(e.contains("same key"), "{e}");
        let bad = dir.path().join("bad.key");
        std::fs::write(&bad, "not-hex-SECRETVALUE").unwrap();
        let e = resolve(&["--audit-log", log, "--audit-key-file", bad.to_str().unwrap()]).unwrap_err().0;
        assert!(e.contains("AUDIT_KEY_FILE") && e.contains("64 hex") && !e.contains("SECRETVALUE"), "{e}");
    }
}
