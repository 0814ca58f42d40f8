//! The stateful model, authentication, pagination and the spec-driven fallback.

use crate::common;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::{TOKEN, get, json, send};
use fake_forge::{FakeForge, Flavor, Options, Visibility};
use serde_json::json;

const ROOT: &str = "https://forge.example.invalid/";

#[tokio::test]
async fn auth_rules() {
    let forge = FakeForge::start(Options::default()).await;
    let a = forge.addr();
    assert_eq!(send(a, "GET", "/api/v1/version", &[], b"").await.json(), json!({"version": "1.27.0"}));
    assert_eq!(send(a, "GET", "/api/v1/repos/x/y/labels", &[], b"").await.status, 200);

    let anon_post = send(a, "POST", "/api/v1/user/repos", &[], b"{}").await;
    assert_eq!(anon_post.status, 401);
    assert_eq!(anon_post.json()["message"], "token is required");
    assert_eq!(send(a, "GET", "/api/v1/user", &[], b"").await.status, 401);

    let bad = send(a, "GET", "/api/v1/user", &[("Authorization", "token nope")], b"").await;
    assert_eq!(bad.status, 401);
    assert!(bad.header("content-type").unwrap().starts_with("application/json"));
    assert_eq!(bad.json()["url"], format!("{ROOT}api/swagger"));

    for auth in [format!("Bearer {TOKEN}"), format!("token {TOKEN}"), format!("TOKEN {TOKEN}")] {
        let me = send(a, "GET", "/api/v1/user", &[("Authorization", &auth)], b"").await;
        assert_eq!(me.status, 200, "{auth}");
        let me = me.json();
        assert_eq!(me["login"], "alice");
        assert_eq!(me["is_admin"], false);
        assert!(me["id"].as_i64().unwrap() > 0);
    }
}

#[tokio::test]
async fn forgejo_version_and_admins() {
    let forge = FakeForge::start(Options {
        flavor: Flavor::Forgejo,
        users: vec![("t-root".into(), "root".into())],
        admins: vec!["root".into()],
        ..Options::default()
    })
    .await;
    let v = send(forge.addr(), "GET", "/api/v1/version", &[], b"").await.json();
    assert_eq!(v["version"], "16.0.1+gitea-1.22.0");
    let me = send(forge.addr(), "GET", "/api/v1/user", &[("Authorization", "token t-root")], b"").await;
    assert_eq!(me.json()["is_admin"], true);
}

#[tokio::test]
async fn a_bad_token_is_refused_even_on_version_which_answers_without_one() {
    let bad = [("Authorization", "token nope")];
    let gitea = FakeForge::start(Options::default()).await;
    let a = gitea.addr();
    assert_eq!(send(a, "GET", "/api/v1/version", &bad, b"").await.status, 401);
    let v = send(a, "GET", "/api/v1/version", &[], b"").await;
    assert_eq!((v.status, v.json()["version"].clone()), (200, json!("1.27.0")));
    assert_eq!(send(a, "GET", "/api/forgejo/v1/version", &[], b"").await.status, 404);

    let forgejo = FakeForge::start(Options { flavor: Flavor::Forgejo, ..Options::default() }).await;
    let a = forgejo.addr();
    assert_eq!(send(a, "GET", "/api/v1/version", &bad, b"").await.status, 401);
    assert_eq!(send(a, "GET", "/api/forgejo/v1/version", &bad, b"").await.status, 401);
    for path in ["/api/v1/version", "/api/forgejo/v1/version"] {
        let v = send(a, "GET", path, &[], b"").await;
        assert_eq!((v.status, v.json()["version"].clone()), (200, json!("16.0.1+gitea-1.22.0")), "{path}");
    }
}

fn basic(login: &str, password: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{login}:{password}")))
}

