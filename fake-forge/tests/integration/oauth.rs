//! The forge's OAuth2 provider: a whole sign-in without a browser, and Gitea's answer to each
//! thing a client can get wrong.

use crate::common;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use common::{Response, TOKEN, get, send};
use fake_forge::{FakeForge, Flavor, OAuthAccess, OAuthApp, Options};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const CLIENT: &str = "aegis-client";
const SECRET: &str = "gto_aegissecret";
const REDIRECT: &str = "https://mcp.example/oauth/callback";
const VERIFIER: &str = "verifier-verifier-verifier-verifier-verifier-0123";

fn options() -> Options {
    let mut other = OAuthApp::confidential("other-client", "other-secret", "https://other.example/cb");
    other.owner = "bob".into();
    // Shares a redirect URI with the main client, so codes can reach the other's exchange.
    other.redirect_uris.push(REDIRECT.into());
    Options {
        users: vec![(TOKEN.into(), "alice".into()), ("tok-bob".into(), "bob".into())],
        oauth_apps: vec![
            OAuthApp::confidential(CLIENT, SECRET, REDIRECT),
            OAuthApp::public("public-client", "http://127.0.0.1/cb"),
            other,
        ],
        ..Options::default()
    }
}

async fn forge() -> FakeForge {
    FakeForge::start(options()).await
}

fn enc(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

fn form(pairs: &[(&str, &str)]) -> String {
    pairs.iter().map(|(k, v)| format!("{}={}", enc(k), enc(v))).collect::<Vec<_>>().join("&")
}

fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

async fn authorize(forge: &FakeForge, pairs: &[(&str, &str)]) -> Response {
    send(forge.addr(), "GET", &format!("/login/oauth/authorize?{}", form(pairs)), &[], b"").await
}

/// The standard request of a confidential client with S256 PKCE.
async fn authorize_ok(forge: &FakeForge, scope: &str) -> String {
    let c = challenge(VERIFIER);
    let r = authorize(
        forge,
        &[
            ("client_id", CLIENT),
            ("redirect_uri", REDIRECT),
            ("response_type", "code"),
            ("state", "st 1"),
            ("scope", scope),
            ("code_challenge", &c),
            ("code_challenge_method", "S256"),
        ],
    )
    .await;
    assert_eq!(r.status, 303, "{}", r.text());
    let location = r.header("location").unwrap().to_string();
    let query = location.strip_prefix(&format!("{REDIRECT}?")).unwrap_or_else(|| panic!("{location}"));
    let (code, state) = query.split_once("&").unwrap();
    assert_eq!(state, "state=st+1", "state echoed, keys sorted as Go encodes them");
    let code = code.strip_prefix("code=").unwrap();
    assert!(code.starts_with("gta_"), "{code}");
    code.to_string()
}

async fn token(forge: &FakeForge, pairs: &[(&str, &str)]) -> Response {
    let headers = [("Content-Type", "application/x-www-form-urlencoded")];
    send(forge.addr(), "POST", "/login/oauth/access_token", &headers, form(pairs).as_bytes()).await
}

async fn exchange(forge: &FakeForge, code: &str, verifier: &str) -> Response {
    token(
        forge,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", CLIENT),
            ("client_secret", SECRET),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier),
        ],
    )
    .await
}

