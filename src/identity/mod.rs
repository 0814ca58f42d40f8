//! Who is calling: the identity a call runs under, and the credential that proves it.
//!
//! An `Identity` cannot exist without its mode; a `Credential` cannot be printed (its
//! header value is marked sensitive and its `Debug` says nothing). Over stdio every call
//! runs as the global identity: the configured token, the configured login and password
//! (HTTP Basic), or anonymous without either.

pub(crate) mod cache;
pub(crate) mod header;

pub use aegis_core::identity::{Identity, Mode, basic_blob};

use std::sync::Arc;

use reqwest::header::HeaderValue;
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::OnceCell;

/// Who the forge says a credential belongs to (`GET /api/v1/user`): the login, and whether
/// that user is a site administrator (which sudo needs). Cached together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ForgeUser {
    pub(crate) login: String,
    pub(crate) is_admin: bool,
}

/// The `Authorization` header of an identity, attached to outbound requests only by the
/// executor, only for the configured forge; and, for a call made as another user, the `Sudo`
/// header that names that user.
#[derive(Clone)]
pub(crate) struct Credential {
    header: Option<HeaderValue>,
    secret: Option<SecretString>,
    /// HTTP Basic (a login and password) rather than a token.
    basic: bool,
    /// The login to act as (`Sudo`), once `identify::sudo::authorize` allowed it.
    sudo: Option<HeaderValue>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match (&self.header, self.basic) {
            (None, _) => "Credential(none)",
            (Some(_), true) => "Credential(basic)",
            (Some(_), false) => "Credential(token)",
        })
    }
}

impl Credential {
    /// No credential: anonymous access.
    pub(crate) fn anonymous() -> Credential {
        Credential { header: None, secret: None, basic: false, sudo: None }
    }

    /// A login and password, sent as `Authorization: Basic base64(login:password)`, marked
    /// sensitive. The forges serve some routes (creating and listing access tokens) only to
    /// this. Always a valid header value: base64 is plain ASCII.
    pub(crate) fn basic(username: &str, password: &SecretString) -> Credential {
        let blob = basic_blob(username, password);
        let mut hv = HeaderValue::from_str(&format!("Basic {}", blob.expose_secret()))
            .expect("base64 is a valid header value");
        hv.set_sensitive(true);
        Credential { header: Some(hv), secret: Some(password.clone()), basic: true, sudo: None }
    }

    /// A forge access token, sent as `Authorization: token <t>`. Fails only for a token
    /// that cannot be an HTTP header value (control characters), with no value in the error.
    pub(crate) fn token(token: &SecretString) -> Result<Credential, InvalidToken> {
        let mut hv =
            HeaderValue::from_str(&format!("token {}", token.expose_secret())).map_err(|_| InvalidToken)?;
        hv.set_sensitive(true);
        Ok(Credential { header: Some(hv), secret: Some(token.clone()), basic: false, sudo: None })
    }

    /// The header value to send, if any.
    pub(crate) fn header(&self) -> Option<&HeaderValue> {
        self.header.as_ref()
    }

    /// The `Sudo` header value to send, if the call acts as another user.
    pub(crate) fn sudo(&self) -> Option<&HeaderValue> {
        self.sudo.as_ref()
    }

    /// The same credential, acting as `login` (sent as `Sudo: <login>`). Only
    /// `identify::sudo::authorize` calls this, after checking the caller may.
    pub(crate) fn acting_as(mut self, login: &str) -> Result<Credential, InvalidToken> {
        self.sudo = Some(HeaderValue::from_str(login).map_err(|_| InvalidToken)?);
        Ok(self)
    }

    /// The raw secret (the token, or the password), for exact redaction of results.
    pub(crate) fn secret(&self) -> Option<&SecretString> {
        self.secret.as_ref()
    }

    pub(crate) fn mode(&self) -> Mode {
        match (&self.header, &self.secret) {
            (None, _) => Mode::Anonymous,
            (Some(_), _) if self.basic => Mode::Basic,
            (Some(_), Some(s)) if looks_like_jwt(s.expose_secret()) => Mode::OAuth,
            (Some(_), _) => Mode::Token,
        }
    }

    /// A forge OAuth access token, sent as `Bearer` (a signed-in person's grant).
    pub(crate) fn bearer(token: &SecretString) -> Result<Credential, InvalidToken> {
        let mut hv =
            HeaderValue::from_str(&format!("Bearer {}", token.expose_secret())).map_err(|_| InvalidToken)?;
        hv.set_sensitive(true);
        Ok(Credential { header: Some(hv), secret: Some(token.clone()), basic: false, sudo: None })
    }

    /// A caller's own token from an HTTP request: an OAuth access token issued by the forge
    /// (a JWT) goes as `Bearer`, an access token as `token`; both are marked sensitive.
    pub(crate) fn request_token(token: &SecretString) -> Result<Credential, InvalidToken> {
        let scheme = if looks_like_jwt(token.expose_secret()) { "Bearer" } else { "token" };
        let mut hv = HeaderValue::from_str(&format!("{scheme} {}", token.expose_secret()))
            .map_err(|_| InvalidToken)?;
        hv.set_sensitive(true);
        Ok(Credential { header: Some(hv), secret: Some(token.clone()), basic: false, sudo: None })
    }
}

