//! The web routes: `GET /login/oauth/authorize` (Gitea's `AuthorizeOAuth`, with the signed-in
//! user consenting at once), `POST /login/oauth/access_token` (see [`super::token`]) and
//! `GET|POST /login/oauth/userinfo` (`InfoOAuth`).
//!
//! Authorization errors follow `handleAuthorizeError`: before the redirect URI is known to be
//! registered they are a 400 HTML page; afterwards a 303 back to the redirect URI with `error`,
//! `error_description` and `state` in its query.

use serde_json::json;

#[cfg(test)]
use super::wire::loopback_without_port;
use super::wire::{self, Authorization, Form, contains_redirect_uri};
use super::{CODE_VALIDITY, Code, Grant, Provider, now_secs};
use crate::auth::{Caller, caller};
use crate::model::Model;
use crate::model::user_json;
use crate::recorded::Recorded;
use crate::reply::Reply;

/// Answers a request to one of the provider's routes; `None` for any other path.
/// What the provider's web routes read of the forge: the provider, the users' model, the
/// forge's root URL and its tokens (`Options::users`).
pub(crate) struct Site<'a> {
    pub provider: &'a Provider,
    pub model: &'a std::sync::Mutex<Model>,
    pub root_url: &'a str,
    pub users: &'a [(String, String)],
}

pub(crate) fn web(shared: &Site<'_>, rec: &Recorded) -> Option<Reply> {
    let method = rec.method.as_str();
    let reply = match rec.raw_path.as_str() {
        "/login/oauth/authorize" => match method {
            "GET" => authorize(shared, rec),
            _ => Reply::empty(405),
        },
        "/login/oauth/access_token" => match method {
            "POST" => super::token::access_token(shared.provider, rec),
            _ => Reply::empty(405),
        },
        "/login/oauth/userinfo" => match method {
            "GET" | "POST" => userinfo(shared, rec),
            _ => Reply::empty(405),
        },
        _ => return None,
    };
    Some(reply)
}

/// An error of the authorization endpoint (Gitea's `AuthorizeError`).
struct AuthorizeError {
    code: &'static str,
    description: &'static str,
}

const CLIENT_NOT_REGISTERED: AuthorizeError =
    AuthorizeError { code: "unauthorized_client", description: "Client ID not registered" };
const UNREGISTERED_REDIRECT: AuthorizeError =
    AuthorizeError { code: "invalid_request", description: "Unregistered Redirect URI" };
const ONLY_CODE: AuthorizeError = AuthorizeError {
    code: "unsupported_response_type",
    description: "Only code response type is supported.",
};
const PKCE_REQUIRED: AuthorizeError =
    AuthorizeError { code: "invalid_request", description: "PKCE is required for public clients" };
const UNSUPPORTED_METHOD: AuthorizeError =
    AuthorizeError { code: "invalid_request", description: "unsupported code challenge method" };
const SERVER_ERROR: AuthorizeError =
    AuthorizeError { code: "server_error", description: "A server error occurred" };

/// `handleAuthorizeError`: an error page without a redirect URI, else a 303 to it.
fn authorize_error(e: &AuthorizeError, state: &str, redirect_uri: Option<&str>) -> Reply {
    match redirect_uri {
        None => wire::grant_error_page(e.code, e.description),
        Some(uri) => wire::see_other(&wire::with_query(
            uri,
            &[("error", e.code), ("error_description", e.description), ("state", state)],
        )),
    }
}

/// `AuthorizeOAuth` followed by the user granting access (`GrantApplicationOAuth`).
fn authorize(shared: &Site<'_>, rec: &Recorded) -> Reply {
    let p = &shared.provider;
    let form = Form::from_query(rec);
    let (state, redirect_uri) = (form.get("state"), form.get("redirect_uri"));
    let Some(app) = p.app_by_client_id(form.get("client_id")) else {
        return authorize_error(&CLIENT_NOT_REGISTERED, state, None);
    };
    if !contains_redirect_uri(&p.apps[app].app, redirect_uri) {
        return authorize_error(&UNREGISTERED_REDIRECT, state, None);
    }
    if form.get("response_type") != "code" {
        return authorize_error(&ONLY_CODE, state, Some(redirect_uri));
    }
    let method = form.get("code_challenge_method");
    match method {
        "S256" | "plain" => {}
        // RFC 8252 8.1 and RFC 7636 4.4.1: public clients must use PKCE.
        "" if !p.apps[app].app.confidential => {
            return authorize_error(&PKCE_REQUIRED, state, Some(redirect_uri));
        }
        "" => {}
        _ => return authorize_error(&UNSUPPORTED_METHOD, state, Some(redirect_uri)),
    }
    // The browser is signed in as this user, who consents at once.
    let Some(login) = p.user.clone() else {
        return authorize_error(&SERVER_ERROR, state, Some(redirect_uri));
    };
    let user_id = shared.model.lock().unwrap().user_id(&login);
    let code = p.consent(app, &login, user_id, &form);
    let mut set = vec![("code", code.as_str())];
    if !state.is_empty() {
        set.push(("state", state));
    }
    wire::see_other(&wire::with_query(redirect_uri, &set))
}

