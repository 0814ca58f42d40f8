//! `Settings::resolve`: the raw arguments (and the older environment names) → `Settings`,
//! after every check (URL shape, token file, numbers, keys). Errors name the setting and say
//! how to fix it, and never echo a secret.

use std::num::NonZeroU32;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use url::Url;

use super::{
    ALSO_READ, CommonArgs, ConfigError, EnvLookup, FlavorChoice, MetricsListen, OAuthSettings, Profiles,
    Settings, SignInApp, StateArgs, StateSettings, TransportChoice,
};

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

impl Settings {
    /// Resolve the raw arguments, reading the alternative environment names through `env`.
    pub fn resolve(args: CommonArgs, env: EnvLookup<'_>) -> Result<Settings, ConfigError> {
        let url = args
            .url
            .filter(|u| !u.trim().is_empty())
            .or_else(|| also_read("GITEA_URL", env).map(|(_, v)| v))
            .map(|text| parse_base_url(&text))
            .transpose()?;

        let token = match (args.token, &args.token_file) {
            (Some(t), _) if !t.expose_secret().trim().is_empty() => {
                Some(SecretString::from(t.expose_secret().trim().to_owned()))
            }
            (_, Some(path)) => Some(read_token_file(path)?),
            _ => also_read("GITEA_TOKEN", env).map(|(_, t)| SecretString::from(t.trim().to_owned())),
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
        let profiles = args
            .profiles
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| Profiles::read(&p, env).map(std::sync::Arc::new))
            .transpose()?;
        if profiles.is_some() {
            let given = [
                ("GITEA_URL (--url)", url.is_some()),
                ("GITEA_TOKEN (--token, --token-file)", token.is_some()),
                ("GITEA_USERNAME and GITEA_PASSWORD", username.is_some() || password.is_some()),
                ("GITEA_FLAVOR (--flavor)", args.flavor != FlavorChoice::Auto),
                ("GITEA_SPEC (--spec)", args.spec.is_some()),
            ];
            if let Some((name, _)) = given.iter().find(|(_, set)| *set) {
                return Err(ConfigError(format!(
                    "{name} is set beside a profiles file (GITEA_PROFILES): with profiles, each forge's URL, credential and flavor go in its profile; unset it"
                )));
            }
            // Each forge has its own application: one set in the environment would be a
            // guess at which forge it belongs to.
            let given = [
                ("GITEA_OAUTH_CLIENT_ID (--oauth-client-id)", oauth_client_id.is_some()),
                ("GITEA_OAUTH_CLIENT_SECRET (--oauth-client-secret)", oauth_client_secret.is_some()),
            ];
            if let Some((name, _)) = given.iter().find(|(_, set)| *set) {
                return Err(ConfigError(format!(
                    "{name} is set beside a profiles file (GITEA_PROFILES): with profiles, each forge's OAuth2 application goes in its profile (oauth_client_id, with oauth_client_secret_env or oauth_client_secret_file); unset it"
                )));
            }
        }
        let public_url = args.public_url.as_deref().filter(|u| !u.trim().is_empty());
        let oauth = match &profiles {
            None => oauth_settings(
                oauth_client_id.as_deref(),
                oauth_client_secret.as_ref(),
                public_url,
                args.oauth_key_file.as_deref(),
                args.oauth_redirect_schemes.as_deref(),
            )?,
            Some(profiles) => profiles_oauth_settings(
                profiles,
                public_url,
                args.oauth_key_file.as_deref(),
                args.oauth_redirect_schemes.as_deref(),
            )?,
        };
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
            flow_guard: args.flow_guard,
            flow_window: seconds("--flow-window", args.flow_window)?,
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
            content_trust: args.content_trust,
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
            profiles,
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

/// The first older name of the setting `name` (`ALSO_READ`) that the environment gives, not
/// blank, with its value: what the settings use, and what `doctor` says they used.
pub(super) fn also_read(name: &str, env: EnvLookup<'_>) -> Option<(&'static str, String)> {
    let (_, older) = ALSO_READ.iter().find(|(own, _)| *own == name)?;
    older.iter().find_map(|old| non_empty(env(old)).map(|v| (*old, v)))
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
        apps: vec![SignInApp {
            profile: None,
            client_id: client_id.trim().to_owned(),
            client_secret: client_secret.clone(),
        }],
        public_url: parse_public_url(public_url)?,
        key: read_key_file(key_file, "MCP_OAUTH_KEY_FILE")?,
        redirect_schemes: redirect_schemes.map(parse_redirect_schemes).transpose()?.unwrap_or_default(),
    }))
}

