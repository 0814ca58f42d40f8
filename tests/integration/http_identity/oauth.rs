//! Sign-in with the forge (docs/SIGN-IN.md), over real HTTP against the fake forge's OAuth2
//! provider: the whole flow a client follows from a 401, then every refusal — each with a
//! clear error and, where the forge must not be asked, nothing sent to it.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use fake_forge::{FakeForge, OAuthApp, Recorded};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::support::http::{
    ACCEPT_BOTH, HttpServer, SseClient, StreamableClient, free_port, not_probes, stateless_call, tool_result,
};
use super::support::{ALICE_TOKEN, Called, Forge};
use super::{BOB_TOKEN, token};

pub(super) const FORGE_CLIENT_ID: &str = "forge-app-5d1c";
pub(super) const FORGE_CLIENT_SECRET: &str = "gto_forge-app-secret-0f9e8d7c6b5a";
pub(super) const KEY: &str = "8f3a5c1e9b7d2046af13ce58b9d07e6a4c2f8e1d3b5a7960c4e2d8f1a3b5c7e9";
const OTHER_KEY: &str = "1111111111111111111111111111111111111111111111111111111111111111";
pub(super) const CLIENT_REDIRECT: &str = "http://127.0.0.1:7/callback";
pub(super) const VERIFIER: &str = "pkce-verifier-pkce-verifier-pkce-verifier-0123456789";

pub(super) fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// An HTTP client that never follows redirects: each hop is looked at.
pub(super) fn browser() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).no_proxy().build().unwrap()
}

/// The fake forge (alice, bob; bob is signed in to its web UI) with this server's
/// application, and a server with sign-in configured.
pub(super) struct SignIn {
    pub(super) forge: FakeForge,
    pub(super) server: HttpServer,
    pub(super) public: String,
    pub(super) _dir: tempfile::TempDir,
    pub(super) key_path: String,
}

impl SignIn {
    async fn start(ttl: Duration) -> SignIn {
        SignIn::start_with(ttl, &[]).await
    }

    /// `start`, with the server in this process: a test may move its sign-in clock, and it
    /// has no log of its own to read.
    async fn start_in_process(ttl: Duration) -> SignIn {
        let port = free_port();
        let public = format!("http://127.0.0.1:{port}");
        let (forge, dir, key_path) = SignIn::prepare(&public, ttl).await;
        let mut all = SignIn::settings(&public, &key_path).to_vec();
        let listen = format!("127.0.0.1:{port}");
        all.push(("MCP_LISTEN", &listen));
        let server = HttpServer::in_process(&forge.base_url(), "http", &all).await;
        SignIn { forge, server, public, _dir: dir, key_path }
    }

    pub(super) async fn start_with(ttl: Duration, env: &[(&str, &str)]) -> SignIn {
        let port = free_port();
        let public = format!("http://127.0.0.1:{port}");
        let (forge, dir, key_path) = SignIn::prepare(&public, ttl).await;
        let server = SignIn::server(&forge, &public, &key_path, port, env).await;
        SignIn { forge, server, public, _dir: dir, key_path }
    }

    /// The forge (with this server's application, its callback under `public`) and the key
    /// file (in the directory returned) for servers at `public`.
    pub(super) async fn prepare(public: &str, ttl: Duration) -> (FakeForge, tempfile::TempDir, String) {
        let forge = Forge::gitea()
            .user(BOB_TOKEN, "bob")
            .admin("alice")
            .options(|o| {
                o.oauth_apps = vec![OAuthApp::confidential(
                    FORGE_CLIENT_ID,
                    FORGE_CLIENT_SECRET,
                    &format!("{public}/oauth/callback"),
                )];
                o.oauth_user = Some("bob".into());
                o.oauth_access_ttl = ttl;
            })
            .repo("bob", "notes")
            .issues("bob", "notes", 1)
            .start()
            .await;
        let dir = tempfile::tempdir().unwrap();
        let key_path = dir.path().join("key");
        std::fs::write(&key_path, format!("{KEY}\n")).unwrap();
        let key_path = key_path.to_str().unwrap().to_owned();
        (forge, dir, key_path)
    }

