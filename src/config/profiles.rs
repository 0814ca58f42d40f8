//! The profiles file (`--profiles FILE`, `GITEA_PROFILES`): several forges and accounts in one
//! server, each a named profile with its URL, flavor, credential and the settings that belong
//! to a forge (allowlists, read-only, sudo users, toolsets).
//!
//! Why it looks as it does:
//! - **A credential only by reference** (`token_env`, `token_file`, or Basic with
//!   `password_env` / `password_file`), never written in the file: a literal `token` or
//!   `password` is refused. The profiles file then holds no secret, so it may be readable,
//!   versioned and shared; the secrets stay where the one-forge settings keep them.
//! - **A `token_file` or `password_file` that other users can read is refused**, naming the
//!   profile. Only "other" read (`mode & 0o004`) counts, following symlinks: the project's
//!   Kubernetes manifest mounts secrets `0440` to the server's group, behind `..data` links.
//! - **Errors name the file, the profile and the key, never a value.** The TOML parser's own
//!   `Display` quotes the offending source line, and serde's messages echo values (`invalid
//!   type: string "…"`): neither is ever shown. A parse error is told by its line and column
//!   and the kind of problem; the key is read from the source line, left of its `=`.
//! - The environment is read through the `EnvLookup` the settings are resolved with, so that
//!   `config/` stays the only reader of the environment and tests stay hermetic.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use aegis_core::args::sudo::Allowed;
use aegis_core::catalog::toolsets::Selection;
use aegis_core::policy::repos::RepoList;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use url::Url;

use super::resolve::{parse_base_url, read_secret_file};
use super::{ConfigError, EnvLookup, FlavorChoice};

/// Keys that would hold a secret in the file itself: refused, with the reference to use.
const LITERAL_SECRETS: &[(&str, &str)] = &[
    ("token", "token_env or token_file"),
    ("password", "password_env or password_file"),
    ("access_token", "token_env or token_file"),
    ("secret", "token_env or token_file"),
    ("oauth_client_secret", "oauth_client_secret_env or oauth_client_secret_file"),
];

/// Most profiles that may take sign-in with the forge (`oauth_client_id`): a token this server
/// issues carries every one's forge tokens, sealed, and must fit an `Authorization` header
/// (`MAX_TOKEN_BYTES`).
pub(crate) const MAX_SIGN_IN_PROFILES: usize = 3;

/// The profiles of a profiles file, in file order; names are unique.
#[derive(Debug)]
pub struct Profiles {
    /// The file they were read from.
    pub(crate) path: PathBuf,
    /// The profile a call goes to when neither `forge` nor a `repositories` pattern picks one:
    /// `default`, or the only profile; `None` with several profiles and no `default`.
    pub(crate) default: Option<String>,
    pub(crate) forges: Vec<Profile>,
}

/// One forge and account: its values checked and parsed, secrets wrapped. A per-forge setting
/// left out is `None`: the server-wide setting applies.
#[derive(Debug)]
pub(crate) struct Profile {
    /// A DNS label.
    pub(crate) name: String,
    /// As `GITEA_URL`: a trailing `/`, no `/api/v1`.
    pub(crate) url: Url,
    pub(crate) flavor: FlavorChoice,
    pub(crate) credential: ProfileCredential,
    /// Routing patterns (`acme/*`, `acme/app`): the calls that go to this profile by default.
    pub(crate) repositories: Option<RepoList>,
    pub(crate) allowed_repos: Option<RepoList>,
    pub(crate) write_allowed_repos: Option<RepoList>,
    pub(crate) read_only: Option<bool>,
    pub(crate) sudo_allowed_users: Option<Allowed>,
    pub(crate) toolsets: Option<Selection>,
    pub(crate) enabled_tools: Option<BTreeSet<String>>,
    pub(crate) disabled_tools: Option<BTreeSet<String>>,
    /// Sign-in with this forge: the OAuth2 application registered on it for this server.
    pub(crate) oauth: Option<ProfileApp>,
    /// This forge's client: as `GITEA_CONNECT_TIMEOUT`, `GITEA_TIMEOUT` and
    /// `FORGE_MAX_CONCURRENT` (0: no limit).
    pub(crate) connect_timeout: Option<std::time::Duration>,
    pub(crate) timeout: Option<std::time::Duration>,
    pub(crate) forge_max_concurrent: Option<u32>,
}

/// A profile's OAuth2 application: `oauth_client_id`, and the secret from
/// `oauth_client_secret_env` or `oauth_client_secret_file` (`Debug` shows none).
#[derive(Debug, Clone)]
pub(crate) struct ProfileApp {
    pub(crate) client_id: String,
    pub(crate) client_secret: SecretString,
}

/// Where a profile's credential comes from, with the secret read (`Debug` shows none).
#[derive(Debug)]
pub(crate) enum ProfileCredential {
    /// No credential: anonymous, or sign-in with the forge later.
    None,
    /// `token_env`: the variable's name (not a secret) and its value.
    TokenEnv { variable: String, token: SecretString },
    /// `token_file`.
    TokenFile { path: PathBuf, token: SecretString },
    /// `username` with `password_env` or `password_file`.
    Basic { username: String, password: SecretString, from: &'static str },
}

impl ProfileCredential {
    /// Which kind, in words for `doctor` (names and paths only, never a value).
    pub(crate) fn describe(&self) -> String {
        match self {
            ProfileCredential::None => "no credential (anonymous until sign-in)".into(),
            ProfileCredential::TokenEnv { variable, .. } => format!("token from token_env {variable}"),
            ProfileCredential::TokenFile { path, .. } => format!("token from token_file {}", path.display()),
            ProfileCredential::Basic { username, from, .. } => {
                format!("Basic as {username} with the password from {from}")
            }
        }
    }