impl Provider {
    /// Creates or updates the user's grant for `app` with the requested scope and nonce and
    /// issues an authorization code for it (Gitea's `CreateGrant`/`SetScope`/`SetNonce` and
    /// `GenerateNewAuthorizationCode`). Expired codes are forgotten here.
    pub(super) fn consent(&self, app: usize, login: &str, user_id: i64, form: &Form) -> String {
        let now = now_secs();
        let code = format!("gta_{}", base32_lower(&self.signer.nonce()));
        let mut state = self.state.lock().unwrap();
        let grant = match state.grants.iter().position(|g| g.app == app && g.user_id == user_id) {
            Some(i) => &mut state.grants[i],
            None => {
                let id = state.grants.iter().map(|g| g.id).max().unwrap_or(0) + 1;
                state.grants.push(Grant {
                    id,
                    app,
                    login: login.to_string(),
                    user_id,
                    counter: 1,
                    scope: String::new(),
                    nonce: String::new(),
                });
                state.grants.last_mut().expect("just pushed")
            }
        };
        grant.scope = form.get("scope").to_string();
        if !form.get("nonce").is_empty() {
            grant.nonce = form.get("nonce").to_string();
        }
        let grant = grant.id;
        state.codes.retain(|_, c| c.valid_until > now);
        state.codes.insert(
            code.clone(),
            Code {
                grant,
                redirect_uri: form.get("redirect_uri").to_string(),
                challenge: form.get("code_challenge").to_string(),
                method: form.get("code_challenge_method").to_string(),
                valid_until: now + CODE_VALIDITY.as_secs(),
            },
        );
        code
    }
}

/// Lower-case base32 without padding, as Gitea spells codes (`gta_…`).
fn base32_lower(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &b in bytes {
        buffer = (buffer << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// `InfoOAuth`: the signed-in user's claims. Gitea's `OAuth2` auth method accepts any access
/// token, its own JWTs and personal tokens alike, and names itself `oauth2` for both.
fn userinfo(shared: &Site<'_>, rec: &Recorded) -> Reply {
    let no_valid = || {
        wire::plain_text(401, "no valid authorization")
            .header("www-authenticate", "Bearer realm=\"Gitea OAuth2\"")
    };
    let Some(header) = rec.header("authorization") else {
        return no_valid();
    };
    let login = match wire::authorization(header) {
        Authorization::Unparsed => return no_valid(),
        // A token in Basic credentials signs in with the `basic` method, not `oauth2`; other
        // Basic credentials (passwords are not modelled) fail the web auth group.
        Authorization::Basic { user, password } => {
            match token_login(shared, &password).or_else(|| token_login(shared, &user)) {
                Some(_) => return no_valid(),
                None => None,
            }
        }
        Authorization::Bearer(token) => token_login(shared, &token),
    };
    let Some(login) = login else {
        return wire::http_error(401, "Failed to authenticate user");
    };
    let id = shared.model.lock().unwrap().user_id(&login);
    let user = user_json(shared.root_url, &login, id, false);
    let full_name = user["full_name"].as_str().unwrap_or("");
    Reply::json(
        200,
        &json!({
            "sub": id.to_string(),
            "name": if full_name.is_empty() { login.as_str() } else { full_name },
            "preferred_username": login,
            "email": user["email"],
            "picture": user["avatar_url"],
            // The fake has no organisations; Go marshals the empty list as null.
            "groups": null,
        }),
    )
}

/// The login of a configured token or of an issued OAuth2 access token.
fn token_login(shared: &Site<'_>, token: &str) -> Option<String> {
    match caller(Some(&format!("token {token}")), shared.users, &[]) {
        Caller::User(login) => Some(login),
        _ => shared.provider.access(token).map(|a| a.login),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OAuthApp;

    #[test]
    fn redirect_uris_match_like_gitea() {
        let conf = OAuthApp::confidential("c", "s", "https://App.example/cb/");
        assert!(contains_redirect_uri(&conf, "https://app.example/CB"));
        assert!(!contains_redirect_uri(&conf, "https://app.example/cb/x"));
        assert!(!contains_redirect_uri(&conf, "https://app.example/cb?x=1"));
        assert!(!contains_redirect_uri(&conf, ""));
        let local = OAuthApp::public("p", "http://127.0.0.1/cb");
        assert!(contains_redirect_uri(&local, "http://127.0.0.1:8123/cb"));
        assert!(!contains_redirect_uri(&local, "https://127.0.0.1:8123/cb"));
        let conf_local = OAuthApp { confidential: true, ..local.clone() };
        assert!(!contains_redirect_uri(&conf_local, "http://127.0.0.1:8123/cb"));
        // Gitea loses the brackets of an IPv6 loopback address, so it never matches.
        let v6 = OAuthApp::public("p", "http://[::1]/cb");
        assert!(!contains_redirect_uri(&v6, "http://[::1]:99/cb"));
        assert_eq!(loopback_without_port("http://u@[::1]:99/cb").as_deref(), Some("http://u@::1/cb"));
        assert!(!contains_redirect_uri(
            &OAuthApp::public("p", "http://localhost/cb"),
            "http://localhost:9/cb"
        ));
    }

    #[test]
    fn codes_are_base32_like_gitea() {
        assert_eq!(base32_lower(b"foobar"), "mzxw6ytboi");
        assert_eq!(base32_lower(&[0u8; 32]).len(), 52);
    }
}
