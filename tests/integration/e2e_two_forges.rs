//! End-to-end tests of one server serving two REAL forges at once from a profiles file: a
//! Forgejo and a Gitea, each with its own account, in one session.
//!
//! They are `#[ignore]`d like `e2e_real_forge`'s, and need both forges: the Forgejo in
//! `AEGIS_E2E_URL` with `AEGIS_E2E_TOKEN` (a site administrator's, who deletes what a failed
//! test left) and `AEGIS_E2E_TOKEN_2` (another user's, the account the server uses there), the
//! Gitea in `AEGIS_E2E_URL_B` with `AEGIS_E2E_TOKEN_B`. Run with `--ignored` but without these,
//! every test fails and says what to set. `scripts/test` starts both, the Forgejo inside the
//! Gitea's run, whose `AEGIS_E2E_AS` gives the Gitea's variables their `_B`:
//!
//! ```sh
//! AEGIS_E2E_AS=_B scripts/real-gitea run 1.27.3 -- scripts/real-forgejo run -- \
//!     cargo test --test integration e2e_two_forges:: -- --ignored
//! ```
//!
//! The server's profiles: `work`, the Gitea as its first user (the default), and `home`, the
//! Forgejo as its second user, with `repositories = ["<that user>/*"]`; two logins, so that the
//! envelope's `identity.login` shows whose credential each forge was sent. What a test makes
//! there (public repositories `aegis-e2e-two-<random>`, of the same name on both forges) is
//! deleted through the server as a step, else by each forge's `E2e` fixture when the test
//! ends however it ends. A top-level module, not inside `e2e_real_forge`: that name is the
//! one-forge stages' filter, which would run these without their second forge.
// Tests read their own variables (AEGIS_E2E_*), not the server's settings.
#![allow(clippy::disallowed_methods)]

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use crate::e2e_real_forge::{E2e, fails, ok, suffix};
use crate::support::{self, Called, Server};

/// The variables the profiles file's `token_env` names, set for the server alone.
const WORK_TOKEN: &str = "AEGIS_TEST_WORK_TOKEN";
const HOME_TOKEN: &str = "AEGIS_TEST_HOME_TOKEN";

/// The variable `key`, which a test run with `--ignored` must have.
fn required(key: &str) -> String {
    std::env::var(key).ok().filter(|v| !v.trim().is_empty()).unwrap_or_else(|| {
        panic!(
            "{key} is not set: the two-forge tests need a Forgejo (AEGIS_E2E_URL, AEGIS_E2E_TOKEN of a \
             site administrator, AEGIS_E2E_TOKEN_2 of another user) and a Gitea (AEGIS_E2E_URL_B, \
             AEGIS_E2E_TOKEN_B); AEGIS_E2E_AS=_B scripts/real-gitea run VERSION -- \
             scripts/real-forgejo run -- CMD starts both"
        )
    })
}

/// One forge as the test itself asks it, past the server: its address and a user's token.
struct Direct {
    url: String,
    token: String,
}

