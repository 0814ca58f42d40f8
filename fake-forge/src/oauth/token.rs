//! `POST /login/oauth/access_token`: Gitea's `AccessTokenOAuth`, `handleAuthorizationCode`,
//! `handleRefreshToken` and `NewAccessTokenResponse`, check for check and message for message.
//!
//! Every failure is `400` with `{"error", "error_description"}` (`handleAccessTokenError`).
//! Client credentials come from the body, or from `Authorization: Basic` when the body lacks
//! the id or the secret (a body value must then agree with the header).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::jwt::{KIND_ACCESS, KIND_REFRESH};
use super::wire::contains_redirect_uri;
use super::wire::{self, Authorization, Form};
use super::{Grant, OAuthApp, Provider, REFRESH_VALIDITY, State, now_secs};
use crate::model::user_json;
use crate::recorded::Recorded;
use crate::reply::Reply;

/// The fields of Gitea's `AccessTokenForm`, by their `json` tags.
const FIELDS: &[&str] =
    &["grant_type", "client_id", "client_secret", "redirect_uri", "code", "refresh_token", "code_verifier"];

/// `invalid_request`, `invalid_client`, … with a description: always a 400.
fn error(code: &str, description: &str) -> Reply {
    Reply::json(400, &json!({"error": code, "error_description": description}))
}

pub(super) fn access_token(p: &Provider, rec: &Recorded) -> Reply {
    let form = Form::from_post(rec, FIELDS);
    let (mut client_id, mut secret) =
        (form.get("client_id").to_string(), form.get("client_secret").to_string());
    if (client_id.is_empty() || secret.is_empty())
        && let Some(header) = rec.header("authorization").filter(|h| !h.is_empty())
    {
        let Authorization::Basic { user, password } = wire::authorization(header) else {
            return error("invalid_request", "cannot parse basic auth header");
        };
        if !client_id.is_empty() && client_id != user {
            return error(
                "invalid_request",
                "client_id in request body inconsistent with Authorization header",
            );
        }
        client_id = user;
        if !secret.is_empty() && secret != password {
            return error(
                "invalid_request",
                "client_secret in request body inconsistent with Authorization header",
            );
        }
        secret = password;
    }

    let client = Client { id: &client_id, secret: &secret };
    match form.get("grant_type") {
        "refresh_token" => p.refresh(&client, &form),
        "authorization_code" => p.exchange_code(&client, &form),
        _ => error(
            "unsupported_grant_type",
            "Only refresh_token or authorization_code grant type is supported",
        ),
    }
}

/// The client credentials of a token request.
struct Client<'a> {
    id: &'a str,
    secret: &'a str,
}

impl Client<'_> {
    /// `ValidateClientSecret`: Gitea compares against a bcrypt hash, so an application without
    /// a secret accepts none.
    fn secret_ok(&self, app: &OAuthApp) -> bool {
        !app.client_secret.is_empty() && self.secret == app.client_secret
    }

    fn secret_error(&self) -> &'static str {
        if self.secret.is_empty() { "invalid empty client secret" } else { "invalid client secret" }
    }
}

impl Provider {
    /// `handleAuthorizationCode`.
    fn exchange_code(&self, client: &Client, form: &Form) -> Reply {
        let Some(app) = self.app_by_client_id(client.id) else {
            return error("invalid_client", &format!("cannot load client with client id: '{}'", client.id));
        };
        let registered = &self.apps[app].app;
        if registered.confidential && !client.secret_ok(registered) {
            return error("unauthorized_client", client.secret_error());
        }
        let redirect_uri = form.get("redirect_uri");
        if !redirect_uri.is_empty() && !contains_redirect_uri(registered, redirect_uri) {
            return error("unauthorized_client", "unexpected redirect URI");
        }
        let mut state = self.state.lock().unwrap();
        let code_value = form.get("code");
        let Some(code) = state.codes.get(code_value).cloned() else {
            return error("unauthorized_client", "client is not authorized");
        };
        let Some(grant) = state.grants.iter().position(|g| g.id == code.grant) else {
            return error("unauthorized_client", "client is not authorized");
        };
        if code.valid_until <= now_secs() {
            state.codes.remove(code_value);
            return error("invalid_grant", "authorization code expired");
        }
        if !pkce_ok(&code.method, &code.challenge, form.get("code_verifier")) {
            return error("unauthorized_client", "failed PKCE code challenge");
        }
        if !code.redirect_uri.is_empty() && redirect_uri != code.redirect_uri {
            return error("invalid_grant", "redirect_uri differs from the original authorization request");
        }
        if state.grants[grant].app != app {
            return error("invalid_grant", "invalid grant");
        }
        // Deleted before the tokens are made, so a code is good for one exchange only.
        if state.codes.remove(code_value).is_none() {
            return error("invalid_grant", "authorization code already used");
        }
        self.issue(&mut state, grant)
    }