async fn signed_in(forge: &FakeForge, scope: &str) -> Value {
    let code = authorize_ok(forge, scope).await;
    let r = exchange(forge, &code, VERIFIER).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn oauth_error(r: &Response, error: &str, description: &str) {
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json;charset=utf-8"));
    assert_eq!(r.json(), json!({"error": error, "error_description": description}));
}

async fn user_with(forge: &FakeForge, authorization: &str) -> Response {
    send(forge.addr(), "GET", "/api/v1/user", &[("Authorization", authorization)], b"").await
}

#[tokio::test]
async fn a_full_code_flow_with_pkce_signs_the_user_in() {
    let forge = forge().await;
    let tokens = signed_in(&forge, "read:user openid profile email").await;
    assert_eq!(tokens["token_type"], "bearer");
    assert_eq!(tokens["expires_in"], 3600);
    let keys: Vec<&String> = tokens.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["access_token", "token_type", "expires_in", "refresh_token", "id_token"]);
    let access = tokens["access_token"].as_str().unwrap();
    for jwt in [access, tokens["refresh_token"].as_str().unwrap(), tokens["id_token"].as_str().unwrap()] {
        assert!(jwt.starts_with("eyJ") && jwt.split('.').count() == 3, "{jwt}");
    }
    let id_claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD.decode(tokens["id_token"].as_str().unwrap().split('.').nth(1).unwrap()).unwrap(),
    )
    .unwrap();
    assert_eq!(id_claims["iss"], "https://forge.example.invalid/");
    assert_eq!(id_claims["aud"], json!([CLIENT]));
    assert_eq!(id_claims["sub"], "1");
    assert_eq!(id_claims["preferred_username"], "alice");
    assert_eq!(id_claims["email"], "alice@noreply.forge.example.invalid");

    let me = user_with(&forge, &format!("Bearer {access}")).await;
    assert_eq!(me.status, 200, "{}", me.text());
    assert_eq!(me.json()["login"], "alice");
    assert_eq!(user_with(&forge, &format!("token {access}")).await.json()["login"], "alice");
    let expected = OAuthAccess {
        login: "alice".into(),
        client_id: CLIENT.into(),
        scope: "read:user openid profile email".into(),
    };
    assert_eq!(forge.oauth_access(access), Some(expected));

    // A second sign-in issues different tokens, without an id_token when openid is not asked.
    let again = signed_in(&forge, "read:user").await;
    assert_ne!(again["access_token"], tokens["access_token"]);
    assert!(again.get("id_token").is_none());

    // Everything the client sent was recorded like an API request.
    let recorded = forge.requests();
    let auth = recorded.iter().find(|r| r.raw_path == "/login/oauth/authorize").unwrap();
    assert!(auth.query_pairs().contains(&("code_challenge_method".into(), "S256".into())));
    assert_eq!(auth.operation_id, None);
    let exchange = recorded.iter().find(|r| r.raw_path == "/login/oauth/access_token").unwrap();
    assert_eq!(exchange.method, "POST");
    assert_eq!(exchange.header("content-type"), Some("application/x-www-form-urlencoded"));
    assert!(String::from_utf8_lossy(&exchange.body).contains(&form(&[("client_secret", SECRET)])));
}

#[tokio::test]
async fn the_redirect_keeps_the_registered_query_and_has_gitea_body() {
    let mut opts = options();
    opts.oauth_apps[0].redirect_uris.push("https://mcp.example/cb?tenant=a".into());
    let forge = FakeForge::start(opts).await;
    let r = authorize(
        &forge,
        &[
            ("client_id", CLIENT),
            ("redirect_uri", "https://mcp.example/cb?tenant=a"),
            ("response_type", "code"),
        ],
    )
    .await;
    assert_eq!(r.status, 303);
    let location = r.header("location").unwrap();
    assert!(location.starts_with("https://mcp.example/cb?code=gta_"), "{location}");
    assert!(location.ends_with("&tenant=a"), "no state when none was sent: {location}");
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.text(), format!("<a href=\"{}\">See Other</a>.\n\n", location.replace('&', "&amp;")));
}

#[tokio::test]
async fn a_code_is_good_for_one_exchange() {
    let forge = forge().await;
    let code = authorize_ok(&forge, "").await;
    assert_eq!(exchange(&forge, &code, VERIFIER).await.status, 200);
    oauth_error(&exchange(&forge, &code, VERIFIER).await, "unauthorized_client", "client is not authorized");
}

#[tokio::test]
async fn a_wrong_or_missing_verifier_is_refused_and_leaves_the_code_usable() {
    let forge = forge().await;
    let code = authorize_ok(&forge, "").await;
    oauth_error(
        &exchange(&forge, &code, "wrong-verifier").await,
        "unauthorized_client",
        "failed PKCE code challenge",
    );
    oauth_error(&exchange(&forge, &code, "").await, "unauthorized_client", "failed PKCE code challenge");
    // As in Gitea, a failed verifier does not consume the code.
    assert_eq!(exchange(&forge, &code, VERIFIER).await.status, 200);
}

