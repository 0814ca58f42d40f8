//! Collaborators and assignees as Gitea answers them: only a repository's administrators add
//! and remove collaborators, any signed-in reader lists them and the assignees (the owner and
//! those who may write), and nobody without a token.

use crate::common;

use common::{TOKEN, get, send};
use fake_forge::{FakeForge, Options};
use serde_json::{Value, json};

fn logins(v: &Value) -> Vec<&str> {
    v.as_array().unwrap().iter().map(|u| u["login"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn collaborators_are_added_by_the_owner_and_the_assignees_are_those_who_may_write() {
    let forge = FakeForge::start(Options {
        users: vec![
            (TOKEN.into(), "alice".into()),
            ("tok-carol".into(), "carol".into()),
            ("tok-dave".into(), "dave".into()),
            ("tok-mallory".into(), "mallory".into()),
        ],
        ..Options::default()
    })
    .await;
    forge.seed_repo("alice", "demo");
    let a = forge.addr();
    let put = |who: &'static str, token: &'static str, permission: Value| async move {
        let auth = format!("token {token}");
        let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        let body = json!({"permission": permission}).to_string();
        send(a, "PUT", &format!("/api/v1/repos/alice/demo/collaborators/{who}"), &headers, body.as_bytes())
            .await
    };
    assert_eq!(put("carol", TOKEN, json!("write")).await.status, 204);
    assert_eq!(put("Dave", TOKEN, json!("read")).await.status, 204);
    // Not an administrator of the repository; a user who does not exist; a permission that is not one.
    assert_eq!(put("mallory", "tok-mallory", json!("admin")).await.status, 403);
    assert_eq!(put("nobody", TOKEN, json!("write")).await.status, 422);
    assert_eq!(put("mallory", TOKEN, json!("owner")).await.status, 422);

    let list = get(a, "/api/v1/repos/alice/demo/collaborators").await;
    assert_eq!(list.header("x-total-count"), Some("2"));
    assert_eq!(logins(&list.json()), ["carol", "dave"]);
    let assignees = get(a, "/api/v1/repos/alice/demo/assignees").await.json();
    assert_eq!(logins(&assignees), ["alice", "carol"]);
    assert_eq!(get(a, "/api/v1/repos/alice/demo/collaborators/DAVE").await.status, 204);
    assert_eq!(get(a, "/api/v1/repos/alice/demo/collaborators/mallory").await.status, 404);

    // Any signed-in reader may look; nobody without a token.
    let as_mallory = [("Authorization", "token tok-mallory")];
    let seen = send(a, "GET", "/api/v1/repos/alice/demo/assignees", &as_mallory, b"").await;
    assert_eq!(logins(&seen.json()), ["alice", "carol"]);
    for path in ["/api/v1/repos/alice/demo/assignees", "/api/v1/repos/alice/demo/collaborators"] {
        assert_eq!(send(a, "GET", path, &[], b"").await.status, 401, "{path}");
    }

    // Write taken back, then the collaborator removed.
    assert_eq!(put("carol", TOKEN, json!("read")).await.status, 204);
    assert_eq!(logins(&get(a, "/api/v1/repos/alice/demo/assignees").await.json()), ["alice"]);
    let auth = format!("token {TOKEN}");
    let headers = [("Authorization", auth.as_str())];
    let gone = send(a, "DELETE", "/api/v1/repos/alice/demo/collaborators/carol", &headers, b"").await;
    assert_eq!(gone.status, 204);
    assert_eq!(logins(&get(a, "/api/v1/repos/alice/demo/collaborators").await.json()), ["dave"]);
    // A test's seed does what the route does.
    forge.seed_collaborator("alice", "demo", "mallory", "admin");
    assert_eq!(logins(&get(a, "/api/v1/repos/alice/demo/assignees").await.json()), ["alice", "mallory"]);
}
