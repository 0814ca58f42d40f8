//! Sign-in with several forges (a profiles file, docs/SIGN-IN.md "Several forges"): one
//! consent, then each forge's own consent at its own callback, one token with a grant per
//! forge; each forge receives only its own grant; a code of one forge is never taken at
//! another's callback; a refresh refreshes both, or fails naming the forge that refused.

use fake_forge::{FakeForge, OAuthApp, Recorded};
use serde_json::{Value, json};

use super::oauth::{CLIENT_REDIRECT, KEY, VERIFIER, browser, challenge, location, param, query};
use super::support::http::{HttpServer, StreamableClient, free_port, stateless_call, tool_result};
use super::support::{Called, Forge};

const WORK_APP: &str = "work-app-71c2";
const WORK_APP_SECRET: &str = "gto_work-app-secret-3a9b8c";
const HOME_APP: &str = "home-app-02fd";
const HOME_APP_SECRET: &str = "gto_home-app-secret-6e5d4c";

/// Two forges with an OAuth2 application each for this server (bob signed in to both web
/// UIs), and a server with a profiles file signing in on both: `work` (Gitea, the default)
/// and `home` (Forgejo).
struct Two {
    work: FakeForge,
    home: FakeForge,
    _server: HttpServer,
    public: String,
    _dir: tempfile::TempDir,
}