    /// The sign-in settings of a server at `public` with the key in `key_path`.
    pub(super) fn settings<'a>(public: &'a str, key_path: &'a str) -> [(&'static str, &'a str); 6] {
        [
            ("GITEA_TOKEN", ALICE_TOKEN),
            ("GITEA_OAUTH_CLIENT_ID", FORGE_CLIENT_ID),
            ("GITEA_OAUTH_CLIENT_SECRET", FORGE_CLIENT_SECRET),
            ("MCP_PUBLIC_URL", public),
            ("MCP_OAUTH_KEY_FILE", key_path),
            ("LOG_LEVEL", "trace"),
        ]
    }

    /// A server process for `public` with the sign-in settings (another replica when called
    /// again with the same key).
    pub(super) async fn server(
        forge: &FakeForge,
        public: &str,
        key_path: &str,
        port: u16,
        env: &[(&str, &str)],
    ) -> HttpServer {
        let mut all = SignIn::settings(public, key_path).to_vec();
        all.extend_from_slice(env);
        let transport = env.iter().find(|(k, _)| *k == "MCP_TRANSPORT").map_or("http", |(_, v)| *v);
        HttpServer::spawn_listening(&forge.base_url(), transport, &all, &format!("127.0.0.1:{port}")).await
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.public)
    }

    /// `POST /register` → the client id.
    pub(super) async fn register(&self) -> String {
        let resp = browser()
            .post(self.url("/register"))
            .json(&json!({"redirect_uris": [CLIENT_REDIRECT], "client_name": "test client",
                          "token_endpoint_auth_method": "none"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 201);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["token_endpoint_auth_method"], "none");
        body["client_id"].as_str().unwrap().to_owned()
    }

    /// `/authorize` → this server's consent page (allowed) → the forge's consent (automatic)
    /// → `/oauth/callback` → the redirect to the client: its query parameters. `extra`
    /// overrides or adds authorize parameters. A callback answered 503 (a shared store this
    /// replica cannot reach yet: "reload this page shortly") is reloaded, as a person would:
    /// it uses nothing up.
    pub(super) async fn authorize(&self, client_id: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        match self.try_authorize(client_id, extra).await {
            Ok(params) => params,
            Err((status, page)) => panic!("the callback answered {status}: {page}"),
        }
    }

    /// `authorize`, where the callback's answer other than the redirect to the client (its
    /// status and page) is the caller's to judge.
    pub(super) async fn try_authorize(
        &self,
        client_id: &str,
        extra: &[(&str, &str)],
    ) -> Result<Vec<(String, String)>, (u16, String)> {
        let (to_forge, cookie) = self.authorize_hop(client_id, extra).await;
        let at_forge = browser().get(&to_forge).send().await.unwrap();
        assert!(at_forge.status().is_redirection(), "the forge's consent: {}", at_forge.status());
        let callback = location(&at_forge);
        assert!(callback.starts_with(&self.url("/oauth/callback?")), "{callback}");
        let reloaded = async || {
            let back = browser().get(&callback).header("cookie", &cookie).send().await.unwrap();
            (back.status().as_u16() != 503).then_some(back)
        };
        let back = super::support::wait_until(
            "the callback answered other than 503",
            super::support::WAIT_LIMIT,
            reloaded,
        )
        .await;
        if back.status().as_u16() != 302 {
            return Err((back.status().as_u16(), back.text().await.unwrap_or_default()));
        }
        let to_client = location(&back);
        assert!(to_client.starts_with(CLIENT_REDIRECT), "{to_client}");
        Ok(query(&to_client))
    }

    /// `/authorize` must show this server's consent page: its sealed sign-in and the cookie
    /// it sets (`name=value`).
    pub(super) async fn consent(&self, client_id: &str, extra: &[(&str, &str)]) -> (String, String) {
        let resp = browser().get(self.authorize_url(client_id, extra)).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(resp.headers().get("x-frame-options").map(|v| v.to_str().unwrap()), Some("DENY"));
        let cookie =
            resp.headers().get("set-cookie").expect("the sign-in cookie").to_str().unwrap().to_owned();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"), "{cookie}");
        let cookie = cookie.split(';').next().unwrap().to_owned();
        let page = resp.text().await.unwrap();
        assert!(page.contains("Allow access?"), "{page}");
        let at = page.find("name=\"pending\" value=\"").expect("the sealed sign-in")
            + "name=\"pending\" value=\"".len();
        let pending = page[at..].split('"').next().unwrap().to_owned();
        (pending, cookie)
    }

    /// The person's answer on the consent page, from the browser holding `cookie`.
    pub(super) async fn answer(
        &self,
        pending: &str,
        granted: bool,
        cookie: Option<&str>,
    ) -> reqwest::Response {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs([("pending", pending), ("granted", if granted { "true" } else { "false" })])
            .finish();
        let mut req = browser()
            .post(self.url("/authorize"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", &self.public)
            .body(body);
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        req.send().await.unwrap()
    }

    /// Consent, allowed: `/authorize` must then send the person to the forge; that URL, and
    /// the cookie of the browser.
    pub(super) async fn authorize_hop(&self, client_id: &str, extra: &[(&str, &str)]) -> (String, String) {
        let (pending, cookie) = self.consent(client_id, extra).await;
        let resp = self.answer(&pending, true, Some(&cookie)).await;
        assert_eq!(resp.status().as_u16(), 302, "{}", resp.text().await.unwrap_or_default());
        let to_forge = location(&resp);
        assert!(
            to_forge.starts_with(&format!("{}/login/oauth/authorize?", self.forge.base_url())),
            "{to_forge}"
        );
        (to_forge, cookie)
    }

    pub(super) fn authorize_url(&self, client_id: &str, extra: &[(&str, &str)]) -> String {
        let ch = challenge(VERIFIER);
        let mut params: Vec<(&str, &str)> = vec![
            ("client_id", client_id),
            ("redirect_uri", CLIENT_REDIRECT),
            ("response_type", "code"),
            ("state", "client-state-1"),
            ("code_challenge", &ch),
            ("code_challenge_method", "S256"),
        ];
        for (k, v) in extra {
            params.retain(|(p, _)| p != k);
            if !v.is_empty() {
                params.push((k, v));
            }
        }
        let mut url = url::Url::parse(&self.url("/authorize")).unwrap();
        url.query_pairs_mut().extend_pairs(params);
        url.into()
    }

    /// `POST /token` with `form`: status and body.
    pub(super) async fn token(&self, form: &[(&str, &str)]) -> (u16, Value) {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        self.token_body(body.into_bytes()).await
    }

    /// `POST /token` with `body` as it is (it need not be a well-formed form).
    pub(super) async fn token_body(&self, body: Vec<u8>) -> (u16, Value) {
        token_at(&self.public, body).await
    }

    pub(super) async fn exchange(&self, client_id: &str, code: &str) -> (u16, Value) {
        self.token(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("client_id", client_id),
            ("redirect_uri", CLIENT_REDIRECT),
            ("code_verifier", VERIFIER),
        ])
        .await
    }

    /// A complete sign-in with `scope`: the token answer.
    pub(super) async fn sign_in(&self, scope: &str) -> (String, Value) {
        let client = self.register().await;
        let back = self.authorize(&client, &[("scope", scope)]).await;
        let code = param(&back, "code");
        let (status, tokens) = self.exchange(&client, &code).await;
        assert_eq!(status, 200, "{tokens}");
        (client, tokens)
    }

    /// The requests the forge got at its token endpoint.
    pub(super) fn token_requests(&self) -> Vec<Recorded> {
        self.forge.requests().into_iter().filter(|r| r.raw_path == "/login/oauth/access_token").collect()
    }

    /// Every log line the server wrote: no secret of the sign-in may be in it.
    pub(super) fn assert_no_secret_in_log(&self, also: &[&str]) {
        assert_no_sign_in_secret(&self.server.stderr(), also);
    }
}

/// No secret of the sign-in (`also` besides the client secret, the key and every sealed value
/// this server hands out) is in `log`.
pub(super) fn assert_no_sign_in_secret(log: &str, also: &[&str]) {
    for secret in [FORGE_CLIENT_SECRET, KEY, &KEY.to_ascii_uppercase()].iter().chain(also) {
        assert!(!log.contains(secret), "a secret is in the server's log");
    }
    for prefix in ["aegis-at.", "aegis-rt.", "aegis-code.", "aegis-state.", "aegis-pending.", "aegis-client."]
    {
        assert!(!log.contains(prefix), "a sealed value ({prefix}…) is in the server's log");
    }
}

pub(super) fn location(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no Location"))
}

pub(super) fn query(url: &str) -> Vec<(String, String)> {
    url::Url::parse(url).unwrap().query_pairs().into_owned().collect()
}

pub(super) fn param(pairs: &[(String, String)], name: &str) -> String {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no {name}: {pairs:?}"))
}

pub(super) async fn get_json(url: &str) -> Value {
    let resp = browser().get(url).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200, "GET {url}");
    resp.json().await.unwrap()
}

