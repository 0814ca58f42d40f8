//! Routing: every spec operation is reachable, and the encoding rules of chi hold.

use crate::common;

use common::{TOKEN, get, send};
use fake_forge::{FakeForge, Flavor, Options};
use serde_json::Value;

const GITEA: &[u8] = include_bytes!("../../../specs/gitea-1.27.0.swagger.json");
const FORGEJO: &[u8] = include_bytes!("../../../specs/forgejo-16.0.1.swagger.json");

/// A simple value for a path parameter: an enum's first value, `1` for integers, else `x`.
fn sample(param: &Value) -> String {
    if let Some(first) = param["enum"].as_array().and_then(|e| e.first()) {
        return first.as_str().unwrap_or("x").to_string();
    }
    match param["type"].as_str() {
        Some("integer") | Some("number") => "1".into(),
        _ => "x".into(),
    }
}

async fn sweep(flavor: Flavor, spec: &[u8]) {
    let spec: Value = serde_json::from_slice(spec).unwrap();
    let forge = FakeForge::start(Options { flavor, ..Options::default() }).await;
    let auth = format!("token {TOKEN}");
    let mut expected = Vec::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let mut concrete = path.clone();
            for p in op["parameters"].as_array().into_iter().flatten() {
                if p["in"] == "path" {
                    let name = p["name"].as_str().unwrap();
                    concrete = concrete.replace(&format!("{{{name}}}"), &sample(p));
                }
            }
            assert!(!concrete.contains('{'), "unsubstituted parameter in {concrete}");
            let method = method.to_ascii_uppercase();
            let target = format!("/api/v1{concrete}");
            let body: &[u8] = if method == "GET" { b"" } else { b"{}" };
            let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
            let resp = send(forge.addr(), &method, &target, &headers, body).await;
            assert_ne!(resp.status, 405, "{method} {target}");
            expected.push((method, target, op["operationId"].as_str().unwrap().to_string()));
        }
    }
    let recorded = forge.requests();
    assert_eq!(recorded.len(), expected.len());
    let mut wrong = Vec::new();
    for (r, (method, target, id)) in recorded.iter().zip(&expected) {
        assert_eq!((&r.method, &r.raw_path), (method, target));
        if r.operation_id.as_deref() != Some(id.as_str()) {
            wrong.push(format!("{method} {target}: expected {id}, routed to {:?}", r.operation_id));
        }
    }
    assert!(wrong.is_empty(), "{} misrouted:\n{}", wrong.len(), wrong.join("\n"));
    assert!(expected.len() > 450, "only {} operations", expected.len());
}

#[tokio::test]
async fn every_gitea_operation_is_routed() {
    sweep(Flavor::Gitea, GITEA).await;
}

#[tokio::test]
async fn every_forgejo_operation_is_routed() {
    sweep(Flavor::Forgejo, FORGEJO).await;
}

/// Sends GET `path` and returns the recorded operation and parameters.
async fn routed(forge: &FakeForge, path: &str) -> (u16, Option<String>, Vec<(String, String)>) {
    forge.clear_requests();
    let resp = get(forge.addr(), path).await;
    let r = forge.requests().pop().expect("recorded");
    (resp.status, r.operation_id, r.path_params)
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> &'a str {
    params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or("<missing>")
}

