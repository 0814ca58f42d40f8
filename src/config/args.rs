//! The table of settings: the command line, as clap derives it. Each setting is one field of
//! `CommonArgs` (or `StateArgs`) whose attributes say everything about it once: its flag,
//! its environment variable, its default, its meaning (the doc comment: the first paragraph
//! is `-h`'s line, the whole is `--help`'s and the settings reference's), its group
//! (`help_heading`), and whether it is a secret (a `SecretString` with `hide_env_values`).
//! `reference.rs` reads the table back through clap's introspection to write
//! `docs/SETTINGS.md` and `doctor`'s listing; older environment names still read are in
//! `ALSO_READ`. Adding a setting is adding a field here, and the code that uses its value.

use std::path::PathBuf;

use aegis_core::guard::{ContentHygiene, DetectionMode};
use clap::{Args, Parser, Subcommand, ValueEnum};
use secrecy::SecretString;

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

/// The groups of settings, in `--help` and in `docs/SETTINGS.md`, in this order.
pub(crate) const FORGE: &str = "The forge and the server's own identity";
pub(crate) const TOOLS: &str = "Which tools are listed and which calls are allowed";
pub(crate) const RESULTS: &str = "Results";
pub(crate) const SIGN_IN: &str = "Sign-in with the forge";
pub(crate) const SERVING: &str = "Serving MCP";
pub(crate) const LIMITS: &str = "Limits";
pub(crate) const STORE: &str = "Replicas: the shared store";
pub(crate) const AUDIT: &str = "Audit trail";
pub(crate) const OBSERVING: &str = "Logs and metrics";

/// Older environment names still read, in this order, when neither a setting's flag nor its
/// own variable is given: (the setting's variable, the older names). `resolve.rs` reads
/// them, the reference lists them, and a test checks that `--help` names them.
pub(crate) const ALSO_READ: &[(&str, &[&str])] = &[
    ("GITEA_URL", &["GITEA_HOST", "FORGEJO_URL"]),
    ("GITEA_TOKEN", &["GITEA_ACCESS_TOKEN", "FORGEJO_ACCESS_TOKEN"]),
];

/// The command line as the binary parses it and prints its help: the table, with no
/// environment value shown by `--help` for any setting. A secret's is hidden by its own row
/// already; a URL may carry a password in its userinfo, and `doctor` is where a person sees
/// what was given (its values cleared of userinfo).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command().mut_args(|a| a.hide_env_values(true))
}