/// Gitea and Forgejo issue OAuth2 access tokens as JWTs; access tokens are 40 hex digits.
fn looks_like_jwt(t: &str) -> bool {
    let parts: Vec<&str> = t.split('.').collect();
    parts.len() == 3
        && t.starts_with("eyJ")
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
}

/// Who a caller is once its login is known, as its limits and sessions count it: the server's
/// own identity (stdio, `MCP_BEARER_TOKEN`, requests without a token — all one), or the forge
/// login a token resolved to, in lower case (the forges match logins in any letter case, so
/// every token of one login, in any spelling, is one principal; a sudo target is not).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Principal {
    Global,
    Login(String),
}

impl Principal {
    /// The principal of a login.
    pub(crate) fn login(login: &str) -> Principal {
        Principal::Login(login.to_lowercase())
    }

    /// The principal of a caller whose identity is now known: `global` when the caller is
    /// the server's own identity (`Caller::Global`), else the login it resolved to.
    pub(crate) fn of(global: bool, identity: &Identity) -> Principal {
        Principal::of_on(None, global, identity)
    }

    /// `of` on the forge `forge` of several: a login there is `forge:login`, since one login
    /// on two forges may be two people.
    pub(crate) fn of_on(forge: Option<&str>, global: bool, identity: &Identity) -> Principal {
        match (&identity.login, forge) {
            (Some(login), None) if !global => Principal::login(login),
            (Some(login), Some(forge)) if !global => {
                Principal::Login(format!("{forge}:{}", login.to_lowercase()))
            }
            _ => Principal::Global,
        }
    }
}

/// Who is calling: the one answer to that question, from the transport to the forge request.
/// Over stdio always `Global`; over HTTP what the `Authorization` header said, put into the
/// request's extensions by the authentication layer (`transport/layers.rs`).
#[derive(Clone)]
pub enum Caller {
    /// The server's own identity (stdio; over HTTP `MCP_BEARER_TOKEN`, or no header when
    /// neither that nor sign-in is configured).
    Global,
    /// The caller's own forge token (an access token, or an OAuth access token the forge
    /// issued), sent to the forge as is.
    Token(SecretString),
    /// A token this server issued after the person signed in on the forge (`oauth/`): the
    /// forge grant it carries, and what it allows.
    Granted(Grant),
    /// With several forges (a profiles file), the credentials a request carries for each:
    /// `X-MCP-Forge-Authorization-<profile>` headers, and `Authorization` for the default forge
    /// — or, for a sign-in on several forges, a grant for each of them.
    /// A forge it carries none for gets none: never another forge's, never the server's own.
    Forges(Arc<ForgeCredentials>),
}

/// What one request carries for several forges.
#[derive(Clone)]
pub struct ForgeCredentials {
    /// What `Authorization` carried (a forge token or a sign-in): the default forge's.
    pub(crate) default: Option<Caller>,
    /// The credential of each other forge, by profile name: a forge token from its own header
    /// (`Caller::Token`), or its grant of a sign-in on several forges (`Caller::Granted`).
    pub(crate) named: Vec<(String, Caller)>,
}

/// What a token issued by this server carries, once opened.
#[derive(Clone)]
pub struct Grant {
    /// The forge's OAuth access token, sent as `Bearer`.
    pub(crate) forge_token: SecretString,
    /// The token the client presented (ours), redacted from results like the forge's.
    pub(crate) presented: SecretString,
    /// Signed in with the `read` scope only: every call is held to reads, as with
    /// `X-MCP-Readonly`.
    pub(crate) read_only: bool,
}

impl Caller {
    /// The caller's own secrets, for exact redaction of its results (none for the global
    /// identity, whose token the guard always knows): every forge's it carries.
    pub(crate) fn secrets(&self) -> Vec<String> {
        match self {
            Caller::Global => Vec::new(),
            Caller::Token(t) => vec![t.expose_secret().to_owned()],
            Caller::Granted(g) => {
                vec![g.forge_token.expose_secret().to_owned(), g.presented.expose_secret().to_owned()]
            }
            Caller::Forges(f) => {
                let mut out = f.default.as_ref().map(Caller::secrets).unwrap_or_default();
                out.extend(f.named.iter().flat_map(|(_, c)| c.secrets()));
                out
            }
        }
    }

    /// The caller on one forge: on the forge `profile` (a profile's name; `None`: the one
    /// forge of the environment settings), which is the default forge or not. The server's own
    /// identity is the same everywhere; a request's own credential is only its forge's
    /// (`Authorization` the default forge's). `None`: the request carries none for it.
    pub(crate) fn on(&self, profile: Option<&str>, default: bool) -> Option<Caller> {
        match self {
            Caller::Global => Some(Caller::Global),
            Caller::Token(_) | Caller::Granted(_) => default.then(|| self.clone()),
            Caller::Forges(f) => match f.named.iter().find(|(n, _)| Some(n.as_str()) == profile) {
                Some((_, caller)) => Some(caller.clone()),
                None if default => f.default.clone(),
                None => None,
            },
        }
    }