impl Two {
    async fn start() -> Two {
        let port = free_port();
        let public = format!("http://127.0.0.1:{port}");
        let forge = |builder: Forge, app: &str, secret: &str, profile: &str| {
            let callback = format!("{public}/oauth/callback/{profile}");
            let (app, secret) = (app.to_owned(), secret.to_owned());
            builder
                .user("tok-bob-own", "bob")
                .options(move |o| {
                    o.oauth_apps = vec![OAuthApp::confidential(&app, &secret, &callback)];
                    o.oauth_user = Some("bob".into());
                })
                .repo("bob", "notes")
                .start()
        };
        let work = forge(Forge::gitea(), WORK_APP, WORK_APP_SECRET, "work").await;
        let home = forge(Forge::forgejo(), HOME_APP, HOME_APP_SECRET, "home").await;
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key");
        std::fs::write(&key, format!("{KEY}\n")).unwrap();
        let profiles = dir.path().join("forges.toml");
        std::fs::write(
            &profiles,
            format!(
                "default = \"work\"\n\n[forges.work]\nurl = \"{}\"\nflavor = \"gitea\"\noauth_client_id = \"{WORK_APP}\"\noauth_client_secret_env = \"WORK_APP_SECRET\"\n\n[forges.home]\nurl = \"{}\"\nflavor = \"forgejo\"\noauth_client_id = \"{HOME_APP}\"\noauth_client_secret_env = \"HOME_APP_SECRET\"\n",
                work.base_url(),
                home.base_url()
            ),
        )
        .unwrap();
        let listen = format!("127.0.0.1:{port}");
        let env: Vec<(String, String)> = [
            ("GITEA_PROFILES", profiles.to_str().unwrap()),
            ("WORK_APP_SECRET", WORK_APP_SECRET),
            ("HOME_APP_SECRET", HOME_APP_SECRET),
            ("MCP_PUBLIC_URL", &public),
            ("MCP_OAUTH_KEY_FILE", key.to_str().unwrap()),
        ]
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
        let args = ["serve", "--transport", "http", "--listen", &listen];
        let server = HttpServer::of_settings(super::support::settings_of(&args, &env), "http", &listen).await;
        Two { work, home, _server: server, public, _dir: dir }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.public)
    }

    async fn register(&self) -> String {
        let resp = browser()
            .post(self.url("/register"))
            .json(&json!({"redirect_uris": [CLIENT_REDIRECT], "client_name": "two forges"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 201);
        resp.json::<Value>().await.unwrap()["client_id"].as_str().unwrap().to_owned()
    }

    /// The consent page, allowed: its text, the browser's cookie, and where the answer sends
    /// the browser (the first forge).
    async fn consent(&self, client: &str) -> (String, String, String) {
        self.consent_with(client, "read write").await
    }

    /// `consent`, asking for `scope`.
    async fn consent_with(&self, client: &str, scope: &str) -> (String, String, String) {
        let ch = challenge(VERIFIER);
        let mut url = url::Url::parse(&self.url("/authorize")).unwrap();
        url.query_pairs_mut().extend_pairs([
            ("client_id", client),
            ("redirect_uri", CLIENT_REDIRECT),
            ("response_type", "code"),
            ("state", "client-state-2"),
            ("code_challenge", &ch),
            ("code_challenge_method", "S256"),
            ("scope", scope),
        ]);
        let resp = browser().get(url.as_str()).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let cookie = resp.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
        let page = resp.text().await.unwrap();
        let at = page.find("name=\"pending\" value=\"").unwrap() + "name=\"pending\" value=\"".len();
        let pending = page[at..].split('"').next().unwrap().to_owned();
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs([("pending", pending.as_str()), ("granted", "true")])
            .finish();
        let resp = browser()
            .post(self.url("/authorize"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", &self.public)
            .header("cookie", &cookie)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 302);
        (page, cookie, location(&resp))
    }

    /// The browser at `url`, with `cookie`: the response.
    async fn visit(&self, url: &str, cookie: &str) -> reqwest::Response {
        browser().get(url).header("cookie", cookie).send().await.unwrap()
    }

    async fn token(&self, form: &[(&str, &str)]) -> (u16, Value) {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let resp = browser()
            .post(self.url("/token"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.json().await.unwrap())
    }

    /// A whole sign-in on both forges: the client id and the token answer.
    async fn sign_in(&self) -> (String, Value) {
        self.sign_in_with("read write").await
    }

    /// `sign_in`, asking for `scope`.
    async fn sign_in_with(&self, scope: &str) -> (String, Value) {
        let client = self.register().await;
        let (_, cookie, to_work) = self.consent_with(&client, scope).await;
        let at_work = self.visit(&to_work, "").await;
        let back_work = location(&at_work);
        let to_home = location(&self.visit(&back_work, &cookie).await);
        let back_home = location(&self.visit(&to_home, "").await);
        let to_client = location(&self.visit(&back_home, &cookie).await);
        let code = param(&query(&to_client), "code");
        let (status, tokens) = self.exchange(&client, &code).await;
        assert_eq!(status, 200, "{tokens}");
        (client, tokens)
    }

    async fn exchange(&self, client: &str, code: &str) -> (u16, Value) {
        self.token(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("client_id", client),
            ("redirect_uri", CLIENT_REDIRECT),
            ("code_verifier", VERIFIER),
        ])
        .await
    }

    async fn call(&self, access: &str, tool: &str, args: Value) -> Called {
        let v = stateless_call(&browser(), &self.public, tool, args, Some(&format!("Bearer {access}")))
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e:?}"));
        tool_result(&v)
    }
}

/// The requests `forge` got at its token endpoint.
fn token_requests(forge: &FakeForge) -> Vec<Recorded> {
    forge.requests().into_iter().filter(|r| r.raw_path == "/login/oauth/access_token").collect()
}

/// The forge OAuth tokens `forge`'s API received (as `Bearer`).
fn bearers(forge: &FakeForge) -> Vec<String> {
    forge
        .requests()
        .into_iter()
        .filter(|r| r.raw_path.starts_with("/api/v1/"))
        .filter_map(|r| r.header("authorization").and_then(|a| a.strip_prefix("Bearer ")).map(str::to_owned))
        .collect()
}

/// Every request `forge` received, as text: to look for what must not be there.
fn everything(forge: &FakeForge) -> String {
    forge
        .requests()
        .iter()
        .map(|r| {
            format!("{} {:?} {:?} {}", r.raw_path, r.raw_query, r.headers, String::from_utf8_lossy(&r.body))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_sign_in_grants_both_forges_and_each_forge_receives_only_its_own_grant() {
    let two = Two::start().await;
    let client = two.register().await;
    let (page, cookie, to_work) = two.consent(&client).await;
    // The consent page lists the forges, in order.
    let (w, h) = (page.find("<li>work (").unwrap(), page.find("<li>home (").unwrap());
    assert!(w < h, "{page}");
    // First the default forge, with its own application and callback.
    assert!(to_work.starts_with(&format!("{}/login/oauth/authorize?", two.work.base_url())), "{to_work}");
    let p = query(&to_work);
    assert_eq!(param(&p, "client_id"), WORK_APP);
    assert_eq!(param(&p, "redirect_uri"), two.url("/oauth/callback/work"));
    let back_work = location(&two.visit(&to_work, "").await);
    assert!(back_work.starts_with(&two.url("/oauth/callback/work?")), "{back_work}");
    let work_code = param(&query(&back_work), "code");
    // The work callback exchanges work's code at once, at work only, then sends the browser
    // on to home — with nothing of work's in clear.
    let resp = two.visit(&back_work, &cookie).await;
    assert_eq!(resp.status().as_u16(), 302);
    let to_home = location(&resp);
    assert_eq!(token_requests(&two.work).len(), 1);
    assert!(token_requests(&two.home).is_empty());
    assert!(to_home.starts_with(&format!("{}/login/oauth/authorize?", two.home.base_url())), "{to_home}");
    let p = query(&to_home);
    assert_eq!(param(&p, "client_id"), HOME_APP);
    assert_eq!(param(&p, "redirect_uri"), two.url("/oauth/callback/home"));
    assert!(!to_home.contains(&work_code) && !to_home.contains(WORK_APP));
    let back_home = location(&two.visit(&to_home, "").await);
    assert!(back_home.starts_with(&two.url("/oauth/callback/home?")), "{back_home}");
    let resp = two.visit(&back_home, &cookie).await;
    assert_eq!(resp.status().as_u16(), 302);
    let to_client = location(&resp);
    assert!(to_client.starts_with(CLIENT_REDIRECT), "{to_client}");
    let back = query(&to_client);
    assert_eq!(param(&back, "state"), "client-state-2");
    let code = param(&back, "code");
    // The code exchange asks no forge: both grants are in the code.
    let (work_asked, home_asked) = (token_requests(&two.work).len(), token_requests(&two.home).len());
    let (status, tokens) = two.exchange(&client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!((token_requests(&two.work).len(), token_requests(&two.home).len()), (work_asked, home_asked));
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    eprintln!("two forges: access token {} bytes, refresh token {} bytes", access.len(), refresh.len());
    assert!(access.len() <= 8192 && refresh.len() <= 8192);
    // A second exchange of the same code is refused.
    let (status, e) = two.exchange(&client, &code).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")), "{e}");

    // Calls to each forge carry that forge's OAuth token, and only it.
    two.work.clear_requests();
    two.home.clear_requests();
    let got = two.call(&access, "repoGet", json!({"owner": "bob", "repo": "notes"})).await;
    assert!(!got.is_error, "{}", got.text);
    assert_eq!(
        (got.json["forge"].as_str(), got.json["identity"]["login"].as_str()),
        (Some("work"), Some("bob"))
    );
    assert_eq!(got.json["identity"]["mode"], "oauth");
    let got = two.call(&access, "repoGet", json!({"owner": "bob", "repo": "notes", "forge": "home"})).await;
    assert!(!got.is_error, "{}", got.text);
    assert_eq!(
        (got.json["forge"].as_str(), got.json["identity"]["login"].as_str()),
        (Some("home"), Some("bob"))
    );
    let (at_work, at_home) = (bearers(&two.work), bearers(&two.home));
    assert!(!at_work.is_empty() && !at_home.is_empty());
    for t in &at_work {
        assert_eq!(two.work.oauth_access(t).map(|a| a.client_id), Some(WORK_APP.to_owned()));
        assert!(!everything(&two.home).contains(t.as_str()), "work's token reached home");
    }
    for t in &at_home {
        assert_eq!(two.home.oauth_access(t).map(|a| a.client_id), Some(HOME_APP.to_owned()));
        assert!(!everything(&two.work).contains(t.as_str()), "home's token reached work");
    }
    // A Streamable HTTP session works the same, on both forges.
    let auth = format!("Bearer {access}");
    let session = StreamableClient::connect(&two.public, Some(&auth)).await.unwrap();
    for forge in ["work", "home"] {
        let args = json!({"forge": forge});
        let r = tool_result(&session.call("userGetCurrent", args, Some(&auth)).await.unwrap());
        assert_eq!(
            (r.json["forge"].as_str(), r.json["identity"]["login"].as_str()),
            (Some(forge), Some("bob"))
        );
    }
    // Neither forge ever saw our tokens.
    for forge in [&two.work, &two.home] {
        let all = everything(forge);
        assert!(!all.contains(&access) && !all.contains(&refresh));
    }

    // A refresh refreshes both, and the new token still reaches both.
    two.work.clear_requests();
    two.home.clear_requests();
    let refreshed =
        [("grant_type", "refresh_token"), ("refresh_token", refresh.as_str()), ("client_id", &client)];
    let (status, tokens) = two.token(&refreshed).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!((token_requests(&two.work).len(), token_requests(&two.home).len()), (1, 1));
    let work_form = String::from_utf8_lossy(&token_requests(&two.work)[0].body).into_owned();
    assert!(work_form.contains(WORK_APP) && !work_form.contains(HOME_APP), "{work_form}");
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    for forge in [None, Some("home")] {
        let mut args = json!({"owner": "bob", "repo": "notes"});
        if let Some(f) = forge {
            args["forge"] = json!(f);
        }
        let got = two.call(&access, "repoGet", args).await;
        assert!(!got.is_error, "{forge:?}: {}", got.text);
    }

    // One forge refusing the refresh: an error that names it, and the client signs in again.
    two.home.script(fake_forge::Script::once(
        Some("POST"),
        "/login/oauth/access_token",
        fake_forge::ScriptedResponse::json(
            400,
            &json!({"error": "invalid_grant", "error_description": "revoked"}),
        ),
    ));
    let again =
        [("grant_type", "refresh_token"), ("refresh_token", refresh.as_str()), ("client_id", &client)];
    let (status, e) = two.token(&again).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")), "{e}");
    let words = e["error_description"].as_str().unwrap();
    assert!(
        words.starts_with("the forge home refused the refresh") && words.ends_with("sign in again"),
        "{e}"
    );
    let _ = two.sign_in().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_of_one_forge_is_never_taken_at_another_forges_callback() {
    let two = Two::start().await;
    let client = two.register().await;
    let (_, cookie, to_work) = two.consent(&client).await;
    let back_work = location(&two.visit(&to_work, "").await);
    let to_home = location(&two.visit(&back_work, &cookie).await);
    let back_home = location(&two.visit(&to_home, "").await);
    // home's answer (its code and state) presented at work's callback: refused, and work
    // is asked nothing.
    two.work.clear_requests();
    let mixed = back_home.replace("/oauth/callback/home?", "/oauth/callback/work?");
    let resp = two.visit(&mixed, &cookie).await;
    assert_eq!(resp.status().as_u16(), 400);
    let page = resp.text().await.unwrap();
    assert!(page.contains("this sign-in was sent to home but came back at /oauth/callback/work"), "{page}");
    assert!(two.work.requests().is_empty(), "work was asked: {:?}", two.work.requests());
    // At the one-forge callback, or an unknown profile's: the same.
    for elsewhere in ["/oauth/callback?", "/oauth/callback/nowhere?"] {
        let resp = two.visit(&back_home.replace("/oauth/callback/home?", elsewhere), &cookie).await;
        assert_eq!(resp.status().as_u16(), 400, "{elsewhere}");
    }
    assert!(two.work.requests().is_empty());
    // Nothing was used up: at its own callback the sign-in goes on.
    let resp = two.visit(&back_home, &cookie).await;
    assert_eq!(resp.status().as_u16(), 302);
    assert!(location(&resp).starts_with(CLIENT_REDIRECT));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forge_declined_drops_out_named_and_none_left_is_access_denied() {
    let two = Two::start().await;
    let client = two.register().await;
    // The person declines at home: work's grant alone, after a page that names home.
    let (_, cookie, to_work) = two.consent(&client).await;
    let back_work = location(&two.visit(&to_work, "").await);
    let to_home = location(&two.visit(&back_work, &cookie).await);
    let state = param(&query(&to_home), "state");
    let declined =
        format!("{}?error=access_denied&state={}", two.url("/oauth/callback/home"), urlencode(&state));
    let resp = two.visit(&declined, &cookie).await;
    assert_eq!(resp.status().as_u16(), 200);
    let page = resp.text().await.unwrap();
    assert!(page.contains("Left out of this sign-in: home (declined on its consent page)"), "{page}");
    let at = page.find("href=\"").unwrap() + "href=\"".len();
    let next = page[at..].split('"').next().unwrap().replace("&amp;", "&");
    assert!(next.starts_with(CLIENT_REDIRECT), "{next}");
    let (status, tokens) = two.exchange(&client, &param(&query(&next), "code")).await;
    assert_eq!(status, 200, "{tokens}");
    let access = tokens["access_token"].as_str().unwrap();
    assert!(!two.call(access, "repoGet", json!({"owner": "bob", "repo": "notes"})).await.is_error);
    let got = two.call(access, "repoGet", json!({"owner": "bob", "repo": "notes", "forge": "home"})).await;
    assert!(got.is_error && got.text.contains("carries no credential for the forge home"), "{}", got.text);

    // Declined on both: access_denied goes back to the client, naming both.
    let (_, cookie, to_work) = two.consent(&client).await;
    let state = param(&query(&to_work), "state");
    let declined =
        format!("{}?error=access_denied&state={}", two.url("/oauth/callback/work"), urlencode(&state));
    let page = two.visit(&declined, &cookie).await.text().await.unwrap();
    let at = page.find("href=\"").unwrap() + "href=\"".len();
    let to_home = page[at..].split('"').next().unwrap().replace("&amp;", "&");
    let state = param(&query(&to_home), "state");
    let declined =
        format!("{}?error=access_denied&state={}", two.url("/oauth/callback/home"), urlencode(&state));
    let resp = two.visit(&declined, &cookie).await;
    assert_eq!(resp.status().as_u16(), 302);
    let back = query(&location(&resp));
    assert_eq!(param(&back, "error"), "access_denied");
    let words = param(&back, "error_description");
    assert!(words.contains("work (declined") && words.contains("home (declined"), "{words}");
}

fn urlencode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_sign_in_is_read_only_on_every_forge_and_a_forge_takes_one_credential() {
    let two = Two::start().await;
    let (_, tokens) = two.sign_in_with("read").await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    assert_eq!(tokens["scope"], "read");
    for forge in ["work", "home"] {
        let args = json!({"owner": "bob", "repo": "notes", "forge": forge});
        assert!(!two.call(&access, "repoGet", args).await.is_error, "{forge}");
        two.work.clear_requests();
        two.home.clear_requests();
        let write = json!({"owner": "bob", "repo": "notes", "forge": forge, "body": {"title": "no"}});
        let refused = stateless_call(
            &browser(),
            &two.public,
            "issueCreateIssue",
            write,
            Some(&format!("Bearer {access}")),
        )
        .await
        .unwrap_err();
        assert_eq!(refused.0, 403, "{forge}: {refused:?}");
        assert!(refused.1.contains("read-only"), "{forge}: {refused:?}");
        assert!(two.work.requests().is_empty() && two.home.requests().is_empty(), "{forge}");
    }
    // A forge token for a forge the sign-in covers, beside it: two credentials, refused.
    let resp = browser()
        .post(two.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {access}"))
        .header("x-mcp-forge-authorization-home", "token tok-bob-own")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let text = resp.text().await.unwrap();
    assert!(text.contains("two credentials for the forge home"), "{text}");
}