/// Settings shared by every command: the table of settings, one field each (see the module
/// doc). A secret is a `SecretString` with `hide_env_values` (a test refuses one without).
#[derive(Debug, Args)]
pub struct CommonArgs {
    // The forge and the server's own identity.
    /// Base URL of the Gitea or Forgejo instance (also read: GITEA_HOST, FORGEJO_URL).
    ///
    /// A trailing /api/v1 is forgiven. Every command needs it but `tools` with an explicit
    /// --flavor.
    #[arg(long, env = "GITEA_URL", global = true, help_heading = FORGE)]
    pub(crate) url: Option<String>,
    /// The server's own access token (also read: GITEA_ACCESS_TOKEN, FORGEJO_ACCESS_TOKEN).
    /// Prefer the environment or --token-file: a flag is visible to other local users.
    ///
    /// Without a token (or a login and password) calls are anonymous.
    #[arg(long, env = "GITEA_TOKEN", hide_env_values = true, global = true, help_heading = FORGE)]
    pub(crate) token: Option<SecretString>,
    /// Read the global token from this file (surrounding white space is ignored).
    #[arg(long, env = "GITEA_TOKEN_FILE", global = true, help_heading = FORGE)]
    pub(crate) token_file: Option<PathBuf>,
    /// Login of the server's own identity with HTTP Basic, together with GITEA_PASSWORD (or
    /// --password-file) instead of a token: the forges create and list access tokens only
    /// for a login and password.
    #[arg(long, env = "GITEA_USERNAME", global = true, help_heading = FORGE)]
    pub(crate) username: Option<String>,
    /// The password of GITEA_USERNAME. Prefer the environment or --password-file: a flag is
    /// visible to other local users.
    ///
    /// Redacted everywhere, as is the Basic value made of it.
    #[arg(long, env = "GITEA_PASSWORD", hide_env_values = true, global = true, help_heading = FORGE)]
    pub(crate) password: Option<SecretString>,
    /// Read the password of GITEA_USERNAME from this file (surrounding white space is ignored).
    #[arg(long, env = "GITEA_PASSWORD_FILE", global = true, help_heading = FORGE)]
    pub(crate) password_file: Option<PathBuf>,
    /// Which forge the tools are generated for.
    ///
    /// `auto` asks GET /api/v1/version (again without the token when the forge refuses it —
    /// Forgejo refuses a wrong token even there — and, when that gives no version because it
    /// is refused or hidden by a proxy, at Forgejo's own /api/forgejo/v1/version); a refused
    /// token stops `serve` with words that say so. `gitea` or `forgejo` skip the question.
    #[arg(
        long,
        env = "GITEA_FLAVOR",
        value_enum,
        default_value = "auto",
        global = true,
        help_heading = FORGE
    )]
    pub(crate) flavor: FlavorChoice,
    /// A Swagger 2.0 file to generate the tools from instead of the embedded spec.
    #[arg(long, env = "GITEA_SPEC", global = true, help_heading = FORGE)]
    pub(crate) spec: Option<PathBuf>,
    /// Seconds to wait for a TCP/TLS connection to the forge.
    #[arg(long, env = "GITEA_CONNECT_TIMEOUT", default_value_t = 10.0, global = true, help_heading = FORGE)]
    pub(crate) connect_timeout: f64,
    /// Seconds one forge request may take in total, body included.
    #[arg(long, env = "GITEA_TIMEOUT", default_value_t = 60.0, global = true, help_heading = FORGE)]
    pub(crate) timeout: f64,
    /// A TOML file of forge profiles: several forges and accounts, each named, with its URL,
    /// flavor, credential and its own allowlists, read-only, sudo users and tools.
    ///
    /// A credential is named, never written in the file (`token_env`, `token_file`, or
    /// `username` with `password_env` / `password_file`), so the file itself holds no secret;
    /// a token or password file that other users can read is refused. The file is checked at
    /// start: every command refuses a bad one with an error naming the profile and the key,
    /// never a value. `doctor` lists each profile (its URL, flavor and kind of credential),
    /// checks each profile's forge and says which profiles are ready (`docs/OPERATING.md`).
    /// A profile takes sign-in with its forge with `oauth_client_id` and
    /// `oauth_client_secret_env` or `oauth_client_secret_file` (at most 3 profiles;
    /// docs/SIGN-IN.md, "Several forges").
    #[arg(long, env = "GITEA_PROFILES", global = true, help_heading = FORGE)]
    pub(crate) profiles: Option<PathBuf>,

    // Which tools are listed and which calls are allowed.
    /// Comma-separated toolsets whose operations tools/list shows: `core` (the everyday
    /// ones), area names (`issues`, `pulls`, `actions`, … see `tools --list-toolsets`), `all`,
    /// or `none` (only the built-in tools).
    /// Every other operation stays callable through gitea_call_operation.
    #[arg(long, env = "TOOLSETS", default_value = "core", global = true, help_heading = TOOLS)]
    pub(crate) toolsets: String,
    /// Comma-separated tool names: when set, only these are offered and callable, besides
    /// the three discovery tools, which then reach only these (DISABLED_TOOLS still removes).
    ///
    /// It replaces TOOLSETS.
    #[arg(long, env = "ENABLED_TOOLS", value_delimiter = ',', global = true, help_heading = TOOLS)]
    pub(crate) enabled_tools: Vec<String>,
    /// Comma-separated tool names that are neither offered nor callable.
    ///
    /// By any path: the raw tool and the discovery tools refuse them too.
    #[arg(long, env = "DISABLED_TOOLS", value_delimiter = ',', global = true, help_heading = TOOLS)]
    pub(crate) disabled_tools: Vec<String>,
    /// Offer and allow only operations that read (GET); the raw tool accepts only GET.
    ///
    /// By any path, and no operation that hands out a credential.
    #[arg(long, env = "READ_ONLY", global = true, help_heading = TOOLS)]
    pub(crate) read_only: bool,
    /// Comma-separated `owner/repo`, `owner/*` or `*`: the repositories calls may touch (unset:
    /// every one). Matched case-insensitively; listings across repositories are filtered.
    #[arg(long, env = "ALLOWED_REPOS", global = true, help_heading = TOOLS)]
    pub(crate) allowed_repos: Option<String>,
    /// The same for calls that write (any method but GET); narrows ALLOWED_REPOS, never widens it.
    #[arg(long, env = "WRITE_ALLOWED_REPOS", global = true, help_heading = TOOLS)]
    pub(crate) write_allowed_repos: Option<String>,
    /// Let gitea_api_request send routes that no operation of the spec has (a route the spec
    /// lacks); by default they are refused, since no policy can judge them.
    #[arg(long, env = "ALLOW_UNKNOWN_ROUTES", global = true, help_heading = TOOLS)]
    pub(crate) allow_unknown_routes: bool,
    /// Comma-separated logins that calls may act as with their `sudo` argument (the forge's
    /// Sudo header; the caller must be a site administrator), or `*` for any. Unset: no tool
    /// takes `sudo`.
    #[arg(long, env = "SUDO_ALLOWED_USERS", global = true, help_heading = TOOLS)]
    pub(crate) sudo_allowed_users: Option<String>,
    /// How a call that cannot be undone (deleting a repository, a branch, a release, …) is
    /// confirmed: `ask` the person through the client (a client that cannot be asked sends
    /// `confirm` with the exact target), always by the `argument`, or `off`.
    #[arg(
        long,
        env = "CONFIRM_IRREVERSIBLE",
        value_enum,
        default_value = "ask",
        global = true,
        help_heading = TOOLS
    )]
    pub(crate) confirm_irreversible: aegis_core::policy::confirm::Mode,
    /// What happens to a write that would carry what the session read of a private
    /// repository where more people see it (a public or limited repository or profile,
    /// another owner's private repository, a new public repository, an address outside the
    /// forge): `ask` the person as for a call that cannot be undone, `refuse` it (error kind
    /// `private_flow`), or `off`.
    #[arg(long, env = "FLOW_GUARD", value_enum, default_value = "ask", global = true, help_heading = TOOLS)]
    pub(crate) flow_guard: aegis_core::policy::flow::FlowGuard,
    /// Seconds a private read counts against the caller's writes over stateless HTTP, which
    /// has no session (over stdio and MCP sessions, it counts for the session's life).
    #[arg(long, env = "FLOW_WINDOW", default_value_t = 3600.0, global = true, help_heading = TOOLS)]
    pub(crate) flow_window: f64,
    /// Seconds a person has to answer a confirmation before the call fails with
    /// `not_confirmed` (over HTTP within MCP_REQUEST_TIMEOUT, which counts the wait too).
    ///
    /// Over stateless HTTP, how long the question's sealed state stays answerable.
    #[arg(long, env = "CONFIRM_TIMEOUT", default_value_t = 60.0, global = true, help_heading = TOOLS)]
    pub(crate) confirm_timeout: f64,

    // Results.
    /// How results are rendered unless a call asks (`shape`): compact or the forge's full JSON.
    #[arg(
        long,
        env = "RESULT_SHAPE",
        value_enum,
        default_value = "compact",
        global = true,
        help_heading = RESULTS
    )]
    pub(crate) result_shape: aegis_core::shape::Shape,
    /// Which clients get typed results (`structuredContent`, and an `outputSchema` on every
    /// tool): those of this protocol version (YYYY-MM-DD) or later, or `never`.
    #[arg(
        long,
        env = "STRUCTURED_CONTENT_FROM",
        default_value = "2025-06-18",
        global = true,
        help_heading = RESULTS
    )]
    pub(crate) structured_content_from: String,
    /// Most list items in one result; longer lists are cut and the cut is reported.
    #[arg(
        long,
        env = "MAX_TOOL_RESPONSE_ITEMS",
        default_value_t = 100,
        global = true,
        help_heading = RESULTS
    )]
    pub(crate) max_tool_response_items: usize,
    /// Most characters in one result's text; longer results are cut and the cut is reported.
    ///
    /// At least 2000. Claude Code moves results over 50,000 characters out of the
    /// conversation.
    #[arg(
        long,
        env = "MAX_TOOL_RESPONSE_CHARS",
        default_value_t = 40_000,
        global = true,
        help_heading = RESULTS
    )]
    pub(crate) max_tool_response_chars: usize,
    /// Largest JSON or text body read from the forge, in bytes; larger answers fail with
    /// payload_too_large instead of filling memory.
    #[arg(
        long,
        env = "MAX_RESPONSE_BYTES",
        default_value_t = 16 * 1_048_576,
        global = true,
        help_heading = RESULTS
    )]
    pub(crate) max_response_bytes: u64,
    /// Largest binary body returned as base64, and largest base64 upload, in bytes.
    #[arg(long, env = "MAX_BINARY_BYTES", default_value_t = 1_048_576, global = true, help_heading = RESULTS)]
    pub(crate) max_binary_bytes: u64,
    /// Largest binary content (a raw file, an attachment) a result holds inline as base64;
    /// larger comes as a `resource_link` to the `gitea://` resource that reads it.
    #[arg(
        long,
        env = "MAX_INLINE_BINARY_BYTES",
        default_value_t = 8_192,
        global = true,
        help_heading = RESULTS
    )]
    pub(crate) max_inline_binary_bytes: u64,
    /// Largest binary content (a raw file, an attachment) a resource read serves, in bytes:
    /// a tool result links content over MAX_BINARY_BYTES up to this size to the resource.
    ///
    /// At least MAX_BINARY_BYTES, at most 268435456 (256 MiB).
    #[arg(
        long,
        env = "MAX_RESOURCE_BYTES",
        default_value_t = 32 * 1_048_576,
        global = true,
        help_heading = RESULTS
    )]
    pub(crate) max_resource_bytes: u64,
    /// What pattern masking does with credential-looking strings in results.
    #[arg(
        long,
        env = "SECRET_DETECTION_MODE",
        value_enum,
        default_value = "mask",
        global = true,
        help_heading = RESULTS
    )]
    pub(crate) secret_detection_mode: DetectionMode,
    /// Forge text a reader would not see — invisible and bidirectional-control characters,
    /// HTML comments: `mark` shows them in place, `strip` removes them, `off` leaves them.
    #[arg(
        long,
        env = "CONTENT_HYGIENE",
        value_enum,
        default_value = "mark",
        global = true,
        help_heading = RESULTS
    )]
    pub(crate) content_hygiene: ContentHygiene,
    /// Who wrote an issue, pull request, comment or review: `mark` gives each its author's
    /// relation to the repository (`author_relation`: owner, collaborator, member, none, or
    /// unknown when the forge could not say); `withhold` also replaces, in public repositories,
    /// the title and body of authors without write access with a note naming them; `off` neither.
    ///
    /// The relations are asked of the forge once per repository and identity (its assignees and
    /// collaborators, cached for 5 minutes); a failed look-up withholds. Over HTTP a request's
    /// `X-MCP-Content-Trust: withhold` turns withholding on for itself, never off.
    #[arg(
        long,
        env = "CONTENT_TRUST",
        value_enum,
        default_value = "mark",
        global = true,
        help_heading = RESULTS
    )]
    pub(crate) content_trust: aegis_core::shape::trust::ContentTrust,
    /// More literal values to redact from every result and log line (comma-separated).
    #[arg(long, env = "EXTRA_SECRETS", hide_env_values = true, global = true, help_heading = RESULTS)]
    pub(crate) extra_secrets: Option<SecretString>,
    /// A file of more literal values to redact, one per line.
    #[arg(long, env = "EXTRA_SECRETS_FILE", global = true, help_heading = RESULTS)]
    pub(crate) extra_secrets_file: Option<PathBuf>,

    // Sign-in with the forge.
    /// Client id of the OAuth2 application registered on the forge (OAuth mode).
    ///
    /// docs/SIGN-IN.md says how to register it. Refused beside a profiles file: each forge's
    /// application goes in its profile (`oauth_client_id`).
    #[arg(long, env = "GITEA_OAUTH_CLIENT_ID", global = true, help_heading = SIGN_IN)]
    pub(crate) oauth_client_id: Option<String>,
    /// Client secret of that OAuth2 application; redacted from every result.
    #[arg(
        long,
        env = "GITEA_OAUTH_CLIENT_SECRET",
        hide_env_values = true,
        global = true,
        help_heading = SIGN_IN
    )]
    pub(crate) oauth_client_secret: Option<SecretString>,
    /// The URL MCP clients reach this server at (scheme and host, no path), e.g.
    /// https://mcp.example.com; with the OAuth client id and secret it turns on sign-in with
    /// the forge. It may differ from --listen behind a reverse proxy.
    ///
    /// Sign-in needs all four: GITEA_OAUTH_CLIENT_ID, GITEA_OAUTH_CLIENT_SECRET,
    /// MCP_PUBLIC_URL and MCP_OAUTH_KEY_FILE (with a profiles file: MCP_PUBLIC_URL,
    /// MCP_OAUTH_KEY_FILE and a profile's oauth_client_id).
    #[arg(long, env = "MCP_PUBLIC_URL", global = true, help_heading = SIGN_IN)]
    pub(crate) public_url: Option<String>,
    /// A file holding the key (64 hex characters) that seals the tokens this server issues;
    /// replicas that share it accept each other's tokens. Create one with
    /// `openssl rand -hex 32`.
    #[arg(long, env = "MCP_OAUTH_KEY_FILE", global = true, help_heading = SIGN_IN)]
    pub(crate) oauth_key_file: Option<PathBuf>,
    /// Comma-separated app schemes a client may register as redirect URIs besides https,
    /// http on loopback and schemes in reverse-domain form (com.example.app), e.g. `cursor`
    /// for Cursor's `cursor://…` callback.
    ///
    /// docs/SIGN-IN.md lists the clients that need one.
    #[arg(long, env = "MCP_OAUTH_REDIRECT_SCHEMES", global = true, help_heading = SIGN_IN)]
    pub(crate) oauth_redirect_schemes: Option<String>,

    // Serving MCP.
    /// MCP transport for `serve`.
    #[arg(
        long,
        env = "MCP_TRANSPORT",
        value_enum,
        default_value = "stdio",
        global = true,
        help_heading = SERVING
    )]
    pub(crate) transport: TransportChoice,
    /// Address for the http and sse transports.
    #[arg(long, env = "MCP_LISTEN", default_value = "127.0.0.1:8080", global = true, help_heading = SERVING)]
    pub listen: String,
    /// Streamable HTTP without sessions: every request stands alone, so any replica behind a
    /// load balancer can serve it (`initialize` is answered without an Mcp-Session-Id).
    ///
    /// Recommended for replicas, and set by the container image.
    #[arg(long, env = "MCP_STATELESS", global = true, help_heading = SERVING)]
    pub(crate) stateless: bool,
    /// This replica's name (a DNS label: lowercase letters, digits, '-'), put in front of
    /// every session id it hands out (`<replica-id>.<random>`) so that a load balancer can
    /// send a session's requests back to it. Unset: session ids carry no name.
    ///
    /// At most 63 characters, not starting or ending with '-' (a pod name is one).
    #[arg(long, env = "MCP_REPLICA_ID", global = true, help_heading = SERVING)]
    pub(crate) replica_id: Option<String>,
    /// Seconds to go on accepting requests after SIGTERM, with /readyz answering 503, before
    /// draining: time for a load balancer to stop sending new requests here.
    ///
    /// At most 600.
    #[arg(long, env = "MCP_SHUTDOWN_DELAY", default_value_t = 0.0, global = true, help_heading = SERVING)]
    pub(crate) shutdown_delay: f64,
    /// Shared secret HTTP clients present as `Authorization: Bearer …` to act as the
    /// server's global identity.
    ///
    /// When set, requests without a token get 401.
    #[arg(long, env = "MCP_BEARER_TOKEN", hide_env_values = true, global = true, help_heading = SERVING)]
    pub(crate) mcp_bearer_token: Option<SecretString>,
    /// Host header values accepted over HTTP (comma-separated `host` or `host:port`); by
    /// default the loopback names when listening on loopback, else any.
    ///
    /// The protection against DNS rebinding.
    #[arg(long, env = "MCP_ALLOWED_HOSTS", value_delimiter = ',', global = true, help_heading = SERVING)]
    pub(crate) allowed_hosts: Vec<String>,
    /// Origin header values accepted over HTTP (comma-separated `scheme://host[:port]`); by
    /// default the loopback origins when listening on loopback, else any.
    #[arg(long, env = "MCP_ALLOWED_ORIGINS", value_delimiter = ',', global = true, help_heading = SERVING)]
    pub(crate) allowed_origins: Vec<String>,
    /// Largest HTTP request body, in bytes.
    ///
    /// The largest stdio line too. A longer message is not read but skimmed for its id: a
    /// tool call gets the tool error `payload_too_large`, another request an Invalid Request
    /// error with its id (HTTP 413).
    #[arg(
        long,
        env = "MCP_MAX_BODY_BYTES",
        default_value_t = 4 * 1_048_576,
        global = true,
        help_heading = SERVING
    )]
    pub(crate) max_body_bytes: usize,
    /// Seconds one MCP request (a tool call) may take over HTTP before it fails with timeout.
    #[arg(long, env = "MCP_REQUEST_TIMEOUT", default_value_t = 120.0, global = true, help_heading = SERVING)]
    pub(crate) request_timeout: f64,
    /// Seconds a client may take to send a request's headers, from their first byte.
    ///
    /// Then the connection is closed.
    #[arg(long, env = "MCP_HEADER_TIMEOUT", default_value_t = 10.0, global = true, help_heading = SERVING)]
    pub(crate) header_timeout: f64,
    /// Seconds a client may take to send a request's body.
    ///
    /// Then it gets 408.
    #[arg(long, env = "MCP_BODY_TIMEOUT", default_value_t = 30.0, global = true, help_heading = SERVING)]
    pub(crate) body_timeout: f64,
    /// Seconds a connection may stay open between requests.
    #[arg(long, env = "MCP_IDLE_TIMEOUT", default_value_t = 60.0, global = true, help_heading = SERVING)]
    pub(crate) idle_timeout: f64,
    /// Most open HTTP connections (fewer when the open-file limit is lower).
    ///
    /// The server raises its soft open-file limit to the hard one.
    #[arg(long, env = "MCP_MAX_CONNECTIONS", default_value_t = 1024, global = true, help_heading = SERVING)]
    pub(crate) max_connections: usize,
    /// Most open HTTP connections from one address (raise it behind a reverse proxy, where
    /// every connection comes from the proxy).
    ///
    /// Above it, 503.
    #[arg(
        long,
        env = "MCP_MAX_CONNECTIONS_PER_PEER",
        default_value_t = 256,
        global = true,
        help_heading = SERVING
    )]
    pub(crate) max_connections_per_peer: usize,
    /// Most open Streamable HTTP sessions.
    ///
    /// Above it, 503.
    #[arg(long, env = "MCP_MAX_SESSIONS", default_value_t = 1000, global = true, help_heading = SERVING)]
    pub(crate) max_sessions: usize,
    /// Most open legacy SSE streams.
    ///
    /// Above it, 503.
    #[arg(long, env = "MCP_MAX_SSE_STREAMS", default_value_t = 1000, global = true, help_heading = SERVING)]
    pub(crate) max_sse_streams: usize,
    /// Most open sessions (or SSE streams) one identity may hold.
    ///
    /// Above it, 429.
    #[arg(
        long,
        env = "MCP_MAX_SESSIONS_PER_IDENTITY",
        default_value_t = 100,
        global = true,
        help_heading = SERVING
    )]
    pub(crate) max_sessions_per_identity: usize,
    /// Seconds a client may leave answers unread before its connection is closed (a legacy SSE
    /// stream with answers waiting, or any connection whose writes are blocked).
    #[arg(
        long,
        env = "MCP_STREAM_STALL_TIMEOUT",
        default_value_t = 30.0,
        global = true,
        help_heading = SERVING
    )]
    pub(crate) stream_stall_timeout: f64,

    // Limits.
    /// Tool calls and resource reads one identity may make per minute (at most this many at
    /// once, then one every 60/N s); above it calls fail with rate_limited. 0: no limit.
    #[arg(long, env = "RATE_LIMIT_PER_MINUTE", default_value_t = 0, global = true, help_heading = LIMITS)]
    pub(crate) rate_limit_per_minute: u32,
    /// Calls one identity may have running at once; above it calls fail with rate_limited.
    /// 0: no limit.
    #[arg(long, env = "RATE_LIMIT_CONCURRENT", default_value_t = 0, global = true, help_heading = LIMITS)]
    pub(crate) rate_limit_concurrent: u32,
    /// Requests to the forge running at once, for all identities together; a request that
    /// finds no slot within 200 ms fails with rate_limited. 0: no limit.
    #[arg(long, env = "FORGE_MAX_CONCURRENT", default_value_t = 0, global = true, help_heading = LIMITS)]
    pub(crate) forge_max_concurrent: u32,
    /// Tokens this server has not seen confirmed that one client address may present per
    /// minute over HTTP (each costs a login lookup at the forge); above it requests get 429.
    /// Raise it behind a reverse proxy, where every client has the proxy's address. 0: no limit.
    #[arg(
        long,
        env = "MCP_NEW_TOKENS_PER_MINUTE",
        default_value_t = 60,
        global = true,
        help_heading = LIMITS
    )]
    pub(crate) new_tokens_per_minute: u32,

    // Replicas: the shared store.
    #[command(flatten)]
    pub(crate) state: StateArgs,

    // Audit trail.
    /// Append one JSON line per tool call and resource read to this file, each authenticated
    /// with the key of --audit-key-file and chained to the one before (see `audit verify`).
    /// Unset: no audit trail.
    #[arg(long, env = "AUDIT_LOG", global = true, help_heading = AUDIT)]
    pub(crate) audit_log: Option<PathBuf>,
    /// A file of 64 hex characters: the key of the audit trail's MACs and of args_hmac
    /// (`openssl rand -hex 32`), readable only by the server and whoever verifies. Needed
    /// with AUDIT_LOG; `audit verify` reads it too.
    ///
    /// Not the same key as MCP_OAUTH_KEY_FILE's (refused at start).
    #[arg(long, env = "AUDIT_KEY_FILE", global = true, help_heading = AUDIT)]
    pub audit_key_file: Option<PathBuf>,
    /// When the audit log cannot be written, run calls anyway with a warning instead of
    /// failing them with audit_failed.
    #[arg(long, env = "AUDIT_FAIL_OPEN", global = true, help_heading = AUDIT)]
    pub(crate) audit_fail_open: bool,

    // Logs and metrics.
    /// Log filter (tracing syntax, e.g. `info`, `aegis_gitea_mcp=debug`). Logs go to stderr.
    #[arg(long, env = "LOG_LEVEL", default_value = "info", global = true, help_heading = OBSERVING)]
    pub log_level: String,
    /// Where Prometheus metrics are served at /metrics: unset, on the MCP address (http and
    /// sse only); an IP address and port such as 127.0.0.1:9464, only there, on a listener of
    /// its own (with every transport, stdio too); `off`, nowhere.
    #[arg(long, env = "METRICS_LISTEN", global = true, help_heading = OBSERVING)]
    pub(crate) metrics_listen: Option<String>,
    /// A token a scrape of /metrics must present as `Authorization: Bearer <token>`; unset,
    /// /metrics needs none (it holds counts only).
    ///
    /// Redacted everywhere.
    #[arg(
        long,
        env = "METRICS_BEARER_TOKEN",
        hide_env_values = true,
        global = true,
        help_heading = OBSERVING
    )]
    pub(crate) metrics_bearer_token: Option<SecretString>,
}

