//! Sign-in with the forge: an OAuth 2.1 authorization server in front of the forge's own.
//!
//! MCP clients discover an authorization server, register, and send the person to a sign-in
//! page; Gitea and Forgejo have no dynamic registration, so the server plays that part for
//! them and uses the one OAuth2 application the operator registered on the forge:
//!
//! ```text
//! client ─/register─▶ us          (client id = its registration, sealed)
//! client ─/authorize─▶ us ─302─▶ forge consent ─302─▶ us /oauth/callback ─302─▶ client
//! client ─/token (code + PKCE)─▶ us ─(forge code)─▶ forge /login/oauth/access_token
//! client ─/mcp, Bearer aegis-at.…─▶ us ─(forge access token, Bearer)─▶ forge /api/v1
//! ```
//!
//! Everything handed out is sealed with the key of `MCP_OAUTH_KEY_FILE` (`seal.rs`): the
//! forge's tokens travel inside our tokens, readable only by a server holding the key, and
//! bound to this server's URL (RFC 8707 audience). No store: replicas sharing the key accept
//! each other's clients, codes and tokens. Single use is kept twice: each replica refuses a
//! code or refresh token it has already seen without asking the forge, and the forge itself
//! refuses a second exchange of its code (and an old refresh token, when it is set to
//! invalidate them: Gitea's `[oauth2] INVALIDATE_REFRESH_TOKENS`).
//!
//! This module decides; `transport/oauth.rs` speaks HTTP; `executor/oauth.rs` asks the forge.

mod error;
pub(crate) mod form;
pub mod seal;
pub(crate) mod used;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use url::Url;

use crate::config::OAuthSettings;
use crate::executor::Forge;
use crate::executor::oauth::{ForgeGrant, ForgeRefusal};
use crate::identity::{Grant, header};
use aegis_core::error::Shown;
pub(crate) use error::OAuthError;
use form::{ApproveForm, AuthorizeQuery, CallbackQuery, CodeGrant, Param, RefreshGrant, TokenGrant};
use seal::{Kind, Sealer};
use used::{NotFirst, Use, UsedOnce};

/// The scopes a client may ask for. `read` alone signs in a read-only identity; `write`
/// includes reading.
pub(crate) const SCOPES: [&str; 2] = ["read", "write"];
/// How long a person has to sign in on the forge.
const PENDING_LIFETIME: Duration = Duration::from_secs(600);
/// How long an authorization code lives.
const CODE_LIFETIME: Duration = Duration::from_secs(60);
/// The longest an access token lives (shorter when the forge's token expires sooner).
const ACCESS_LIFETIME: Duration = Duration::from_secs(3600);
/// How long a refresh token lives.
const REFRESH_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// Most redirect URIs per client, and their longest length.
const MAX_REDIRECT_URIS: usize = 5;
const MAX_URI_CHARS: usize = 512;
/// Longest `state`, `client_name` and PKCE values accepted.
const MAX_STATE_CHARS: usize = 512;
const MAX_NAME_CHARS: usize = 200;
/// Whether `text` has the shape of a value this server issues (a client id, state, code,
/// access or refresh token): such a value is never sent to the forge as a token.
pub(crate) fn looks_issued(text: &str) -> bool {
    [Kind::Client, Kind::Pending, Kind::Approved, Kind::Code, Kind::Access, Kind::Refresh]
        .iter()
        .any(|k| text.starts_with(k.prefix()))
}
/// Longest code accepted from the forge (Gitea's are 43 characters).
const MAX_FORGE_CODE_CHARS: usize = 512;
/// The path of the callback on this server that the forge's application must allow.
pub(crate) const CALLBACK_PATH: &str = "/oauth/callback";

/// The callback of the forge of `profile`: `/oauth/callback/<profile>`, each forge's own, so
/// that the path says which forge a code comes from; `/oauth/callback` for the one forge of
/// the environment settings.
pub(crate) fn callback_path(profile: Option<&str>) -> String {
    match profile {
        None => CALLBACK_PATH.to_owned(),
        Some(p) => format!("{CALLBACK_PATH}/{p}"),
    }
}

/// The forge client of a profile (`None`: the default forge), for the authorization server:
/// the server's forges, or in a test one forge for every profile.
pub(crate) trait ForgeOf {
    fn forge_of(&self, profile: Option<&str>) -> Option<&Forge>;
}

impl ForgeOf for Forge {
    fn forge_of(&self, _: Option<&str>) -> Option<&Forge> {
        Some(self)
    }
}

/// No forge at all: the one-forge callback, which asks none.
#[cfg(test)]
struct NoForge;

#[cfg(test)]
impl ForgeOf for NoForge {
    fn forge_of(&self, _: Option<&str>) -> Option<&Forge> {
        None
    }
}

/// The OAuth2 application this server uses on one forge.
#[derive(Debug)]
struct App {
    /// Its profile (`None`: the one forge of the environment settings).
    profile: Option<String>,
    client_id: String,
    secret: SecretString,
}

/// Where `/authorize` and the callback send the browser, or the page they show instead.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Browser {
    /// 302 to this URL (the forge's consent page, or back to the client).
    Redirect(String),
    /// A page for the person: the request cannot be sent back to any client safely.
    Page { status: u16, message: String },
    /// A page that tells the person something (a forge left out of the sign-in) and links
    /// on to `next`, where the sign-in goes on.
    Notice { message: String, next: String },
    /// This server's own consent page: which client asks, where the answer goes, what it may
    /// do. The browser gets the sign-in's `browser` id as a cookie; only the browser that
    /// holds it can approve the request and finish the sign-in.
    Consent(Consent),
}

/// What the consent page shows, and the sealed sign-in it approves.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Consent {
    /// The client's name as it gave it (unverified), or its client id URL.
    pub(crate) client: String,
    /// Where the answer goes: the redirect URI's scheme, host and port.
    pub(crate) redirect_to: String,
    /// Held to reads.
    pub(crate) read_only: bool,
    /// The sealed sign-in (the form's hidden field, then the forge's `state`).
    pub(crate) pending: String,
    /// The browser binding, for the cookie.
    pub(crate) browser: String,
    /// With several forges, the ones the person signs in on next, one after the other
    /// (`name (URL)`); none with the one forge.
    pub(crate) forges: Vec<String>,
}

/// The cookie that binds a sign-in to the browser that approved it (over https its name
/// carries the `__Host-` prefix: only this host, over https, may set it).
const COOKIE: &str = "aegis-signin";