/// Sign-in with a profiles file: on when a profile has an OAuth2 application
/// (`oauth_client_id`); it then needs `MCP_PUBLIC_URL` and `MCP_OAUTH_KEY_FILE`, which stay
/// server-wide (one authorization server for every forge). Those two without any profile's
/// application are an error too: the operator meant sign-in somewhere.
fn profiles_oauth_settings(
    profiles: &Profiles,
    public_url: Option<&str>,
    key_file: Option<&std::path::Path>,
    redirect_schemes: Option<&str>,
) -> Result<Option<OAuthSettings>, ConfigError> {
    let apps: Vec<SignInApp> = profiles
        .forges
        .iter()
        .filter_map(|p| {
            p.oauth.as_ref().map(|a| SignInApp {
                profile: Some(p.name.clone()),
                client_id: a.client_id.clone(),
                client_secret: a.client_secret.clone(),
            })
        })
        .collect();
    match (apps.is_empty(), public_url, key_file) {
        (true, None, None) => Ok(None),
        (true, _, _) => Err(ConfigError(
            "MCP_PUBLIC_URL or MCP_OAUTH_KEY_FILE is set, but no profile of the profiles file has an OAuth2 application: add oauth_client_id (with oauth_client_secret_env or oauth_client_secret_file) to each profile that takes sign-in, or unset them".into(),
        )),
        (false, Some(public_url), Some(key_file)) => Ok(Some(OAuthSettings {
            apps,
            public_url: parse_public_url(public_url)?,
            key: read_key_file(key_file, "MCP_OAUTH_KEY_FILE")?,
            redirect_schemes: redirect_schemes.map(parse_redirect_schemes).transpose()?.unwrap_or_default(),
        })),
        (false, _, _) => {
            let missing: Vec<&str> =
                [("MCP_PUBLIC_URL", public_url.is_none()), ("MCP_OAUTH_KEY_FILE", key_file.is_none())]
                    .into_iter()
                    .filter(|(_, gone)| *gone)
                    .map(|(n, _)| n)
                    .collect();
            let with: Vec<&str> = apps.iter().filter_map(|a| a.profile.as_deref()).collect();
            Err(ConfigError(format!(
                "sign-in with the forge (oauth_client_id of profile {}) needs MCP_PUBLIC_URL and MCP_OAUTH_KEY_FILE; missing: {}",
                with.join(", "),
                missing.join(", ")
            )))
        }
    }
}

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

/// `MCP_OAUTH_REDIRECT_SCHEMES`: URI scheme names; never one whose address a browser itself
/// runs, shows or sends elsewhere, nor http(s), whose rules stay the standard ones.
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
/// Longest file a secret is read from (a token, a password, a key: a few hundred bytes).
const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

/// The text of the file at `path`, read only as far as `max` bytes: a setting that names a
/// device or a huge file by mistake is refused, not read into memory. Why not, in words.
pub(super) fn read_bounded(path: &std::path::Path, max: u64) -> Result<String, aegis_core::error::Shown> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.kind().to_string())?;
    let mut text = String::new();
    file.take(max + 1).read_to_string(&mut text).map_err(|e| e.kind().to_string())?;
    if text.len() as u64 > max {
        return Err(format!("it is longer than {max} bytes"));
    }
    Ok(text)
}

pub(super) fn read_secret_file(path: &std::path::Path, what: &str) -> Result<SecretString, ConfigError> {
    let text = read_bounded(path, MAX_SECRET_FILE_BYTES)
        .map_err(|e| ConfigError(format!("cannot read the {what} {}: {e}", path.display())))?;
    let secret = text.trim();
    if secret.is_empty() {
        return Err(ConfigError(format!("the {what} {} is empty", path.display())));
    }
    Ok(SecretString::from(secret.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Cli, StateFail};
    use clap::Parser;

    fn args(extra: &[&str]) -> CommonArgs {
        let mut v = vec!["aegis-gitea-mcp"];
        v.extend_from_slice(extra);
        Cli::try_parse_from(v).unwrap().common
    }

    #[test]
    fn a_file_a_setting_names_is_read_only_as_far_as_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let (small, large) = (dir.path().join("small"), dir.path().join("large"));
        std::fs::write(&small, "tok-0123456789\n").unwrap();
        std::fs::write(&large, vec![b'a'; 70 * 1024]).unwrap();
        assert_eq!(read_bounded(&small, 64).unwrap(), "tok-0123456789\n");
        assert!(read_bounded(&small, 8).unwrap_err().contains("longer than 8 bytes"));
        let e = read_secret_file(&large, "token file").unwrap_err().0;
        assert!(e.contains("longer than 65536 bytes") && !e.contains("aaaa"), "{e}");
        // A device that never ends is refused at the bound, not read into memory.
        let e = read_bounded(std::path::Path::new("/dev/zero"), 1024).unwrap_err();
        assert!(e.contains("longer than 1024 bytes"), "{e}");
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
