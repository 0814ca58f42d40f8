//! The forge's OAuth2 provider, as Gitea 1.27 implements it, for a server that signs users in
//! through the forge.
//!
//! Gitea's provider lives in `routers/web/auth/oauth2_provider.go` (the handlers),
//! `services/oauth2_provider/` (tokens and their JWT claims) and `models/auth/oauth2.go`
//! (applications, grants, authorization codes). The fake keeps the same three kinds of state:
//!
//! * applications: [`OAuthApp`]s from [`crate::Options::oauth_apps`], numbered from 1;
//! * grants: one per (user, application), with the consented scope and Gitea's counter, which
//!   every token issue increases and which a refresh token must match — the fake acts as a
//!   forge with `[oauth2] INVALIDATE_REFRESH_TOKENS = true`, so refresh tokens rotate;
//! * authorization codes: single use, valid 10 minutes, bound to a redirect URI and an optional
//!   PKCE challenge; expired codes are dropped whenever a new one is issued.
//!
//! Tokens are JWTs with Gitea's claims (`gnt`, `tt`, `cnt`, `exp`, `iat`, plus a `jti` so that no
//! two are equal) and an `RS256` header; the signature is a keyed hash only this fake can check,
//! so, as on the forge, the token itself is the proof and nothing but grants is stored.
//!
//! The web side ([`web`]) answers `/login/oauth/authorize`, `/login/oauth/access_token` and
//! `/login/oauth/userinfo` after the server has recorded the request and tried the scripts; the
//! API side resolves an access token to its user ([`Provider::api_login`]) and lists the
//! caller's applications ([`Provider::api_reply`]).

mod jwt;
mod token;
mod web;
mod wire;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::Flavor;
use crate::paging::{Page, RequestUri, paginate};
use crate::reply::Reply;
use crate::util::now_rfc3339;

pub(crate) use web::{Site, web};

/// Paths under this prefix are the OAuth2 provider's (bodies bounded by [`BODY_LIMIT`]).
pub(crate) const PREFIX: &str = "/login/oauth/";

/// The largest request body the OAuth2 endpoints read; a longer one is answered 413.
pub(crate) const BODY_LIMIT: usize = 64 * 1024;

/// How long an authorization code stays valid: Gitea's `oauth2AuthorizationCodeValidity`.
const CODE_VALIDITY: Duration = Duration::from_secs(10 * 60);

/// How long a refresh token stays valid: Gitea's default `REFRESH_TOKEN_EXPIRATION_TIME`, 730 h.
const REFRESH_VALIDITY: Duration = Duration::from_secs(730 * 3600);

/// An OAuth2 application registered on the forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthApp {
    /// The client id (Gitea generates a UUID; any string works here).
    pub client_id: String,
    /// The client secret, in clear (Gitea stores a bcrypt hash and compares against it).
    pub client_secret: String,
    /// The registered redirect URIs. Gitea compares them ignoring ASCII case and one trailing
    /// `/`, and for public clients also ignores the port of an `http` loopback address.
    pub redirect_uris: Vec<String>,
    /// A confidential client must authenticate with its secret at the token endpoint; a public
    /// one must use PKCE at the authorization endpoint.
    pub confidential: bool,
    /// The application's display name.
    pub name: String,
    /// The login owning the application (listed by its `/user/applications/oauth2`); empty
    /// means the first login of [`crate::Options::users`].
    pub owner: String,
}

impl OAuthApp {
    /// A confidential client with one redirect URI, named after its client id, owned by the
    /// first configured user.
    pub fn confidential(client_id: &str, client_secret: &str, redirect_uri: &str) -> OAuthApp {
        OAuthApp {
            client_id: client_id.to_string(),
            client_secret: client_secret.to_string(),
            redirect_uris: vec![redirect_uri.to_string()],
            confidential: true,
            name: client_id.to_string(),
            owner: String::new(),
        }
    }

    /// A public client (no secret; PKCE required) with one redirect URI.
    pub fn public(client_id: &str, redirect_uri: &str) -> OAuthApp {
        OAuthApp {
            client_secret: String::new(),
            confidential: false,
            ..OAuthApp::confidential(client_id, "", redirect_uri)
        }
    }
}

/// What an issued, still valid OAuth2 access token stands for (see
/// [`crate::FakeForge::oauth_access`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthAccess {
    /// The login the token acts as.
    pub login: String,
    /// The client id of the application it was issued to.
    pub client_id: String,
    /// The scope of its grant, as the client asked for it (space-separated).
    pub scope: String,
}

/// A registered application with the id and creation time the API shows.
#[derive(Debug, Clone)]
struct AppEntry {
    id: i64,
    app: OAuthApp,
    created: String,
}

/// A user's consent to an application (Gitea's `OAuth2Grant`).
#[derive(Debug, Clone)]
struct Grant {
    id: i64,
    /// Index into [`Provider::apps`].
    app: usize,
    login: String,
    user_id: i64,
    /// Starts at 1; every token issue increases it, and a refresh token must carry the current
    /// value.
    counter: i64,
    scope: String,
    nonce: String,
}

/// An authorization code (Gitea's `OAuth2AuthorizationCode`).
#[derive(Debug, Clone)]
struct Code {
    grant: i64,
    redirect_uri: String,
    challenge: String,
    method: String,
    /// Unix seconds; the code is expired from this second on.
    valid_until: u64,
}