    /// The secrets it holds, as the guard and the log writer must know them.
    pub(crate) fn secrets(&self) -> Vec<String> {
        match self {
            ProfileCredential::None => Vec::new(),
            ProfileCredential::TokenEnv { token, .. } | ProfileCredential::TokenFile { token, .. } => {
                vec![token.expose_secret().to_owned()]
            }
            ProfileCredential::Basic { username, password, .. } => vec![
                password.expose_secret().to_owned(),
                aegis_core::identity::basic_blob(username, password).expose_secret().to_owned(),
            ],
        }
    }
}

impl Profile {
    /// The per-forge keys this profile sets (the others take the server-wide setting).
    pub(crate) fn own_settings(&self) -> Vec<&'static str> {
        [
            ("repositories", self.repositories.is_some()),
            ("allowed_repos", self.allowed_repos.is_some()),
            ("write_allowed_repos", self.write_allowed_repos.is_some()),
            ("read_only", self.read_only.is_some()),
            ("sudo_allowed_users", self.sudo_allowed_users.is_some()),
            ("toolsets", self.toolsets.is_some()),
            ("enabled_tools", self.enabled_tools.is_some()),
            ("disabled_tools", self.disabled_tools.is_some()),
            ("connect_timeout", self.connect_timeout.is_some()),
            ("timeout", self.timeout.is_some()),
            ("forge_max_concurrent", self.forge_max_concurrent.is_some()),
        ]
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(key, _)| key)
        .collect()
    }
}

/// The file as written; values still unchecked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    default: Option<String>,
    #[serde(default)]
    forges: InOrder,
}

/// The `[forges.<name>]` tables in the file's order (a map's entries as serde visits them).
#[derive(Default)]
struct InOrder(Vec<(String, RawProfile)>);