#[tokio::test]
async fn plain_pkce_and_public_clients() {
    let forge = forge().await;
    let base = [("client_id", "public-client"), ("response_type", "code"), ("state", "s")];
    // A public client must use PKCE: an error redirect, as Gitea sends once the URI is trusted.
    let r = authorize(&forge, &[&base[..], &[("redirect_uri", "http://127.0.0.1/cb")]].concat()).await;
    assert_eq!(r.status, 303);
    assert_eq!(
        r.header("location"),
        Some(
            "http://127.0.0.1/cb?error=invalid_request&error_description=PKCE+is+required+for+public+clients&state=s"
        )
    );
    // With plain PKCE on a loopback port (public clients may pick any port), no secret needed.
    let pkce = [("code_challenge", "plain-verifier"), ("code_challenge_method", "plain")];
    let uri = "http://127.0.0.1:40123/cb";
    let r = authorize(&forge, &[&base[..], &pkce[..], &[("redirect_uri", uri)]].concat()).await;
    assert_eq!(r.status, 303, "{}", r.text());
    let location = r.header("location").unwrap();
    let code = location.split("code=").nth(1).unwrap().split('&').next().unwrap();
    let exchange = [("grant_type", "authorization_code"), ("client_id", "public-client"), ("code", code)];
    let r = token(
        &forge,
        &[&exchange[..], &[("redirect_uri", uri), ("code_verifier", "plain-verifier")]].concat(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // An unknown method is refused.
    let bad = [("code_challenge", "x"), ("code_challenge_method", "S512"), ("redirect_uri", uri)];
    let r = authorize(&forge, &[&base[..], &bad[..]].concat()).await;
    assert!(r.header("location").unwrap().contains("error_description=unsupported+code+challenge+method"));
}

#[tokio::test]
async fn authorization_errors_are_pages_until_the_redirect_uri_is_trusted() {
    let forge = forge().await;
    let page = |r: &Response, description: &str| {
        assert_eq!(r.status, 400);
        assert_eq!(r.header("location"), None);
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
        assert!(r.text().contains(description), "{}", r.text());
    };
    let unregistered =
        [("client_id", CLIENT), ("redirect_uri", "https://evil.example/cb"), ("response_type", "code")];
    page(&authorize(&forge, &unregistered).await, "Unregistered Redirect URI");
    // Exact match but for case and a trailing slash, as Gitea compares.
    let prefix = [("client_id", CLIENT), ("redirect_uri", "https://mcp.example/oauth/callback/extra")];
    page(&authorize(&forge, &prefix).await, "Unregistered Redirect URI");
    let unknown = [("client_id", "nope"), ("redirect_uri", REDIRECT), ("response_type", "code")];
    page(&authorize(&forge, &unknown).await, "Client ID not registered");
    let cased = [
        ("client_id", CLIENT),
        ("redirect_uri", "HTTPS://MCP.example/oauth/callback/"),
        ("response_type", "code"),
    ];
    assert_eq!(authorize(&forge, &cased).await.status, 303);

    let r =
        authorize(&forge, &[("client_id", CLIENT), ("redirect_uri", REDIRECT), ("response_type", "token")])
            .await;
    assert_eq!(r.status, 303);
    assert_eq!(
        r.header("location").unwrap(),
        format!(
            "{REDIRECT}?error=unsupported_response_type&error_description=Only+code+response+type+is+supported.&state="
        )
    );
    // Only GET is routed.
    assert_eq!(send(forge.addr(), "PUT", "/login/oauth/authorize", &[], b"").await.status, 405);
}

#[tokio::test]
async fn token_endpoint_errors_match_gitea() {
    let forge = forge().await;
    let code = authorize_ok(&forge, "").await;
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut pairs =
            vec![("grant_type", "authorization_code"), ("client_id", CLIENT), ("redirect_uri", REDIRECT)];
        pairs.extend_from_slice(extra);
        pairs
    };
    let code_ref: &'static str = Box::leak(code.clone().into_boxed_str());
    let r = token(&forge, &with(&[("client_secret", "wrong"), ("code", code_ref)])).await;
    oauth_error(&r, "unauthorized_client", "invalid client secret");
    let r = token(&forge, &with(&[("code", code_ref)])).await;
    oauth_error(&r, "unauthorized_client", "invalid empty client secret");
    let r = token(&forge, &[("grant_type", "authorization_code"), ("client_id", "nope"), ("code", code_ref)])
        .await;
    oauth_error(&r, "invalid_client", "cannot load client with client id: 'nope'");
    let r = token(&forge, &[("grant_type", "refresh_token"), ("client_id", "no\"pe")]).await;
    oauth_error(&r, "invalid_client", "cannot load client with client id: \"no\\\"pe\"");
    let r = token(&forge, &[("grant_type", "password"), ("client_id", CLIENT)]).await;
    oauth_error(
        &r,
        "unsupported_grant_type",
        "Only refresh_token or authorization_code grant type is supported",
    );
    let mut pairs = with(&[("client_secret", SECRET), ("code", code_ref)]);
    pairs[2] = ("redirect_uri", "https://elsewhere.example/cb");
    oauth_error(&token(&forge, &pairs).await, "unauthorized_client", "unexpected redirect URI");
    let r = token(&forge, &with(&[("client_secret", SECRET), ("code", "gta_unknown")])).await;
    oauth_error(&r, "unauthorized_client", "client is not authorized");

    // Client credentials by HTTP Basic (not URL-decoded, as Gitea reads them), and their
    // conflicts with the body.
    let basic = format!("Basic {}", STANDARD.encode(format!("{CLIENT}:{SECRET}")));
    let body = form(&[
        ("grant_type", "authorization_code"),
        ("code", &code),
        ("redirect_uri", REDIRECT),
        ("code_verifier", VERIFIER),
    ]);
    let headers = [("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", basic.as_str())];
    let conflict = format!("{body}&client_id=someone-else");
    let r = send(forge.addr(), "POST", "/login/oauth/access_token", &headers, conflict.as_bytes()).await;
    oauth_error(&r, "invalid_request", "client_id in request body inconsistent with Authorization header");
    let conflict = format!("{body}&client_secret=other");
    let r = send(forge.addr(), "POST", "/login/oauth/access_token", &headers, conflict.as_bytes()).await;
    oauth_error(
        &r,
        "invalid_request",
        "client_secret in request body inconsistent with Authorization header",
    );
    let bearer = [("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", "Bearer x")];
    let r = send(forge.addr(), "POST", "/login/oauth/access_token", &bearer, body.as_bytes()).await;
    oauth_error(&r, "invalid_request", "cannot parse basic auth header");
    let r = send(forge.addr(), "POST", "/login/oauth/access_token", &headers, body.as_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.text());

    // Another client's code, and a redirect URI other than the one authorized.
    let code = authorize_ok(&forge, "").await;
    let other = [
        ("grant_type", "authorization_code"),
        ("client_id", "other-client"),
        ("client_secret", "other-secret"),
        ("code", code.as_str()),
        ("code_verifier", VERIFIER),
        ("redirect_uri", REDIRECT),
    ];
    oauth_error(&token(&forge, &other).await, "invalid_grant", "invalid grant");
    let r = token(
        &forge,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", CLIENT),
            ("client_secret", SECRET),
            ("code", &code),
            ("code_verifier", VERIFIER),
        ],
    )
    .await;
    oauth_error(&r, "invalid_grant", "redirect_uri differs from the original authorization request");

    // A POST without a form content type binds nothing, so there is no grant type.
    let r = send(forge.addr(), "POST", "/login/oauth/access_token", &[], body.as_bytes()).await;
    oauth_error(
        &r,
        "unsupported_grant_type",
        "Only refresh_token or authorization_code grant type is supported",
    );
    assert_eq!(get(forge.addr(), "/login/oauth/access_token").await.status, 405);
}