#[derive(Debug, Default)]
struct State {
    grants: Vec<Grant>,
    codes: HashMap<String, Code>,
}

/// The provider's configuration and state, shared by every connection.
#[derive(Debug)]
pub(crate) struct Provider {
    apps: Vec<AppEntry>,
    /// The login the browser is signed in as; `None` when no user is configured at all.
    user: Option<String>,
    access_ttl: Duration,
    /// `ROOT_URL`, the `iss` of ID tokens.
    root_url: String,
    signer: jwt::Signer,
    state: Mutex<State>,
}

impl Provider {
    pub(crate) fn new(opts: &crate::Options, root_url: &str) -> Provider {
        let first_user = opts.users.first().map(|(_, login)| login.clone());
        let created = now_rfc3339();
        let apps = opts
            .oauth_apps
            .iter()
            .enumerate()
            .map(|(i, app)| {
                let mut app = app.clone();
                if app.owner.is_empty() {
                    app.owner = first_user.clone().unwrap_or_default();
                }
                AppEntry { id: i as i64 + 1, app, created: created.clone() }
            })
            .collect();
        Provider {
            apps,
            user: opts.oauth_user.clone().or(first_user),
            access_ttl: opts.oauth_access_ttl,
            root_url: root_url.to_string(),
            signer: jwt::Signer::new(),
            state: Mutex::new(State::default()),
        }
    }

    fn app_by_client_id(&self, client_id: &str) -> Option<usize> {
        self.apps.iter().position(|e| e.app.client_id == client_id)
    }

    /// The login an OAuth2 access token in an `Authorization: Bearer|token X` header acts as:
    /// a token this forge signed, of the access kind, not expired, whose grant still exists
    /// (Gitea's `GetOAuthAccessTokenScopeAndUserID`). `None` for anything else.
    pub(crate) fn api_login(&self, authorization: Option<&str>) -> Option<String> {
        let token = wire::bearer(authorization?)?;
        self.access(token).map(|a| a.login)
    }

    /// See [`crate::FakeForge::oauth_access`].
    pub(crate) fn access(&self, token: &str) -> Option<OAuthAccess> {
        let claims = self.signer.verify(token, now_secs())?;
        if claims.kind != jwt::KIND_ACCESS {
            return None;
        }
        let state = self.state.lock().unwrap();
        let grant = state.grants.iter().find(|g| g.id == claims.grant)?;
        Some(OAuthAccess {
            login: grant.login.clone(),
            client_id: self.apps[grant.app].app.client_id.clone(),
            scope: grant.scope.clone(),
        })
    }

    /// `GET /user/applications/oauth2` and `GET /user/applications/oauth2/{id}` answered from
    /// the configured applications (Gitea's `ListOauth2Applications`/`GetOauth2Application`);
    /// `None` for every other operation.
    pub(crate) fn api_reply(&self, cx: &ApiCtx) -> Option<Reply> {
        let list = match cx.op_id {
            // Gitea and Forgejo name the list operation differently.
            "userGetOauth2Application" | "userGetOAuth2Applications" => true,
            "userGetOAuth2Application" => false,
            _ => return None,
        };
        let Some(login) = cx.caller else {
            return Some(Reply::error(401, cx.root_url, "token is required"));
        };
        let owned = |e: &&AppEntry| e.app.owner.eq_ignore_ascii_case(login);
        if !list {
            // `PathParamInt64`: anything but a decimal number is 0, which no application has.
            let id: i64 = cx.id.parse().unwrap_or(0);
            let reply = match self.apps.iter().filter(owned).find(|e| e.id == id) {
                Some(e) => Reply::json(200, &app_json(e, cx.flavor)),
                None => Reply::not_found(cx.root_url),
            };
            return Some(reply);
        }
        // Newest first (`ORDER BY id DESC`), paginated, `X-Total-Count` but no `Link`.
        let mine: Vec<&AppEntry> = self.apps.iter().rev().filter(owned).collect();
        let page = Page::from_query(&cx.query);
        let items: Vec<Value> = page.slice(&mine).iter().map(|e| app_json(e, cx.flavor)).collect();
        let reply = Reply::json(200, &Value::Array(items));
        Some(paginate(reply, cx.root_url, cx.uri, mine.len(), page, false))
    }
}

/// What [`Provider::api_reply`] looks at.
#[derive(Debug)]
pub(crate) struct ApiCtx<'a> {
    pub root_url: &'a str,
    pub flavor: Flavor,
    pub op_id: &'a str,
    pub caller: Option<&'a str>,
    /// The `{id}` path parameter, decoded ("" if none).
    pub id: &'a str,
    pub query: Vec<(String, String)>,
    pub uri: RequestUri<'a>,
}

/// Gitea's `OAuth2Application` JSON, with the secret hidden as both API routes do.
fn app_json(e: &AppEntry, flavor: Flavor) -> Value {
    let mut v = json!({
        "id": e.id,
        "name": e.app.name,
        "client_id": e.app.client_id,
        "client_secret": "",
        "confidential_client": e.app.confidential,
        "skip_secondary_authorization": false,
        "redirect_uris": e.app.redirect_uris,
        "created": e.created,
    });
    if flavor == Flavor::Forgejo {
        // Forgejo's `OAuth2Application` has no such field.
        if let Some(o) = v.as_object_mut() {
            o.shift_remove("skip_secondary_authorization");
        }
    }
    v
}

/// Unix seconds now.
fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}