impl<'de> Deserialize<'de> for InOrder {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<InOrder, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = InOrder;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a table of profiles")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(self, mut m: M) -> Result<InOrder, M::Error> {
                let mut out = Vec::new();
                while let Some(entry) = m.next_entry()? {
                    out.push(entry);
                }
                Ok(InOrder(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// A profile as written. Every key of a profile is here; `deny_unknown_fields` refuses others.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    url: String,
    #[serde(default)]
    flavor: RawFlavor,
    token_env: Option<String>,
    token_file: Option<PathBuf>,
    username: Option<String>,
    password_env: Option<String>,
    password_file: Option<PathBuf>,
    repositories: Option<Vec<String>>,
    allowed_repos: Option<Vec<String>>,
    write_allowed_repos: Option<Vec<String>>,
    read_only: Option<bool>,
    sudo_allowed_users: Option<Vec<String>>,
    toolsets: Option<Vec<String>>,
    enabled_tools: Option<Vec<String>>,
    disabled_tools: Option<Vec<String>>,
    oauth_client_id: Option<String>,
    oauth_client_secret_env: Option<String>,
    oauth_client_secret_file: Option<PathBuf>,
    connect_timeout: Option<f64>,
    timeout: Option<f64>,
    forge_max_concurrent: Option<u32>,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum RawFlavor {
    #[default]
    Auto,
    Gitea,
    Forgejo,
}

/// Longest profiles file read (a few forges take a few kilobytes).
const MAX_PROFILES_BYTES: u64 = 1024 * 1024;

impl Profiles {
    /// Read and check the profiles file at `path`, reading `token_env` / `password_env`
    /// through `env`. One error, the first problem found, naming the file or the profile and
    /// the key, never a value.
    pub(crate) fn read(path: &Path, env: EnvLookup<'_>) -> Result<Profiles, ConfigError> {
        let text = super::resolve::read_bounded(path, MAX_PROFILES_BYTES).map_err(|why| {
            ConfigError(format!(
                "cannot read the profiles file {} (--profiles / GITEA_PROFILES): {why}",
                path.display()
            ))
        })?;
        Profiles::parse(path, &text, env)
    }

    fn parse(path: &Path, text: &str, env: EnvLookup<'_>) -> Result<Profiles, ConfigError> {
        let file = path.display();
        // Untyped first: a syntax error is told apart from a wrong key or value.
        let table = toml::from_str::<toml::Table>(text).map_err(|e| syntax_error(&file, text, &e))?;
        let raw: RawFile = toml::from_str(text).map_err(|e| shape_error(&file, text, &table, &e))?;
        if raw.forges.0.is_empty() {
            return Err(ConfigError(format!(
                "profiles file {file}: names no profile; add one as [forges.<name>] with its url"
            )));
        }
        let mut forges = Vec::with_capacity(raw.forges.0.len());
        for (name, raw_profile) in raw.forges.0 {
            check_name(&name)?;
            forges.push(profile(&name, raw_profile, env)?);
        }
        let default = match raw.default {
            Some(d) if forges.iter().any(|p| p.name == d) => Some(d),
            Some(d) => {
                let names: Vec<&str> = forges.iter().map(|p| p.name.as_str()).collect();
                return Err(ConfigError(format!(
                    "profiles file {file}: default = {:?} names no profile (profiles: {})",
                    clip(&d),
                    names.join(", ")
                )));
            }
            None if forges.len() == 1 => Some(forges[0].name.clone()),
            None => None,
        };
        let signing_in: Vec<&str> =
            forges.iter().filter(|p| p.oauth.is_some()).map(|p| p.name.as_str()).collect();
        if signing_in.len() > MAX_SIGN_IN_PROFILES {
            return Err(ConfigError(format!(
                "profiles file {file}: {} profiles set oauth_client_id ({}); at most {MAX_SIGN_IN_PROFILES} may, since one sign-in carries every one's forge tokens in a token that must fit an HTTP header",
                signing_in.len(),
                signing_in.join(", ")
            )));
        }
        Ok(Profiles { path: path.to_owned(), default, forges })
    }

    /// Every secret the profiles hold (for redaction).
    pub(crate) fn secrets(&self) -> Vec<String> {
        let apps = self.forges.iter().filter_map(|p| p.oauth.as_ref());
        let mut out: Vec<String> = self.forges.iter().flat_map(|p| p.credential.secrets()).collect();
        out.extend(apps.map(|a| a.client_secret.expose_secret().to_owned()));
        out
    }
}

/// A profile's name is a DNS label: it becomes part of URIs, header names and metric labels.
fn check_name(name: &str) -> Result<(), ConfigError> {
    let label = !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ["repos", "attachments"].contains(&name) {
        return Err(ConfigError(format!(
            "profile {name}: this name is the first part of a resource URI (gitea://{name}/…); choose another"
        )));
    }
    if label {
        Ok(())
    } else {
        Err(ConfigError(format!(
            "profile {:?}: a name must be a DNS label (a-z, 0-9 and '-', 1-63 characters, not starting or ending with '-')",
            clip(name)
        )))
    }
}

/// One profile, checked: URL, credential (read, never shown), lists.
fn profile(name: &str, raw: RawProfile, env: EnvLookup<'_>) -> Result<Profile, ConfigError> {
    let wrong = |key: &str, why: String| ConfigError(format!("profile {name}: {key} {why}"));
    let url = parse_base_url(&raw.url).map_err(|e| wrong("url:", e.0))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(wrong("url", "names no host; expected e.g. https://gitea.example.com".into()));
    }
    let flavor = match raw.flavor {
        RawFlavor::Auto => FlavorChoice::Auto,
        RawFlavor::Gitea => FlavorChoice::Gitea,
        RawFlavor::Forgejo => FlavorChoice::Forgejo,
    };
    let credential = credential(name, &raw, env)?;
    let oauth = app(name, &raw, env)?;
    let repos = |key: &str, list: &Option<Vec<String>>| -> Result<Option<RepoList>, ConfigError> {
        let Some(list) = list else { return Ok(None) };
        if list.iter().any(|e| e.contains(',')) {
            return Err(wrong(key, "takes one pattern per string (no ',')".into()));
        }
        RepoList::parse(&list.join(",")).map(Some).map_err(|e| wrong(&format!("{key}:"), e))
    };
    let repositories = repos("repositories", &raw.repositories)?;
    if raw.repositories.as_ref().is_some_and(|l| l.iter().any(|e| e.trim() == "*")) {
        return Err(wrong(
            "repositories",
            "cannot hold `*`: it would route every call here; leave repositories out and make this the default profile".into(),
        ));
    }
    let allowed_repos = repos("allowed_repos", &raw.allowed_repos)?;
    let write_allowed_repos = repos("write_allowed_repos", &raw.write_allowed_repos)?;
    let sudo_allowed_users = match &raw.sudo_allowed_users {
        None => None,
        Some(list) => Allowed::parse(&list.join(",")).map_err(|e| wrong("sudo_allowed_users:", e))?,
    };
    let toolsets = raw
        .toolsets
        .as_ref()
        .map(|l| Selection::parse(&l.join(",")))
        .transpose()
        .map_err(|e| wrong("toolsets:", e))?;
    let names = |list: Option<Vec<String>>| {
        list.map(|l| l.into_iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect())
    };
    let seconds = |key: &str, v: Option<f64>| match v {
        None => Ok(None),
        Some(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => {
            Ok(Some(std::time::Duration::from_secs_f64(v)))
        }
        Some(_) => Err(wrong(key, "must be a number of seconds above 0 and at most 86400".into())),
    };
    Ok(Profile {
        connect_timeout: seconds("connect_timeout", raw.connect_timeout)?,
        timeout: seconds("timeout", raw.timeout)?,
        forge_max_concurrent: raw.forge_max_concurrent,
        name: name.to_owned(),
        url,
        flavor,
        credential,
        repositories,
        allowed_repos,
        write_allowed_repos,
        read_only: raw.read_only,
        sudo_allowed_users,
        toolsets,
        enabled_tools: names(raw.enabled_tools),
        disabled_tools: names(raw.disabled_tools),
        oauth,
    })
}

/// The profile's OAuth2 application: `oauth_client_id` with its secret by reference, both or
/// neither.
fn app(name: &str, raw: &RawProfile, env: EnvLookup<'_>) -> Result<Option<ProfileApp>, ConfigError> {
    let wrong = |why: &str| Err(ConfigError(format!("profile {name}: {why}")));
    let client_id = raw.oauth_client_id.as_deref().map(str::trim);
    let secret = match (&raw.oauth_client_secret_env, &raw.oauth_client_secret_file) {
        (Some(_), Some(_)) => {
            return wrong("oauth_client_secret_env and oauth_client_secret_file are both set: choose one");
        }
        (Some(variable), None) => Some(from_env(name, "oauth_client_secret_env", variable, env)?),
        (None, Some(path)) => Some(from_file(name, "oauth_client_secret_file", path)?),
        (None, None) => None,
    };
    match (client_id, secret) {
        (None, None) => Ok(None),
        (Some(""), _) => {
            wrong("oauth_client_id is empty: give the client id of the forge's OAuth2 application")
        }
        (Some(id), _) if id.len() > 256 || id.chars().any(char::is_control) => {
            wrong("oauth_client_id is not a client id (at most 256 characters, no control characters)")
        }
        (Some(_), None) => wrong(
            "oauth_client_id is set with no secret: add oauth_client_secret_env or oauth_client_secret_file",
        ),
        (None, Some(_)) => {
            wrong("the OAuth2 application's secret is set without oauth_client_id: sign-in needs both")
        }
        (Some(id), Some(client_secret)) => {
            if client_secret.expose_secret().len() > aegis_core::identity::MAX_TOKEN_BYTES {
                return wrong(
                    "the OAuth2 application's secret is too long; check that it holds only the secret",
                );
            }
            Ok(Some(ProfileApp { client_id: id.to_owned(), client_secret }))
        }
    }
}

/// The profile's credential: at most one kind; the secret read from where it is referenced.
fn credential(name: &str, raw: &RawProfile, env: EnvLookup<'_>) -> Result<ProfileCredential, ConfigError> {
    let given: Vec<&str> = [
        ("token_env", raw.token_env.is_some()),
        ("token_file", raw.token_file.is_some()),
        ("username", raw.username.is_some()),
    ]
    .into_iter()
    .filter(|(_, set)| *set)
    .map(|(key, _)| key)
    .collect();
    if let [first, second, ..] = given[..] {
        return Err(ConfigError(format!(
            "profile {name}: {first} and {second} are both set: choose one credential"
        )));
    }
    let max = aegis_core::identity::MAX_TOKEN_BYTES;
    let too_long = |key: &str, secret: &SecretString| {
        if secret.expose_secret().len() > max {
            Err(ConfigError(format!(
                "profile {name}: the secret from {key} is longer than {max} bytes; check that it holds only the token"
            )))
        } else {
            Ok(())
        }
    };
    if let Some(variable) = &raw.token_env {
        let token = from_env(name, "token_env", variable, env)?;
        too_long("token_env", &token)?;
        return Ok(ProfileCredential::TokenEnv { variable: variable.clone(), token });
    }
    if let Some(path) = &raw.token_file {
        let token = from_file(name, "token_file", path)?;
        too_long("token_file", &token)?;
        return Ok(ProfileCredential::TokenFile { path: path.clone(), token });
    }
    let password_given = raw.password_env.is_some() || raw.password_file.is_some();
    let Some(username) = raw.username.as_deref().map(str::trim) else {
        if password_given {
            return Err(ConfigError(format!(
                "profile {name}: password_env or password_file is set without username: Basic needs both"
            )));
        }
        return Ok(ProfileCredential::None);
    };
    if username.is_empty() || username.contains(':') {
        return Err(ConfigError(format!("profile {name}: username must be a login (not empty, no ':')")));
    }
    let (password, from) = match (&raw.password_env, &raw.password_file) {
        (Some(_), Some(_)) => {
            return Err(ConfigError(format!(
                "profile {name}: password_env and password_file are both set: choose one"
            )));
        }
        (Some(variable), None) => (from_env(name, "password_env", variable, env)?, "password_env"),
        (None, Some(path)) => (from_file(name, "password_file", path)?, "password_file"),
        (None, None) => {
            return Err(ConfigError(format!(
                "profile {name}: username is set with no password: add password_env or password_file"
            )));
        }
    };
    too_long(from, &password)?;
    Ok(ProfileCredential::Basic { username: username.to_owned(), password, from })
}

/// A secret from the environment variable named by `key`. The name is shown (it is not a
/// secret), unless it does not look like a name: then it may be the secret itself.
fn from_env(name: &str, key: &str, variable: &str, env: EnvLookup<'_>) -> Result<SecretString, ConfigError> {
    let is_name = !variable.is_empty()
        && variable.len() <= 128
        && !variable.starts_with(|c: char| c.is_ascii_digit())
        && variable.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !is_name {
        return Err(ConfigError(format!(
            "profile {name}: {key} must name an environment variable (letters, digits and '_'), not hold the secret"
        )));
    }
    match env(variable).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()) {
        Some(v) => Ok(SecretString::from(v)),
        None => Err(ConfigError(format!("profile {name}: {key} {variable} is not set"))),
    }
}

/// A secret from the file named by `key`, which other users must not be able to read.
fn from_file(name: &str, key: &str, path: &Path) -> Result<SecretString, ConfigError> {
    private_file(path)
        .map_err(|why| ConfigError(format!("profile {name}: {key} {} {why}", path.display())))?;
    read_secret_file(path, key).map_err(|e| ConfigError(format!("profile {name}: {}", e.0)))
}

/// Refuses a file that users other than its owner and group can read (following symlinks,
/// as Kubernetes' secret volumes are reached). Group read is accepted: a secret mounted
/// `0440` to the server's group is the project's own deployment.
#[cfg(unix)]
fn private_file(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    // A file that cannot be read is reported by the read that follows, with its reason.
    let Ok(meta) = std::fs::metadata(path) else { return Ok(()) };
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o004 != 0 {
        return Err(format!(
            "can be read by other users (mode {mode:04o}); chmod 600 it (or 640 for the server's group)"
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn private_file(_: &Path) -> Result<(), String> {
    Ok(())
}

/// A key name, clipped: what a person typed, shown back to find it (never a value).
fn clip(key: &str) -> String {
    key.chars().take(64).collect()
}

/// `line L, column C` of a byte offset.
fn position(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The source line holding byte `at`.
fn line_at(text: &str, at: usize) -> &str {
    let at = at.min(text.len());
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    &text[start..end]
}

/// The key a `key = value` line sets, if the line is one (the part left of `=`, a key's
/// characters only, so that no value is ever taken for it).
fn key_of_line(line: &str) -> Option<String> {
    let key = line.split('=').next()?.trim();
    let bare = !key.is_empty()
        && key.len() < line.len()
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    bare.then(|| clip(key))
}

/// The profile a `[forges.<name>]` header line names.
fn header_profile(line: &str) -> Option<String> {
    let inner = line.trim().strip_prefix('[')?.split(']').next()?.trim();
    let name = inner.strip_prefix("forges.")?.trim().trim_matches(['"', '\'']);
    Some(clip(name))
}

/// The profile whose table holds byte `at`: the last `[forges.<name>]` header before it.
fn profile_at(text: &str, at: usize) -> Option<String> {
    let before = &text[..at.min(text.len())];
    let header = before.lines().rev().find(|l| l.trim_start().starts_with('['))?;
    header_profile(header)
}

/// A TOML syntax error, by its position and kind: never the parser's `Display`, which quotes
/// the line (and so a secret on it).
fn syntax_error(file: &impl std::fmt::Display, text: &str, e: &toml::de::Error) -> ConfigError {
    let at = e.span().map_or(0, |s| s.start);
    let (line, column) = position(text, at);
    if e.message().starts_with("duplicate key") {
        let source = line_at(text, at);
        if source.trim_start().starts_with('[') {
            if let Some(name) = header_profile(source) {
                return ConfigError(format!(
                    "profiles file {file}: the profile {name} is defined twice (line {line})"
                ));
            }
        }
        let key = key_of_line(source).map_or(String::new(), |k| format!(" {k}"));
        return ConfigError(format!("profiles file {file}, line {line}: the key{key} is set twice"));
    }
    ConfigError(format!(
        "profiles file {file}, line {line}, column {column}: not valid TOML ({})",
        kind_only(e.message())
    ))
}

/// A well-formed file whose keys or values do not fit: the profile and the key, and what
/// was expected.
fn shape_error(
    file: &impl std::fmt::Display,
    text: &str,
    table: &toml::Table,
    e: &toml::de::Error,
) -> ConfigError {
    let at = e.span().map(|s| s.start);
    // The profile of the header above, or else (an inline table) the first that fails alone.
    let profile = at.and_then(|at| profile_at(text, at)).or_else(|| {
        let forges = table.get("forges")?.as_table()?;
        forges.iter().find(|(_, v)| RawProfile::deserialize((*v).clone()).is_err()).map(|(n, _)| clip(n))
    });
    let key = at.and_then(|at| key_of_line(line_at(text, at)));
    let (line, _) = position(text, at.unwrap_or(0));
    let what = serde_kind(e.message(), key.as_deref());
    match profile {
        Some(name) => ConfigError(format!("profile {name}: {what}")),
        None if at.is_some() => ConfigError(format!("profiles file {file}, line {line}: {what}")),
        None => ConfigError(format!("profiles file {file}: {what}")),
    }
}

/// serde's message in the program's words, with no value: serde's own quote values
/// (`invalid type: string "…"`, `unknown variant `…``), so only the names it gives of keys
/// and of what it expected are kept.
fn serde_kind(message: &str, key: Option<&str>) -> String {
    let first = message.lines().next().unwrap_or("");
    let expected = first.split_once(", expected ").map(|(_, e)| e);
    if let Some(rest) = first.strip_prefix("unknown field `") {
        let field = clip(rest.split('`').next().unwrap_or(""));
        if let Some((_, instead)) = LITERAL_SECRETS.iter().find(|(k, _)| *k == field) {
            return format!(
                "a {field} is written in the profiles file, which is refused: use {instead}, so that the profiles file holds no secret and need not be kept secret"
            );
        }
        let known = expected
            .map_or(String::new(), |e| format!(" (known: {})", e.replace('`', "").replace(" or ", ", ")));
        return format!("unknown key {field:?}{}", known.replace("one of ", ""));
    }
    if let Some(rest) = first.strip_prefix("missing field `") {
        return format!("{} is required", clip(rest.split('`').next().unwrap_or("")));
    }
    let key = key.map_or("a key".to_owned(), str::to_owned);
    if key == "flavor" {
        return "flavor must be auto, gitea or forgejo".into();
    }
    match expected {
        Some(e) => format!("{key} must be {}", e.replace('`', "")),
        None => format!("{key} has a value that does not fit"),
    }
}

/// The kind of a syntax error: the parser's message with anything quoted between backticks
/// longer than a token dropped (what it expected is a token; a longer quote may be source).
fn kind_only(message: &str) -> String {
    let first = message.lines().next().unwrap_or("");
    let mut out = String::new();
    for (i, part) in first.split('`').enumerate() {
        if i % 2 == 0 || part.chars().count() <= 3 {
            if i % 2 == 1 {
                out.push('`');
                out.push_str(part);
                out.push('`');
            } else {
                out.push_str(part);
            }
        } else {
            out.push('…');
        }
    }
    out.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A secret-looking value each test puts where it could leak, and checks never does.
    const SECRET: &str = "s3cr3t-7f9a1c0e-XYZZY";

    fn env(name: &str) -> Option<String> {
        match name {
            "WORK_TOKEN" => Some(format!("  {SECRET}\n")),
            "WORK_PASSWORD" => Some(SECRET.to_owned()),
            "EMPTY" => Some("  ".to_owned()),
            _ => None,
        }
    }

    struct Dir(tempfile::TempDir);

    impl Dir {
        fn new() -> Dir {
            Dir(tempfile::tempdir().unwrap())
        }
        fn file(&self, name: &str, text: &str, mode: u32) -> PathBuf {
            let path = self.0.path().join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            path
        }
        fn read(&self, text: &str) -> Result<Profiles, ConfigError> {
            Profiles::read(&self.file("profiles.toml", text, 0o644), &env)
        }
        /// The error for `text`, checked never to hold the secret.
        fn error(&self, text: &str) -> String {
            let e = self.read(text).unwrap_err().0;
            assert!(!e.contains(SECRET) && !e.contains("s3cr3t"), "the error shows the secret: {e}");
            e
        }
    }

    fn has(e: &str, parts: &[&str]) {
        for p in parts {
            assert!(e.contains(p), "{p:?} not in: {e}");
        }
    }

    #[test]
    fn the_issues_example_reads_in_file_order_with_its_default() {
        let d = Dir::new();
        let token = d.file("codeberg.token", &format!("{SECRET}\n"), 0o600);
        let p = d
            .read(&format!(
                r#"
default = "work"
[forges.work]
url = "https://git.example.com/api/v1"
token_env = "WORK_TOKEN"
repositories = ["acme/*"]
allowed_repos = ["acme/*", "me/notes"]
write_allowed_repos = ["acme/app"]
read_only = true
sudo_allowed_users = ["admin-bot"]
toolsets = ["core", "issues"]
enabled_tools = []
disabled_tools = ["repoDelete"]
[forges.codeberg]
url = "https://codeberg.org"
flavor = "forgejo"
token_file = "{}"
[forges.home]
url = "http://192.168.1.5:3000"
username = "me"
password_env = "WORK_PASSWORD"
"#,
                token.display()
            ))
            .unwrap();
        assert_eq!(p.default.as_deref(), Some("work"));
        let names: Vec<&str> = p.forges.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["work", "codeberg", "home"]);
        let work = &p.forges[0];
        assert_eq!(work.url.as_str(), "https://git.example.com/");
        assert_eq!(work.flavor, FlavorChoice::Auto);
        assert_eq!(work.read_only, Some(true));
        assert!(work.repositories.is_some() && work.sudo_allowed_users.is_some());
        assert_eq!(work.disabled_tools.as_ref().unwrap().iter().collect::<Vec<_>>(), ["repoDelete"]);
        assert_eq!(work.credential.describe(), "token from token_env WORK_TOKEN");
        assert_eq!(p.forges[1].flavor, FlavorChoice::Forgejo);
        assert!(p.forges[1].credential.describe().starts_with("token from token_file "));
        assert!(p.forges[1].own_settings().is_empty());
        assert_eq!(p.forges[2].credential.describe(), "Basic as me with the password from password_env");
        // The secrets are known for redaction, trimmed, and shown by no Debug.
        let secrets = p.secrets();
        assert_eq!(secrets.iter().filter(|s| *s == SECRET).count(), 3, "token_env, token_file, password");
        assert!(!format!("{p:?}").contains(SECRET));
    }

    #[test]
    fn one_profile_is_the_default_and_several_may_have_none() {
        let d = Dir::new();
        let p = d.read("[forges.solo]\nurl = \"https://g.example\"\n").unwrap();
        assert_eq!(p.default.as_deref(), Some("solo"));
        assert!(matches!(p.forges[0].credential, ProfileCredential::None));
        let p = d
            .read("[forges.a]\nurl = \"https://a.example\"\n[forges.b]\nurl = \"https://b.example\"\n")
            .unwrap();
        assert_eq!(p.default, None);
    }

    #[test]
    fn a_missing_file_is_named_with_its_setting() {
        let e = Profiles::read(Path::new("/nonexistent/p.toml"), &env).unwrap_err().0;
        has(&e, &["cannot read the profiles file /nonexistent/p.toml", "GITEA_PROFILES", "not found"]);
    }

    #[test]
    fn a_syntax_error_gives_its_line_and_kind_never_the_line_itself() {
        let d = Dir::new();
        let e = d.error(&format!(
            "default = \"work\"\n[forges.work]\nurl = \"https://g.example\"\ntoken_env = \"{SECRET}"
        ));
        has(&e, &["profiles.toml, line 4", "not valid TOML"]);
        let e = d.error(&format!("[forges.work]\nurl = {SECRET}\n"));
        has(&e, &["line 2", "not valid TOML"]);
    }

    #[test]
    fn a_profile_sets_its_own_timeouts_and_forge_slots_within_bounds() {
        let d = Dir::new();
        let e = d.error("[forges.work]\nurl = \"https://g.example\"\ntimeout = -1\n");
        has(&e, &["profile work: timeout must be a number of seconds above 0"]);
        let e = d.error("[forges.work]\nurl = \"https://g.example\"\nforge_max_concurrent = \"many\"\n");
        has(&e, &["profile work", "forge_max_concurrent"]);
    }

    #[test]
    fn an_unknown_key_is_named_with_the_known_ones_never_its_value() {
        let d = Dir::new();
        let e = d.error(&format!("[forges.work]\nurl = \"https://g.example\"\ntokne_env = \"{SECRET}\"\n"));
        has(&e, &["profile work: unknown key \"tokne_env\"", "known: url, flavor, token_env"]);
        let e = d.error("defualt = \"work\"\n[forges.work]\nurl = \"https://g.example\"\n");
        has(&e, &["unknown key \"defualt\"", "known: default, forges"]);
        // Inline, the profile is still named.
        let e = d.error(&format!(
            "forges = {{ work = {{ url = \"https://g.example\", tokne = \"{SECRET}\" }} }}\n"
        ));
        has(&e, &["profile work: unknown key \"tokne\""]);
    }

    #[test]
    fn a_value_of_the_wrong_type_names_the_key_and_what_it_must_be() {
        let d = Dir::new();
        let e = d.error(&format!("[forges.work]\nurl = \"https://g.example\"\nread_only = \"{SECRET}\"\n"));
        has(&e, &["profile work: read_only must be a boolean"]);
        let e = d.error("[forges.work]\nflavor = \"gitea\"\n");
        has(&e, &["profile work: url is required"]);
    }

    #[test]
    fn a_profile_defined_twice_is_named() {
        let d = Dir::new();
        let e = d.error(
            "[forges.work]\nurl = \"https://a.example\"\n[forges.work]\nurl = \"https://b.example\"\n",
        );
        has(&e, &["the profile work is defined twice (line 3)"]);
    }

    #[test]
    fn a_name_must_be_a_dns_label() {
        let d = Dir::new();
        for bad in ["my forge", "-x", "x-", "a_b", "Work", &"a".repeat(64), ""] {
            let e = d.error(&format!("[forges.\"{bad}\"]\nurl = \"https://g.example\"\n"));
            has(&e, &["a name must be a DNS label"]);
        }
        for good in ["a", "work-2", &"a".repeat(63)] {
            assert!(d.read(&format!("[forges.\"{good}\"]\nurl = \"https://g.example\"\n")).is_ok(), "{good}");
        }
    }

    #[test]
    fn default_must_name_a_profile() {
        let d = Dir::new();
        let e = d.error("default = \"wrok\"\n[forges.work]\nurl = \"https://a.example\"\n[forges.codeberg]\nurl = \"https://codeberg.org\"\n");
        has(&e, &["default = \"wrok\" names no profile (profiles: work, codeberg)"]);
        let e = d.error("default = \"x\"\n");
        has(&e, &["names no profile"]);
    }

    #[test]
    fn a_url_is_http_or_https_with_a_host_and_no_credentials() {
        let d = Dir::new();
        for bad in
            ["git.example.com", "ftp://g.example", &format!("https://me:{SECRET}@g.example"), "https://"]
        {
            let e = d.error(&format!("[forges.work]\nurl = \"{bad}\"\n"));
            has(&e, &["profile work: url"]);
        }
    }

    #[test]
    fn a_flavor_is_auto_gitea_or_forgejo() {
        let d = Dir::new();
        let e = d.error(&format!("[forges.work]\nurl = \"https://g.example\"\nflavor = \"{SECRET}\"\n"));
        has(&e, &["profile work: flavor must be auto, gitea or forgejo"]);
    }

    #[test]
    fn two_credential_kinds_are_refused() {
        let d = Dir::new();
        let e = d.error(
            "[forges.work]\nurl = \"https://g.example\"\ntoken_env = \"WORK_TOKEN\"\ntoken_file = \"/x\"\n",
        );
        has(&e, &["profile work: token_env and token_file are both set"]);
        let e = d.error("[forges.work]\nurl = \"https://g.example\"\ntoken_env = \"WORK_TOKEN\"\nusername = \"me\"\npassword_env = \"WORK_PASSWORD\"\n");
        has(&e, &["profile work: token_env and username are both set"]);
        let e = d.error("[forges.work]\nurl = \"https://g.example\"\nusername = \"me\"\npassword_env = \"WORK_PASSWORD\"\npassword_file = \"/x\"\n");
        has(&e, &["profile work: password_env and password_file are both set"]);
        let e = d.error("[forges.work]\nurl = \"https://g.example\"\nusername = \"me\"\n");
        has(&e, &["profile work: username is set with no password"]);
        let e = d.error("[forges.work]\nurl = \"https://g.example\"\npassword_env = \"WORK_PASSWORD\"\n");
        has(&e, &["profile work: password_env or password_file is set without username"]);
    }

    #[test]
    fn a_profile_takes_an_oauth_app_by_reference_and_every_bad_one_gets_one_clear_message() {
        let d = Dir::new();
        let good = d.file("app-secret", &format!("{SECRET}\n"), 0o600);
        let p = d
            .read(&format!(
                "[forges.work]\nurl = \"https://g.example\"\noauth_client_id = \"app-1\"\noauth_client_secret_env = \"WORK_TOKEN\"\n[forges.home]\nurl = \"https://h.example\"\noauth_client_id = \" app-2 \"\noauth_client_secret_file = \"{}\"\n[forges.plain]\nurl = \"https://p.example\"\n",
                good.display()
            ))
            .unwrap();
        let apps: Vec<_> = p.forges.iter().map(|f| f.oauth.as_ref().map(|a| a.client_id.as_str())).collect();
        assert_eq!(apps, [Some("app-1"), Some("app-2"), None]);
        // Both secrets are known for redaction; no Debug shows one.
        assert_eq!(p.secrets().iter().filter(|s| *s == SECRET).count(), 2);
        assert!(!format!("{p:?}").contains(SECRET));
        let base = "[forges.work]\nurl = \"https://g.example\"\n";
        let cases: Vec<(String, &str)> = vec![
            (
                format!("{base}oauth_client_secret = \"{SECRET}\"\n"),
                "a oauth_client_secret is written in the profiles file, which is refused: use oauth_client_secret_env or oauth_client_secret_file",
            ),
            (
                format!("{base}oauth_client_id = \"app\"\n"),
                "profile work: oauth_client_id is set with no secret",
            ),
            (
                format!("{base}oauth_client_secret_env = \"WORK_TOKEN\"\n"),
                "profile work: the OAuth2 application's secret is set without oauth_client_id",
            ),
            (
                format!("{base}oauth_client_id = \"\"\noauth_client_secret_env = \"WORK_TOKEN\"\n"),
                "profile work: oauth_client_id is empty",
            ),
            (
                format!(
                    "{base}oauth_client_id = \"a\"\noauth_client_secret_env = \"WORK_TOKEN\"\noauth_client_secret_file = \"/x\"\n"
                ),
                "profile work: oauth_client_secret_env and oauth_client_secret_file are both set",
            ),
            (
                format!("{base}oauth_client_id = \"a\"\noauth_client_secret_env = \"UNSET_APP_SECRET\"\n"),
                "profile work: oauth_client_secret_env UNSET_APP_SECRET is not set",
            ),
            (
                format!("{base}oauth_client_id = \"a\"\noauth_client_secret_env = \"{SECRET}\"\n"),
                "profile work: oauth_client_secret_env must name an environment variable",
            ),
            (
                format!("{base}oauth_client_id = \"a\"\noauth_client_secret_file = \"/nonexistent/s\"\n"),
                "profile work: cannot read the oauth_client_secret_file /nonexistent/s",
            ),
        ];
        for (text, words) in &cases {
            has(&d.error(text), &[words]);
        }
        let open = d.file("open-secret", SECRET, 0o644);
        let e = d.error(&format!(
            "{base}oauth_client_id = \"a\"\noauth_client_secret_file = \"{}\"\n",
            open.display()
        ));
        has(&e, &["profile work: oauth_client_secret_file", "can be read by other users", "chmod 600"]);
        // At most MAX_SIGN_IN_PROFILES profiles take sign-in.
        let many: String = (0..=MAX_SIGN_IN_PROFILES)
            .map(|i| {
                format!("[forges.f{i}]\nurl = \"https://f{i}.example\"\noauth_client_id = \"a\"\noauth_client_secret_env = \"WORK_TOKEN\"\n")
            })
            .collect();
        has(&d.error(&many), &["4 profiles set oauth_client_id (f0, f1, f2, f3); at most 3 may"]);
    }

    #[test]
    fn token_env_names_a_variable_that_is_set() {
        let d = Dir::new();
        for unset in ["WORK_GITEA_TOKEN", "EMPTY"] {
            let e =
                d.error(&format!("[forges.work]\nurl = \"https://g.example\"\ntoken_env = \"{unset}\"\n"));
            has(&e, &[&format!("profile work: token_env {unset} is not set")]);
        }
        // The token itself written where its variable's name goes is not echoed.
        let e = d.error(&format!("[forges.work]\nurl = \"https://g.example\"\ntoken_env = \"{SECRET}\"\n"));
        has(&e, &["profile work: token_env must name an environment variable"]);
    }

    #[test]
    fn token_file_must_exist_hold_a_token_and_be_unreadable_by_others() {
        let d = Dir::new();
        let with = |path: &Path| {
            format!(
                "[forges.codeberg]\nurl = \"https://codeberg.org\"\ntoken_file = \"{}\"\n",
                path.display()
            )
        };
        let e = d.error(&with(Path::new("/nonexistent/t")));
        has(&e, &["profile codeberg: cannot read the token_file /nonexistent/t", "not found"]);
        let empty = d.file("empty", " \n", 0o600);
        has(&d.error(&with(&empty)), &["profile codeberg: the token_file", "is empty"]);
        for mode in [0o644, 0o604, 0o666] {
            let open = d.file("open", SECRET, mode);
            let e = d.error(&with(&open));
            has(
                &e,
                &[
                    "profile codeberg: token_file",
                    "can be read by other users",
                    &format!("(mode {mode:04o})"),
                    "chmod 600",
                ],
            );
        }
        // Group read is the project's own Kubernetes mount (0440 to the server's group).
        for mode in [0o600, 0o640, 0o440, 0o400] {
            let fine = d.file("fine", SECRET, mode);
            assert!(d.read(&with(&fine)).is_ok(), "{mode:o}");
        }
        // A symlink (itself 0777, like Kubernetes' ..data links) is judged by its target.
        let target = d.file("target", SECRET, 0o600);
        let link = d.0.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(d.read(&with(&link)).is_ok());
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        has(&d.error(&with(&link)), &["can be read by other users"]);
        // The same for a password file.
        let open = d.file("pw", SECRET, 0o644);
        let e = d.error(&format!(
            "[forges.home]\nurl = \"https://h.example\"\nusername = \"me\"\npassword_file = \"{}\"\n",
            open.display()
        ));
        has(&e, &["profile home: password_file", "can be read by other users"]);
    }

    #[test]
    fn a_literal_secret_in_the_file_is_refused_saying_what_to_use() {
        let d = Dir::new();
        let e = d.error(&format!("[forges.work]\nurl = \"https://g.example\"\ntoken = \"{SECRET}\"\n"));
        has(
            &e,
            &[
                "profile work: a token is written in the profiles file",
                "token_env or token_file",
                "need not be kept secret",
            ],
        );
        let e = d.error(&format!(
            "[forges.work]\nurl = \"https://g.example\"\nusername = \"me\"\npassword = \"{SECRET}\"\n"
        ));
        has(&e, &["profile work: a password is written", "password_env or password_file"]);
        // Refused in a private file too: the file is meant to hold no secret at all.
        let path = d.file(
            "private.toml",
            &format!("[forges.work]\nurl = \"https://g.example\"\ntoken = \"{SECRET}\"\n"),
            0o600,
        );
        assert!(Profiles::read(&path, &env).unwrap_err().0.contains("a token is written"));
    }

    #[test]
    fn repository_patterns_must_parse_and_never_route_everything() {
        let d = Dir::new();
        let e = d.error("[forges.work]\nurl = \"https://g.example\"\nrepositories = [\"acme/x/y\"]\n");
        has(&e, &["profile work: repositories:"]);
        let e = d.error("[forges.work]\nurl = \"https://g.example\"\nrepositories = [\"*\"]\n");
        has(&e, &["profile work: repositories cannot hold `*`"]);
        let e = d.error("[forges.work]\nurl = \"https://g.example\"\nallowed_repos = [\"a/b,c/d\"]\n");
        has(&e, &["profile work: allowed_repos takes one pattern per string"]);
        let e = d.error("[forges.work]\nurl = \"https://g.example\"\nwrite_allowed_repos = []\n");
        has(&e, &["profile work: write_allowed_repos:"]);
        let e = d.error("[forges.work]\nurl = \"https://g.example\"\ntoolsets = [\"nope\"]\n");
        has(&e, &["profile work: toolsets:"]);
    }

    #[test]
    fn a_file_with_no_profile_is_refused() {
        let d = Dir::new();
        has(&d.error(""), &["names no profile", "[forges.<name>]"]);
    }
}