/// What the `Authorization` header's token turned out to be.
pub(crate) enum Presented {
    /// Not a token of this server: a forge token, handled as before.
    NotOurs,
    /// Ours and valid.
    Valid(Grant),
    /// Ours and valid, signed in on several forges: each forge's grant, by profile.
    Forges(Vec<(String, Grant)>),
    /// Ours, but unusable; the words say why.
    Invalid(&'static str),
}

/// The authorization server.
#[derive(Debug)]
pub struct OAuth {
    /// This server's URL, without a trailing `/`.
    issuer: String,
    /// The resource identifier clients name (the MCP endpoint).
    resource: String,
    /// Every spelling of this server accepted as an audience.
    audiences: Vec<String>,
    /// One application per forge that takes sign-in.
    apps: Vec<App>,
    sealer: Sealer,
    used: UsedOnce,
    /// Client ID metadata documents may be fetched over plain HTTP only when the server
    /// itself is on loopback (a local test); otherwise HTTPS.
    http_documents: bool,
    /// Client ID metadata documents being fetched at once, at most `MAX_DOCUMENT_FETCHES`:
    /// `/authorize` needs no credential, so it must not become a way to make the server
    /// fetch without end.
    documents: tokio::sync::Semaphore,
    /// Client ID metadata documents read recently, by URL (expiry, client): a client that
    /// signs people in again is not fetched again, nor held up by others' slow documents.
    known_documents: std::sync::Mutex<std::collections::HashMap<String, (u64, Client)>>,
    /// App schemes the operator accepts in redirect URIs (`MCP_OAUTH_REDIRECT_SCHEMES`).
    redirect_schemes: Vec<String>,
    /// What every lifetime is judged by.
    clock: Clock,
}

/// How long a client ID metadata document is trusted, and how many are remembered.
const DOCUMENT_LIFETIME: Duration = Duration::from_secs(300);
const MAX_KNOWN_DOCUMENTS: usize = 1024;

/// Most client ID metadata documents fetched at once.
const MAX_DOCUMENT_FETCHES: usize = 16;

/// A client registered dynamically; its client id is this, sealed.
#[derive(Serialize, Deserialize)]
struct Registration {
    /// Redirect URIs.
    r: Vec<String>,
    /// Client name.
    n: Option<String>,
    /// Issued at (Unix seconds).
    t: u64,
}

/// The sign-in in progress, sent to the forge as `state` and back to our callback.
#[derive(Serialize, Deserialize)]
struct Pending {
    /// Hash of the client id.
    c: String,
    /// The client's redirect URI.
    r: String,
    /// The client's state.
    s: String,
    /// The client's PKCE challenge (S256).
    ch: String,
    /// Granted scope.
    sc: String,
    /// The resource (audience).
    res: String,
    /// Our PKCE verifier towards the forge.
    fv: String,
    /// The browser that may approve and finish it (the cookie's value).
    b: String,
    /// Unique id: the callback accepts a sign-in once.
    id: String,
    /// Expires (Unix seconds).
    e: u64,
    /// The generation of the shared store's memory it was issued under (0: none known).
    #[serde(default, skip_serializing_if = "is_zero")]
    g: u64,
    /// With several forges: the profile this hop was sent to (its callback must be that
    /// profile's), the profiles still to visit, the grants got so far (sealed here, never in
    /// clear to another forge), and the forges left out, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    p: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    n: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    gs: Vec<Got>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    dr: Vec<String>,
}

/// What one forge granted during a sign-in on several forges.
#[derive(Serialize, Deserialize, Clone)]
struct Got {
    /// The profile.
    p: String,
    /// The forge's access token.
    a: String,
    /// Its refresh token, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    r: Option<String>,
    /// When the access token expires (Unix seconds; 0: not said).
    #[serde(default, skip_serializing_if = "is_zero")]
    x: u64,
}

/// An authorization code: the pending sign-in plus the forge's code.
#[derive(Serialize, Deserialize)]
struct Code {
    c: String,
    r: String,
    ch: String,
    sc: String,
    res: String,
    fv: String,
    /// The forge's authorization code.
    f: String,
    e: u64,
    /// Unique id, for single use.
    id: String,
    /// The generation of the shared store's memory it was issued under (0: none known).
    #[serde(default, skip_serializing_if = "is_zero")]
    g: u64,
    /// With several forges: every forge's grant, got at its callback (`f` and `fv` empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    gs: Vec<Got>,
}

impl OAuth {
    /// The code of an approved sign-in: the client's request as `pending` kept it, the forge's
    /// code and verifier (`fv`, `f`; empty with several forges) or every forge's grant (`gs`),
    /// unique, single use, short-lived.
    fn code_of(&self, pending: &Pending, (fv, f): (String, String), gs: Vec<Got>) -> Code {
        Code {
            c: pending.c.clone(),
            r: pending.r.clone(),
            ch: pending.ch.clone(),
            sc: pending.sc.clone(),
            res: pending.res.clone(),
            fv,
            f,
            e: self.clock.now() + CODE_LIFETIME.as_secs(),
            id: self.sealer.random_text(16),
            g: self.used.generation(),
            gs,
        }
    }
}

/// An access token.
#[derive(Serialize, Deserialize)]
struct Access {
    c: String,
    sc: String,
    res: String,
    /// The forge's access token.
    f: String,
    e: u64,
    /// With several forges: each forge's access token, by profile (`f` empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fs: Vec<(String, String)>,
}

/// A refresh token.
#[derive(Serialize, Deserialize)]
struct Refresh {
    c: String,
    sc: String,
    res: String,
    /// The forge's refresh token.
    f: String,
    e: u64,
    id: String,
    /// The generation of the shared store's memory it was issued under (0: none known).
    #[serde(default, skip_serializing_if = "is_zero")]
    g: u64,
    /// With several forges: each forge's refresh token, by profile (`f` empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fs: Vec<(String, String)>,
}

/// What a client redeems at the token endpoint: a code or a refresh token.
trait Redeemable: serde::de::DeserializeOwned {
    const KIND: Kind;
    /// The form field it comes in.
    const FIELD: &'static str;
    /// How messages name it.
    const WHAT: &'static str;
    fn expires(&self) -> u64;
    /// The hash of the client id it was issued to.
    fn client(&self) -> &str;
}

impl Redeemable for Code {
    const KIND: Kind = Kind::Code;
    const FIELD: &'static str = "code";
    const WHAT: &'static str = "code";
    fn expires(&self) -> u64 {
        self.e
    }
    fn client(&self) -> &str {
        &self.c
    }
}

impl Redeemable for Refresh {
    const KIND: Kind = Kind::Refresh;
    const FIELD: &'static str = "refresh_token";
    const WHAT: &'static str = "refresh token";
    fn expires(&self) -> u64 {
        self.e
    }
    fn client(&self) -> &str {
        &self.c
    }
}

/// A client as `/authorize` knows it.
#[derive(Debug, Clone)]
struct Client {
    redirect_uris: Vec<String>,
    /// The name the client gave itself (unverified).
    name: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The time, in seconds since the Unix epoch, by which the sign-in server judges every
/// lifetime (pending sign-ins, codes, access and refresh tokens, documents): the system's
/// clock, moved forward by `advance` — which only a test calls, to let a lifetime pass
/// without waiting for it.
#[derive(Debug, Default)]
pub struct Clock {
    ahead: std::sync::atomic::AtomicU64,
}

impl Clock {
    /// Now, by this clock.
    pub(crate) fn now(&self) -> u64 {
        now().saturating_add(self.ahead.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Move this clock `by` forward (a test's way to let time pass).
    #[doc(hidden)]
    pub fn advance(&self, by: std::time::Duration) {
        self.ahead.fetch_add(by.as_secs(), std::sync::atomic::Ordering::Relaxed);
    }
}

/// What a browser id looks like (`Sealer::random_text(16)`).
fn valid_browser_id(b: &str) -> bool {
    b.len() == 22 && b.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
}

/// A client without a name, for the consent page: its client id URL, or "an unnamed client".
fn client_label(client_id: &str) -> String {
    if client_id.starts_with("https://") || client_id.starts_with("http://") {
        client_id.chars().take(MAX_URI_CHARS).collect()
    } else {
        "an unnamed client".to_owned()
    }
}

/// A short hash of a client id (client ids of registered clients can be kilobytes).
fn client_hash(client_id: &str) -> String {
    URL_SAFE_NO_PAD.encode(&Sha256::digest(client_id.as_bytes())[..16])
}

/// PKCE S256: base64url(SHA-256(verifier)).
pub(crate) fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// RFC 7636: 43 to 128 characters of `[A-Za-z0-9-._~]`.
fn valid_pkce(value: &str) -> bool {
    (43..=128).contains(&value.len())
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// The requested scope, normalised to `read` or `read write`; none asked means both.
fn parse_scope(scope: Option<&str>) -> Result<&'static str, OAuthError> {
    let words: Vec<&str> = scope.unwrap_or("").split_ascii_whitespace().collect();
    if let Some(unknown) = words.iter().find(|w| !SCOPES.contains(w)) {
        return Err(OAuthError::new(
            400,
            "invalid_scope",
            format!("unknown scope {unknown:?}; this server offers `read` and `write`"),
        ));
    }
    Ok(if words.is_empty() || words.contains(&"write") { "read write" } else { "read" })
}

/// Whether a redirect URI is one a client may register (RFC 8252, the MCP authorization
/// spec): absolute, no fragment; https to a host; http to a loopback host (a native app's
/// listener); or an app's own scheme named after a domain in reverse order
/// (`com.example.app:/callback`, RFC 8252 §7.1), or one the operator listed. Nothing else:
/// a list of refused schemes always misses one a browser treats specially.
pub(crate) fn valid_redirect_uri(uri: &str, extra_schemes: &[String]) -> Result<(), Shown> {
    if uri.chars().count() > MAX_URI_CHARS {
        return Err(format!("a redirect URI is longer than {MAX_URI_CHARS} characters"));
    }
    let url = Url::parse(uri).map_err(|e| format!("redirect URI {uri:?} is not an absolute URL ({e})"))?;
    if url.fragment().is_some() {
        return Err(format!("redirect URI {uri:?} must not have a fragment"));
    }
    match url.scheme() {
        "https" if url.host().is_some() => Ok(()),
        "http" if is_loopback(&url) => Ok(()),
        "http" | "https" => Err(format!(
            "redirect URI {uri:?} must use https to a host (http is allowed only for loopback hosts)"
        )),
        scheme if is_reverse_domain(scheme) && !crate::config::NEVER_REDIRECT_SCHEMES.contains(&scheme) => {
            Ok(())
        }
        scheme if extra_schemes.iter().any(|s| s == scheme) => Ok(()),
        _ => Err(format!(
            "redirect URI {uri:?} uses a scheme that cannot receive a code safely; use https, http to a loopback address, or an app's own scheme named after a domain it controls in reverse order (com.example.app:/callback)"
        )),
    }
}

/// A private-use scheme in reverse-domain form: two or more dot-separated labels of letters,
/// digits and `-` (`com.example.app`).
fn is_reverse_domain(scheme: &str) -> bool {
    let mut labels = 0;
    for label in scheme.split('.') {
        let ok = !label.is_empty()
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            return false;
        }
        labels += 1;
    }
    labels >= 2
}

/// Whether `asked` is the registered redirect URI: exactly, or for a loopback IP address over
/// http with any port (RFC 8252 §7.3: native apps listen on whatever port is free).
pub(crate) fn same_redirect(registered: &str, asked: &str) -> bool {
    if registered == asked {
        return true;
    }
    let (Ok(mut a), Ok(mut b)) = (Url::parse(registered), Url::parse(asked)) else { return false };
    let loopback_ip = |u: &Url| {
        u.scheme() == "http" && matches!(u.host(), Some(url::Host::Ipv4(ip)) if ip.is_loopback())
            || u.scheme() == "http" && matches!(u.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
    };
    if !loopback_ip(&a) || !loopback_ip(&b) {
        return false;
    }
    let _ = a.set_port(None);
    let _ = b.set_port(None);
    a == b
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// `callback_path` of a profile named in a path.
fn callback_path_of(profile: &str) -> String {
    callback_path(Some(profile))
}

/// Go on to `next`: at once, or, when forges were left out just now, after a page that names
/// them (`then` says where the link leads).
fn notice(dropped: &[String], then: &str, next: String) -> Browser {
    if dropped.is_empty() {
        return Browser::Redirect(next);
    }
    Browser::Notice {
        message: format!(
            "Left out of this sign-in: {}. Continue to sign in without it: {then}.",
            dropped.join("; ")
        ),
        next,
    }
}

/// `url` with `pairs` added to its query.
fn with_query(url: &str, pairs: &[(&str, &str)]) -> String {
    match Url::parse(url) {
        Ok(mut u) => {
            u.query_pairs_mut().extend_pairs(pairs);
            u.into()
        }
        Err(_) => url.to_owned(),
    }
}

impl OAuth {
    /// The authorization server `settings` describe, for clients reaching `mcp_path`.
    pub(crate) fn new(settings: &OAuthSettings, mcp_path: &str) -> OAuth {
        let issuer = settings.public_url.clone();
        let resource = format!("{issuer}{mcp_path}");
        let audiences = vec![resource.clone(), format!("{resource}/"), issuer.clone(), format!("{issuer}/")];
        let http_documents = Url::parse(&issuer).is_ok_and(|u| is_loopback(&u));
        OAuth {
            issuer,
            resource,
            audiences,
            apps: settings
                .apps
                .iter()
                .map(|a| App {
                    profile: a.profile.clone(),
                    client_id: a.client_id.clone(),
                    secret: a.client_secret.clone(),
                })
                .collect(),
            sealer: Sealer::new(&settings.key),
            used: UsedOnce::new(100_000),
            http_documents,
            documents: tokio::sync::Semaphore::new(MAX_DOCUMENT_FETCHES),
            known_documents: Default::default(),
            redirect_schemes: settings.redirect_schemes.clone(),
            clock: Clock::default(),
        }
    }

    /// The same server, with codes and refresh tokens used once across every replica that
    /// shares `store`.
    pub(crate) fn with_store(mut self, store: Option<crate::state::Store>) -> OAuth {
        self.used = self.used.shared(store);
        self
    }

    /// Take `id` of `kind` for its one use (`expires`, and how long such ids live), or say
    /// why not: `used` is what to say of a second use.
    async fn take(
        &self,
        kind: &'static str,
        (id, expires, lifetime, generation): (&str, u64, Duration, u64),
        used: &str,
    ) -> Result<Use, OAuthError> {
        let (now, lifetime) = (self.clock.now(), lifetime.as_secs());
        self.used.take(kind, id, (expires, lifetime), generation, now).await.map_err(|why| match why {
            NotFirst::Used => OAuthError::grant(used),
            NotFirst::Reset => OAuthError::grant(format!(
                "this {kind} was issued before the shared store (MCP_STATE_URL) was reset, so whether it was used cannot be known; sign in again"
            )),
            NotFirst::Unavailable => OAuthError::new(
                503,
                "temporarily_unavailable",
                format!(
                    "the shared store (MCP_STATE_URL) could not be reached to check that this {kind} is used only once; nothing was used up — try again shortly"
                ),
            ),
        })
    }

    /// The clock every lifetime is judged by.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The sign-in cookie's name, and whether it is `Secure` (when the server is reached
    /// over https).
    pub(crate) fn cookie(&self) -> (&'static str, bool) {
        if self.issuer.starts_with("https://") { ("__Host-aegis-signin", true) } else { (COOKIE, false) }
    }

    /// Where the browser sends the answer of the consent page (an origin, for `Origin` checks).
    pub(crate) fn origin(&self) -> &str {
        &self.issuer
    }

    /// `/.well-known/oauth-protected-resource` (RFC 9728).
    pub(crate) fn resource_metadata(&self) -> Value {
        json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "scopes_supported": SCOPES,
            "bearer_methods_supported": ["header"],
            "resource_name": "aegis-gitea-mcp",
        })
    }

    /// Where the resource metadata is, for `WWW-Authenticate`.
    pub(crate) fn resource_metadata_url(&self) -> String {
        let path = self.resource.strip_prefix(&self.issuer).unwrap_or("");
        format!("{}/.well-known/oauth-protected-resource{path}", self.issuer)
    }

    /// `/.well-known/oauth-authorization-server` (RFC 8414).
    pub(crate) fn server_metadata(&self) -> Value {
        let i = &self.issuer;
        json!({
            "issuer": i,
            "authorization_endpoint": format!("{i}/authorize"),
            "token_endpoint": format!("{i}/token"),
            "registration_endpoint": format!("{i}/register"),
            "scopes_supported": SCOPES,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"],
            "code_challenge_methods_supported": ["S256"],
            "client_id_metadata_document_supported": true,
            "authorization_response_iss_parameter_supported": true,
        })
    }

    /// `POST /register` (RFC 7591): the client id is the registration itself, sealed.
    /// Every client is public (PKCE protects its codes); a client asking for a secret gets
    /// `none`, which RFC 7591 lets the server decide.
    pub(crate) fn register(&self, body: &[u8]) -> Result<Value, OAuthError> {
        let meta: Value = serde_json::from_slice(body)
            .map_err(|_| OAuthError::new(400, "invalid_client_metadata", "the body must be a JSON object"))?;
        let invalid = |d: String| OAuthError::new(400, "invalid_client_metadata", d);
        let redirect_uris = redirect_uris_of(&meta, &self.redirect_schemes)
            .map_err(|d| OAuthError::new(400, "invalid_redirect_uri", d))?;
        for (field, allowed) in
            [("grant_types", &["authorization_code", "refresh_token"][..]), ("response_types", &["code"][..])]
        {
            if let Some(v) = meta.get(field) {
                let ok = v
                    .as_array()
                    .is_some_and(|a| a.iter().all(|x| x.as_str().is_some_and(|s| allowed.contains(&s))));
                if !ok {
                    return Err(invalid(format!("{field} may only contain {allowed:?}")));
                }
            }
        }
        let name = client_name(&meta).map_err(invalid)?;
        let issued = self.clock.now();
        let client_id = self
            .sealer
            .seal(Kind::Client, &Registration { r: redirect_uris.clone(), n: name.clone(), t: issued });
        let mut out = json!({
            "client_id": client_id,
            "client_id_issued_at": issued,
            "redirect_uris": redirect_uris,
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        });
        if let Some(n) = name {
            out["client_name"] = json!(n);
        }
        Ok(out)
    }

    /// The client named by `client_id`: a registration of ours, or a client ID metadata
    /// document at that URL.
    async fn client(&self, forge: &Forge, client_id: &str) -> Result<Client, Shown> {
        if client_id.starts_with(Kind::Client.prefix()) {
            let reg: Registration = self.sealer.open(Kind::Client, client_id).map_err(|_| {
                "the client_id was not issued by this server (register the client again)".to_owned()
            })?;
            return Ok(Client { redirect_uris: reg.r, name: reg.n });
        }
        let url = Url::parse(client_id)
            .map_err(|_| "unknown client_id: register the client first (POST /register), or use the URL of a client ID metadata document".to_owned())?;
        let secure =
            url.scheme() == "https" || (url.scheme() == "http" && self.http_documents && is_loopback(&url));
        if !secure || url.path() == "/" || url.fragment().is_some() || !url.username().is_empty() {
            return Err(
                "a client_id URL must be an https URL with a path (a client ID metadata document)".into()
            );
        }
        if let Some((expires, client)) = self.known_documents.lock().expect("never poisoned").get(client_id) {
            if *expires >= self.clock.now() {
                return Ok(client.clone());
            }
        }
        let _permit = self
            .documents
            .try_acquire()
            .map_err(|_| "too many sign-ins are starting at once; try again in a moment".to_owned())?;
        let bytes = forge
            .client_document(&url, self.http_documents)
            .await
            .map_err(|why| format!("the client ID metadata document could not be read: {why}"))?;
        let meta: Value = serde_json::from_slice(&bytes)
            .map_err(|_| "the client ID metadata document is not JSON".to_owned())?;
        if meta.get("client_id").and_then(Value::as_str) != Some(client_id) {
            return Err("the client ID metadata document's client_id is not its own URL".into());
        }
        if meta.get("token_endpoint_auth_method").and_then(Value::as_str).is_some_and(|m| m != "none") {
            return Err("the client ID metadata document asks for client authentication; this server accepts only public clients (\"none\")".into());
        }
        let redirect_uris = redirect_uris_of(&meta, &self.redirect_schemes)?;
        let name = client_name(&meta)?;
        let client = Client { redirect_uris, name };
        let mut known = self.known_documents.lock().expect("never poisoned");
        if known.len() >= MAX_KNOWN_DOCUMENTS {
            let t = self.clock.now();
            known.retain(|_, (expires, _)| *expires >= t);
            if known.len() >= MAX_KNOWN_DOCUMENTS {
                known.clear();
            }
        }
        known.insert(client_id.to_owned(), (self.clock.now() + DOCUMENT_LIFETIME.as_secs(), client.clone()));
        Ok(client)
    }

    /// `GET /authorize`: check the client and its redirect URI (problems there are shown to
    /// the person: a code must never go to an unchecked address), then everything else
    /// (problems there go back to the client), then send the person to the forge.
    pub(crate) async fn authorize(
        &self,
        forges: &impl ForgeOf,
        query: &[u8],
        browser: Option<&str>,
    ) -> Browser {
        let page = |status: u16, message: String| Browser::Page { status, message };
        let Some(forge) = forges.forge_of(None) else {
            return page(503, "the forge cannot be reached; try again later".into());
        };
        let q: AuthorizeQuery = match form::parse(query) {
            Ok(q) => q,
            Err(e) => return page(e.status, format!("{} ({})", e.description, e.code)),
        };
        let client_id = match q.client_id.required("client_id") {
            Ok(c) => c,
            Err(e) => return page(400, e.description),
        };
        let client = match self.client(forge, client_id).await {
            Ok(c) => c,
            Err(why) => return page(400, why),
        };
        let redirect_uri = match q.redirect_uri.get() {
            Some(r) if client.redirect_uris.iter().any(|u| same_redirect(u, r)) => r.to_owned(),
            Some(_) => {
                return page(
                    400,
                    "the redirect_uri is not one this client registered (it must match exactly)".into(),
                );
            }
            None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
            None => return page(400, "the parameter redirect_uri is missing".into()),
        };
        // Nothing goes back to a client before the person approved it: every other problem is
        // shown here, so that this endpoint never redirects anywhere on a stranger's behalf.
        match self.pending(client_id, &redirect_uri, &q, browser) {
            Ok(mut pending) => {
                // Issued under the store's memory as it is now: a sign-in started right after
                // the store restarted comes back under the new generation.
                pending.g = self.used.fresh_generation().await;
                Browser::Consent(Consent {
                    client: client.name.unwrap_or_else(|| client_label(client_id)),
                    redirect_to: Url::parse(&redirect_uri)
                        .map(|u| u.origin().ascii_serialization())
                        .ok()
                        .filter(|o| o != "null")
                        .unwrap_or_else(|| redirect_uri.clone()),
                    read_only: pending.sc == "read",
                    pending: self.sealer.seal(Kind::Pending, &pending),
                    browser: pending.b,
                    forges: pending
                        .n
                        .iter()
                        .map(|p| match forges.forge_of(Some(p)) {
                            Some(f) => format!("{p} ({})", f.base()),
                            None => format!("{p} (cannot be reached now)"),
                        })
                        .collect(),
                })
            }
            Err(e) => page(e.status, format!("{} ({})", e.description, e.code)),
        }
    }

    /// `POST /authorize`: the person's answer on the consent page. Only the browser the
    /// page was shown to (its cookie) may answer; an answer from anywhere else is refused.
    pub(crate) fn approve(&self, forges: &impl ForgeOf, body: &[u8], browser: Option<&str>) -> Browser {
        let page = |message: &str| Browser::Page { status: 400, message: message.to_owned() };
        let answer: ApproveForm = match form::parse_for_page(body, "the answer") {
            Ok(a) => a,
            Err(why) => return page(&why),
        };
        let Some(sealed) = answer.pending.get() else {
            return page("the answer came without its sign-in; start again from your MCP client");
        };
        let Ok(pending) = self.sealer.open::<Pending>(Kind::Pending, sealed) else {
            return page("this sign-in was not started by this server; start again from your MCP client");
        };
        if pending.e < self.clock.now() {
            return page("the sign-in took longer than 10 minutes; start again from your MCP client");
        }
        if !browser.is_some_and(|b| header::constant_time_eq(b.as_bytes(), pending.b.as_bytes())) {
            return page(
                "this answer did not come from the browser the sign-in was shown in; start again from your MCP client",
            );
        }
        if answer.granted.get() != Some("true") {
            let pairs = [
                ("error", "access_denied"),
                ("error_description", "the person declined"),
                ("state", pending.s.as_str()),
                ("iss", self.issuer.as_str()),
            ];
            return Browser::Redirect(with_query(&pending.r, &pairs));
        }
        if self.several() {
            // The first forge of the chain; each callback goes on to the next.
            return self.advance(forges, pending, None);
        }
        // The forge gets the sign-in sealed anew as approved: the pending one on the consent
        // page was shown before anyone approved, and the callback opens only approved ones.
        let approved = self.sealer.seal(Kind::Approved, &pending);
        let Some(forge) = forges.forge_of(None) else {
            return Browser::Page {
                status: 503,
                message: "the forge cannot be reached; try again later".into(),
            };
        };
        Browser::Redirect(forge.oauth_authorize_url(&[
            ("client_id", &self.apps[0].client_id),
            ("redirect_uri", &format!("{}{CALLBACK_PATH}", self.issuer)),
            ("response_type", "code"),
            ("state", &approved),
            ("scope", forge_scope(pending.sc == "read")),
            ("code_challenge", &s256(&pending.fv)),
            ("code_challenge_method", "S256"),
        ]))
    }

    /// Whether the server signs in on the forges of profiles (a profiles file), one after the
    /// other, rather than on the one forge of the environment settings.
    pub(crate) fn several(&self) -> bool {
        self.apps.iter().any(|a| a.profile.is_some())
    }

    /// The application of the forge of `profile`.
    fn app(&self, profile: Option<&str>) -> Option<&App> {
        self.apps.iter().find(|a| a.profile.as_deref() == profile)
    }

    /// The sign-in on several forges goes on: to the next forge that can be asked (a fresh
    /// hop: its own id, PKCE verifier and lifetime, sealed as approved), or, with none left,
    /// back to the client with a code that seals every grant — or `access_denied` when no
    /// forge granted anything. `dropped` is a forge this hop left out: the person is told, on
    /// a page that links on.
    ///
    /// The first hop is the approved sign-in itself (its id, verifier and lifetime, as with one
    /// forge: approving the page twice still comes back once); each later hop is fresh. A
    /// hop's store generation is the sign-in's (from `/authorize`), or the one the last
    /// callback's use was taken under.
    fn advance(&self, forges: &impl ForgeOf, mut pending: Pending, dropped: Option<String>) -> Browser {
        let mut dropped: Vec<String> = dropped.into_iter().collect();
        while !pending.n.is_empty() {
            let next = pending.n.remove(0);
            let (Some(forge), Some(app)) = (forges.forge_of(Some(&next)), self.app(Some(&next))) else {
                let words = format!("{next} (it could not start, so it cannot be asked)");
                pending.dr.push(words.clone());
                dropped.push(words);
                continue;
            };
            if !pending.p.is_empty() {
                pending.id = self.sealer.random_text(16);
                pending.fv = self.sealer.random_text(48);
                pending.e = self.clock.now() + PENDING_LIFETIME.as_secs();
            }
            pending.p = next;
            let approved = self.sealer.seal(Kind::Approved, &pending);
            if approved.len() > seal::MAX_SEALED_BYTES {
                return Browser::Page {
                    status: 500,
                    message: "the forges' tokens are too long to carry on to the next forge; sign in to fewer forges (ask the operator)".into(),
                };
            }
            let url = forge.oauth_authorize_url(&[
                ("client_id", &app.client_id),
                ("redirect_uri", &format!("{}{}", self.issuer, callback_path(Some(&pending.p)))),
                ("response_type", "code"),
                ("state", &approved),
                ("scope", forge_scope(pending.sc == "read")),
                ("code_challenge", &s256(&pending.fv)),
                ("code_challenge_method", "S256"),
            ]);
            return notice(&dropped, &format!("you sign in on the forge {} next", pending.p), url);
        }
        let back = |pairs: &[(&str, &str)]| {
            let mut all = pairs.to_vec();
            all.push(("state", &pending.s));
            all.push(("iss", &self.issuer));
            with_query(&pending.r, &all)
        };
        if pending.gs.is_empty() {
            let description = format!("no forge signed you in: {}", pending.dr.join(", "));
            return Browser::Redirect(back(&[
                ("error", "access_denied"),
                ("error_description", &description),
            ]));
        }
        let code = self.code_of(&pending, (String::new(), String::new()), pending.gs.clone());
        let sealed = self.sealer.seal(Kind::Code, &code);
        if sealed.len() > seal::MAX_SEALED_BYTES {
            return Browser::Redirect(back(&[
                ("error", "server_error"),
                (
                    "error_description",
                    "the forges' tokens together are too long for one sign-in; sign in to fewer forges",
                ),
            ]));
        }
        notice(&dropped, "you go back to your MCP client next", back(&[("code", &sealed)]))
    }

    /// The checks of `/authorize` after the client and redirect URI.
    fn pending(
        &self,
        client_id: &str,
        redirect_uri: &str,
        q: &AuthorizeQuery,
        browser: Option<&str>,
    ) -> Result<Pending, OAuthError> {
        match q.response_type.required("response_type")? {
            "code" => {}
            _ => return Err(OAuthError::new(400, "unsupported_response_type", "response_type must be code")),
        }
        let state = q.state.get().ok_or_else(|| {
            OAuthError::request("the parameter state is missing; send a random state and check it on return")
        })?;
        if state.len() > MAX_STATE_CHARS {
            return Err(OAuthError::request(format!("state is longer than {MAX_STATE_CHARS} characters")));
        }
        let challenge = q.code_challenge.get().ok_or_else(|| {
            OAuthError::request("PKCE is required: send code_challenge and code_challenge_method=S256")
        })?;
        if q.code_challenge_method.get() != Some("S256") {
            return Err(OAuthError::request("code_challenge_method must be S256"));
        }
        if challenge.len() != 43
            || !challenge.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(OAuthError::request(
                "code_challenge must be the base64url SHA-256 of the verifier (43 characters)",
            ));
        }
        let scope = parse_scope(q.scope.get())?;
        let resource = self.resource_param(q.resource.get())?;
        Ok(Pending {
            c: client_hash(client_id),
            r: redirect_uri.to_owned(),
            s: state.to_owned(),
            ch: challenge.to_owned(),
            sc: scope.to_owned(),
            res: resource,
            fv: self.sealer.random_text(48),
            // A browser keeps its id across sign-ins (two at once in one browser both work).
            b: browser
                .filter(|b| valid_browser_id(b))
                .map_or_else(|| self.sealer.random_text(16), str::to_owned),
            id: self.sealer.random_text(16),
            e: self.clock.now() + PENDING_LIFETIME.as_secs(),
            g: 0,
            p: String::new(),
            n: self.apps.iter().filter_map(|a| a.profile.clone()).collect(),
            gs: Vec::new(),
            dr: Vec::new(),
        })
    }

    /// The `resource` a client named (RFC 8707): this server, or none (then this server).
    fn resource_param(&self, resource: Option<&str>) -> Result<String, OAuthError> {
        match resource {
            None => Ok(self.resource.clone()),
            Some(r) if self.audiences.iter().any(|a| a == r) => Ok(r.to_owned()),
            Some(r) => Err(OAuthError::new(
                400,
                "invalid_target",
                format!("this server issues tokens only for {} (resource was {r:?})", self.resource),
            )),
        }
    }

    /// `GET /oauth/callback`: the forge sends the person back. Nothing goes to the client
    /// unless this is a sign-in the person approved, in this browser, in time, and comes back
    /// for the first time: every other answer is a page for the person (a client's redirect
    /// URI is never a place a stranger can send a browser to). Then the forge's refusal goes
    /// back to the client, or a code does.
    #[cfg(test)]
    pub(crate) async fn callback(&self, query: &[u8], browser: Option<&str>) -> Browser {
        self.callback_at(&NoForge, None, query, browser).await
    }

    /// `GET /oauth/callback/<profile>` (`profile`), or `/oauth/callback` (`None`): as
    /// `callback`, for the forge the path names. A sign-in comes back only at the callback of
    /// the forge it was sent to: a code of one forge is never taken for another's (the forges
    /// send no `iss`, so the path is what tells them apart). With several forges the code is
    /// exchanged at once, at that forge only, and the sign-in goes on to the next forge.
    pub(crate) async fn callback_at(
        &self,
        forges: &impl ForgeOf,
        profile: Option<&str>,
        query: &[u8],
        browser: Option<&str>,
    ) -> Browser {
        let page = |message: &str| Browser::Page { status: 400, message: message.to_owned() };
        let q: CallbackQuery = match form::parse_for_page(query, "the forge's answer") {
            Ok(q) => q,
            Err(why) => return page(&why),
        };
        let Some(state) = q.state.get() else {
            return page("the sign-in came back without its state; start again from your MCP client");
        };
        let Ok(mut pending) = self.sealer.open::<Pending>(Kind::Approved, state) else {
            return page(
                "this sign-in was not started and approved on this server; start again from your MCP client",
            );
        };
        if pending.p.as_str() != profile.unwrap_or("") {
            let sent = if pending.p.is_empty() { "the forge" } else { pending.p.as_str() };
            let at = profile.map_or_else(|| CALLBACK_PATH.to_owned(), callback_path_of);
            return page(&format!(
                "this sign-in was sent to {sent} but came back at {at}, another forge's callback: a code is taken only from the forge it was asked of, so nothing was exchanged; start again from your MCP client"
            ));
        }
        // The browser that approved the sign-in must be the one coming back, once: a code is
        // never handed to a browser that did not approve it.
        if !browser.is_some_and(|b| header::constant_time_eq(b.as_bytes(), pending.b.as_bytes())) {
            return page(
                "this sign-in was approved in another browser (or its cookie was lost); start again from your MCP client",
            );
        }
        if pending.e < self.clock.now() {
            return page("the sign-in took longer than 10 minutes; start again from your MCP client");
        }
        let now = self.clock.now();
        let lifetime = PENDING_LIFETIME.as_secs();
        match self.used.take("sign-in", &pending.id, (pending.e, lifetime), pending.g, now).await {
            Ok(taken) => taken.settle(),
            Err(NotFirst::Used) => {
                return page("this sign-in has already come back once; start again from your MCP client");
            }
            Err(NotFirst::Reset) => {
                return page(
                    "this sign-in was started before the shared store (MCP_STATE_URL) was reset; start again from your MCP client",
                );
            }
            Err(NotFirst::Unavailable) => {
                return Browser::Page {
                    status: 503,
                    message: "the shared store (MCP_STATE_URL) could not be reached to check that this sign-in comes back only once; reload this page shortly".into(),
                };
            }
        }
        if !pending.p.is_empty() {
            // The hop's use was just taken under the store's generation, which the next
            // hop keeps.
            pending.g = self.used.generation();
            let p = pending.p.clone();
            let dropped = if let Some(error) = q.error.get() {
                Some(if error == "access_denied" {
                    format!("{p} (declined on its consent page)")
                } else {
                    format!("{p} (it refused the sign-in)")
                })
            } else {
                match q.code.get() {
                    Some(c) if c.len() <= MAX_FORGE_CODE_CHARS => {
                        match self.exchange_at(forges, &p, c, &pending.fv).await {
                            Ok(got) => {
                                pending.gs.push(got);
                                None
                            }
                            Err(words) => Some(words),
                        }
                    }
                    _ => Some(format!("{p} (it sent no usable code)")),
                }
            };
            pending.dr.extend(dropped.clone());
            return self.advance(forges, pending, dropped);
        }
        let back = |pairs: &[(&str, &str)]| {
            let mut all = pairs.to_vec();
            all.push(("state", &pending.s));
            all.push(("iss", &self.issuer));
            Browser::Redirect(with_query(&pending.r, &all))
        };
        if let Some(error) = q.error.get() {
            let description = if error == "access_denied" {
                "the person declined on the forge's consent page"
            } else {
                "the forge refused the sign-in"
            };
            return back(&[("error", "access_denied"), ("error_description", description)]);
        }
        let forge_code = match q.code.get() {
            Some(c) if c.len() <= MAX_FORGE_CODE_CHARS => c,
            _ => {
                return back(&[
                    ("error", "server_error"),
                    ("error_description", "the forge sent no usable code"),
                ]);
            }
        };
        // The sign-in's use just asked the store, which said its generation.
        let code = self.code_of(&pending, (pending.fv.clone(), forge_code.to_owned()), Vec::new());
        let sealed = self.sealer.seal(Kind::Code, &code);
        back(&[("code", &sealed)])
    }

    /// The forge of `profile` exchanges its `code` (with the hop's PKCE `verifier`), at once:
    /// its grant, or words that say why it is left out of the sign-in.
    async fn exchange_at(
        &self,
        forges: &impl ForgeOf,
        profile: &str,
        code: &str,
        verifier: &str,
    ) -> Result<Got, String> {
        let (Some(forge), Some(app)) = (forges.forge_of(Some(profile)), self.app(Some(profile))) else {
            return Err(format!("{profile} (it cannot be asked now)"));
        };
        let callback = format!("{}{}", self.issuer, callback_path(Some(profile)));
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", &callback),
            ("code_verifier", verifier),
            ("client_id", &app.client_id),
            ("client_secret", app.secret.expose_secret()),
        ];
        match forge.oauth_token(&form).await {
            Ok(grant) => Ok(Got {
                p: profile.to_owned(),
                a: grant.access_token.expose_secret().to_owned(),
                r: grant.refresh_token.map(|r| r.expose_secret().to_owned()),
                x: grant.expires_in.map_or(0, |s| self.clock.now().saturating_add(s)),
            }),
            Err(ForgeRefusal::Refused) => Err(format!("{profile} (it refused its own code)")),
            Err(ForgeRefusal::Misconfigured) => Err(format!(
                "{profile} (it refused this server's OAuth2 application: the operator should run the doctor command)"
            )),
            Err(ForgeRefusal::Unavailable(why)) => Err(format!("{profile} (it could not be asked: {why})")),
        }
    }