#[tokio::test]
async fn basic_auth_signs_in_with_the_password_and_a_wrong_one_is_refused_like_gitea() {
    let forge = FakeForge::start(Options::default()).await;
    let a = forge.addr();
    let ok = basic("alice", fake_forge::ALICE_PASSWORD);
    let me = send(a, "GET", "/api/v1/user", &[("Authorization", &ok)], b"").await;
    assert_eq!((me.status, me.json()["login"].clone()), (200, json!("alice")));
    let wrong = send(a, "GET", "/api/v1/user", &[("Authorization", &basic("alice", "nope"))], b"").await;
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.json()["message"], "user does not exist [uid: 1, name: alice]");
    let unknown = send(a, "GET", "/api/v1/version", &[("Authorization", &basic("zed", "x"))], b"").await;
    assert_eq!(unknown.status, 401);
    assert_eq!(unknown.json()["message"], "user does not exist [uid: 0, name: zed]");
}

#[tokio::test]
async fn access_tokens_are_created_and_listed_only_over_basic_auth() {
    let forge = FakeForge::start(Options::default()).await;
    let a = forge.addr();
    let ok = basic("alice", fake_forge::ALICE_PASSWORD);
    let token = format!("token {TOKEN}");
    let body = br#"{"name": "ci", "scopes": ["read:repository"]}"#;
    let refused = send(a, "POST", "/api/v1/users/alice/tokens", &[("Authorization", &token)], body).await;
    assert_eq!((refused.status, refused.json()["message"].clone()), (401, json!("auth required")));
    let refused = send(a, "GET", "/api/v1/users/alice/tokens", &[("Authorization", &token)], b"").await;
    assert_eq!(refused.status, 401);
    let anonymous = send(a, "GET", "/api/v1/users/alice/tokens", &[], b"").await;
    assert_eq!(anonymous.status, 403);
    assert_eq!(anonymous.json()["message"], "doer should be the site admin or be same as the contextUser");

    let created = send(a, "POST", "/api/v1/users/alice/tokens", &[("Authorization", &ok)], body).await;
    assert_eq!(created.status, 201);
    let sha1 = created.json()["sha1"].as_str().unwrap().to_owned();
    assert_eq!(sha1.len(), 40);
    assert_eq!(created.json()["token_last_eight"], sha1[32..]);
    let again = send(a, "POST", "/api/v1/users/alice/tokens", &[("Authorization", &ok)], body).await;
    assert_eq!(
        (again.status, again.json()["message"].clone()),
        (400, json!("access token name has been used already"))
    );
    let no_scope =
        send(a, "POST", "/api/v1/users/alice/tokens", &[("Authorization", &ok)], br#"{"name": "x"}"#).await;
    assert_eq!(
        (no_scope.status, no_scope.json()["message"].clone()),
        (400, json!("access token must have a scope"))
    );
    let list = send(a, "GET", "/api/v1/users/alice/tokens", &[("Authorization", &ok)], b"").await;
    assert_eq!(list.status, 200);
    assert_eq!(list.json()[0]["name"], "ci");
    assert_eq!(list.json()[0]["sha1"], "", "the secret is shown once");
    let gone = send(a, "DELETE", "/api/v1/users/alice/tokens/ci", &[("Authorization", &ok)], b"").await;
    assert_eq!(gone.status, 204);
}

#[tokio::test]
async fn sudo_lets_an_admin_act_as_another_user_and_refuses_anyone_else() {
    let forge = FakeForge::start(Options {
        users: vec![("t-root".into(), "root".into()), (TOKEN.into(), "alice".into())],
        admins: vec!["root".into()],
        ..Options::default()
    })
    .await;
    let a = forge.addr();
    let root = [("Authorization", "token t-root"), ("Sudo", "ALICE")];
    let me = send(a, "GET", "/api/v1/user", &root, b"").await;
    assert_eq!((me.status, me.json()["login"].clone()), (200, json!("alice")));
    let me = send(a, "GET", "/api/v1/user?sudo=alice", &[("Authorization", "token t-root")], b"").await;
    assert_eq!(me.json()["login"], "alice");
    let nobody =
        send(a, "GET", "/api/v1/user", &[("Authorization", "token t-root"), ("Sudo", "zed")], b"").await;
    assert_eq!(
        (nobody.status, nobody.json()["message"].clone()),
        (404, json!("The target couldn't be found."))
    );
    let token = format!("token {TOKEN}");
    for headers in [vec![("Authorization", token.as_str()), ("Sudo", "root")], vec![("Sudo", "root")]] {
        let refused = send(a, "GET", "/api/v1/version", &headers, b"").await;
        assert_eq!(refused.status, 403, "{headers:?}");
        assert_eq!(refused.json(), json!({"message": "Only administrators allowed to sudo."}));
    }
}

fn link_of(resp: &common::Response) -> String {
    resp.header("link").unwrap_or("").to_string()
}

#[tokio::test]
async fn issue_pagination_like_gitea() {
    let forge = FakeForge::start(Options::default()).await;
    forge.seed_issues("alice", "demo", 45);
    let a = forge.addr();

    let p1 = get(a, "/api/v1/repos/alice/demo/issues?state=open&limit=20").await;
    assert_eq!(p1.status, 200);
    assert_eq!(p1.header("x-total-count"), Some("45"));
    assert_eq!(p1.header("access-control-expose-headers"), Some("X-Total-Count, Link"));
    assert_eq!(p1.json().as_array().unwrap().len(), 20);
    let base = format!("{ROOT}api/v1/repos/alice/demo/issues");
    assert_eq!(
        link_of(&p1),
        format!(
            "<{base}?limit=20&page=2&state=open>; rel=\"next\",<{base}?limit=20&page=3&state=open>; rel=\"last\""
        )
    );

    let p3 = get(a, "/api/v1/repos/alice/demo/issues?state=open&limit=20&page=3").await;
    let items = p3.json();
    assert_eq!(items.as_array().unwrap().len(), 5);
    assert_eq!(items[4]["title"], "issue 1", "newest first");
    let link = link_of(&p3);
    assert!(link.contains("rel=\"first\"") && link.contains("rel=\"prev\""), "{link}");
    assert!(!link.contains("rel=\"next\"") && !link.contains("rel=\"last\""), "{link}");
    assert!(link.contains(&format!("<{base}?limit=20&page=2&state=open>; rel=\"prev\"")), "{link}");

    // Defaults: limit 30, capped at 50.
    let d = get(a, "/api/v1/repos/alice/demo/issues").await;
    assert_eq!(d.json().as_array().unwrap().len(), 30);
    let capped = get(a, "/api/v1/repos/alice/demo/issues?limit=500").await;
    assert_eq!(capped.json().as_array().unwrap().len(), 45);
    assert_eq!(capped.header("link"), None);
    assert_eq!(capped.header("access-control-expose-headers"), Some("X-Total-Count"));

    let closed = get(a, "/api/v1/repos/alice/demo/issues?state=closed").await;
    assert_eq!(closed.header("x-total-count"), Some("0"));
}

#[tokio::test]
async fn repos_contents_branches() {
    let forge = FakeForge::start(Options::default()).await;
    let a = forge.addr();
    let created = json(a, "POST", "/api/v1/user/repos", json!({"name": "demo", "auto_init": true})).await;
    assert_eq!(created.status, 201);
    let repo = created.json();
    assert_eq!(repo["full_name"], "alice/demo");
    assert_eq!(repo["owner"]["login"], "alice");
    assert_eq!(repo["default_branch"], "main");
    assert_eq!(repo["html_url"], format!("{ROOT}alice/demo"));
    let dup = json(a, "POST", "/api/v1/user/repos", json!({"name": "demo"})).await;
    assert_eq!(dup.status, 409);
    assert_eq!(dup.json()["message"], "The repository with the same name already exists.");
    assert_eq!(get(a, "/api/v1/repos/alice/demo").await.status, 200);
    assert_eq!(get(a, "/api/v1/repos/alice/absent").await.status, 404);

    // Create, read, update, delete a file with a space in a nested path.
    let url = "/api/v1/repos/alice/demo/contents/docs/sub/a%20b.md";
    let content = STANDARD.encode("hello\n");
    let c = json(a, "POST", url, json!({"content": content, "message": "add"})).await;
    assert_eq!(c.status, 201);
    let c = c.json();
    assert_eq!(c["content"]["path"], "docs/sub/a b.md");
    assert_eq!(c["content"]["name"], "a b.md");
    assert_eq!(c["content"]["type"], "file");
    assert_eq!(c["content"]["encoding"], "base64");
    let sha = c["content"]["sha"].as_str().unwrap().to_string();
    assert_eq!(c["commit"]["sha"].as_str().unwrap().len(), 40);
    assert_eq!(json(a, "POST", url, json!({"content": content})).await.status, 422);

    let g = get(a, url).await.json();
    assert_eq!(STANDARD.decode(g["content"].as_str().unwrap()).unwrap(), b"hello\n");
    let dir = get(a, "/api/v1/repos/alice/demo/contents/docs").await.json();
    assert_eq!(dir[0]["type"], "dir");
    assert_eq!(dir[0]["path"], "docs/sub");
    let root = get(a, "/api/v1/repos/alice/demo/contents").await.json();
    let names: Vec<&str> = root.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["README.md", "docs"]);

    let raw = get(a, "/api/v1/repos/alice/demo/raw/docs/sub/a%20b.md").await;
    assert_eq!(raw.body, b"hello\n");
    assert_eq!(raw.header("content-type"), Some("text/plain; charset=utf-8"));

    let stale = json(a, "PUT", url, json!({"content": STANDARD.encode("x"), "sha": "0000"})).await;
    assert_eq!(stale.status, 422);
    let u = json(a, "PUT", url, json!({"content": STANDARD.encode("v2"), "sha": sha})).await;
    assert_eq!(u.status, 200);
    let new_sha = u.json()["content"]["sha"].as_str().unwrap().to_string();
    assert_ne!(new_sha, sha);

    // Branches: a slash in the name travels as a literal '/'.
    let b = json(
        a,
        "POST",
        "/api/v1/repos/alice/demo/branches",
        json!({"new_branch_name": "feature/x", "old_ref_name": "main"}),
    )
    .await;
    assert_eq!(b.status, 201);
    assert_eq!(b.json()["name"], "feature/x");
    assert!(b.json()["commit"]["id"].is_string());
    assert_eq!(
        json(a, "POST", "/api/v1/repos/alice/demo/branches", json!({"new_branch_name": "feature/x"}))
            .await
            .status,
        409
    );
    assert_eq!(get(a, "/api/v1/repos/alice/demo/branches/feature/x").await.json()["name"], "feature/x");
    let list = get(a, "/api/v1/repos/alice/demo/branches").await;
    assert_eq!(list.header("x-total-count"), Some("2"));
    // The file written on main is visible on the branch, and `ref` selects the branch.
    let on_branch = get(a, "/api/v1/repos/alice/demo/contents/docs/sub/a%20b.md?ref=feature/x").await;
    assert_eq!(on_branch.status, 200);
    let w = json(
        a,
        "POST",
        "/api/v1/repos/alice/demo/contents/only.txt",
        json!({"content": STANDARD.encode("b"), "branch": "feature/x"}),
    )
    .await;
    assert_eq!(w.status, 201);
    assert_eq!(get(a, "/api/v1/repos/alice/demo/contents/only.txt").await.status, 404);
    assert_eq!(get(a, "/api/v1/repos/alice/demo/contents/only.txt?ref=feature%2Fx").await.status, 200);
    assert_eq!(get(a, "/api/v1/repos/alice/demo/raw/feature/x/only.txt").await.body, b"b");

    let auth = format!("token {TOKEN}");
    let h = [("Authorization", auth.as_str())];
    assert_eq!(send(a, "DELETE", "/api/v1/repos/alice/demo/branches/feature/x", &h, b"").await.status, 204);
    assert_eq!(get(a, "/api/v1/repos/alice/demo/branches/feature/x").await.status, 404);
    assert_eq!(send(a, "DELETE", "/api/v1/repos/alice/demo/branches/main", &h, b"").await.status, 403);

    let d = json(a, "DELETE", url, json!({"sha": new_sha})).await;
    assert_eq!(d.status, 200);
    assert!(d.json()["content"].is_null());
    assert_eq!(get(a, url).await.status, 404);

    assert_eq!(send(a, "DELETE", "/api/v1/repos/alice/demo", &h, b"").await.status, 204);
    assert_eq!(get(a, "/api/v1/repos/alice/demo").await.status, 404);
}