#[tokio::test]
async fn refresh_tokens_rotate_and_old_ones_are_refused() {
    let forge = forge().await;
    let first = signed_in(&forge, "read:user read:repository").await;
    let r1 = first["refresh_token"].as_str().unwrap();
    // JSON body with the client credentials in HTTP Basic.
    let basic = format!("Basic {}", STANDARD.encode(format!("{CLIENT}:{SECRET}")));
    let refresh = |token: &str| {
        let body = json!({"grant_type": "refresh_token", "refresh_token": token}).to_string();
        let basic = basic.clone();
        let addr = forge.addr();
        async move {
            let headers = [("Content-Type", "application/json"), ("Authorization", basic.as_str())];
            send(addr, "POST", "/login/oauth/access_token", &headers, body.as_bytes()).await
        }
    };
    let second = refresh(r1).await;
    assert_eq!(second.status, 200, "{}", second.text());
    let second = second.json();
    let r2 = second["refresh_token"].as_str().unwrap();
    assert_ne!(r1, r2);
    assert_ne!(first["access_token"], second["access_token"]);
    let me = user_with(&forge, &format!("Bearer {}", second["access_token"].as_str().unwrap())).await;
    assert_eq!(me.json()["login"], "alice");
    assert_eq!(
        forge.oauth_access(second["access_token"].as_str().unwrap()).unwrap().scope,
        "read:user read:repository"
    );

    oauth_error(&refresh(r1).await, "unauthorized_client", "token was already used");
    let third = refresh(r2).await;
    assert_eq!(third.status, 200, "{}", third.text());
    oauth_error(&refresh(r2).await, "unauthorized_client", "token was already used");
    // An access token is no refresh token; garbage does not parse.
    let access = third.json()["access_token"].as_str().unwrap().to_string();
    oauth_error(&refresh(&access).await, "unauthorized_client", "token was already used");
    oauth_error(&refresh("eyJ.not.valid").await, "unauthorized_client", "unable to parse refresh token");

    // A refresh token only works for the client it was issued to.
    let r3 = third.json()["refresh_token"].as_str().unwrap().to_string();
    let r = token(
        &forge,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", "other-client"),
            ("client_secret", "other-secret"),
            ("refresh_token", &r3),
        ],
    )
    .await;
    oauth_error(&r, "invalid_grant", "refresh token belongs to a different client");
    let r = token(&forge, &[("grant_type", "refresh_token"), ("client_id", CLIENT), ("refresh_token", &r3)])
        .await;
    oauth_error(&r, "invalid_client", "invalid empty client secret");
    // Old access tokens stay valid until they expire, as in Gitea.
    assert_eq!(
        user_with(&forge, &format!("Bearer {}", first["access_token"].as_str().unwrap())).await.status,
        200
    );
}