    /// `POST /token`: the authorization code and refresh grants.
    /// The body is read twice: for its grant type, then for that grant's own fields (a
    /// parameter the grant does not use is ignored, repeated or not).
    pub(crate) async fn token(&self, forges: &impl ForgeOf, body: &[u8]) -> Result<Value, OAuthError> {
        let grant: TokenGrant = form::parse(body)?;
        match grant.grant_type.required("grant_type")? {
            "authorization_code" => self.exchange_code(forges, &form::parse(body)?).await,
            "refresh_token" => self.refresh(forges, &form::parse(body)?).await,
            other => Err(OAuthError::new(
                400,
                "unsupported_grant_type",
                format!("grant_type {other:?} is not supported; use authorization_code or refresh_token"),
            )),
        }
    }

    async fn exchange_code(&self, forges: &impl ForgeOf, grant: &CodeGrant) -> Result<Value, OAuthError> {
        let code: Code = self.redeem(&grant.client_id, &grant.code, "codes live 60 seconds")?;
        if grant.redirect_uri.get() != Some(code.r.as_str()) {
            return Err(OAuthError::grant("redirect_uri differs from the one of the authorization request"));
        }
        let verifier = grant
            .code_verifier
            .get()
            .ok_or_else(|| OAuthError::grant("PKCE: the code_verifier is missing"))?;
        if !valid_pkce(verifier) || s256(verifier) != code.ch {
            return Err(OAuthError::grant("PKCE: the code_verifier does not match the code_challenge"));
        }
        self.check_resource(&grant.resource)?;
        let once = (code.id.as_str(), code.e, CODE_LIFETIME, code.g);
        let taken = self.take("code", once, "the code has already been used; sign in again").await?;
        if !code.gs.is_empty() {
            // Several forges: each exchanged its code at its callback; the code seals the grants.
            taken.settle();
            return self.issue_many(&code.c, &code.sc, &code.sc, &code.res, code.gs);
        }
        let forge = forges.forge_of(None).ok_or_else(unreachable_forge)?;
        let callback = format!("{}{CALLBACK_PATH}", self.issuer);
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code.f.as_str()),
            ("redirect_uri", &callback),
            ("code_verifier", &code.fv),
        ];
        let refused = "the forge refused the sign-in's code (it may have been used already); sign in again";
        let grant = self.ask_forge(forge, &form, taken, refused).await?;
        Ok(self.issue(&code.c, &code.sc, &code.sc, &code.res, grant))
    }