    /// `handleRefreshToken`, with refresh tokens invalidated once used.
    fn refresh(&self, client: &Client, form: &Form) -> Reply {
        let Some(app) = self.app_by_client_id(client.id) else {
            return error(
                "invalid_client",
                &format!("cannot load client with client id: {}", go_quote(client.id)),
            );
        };
        let registered = &self.apps[app].app;
        if registered.confidential && !client.secret_ok(registered) {
            return error("invalid_client", client.secret_error());
        }
        let Some(claims) = self.signer.verify(form.get("refresh_token"), now_secs()) else {
            return error("unauthorized_client", "unable to parse refresh token");
        };
        let mut state = self.state.lock().unwrap();
        let Some(grant) = state.grants.iter().position(|g| g.id == claims.grant) else {
            return error("invalid_grant", "grant does not exist");
        };
        if state.grants[grant].app != app {
            return error("invalid_grant", "refresh token belongs to a different client");
        }
        // Any token but the latest refresh token of the grant (an access token has no counter).
        if state.grants[grant].counter != claims.counter || claims.counter == 0 {
            return error("unauthorized_client", "token was already used");
        }
        self.issue(&mut state, grant)
    }

    /// `NewAccessTokenResponse`: bumps the grant's counter (which retires every refresh token
    /// issued before), then signs an access token, a refresh token carrying the new counter
    /// and, for the `openid` scope, an ID token.
    fn issue(&self, state: &mut State, grant: usize) -> Reply {
        let now = now_secs();
        let grant = &mut state.grants[grant];
        grant.counter += 1;
        let ttl = self.access_ttl.as_secs();
        let access = self.signer.token(grant.id, KIND_ACCESS, 0, now, now + ttl);
        let refresh =
            self.signer.token(grant.id, KIND_REFRESH, grant.counter, now, now + REFRESH_VALIDITY.as_secs());
        let mut body = json!({
            "access_token": access,
            "token_type": "bearer",
            "expires_in": ttl,
            "refresh_token": refresh,
        });
        if scope_contains(&grant.scope, "openid") {
            body["id_token"] = json!(self.signer.sign(&self.id_token_claims(grant, now, now + ttl)));
        }
        Reply::json(200, &body)
    }

    /// Gitea's `OIDCToken`: registered claims, the nonce, then the claims of the `profile`,
    /// `email` and `groups` scopes (empty ones omitted).
    fn id_token_claims(&self, grant: &Grant, now: u64, exp: u64) -> Value {
        let app = &self.apps[grant.app].app;
        let user = user_json(&self.root_url, &grant.login, grant.user_id, false);
        let mut claims = json!({
            "iss": self.root_url,
            "sub": grant.user_id.to_string(),
            "aud": [app.client_id],
            "exp": exp,
            "iat": now,
        });
        if !grant.nonce.is_empty() {
            claims["nonce"] = json!(grant.nonce);
        }
        if scope_contains(&grant.scope, "profile") {
            let full_name = user["full_name"].as_str().unwrap_or("");
            claims["name"] = json!(if full_name.is_empty() { grant.login.as_str() } else { full_name });
            claims["preferred_username"] = json!(grant.login);
            claims["profile"] = user["html_url"].clone();
            claims["picture"] = user["avatar_url"].clone();
        }
        if scope_contains(&grant.scope, "email") {
            claims["email"] = user["email"].clone();
            claims["email_verified"] = json!(true);
        }
        claims
    }
}