    /// Whether the request signed in with the `read` scope only: every call it makes, on
    /// every forge, is held to reads.
    pub(crate) fn read_only(&self) -> bool {
        match self {
            Caller::Granted(g) => g.read_only,
            Caller::Forges(f) => {
                f.default.as_ref().is_some_and(Caller::read_only)
                    || f.named.iter().any(|(_, c)| c.read_only())
            }
            Caller::Global | Caller::Token(_) => false,
        }
    }
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Caller::Global => "Caller::Global",
            Caller::Token(_) => "Caller::Token(..)",
            Caller::Granted(_) => "Caller::Granted(..)",
            Caller::Forges(_) => "Caller::Forges(..)",
        })
    }
}

/// A token that cannot be sent in a header.
#[derive(Debug, thiserror::Error)]
#[error(
    "the token contains characters that cannot be sent in an HTTP header (check for a stray newline or quote)"
)]
pub(crate) struct InvalidToken;

/// The server's own identity (stdio, and HTTP callers without a token of their own):
/// the credential plus its user, resolved with `GET /api/v1/user` once and cached.
#[derive(Debug, Clone)]
pub(crate) struct GlobalIdentity {
    pub(crate) credential: Credential,
    user: Arc<OnceCell<ForgeUser>>,
}

impl GlobalIdentity {
    pub(crate) fn new(credential: Credential) -> GlobalIdentity {
        GlobalIdentity { credential, user: Arc::new(OnceCell::new()) }
    }

    /// The cached login, if resolved.
    pub(crate) fn cached_login(&self) -> Option<&str> {
        self.user.get().map(|u| u.login.as_str())
    }

    /// The cached user (login and whether a site administrator), if resolved.
    pub(crate) fn cached_user(&self) -> Option<&ForgeUser> {
        self.user.get()
    }

    /// Remember the user (first resolution wins).
    pub(crate) fn remember(&self, user: ForgeUser) {
        let _ = self.user.set(user);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_debug_and_header_debug_hide_the_token() {
        let c = Credential::token(&SecretString::from("tok-very-secret")).unwrap();
        assert!(!format!("{c:?}").contains("tok-very-secret"));
        assert!(!format!("{:?}", c.header().unwrap()).contains("tok-very-secret"));
        assert!(c.header().unwrap().is_sensitive());
        assert_eq!(c.mode(), Mode::Token);
    }

    #[test]
    fn a_token_with_a_newline_is_refused_without_echoing_it() {
        let e = Credential::token(&SecretString::from("abc\ndef")).unwrap_err();
        assert!(!e.to_string().contains("abc"));
    }

    #[test]
    fn basic_credentials_are_sensitive_hide_the_password_and_say_basic() {
        let pw = SecretString::from("pa:ss wörd");
        let c = Credential::basic("alice", &pw);
        assert_eq!(c.mode(), Mode::Basic);
        let h = c.header().unwrap();
        assert!(h.is_sensitive());
        // base64("alice:pa:ss wörd"): the password may hold ':' and any character.
        assert_eq!(h.as_bytes(), b"Basic YWxpY2U6cGE6c3Mgd8O2cmQ=");
        assert_eq!(basic_blob("alice", &pw).expose_secret(), "YWxpY2U6cGE6c3Mgd8O2cmQ=");
        assert_eq!(format!("{c:?}"), "Credential(basic)");
        assert!(!format!("{h:?}").contains("YWxp"));
        assert_eq!(c.secret().unwrap().expose_secret(), "pa:ss wörd");
    }

    #[test]
    fn forge_oauth_tokens_are_recognised_and_sent_as_bearer() {
        let jwt = SecretString::from("eyJhbGciOiJSUzI1NiJ9.eyJnbnQiOjJ9.c2lnbmF0dXJl");
        let c = Credential::request_token(&jwt).unwrap();
        assert_eq!(c.mode(), Mode::OAuth);
        assert!(c.header().unwrap().as_bytes().starts_with(b"Bearer "));
        let pat = SecretString::from("0123456789abcdef0123456789abcdef01234567");
        let c = Credential::request_token(&pat).unwrap();
        assert_eq!(c.mode(), Mode::Token);
        assert!(c.header().unwrap().as_bytes().starts_with(b"token "));
        assert!(c.header().unwrap().is_sensitive());
    }

    #[test]
    fn identity_serializes_as_the_interface_says() {
        let i = Identity { login: None, mode: Mode::OAuth, sudo: None };
        assert_eq!(
            serde_json::to_value(&i).unwrap(),
            serde_json::json!({"login": null, "mode": "oauth", "sudo": null})
        );
    }
}