#[tokio::test]
async fn put_without_sha_differs_by_flavor() {
    for (flavor, expected) in [(Flavor::Gitea, 201), (Flavor::Forgejo, 422)] {
        let forge = FakeForge::start(Options { flavor, ..Options::default() }).await;
        forge.seed_repo("alice", "demo");
        let r = json(
            forge.addr(),
            "PUT",
            "/api/v1/repos/alice/demo/contents/new.txt",
            json!({"content": "aGk="}),
        )
        .await;
        assert_eq!(r.status, expected, "{flavor:?}");
    }
}

#[tokio::test]
async fn releases_and_tags() {
    let forge = FakeForge::start(Options::default()).await;
    forge.seed_repo("alice", "demo");
    let a = forge.addr();
    let r =
        json(a, "POST", "/api/v1/repos/alice/demo/releases", json!({"tag_name": "rel/1.0", "name": "One"}))
            .await;
    assert_eq!(r.status, 201);
    let id = r.json()["id"].as_i64().unwrap();
    assert_eq!(
        json(a, "POST", "/api/v1/repos/alice/demo/releases", json!({"tag_name": "rel/1.0"})).await.status,
        409
    );

    let by_tag = get(a, "/api/v1/repos/alice/demo/releases/tags/rel%2F1.0").await;
    assert_eq!(by_tag.status, 200);
    assert_eq!(by_tag.json()["id"], id);
    assert_eq!(get(a, "/api/v1/repos/alice/demo/releases/tags/rel/1.0").await.status, 404);
    assert_eq!(get(a, &format!("/api/v1/repos/alice/demo/releases/{id}")).await.json()["name"], "One");

    let tag = get(a, "/api/v1/repos/alice/demo/tags/rel/1.0").await;
    assert_eq!(tag.status, 200);
    assert_eq!(tag.json()["name"], "rel/1.0");
    let tags = get(a, "/api/v1/repos/alice/demo/tags").await;
    assert_eq!(tags.header("x-total-count"), Some("1"));
    assert_eq!(tags.header("link"), None);
    assert_eq!(get(a, "/api/v1/repos/alice/demo/releases").await.json()[0]["tag_name"], "rel/1.0");
}

