//! `Settings`: what the rest of the program uses, checked and typed, secrets wrapped; and
//! what the pipeline's stages are built from (`policy`, `guard`, `secrets`).

use std::collections::BTreeSet;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use aegis_core::guard::{ContentHygiene, DetectionMode};
use secrecy::{ExposeSecret, SecretString};
use url::Url;

use super::{ConfigError, FlavorChoice, StateFail, TransportChoice};

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
    /// `FLOW_GUARD`, and `FLOW_WINDOW` (stateless HTTP).
    pub(crate) flow_guard: aegis_core::policy::flow::FlowGuard,
    pub(crate) flow_window: Duration,
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
    /// `CONTENT_TRUST`: authors' relations marked, their text withheld, or neither.
    pub(crate) content_trust: aegis_core::shape::trust::ContentTrust,
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
    /// The profiles file (`GITEA_PROFILES`), read and checked: the forges the server serves,
    /// in place of `url` and its credential.
    pub(crate) profiles: Option<std::sync::Arc<super::Profiles>>,
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

/// What sign-in with the forge needs: the OAuth2 application registered on each forge that
/// takes sign-in, where clients reach this server, and the key that seals the tokens it
/// issues. One authorization server, whatever the number of forges.
#[derive(Clone)]
pub(crate) struct OAuthSettings {
    /// One application per forge: the environment's one (`GITEA_OAUTH_CLIENT_ID`), or those of
    /// the profiles that set `oauth_client_id`, in the profiles file's order.
    pub(crate) apps: Vec<SignInApp>,
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
            .field("apps", &self.apps)
            .field("public_url", &self.public_url)
            .finish_non_exhaustive()
    }
}

/// The OAuth2 application this server uses on one forge.
#[derive(Clone)]
pub(crate) struct SignInApp {
    /// The profile of the forge (`None`: the one forge of the environment settings).
    pub(crate) profile: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_secret: SecretString,
}

impl std::fmt::Debug for SignInApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignInApp")
            .field("profile", &self.profile)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

impl SignInApp {
    /// Where the client id is set, for messages.
    pub(crate) fn id_setting(&self) -> String {
        match &self.profile {
            None => "GITEA_OAUTH_CLIENT_ID".into(),
            Some(p) => format!("oauth_client_id of profile {p}"),
        }
    }

    /// Where the secret is set, for messages.
    pub(crate) fn secret_setting(&self) -> String {
        match &self.profile {
            None => "GITEA_OAUTH_CLIENT_SECRET".into(),
            Some(p) => format!("the oauth_client_secret_env or oauth_client_secret_file of profile {p}"),
        }
    }
}

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
        if let Some(profiles) = &self.profiles {
            out.extend(profiles.secrets());
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
            flow: self.flow_guard,
        }
    }
}

impl Settings {
    /// The settings of one profile of the profiles file: the server-wide ones, with the forge,
    /// its credential and each per-forge key the profile sets in place of the environment's.
    /// Sign-in keeps the profile's own application only (none: no sign-in on this forge).
    pub(crate) fn for_profile(&self, profile: &super::profiles::Profile) -> Settings {
        use super::profiles::ProfileCredential;
        let mut s = self.clone();
        s.url = Some(profile.url.clone());
        s.flavor = profile.flavor;
        s.spec = None;
        (s.token, s.username, s.password) = match &profile.credential {
            ProfileCredential::None => (None, None, None),
            ProfileCredential::TokenEnv { token, .. } | ProfileCredential::TokenFile { token, .. } => {
                (Some(token.clone()), None, None)
            }
            ProfileCredential::Basic { username, password, .. } => {
                (None, Some(username.clone()), Some(password.clone()))
            }
        };
        s.oauth = self.oauth.as_ref().and_then(|o| {
            let apps: Vec<SignInApp> = o
                .apps
                .iter()
                .filter(|a| a.profile.as_deref() == Some(profile.name.as_str()))
                .cloned()
                .collect();
            (!apps.is_empty()).then(|| OAuthSettings { apps, ..o.clone() })
        });
        s.allowed_repos = profile.allowed_repos.clone().or_else(|| self.allowed_repos.clone());
        s.write_allowed_repos =
            profile.write_allowed_repos.clone().or_else(|| self.write_allowed_repos.clone());
        s.sudo_allowed_users = profile.sudo_allowed_users.clone().or_else(|| self.sudo_allowed_users.clone());
        s.read_only = profile.read_only.unwrap_or(self.read_only);
        s.toolsets = profile.toolsets.clone().unwrap_or_else(|| self.toolsets.clone());
        s.enabled_tools = profile.enabled_tools.clone().unwrap_or_else(|| self.enabled_tools.clone());
        s.disabled_tools = profile.disabled_tools.clone().unwrap_or_else(|| self.disabled_tools.clone());
        s.connect_timeout = profile.connect_timeout.unwrap_or(self.connect_timeout);
        s.timeout = profile.timeout.unwrap_or(self.timeout);
        if let Some(max) = profile.forge_max_concurrent {
            s.forge_max_concurrent = NonZeroU32::new(max);
        }
        s
    }

    /// Whether a profiles file names the forges, each profile with its own URL.
    pub fn has_profiles(&self) -> bool {
        self.profiles.is_some()
    }

    /// The forge's base URL, or the words to set one: every command needs it but `tools`
    /// with `--flavor gitea|forgejo`, which asks no forge.
    pub fn forge_url(&self) -> Result<&Url, ConfigError> {
        self.url.as_ref().ok_or_else(|| {
            ConfigError("no forge URL: pass --url https://gitea.example.com or set GITEA_URL".into())
        })
    }
}