#[tokio::test]
async fn an_expired_or_unknown_access_token_is_refused_on_the_api() {
    let forge = FakeForge::start(Options { oauth_access_ttl: Duration::ZERO, ..options() }).await;
    let tokens = signed_in(&forge, "").await;
    assert_eq!(tokens["expires_in"], 0);
    let access = tokens["access_token"].as_str().unwrap();
    let refused = user_with(&forge, &format!("Bearer {access}")).await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json()["message"], "user does not exist [uid: 0, name: ]");
    assert_eq!(forge.oauth_access(access), None);
    // The refresh token outlives it and gets a new one.
    let r = token(
        &forge,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", CLIENT),
            ("client_secret", SECRET),
            ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());

    let live = FakeForge::start(options()).await;
    let tokens = signed_in(&live, "").await;
    // A token of another forge, and a tampered one, are unknown tokens.
    let foreign = user_with(&live, &format!("Bearer {access}")).await;
    assert_eq!(foreign.status, 401);
    let mut tampered = tokens["access_token"].as_str().unwrap().to_string();
    tampered.push('A');
    assert_eq!(user_with(&live, &format!("Bearer {tampered}")).await.status, 401);
    // Configured tokens keep working next to OAuth2 ones.
    assert_eq!(user_with(&live, &format!("token {TOKEN}")).await.json()["login"], "alice");
}

#[tokio::test]
async fn userinfo_answers_for_the_bearer() {
    let forge = FakeForge::start(Options { oauth_user: Some("bob".into()), ..options() }).await;
    let tokens = signed_in(&forge, "openid").await;
    let bearer = format!("Bearer {}", tokens["access_token"].as_str().unwrap());
    let expected = json!({
        "sub": "2",
        "name": "bob",
        "preferred_username": "bob",
        "email": "bob@noreply.forge.example.invalid",
        "picture": "https://forge.example.invalid/avatars/2",
        "groups": null,
    });
    for method in ["GET", "POST"] {
        let r = send(forge.addr(), method, "/login/oauth/userinfo", &[("Authorization", &bearer)], b"").await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json(), expected);
    }
    let r = send(forge.addr(), "GET", "/login/oauth/userinfo", &[], b"").await;
    assert_eq!((r.status, r.text().as_str()), (401, "no valid authorization"));
    assert_eq!(r.header("www-authenticate"), Some("Bearer realm=\"Gitea OAuth2\""));
    let r = send(forge.addr(), "GET", "/login/oauth/userinfo", &[("Authorization", "Bearer eyJx.y.z")], b"")
        .await;
    assert_eq!((r.status, r.text().as_str()), (401, "Failed to authenticate user\n"));
    assert_eq!(send(forge.addr(), "DELETE", "/login/oauth/userinfo", &[], b"").await.status, 405);
}