    async fn refresh(&self, forges: &impl ForgeOf, grant: &RefreshGrant) -> Result<Value, OAuthError> {
        let old: Refresh =
            self.redeem(&grant.client_id, &grant.refresh_token, "refresh tokens live 30 days")?;
        let scope = match grant.scope.get() {
            None => old.sc.clone(),
            Some(asked) => {
                let asked = parse_scope(Some(asked))?;
                if asked == "read write" && old.sc == "read" {
                    return Err(OAuthError::new(
                        400,
                        "invalid_scope",
                        "a refresh cannot widen a read-only sign-in; sign in again with scope write",
                    ));
                }
                asked.to_owned()
            }
        };
        self.check_resource(&grant.resource)?;
        let once = (old.id.as_str(), old.e, REFRESH_LIFETIME, old.g);
        let used = "the refresh token has already been used (refresh tokens rotate); use the newest one, or sign in again";
        let taken = self.take("refresh token", once, used).await?;
        if !old.fs.is_empty() {
            let grants = self.refresh_every(forges, &old.fs, taken).await?;
            return self.issue_many(&old.c, &scope, &old.sc, &old.res, grants);
        }
        let forge = forges.forge_of(None).ok_or_else(unreachable_forge)?;
        let form = [("grant_type", "refresh_token"), ("refresh_token", old.f.as_str())];
        let refused = "the forge refused the refresh (it may have been used already, or the person revoked the application); sign in again";
        let grant = self.ask_forge(forge, &form, taken, refused).await?;
        // The new refresh token keeps the sign-in's scope; only the access token is narrowed.
        Ok(self.issue(&old.c, &scope, &old.sc, &old.res, grant))
    }