/// `OAuth2Grant.ScopeContains`: the scope split at single spaces.
fn scope_contains(scope: &str, wanted: &str) -> bool {
    scope.split(' ').any(|s| s == wanted)
}

/// `OAuth2AuthorizationCode.ValidateCodeChallenge`: no challenge and no method needs no
/// verifier; otherwise the verifier must be given and match with a known method.
fn pkce_ok(method: &str, challenge: &str, verifier: &str) -> bool {
    if method.is_empty() && challenge.is_empty() {
        return true;
    }
    if verifier.is_empty() {
        return false;
    }
    match method {
        "S256" => URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) == challenge,
        "plain" => verifier == challenge,
        _ => false,
    }
}

/// Go's `%q` for the strings a client sends: quoted, `"` and `\` escaped, control characters
/// as escapes.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_like_gitea() {
        // base64url(SHA-256(verifier)) without padding, as computed by Python's hashlib.
        let verifier = "dBjftJeZ4CVP-mJ92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "ngF5GsXcbwljx6u133FFr3Xht9xooA_DuaX_3QwODtc";
        assert!(pkce_ok("S256", challenge, verifier));
        assert!(!pkce_ok("S256", challenge, "wrong"));
        assert!(!pkce_ok("S256", challenge, ""));
        assert!(pkce_ok("plain", "abc", "abc"));
        assert!(pkce_ok("", "", ""));
        assert!(pkce_ok("", "", "anything"));
        // A challenge without a method can never be met.
        assert!(!pkce_ok("", "abc", "abc"));
        assert!(!pkce_ok("S256", "", "x"));
    }

    #[test]
    fn go_quotes() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\x01é\"");
    }

    #[test]
    fn scopes_split_at_single_spaces() {
        assert!(scope_contains("read:user openid", "openid"));
        assert!(!scope_contains("openid,email", "openid"));
    }

    #[test]
    fn expired_codes_are_refused_and_dropped() {
        let opts = crate::Options {
            oauth_apps: vec![OAuthApp::confidential("c", "s", "https://app/cb")],
            ..crate::Options::default()
        };
        let p = Provider::new(&opts, "https://forge/");
        let form = |pairs: &[(&str, &str)]| {
            let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let rec = Recorded {
                method: "GET".into(),
                raw_path: "/".into(),
                raw_query: Some(query.join("&")),
                headers: Vec::new(),
                body: Vec::new(),
                operation_id: None,
                path_params: Vec::new(),
            };
            Form::from_query(&rec)
        };
        let code = p.consent(0, "alice", 1, &form(&[("redirect_uri", "https://app/cb"), ("scope", "")]));
        p.state.lock().unwrap().codes.get_mut(&code).unwrap().valid_until = now_secs();
        let client = Client { id: "c", secret: "s" };
        let exchange = form(&[("code", &code), ("redirect_uri", "https://app/cb")]);
        let r = p.exchange_code(&client, &exchange);
        assert_eq!(r.status, 400);
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            body,
            json!({"error": "invalid_grant", "error_description": "authorization code expired"})
        );
        // Gone now: a second try is told the client is not authorized.
        let r = p.exchange_code(&client, &exchange);
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["error_description"], "client is not authorized");
        // And an expired code does not survive the next issue either.
        let old = p.consent(0, "alice", 1, &form(&[("redirect_uri", "https://app/cb")]));
        p.state.lock().unwrap().codes.get_mut(&old).unwrap().valid_until = now_secs();
        p.consent(0, "alice", 1, &form(&[("redirect_uri", "https://app/cb")]));
        assert!(!p.state.lock().unwrap().codes.contains_key(&old));
    }
}