#[tokio::test]
async fn the_callers_applications_are_listed_without_secrets() {
    let mut opts = options();
    let mut second = OAuthApp::confidential("second", "s2", "https://two.example/cb");
    second.name = "Second app".into();
    opts.oauth_apps.push(second);
    let forge = FakeForge::start(opts).await;
    let r = get(forge.addr(), "/api/v1/user/applications/oauth2").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-total-count"), Some("3"));
    assert_eq!(r.header("link"), None);
    let apps = r.json();
    let ids: Vec<i64> = apps.as_array().unwrap().iter().map(|a| a["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [4, 2, 1], "alice's applications, newest first");
    assert_eq!(apps[0]["name"], "Second app");
    let first = &apps[2];
    let keys: Vec<&String> = first.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "id",
            "name",
            "client_id",
            "client_secret",
            "confidential_client",
            "skip_secondary_authorization",
            "redirect_uris",
            "created"
        ]
    );
    assert_eq!(first["client_id"], CLIENT);
    assert_eq!(first["client_secret"], "");
    assert_eq!(first["confidential_client"], true);
    assert_eq!(first["redirect_uris"], json!([REDIRECT]));
    assert_eq!(forge.requests()[0].operation_id.as_deref(), Some("userGetOauth2Application"));

    let paged = get(forge.addr(), "/api/v1/user/applications/oauth2?limit=1&page=2").await;
    assert_eq!(paged.json().as_array().unwrap().len(), 1);
    assert_eq!(paged.json()[0]["id"], 2);

    let one = get(forge.addr(), "/api/v1/user/applications/oauth2/1").await;
    assert_eq!(one.status, 200);
    assert_eq!(one.json()["client_secret"], "");
    // Bob's application is not found for alice, nor is a missing one or a non-number.
    for id in ["3", "99", "x"] {
        let r = get(forge.addr(), &format!("/api/v1/user/applications/oauth2/{id}")).await;
        assert_eq!(r.status, 404, "{id}");
        assert_eq!(r.json()["message"], "The target couldn't be found.");
    }
    let bob = send(
        forge.addr(),
        "GET",
        "/api/v1/user/applications/oauth2",
        &[("Authorization", "token tok-bob")],
        b"",
    )
    .await;
    assert_eq!(bob.json().as_array().unwrap().len(), 1);
    let anonymous = send(forge.addr(), "GET", "/api/v1/user/applications/oauth2", &[], b"").await;
    assert_eq!(anonymous.status, 401);
    assert_eq!(anonymous.json()["message"], "token is required");
    // An OAuth2 access token lists its user's applications too.
    let tokens = signed_in(&forge, "").await;
    let bearer = format!("Bearer {}", tokens["access_token"].as_str().unwrap());
    let r = send(forge.addr(), "GET", "/api/v1/user/applications/oauth2", &[("Authorization", &bearer)], b"")
        .await;
    assert_eq!(r.header("x-total-count"), Some("3"));
}

#[tokio::test]
async fn forgejo_lists_applications_in_its_own_shape() {
    let forge = FakeForge::start(Options { flavor: Flavor::Forgejo, ..options() }).await;
    let r = get(forge.addr(), "/api/v1/user/applications/oauth2").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(forge.requests()[0].operation_id.as_deref(), Some("userGetOAuth2Applications"));
    assert!(r.json()[0].get("skip_secondary_authorization").is_none());
}

#[tokio::test]
async fn oauth_bodies_are_bounded() {
    let forge = forge().await;
    let body = vec![b'a'; 70 * 1024];
    let headers = [("Content-Type", "application/x-www-form-urlencoded")];
    let r = send(forge.addr(), "POST", "/login/oauth/access_token", &headers, &body).await;
    assert_eq!(r.status, 413);
    assert_eq!(r.text(), "http: request body too large\n");
    let recorded = forge.requests();
    assert_eq!(recorded[0].body.len(), 64 * 1024, "the recording keeps what was read");
}