    /// The code or refresh token a client presents (`presented`, for `client_id`), opened
    /// and checked: sealed here, not expired (`lifetime` says how long they live), issued to
    /// this client.
    fn redeem<T: Redeemable>(
        &self,
        client_id: &Param,
        presented: &Param,
        lifetime: &str,
    ) -> Result<T, OAuthError> {
        let client_id = client_id.required("client_id")?;
        let what = T::WHAT;
        let value: T = self
            .sealer
            .open(T::KIND, presented.required(T::FIELD)?)
            .map_err(|_| OAuthError::grant(format!("the {what} was not issued by this server")))?;
        if value.expires() < self.clock.now() {
            return Err(OAuthError::grant(format!("the {what} has expired ({lifetime}); sign in again")));
        }
        if value.client() != client_hash(client_id) {
            return Err(OAuthError::grant(format!("the {what} was issued to another client")));
        }
        Ok(value)
    }

    /// A `resource` at the token endpoint must name this server (any of its spellings).
    fn check_resource(&self, resource: &Param) -> Result<(), OAuthError> {
        match resource.get() {
            Some(r) if !self.audiences.iter().any(|a| a == r) => Err(OAuthError::new(
                400,
                "invalid_target",
                format!("this server issues tokens only for {} (resource was {r:?})", self.resource),
            )),
            _ => Ok(()),
        }
    }

    /// The forge's token endpoint with this server's application and `form`. The code or
    /// refresh token `taken` stays used unless the forge could not be reached (then the
    /// client may try again).
    async fn ask_forge(
        &self,
        forge: &Forge,
        form: &[(&str, &str)],
        taken: Use,
        refused: &str,
    ) -> Result<ForgeGrant, OAuthError> {
        let mut full = form.to_vec();
        full.push(("client_id", &self.apps[0].client_id));
        full.push(("client_secret", self.apps[0].secret.expose_secret()));
        let answer = forge.oauth_token(&full).await;
        // Dropped unsettled, the use is taken back (the client may try again).
        if !matches!(answer, Err(ForgeRefusal::Unavailable(_))) {
            taken.settle();
        }
        answer.map_err(|r| forge_refusal(r, refused))
    }

    /// Our tokens for a forge grant.
    fn issue(
        &self,
        client: &str,
        scope: &str,
        refresh_scope: &str,
        resource: &str,
        grant: ForgeGrant,
    ) -> Value {
        let forge_left = grant.expires_in.map(Duration::from_secs).unwrap_or(ACCESS_LIFETIME);
        let lifetime = forge_left.min(ACCESS_LIFETIME).max(Duration::from_secs(1)).as_secs();
        let access = Access {
            c: client.to_owned(),
            sc: scope.to_owned(),
            res: resource.to_owned(),
            f: grant.access_token.expose_secret().to_owned(),
            e: self.clock.now() + lifetime,
            fs: Vec::new(),
        };
        let mut out = json!({
            "access_token": self.sealer.seal(Kind::Access, &access),
            "token_type": "Bearer",
            "expires_in": lifetime,
            "scope": scope,
        });
        if let Some(forge_refresh) = grant.refresh_token {
            let refresh = Refresh {
                c: client.to_owned(),
                sc: refresh_scope.to_owned(),
                res: resource.to_owned(),
                f: forge_refresh.expose_secret().to_owned(),
                e: self.clock.now() + REFRESH_LIFETIME.as_secs(),
                id: self.sealer.random_text(16),
                // The code's or old token's use just asked the store, which said its generation.
                g: self.used.generation(),
                fs: Vec::new(),
            };
            out["refresh_token"] = json!(self.sealer.seal(Kind::Refresh, &refresh));
        }
        out
    }

    /// Every forge of a sign-in on several refreshes its grant (`fs`: each one's refresh
    /// token), one after the other, all or nothing: a forge that refuses is named, and the
    /// client signs in again whole (a token that silently lost a forge would be worse). The
    /// refresh token `taken` stays used once a forge has answered (its token rotated there),
    /// and is given back only when the first forge could not be reached.
    async fn refresh_every(
        &self,
        forges: &impl ForgeOf,
        fs: &[(String, String)],
        taken: Use,
    ) -> Result<Vec<Got>, OAuthError> {
        let mut taken = Some(taken);
        let mut got = Vec::with_capacity(fs.len());
        for (profile, refresh_token) in fs {
            let (Some(forge), Some(app)) = (forges.forge_of(Some(profile)), self.app(Some(profile))) else {
                if let Some(t) = taken.take() {
                    t.settle();
                }
                return Err(OAuthError::grant(format!(
                    "the forge {profile} of this sign-in is not served now; sign in again"
                )));
            };
            let form = [
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh_token.as_str()),
                ("client_id", app.client_id.as_str()),
                ("client_secret", app.secret.expose_secret()),
            ];
            match forge.oauth_token(&form).await {
                Ok(grant) => {
                    if let Some(t) = taken.take() {
                        t.settle();
                    }
                    got.push(Got {
                        p: profile.clone(),
                        a: grant.access_token.expose_secret().to_owned(),
                        r: grant.refresh_token.map(|r| r.expose_secret().to_owned()),
                        x: grant.expires_in.map_or(0, |s| self.clock.now().saturating_add(s)),
                    });
                }
                Err(ForgeRefusal::Unavailable(why)) if got.is_empty() => {
                    return Err(OAuthError::new(
                        503,
                        "temporarily_unavailable",
                        format!(
                            "the forge {profile} could not refresh the sign-in ({why}); nothing was used up — try again shortly"
                        ),
                    ));
                }
                Err(refusal) => {
                    if let Some(t) = taken.take() {
                        t.settle();
                    }
                    let why = match refusal {
                        ForgeRefusal::Refused => "refused the refresh (it may have been used already, or the person revoked the application there)".to_owned(),
                        ForgeRefusal::Misconfigured => "refused this server's OAuth2 application (the operator should run the doctor command)".to_owned(),
                        ForgeRefusal::Unavailable(why) => format!("could not be reached ({why}) after another forge of this sign-in had refreshed"),
                    };
                    return Err(OAuthError::grant(format!("the forge {profile} {why}; sign in again")));
                }
            }
        }
        Ok(got)
    }

    /// Our tokens for a sign-in on several forges: the access token seals each forge's access
    /// token and lives as long as the shortest of them (at most `ACCESS_LIFETIME`); the
    /// refresh token each one's refresh token, when every forge gave one.
    fn issue_many(
        &self,
        client: &str,
        scope: &str,
        refresh_scope: &str,
        resource: &str,
        grants: Vec<Got>,
    ) -> Result<Value, OAuthError> {
        let now = self.clock.now();
        let lifetime = grants
            .iter()
            .map(|g| if g.x == 0 { ACCESS_LIFETIME.as_secs() } else { g.x.saturating_sub(now) })
            .min()
            .unwrap_or(0)
            .min(ACCESS_LIFETIME.as_secs())
            .max(1);
        let access = Access {
            c: client.to_owned(),
            sc: scope.to_owned(),
            res: resource.to_owned(),
            f: String::new(),
            e: now + lifetime,
            fs: grants.iter().map(|g| (g.p.clone(), g.a.clone())).collect(),
        };
        let access = self.sealer.seal(Kind::Access, &access);
        let too_long = || {
            OAuthError::new(
                500,
                "server_error",
                "the forges' tokens together are too long for one token of this server; sign in to fewer forges",
            )
        };
        if access.len() > aegis_core::identity::MAX_TOKEN_BYTES {
            return Err(too_long());
        }
        let mut out = json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": lifetime,
            "scope": scope,
        });
        let refresh: Option<Vec<(String, String)>> =
            grants.iter().map(|g| g.r.clone().map(|r| (g.p.clone(), r))).collect();
        if let Some(fs) = refresh {
            let refresh = Refresh {
                c: client.to_owned(),
                sc: refresh_scope.to_owned(),
                res: resource.to_owned(),
                f: String::new(),
                e: now + REFRESH_LIFETIME.as_secs(),
                id: self.sealer.random_text(16),
                g: self.used.generation(),
                fs,
            };
            let sealed = self.sealer.seal(Kind::Refresh, &refresh);
            if sealed.len() > seal::MAX_SEALED_BYTES {
                return Err(too_long());
            }
            out["refresh_token"] = json!(sealed);
        }
        Ok(out)
    }

    /// What a presented token is: ours (valid or why not) or not ours at all.
    pub(crate) fn verify(&self, token: &SecretString) -> Presented {
        let text = token.expose_secret();
        if !looks_issued(text) {
            return Presented::NotOurs;
        }
        if !text.starts_with(Kind::Access.prefix()) {
            return Presented::Invalid(
                "this is not an access token (a refresh token, code or client id of this server?); send the access_token from the token endpoint",
            );
        }
        let Ok(access) = self.sealer.open::<Access>(Kind::Access, text) else {
            return Presented::Invalid(
                "the access token was not issued by this server, or was altered; sign in again",
            );
        };
        if access.e < self.clock.now() {
            return Presented::Invalid("the access token has expired; refresh it or sign in again");
        }
        if !self.audiences.contains(&access.res) {
            return Presented::Invalid(
                "the access token was issued for another resource, not this server; sign in to this server",
            );
        }
        let read_only = access.sc == "read";
        if !access.fs.is_empty() {
            return Presented::Forges(
                access
                    .fs
                    .into_iter()
                    .map(|(p, f)| {
                        (p, Grant { forge_token: SecretString::from(f), presented: token.clone(), read_only })
                    })
                    .collect(),
            );
        }
        Presented::Valid(Grant {
            forge_token: SecretString::from(access.f),
            presented: token.clone(),
            read_only,
        })
    }

    /// The scope to ask a client to sign in with again (`insufficient_scope`).
    pub(crate) fn full_scope() -> &'static str {
        "read write"
    }
}