/// The shared store's settings (`MCP_STATE_*`), apart so that they are read as one.
#[derive(Args, Debug, Clone)]
pub(crate) struct StateArgs {
    /// A Redis (or Valkey) the replicas share, redis://host:port[/db] or rediss://…: codes
    /// and refresh tokens are used once across them, and the limits hold for them together.
    /// No password in the URL (use --state-password-file). Unset: each replica on its own.
    ///
    /// Redis 6.2+ or a Valkey that speaks its protocol (no Cluster, no Sentinel, no unix
    /// sockets). Pending sign-ins too are accepted once across the replicas; the limits that
    /// hold together are RATE_LIMIT_* and FORGE_MAX_CONCURRENT. A user name may be in the URL;
    /// a password there is refused at start.
    #[arg(id = "state_url", long = "state-url", env = "MCP_STATE_URL", global = true, help_heading = STORE)]
    pub(crate) url: Option<String>,
    /// A file holding the shared store's password.
    ///
    /// Surrounding white space is ignored; the password is redacted everywhere.
    #[arg(
        id = "state_password_file",
        long = "state-password-file",
        env = "MCP_STATE_PASSWORD_FILE",
        global = true,
        help_heading = STORE
    )]
    pub(crate) password_file: Option<PathBuf>,
    /// A PEM file of the CA certificates a rediss:// store's certificate is checked against
    /// (default: the system's).
    #[arg(
        id = "state_ca_file",
        long = "state-ca-file",
        env = "MCP_STATE_CA_FILE",
        global = true,
        help_heading = STORE
    )]
    pub(crate) ca_file: Option<PathBuf>,
    /// A file of 64 hex characters, the same on every replica (`openssl rand -hex 32`): every
    /// key the shared store sees is a keyed hash made with it. Needed with MCP_STATE_URL.
    ///
    /// Not the same key as MCP_OAUTH_KEY_FILE's or AUDIT_KEY_FILE's (refused at start). The
    /// hash is HMAC-SHA256, so the store never holds a token, a code, an id or a login in clear.
    #[arg(
        id = "state_key_file",
        long = "state-key-file",
        env = "MCP_STATE_KEY_FILE",
        global = true,
        help_heading = STORE
    )]
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
        global = true,
        help_heading = STORE
    )]
    pub(crate) fail: StateFail,
    /// The prefix of every key in the shared store (1 to 32 of a-z, 0-9, '-'), so that
    /// deployments may share one store.
    #[arg(
        id = "state_namespace",
        long = "state-namespace",
        env = "MCP_STATE_NAMESPACE",
        default_value = "aegis",
        global = true,
        help_heading = STORE
    )]
    pub(crate) namespace: String,
}