impl Direct {
    /// `GET /api/v1{path}` with this token: the status and the JSON body (`null` if none).
    async fn get(&self, path: &str) -> (u16, Value) {
        let url = format!("{}/api/v1{path}", self.url.trim_end_matches('/'));
        let resp = support::http::http_client()
            .get(&url)
            .header("authorization", format!("token {}", self.token))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// The token's user.
    async fn login(&self) -> String {
        let (status, body) = self.get("/user").await;
        assert_eq!(status, 200, "GET /user at {}: {body}", self.url);
        body["login"].as_str().unwrap_or_else(|| panic!("no login: {body}")).to_owned()
    }

    /// The titles of every issue of `owner/repo`, with their authors.
    async fn issues(&self, owner: &str, repo: &str) -> Vec<(String, String)> {
        let (status, body) = self.get(&format!("/repos/{owner}/{repo}/issues?state=all&type=issues")).await;
        assert_eq!(status, 200, "the issues of {owner}/{repo} at {}: {body}", self.url);
        let list = body.as_array().unwrap_or_else(|| panic!("not a list: {body}"));
        list.iter()
            .map(|i| {
                (
                    i["title"].as_str().unwrap_or("").to_owned(),
                    i["user"]["login"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }
}

/// The two forges and a server serving both, in one session.
struct Pair {
    server: Server,
    /// Each forge asked directly: the Gitea as `work`'s user, the Forgejo as its administrator
    /// (who would see any repository) and as `home`'s user.
    gitea: Direct,
    forgejo_admin: Direct,
    forgejo: Direct,
    /// The logins of `work` and `home`.
    work_login: String,
    home_login: String,
    /// The Gitea's version, as the server names it.
    gitea_version: String,
    /// Each forge's fixture: deletes what the test left there.
    on_gitea: E2e,
    on_forgejo: E2e,
    _dir: tempfile::TempDir,
}

impl Pair {
    async fn start() -> Pair {
        for key in
            ["AEGIS_E2E_URL", "AEGIS_E2E_TOKEN", "AEGIS_E2E_TOKEN_2", "AEGIS_E2E_URL_B", "AEGIS_E2E_TOKEN_B"]
        {
            required(key);
        }
        let (on_forgejo, on_gitea) = (E2e::of(""), E2e::of("_B"));
        let gitea = Direct { url: required("AEGIS_E2E_URL_B"), token: required("AEGIS_E2E_TOKEN_B") };
        let forgejo_admin = Direct { url: required("AEGIS_E2E_URL"), token: required("AEGIS_E2E_TOKEN") };
        let forgejo = Direct { url: forgejo_admin.url.clone(), token: required("AEGIS_E2E_TOKEN_2") };
        let (work_login, home_login) = (gitea.login().await, forgejo.login().await);

        let text = format!(
            r#"default = "work"

[forges.work]
url = "{gitea}"
flavor = "auto"
token_env = "{WORK_TOKEN}"

[forges.home]
url = "{forgejo}"
flavor = "auto"
token_env = "{HOME_TOKEN}"
repositories = ["{home_login}/*"]
"#,
            gitea = gitea.url,
            forgejo = forgejo.url,
        );
        let (dir, path) = crate::support::write_profiles(&text);
        let env = [
            ("GITEA_PROFILES", path.as_str()),
            (WORK_TOKEN, gitea.token.as_str()),
            (HOME_TOKEN, forgejo.token.as_str()),
            ("TOOLSETS", "all"),
        ];
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        let server = Server::of_settings(support::settings_of(&["serve"], &env)).await;

        // Which forge is which, as the forges say: the tests rely on one of each flavor.
        let mut versions = Vec::new();
        for forge in ["work", "home"] {
            let c = server.call("getVersion", json!({"forge": forge})).await;
            assert_eq!(c.json["forge"], forge, "{}", c.text);
            versions.push(
                ok(&c, 200)["version"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no version: {}", c.text))
                    .to_owned(),
            );
        }
        let (gitea_version, forgejo_version) = (versions[0].clone(), versions[1].clone());
        assert!(
            !gitea_version.contains("+gitea-") && forgejo_version.contains("+gitea-"),
            "AEGIS_E2E_URL_B must be a Gitea and AEGIS_E2E_URL a Forgejo; they report {gitea_version} and \
             {forgejo_version}"
        );
        eprintln!(
            "e2e: work is Gitea {gitea_version} at {}, home is Forgejo {forgejo_version} at {}",
            gitea.url, forgejo.url
        );
        Pair {
            server,
            gitea,
            forgejo_admin,
            forgejo,
            work_login,
            home_login,
            gitea_version,
            on_gitea,
            on_forgejo,
            _dir: dir,
        }
    }

    /// A tool call in the session; a call held for confirmation is confirmed (a delete).
    async fn call(&self, tool: &str, args: Value) -> Called {
        self.server.call(tool, args).await
    }
}

/// The result is from `forge`, called as `login`.
fn from(c: &Called, forge: &str, login: &str) {
    assert_eq!(c.json["forge"], forge, "forge: {}", c.text);
    assert_eq!(c.json["identity"]["login"], login, "identity.login: {}", c.text);
}

/// `url` is an address of the forge at `base`.
fn on(url: &Value, base: &str, c: &Called) {
    let url = url.as_str().unwrap_or_else(|| panic!("not an address: {url}: {}", c.text));
    assert!(url.starts_with(base.trim_end_matches('/')), "{url} is not on {base}: {}", c.text);
}

/// One session reads from both forges and writes to each as its own user: a repository of the
/// same name made on each with `forge`; the Gitea's read and written by default and by `forge`,
/// the Forgejo's by its `repositories` pattern; each issue found by the forge's own API on
/// that forge, under that forge's user, and nowhere on the other. An operation only Forgejo
/// has goes by the pattern to the Forgejo, and on the Gitea's repository is refused with where
/// it exists.
#[tokio::test]
#[ignore = "needs a Forgejo and a Gitea: AEGIS_E2E_URL, AEGIS_E2E_TOKEN, AEGIS_E2E_TOKEN_2, AEGIS_E2E_URL_B, AEGIS_E2E_TOKEN_B"]
async fn e2e_one_session_reads_both_forges_and_writes_to_each_as_its_own_user() {
    let p = Pair::start().await;
    let (alice, bob) = (p.work_login.as_str(), p.home_login.as_str());
    assert_ne!(alice, bob, "the two profiles' users must differ to be told apart");
    let name = format!("aegis-e2e-two-{}", suffix());

    // Who each forge's calls are made as.
    from(&p.call("userGetCurrent", json!({"forge": "work"})).await, "work", alice);
    from(&p.call("userGetCurrent", json!({"forge": "home"})).await, "home", bob);

    // A repository of the same name on each, made by naming the forge (the route names no
    // repository). Public: a private read would make the other forge's writes ask first.
    for (forge, owner, fixture) in [("work", alice, &p.on_gitea), ("home", bob, &p.on_forgejo)] {
        let body = json!({"name": name, "auto_init": true, "default_branch": "main", "private": false});
        let c = p.call("createCurrentUserRepo", json!({"body": body, "forge": forge})).await;
        if c.kind() != "conflict" {
            fixture.made(owner, &name);
        }
        assert_eq!(ok(&c, 201)["full_name"], format!("{owner}/{name}"), "{}", c.text);
        from(&c, forge, owner);
    }

    // Reads from both: alice's by default (no pattern matches it), bob's by `bob/*`; the
    // repository and its file come from the forge the envelope names.
    let c = p.call("repoGet", json!({"owner": alice, "repo": name})).await;
    from(&c, "work", alice);
    on(&ok(&c, 200)["html_url"], &p.gitea.url, &c);
    let c = p.call("repoGet", json!({"owner": bob, "repo": name})).await;
    from(&c, "home", bob);
    on(&ok(&c, 200)["html_url"], &p.forgejo.url, &c);
    // `forge` beats a pattern: asked on the Gitea, bob's repository is not there.
    let c = p.call("repoGet", json!({"owner": bob, "repo": name, "forge": "work"})).await;
    fails(&c, "not_found", Some(404));
    // The README's blob on the Forgejo, for its own operation below.
    let mut readme_blob = String::new();
    for (owner, forge, base) in [(alice, "work", &p.gitea.url), (bob, "home", &p.forgejo.url)] {
        let c =
            p.call("repoGetContents", json!({"owner": owner, "repo": name, "filepath": "README.md"})).await;
        from(&c, forge, owner);
        let data = ok(&c, 200);
        on(&data["download_url"], base, &c);
        let clean: String = data["content"].as_str().unwrap_or("").split_whitespace().collect();
        let text = String::from_utf8(B64.decode(clean).expect("base64 content")).unwrap();
        assert!(text.contains(&name), "README.md of {owner}/{name} on {forge}: {text:?}");
        if forge == "home" {
            readme_blob = data["sha"].as_str().unwrap_or("").to_owned();
        }
    }

    // Writes, each as that forge's user: to the Gitea by `forge`, to the Forgejo by the pattern.
    let (by_forge, by_pattern) = (format!("on work by forge {name}"), format!("on home by pattern {name}"));
    let c = p
        .call(
            "issueCreateIssue",
            json!({"owner": alice, "repo": name, "forge": "work", "body": {"title": by_forge}}),
        )
        .await;
    from(&c, "work", alice);
    assert_eq!(ok(&c, 201)["user"]["login"], alice, "{}", c.text);
    on(&c.data()["html_url"], &p.gitea.url, &c);
    let c =
        p.call("issueCreateIssue", json!({"owner": bob, "repo": name, "body": {"title": by_pattern}})).await;
    from(&c, "home", bob);
    assert_eq!(ok(&c, 201)["user"]["login"], bob, "{}", c.text);
    on(&c.data()["html_url"], &p.forgejo.url, &c);

    // Read back through the server, each from its forge.
    for (owner, forge, title) in [(alice, "work", &by_forge), (bob, "home", &by_pattern)] {
        let c = p.call("issueListIssues", json!({"owner": owner, "repo": name, "state": "all"})).await;
        from(&c, forge, owner);
        let titles: Vec<&str> =
            ok(&c, 200).as_array().unwrap().iter().filter_map(|i| i["title"].as_str()).collect();
        assert_eq!(titles, [title.as_str()], "{}", c.text);
    }
    // And as each forge itself shows it: each issue there, by its user, and the other forge
    // has no such repository at all (asked by its administrator, who would see it).
    assert_eq!(p.gitea.issues(alice, &name).await, [(by_forge.clone(), alice.to_owned())]);
    assert_eq!(p.forgejo.issues(bob, &name).await, [(by_pattern.clone(), bob.to_owned())]);
    assert_eq!(p.gitea.get(&format!("/repos/{bob}/{name}")).await.0, 404, "bob's repository on the Gitea");
    assert_eq!(p.forgejo_admin.get(&format!("/repos/{alice}/{name}")).await.0, 404, "alice's on the Forgejo");

    // An operation only Forgejo has: by the pattern it reaches the Forgejo; on alice's
    // repository, which goes to the Gitea, the server refuses it, saying where it exists.
    let c = p.call("GetBlobs", json!({"owner": bob, "repo": name, "shas": readme_blob})).await;
    from(&c, "home", bob);
    let blobs = ok(&c, 200).as_array().unwrap_or_else(|| panic!("GetBlobs: not a list: {}", c.text));
    assert_eq!(blobs.len(), 1, "{}", c.text);
    assert_eq!(blobs[0]["sha"], readme_blob.as_str(), "{}", c.text);
    let c = p.call("GetBlobs", json!({"owner": alice, "repo": name, "shas": readme_blob})).await;
    fails(&c, "invalid_arguments", None);
    let message = c.json["error"]["message"].as_str().unwrap_or("");
    let expected = format!(
        "GetBlobs is not an operation of the forge work (Gitea {}); it exists on home (Forgejo): pass forge with one of them",
        p.gitea_version
    );
    assert!(message.contains(&expected), "{message}");

    // Deleted through the server, each on its forge (confirmed, as an agent would once asked).
    for (owner, args, fixture, forge) in [
        (alice, json!({"owner": alice, "repo": name, "forge": "work"}), &p.on_gitea, "work"),
        (bob, json!({"owner": bob, "repo": name}), &p.on_forgejo, "home"),
    ] {
        let c = p.call("repoDelete", args).await;
        ok(&c, 204);
        assert_eq!(c.json["forge"], forge, "{}", c.text);
        fixture.gone(owner, &name);
    }
    assert_eq!(p.gitea.get(&format!("/repos/{alice}/{name}")).await.0, 404);
    assert_eq!(p.forgejo_admin.get(&format!("/repos/{bob}/{name}")).await.0, 404);
    p.server.stop().await;
}

/// An operation only Forgejo has, called on the Gitea's profile — by default and with `forge`,
/// as its tool and through the call tool — is refused by the server, saying where it exists;
/// sent with the Forgejo's profile it is answered there, as that forge's user. And the reverse:
/// one only Gitea has, on the Forgejo's profile.
#[tokio::test]
#[ignore = "needs a Forgejo and a Gitea: AEGIS_E2E_URL, AEGIS_E2E_TOKEN, AEGIS_E2E_TOKEN_2, AEGIS_E2E_URL_B, AEGIS_E2E_TOKEN_B"]
async fn e2e_an_operation_only_forgejo_has_is_refused_on_the_gitea_profile_saying_where_it_exists() {
    let p = Pair::start().await;
    let refused = |c: &Called, op: &str, at: &str, elsewhere: &str| {
        fails(c, "invalid_arguments", None);
        let message = c.json["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(&format!("{op} is not an operation of the forge {at}")), "{message}");
        assert!(
            message.contains(&format!("it exists on {elsewhere}: pass forge with one of them")),
            "{message}"
        );
    };
    let only_forgejo = "userListBlockedUsers";
    let through = |forge: &str| json!({"operation_id": only_forgejo, "arguments": {}, "forge": forge});
    let at_work = format!("work (Gitea {})", p.gitea_version);
    for (tool, args) in [
        (only_forgejo, json!({})),
        (only_forgejo, json!({"forge": "work"})),
        ("gitea_call_operation", through("work")),
    ] {
        refused(&p.call(tool, args).await, only_forgejo, &at_work, "home (Forgejo)");
    }
    for (tool, args) in [(only_forgejo, json!({"forge": "home"})), ("gitea_call_operation", through("home"))]
    {
        let c = p.call(tool, args).await;
        from(&c, "home", &p.home_login);
        assert!(ok(&c, 200).is_array(), "{}", c.text);
    }
    // The reverse: Gitea's list of blocked users, by default on the Gitea, refused on the Forgejo.
    let c = p.call("userListBlocks", json!({})).await;
    from(&c, "work", &p.work_login);
    assert!(ok(&c, 200).is_array(), "{}", c.text);
    let c = p.call("userListBlocks", json!({"forge": "home"})).await;
    refused(&c, "userListBlocks", "home (Forgejo ", "work (Gitea)");
    p.server.stop().await;
}