/// The forge's token scopes for a sign-in: a read-only sign-in asks the forge for read
/// scopes only, so that the forge too refuses a write; a full sign-in asks for nothing
/// narrower than the application allows.
fn forge_scope(read_only: bool) -> &'static str {
    if read_only {
        "read:activitypub read:issue read:misc read:notification read:organization read:package read:repository read:user"
    } else {
        ""
    }
}

/// The forge is not served (it did not start).
fn unreachable_forge() -> OAuthError {
    OAuthError::new(503, "temporarily_unavailable", "the forge cannot be reached; try again later")
}

/// A forge token endpoint's refusal in OAuth terms: its `invalid_grant` stays one (the
/// client must sign in again); the forge being unreachable is `temporarily_unavailable`.
fn forge_refusal(r: ForgeRefusal, refused_words: &str) -> OAuthError {
    match r {
        ForgeRefusal::Refused => OAuthError::grant(refused_words),
        ForgeRefusal::Unavailable(why) => OAuthError::new(
            503,
            "temporarily_unavailable",
            format!("the forge could not complete the sign-in ({why}); try again shortly"),
        ),
        ForgeRefusal::Misconfigured => OAuthError::new(
            500,
            "server_error",
            "the forge refused this server's OAuth2 application (check GITEA_OAUTH_CLIENT_ID and GITEA_OAUTH_CLIENT_SECRET; run the doctor command)",
        ),
    }
}

/// A client's `redirect_uris`: 1 to `MAX_REDIRECT_URIS` valid, distinct URIs.
fn redirect_uris_of(meta: &Value, extra_schemes: &[String]) -> Result<Vec<String>, Shown> {
    let list = meta
        .get("redirect_uris")
        .and_then(Value::as_array)
        .ok_or("redirect_uris is required: a list of the client's redirect URIs")?;
    if list.is_empty() || list.len() > MAX_REDIRECT_URIS {
        return Err(format!("redirect_uris must hold 1 to {MAX_REDIRECT_URIS} URIs"));
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for v in list {
        let uri = v.as_str().ok_or("redirect_uris must be strings")?;
        valid_redirect_uri(uri, extra_schemes)?;
        if !out.iter().any(|u| u == uri) {
            out.push(uri.to_owned());
        }
    }
    Ok(out)
}

fn client_name(meta: &Value) -> Result<Option<String>, Shown> {
    match meta.get("client_name") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(n)) if n.chars().count() <= MAX_NAME_CHARS => Ok(Some(n.clone())),
        Some(_) => Err(format!("client_name must be a string of at most {MAX_NAME_CHARS} characters")),
    }
}