#[tokio::test]
async fn issues_and_attachments() {
    let forge = FakeForge::start(Options::default()).await;
    forge.seed_repo("alice", "demo");
    let a = forge.addr();
    let i =
        json(a, "POST", "/api/v1/repos/alice/demo/issues", json!({"title": "Bug", "body": "it broke"})).await;
    assert_eq!(i.status, 201);
    let i = i.json();
    assert_eq!(
        (i["number"].clone(), i["state"].clone(), i["user"]["login"].clone()),
        (json!(1), json!("open"), json!("alice"))
    );
    assert_eq!(i["html_url"], format!("{ROOT}alice/demo/issues/1"));
    assert_eq!(get(a, "/api/v1/repos/alice/demo/issues/1").await.json()["title"], "Bug");
    assert_eq!(get(a, "/api/v1/repos/alice/demo/issues/2").await.status, 404);

    let body = b"--BOUND\r\nContent-Disposition: form-data; name=\"attachment\"; filename=\"log.txt\"\r\n\
Content-Type: text/plain\r\n\r\nline one\r\n--BOUND--\r\n";
    let auth = format!("token {TOKEN}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "multipart/form-data; boundary=BOUND")];
    let up =
        send(a, "POST", "/api/v1/repos/alice/demo/issues/1/assets?name=renamed.txt", &headers, body).await;
    assert_eq!(up.status, 201);
    let att = up.json();
    assert_eq!(att["name"], "renamed.txt");
    assert_eq!(att["size"], 8);
    let uuid = att["uuid"].as_str().unwrap();
    assert_eq!(att["browser_download_url"], format!("{ROOT}attachments/{uuid}"));
    assert_eq!(forge.requests().last().unwrap().body, body.to_vec());

    let list = get(a, "/api/v1/repos/alice/demo/issues/1/assets").await.json();
    assert_eq!(list.as_array().unwrap().len(), 1);
    let one = get(a, &format!("/api/v1/repos/alice/demo/issues/1/assets/{}", att["id"])).await;
    assert_eq!(one.json()["uuid"], uuid);
    let download = send(a, "GET", &format!("/attachments/{uuid}"), &[], b"").await;
    assert_eq!(download.status, 200);
    assert_eq!(download.body, b"line one");
    assert_eq!(download.header("content-type"), Some("text/plain"));

    let no_file =
        send(a, "POST", "/api/v1/repos/alice/demo/issues/1/assets", &headers, b"--BOUND--\r\n").await;
    assert_eq!(no_file.status, 400);
}

#[tokio::test]
async fn fallback_follows_the_spec() {
    let forge = FakeForge::start(Options::default()).await;
    let a = forge.addr();
    let list = get(a, "/api/v1/repos/o/r/labels").await;
    assert_eq!((list.status, list.text()), (200, "[]".to_string()));
    assert_eq!(list.header("x-total-count"), Some("0"));
    assert_eq!(list.header("content-type"), Some("application/json;charset=utf-8"));

    let obj = get(a, "/api/v1/repos/o/r/labels/1").await;
    assert_eq!((obj.status, obj.text()), (200, "{}".to_string()));
    assert_eq!(obj.header("x-total-count"), None);

    let created = json(a, "POST", "/api/v1/repos/o/r/labels", json!({"name": "x", "color": "fff"})).await;
    assert_eq!(created.status, 201);

    let auth = format!("token {TOKEN}");
    let deleted = send(a, "DELETE", "/api/v1/repos/o/r/labels/1", &[("Authorization", &auth)], b"").await;
    assert_eq!(deleted.status, 204);
    assert!(deleted.body.is_empty());
    assert_eq!(deleted.header("content-type"), None);

    let media = get(a, "/api/v1/repos/o/r/media/a/b.bin").await;
    assert_eq!(media.body, b"\x00\x01\x02\x03");
    assert_eq!(media.header("content-type"), Some("application/octet-stream"));

    let key = get(a, "/api/v1/signing-key.gpg").await;
    assert_eq!(
        (key.text(), key.header("content-type")),
        ("ok".to_string(), Some("text/plain; charset=utf-8"))
    );
}

/// Who sees what, as on the forges: a private repository (and every route under it, modelled
/// or not) is 404 to anyone but its owner, its collaborators and site admins, and left out of
/// their listings; a user's visibility shows on the profile, on `/user` and as
/// `owner.visibility`, and a public repository of a user the caller may not see is hidden too.
#[tokio::test]
async fn private_repositories_collaborators_and_user_visibility() {
    let forge = FakeForge::start(Options {
        users: vec![
            ("t-alice".into(), "alice".into()),
            ("t-bob".into(), "bob".into()),
            ("t-carol".into(), "carol".into()),
            ("t-root".into(), "root".into()),
        ],
        admins: vec!["root".into()],
        ..Options::default()
    })
    .await;
    forge.seed_private_repo("alice", "secret");
    forge.seed_issues("alice", "secret", 1);
    forge.seed_repo("alice", "open");
    forge.seed_collaborator("alice", "secret", "bob", "read");
    forge.seed_file("alice", "secret", "/docs/notes.md", b"private words\n");
    forge.seed_repo("dave", "quiet");
    forge.set_visibility("dave", Visibility::Limited);
    forge.seed_repo("erin", "hidden");
    forge.set_visibility("erin", Visibility::Private);
    let a = forge.addr();
    let as_ = |token: &'static str| async move {
        let auth = format!("token {token}");
        move |path: &'static str| {
            let auth = auth.clone();
            async move { send(a, "GET", path, &[("Authorization", &auth)], b"").await }
        }
    };
    let (alice, bob, carol, root) =
        (as_("t-alice").await, as_("t-bob").await, as_("t-carol").await, as_("t-root").await);
    let anon = |path: &'static str| async move { send(a, "GET", path, &[], b"").await };

    // The private repository, a modelled route and one the fallback answers.
    for path in [
        "/api/v1/repos/alice/secret",
        "/api/v1/repos/alice/secret/issues/1",
        "/api/v1/repos/alice/secret/labels",
    ] {
        assert_eq!(alice(path).await.status, 200, "{path}");
        assert_eq!(bob(path).await.status, 200, "the collaborator: {path}");
        assert_eq!(root(path).await.status, 200, "the admin: {path}");
        assert_eq!(carol(path).await.status, 404, "a stranger: {path}");
        assert_eq!(anon(path).await.status, 404, "the anonymous: {path}");
    }
    let raw = alice("/api/v1/repos/alice/secret/raw/docs/notes.md").await;
    assert_eq!((raw.status, raw.text()), (200, "private words\n".to_owned()));
    assert_eq!(carol("/api/v1/repos/alice/secret/raw/docs/notes.md").await.status, 404);
    let hidden_write = send(
        a,
        "POST",
        "/api/v1/repos/alice/secret/issues/1/comments",
        &[("Authorization", "token t-carol"), ("Content-Type", "application/json")],
        br#"{"body":"hi"}"#,
    )
    .await;
    assert_eq!(hidden_write.status, 404);
    let repo = alice("/api/v1/repos/alice/secret").await.json();
    assert_eq!((repo["private"].clone(), repo["internal"].clone()), (json!(true), json!(false)));
    assert_eq!(repo["owner"]["visibility"], "public");
    let id = repo["id"].as_i64().unwrap();
    let by_id = |token: &'static str| async move {
        let auth = format!("token {token}");
        send(a, "GET", &format!("/api/v1/repositories/{id}"), &[("Authorization", &auth)], b"").await.status
    };
    assert_eq!((by_id("t-bob").await, by_id("t-carol").await), (200, 404));

    // Listings show what the caller may see.
    let names = |v: serde_json::Value| -> Vec<String> {
        let list = v.get("data").cloned().unwrap_or(v);
        list.as_array().unwrap().iter().map(|r| r["full_name"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(names(carol("/api/v1/repos/search").await.json()), ["alice/open", "dave/quiet"]);
    assert_eq!(names(anon("/api/v1/repos/search").await.json()), ["alice/open"]);
    assert_eq!(names(bob("/api/v1/repos/search").await.json()), ["alice/secret", "alice/open", "dave/quiet"]);
    assert_eq!(names(bob("/api/v1/user/repos").await.json()), ["alice/secret"]);
    assert_eq!(names(root("/api/v1/repos/search").await.json()).len(), 4);
    assert_eq!(carol("/api/v1/repos/issues/search").await.json(), json!([]));
    assert_eq!(bob("/api/v1/repos/issues/search").await.json().as_array().unwrap().len(), 1);

    // Users: the profile, `/user` and `owner.visibility` say it; a limited user is seen by
    // signed-in users, a private one by itself and admins, and so are their public repositories.
    assert_eq!(carol("/api/v1/users/alice").await.json()["visibility"], "public");
    assert_eq!(carol("/api/v1/users/dave").await.json()["visibility"], "limited");
    assert_eq!(anon("/api/v1/users/dave").await.status, 404);
    assert_eq!(anon("/api/v1/repos/dave/quiet").await.status, 404);
    assert_eq!(carol("/api/v1/repos/dave/quiet").await.json()["owner"]["visibility"], "limited");
    assert_eq!(carol("/api/v1/users/erin").await.status, 404);
    assert_eq!(carol("/api/v1/repos/erin/hidden").await.status, 404);
    assert_eq!(root("/api/v1/users/erin").await.json()["visibility"], "private");
    assert_eq!(root("/api/v1/repos/erin/hidden").await.json()["owner"]["visibility"], "private");
    assert_eq!(carol("/api/v1/users/nobody").await.status, 404);
    forge.set_visibility("alice", Visibility::Private);
    assert_eq!(alice("/api/v1/user").await.json()["visibility"], "private");
    assert_eq!(alice("/api/v1/repos/alice/open").await.json()["owner"]["visibility"], "private");
    assert_eq!(carol("/api/v1/repos/alice/open").await.status, 404);
}