#[tokio::test]
async fn encoded_slashes_and_wildcards() {
    let forge = FakeForge::start(Options::default()).await;

    let (_, op, p) = routed(&forge, "/api/v1/repos/o/r/releases/tags/rel%2F1.0").await;
    assert_eq!(op.as_deref(), Some("repoGetReleaseByTag"));
    assert_eq!(param(&p, "tag"), "rel/1.0");
    let r = forge.requests().pop().unwrap();
    assert_eq!(r.raw_path, "/api/v1/repos/o/r/releases/tags/rel%2F1.0");

    let (status, op, _) = routed(&forge, "/api/v1/repos/o/r/releases/tags/rel/1.0").await;
    assert_eq!((status, op), (404, None));

    let (_, op, p) = routed(&forge, "/api/v1/repos/o/r/contents/docs/sub/a%20b.md").await;
    assert_eq!(op.as_deref(), Some("repoGetContents"));
    assert_eq!(param(&p, "filepath"), "docs/sub/a b.md");

    let (_, op, p) = routed(&forge, "/api/v1/repos/o/r/branches/feature/x").await;
    assert_eq!(op.as_deref(), Some("repoGetBranch"));
    assert_eq!(param(&p, "branch"), "feature/x");

    let (_, op, p) = routed(&forge, "/api/v1/repos/o/r/pulls/main/feature/x").await;
    assert_eq!(op.as_deref(), Some("repoGetPullRequestByBaseHead"));
    assert_eq!((param(&p, "base"), param(&p, "head")), ("main", "feature/x"));

    let (_, op, p) = routed(&forge, "/api/v1/repos/o/r/git/commits/abc.diff").await;
    assert_eq!(op.as_deref(), Some("repoDownloadCommitDiffOrPatch"));
    assert_eq!((param(&p, "sha"), param(&p, "diffType")), ("abc", "diff"));

    let (_, op, _) = routed(&forge, "/api/v1/repos/o/r/git/commits/abc").await;
    assert_eq!(op.as_deref(), Some("repoGetSingleCommit"));

    let (_, op, p) = routed(&forge, "/api/v1/repos/o/r/pulls/7.patch").await;
    assert_eq!(op.as_deref(), Some("repoDownloadPullDiffOrPatch"));
    assert_eq!(param(&p, "index"), "7");

    let (_, op, _) = routed(&forge, "/api/v1/repos/o/r/issues/comments/5").await;
    assert_eq!(op.as_deref(), Some("issueGetComment"));

    // Gitea 1.27: commit statuses take a wildcard ref followed by a static segment.
    let (_, op, p) = routed(&forge, "/api/v1/repos/o/r/commits/release/v1/status").await;
    assert_eq!(op.as_deref(), Some("repoGetCombinedStatusByRef"));
    assert_eq!(param(&p, "ref"), "release/v1");
}

#[tokio::test]
async fn forgejo_single_segment_where_gitea_has_wildcards() {
    let forge = FakeForge::start(Options { flavor: Flavor::Forgejo, ..Options::default() }).await;
    let (status, op, _) = routed(&forge, "/api/v1/repos/o/r/commits/release/v1/status").await;
    assert_eq!((status, op), (404, None));
    let (_, op, p) = routed(&forge, "/api/v1/repos/o/r/commits/release%2Fv1/status").await;
    assert_eq!(op.as_deref(), Some("repoGetCombinedStatusByRef"));
    assert_eq!(param(&p, "ref"), "release/v1");
}

#[tokio::test]
async fn empty_segments_unknown_paths_and_methods() {
    let forge = FakeForge::start(Options::default()).await;
    for path in [
        "/api/v1/repos/o/r/issues/",
        "/api/v1/repos//r",
        "/api/v1/repos/o/r/branches/feature//x",
        "/api/v1//version",
        "/api/v1/nope",
        "/nope",
    ] {
        let resp = get(forge.addr(), path).await;
        assert_eq!(resp.status, 404, "{path}");
        let body = resp.json();
        assert_eq!(body["message"], "not found", "{path}");
        assert_eq!(body["url"], "https://forge.example.invalid/api/swagger");
        assert!(body["errors"].is_null());
        assert_eq!(forge.requests().last().unwrap().operation_id, None);
    }
    let auth = format!("token {TOKEN}");
    let resp = send(forge.addr(), "PATCH", "/api/v1/version", &[("Authorization", &auth)], b"").await;
    assert_eq!(resp.status, 405);
    assert!(resp.body.is_empty());
}

#[tokio::test]
async fn recorded_request_is_exact() {
    let forge = FakeForge::start(Options::default()).await;
    let auth = format!("token {TOKEN}");
    let headers = [("Authorization", auth.as_str()), ("X-Custom", "é")];
    send(forge.addr(), "POST", "/api/v1/markdown?a=1&b=x+y&a=%2F", &headers, b"{\"text\":\"hi\"}").await;
    let r = forge.requests().pop().unwrap();
    assert_eq!(r.method, "POST");
    assert_eq!(r.raw_query.as_deref(), Some("a=1&b=x+y&a=%2F"));
    assert_eq!(
        r.query_pairs(),
        vec![("a".into(), "1".into()), ("b".into(), "x y".into()), ("a".into(), "/".into())]
    );
    assert_eq!(r.header("authorization"), Some(auth.as_str()));
    assert_eq!(r.header("x-custom"), Some("é"));
    assert!(r.headers.iter().all(|(n, _)| n == &n.to_ascii_lowercase()));
    assert_eq!(r.json_body().unwrap()["text"], "hi");
    assert_eq!(r.operation_id.as_deref(), Some("renderMarkdown"));

    send(forge.addr(), "GET", "/api/v1/version", &[], b"").await;
    assert_eq!(forge.requests().pop().unwrap().raw_query, None);
}