/// Whether `text` opens with `sealer` as a value of `kind`, read as the payload that kind
/// carries (as the endpoints open it): for the fuzz targets, which may not see the payloads.
#[cfg(feature = "fuzzing")]
pub(crate) fn opens_as(sealer: &Sealer, kind: Kind, text: &str) -> bool {
    match kind {
        Kind::Client => sealer.open::<Registration>(kind, text).is_ok(),
        Kind::Pending | Kind::Approved => sealer.open::<Pending>(kind, text).is_ok(),
        Kind::Code => sealer.open::<Code>(kind, text).is_ok(),
        Kind::Access => sealer.open::<Access>(kind, text).is_ok(),
        Kind::Refresh => sealer.open::<Refresh>(kind, text).is_ok(),
        Kind::Confirmation => sealer.open::<seal::ConfirmationState>(kind, text).is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(public: &str) -> OAuthSettings {
        OAuthSettings {
            apps: vec![crate::config::SignInApp {
                profile: None,
                client_id: "forge-app".into(),
                client_secret: SecretString::from("forge-app-secret".to_owned()),
            }],
            public_url: public.into(),
            key: std::sync::Arc::new(secrecy::SecretBox::new(Box::new([9u8; 32]))),
            redirect_schemes: Vec::new(),
        }
    }

    fn server() -> OAuth {
        OAuth::new(&settings("http://127.0.0.1:8080"), "/mcp")
    }

    /// A forge nothing listens on: any test that reached it would fail to connect.
    fn forge() -> Forge {
        let limits = aegis_core::decode::body::Limits { max_binary: 1 << 20, max_response: 1 << 20 };
        let s = Duration::from_secs(2);
        Forge::new(Url::parse("http://127.0.0.1:9/").unwrap(), limits, s, s).unwrap()
    }

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// `pairs` as a query string or form body.
    fn enc(pairs: &[(String, String)]) -> Vec<u8> {
        url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish().into_bytes()
    }

    fn form(pairs: &[(&str, &str)]) -> Vec<u8> {
        enc(&params(pairs))
    }

    const VERIFIER: &str = "verifier-verifier-verifier-verifier-verifier-0001";

    fn registered(o: &OAuth) -> String {
        let body = br#"{"redirect_uris":["http://127.0.0.1:5555/cb"],"client_name":"test"}"#;
        o.register(body).unwrap()["client_id"].as_str().unwrap().to_owned()
    }

    fn authorize_params(client: &str) -> Vec<(String, String)> {
        params(&[
            ("client_id", client),
            ("redirect_uri", "http://127.0.0.1:5555/cb"),
            ("response_type", "code"),
            ("state", "st-1"),
            ("code_challenge", &s256(VERIFIER)),
            ("code_challenge_method", "S256"),
            ("scope", "read"),
        ])
    }

    /// A code as the callback would hand it out for the client, for the forge code `F`: the
    /// consent page, the person's approval and the callback, all in one browser.
    async fn code_for(o: &OAuth, client: &str) -> String {
        let Browser::Consent(consent) = o.authorize(&forge(), &enc(&authorize_params(client)), None).await
        else {
            panic!("authorize refused")
        };
        let approve = params(&[("pending", &consent.pending), ("granted", "true")]);
        let Browser::Redirect(to_forge) = o.approve(&forge(), &enc(&approve), Some(&consent.browser)) else {
            panic!("approval refused")
        };
        let state = query(&to_forge, "state");
        let back = o.callback(&form(&[("code", "F"), ("state", &state)]), Some(&consent.browser)).await;
        let Browser::Redirect(back) = back else { panic!("callback refused: {back:?}") };
        query(&back, "code")
    }

    #[test]
    fn registration_checks_redirect_uris_and_seals_the_client() {
        let o = server();
        let client = registered(&o);
        assert!(client.starts_with("aegis-client."));
        for bad in [
            r#"{"redirect_uris":["http://evil.example/cb"]}"#,
            r#"{"redirect_uris":["javascript:alert(1)"]}"#,
            r#"{"redirect_uris":["https://a.example/cb#frag"]}"#,
            r#"{"redirect_uris":[]}"#,
            r#"{}"#,
        ] {
            let e = o.register(bad.as_bytes()).unwrap_err();
            assert_eq!(e.code, "invalid_redirect_uri", "{bad}");
        }
        let e =
            o.register(br#"{"redirect_uris":["https://a.example/cb"],"grant_types":["client_credentials"]}"#);
        assert_eq!(e.unwrap_err().code, "invalid_client_metadata");
        assert!(o.register(br#"{"redirect_uris":["com.example.app:/cb","https://a.example/cb"]}"#).is_ok());
    }

    #[test]
    fn redirect_uris_are_https_loopback_http_or_reverse_domain_app_schemes_only() {
        let none: &[String] = &[];
        for good in [
            "https://a.example/cb",
            "http://127.0.0.1:33418/cb",
            "http://[::1]/cb",
            "http://localhost:8080/callback",
            "com.example.app:/oauth2redirect",
            "com.example.app://callback",
            "dev.my-tool.cli:/cb",
        ] {
            assert_eq!(valid_redirect_uri(good, none), Ok(()), "{good}");
        }
        for bad in [
            "view-source:https://a.example/cb",
            "jar:https://a.example/x.jar!/cb",
            "filesystem:https://a.example/temporary/cb",
            "mailto:someone@a.example",
            "chrome://settings",
            "javascript:alert(1)",
            "data:text/html,hi",
            "file:///etc/passwd",
            "blob:https://a.example/uuid",
            "about:blank",
            "ftp://a.example/cb",
            "cursor://anysphere.cursor-mcp/oauth/callback",
            "myapp:/cb",
            "http://evil.example/cb",
            "com..example:/cb",
            "com.-example:/cb",
            "a+b.example:/cb",
        ] {
            assert!(valid_redirect_uri(bad, none).is_err(), "{bad}");
        }
        // An app scheme the operator names is accepted; the dangerous ones never are.
        let cursor = ["cursor".to_owned()];
        assert_eq!(valid_redirect_uri("cursor://anysphere.cursor-mcp/oauth/callback", &cursor), Ok(()));
        assert!(valid_redirect_uri("mailto:x@a.example", &cursor).is_err());
    }

    #[tokio::test]
    async fn authorize_shows_every_problem_to_the_person_and_asks_before_anything_else() {
        let o = server();
        let f = forge();
        let client = registered(&o);
        let status_of = |b: Browser| match b {
            Browser::Page { status, message } => (status, message),
            other => panic!("not a page: {other:?}"),
        };
        let mut p = authorize_params("aegis-client.forged");
        assert_eq!(status_of(o.authorize(&f, &enc(&p), None).await).0, 400);
        p = authorize_params(&client);
        p[1].1 = "http://127.0.0.1:5555/other".into();
        assert_eq!(status_of(o.authorize(&f, &enc(&p), None).await).0, 400);
        // Nothing is redirected before the person approved: no open redirector.
        for (drop, expected) in [("state", "invalid_request"), ("code_challenge", "invalid_request")] {
            let p: Vec<_> = authorize_params(&client).into_iter().filter(|(k, _)| k != drop).collect();
            assert!(status_of(o.authorize(&f, &enc(&p), None).await).1.contains(expected), "without {drop}");
        }
        let mut p = authorize_params(&client);
        p[5].1 = "plain".into();
        assert!(status_of(o.authorize(&f, &enc(&p), None).await).1.contains("S256"));
        p = authorize_params(&client);
        p[6].1 = "admin".into();
        assert!(status_of(o.authorize(&f, &enc(&p), None).await).1.contains("invalid_scope"));
        p = authorize_params(&client);
        p.push(("resource".into(), "https://other.example/mcp".into()));
        assert!(status_of(o.authorize(&f, &enc(&p), None).await).1.contains("invalid_target"));
        // Valid: this server's consent page first, naming the client and where the answer goes.
        let Browser::Consent(c) = o.authorize(&f, &enc(&authorize_params(&client)), None).await else {
            panic!()
        };
        assert_eq!(
            (c.client.as_str(), c.redirect_to.as_str(), c.read_only),
            ("test", "http://127.0.0.1:5555", true)
        );
        // Approved from the same browser: on to the forge's consent page, with this server's
        // application and callback.
        let approve = params(&[("pending", &c.pending), ("granted", "true")]);
        let Browser::Redirect(url) = o.approve(&f, &enc(&approve), Some(&c.browser)) else { panic!() };
        assert!(url.starts_with("http://127.0.0.1:9/login/oauth/authorize?"), "{url}");
        assert_eq!(query(&url, "client_id"), "forge-app");
        assert_eq!(query(&url, "redirect_uri"), "http://127.0.0.1:8080/oauth/callback");
        assert_eq!(query(&url, "code_challenge_method"), "S256");
        assert!(query(&url, "scope").contains("read:repository") && !query(&url, "scope").contains("write"));
        assert!(query(&url, "state").starts_with("aegis-state."));
        // From another browser (no cookie, or another one): refused.
        assert!(matches!(o.approve(&f, &enc(&approve), None), Browser::Page { .. }));
        assert!(matches!(
            o.approve(&f, &enc(&approve), Some("AAAAAAAAAAAAAAAAAAAAAA")),
            Browser::Page { .. }
        ));
        // Denied: back to the client with access_denied.
        let deny = params(&[("pending", &c.pending), ("granted", "false")]);
        let Browser::Redirect(back) = o.approve(&f, &enc(&deny), Some(&c.browser)) else { panic!() };
        assert!(back.starts_with("http://127.0.0.1:5555/cb?"), "{back}");
        assert_eq!(query(&back, "error"), "access_denied");
        assert_eq!(query(&back, "state"), "st-1");
    }

    #[test]
    fn only_the_shapes_of_issued_values_count_as_ours() {
        for ours in ["aegis-at.x", "aegis-rt.x", "aegis-code.x", "aegis-client.x", "aegis-state.x"] {
            assert!(looks_issued(ours), "{ours}");
        }
        for theirs in ["aegis-e2e-not-a-token", "aegis-", "0123456789abcdef", "eyJhbGciOi.x.y"] {
            assert!(!looks_issued(theirs), "{theirs}");
        }
    }

    #[test]
    fn loopback_redirects_match_on_any_port_and_nothing_else_does() {
        assert!(same_redirect("http://127.0.0.1/cb", "http://127.0.0.1:33418/cb"));
        assert!(same_redirect("http://[::1]:5/cb", "http://[::1]:6/cb"));
        assert!(!same_redirect("http://127.0.0.1/cb", "http://127.0.0.1:33418/other"));
        assert!(!same_redirect("http://localhost/cb", "http://localhost:8080/cb"));
        assert!(!same_redirect("https://a.example/cb", "https://a.example:444/cb"));
    }

    fn query(url: &str, name: &str) -> String {
        Url::parse(url)
            .unwrap()
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn code_exchange_checks_pkce_client_and_single_use_before_the_forge() {
        let o = server();
        let f = forge();
        let client = registered(&o);
        let code = code_for(&o, &client).await;
        let token = |verifier: &str, client: &str, code: &str| {
            params(&[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("client_id", client),
                ("redirect_uri", "http://127.0.0.1:5555/cb"),
                ("code_verifier", verifier),
            ])
        };
        let wrong = "wrong-verifier-wrong-verifier-wrong-verifier-0001";
        assert_eq!(o.token(&f, &enc(&token(wrong, &client, &code))).await.unwrap_err().code, "invalid_grant");
        let no_verifier: Vec<_> =
            token(VERIFIER, &client, &code).into_iter().filter(|(k, _)| k != "code_verifier").collect();
        assert_eq!(o.token(&f, &enc(&no_verifier)).await.unwrap_err().code, "invalid_grant");
        let other = registered(&o);
        assert_eq!(
            o.token(&f, &enc(&token(VERIFIER, &other, &code))).await.unwrap_err().code,
            "invalid_grant"
        );
        assert_eq!(
            o.token(&f, &enc(&token(VERIFIER, &client, "aegis-code.xyz"))).await.unwrap_err().code,
            "invalid_grant"
        );
        // The right verifier reaches the forge (down here: temporarily unavailable, and the
        // code may be tried again); a code the forge answered for is used up.
        for _ in 0..2 {
            let e = o.token(&f, &enc(&token(VERIFIER, &client, &code))).await.unwrap_err();
            assert_eq!(e.code, "temporarily_unavailable");
            assert_eq!(e.status, 503);
        }
        let id = o.sealer.open::<Code>(Kind::Code, &code).unwrap().id;
        assert!(o.used.first_use(&id, now() + 60, now()));
        let again = o.token(&f, &enc(&token(VERIFIER, &client, &code))).await.unwrap_err();
        assert!(again.description.contains("already been used"), "{again:?}");
        // An expired code.
        let expired = o.sealer.seal(
            Kind::Code,
            &Code {
                c: client_hash(&client),
                r: "http://127.0.0.1:5555/cb".into(),
                ch: s256(VERIFIER),
                sc: "read".into(),
                res: o.resource.clone(),
                fv: "x".into(),
                f: "F".into(),
                e: now() - 1,
                id: "old".into(),
                g: 0,
                gs: Vec::new(),
            },
        );
        let e = o.token(&f, &enc(&token(VERIFIER, &client, &expired))).await.unwrap_err();
        assert!(e.description.contains("expired"), "{e:?}");
    }

    #[tokio::test]
    async fn a_token_request_names_a_repeated_or_missing_parameter_and_garbage_is_refused_as_wrong() {
        let o = server();
        let f = forge();
        let client = registered(&o);
        let code = code_for(&o, &client).await;
        let exchange = |extra: &[(&str, &str)], drop: &str| {
            let mut p = params(&[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("client_id", &client),
                ("redirect_uri", "http://127.0.0.1:5555/cb"),
                ("code_verifier", VERIFIER),
            ]);
            p.retain(|(k, _)| k != drop);
            p.extend(params(extra));
            enc(&p)
        };
        let refused = |e: OAuthError| (e.status, e.code, e.description);
        let request = |d: &str| (400, "invalid_request", d.to_owned());
        // Repeated: refused by name, whatever the two values.
        for (name, value) in [("code", code.as_str()), ("grant_type", "refresh_token"), ("code_verifier", "")]
        {
            let e = o.token(&f, &exchange(&[(name, value)], "")).await.unwrap_err();
            assert_eq!(refused(e), request(&format!("the parameter {name} is repeated")), "{name}");
        }
        // A repeated parameter this grant does not read is ignored, like an unknown one: the
        // request goes on to its next check (here: the verifier).
        let wrong = "wrong-verifier-wrong-verifier-wrong-verifier-0001";
        let body = exchange(
            &[("scope", "read"), ("scope", "write"), ("x", "1"), ("x", "2"), ("code_verifier", wrong)],
            "code_verifier",
        );
        assert_eq!(o.token(&f, &body).await.unwrap_err().code, "invalid_grant");
        // Missing, or sent empty: named.
        for name in ["grant_type", "client_id", "code"] {
            for body in [exchange(&[], name), exchange(&[(name, "")], name)] {
                let e = o.token(&f, &body).await.unwrap_err();
                assert_eq!(refused(e), request(&format!("the parameter {name} is missing")), "{name}");
            }
        }
        let body = enc(&params(&[("grant_type", "refresh_token"), ("client_id", &client)]));
        let e = o.token(&f, &body).await.unwrap_err();
        assert_eq!(refused(e), request("the parameter refresh_token is missing"));
        let e = o.token(&f, &exchange(&[], "code_verifier")).await.unwrap_err();
        assert_eq!((e.code, e.description.as_str()), ("invalid_grant", "PKCE: the code_verifier is missing"));
        // Not UTF-8, or broken escapes: read as the text they make, which is then wrong.
        let raw = |field: &str, bytes: &[u8]| [exchange(&[], field), b"&".to_vec(), bytes.to_vec()].concat();
        let e = o.token(&f, &raw("grant_type", b"grant_type=%FF%FE")).await.unwrap_err();
        assert_eq!(e.code, "unsupported_grant_type");
        assert!(e.description.contains('\u{FFFD}'), "{e:?}");
        let e = o.token(&f, &raw("code", b"code=aegis-code.%FF\xC3%ZZ")).await.unwrap_err();
        assert_eq!(
            (e.code, e.description.as_str()),
            ("invalid_grant", "the code was not issued by this server")
        );
        let e = o.token(&f, &raw("client_id", b"client_id=%ZZ%4")).await.unwrap_err();
        assert_eq!(
            (e.code, e.description.as_str()),
            ("invalid_grant", "the code was issued to another client")
        );
        let e = o.token(&f, &raw("code_verifier", b"code_verifier=\xFF%FF")).await.unwrap_err();
        assert!(e.description.contains("does not match"), "{e:?}");
        let e =
            o.token(&f, &raw("redirect_uri", b"redirect_uri=http://127.0.0.1:5555/cb%FF")).await.unwrap_err();
        assert!(e.description.contains("redirect_uri differs"), "{e:?}");
        // None of these used the code up: the right request still reaches the forge.
        let e = o.token(&f, &exchange(&[], "")).await.unwrap_err();
        assert_eq!(e.code, "temporarily_unavailable");
    }

    #[tokio::test]
    async fn a_repeated_parameter_at_authorize_approve_or_callback_is_a_page_naming_it() {
        let o = server();
        let f = forge();
        let client = registered(&o);
        let mut p = authorize_params(&client);
        p.push(("state".into(), "st-2".into()));
        let got = o.authorize(&f, &enc(&p), None).await;
        let page = |message: &str| Browser::Page { status: 400, message: message.to_owned() };
        assert_eq!(got, page("the parameter state is repeated (invalid_request)"));
        let Browser::Consent(c) = o.authorize(&f, &enc(&authorize_params(&client)), None).await else {
            panic!()
        };
        let twice = form(&[("pending", &c.pending), ("granted", "true"), ("granted", "true")]);
        assert_eq!(
            o.approve(&f, &twice, Some(&c.browser)),
            page(
                "the answer could not be read (the parameter granted is repeated); start again from your MCP client"
            )
        );
        let b = "BBBBBBBBBBBBBBBBBBBBBB";
        let state =
            o.sealer.seal(Kind::Approved, &sign_in(&o, "http://127.0.0.1:5555/cb", b, "p", now() + 60));
        let twice = form(&[("code", "F"), ("code", "G"), ("state", &state)]);
        assert_eq!(
            o.callback(&twice, Some(b)).await,
            page(
                "the forge's answer could not be read (the parameter code is repeated); start again from your MCP client"
            )
        );
        // Refused before it was used: the same sign-in still comes back once.
        assert!(matches!(
            o.callback(&form(&[("code", "F"), ("state", &state)]), Some(b)).await,
            Browser::Redirect(_)
        ));
    }

    #[test]
    fn access_tokens_are_checked_for_seal_expiry_and_audience() {
        let o = server();
        let access = |e: u64, res: &str| Access {
            c: "c".into(),
            sc: "read".into(),
            res: res.into(),
            f: "forge-tok".into(),
            e,
            fs: Vec::new(),
        };
        let good = o.sealer.seal(Kind::Access, &access(now() + 60, "http://127.0.0.1:8080/mcp"));
        let Presented::Valid(g) = o.verify(&SecretString::from(good.clone())) else { panic!() };
        assert_eq!(g.forge_token.expose_secret(), "forge-tok");
        assert!(g.read_only);
        let expired = o.sealer.seal(Kind::Access, &access(now() - 1, "http://127.0.0.1:8080/mcp"));
        assert!(
            matches!(o.verify(&SecretString::from(expired)), Presented::Invalid(w) if w.contains("expired"))
        );
        let elsewhere = o.sealer.seal(Kind::Access, &access(now() + 60, "https://other.example/mcp"));
        assert!(
            matches!(o.verify(&SecretString::from(elsewhere)), Presented::Invalid(w) if w.contains("another resource"))
        );
        let mut tampered = good.into_bytes();
        let last = tampered.len() - 3;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert!(matches!(o.verify(&SecretString::from(tampered)), Presented::Invalid(_)));
        assert!(matches!(o.verify(&SecretString::from("0123456789abcdef".to_owned())), Presented::NotOurs));
        // A replica with the same key and URL accepts it; one at another URL does not.
        let twin = OAuth::new(&settings("http://127.0.0.1:8080"), "/mcp");
        let t = o.sealer.seal(Kind::Access, &access(now() + 60, "http://127.0.0.1:8080/mcp"));
        assert!(matches!(twin.verify(&SecretString::from(t.clone())), Presented::Valid(_)));
        let other = OAuth::new(&settings("https://mcp.other.example"), "/mcp");
        assert!(matches!(other.verify(&SecretString::from(t)), Presented::Invalid(_)));
    }

    #[tokio::test]
    async fn the_callback_needs_the_approving_browser_once_and_passes_a_refusal_back() {
        let o = server();
        let b = "BBBBBBBBBBBBBBBBBBBBBB";
        assert!(matches!(
            o.callback(&form(&[("code", "F"), ("state", "made-up")]), Some(b)).await,
            Browser::Page { .. }
        ));
        let pending =
            |id: &str, lifetime: u64| sign_in(&o, "http://127.0.0.1:5555/cb", b, id, now() + lifetime);
        let state = o.sealer.seal(Kind::Approved, &pending("p1", 60));
        // Another browser, or none: no code.
        for other in [None, Some("CCCCCCCCCCCCCCCCCCCCCC")] {
            assert!(matches!(
                o.callback(&form(&[("code", "F"), ("state", &state)]), other).await,
                Browser::Page { .. }
            ));
        }
        let Browser::Redirect(url) =
            o.callback(&form(&[("error", "access_denied"), ("state", &state)]), Some(b)).await
        else {
            panic!()
        };
        assert_eq!(query(&url, "error"), "access_denied");
        assert_eq!(query(&url, "state"), "client-state");
        assert_eq!(query(&url, "code"), "");
        // Once only.
        let state = o.sealer.seal(Kind::Approved, &pending("p2", 60));
        assert!(matches!(
            o.callback(&form(&[("code", "F"), ("state", &state)]), Some(b)).await,
            Browser::Redirect(_)
        ));
        assert!(matches!(
            o.callback(&form(&[("code", "F"), ("state", &state)]), Some(b)).await,
            Browser::Page { .. }
        ));
    }

    #[tokio::test]
    async fn nothing_goes_back_to_a_client_for_a_sign_in_the_person_did_not_approve() {
        let o = server();
        let b = "BBBBBBBBBBBBBBBBBBBBBB";
        let sign_in = |id: &str, expires: u64| sign_in(&o, "https://evil.example/landing", b, id, expires);
        // What the consent page shows (anyone who opens /authorize sees it): never a state the
        // callback takes, expired or not, with or without the browser's cookie.
        for expires in [now() - 1, now() + 600] {
            let pending = o.sealer.seal(Kind::Pending, &sign_in("shown", expires));
            for browser in [None, Some(b)] {
                for extra in [("error", "access_denied"), ("code", "F")] {
                    let got = o.callback(&form(&[extra, ("state", &pending)]), browser).await;
                    assert!(matches!(got, Browser::Page { .. }), "{expires} {browser:?} {extra:?}: {got:?}");
                }
            }
        }
        // Approved but expired, approved in another browser, unknown, replayed: pages too.
        let late = o.sealer.seal(Kind::Approved, &sign_in("late", now() - 1));
        let ok = o.sealer.seal(Kind::Approved, &sign_in("ok", now() + 600));
        for (state, browser) in [
            (late.as_str(), Some(b)),
            (ok.as_str(), None),
            (ok.as_str(), Some("CCCCCCCCCCCCCCCCCCCCCC")),
            ("aegis-state.made-up", Some(b)),
        ] {
            let got = o.callback(&form(&[("error", "access_denied"), ("state", state)]), browser).await;
            assert!(matches!(got, Browser::Page { .. }), "{state} {browser:?}: {got:?}");
        }
        // The approved one, in its browser and in time: the forge's refusal goes back.
        let back = o.callback(&form(&[("error", "x"), ("state", &ok)]), Some(b)).await;
        assert!(matches!(back, Browser::Redirect(_)), "{back:?}");
    }

    /// A sign-in application for each of `profiles`, named after it.
    fn apps(profiles: &[&str]) -> Vec<crate::config::SignInApp> {
        let app = |p: &&str| crate::config::SignInApp {
            profile: Some((*p).into()),
            client_id: format!("{p}-app"),
            client_secret: SecretString::from(format!("{p}-secret")),
        };
        profiles.iter().map(app).collect()
    }

    #[test]
    fn a_sign_in_on_three_forges_fits_a_header_and_tokens_too_long_together_are_refused() {
        let mut s = settings("http://127.0.0.1:8080");
        s.apps = apps(&["work", "home", "oss"]);
        let o = OAuth::new(&s, "/mcp");
        // Gitea's access and refresh tokens are RS256 JWTs of some 600 characters.
        let got = |p: &str, n: usize| Got {
            p: p.into(),
            a: format!("eyJ{}", "a".repeat(n - 3)),
            r: Some(format!("eyJ{}", "r".repeat(n - 3))),
            x: 0,
        };
        let three = |n: usize| vec![got("work", n), got("home", n), got("oss", n)];
        let out = o.issue_many("c", "read", "read", &o.resource, three(600)).unwrap();
        let (access, refresh) =
            (out["access_token"].as_str().unwrap(), out["refresh_token"].as_str().unwrap());
        eprintln!("three forges: access token {} bytes, refresh token {} bytes", access.len(), refresh.len());
        assert!(access.len() <= aegis_core::identity::MAX_TOKEN_BYTES);
        assert!(refresh.len() <= seal::MAX_SEALED_BYTES);
        // Every forge's token, each its own, the whole token held to reads.
        let Presented::Forges(grants) = o.verify(&SecretString::from(access.to_owned())) else { panic!() };
        let names: Vec<&str> = grants.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["work", "home", "oss"]);
        assert!(grants.iter().all(|(_, g)| g.read_only && g.forge_token.expose_secret().len() == 600));
        // Three forges at the longest token a forge may answer do not fit: a clear error.
        let e = o
            .issue_many(
                "c",
                "read",
                "read",
                &o.resource,
                three(crate::executor::oauth::MAX_FORGE_TOKEN_BYTES),
            )
            .unwrap_err();
        assert_eq!((e.status, e.code), (500, "server_error"));
        assert!(e.description.contains("sign in to fewer forges"), "{e:?}");
        // A forge without a refresh token: no refresh token at all (a refresh must reach every
        // forge).
        let mut grants = three(600);
        grants[1].r = None;
        assert!(
            o.issue_many("c", "read", "read", &o.resource, grants).unwrap().get("refresh_token").is_none()
        );
    }

    #[tokio::test]
    async fn a_sign_in_on_several_forges_comes_back_once_per_hop_and_only_at_its_forges_callback() {
        let mut s = settings("http://127.0.0.1:8080");
        s.apps = apps(&["work", "home"]);
        let o = OAuth::new(&s, "/mcp");
        let f = forge();
        let client = registered(&o);
        let Browser::Consent(c) = o.authorize(&f, &enc(&authorize_params(&client)), None).await else {
            panic!()
        };
        assert_eq!(c.forges, ["work (http://127.0.0.1:9/)", "home (http://127.0.0.1:9/)"]);
        // Allow, twice: two answers, one sign-in.
        let allow = form(&[("pending", &c.pending), ("granted", "true")]);
        let states: Vec<String> = (0..2)
            .map(|_| {
                let Browser::Redirect(url) = o.approve(&f, &allow, Some(&c.browser)) else { panic!() };
                assert_eq!(query(&url, "client_id"), "work-app");
                assert_eq!(query(&url, "redirect_uri"), "http://127.0.0.1:8080/oauth/callback/work");
                query(&url, "state")
            })
            .collect();
        // At home's callback, or the one-forge callback: refused, nothing used up.
        for at in [Some("home"), None] {
            let got =
                o.callback_at(&f, at, &form(&[("code", "F"), ("state", &states[0])]), Some(&c.browser)).await;
            let Browser::Page { message, .. } = got else { panic!("{got:?}") };
            assert!(message.starts_with("this sign-in was sent to work but came back at"), "{message}");
        }
        // Declined at work: on to home, after a page naming work.
        let declined = form(&[("error", "access_denied"), ("state", &states[0])]);
        let got = o.callback_at(&f, Some("work"), &declined, Some(&c.browser)).await;
        let Browser::Notice { message, next } = got else { panic!("{got:?}") };
        assert!(message.contains("work (declined on its consent page)"), "{message}");
        assert_eq!(query(&next, "client_id"), "home-app");
        // The second answer's state is the same sign-in: it has come back already.
        let got = o.callback_at(&f, Some("work"), &declined, Some(&c.browser)).await;
        assert!(matches!(got, Browser::Page { .. }), "{got:?}");
        let again = form(&[("error", "access_denied"), ("state", &states[1])]);
        let got = o.callback_at(&f, Some("work"), &again, Some(&c.browser)).await;
        let Browser::Page { message, .. } = got else { panic!("{got:?}") };
        assert!(message.contains("already come back once"), "{message}");
        // home's code cannot be exchanged (nothing listens): home drops out too, and with no
        // forge left the client hears access_denied naming both.
        let home = query(&next, "state");
        let got = o
            .callback_at(&f, Some("home"), &form(&[("code", "H"), ("state", &home)]), Some(&c.browser))
            .await;
        let Browser::Redirect(url) = got else { panic!("{got:?}") };
        assert_eq!(query(&url, "error"), "access_denied");
        let words = query(&url, "error_description");
        assert!(words.contains("work (declined") && words.contains("home (it could not be asked"), "{words}");
    }

    /// A sign-in of client `c` for `redirect`, approving browser `b`, expiring at `e`.
    fn sign_in(o: &OAuth, redirect: &str, b: &str, id: &str, e: u64) -> Pending {
        Pending {
            c: "c".into(),
            r: redirect.into(),
            s: "client-state".into(),
            ch: "x".into(),
            sc: "read".into(),
            res: o.resource.clone(),
            fv: "v".into(),
            b: b.into(),
            id: id.into(),
            e,
            g: 0,
            p: String::new(),
            n: Vec::new(),
            gs: Vec::new(),
            dr: Vec::new(),
        }
    }
}