pub(super) fn bearer(t: &str) -> String {
    format!("Bearer {t}")
}

/// A tool call without a session (protocol 2026-07-28) with `auth`: the tool result, or
/// the HTTP refusal.
async fn call(s: &SignIn, tool: &str, args: Value, auth: &str) -> Result<Called, (u16, String)> {
    stateless_call(&browser(), &s.public, tool, args, Some(auth)).await.map(|v| tool_result(&v))
}

/// A raw POST of an `initialize` to `/mcp`: the response, to read status and headers.
async fn post_initialize(s: &SignIn, auth: Option<&str>) -> reqwest::Response {
    let mut req = browser()
        .post(s.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}})
            .to_string(),
        );
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    req.send().await.unwrap()
}

fn www_authenticate(resp: &reqwest::Response) -> String {
    resp.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_sign_in_from_a_401_to_a_call_as_the_person_then_refresh_and_a_replica() {
    let s = SignIn::start(Duration::from_secs(3600)).await;

    // 1. Discovery from a 401.
    let resp = post_initialize(&s, None).await;
    assert_eq!(resp.status().as_u16(), 401);
    let challenge = www_authenticate(&resp);
    let prm_url = s.url("/.well-known/oauth-protected-resource/mcp");
    assert!(challenge.contains(&format!("resource_metadata=\"{prm_url}\"")), "{challenge}");
    let prm = get_json(&prm_url).await;
    assert_eq!(prm["resource"], s.url("/mcp"));
    assert_eq!(prm["authorization_servers"], json!([s.public]));
    assert_eq!(prm["scopes_supported"], json!(["read", "write"]));
    let root_prm = get_json(&s.url("/.well-known/oauth-protected-resource")).await;
    assert_eq!(root_prm, prm);
    let asm = get_json(&s.url("/.well-known/oauth-authorization-server")).await;
    assert_eq!(asm["issuer"], s.public);
    assert_eq!(asm["authorization_endpoint"], s.url("/authorize"));
    assert_eq!(asm["token_endpoint"], s.url("/token"));
    assert_eq!(asm["registration_endpoint"], s.url("/register"));
    assert_eq!(asm["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(asm["client_id_metadata_document_supported"], true);

    // 2. Registration, 3. authorize → the forge's consent page with this server's
    // application, 4. the callback → a code for the client.
    let client = s.register().await;
    let (to_forge, _) = s.authorize_hop(&client, &[]).await;
    let forge_params = query(&to_forge);
    assert_eq!(param(&forge_params, "client_id"), FORGE_CLIENT_ID);
    assert_eq!(param(&forge_params, "redirect_uri"), s.url("/oauth/callback"));
    assert_eq!(param(&forge_params, "code_challenge_method"), "S256");
    assert!(!to_forge.contains(FORGE_CLIENT_SECRET));
    let back = s.authorize(&client, &[]).await;
    assert_eq!(param(&back, "state"), "client-state-1");
    assert_eq!(param(&back, "iss"), s.public);
    let code = param(&back, "code");

    // 5. The code exchange with PKCE: the forge is asked once, with the secret and PKCE.
    s.forge.clear_requests();
    let (status, tokens) = s.exchange(&client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["scope"], "read write");
    // The forge's lifetime, never longer.
    let expires_in = tokens["expires_in"].as_u64().unwrap();
    assert!((3500..=3600).contains(&expires_in), "{tokens}");
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    assert!(access.starts_with("aegis-at.") && refresh.starts_with("aegis-rt."));
    let asked = s.token_requests();
    assert_eq!(asked.len(), 1);
    let form: Vec<(String, String)> = url::form_urlencoded::parse(&asked[0].body).into_owned().collect();
    assert_eq!(param(&form, "grant_type"), "authorization_code");
    assert_eq!(param(&form, "client_secret"), FORGE_CLIENT_SECRET);
    assert_eq!(param(&form, "redirect_uri"), s.url("/oauth/callback"));
    assert!(!param(&form, "code_verifier").is_empty());
    assert!(!form.iter().any(|(_, v)| v.contains("aegis-")), "none of our sealed values reach the forge");

    // 6. A tool call reaches the forge with the person's forge token, never ours.
    s.forge.clear_requests();
    let c = call(&s, "repoGet", json!({"owner": "bob", "repo": "notes"}), &bearer(&access)).await.unwrap();
    assert!(!c.is_error, "{}", c.text);
    assert_eq!(c.json["identity"], json!({"login": "bob", "mode": "oauth", "sudo": null}));
    let sent: Vec<Recorded> =
        s.forge.requests().into_iter().filter(|r| r.raw_path == "/api/v1/repos/bob/notes").collect();
    assert_eq!(sent.len(), 1);
    let auth = sent[0].header("authorization").unwrap().to_owned();
    let forge_token = auth.strip_prefix("Bearer ").expect("the forge token goes as Bearer").to_owned();
    let behind = s.forge.oauth_access(&forge_token).expect("an access token the forge issued");
    assert_eq!((behind.login.as_str(), behind.client_id.as_str()), ("bob", FORGE_CLIENT_ID));
    assert!(!c.text.contains(&forge_token) && !c.text.contains(&access));
    // A Streamable HTTP session works the same.
    let session = StreamableClient::connect(&s.public, Some(&bearer(&access))).await.unwrap();
    let r = tool_result(&session.call("userGetCurrent", json!({}), Some(&bearer(&access))).await.unwrap());
    assert_eq!(r.json["identity"]["login"], "bob");

    // 7. A second replica with the same key accepts the token.
    let port2 = free_port();
    let replica = SignIn::server(&s.forge, &s.public, &s.key_path, port2, &[]).await;
    let c2 =
        stateless_call(&browser(), &replica.base, "userGetCurrent", json!({}), Some(&bearer(&access))).await;
    assert_eq!(tool_result(&c2.unwrap()).json["identity"]["login"], "bob");

    // 8. Refresh: new tokens, the old refresh token refused (here, without asking the forge).
    fn refresh_form<'a>(rt: &'a str, client: &'a str) -> Vec<(&'static str, &'a str)> {
        vec![("grant_type", "refresh_token"), ("refresh_token", rt), ("client_id", client)]
    }
    let (status, renewed) = s.token(&refresh_form(&refresh, &client)).await;
    assert_eq!(status, 200, "{renewed}");
    let access2 = renewed["access_token"].as_str().unwrap().to_owned();
    let refresh2 = renewed["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(refresh2, refresh);
    s.forge.clear_requests();
    let (status, again) = s.token(&refresh_form(&refresh, &client)).await;
    assert_eq!((status, again["error"].as_str()), (400, Some("invalid_grant")), "{again}");
    assert!(again["error_description"].as_str().unwrap().contains("already been used"));
    assert!(s.token_requests().is_empty(), "a reused refresh token reached the forge");
    let c3 = call(&s, "userGetCurrent", json!({}), &bearer(&access2)).await.unwrap();
    assert_eq!(c3.json["identity"]["login"], "bob");

    // 9. Expiry: `an_expired_sign_in_is_refused_with_where_to_sign_in_again`, on a clock.

    // Personal access tokens keep working beside sign-in.
    let pat = call(&s, "userGetCurrent", json!({}), &token(BOB_TOKEN)).await.unwrap();
    assert_eq!(pat.json["identity"], json!({"login": "bob", "mode": "token", "sudo": null}));
    s.assert_no_secret_in_log(&[&forge_token, &access, &refresh]);
    drop(replica);
}

/// After the forge's lifetime of its token, a sign-in's access token is refused with where to
/// sign in again, and nothing reaches the forge: the server's clock is moved past the
/// lifetime instead of waiting for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_sign_in_is_refused_with_where_to_sign_in_again() {
    let s = SignIn::start_in_process(Duration::from_secs(3600)).await;
    let (_, tokens) = s.sign_in("read write").await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let fresh = call(&s, "userGetCurrent", json!({}), &bearer(&access)).await.unwrap();
    assert_eq!(fresh.json["identity"]["login"], "bob");
    let clock = s.server.in_process_server().oauth.as_ref().expect("sign-in is on").clock();
    clock.advance(Duration::from_secs(3599));
    let still = call(&s, "userGetCurrent", json!({}), &bearer(&access)).await.unwrap();
    assert_eq!(still.json["identity"]["login"], "bob", "a second before the end it still opens");
    clock.advance(Duration::from_secs(2));
    s.forge.clear_requests();
    let resp = post_initialize(&s, Some(&bearer(&access))).await;
    assert_eq!(resp.status().as_u16(), 401);
    let challenge = www_authenticate(&resp);
    assert!(challenge.contains("expired") && challenge.contains("resource_metadata="), "{challenge}");
    assert!(s.forge.requests().is_empty(), "an expired token reached the forge");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_sign_in_cannot_write_by_any_path_and_is_told_the_scope_it_lacks() {
    let s = SignIn::start(Duration::from_secs(3600)).await;
    let (_, tokens) = s.sign_in("read").await;
    assert_eq!(tokens["scope"], "read");
    let access = tokens["access_token"].as_str().unwrap();
    // The forge was asked for read scopes only.
    let forge_token = {
        s.forge.clear_requests();
        call(&s, "userGetCurrent", json!({}), &bearer(access)).await.unwrap();
        let r = s.forge.requests().into_iter().find(|r| r.raw_path == "/api/v1/user").unwrap();
        r.header("authorization").unwrap().trim_start_matches("Bearer ").to_owned()
    };
    let scope = s.forge.oauth_access(&forge_token).unwrap().scope;
    assert!(scope.contains("read:repository") && !scope.contains("write"), "{scope}");

    s.forge.clear_requests();
    let writes = [
        ("issueCreateIssue", json!({"owner": "bob", "repo": "notes", "body": {"title": "x"}})),
        (
            "gitea_api_request",
            json!({"method": "POST", "path": "/repos/bob/notes/issues", "body": {"title": "x"}}),
        ),
        (
            "gitea_call_operation",
            json!({"operation_id": "issueCreateIssue", "arguments": {"owner": "bob", "repo": "notes", "body": {"title": "x"}}}),
        ),
    ];
    for (tool, args) in writes {
        let (status, body) = call(&s, tool, args.clone(), &bearer(access)).await.expect_err(tool);
        assert_eq!(status, 403, "{tool}: {body}");
        assert!(body.contains("read-only"), "{tool}: {body}");
        // The same request as a raw POST shows the challenge.
        let resp = browser()
            .post(s.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .header("mcp-protocol-version", "2026-07-28")
            .header("authorization", bearer(access))
            .body(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": tool, "arguments": args,
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 403);
        let challenge = www_authenticate(&resp);
        assert!(
            challenge.contains(r#"error="insufficient_scope""#)
                && challenge.contains(r#"scope="read write""#),
            "{challenge}"
        );
        assert!(challenge.contains("resource_metadata="), "{challenge}");
    }
    // Inside a session the policy holds too (the layer and the policy agree).
    let session = StreamableClient::connect(&s.public, Some(&bearer(access))).await.unwrap();
    let list = session.request("tools/list", json!({}), Some(&bearer(access))).await.unwrap();
    let names: Vec<&str> =
        list["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"repoGet") && !names.contains(&"issueCreateIssue"), "{names:?}");
    // Reads work, resources too.
    let read = call(&s, "repoGet", json!({"owner": "bob", "repo": "notes"}), &bearer(access)).await.unwrap();
    assert!(!read.is_error, "{}", read.text);
    let res = session
        .request("resources/read", json!({"uri": "gitea://repos/bob/notes/issues/1"}), Some(&bearer(access)))
        .await
        .unwrap();
    assert!(res.get("result").is_some(), "{res}");
    assert!(
        !s.forge.requests().iter().any(|r| r.method == "POST" && r.raw_path.contains("/issues")),
        "a write reached the forge"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_of_the_sign_in_is_clear_and_asks_nothing_of_the_forge() {
    let s = SignIn::start(Duration::from_secs(3600)).await;
    let client = s.register().await;

    // Unknown client and unregistered redirect URI: a page for the person, no redirect.
    s.forge.clear_requests();
    let unknown = browser().get(s.authorize_url("aegis-client.made-up", &[])).send().await.unwrap();
    let unregistered = browser()
        .get(s.authorize_url(&client, &[("redirect_uri", "http://127.0.0.1:7/elsewhere")]))
        .send()
        .await
        .unwrap();
    for (what, resp) in [("unknown client", unknown), ("unregistered redirect", unregistered)] {
        assert_eq!(resp.status().as_u16(), 400, "{what}");
        assert!(resp.headers().get("location").is_none(), "{what}: redirected");
        let page = resp.text().await.unwrap();
        assert!(page.contains("Sign-in failed"), "{what}: {page}");
    }
    // Missing state or PKCE: shown to the person too (nothing is redirected anywhere before
    // the person approved the client: no open redirector).
    for drop in ["state", "code_challenge"] {
        let resp = browser().get(s.authorize_url(&client, &[(drop, "")])).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 400, "without {drop}");
        assert!(resp.headers().get("location").is_none());
        assert!(resp.text().await.unwrap().contains("invalid_request"), "without {drop}");
    }
    // The consent answered from another site, or from a browser without the sign-in's cookie,
    // or the callback reached by another browser: refused, no code anywhere.
    let (pending, cookie) = s.consent(&client, &[]).await;
    let forged = s.answer(&pending, true, None).await;
    assert_eq!(forged.status().as_u16(), 400);
    assert!(forged.text().await.unwrap().contains("did not come from the browser"));
    let body = format!("pending={pending}&granted=true");
    let cross_site = browser()
        .post(s.url("/authorize"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", "https://evil.example")
        .header("cookie", &cookie)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status().as_u16(), 403);
    let (to_forge, _) = s.authorize_hop(&client, &[]).await;
    let at_forge = browser().get(&to_forge).send().await.unwrap();
    let callback = location(&at_forge);
    s.forge.clear_requests();
    let stolen = browser().get(&callback).send().await.unwrap();
    assert_eq!(stolen.status().as_u16(), 400, "a callback from a browser without the cookie");
    assert!(stolen.headers().get("location").is_none());
    // Denied on the consent page: back to the client with access_denied, the forge never asked.
    let (pending, cookie) = s.consent(&client, &[]).await;
    let denied = s.answer(&pending, false, Some(&cookie)).await;
    assert_eq!(denied.status().as_u16(), 302);
    let back = query(&location(&denied));
    assert_eq!(
        (param(&back, "error").as_str(), param(&back, "state").as_str()),
        ("access_denied", "client-state-1")
    );
    assert!(s.forge.requests().is_empty(), "an invalid authorization reached the forge");

    // A code: wrong or missing verifier, another client, then reuse.
    let back = s.authorize(&client, &[]).await;
    let code = param(&back, "code");
    s.forge.clear_requests();
    let bad = |verifier: &'static str| {
        vec![
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("client_id", client.as_str()),
            ("redirect_uri", CLIENT_REDIRECT),
            ("code_verifier", verifier),
        ]
    };
    let (status, e) = s.token(&bad("wrong-verifier-wrong-verifier-wrong-verifier-0123")).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")), "{e}");
    assert!(e["error_description"].as_str().unwrap().contains("code_verifier"));
    let (status, e) = s.token(&bad("")).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")), "{e}");
    // A parameter sent twice, or missing: invalid_request naming it; bytes that are not UTF-8
    // or broken escapes: read as the (wrong) text they make.
    let mut twice = bad(VERIFIER);
    twice.push(("code", "aegis-code.other"));
    let (status, e) = s.token(&twice).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_request")), "{e}");
    assert_eq!(e["error_description"], "the parameter code is repeated");
    let no_client: Vec<_> = bad(VERIFIER).into_iter().filter(|(k, _)| *k != "client_id").collect();
    let (status, e) = s.token(&no_client).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_request")), "{e}");
    assert_eq!(e["error_description"], "the parameter client_id is missing");
    let garbage = b"grant_type=authorization_code&code=%FF\xFE%ZZ&client_id=x&code_verifier=v".to_vec();
    let (status, e) = s.token_body(garbage).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")), "{e}");
    assert_eq!(e["error_description"], "the code was not issued by this server");
    let other = s.register().await;
    let (status, e) = s.exchange(&other, &code).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")), "{e}");
    assert!(s.token_requests().is_empty(), "a refused exchange reached the forge");
    let (status, _) = s.exchange(&client, &code).await;
    assert_eq!(status, 200);
    let (status, e) = s.exchange(&client, &code).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")), "{e}");
    assert!(e["error_description"].as_str().unwrap().contains("already been used"));
    assert_eq!(s.token_requests().len(), 1, "the reused code reached the forge");

    // Tokens: tampered, another key, another resource, not ours at all.
    let (_, tokens) = s.sign_in("read write").await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let mut tampered = access.clone().into_bytes();
    let at = tampered.len() - 5;
    tampered[at] = if tampered[at] == b'x' { b'y' } else { b'x' };
    let tampered = String::from_utf8(tampered).unwrap();
    s.forge.clear_requests();
    // Our other kinds (a refresh token, a client id) are never taken for forge tokens.
    let refresh = tokens["refresh_token"].as_str().unwrap();
    for t in [refresh, client.as_str()] {
        let resp = post_initialize(&s, Some(&bearer(t))).await;
        assert_eq!(resp.status().as_u16(), 401);
        assert!(www_authenticate(&resp).contains("not an access token"), "{}", www_authenticate(&resp));
    }
    for (what, t) in
        [("tampered", tampered.as_str()), ("forged", "aegis-at.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")]
    {
        let resp = post_initialize(&s, Some(&bearer(t))).await;
        assert_eq!(resp.status().as_u16(), 401, "{what}");
        let challenge = www_authenticate(&resp);
        assert!(
            challenge.contains("not issued by this server") && challenge.contains("resource_metadata="),
            "{what}: {challenge}"
        );
    }
    // A server at another URL with the same key: the token names another resource.
    let dir = tempfile::tempdir().unwrap();
    let other_port = free_port();
    let other_public = format!("http://127.0.0.1:{other_port}");
    let other_server = SignIn::server(&s.forge, &other_public, &s.key_path, other_port, &[]).await;
    let resp = browser()
        .post(format!("{other_public}/mcp"))
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("authorization", bearer(&access))
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    assert!(www_authenticate(&resp).contains("another resource"), "{}", www_authenticate(&resp));
    // A server with another key: not issued by it.
    let key2 = dir.path().join("key2");
    std::fs::write(&key2, OTHER_KEY).unwrap();
    let port3 = free_port();
    let third = SignIn::server(&s.forge, &s.public, key2.to_str().unwrap(), port3, &[]).await;
    let r =
        stateless_call(&browser(), &third.base, "userGetCurrent", json!({}), Some(&bearer(&access))).await;
    assert_eq!(r.unwrap_err().0, 401);
    assert!(not_probes(&s.forge).is_empty(), "a refused token reached the forge");
    // A resource parameter for another server is refused at authorize and token.
    let resp = browser()
        .get(s.authorize_url(&client, &[("resource", "https://elsewhere.example/mcp")]))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    assert!(resp.text().await.unwrap().contains("invalid_target"));
    s.assert_no_secret_in_log(&[&access]);
    drop((other_server, third));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callback_sends_nothing_to_a_client_the_person_did_not_approve() {
    let s = SignIn::start(Duration::from_secs(3600)).await;
    let landing = "https://evil.example/landing";
    let resp = browser()
        .post(s.url("/register"))
        .json(&json!({"redirect_uris": [landing], "token_endpoint_auth_method": "none"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let client = resp.json::<Value>().await.unwrap()["client_id"].as_str().unwrap().to_owned();
    // Opening /authorize shows the consent page with its sealed sign-in; no one clicks.
    let (pending, cookie) = s.consent(&client, &[("redirect_uri", landing)]).await;
    let callback = |state: &str| {
        let mut url = url::Url::parse(&s.url("/oauth/callback")).unwrap();
        url.query_pairs_mut().append_pair("state", state).append_pair("error", "access_denied");
        url.to_string()
    };
    // The callback with that sign-in, without the cookie or with it, any number of times; an
    // unknown state; the approved sign-in of another browser: a page each time, no redirect.
    for (state, cookie) in [
        (pending.as_str(), None),
        (pending.as_str(), Some(cookie.as_str())),
        (pending.as_str(), None),
        ("aegis-state.made-up", None),
        ("not-ours-at-all", Some(cookie.as_str())),
    ] {
        let mut req = browser().get(callback(state));
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{state} {cookie:?}");
        assert!(resp.headers().get("location").is_none(), "redirected: {state} {cookie:?}");
        assert!(resp.text().await.unwrap().contains("Sign-in failed"));
    }
    let (to_forge, _) = s.authorize_hop(&client, &[("redirect_uri", landing)]).await;
    let approved = query(&to_forge).into_iter().find(|(k, _)| k == "state").unwrap().1;
    let resp = browser().get(callback(&approved)).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 400, "the approved sign-in from another browser");
    assert!(resp.headers().get("location").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_uris_a_browser_treats_specially_cannot_be_registered() {
    let s = SignIn::start(Duration::from_secs(3600)).await;
    for uri in [
        "view-source:https://evil.example/",
        "jar:https://evil.example/a.jar!/",
        "filesystem:https://evil.example/temporary/x",
        "mailto:someone@evil.example",
        "chrome://settings/",
        "myapp:/callback",
        "http://evil.example/cb",
    ] {
        let resp =
            browser().post(s.url("/register")).json(&json!({"redirect_uris": [uri]})).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{uri}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"], "invalid_redirect_uri", "{uri}: {body}");
    }
    for uri in ["com.example.app:/callback", "https://app.example/cb", "http://127.0.0.1:5/cb"] {
        let resp =
            browser().post(s.url("/register")).json(&json!({"redirect_uris": [uri]})).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 201, "{uri}");
    }
    // An operator may add an app's own scheme (Cursor's `cursor://`).
    let port = free_port();
    let public = format!("http://127.0.0.1:{port}");
    let cursor =
        SignIn::server(&s.forge, &public, &s.key_path, port, &[("MCP_OAUTH_REDIRECT_SCHEMES", "cursor")])
            .await;
    let resp = browser()
        .post(format!("{public}/register"))
        .json(&json!({"redirect_uris": ["cursor://anysphere.cursor-mcp/oauth/callback"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    drop(cursor);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forge_down_during_sign_in_is_a_clear_temporary_error_and_the_code_can_be_tried_again() {
    let s = SignIn::start(Duration::from_secs(3600)).await;
    let client = s.register().await;
    let back = s.authorize(&client, &[]).await;
    let code = param(&back, "code");
    s.forge.script(fake_forge::Script::once(
        Some("POST"),
        "/login/oauth/access_token",
        fake_forge::ScriptedResponse::status(503),
    ));
    let (status, e) = s.exchange(&client, &code).await;
    assert_eq!((status, e["error"].as_str()), (503, Some("temporarily_unavailable")), "{e}");
    assert!(e["error_description"].as_str().unwrap().contains("try again"), "{e}");
    // A forge answering a token too long to travel inside ours: a clear error, not a token
    // no client could send back.
    s.forge.script(fake_forge::Script::once(
        Some("POST"),
        "/login/oauth/access_token",
        fake_forge::ScriptedResponse::json(
            200,
            &json!({"access_token": format!("eyJ{}", "x".repeat(5000)), "token_type": "bearer", "expires_in": 3600}),
        ),
    ));
    let (status, e) = s.exchange(&client, &code).await;
    assert_eq!((status, e["error"].as_str()), (503, Some("temporarily_unavailable")), "{e}");
    assert!(e["error_description"].as_str().unwrap().contains("longer than 4096 bytes"), "{e}");
    let (status, tokens) = s.exchange(&client, &code).await;
    assert_eq!(status, 200, "the code is still good once the forge is back: {tokens}");
    // The forge down at the start of a sign-in: the token endpoint cannot be reached at all.
    let back = s.authorize(&client, &[]).await;
    let code = param(&back, "code");
    s.forge.shutdown();
    let (status, e) = s.exchange(&client, &code).await;
    assert_eq!((status, e["error"].as_str()), (503, Some("temporarily_unavailable")), "{e}");
    s.assert_no_secret_in_log(&[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_id_metadata_document_is_fetched_checked_and_used() {
    let s = SignIn::start(Duration::from_secs(3600)).await;
    let doc_url = |name: &str| format!("{}/clients/{name}.json", s.forge.base_url());
    let serve = |name: &str, doc: Value| {
        s.forge.script(fake_forge::Script::always(
            Some("GET"),
            &format!("/clients/{name}.json"),
            fake_forge::ScriptedResponse::json(200, &doc),
        ));
    };
    let good = doc_url("good");
    serve(
        "good",
        json!({"client_id": good, "client_name": "CIMD client", "redirect_uris": [CLIENT_REDIRECT]}),
    );
    let back = s.authorize(&good, &[]).await;
    let (status, tokens) = s.exchange(&good, &param(&back, "code")).await;
    assert_eq!(status, 200, "{tokens}");
    let fetched = s.forge.requests().into_iter().filter(|r| r.raw_path == "/clients/good.json").count();
    assert_eq!(fetched, 1, "fetched once, at the authorization");
    // A second sign-in with the same client within minutes uses what was read.
    s.authorize(&good, &[]).await;
    let fetched = s.forge.requests().into_iter().filter(|r| r.raw_path == "/clients/good.json").count();
    assert_eq!(fetched, 1, "fetched again within its lifetime");
    assert!(
        s.forge
            .requests()
            .iter()
            .filter(|r| r.raw_path.starts_with("/clients/"))
            .all(|r| r.header("authorization").is_none()),
        "a credential was sent with a client's metadata document"
    );

    // Documents that do not describe the client they are fetched for.
    let liar = doc_url("liar");
    serve("liar", json!({"client_id": good, "redirect_uris": [CLIENT_REDIRECT]}));
    let secretive = doc_url("secretive");
    serve(
        "secretive",
        json!({"client_id": secretive, "redirect_uris": [CLIENT_REDIRECT], "token_endpoint_auth_method": "private_key_jwt"}),
    );
    let cases = [
        (liar.as_str(), "not its own URL"),
        (secretive.as_str(), "public clients"),
        (&*doc_url("missing"), "could not be fetched"),
        ("http://mcp-client.example/client.json", "https"),
        // Private, link-local and mapped addresses, and other ports: never fetched.
        ("https://10.0.0.1/client.json", "could not be fetched"),
        ("https://169.254.169.254/latest/meta-data.json", "could not be fetched"),
        ("https://[::ffff:192.168.0.1]/client.json", "could not be fetched"),
        ("https://localhost:8443/client.json", "could not be fetched"),
    ];
    for (client_id, words) in cases {
        let resp = browser().get(s.authorize_url(client_id, &[])).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{client_id}");
        let page = resp.text().await.unwrap();
        assert!(page.contains(words), "{client_id}: {page}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_serves_the_legacy_sse_transport_too() {
    let s = SignIn::start_with(Duration::from_secs(3600), &[("MCP_TRANSPORT", "sse")]).await;
    let resp = browser().get(s.url("/sse")).header("accept", "text/event-stream").send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    let challenge = www_authenticate(&resp);
    let prm_url = s.url("/.well-known/oauth-protected-resource/sse");
    assert!(challenge.contains(&format!("resource_metadata=\"{prm_url}\"")), "{challenge}");
    assert_eq!(get_json(&prm_url).await["resource"], s.url("/sse"));
    let (_, tokens) = s.sign_in("read write").await;
    let access = tokens["access_token"].as_str().unwrap();
    let sse = SseClient::connect(&s.public, Some(&bearer(access))).await;
    let me = sse.call("userGetCurrent", json!({}), Some(&bearer(access))).await;
    let me = tool_result(&me);
    assert_eq!(me.json["identity"], json!({"login": "bob", "mode": "oauth", "sudo": null}), "{}", me.text);
}

/// `POST /token` with `body` as it is at the server at `base` (one replica, or the balancer).
pub(super) async fn token_at(base: &str, body: Vec<u8>) -> (u16, Value) {
    let resp = browser()
        .post(format!("{base}/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    assert_eq!(resp.headers().get("cache-control").map(|v| v.to_str().unwrap()), Some("no-store"));
    (status, resp.json().await.unwrap())
}
