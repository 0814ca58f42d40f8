//! The pipeline over stdio with a real MCP client (rmcp) against the recording fake forge:
//! one test per requirement of the call pipeline and the result envelope, named after it.

use crate::support;

use fake_forge::{Script, ScriptBody, ScriptedResponse};
use serde_json::{Value, json};
use std::time::Duration;
use support::{ALICE_TOKEN, Harness, Setup, assert_envelope};

fn respond(status: u16, headers: &[(&str, &str)], body: &[u8]) -> ScriptedResponse {
    ScriptedResponse {
        headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..ScriptedResponse::status(status).with_body(ScriptBody::Bytes(body.to_vec()))
    }
}

fn script(path: &str, response: ScriptedResponse) -> Script {
    Script { method: None, path: path.into(), times: usize::MAX, response }
}

#[tokio::test]
async fn tools_list_offers_one_tool_per_operation_plus_the_raw_tool() {
    for (setup, expected) in [(Setup::gitea(), 487), (Setup::forgejo(), 511)] {
        let h = Harness::start(setup.env("TOOLSETS", "all")).await;
        let tools = h.tools().await;
        assert_eq!(tools.len(), expected);
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), expected, "names are unique");
        let get = tools.iter().find(|t| t.name == "repoGet").unwrap();
        assert_eq!(get.annotations.as_ref().unwrap().read_only_hint, Some(true));
        // A destructive write says only that it writes: destructive is the protocol's default.
        let del = tools.iter().find(|t| t.name == "repoDelete").unwrap();
        let hints = del.annotations.as_ref().unwrap();
        assert_eq!((hints.read_only_hint, hints.destructive_hint), (Some(false), None));
        assert_eq!(hints.idempotent_hint, Some(true));
        let create = tools.iter().find(|t| t.name == "repoCreateBranch").unwrap();
        assert_eq!(create.annotations.as_ref().unwrap().destructive_hint, Some(false));
        assert!(get.description.as_deref().unwrap().contains("GET /repos/{owner}/{repo}"));
        // The discovery tools, and only they, ask Claude Code to keep them loaded.
        let kept: Vec<&str> = tools
            .iter()
            .filter(|t| {
                t.meta.as_ref().is_some_and(|m| m.0.get("anthropic/alwaysLoad") == Some(&true.into()))
            })
            .map(|t| t.name.as_ref())
            .collect();
        assert_eq!(kept, ["gitea_search_operations", "gitea_get_operation_schema", "gitea_call_operation"]);
        assert_eq!(tools.iter().filter(|t| t.meta.is_some()).count(), 3);
        h.stop().await;
    }
}

#[tokio::test]
async fn flavor_auto_asks_the_version_and_picks_the_spec() {
    let h = Harness::start(Setup::forgejo().auto().env("TOOLSETS", "all")).await;
    assert_eq!(h.tools().await.len(), 511);
    assert!(h.forge.requests().iter().any(|r| r.raw_path == "/api/v1/version"));
    h.stop().await;
    let h = Harness::start(Setup::gitea().auto().env("TOOLSETS", "all")).await;
    assert_eq!(h.tools().await.len(), 487);
    h.stop().await;
}

#[tokio::test]
async fn identity_login_is_resolved_once_and_the_token_is_sent_as_a_token_header() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.seed_repo("alice", "demo");
    for _ in 0..3 {
        let c = h.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await;
        assert_envelope(&c);
        assert_eq!(c.json["identity"], json!({"login": "alice", "mode": "token", "sudo": null}));
        assert_eq!(c.json["request"], json!({"method": "GET", "path": "/repos/alice/demo"}));
        assert_eq!(c.json["status"], 200);
        assert_eq!(c.json["pagination"], Value::Null);
        assert_eq!(c.data()["full_name"], "alice/demo");
    }
    let user_lookups = h.forge.requests().iter().filter(|r| r.raw_path == "/api/v1/user").count();
    assert_eq!(user_lookups, 1, "GET /user once, then cached");
    assert_eq!(h.last().header("authorization"), Some(format!("token {ALICE_TOKEN}").as_str()));
    h.stop().await;
}

#[tokio::test]
async fn without_a_token_calls_are_anonymous_and_carry_no_credential() {
    let h = Harness::start(Setup::gitea().no_token()).await;
    h.forge.seed_repo("alice", "demo");
    let c = h.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await;
    assert_envelope(&c);
    assert_eq!(c.json["identity"], json!({"login": null, "mode": "anonymous", "sudo": null}));
    assert!(h.forge.requests().iter().all(|r| r.header("authorization").is_none()));
    assert!(!h.forge.requests().iter().any(|r| r.raw_path == "/api/v1/user"));
    h.stop().await;
}

#[tokio::test]
async fn a_login_and_password_are_the_global_identity_as_http_basic() {
    let blob = support::basic_blob("alice", support::ALICE_PASSWORD);
    for flavor in [Setup::gitea(), Setup::forgejo()] {
        // `auto`: the version probe itself goes with the credential.
        let h = Harness::start(flavor.basic().auto()).await;
        h.forge.seed_repo("alice", "demo");
        for _ in 0..2 {
            let c = h.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await;
            assert_envelope(&c);
            assert_eq!(c.json["identity"], json!({"login": "alice", "mode": "basic", "sudo": null}));
        }
        let basic = format!("Basic {blob}");
        for r in h.forge.requests() {
            assert_eq!(r.header("authorization"), Some(basic.as_str()), "{} {}", r.method, r.raw_path);
        }
        let lookups = h.forge.requests().iter().filter(|r| r.raw_path == "/api/v1/user").count();
        assert_eq!(lookups, 1, "the login is resolved once");
        h.stop().await;
    }
}

/// The forges create and list access tokens only for a login and password: with one, the
/// server can hand a new token to the caller (a credential-issuing operation, so it is not
/// masked); with a token it gets the forge's 401.
#[tokio::test]
async fn user_create_token_works_with_basic_auth_and_returns_the_new_token() {
    let h = Harness::start(Setup::gitea().basic()).await;
    let body = json!({"name": "ci", "scopes": ["read:repository"]});
    let c = h.call("userCreateToken", json!({"username": "alice", "body": body})).await;
    assert_envelope(&c);
    assert_eq!(c.json["status"], 201);
    let sha1 = c.data()["sha1"].as_str().unwrap();
    assert!(sha1.len() == 40 && sha1.chars().all(|c| c.is_ascii_hexdigit()), "{}", c.text);
    let listed = h.call("userGetTokens", json!({"username": "alice"})).await;
    assert_eq!(listed.data()[0]["name"], "ci", "{}", listed.text);
    h.stop().await;

    let h = Harness::start(Setup::gitea()).await;
    let c = h.call("userCreateToken", json!({"username": "alice", "body": body})).await;
    assert_eq!(c.kind(), "unauthorized", "{}", c.text);
    assert!(c.json["error"]["message"].as_str().unwrap().contains("auth required"), "{}", c.text);
    h.stop().await;
}

/// A site administrator acts as a listed user on every path (an operation's tool, the raw
/// tool, the call tool with `sudo` beside or inside `arguments`): the forge gets exactly
/// `Sudo: <login>` besides the caller's own credential, the argument never as a parameter,
/// and the envelope reports the login in `identity.sudo` while `identity.login` stays the
/// caller's.
#[tokio::test]
async fn sudo_acts_as_a_listed_user_with_the_sudo_header_on_every_path() {
    let h = Harness::start(Setup::sudo(Some(support::ROOT_TOKEN), Some("Bob, carol"))).await;
    h.forge.seed_repo("bob", "demo");
    let paths = [
        ("userGetCurrent", json!({"sudo": "bob"})),
        ("gitea_api_request", json!({"method": "GET", "path": "/user", "sudo": "bob"})),
        ("gitea_call_operation", json!({"operation_id": "userGetCurrent", "sudo": "bob"})),
        ("gitea_call_operation", json!({"operation_id": "userGetCurrent", "arguments": {"sudo": "bob"}})),
        (
            "gitea_call_operation",
            json!({"operation_id": "userGetCurrent", "arguments": {"sudo": "bob"}, "sudo": "bob"}),
        ),
        // Listed logins match in any letter case; the header carries the login as given.
        ("userGetCurrent", json!({"sudo": "BOB"})),
    ];
    for (tool, args) in paths {
        h.forge.clear_requests();
        let c = h.call(tool, args.clone()).await;
        assert_envelope(&c);
        let login = args.get("sudo").or(args.pointer("/arguments/sudo")).unwrap();
        assert_eq!(c.json["identity"], json!({"login": "root", "mode": "token", "sudo": login}), "{tool}");
        assert_eq!(c.data()["login"], "bob", "{tool}: the forge acted as bob: {}", c.text);
        let sent: Vec<_> = h.forge.requests().into_iter().filter(|r| r.header("sudo").is_some()).collect();
        assert_eq!(sent.len(), 1, "{tool}: only the operation's request acts as bob");
        assert_eq!(sent[0].header("sudo"), login.as_str(), "{tool}");
        assert_eq!(sent[0].header("authorization"), Some(format!("token {}", support::ROOT_TOKEN).as_str()));
        assert_eq!(sent[0].raw_query, None, "{tool}: sudo is not a query parameter");
    }
    // A body never carries it either.
    let c = h
        .call(
            "issueCreateIssue",
            json!({"owner": "bob", "repo": "demo", "body": {"title": "t"}, "sudo": "bob"}),
        )
        .await;
    assert_envelope(&c);
    assert_eq!(c.data()["user"]["login"], "bob", "{}", c.text);
    assert_eq!(h.last().json_body(), Some(json!({"title": "t"})));
    assert_eq!(h.last().header("sudo"), Some("bob"));
    // Without `sudo` the call is the caller's own.
    let c = h.call("userGetCurrent", json!({})).await;
    assert_eq!(c.json["identity"], json!({"login": "root", "mode": "token", "sudo": null}));
    assert_eq!(c.data()["login"], "root");
    assert_eq!(h.forge.requests().last().unwrap().header("sudo"), None);
    h.stop().await;

    let h = Harness::start(Setup::sudo(Some(support::ROOT_TOKEN), Some("*"))).await;
    let c = h.call("userGetCurrent", json!({"sudo": "alice"})).await;
    assert_eq!(c.json["identity"]["sudo"], "alice", "{}", c.text);
    assert_eq!(c.data()["login"], "alice");
    h.stop().await;
}

/// Both together: an administrator signed in with a password may mint a token for a listed
/// user by acting as that user, as the forges allow.
#[tokio::test]
async fn an_administrator_with_a_password_creates_a_token_for_another_user_with_sudo() {
    let forge = support::Forge::sudo().admin("alice");
    let h = Harness::start(
        Setup { forge: Some(forge), ..Setup::gitea().basic() }.env("SUDO_ALLOWED_USERS", "bob"),
    )
    .await;
    let body = json!({"name": "for-bob", "scopes": ["read:user"]});
    let c = h.call("userCreateToken", json!({"username": "bob", "body": body, "sudo": "bob"})).await;
    assert_envelope(&c);
    assert_eq!(c.json["identity"], json!({"login": "alice", "mode": "basic", "sudo": "bob"}));
    assert_eq!(c.data()["name"], "for-bob");
    let sent = h.last();
    assert_eq!(sent.header("sudo"), Some("bob"));
    assert!(sent.header("authorization").unwrap().starts_with("Basic "));
    h.stop().await;
}

#[tokio::test]
async fn unknown_tool_is_a_json_rpc_invalid_params_error() {
    let h = Harness::start(Setup::gitea()).await;
    match h.call_raw("noSuchTool", json!({})).await {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            assert!(e.message.contains("noSuchTool"));
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
    // The server keeps serving.
    assert!(!h.call("gitea_api_request", json!({"method": "GET", "path": "/version"})).await.is_error);
    h.stop().await;
}

#[tokio::test]
async fn invalid_arguments_are_refused_before_anything_is_sent() {
    let h = Harness::start(Setup::gitea()).await;
    let before = h.tool_requests().len();
    let c = h.call("issueListIssues", json!({"owner": "o", "repo": "r", "state": "bogus"})).await;
    assert!(c.is_error);
    assert_eq!(c.json["error"]["kind"], "invalid_arguments");
    assert_eq!(c.json["error"]["path"], "/state");
    assert_eq!(c.json["error"]["status"], Value::Null);
    let c = h.call("repoGet", json!({"owner": "o", "repo": "r", "extra": 1})).await;
    assert_eq!((c.kind(), c.json["error"]["path"].as_str()), ("invalid_arguments", Some("/extra")));
    let c = h.call("issueCreateIssue", json!({"owner": "o", "repo": "r", "body": {}})).await;
    assert_eq!((c.kind(), c.json["error"]["path"].as_str()), ("invalid_arguments", Some("/body/title")));
    assert_eq!(h.tool_requests().len(), before, "nothing reached the forge");
    h.stop().await;
}

#[tokio::test]
async fn json_bodies_and_query_arrays_are_sent_as_the_spec_says() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.seed_repo("alice", "demo");
    let c = h
        .call(
            "issueCreateIssue",
            json!({"owner": "alice", "repo": "demo", "body": {"title": "Bug", "body": "ä text"}}),
        )
        .await;
    assert_envelope(&c);
    assert_eq!(c.json["status"], 201);
    let r = h.last();
    assert_eq!(r.method, "POST");
    assert!(r.header("content-type").unwrap().starts_with("application/json"));
    assert_eq!(r.json_body().unwrap(), json!({"title": "Bug", "body": "ä text"}));
    h.call(
        "repoGetArchive",
        json!({"owner": "alice", "repo": "demo", "archive": "main.zip", "path": ["a b", "c"]}),
    )
    .await;
    let r = h.last();
    assert_eq!(r.query_pairs(), [("path".to_owned(), "a b".to_owned()), ("path".to_owned(), "c".to_owned())]);
    h.stop().await;
}

#[tokio::test]
async fn text_plain_bodies_reach_the_forge_as_the_raw_string_not_json() {
    // `renderMarkdownRaw` accepts only text/plain on both forges: they render the body byte
    // for byte, so a JSON-quoted string would come back rendered with its quotes.
    let text = "# Title\n\nä \"quoted\" \\ back";
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        let calls = [
            ("renderMarkdownRaw", json!({"body": text})),
            (
                "gitea_call_operation",
                json!({"operation_id": "renderMarkdownRaw", "arguments": {"body": text}}),
            ),
            ("gitea_api_request", json!({"method": "POST", "path": "/markdown/raw", "body": text})),
        ];
        for (tool, args) in calls {
            let c = h.call(tool, args).await;
            assert_envelope(&c);
            let r = h.last();
            assert_eq!(r.operation_id.as_deref(), Some("renderMarkdownRaw"), "{tool}");
            assert_eq!(r.body, text.as_bytes(), "{tool}: the raw bytes, not a JSON string");
            assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"), "{tool}");
            assert!(c.data().as_str().unwrap().starts_with("<p># Title"), "{tool}: {}", c.text);
        }
        h.stop().await;
    }
}

#[tokio::test]
async fn body_field_names_are_matched_regardless_of_case_and_sent_in_the_specs_spelling() {
    // Gitea's spec says `do`, Forgejo's `Do`; both forges take either. An agent moving between
    // them is not refused, and each forge receives its own spec's spelling.
    for (setup, sent, received) in [(Setup::gitea(), "Do", "do"), (Setup::forgejo(), "do", "Do")] {
        let h = Harness::start(setup).await;
        let arguments = json!({"owner": "alice", "repo": "demo", "index": 1, "body": {sent: "merge"}});
        for (tool, args) in [
            ("repoMergePullRequest", arguments.clone()),
            ("gitea_call_operation", json!({"operation_id": "repoMergePullRequest", "arguments": arguments})),
        ] {
            let c = h.call(tool, args).await;
            assert_envelope(&c);
            let r = h.last();
            assert_eq!(r.operation_id.as_deref(), Some("repoMergePullRequest"));
            assert_eq!(r.json_body().unwrap(), json!({received: "merge"}), "{tool}");
        }
        // Two keys that name one field: refused, not one picked; nothing is sent.
        let before = h.tool_requests().len();
        let c = h
            .call(
                "repoMergePullRequest",
                json!({"owner": "alice", "repo": "demo", "index": 1, "body": {"do": "merge", "Do": "squash"}}),
            )
            .await;
        assert_eq!(c.kind(), "invalid_arguments", "{}", c.text);
        assert!(c.json["error"]["path"].as_str().unwrap().starts_with("/body/"), "{}", c.text);
        assert!(
            c.json["error"]["message"].as_str().unwrap().contains("regardless of letter case"),
            "{}",
            c.text
        );
        assert_eq!(h.tool_requests().len(), before);
        h.stop().await;
    }
}

#[tokio::test]
async fn attachment_upload_is_multipart_from_base64_and_download_returns_the_bytes() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.seed_repo("alice", "demo");
    h.call("issueCreateIssue", json!({"owner": "alice", "repo": "demo", "body": {"title": "t"}})).await;
    let c = h
        .call(
            "issueCreateIssueAttachment",
            json!({"owner": "alice", "repo": "demo", "index": 1,
                   "attachment": {"content_base64": "AAEC/w==", "filename": "bin.dat", "content_type": "application/octet-stream"}}),
        )
        .await;
    assert_envelope(&c);
    assert_eq!(c.json["status"], 201);
    let r = h.last();
    assert!(r.header("content-type").unwrap().starts_with("multipart/form-data; boundary="));
    let body = &r.body;
    assert!(body.windows(4).any(|w| w == [0x00, 0x01, 0x02, 0xff]), "raw bytes in the multipart body");
    assert!(String::from_utf8_lossy(body).contains("filename=\"bin.dat\""));
    assert_eq!(c.data()["size"], 4);
    let uuid = c.data()["uuid"].as_str().unwrap().to_owned();
    let d = h.call("gitea_download_attachment", json!({"uuid": uuid})).await;
    assert_envelope(&d);
    assert_eq!(d.data()["content_base64"], "AAEC/w==", "{}", d.text);
    let r = h.last();
    assert_eq!(r.raw_path, format!("/attachments/{uuid}"));
    assert_eq!(r.header("authorization"), Some(format!("token {ALICE_TOKEN}").as_str()));
    let bad = h.call("gitea_download_attachment", json!({"uuid": "../api/v1/admin/users"})).await;
    assert_eq!(bad.kind(), "invalid_arguments");
    h.stop().await;
}

#[tokio::test]
async fn upload_over_the_binary_limit_is_refused_before_decoding_or_sending() {
    let h = Harness::start(Setup::gitea().env("MAX_BINARY_BYTES", "4")).await;
    let before = h.tool_requests().len();
    let c = h
        .call(
            "issueCreateIssueAttachment",
            json!({"owner": "o", "repo": "r", "index": 1, "attachment": {"content_base64": "AAECAwQ="}}),
        )
        .await;
    assert_eq!(
        c.json["error"],
        json!({"status": null, "kind": "payload_too_large", "message": c.json["error"]["message"]})
    );
    assert!(c.json["error"]["message"].as_str().unwrap().contains("MAX_BINARY_BYTES"));
    assert_eq!(h.tool_requests().len(), before);
    let ok = h
        .call(
            "issueCreateIssueAttachment",
            json!({"owner": "o", "repo": "r", "index": 1, "attachment": {"content_base64": "AAECAw=="}}),
        )
        .await;
    assert_ne!(ok.kind(), "payload_too_large", "4 bytes is within the limit: {}", ok.text);
    h.stop().await;
}

#[tokio::test]
async fn every_forge_status_maps_to_its_error_kind_with_the_forge_message() {
    let h = Harness::start(Setup::gitea()).await;
    let table = [
        (400, "bad_request"),
        (401, "unauthorized"),
        (403, "forbidden"),
        (404, "not_found"),
        (405, "method_not_allowed"),
        (409, "conflict"),
        (413, "payload_too_large"),
        (422, "validation_failed"),
        (423, "locked"),
        (429, "rate_limited"),
        (500, "upstream_error"),
        (502, "upstream_error"),
        (503, "upstream_error"),
        (418, "unexpected_status"),
    ];
    for (i, (status, kind)) in table.iter().enumerate() {
        let path = format!("/api/v1/repos/o/r{i}");
        let body = format!("{{\"message\":\"forge says {status}\",\"url\":\"https://x/api/swagger\"}}");
        h.forge.script(script(
            &path,
            respond(*status, &[("content-type", "application/json")], body.as_bytes()),
        ));
        let c = h.call("repoGet", json!({"owner": "o", "repo": format!("r{i}")})).await;
        assert!(c.is_error, "{status}");
        assert_eq!(c.json["error"]["status"], *status);
        assert_eq!(c.json["error"]["kind"], *kind);
        assert!(
            c.json["error"]["message"].as_str().unwrap().contains(&format!("forge says {status}")),
            "{}",
            c.text
        );
    }
    h.stop().await;
}

/// A route the spec has but the forge switched off (Forgejo's nodeinfo on a default install)
/// is answered by the forge's router in plain text: the agent is told the feature may be
/// disabled, not to check its names; a forge's JSON 404 keeps the usual hint.
#[tokio::test]
async fn a_route_the_forge_does_not_serve_says_the_feature_may_be_disabled() {
    let h = Harness::start(Setup::forgejo()).await;
    h.forge.script(Script::once(
        Some("GET"),
        "/api/v1/nodeinfo",
        respond(404, &[("content-type", "text/plain; charset=utf-8")], b"404 page not found\n"),
    ));
    let c = h.call("getNodeInfo", json!({})).await;
    assert_eq!((c.kind(), c.json["error"]["status"].as_u64()), ("not_found", Some(404)), "{}", c.text);
    let message = c.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("may be disabled on this forge"), "{message}");
    assert!(!message.contains("check owner"), "{message}");
    let missing = h.call("repoGet", json!({"owner": "o", "repo": "nowhere"})).await;
    assert!(missing.text.contains("check owner"), "{}", missing.text);
    h.stop().await;
}

#[tokio::test]
async fn a_merge_answered_please_try_again_later_tells_the_agent_to_retry_shortly() {
    let h = Harness::start(Setup::gitea()).await;
    let merge = "/api/v1/repos/alice/demo/pulls/1/merge";
    let args = json!({"owner": "alice", "repo": "demo", "index": 1, "body": {"do": "merge"}});
    // Gitea's answer while it still checks whether a new pull request can be merged.
    let body = br#"{"message":"Please try again later","url":"https://forge.example.invalid/api/swagger"}"#;
    h.forge.script(Script::once(
        Some("POST"),
        merge,
        respond(405, &[("content-type", "application/json")], body),
    ));
    let c = h.call("repoMergePullRequest", args.clone()).await;
    assert!(c.is_error);
    assert_eq!((c.json["error"]["status"].as_u64(), c.kind()), (Some(405), "method_not_allowed"));
    let message = c.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("Please try again later"), "{message}");
    assert!(message.contains("wait a few seconds and try again"), "{message}");
    assert!(message.contains("repoGetPullRequest shows `mergeable`"), "{message}");
    // Other words on the same status keep the plain answer.
    let body =
        br#"{"message":"User not allowed to merge PR","url":"https://forge.example.invalid/api/swagger"}"#;
    h.forge.script(Script::once(
        Some("POST"),
        merge,
        respond(405, &[("content-type", "application/json")], body),
    ));
    let c = h.call("repoMergePullRequest", args).await;
    assert_eq!(c.kind(), "method_not_allowed");
    assert!(!c.json["error"]["message"].as_str().unwrap().contains("try again"), "{}", c.text);
    h.stop().await;
}

#[tokio::test]
async fn forge_error_messages_lose_tokens_and_authorization_text_and_are_truncated() {
    let h = Harness::start(Setup::gitea()).await;
    let msg = format!(
        "{{\"message\":\"bad request; Authorization: token {ALICE_TOKEN} echoed; also Bearer abcdefghijklmnop; {}\"}}",
        "x".repeat(2000)
    );
    h.forge.script(script(
        "/api/v1/repos/o/r",
        respond(500, &[("content-type", "application/json")], msg.as_bytes()),
    ));
    let c = h.call("repoGet", json!({"owner": "o", "repo": "r"})).await;
    assert_eq!(c.kind(), "upstream_error");
    assert!(!c.text.contains(ALICE_TOKEN), "{}", c.text);
    assert!(!c.text.contains("abcdefghijklmnop"), "{}", c.text);
    assert!(c.text.len() < 1200, "truncated: {}", c.text.len());
    h.stop().await;
}

#[tokio::test]
async fn timeouts_and_refused_connections_have_their_own_kinds() {
    let h = Harness::start(Setup::gitea().env("GITEA_TIMEOUT", "1")).await;
    h.forge.script(script(
        "/api/v1/repos/o/slow",
        ScriptedResponse { body: ScriptBody::Hang, ..respond(200, &[], b"") },
    ));
    let c = h.call("repoGet", json!({"owner": "o", "repo": "slow"})).await;
    assert_eq!((c.kind(), &c.json["error"]["status"]), ("timeout", &Value::Null));
    assert!(c.json["error"]["message"].as_str().unwrap().contains("GITEA_TIMEOUT"));
    // Still serving.
    h.forge.seed_repo("o", "fast");
    assert!(!h.call("repoGet", json!({"owner": "o", "repo": "fast"})).await.is_error);
    h.stop().await;

    // A forge that is gone: connection_failed, with the URL to check. The address is one a
    // listener had, closed when it is dropped (nothing listens there now).
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", gone.local_addr().unwrap());
    drop(gone);
    let out = tokio::process::Command::new(support::bin())
        .args([
            "call",
            "repoGet",
            "--flavor",
            "gitea",
            "--url",
            &url,
            "--args",
            r#"{"owner":"o","repo":"r"}"#,
        ])
        .env_clear()
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "connection_failed");
    assert_eq!(v["error"]["status"], Value::Null);
}

#[tokio::test]
async fn redirects_are_not_followed_and_come_back_with_their_location() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.script(script(
        "/api/v1/repos/o/r/actions/artifacts/7/zip",
        respond(302, &[("location", "https://blobs.example/signed?sig=abc")], b""),
    ));
    let c = h.call("downloadArtifact", json!({"owner": "o", "repo": "r", "artifact_id": "7"})).await;
    assert_envelope(&c);
    assert_eq!(c.json["status"], 302);
    assert_eq!(c.data()["location"], "https://blobs.example/signed?sig=abc");
    assert_eq!(h.forge.requests().iter().filter(|r| r.raw_path.contains("signed")).count(), 0);
    h.stop().await;
}

#[tokio::test]
async fn json_deeper_than_100_levels_is_returned_as_text() {
    let h = Harness::start(Setup::gitea()).await;
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    h.forge.script(script(
        "/api/v1/repos/o/d100",
        respond(200, &[("content-type", "application/json")], deep(100).as_bytes()),
    ));
    h.forge.script(script(
        "/api/v1/repos/o/d101",
        respond(200, &[("content-type", "application/json")], deep(101).as_bytes()),
    ));
    h.forge.script(script(
        "/api/v1/repos/o/dmax",
        respond(200, &[("content-type", "application/json")], deep(500_000).as_bytes()),
    ));
    let c = h.call("repoGet", json!({"owner": "o", "repo": "d100"})).await;
    assert!(c.data().is_array());
    let c = h.call("repoGet", json!({"owner": "o", "repo": "d101"})).await;
    assert_eq!(c.data().as_str().unwrap(), deep(101));
    let c = h.call("repoGet", json!({"owner": "o", "repo": "dmax"})).await;
    assert!(c.data().is_string());
    h.stop().await;
}

#[tokio::test]
async fn binary_bodies_come_back_as_base64_up_to_the_limit_and_fail_above_it() {
    let h =
        Harness::start(Setup::gitea().env("MAX_BINARY_BYTES", "1000").env("MAX_RESOURCE_BYTES", "100000"))
            .await;
    let octet = [("content-type", "application/octet-stream")];
    let raw = |p: &str| json!({"owner": "o", "repo": "r", "filepath": p});
    h.forge.script(script("/api/v1/repos/o/r/raw/ok.bin", respond(200, &octet, &[7u8; 1000])));
    h.forge.script(script("/api/v1/repos/o/r/raw/big.bin", respond(200, &octet, &[7u8; 1001])));
    h.forge.script(script(
        "/api/v1/repos/o/r/raw/chunked.bin",
        ScriptedResponse {
            body: ScriptBody::Chunked {
                chunks: vec![vec![1u8; 600], vec![2u8; 600]],
                delay_between: Duration::ZERO,
            },
            ..respond(200, &octet, b"")
        },
    ));
    h.forge.script(script(
        "/api/v1/repos/o/r/raw/endless.bin",
        ScriptedResponse {
            body: ScriptBody::Endless { chunk: vec![9u8; 4096] },
            ..respond(200, &octet, b"")
        },
    ));
    let c = h.call("repoGetRawFile", raw("ok.bin")).await;
    assert_envelope(&c);
    assert_eq!(c.data()["size"], 1000);
    assert_eq!(c.data()["content_type"], "application/octet-stream");
    assert_eq!(c.data()["content_base64"].as_str().unwrap().len(), 1336);
    // Over the limit, a file its resource reads again is linked (its bytes counted, not
    // kept); an endless one is refused at the resource's limit.
    for (p, size) in [("big.bin", 1001), ("chunked.bin", 1200)] {
        let c = h.call("repoGetRawFile", raw(p)).await;
        assert_eq!(c.data()["size"], size, "{p}: {}", c.text);
        assert!(c.json["link"]["uri"].as_str().unwrap().ends_with(p), "{}", c.text);
    }
    let c = h.call("repoGetRawFile", raw("endless.bin")).await;
    assert_eq!(c.kind(), "payload_too_large", "{}", c.text);
    assert!(c.json["error"]["message"].as_str().unwrap().contains("MAX_RESOURCE_BYTES"), "{}", c.text);
    // Through the raw tool nothing links: over MAX_BINARY_BYTES is refused.
    for p in ["big.bin", "chunked.bin", "endless.bin"] {
        let path = format!("/repos/o/r/raw/{p}");
        let c = h.call("gitea_api_request", json!({"method": "GET", "path": path})).await;
        assert_eq!(c.kind(), "payload_too_large", "{p}: {}", c.text);
        assert_eq!(c.json["error"]["status"], 200);
        assert!(c.json["error"]["message"].as_str().unwrap().contains("MAX_BINARY_BYTES"), "{}", c.text);
    }
    h.stop().await;
}

#[tokio::test]
async fn hostile_answers_become_clear_errors_and_the_server_keeps_serving() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.script(script(
        "/api/v1/repos/o/liar",
        ScriptedResponse {
            body: ScriptBody::LyingLength { declared: 5000, actual: b"{\"a\":".to_vec() },
            ..respond(200, &[("content-type", "application/json")], b"")
        },
    ));
    h.forge.script(script(
        "/api/v1/repos/o/garbage",
        respond(200, &[("content-type", "application/json")], b"{not json"),
    ));
    h.forge.script(script(
        "/api/v1/repos/o/bytes",
        respond(200, &[("content-type", "application/json")], &[0xff, 0xfe, 0xfd]),
    ));
    let c = h.call("repoGet", json!({"owner": "o", "repo": "liar"})).await;
    assert_eq!(c.kind(), "connection_failed", "{}", c.text);
    let c = h.call("repoGet", json!({"owner": "o", "repo": "garbage"})).await;
    assert_eq!(c.data(), "{not json");
    // Declared JSON, not UTF-8: text (its stray bytes as U+FFFD), so that it passes redaction.
    let c = h.call("repoGet", json!({"owner": "o", "repo": "bytes"})).await;
    assert_eq!(c.data(), "\u{fffd}\u{fffd}\u{fffd}");
    h.forge.seed_repo("o", "fine");
    assert!(!h.call("repoGet", json!({"owner": "o", "repo": "fine"})).await.is_error);
    h.stop().await;
}

#[tokio::test]
async fn pagination_comes_from_link_and_total_count_never_from_the_link_host() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.seed_repo("alice", "demo");
    h.forge.seed_issues("alice", "demo", 45);
    let c = h.call("issueListIssues", json!({"owner": "alice", "repo": "demo", "limit": 20})).await;
    assert_envelope(&c);
    assert_eq!(
        c.json["pagination"],
        json!({"page": 1, "limit": 20, "total_count": 45, "next_page": 2, "last_page": 3})
    );
    assert_eq!(c.data().as_array().unwrap().len(), 20);
    let c =
        h.call("issueListIssues", json!({"owner": "alice", "repo": "demo", "limit": 20, "page": 3})).await;
    assert_eq!(
        c.json["pagination"],
        json!({"page": 3, "limit": 20, "total_count": 45, "next_page": null, "last_page": 3})
    );
    // Without a Link header: computed from the total and the limit.
    h.forge.script(script(
        "/api/v1/repos/o/r/tags",
        respond(200, &[("content-type", "application/json"), ("x-total-count", "7")], b"[]"),
    ));
    let c = h.call("repoListTags", json!({"owner": "o", "repo": "r", "page": 1, "limit": 5})).await;
    assert_eq!(
        c.json["pagination"],
        json!({"page": 1, "limit": 5, "total_count": 7, "next_page": 2, "last_page": 2})
    );
    // Nothing said: nulls, never 0.
    h.forge.script(script(
        "/api/v1/repos/o/r/branches",
        respond(200, &[("content-type", "application/json")], b"[]"),
    ));
    let c = h.call("repoListBranches", json!({"owner": "o", "repo": "r"})).await;
    assert_eq!(
        c.json["pagination"],
        json!({"page": 1, "limit": null, "total_count": null, "next_page": null, "last_page": null})
    );
    h.stop().await;
}

#[tokio::test]
async fn the_raw_tool_uses_the_same_pipeline_and_refuses_unsafe_paths() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.seed_repo("alice", "demo");
    h.forge.seed_issues("alice", "demo", 3);
    let c = h
        .call(
            "gitea_api_request",
            json!({"method": "GET", "path": "/repos/alice/demo/issues", "query": {"limit": 2}}),
        )
        .await;
    assert_envelope(&c);
    assert_eq!(c.json["pagination"]["total_count"], 3);
    assert_eq!(c.json["pagination"]["next_page"], 2);
    assert_eq!(h.last().header("authorization"), Some(format!("token {ALICE_TOKEN}").as_str()));
    let before = h.tool_requests().len();
    for bad in [
        "/repos/alice/demo/releases/tags/rel%2F1.0",
        "/repos/alice/../admin",
        "/repos/alice/demo?x=1",
        "/repos/alice/demo#f",
        "repos/alice",
    ] {
        let c = h.call("gitea_api_request", json!({"method": "GET", "path": bad})).await;
        assert_eq!(
            (c.kind(), c.json["error"]["path"].as_str()),
            ("invalid_arguments", Some("/path")),
            "{bad}"
        );
    }
    assert_eq!(h.tool_requests().len(), before);
    let c = h
        .call(
            "gitea_api_request",
            json!({"method": "POST", "path": "/repos/alice/demo/issues", "body": {"title": "raw"}}),
        )
        .await;
    assert_eq!(c.json["status"], 201);
    h.stop().await;
}

#[tokio::test]
async fn disabled_tools_are_neither_listed_nor_callable() {
    let h = Harness::start(
        Setup::gitea().env("DISABLED_TOOLS", "repoDelete,gitea_api_request").env("TOOLSETS", "all"),
    )
    .await;
    let tools = h.tools().await;
    assert!(!tools.iter().any(|t| t.name == "repoDelete" || t.name == "gitea_api_request"));
    assert_eq!(tools.len(), 485);
    let c = h.call("repoDelete", json!({"owner": "o", "repo": "r"})).await;
    assert_eq!(c.kind(), "denied");
    assert!(h.tool_requests().is_empty());
    h.stop().await;
}

#[tokio::test]
async fn spec_fixes_runner_token_body_archive_binary_job_logs_text() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.script(script(
        "/api/v1/repos/o/r/actions/runners/registration-token",
        respond(200, &[("content-type", "application/json")], br#"{"token":"RUNNER-REG-TOKEN-1"}"#),
    ));
    h.forge.script(script("/api/v1/repos/o/r/archive/main.zip", respond(200, &[], b"PK\x03\x04zip")));
    h.forge.script(script(
        "/api/v1/repos/o/r/actions/jobs/5/logs",
        respond(200, &[("content-type", "application/octet-stream")], b"step 1\nok\n"),
    ));
    let c = h.call("repoCreateRunnerRegistrationToken", json!({"owner": "o", "repo": "r"})).await;
    assert_eq!(c.data()["token"], "RUNNER-REG-TOKEN-1");
    let c = h.call("repoGetArchive", json!({"owner": "o", "repo": "r", "archive": "main.zip"})).await;
    assert_eq!(c.data()["size"], 7);
    let c = h.call("downloadActionsRunJobLogs", json!({"owner": "o", "repo": "r", "job_id": 5})).await;
    assert_eq!(c.data(), "step 1\nok\n");
    h.stop().await;
}

/// The audit log's lines, parsed.
fn audit_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// `audit verify --key-file KEY FILE...` with the key `Setup::audit` wrote beside `files[0]`.
fn audit_verify(files: &[&std::path::Path]) -> (bool, String) {
    support::audit_verify(&files[0].with_file_name("audit.key"), files)
}

#[tokio::test]
async fn every_call_leaves_one_chained_audit_line_without_arguments_results_or_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let setup = Setup::gitea().audit(&log).env("DISABLED_TOOLS", "repoDelete");
    let h = Harness::start(setup).await;
    let json_ct = [("content-type", "application/json")];
    h.forge.script(script(
        "/api/v1/repos/alice/demo",
        respond(200, &json_ct, br#"{"full_name":"alice/demo","description":"FORGEDATA-Q7Z"}"#),
    ));
    assert!(!h.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await.is_error);
    assert_eq!(h.call("repoGet", json!({"owner": "alice", "repo": "gone"})).await.kind(), "not_found");
    let bad = h.call("repoGet", json!({"owner": "alice", "repo": "demo", "extra": "ARGVALUE-K3P"})).await;
    assert_eq!(bad.kind(), "invalid_arguments");
    let c = h.call("repoSearch", json!({"q": "ARGVALUE-K3P"})).await;
    let searched = if c.is_error { c.kind().to_owned() } else { "ok".to_owned() };
    assert_eq!(h.call("repoDelete", json!({"owner": "alice", "repo": "demo"})).await.kind(), "denied");
    assert!(h.call_raw("noSuchTool", json!({"x": "ARGVALUE-K3P"})).await.is_err());
    let raw = json!({"method": "GET", "path": "/repos/alice/demo"});
    assert!(!h.call("gitea_api_request", raw).await.is_error);
    // A tool named like the resource read is still the client's text.
    assert!(h.call_raw("resources/read", json!({})).await.is_err());
    h.stop().await;

    let lines = audit_lines(&log);
    let outcomes: Vec<&str> = lines.iter().map(|l| l["outcome"].as_str().unwrap()).collect();
    assert_eq!(
        outcomes,
        ["ok", "not_found", "invalid_arguments", &searched, "denied", "unknown_tool", "ok", "unknown_tool"]
    );
    let first = &lines[0];
    let keys: Vec<&str> = first.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "seq",
            "time",
            "id",
            "transport",
            "client",
            "identity",
            "tool",
            "operation",
            "method",
            "path",
            "outcome",
            "status",
            "duration_ms",
            "bytes",
            "args_hmac",
            "prev",
            "mac"
        ]
    );
    assert_eq!(first["transport"], "stdio");
    assert!(first["client"]["name"].is_string(), "{first}");
    assert_eq!(first["identity"], json!({"login": "alice", "mode": "token", "sudo": null}));
    assert_eq!(
        (&first["operation"], &first["method"], &first["path"]),
        (&json!("repoGet"), &json!("GET"), &json!("/repos/alice/demo"))
    );
    assert_eq!(first["status"], 200);
    assert!(first["bytes"].as_u64().unwrap() > 50);
    assert_eq!(first["prev"], "0".repeat(64));
    assert!(first["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(lines[1]["status"], 404);
    assert_eq!(lines[4]["identity"]["mode"], "token", "a refused call still says who");
    assert_eq!(lines[6]["operation"], "repoGet", "the raw tool's route names its operation");
    assert_eq!(lines[5]["tool"], Value::Null, "a name the catalog does not have is client text, not written");
    assert_eq!(lines[7]["tool"], Value::Null, "a tool called resources/read is no resource read");
    let text = std::fs::read_to_string(&log).unwrap();
    for never in [support::ALICE_TOKEN, "ARGVALUE-K3P", "FORGEDATA-Q7Z"] {
        assert!(!text.contains(never), "{never} reached the audit log");
    }
    let (ok, report) = audit_verify(&[&log]);
    assert!(ok, "{report}");

    // A second server on the same file continues the chain.
    let h = Harness::start(Setup::gitea().process().audit(&log)).await;
    h.forge.seed_repo("alice", "demo");
    assert!(!h.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await.is_error);
    h.stop().await;
    let lines = audit_lines(&log);
    assert_eq!(lines.len(), 9);
    assert_eq!(lines[8]["seq"], 9);
    let (ok, report) = audit_verify(&[&log]);
    assert!(ok, "{report}");

    // Edited, deleted, reordered: the first break is named by its line.
    let original: Vec<String> = text
        .lines()
        .map(str::to_owned)
        .chain([std::fs::read_to_string(&log).unwrap().lines().last().unwrap().to_owned()])
        .collect();
    let tampered = dir.path().join("tampered.jsonl");
    for (change, expect) in [
        (0, "line 3: line 3 does not verify with this key"),
        (1, "line 3: 1 line(s) deleted between line 2 and line 3"),
        (2, "line 3: line 3 is out of order"),
    ] {
        let mut l = original.clone();
        match change {
            0 => l[2] = l[2].replace("invalid_arguments", "ok"),
            1 => drop(l.remove(2)),
            _ => l.swap(2, 3),
        }
        std::fs::write(&tampered, l.join("\n") + "\n").unwrap();
        let (ok, report) = audit_verify(&[&tampered]);
        assert!(!ok && report.contains(&format!("BROKEN at {expect}")), "{expect}: {report}");
    }
}

#[tokio::test]
async fn an_unwritable_audit_log_fails_calls_closed_unless_fail_open() {
    let dir = tempfile::tempdir().unwrap();
    let key = support::write_audit_key(&dir.path().join("audit.key"));
    let unwritable = || {
        Setup::gitea()
            .process()
            .env("AUDIT_LOG", dir.path().to_str().unwrap())
            .env("AUDIT_KEY_FILE", key.to_str().unwrap())
    };
    // A directory cannot be appended to.
    let h = Harness::start(unwritable()).await;
    h.forge.seed_repo("alice", "demo");
    let c = h.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await;
    assert_eq!(c.kind(), "audit_failed", "{}", c.text);
    assert!(h.tool_requests().is_empty(), "nothing was sent unrecorded");
    h.stop().await;
    let h = Harness::start(unwritable().env("AUDIT_FAIL_OPEN", "true")).await;
    h.forge.seed_repo("alice", "demo");
    assert!(!h.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await.is_error);
    assert!(h.stderr().contains("AUDIT_FAIL_OPEN"), "{}", h.stderr());
    h.stop().await;
}

/// The `mac` of an audit line.
fn mac_of(line: &Value) -> String {
    line["mac"].as_str().unwrap().to_owned()
}

/// The chain is keyed (`AUDIT_KEY_FILE`): `audit verify` needs the key, and finds a last line
/// edited and a chain written without the key (here: with another one) — which the old hash
/// chain let pass — and a restart does not continue a file whose last line does not verify.
/// The head of the chain is logged at start and at shutdown.
#[tokio::test]
async fn the_chain_is_keyed_so_an_edited_last_line_or_a_forged_chain_fails_and_is_not_continued() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let key = log.with_file_name("audit.key");
    let demo = json!({"owner": "alice", "repo": "demo"});
    let h = Harness::start(Setup::gitea().process().audit(&log)).await;
    h.forge.seed_repo("alice", "demo");
    assert!(!h.call("repoGet", demo.clone()).await.is_error);
    assert!(!h.call("repoGet", demo.clone()).await.is_error);
    let stderr = h.stop_with_stderr().await;
    let lines = audit_lines(&log);
    let head = format!("seq=2 mac={}", mac_of(&lines[1]));
    assert!(stderr.contains("audit chain head at start: no line yet"), "{stderr}");
    assert!(
        stderr.lines().any(|l| l.contains("audit chain head at shutdown") && l.contains(&head)),
        "{stderr}"
    );
    let (ok, report) = audit_verify(&[&log]);
    assert!(ok && report.contains(&format!("last seq 2 mac {}", mac_of(&lines[1]))), "{report}");
    assert!(!stderr.contains(support::AUDIT_KEY_HEX), "the key is never logged");

    // Without the key nothing is verified.
    let out =
        std::process::Command::new(support::bin()).args(["audit", "verify"]).arg(&log).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--key-file"), "{out:?}");

    // A chain written with another key — all a forger without this one can make.
    let forged_dir = tempfile::tempdir().unwrap();
    let forged = forged_dir.path().join("audit.jsonl");
    let other_key = forged_dir.path().join("audit.key");
    let setup = Setup::gitea()
        .process()
        .env("AUDIT_LOG", forged.to_str().unwrap())
        .env("AUDIT_KEY_FILE", other_key.to_str().unwrap());
    std::fs::write(&other_key, "ab".repeat(32)).unwrap();
    let h = Harness::start(setup).await;
    h.forge.seed_repo("alice", "demo");
    assert!(!h.call("repoGet", demo.clone()).await.is_error);
    h.stop().await;
    let (ok, report) = support::audit_verify(&key, &[&forged]);
    assert!(
        !ok && report.contains("BROKEN at line 1") && report.contains("no line of the file verifies"),
        "{report}"
    );

    // The last line edited: it authenticates itself, so this is found too.
    let text = std::fs::read_to_string(&log).unwrap();
    let at = text.rfind("\"status\":200").unwrap();
    let edited = format!("{}\"status\":201{}", &text[..at], &text[at + "\"status\":200".len()..]);
    std::fs::write(&log, &edited).unwrap();
    let (ok, report) = audit_verify(&[&log]);
    assert!(!ok && report.contains("BROKEN at line 2: line 2 does not verify with this key"), "{report}");

    // A restart does not continue it: calls fail before they run, saying what to do.
    let h = Harness::start(Setup::gitea().process().audit(&log)).await;
    h.forge.seed_repo("alice", "demo");
    let c = h.call("repoGet", demo).await;
    assert_eq!(c.kind(), "audit_failed", "{}", c.text);
    let message = c.json["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("does not verify with AUDIT_KEY_FILE") && message.contains("move it aside"),
        "{message}"
    );
    assert!(h.tool_requests().is_empty(), "nothing was sent unrecorded");
    h.stop().await;
    assert_eq!(std::fs::read_to_string(&log).unwrap(), edited, "nothing was added to the file");
}

/// While the server runs, the file must end in the last line it wrote: one replaced (here by
/// a copy without its last line) or shortened is not continued; moved aside, an empty file
/// continues the chain, and logrotate's rename-and-create and copytruncate keep working, the
/// head logged at each rotation.
#[tokio::test]
async fn a_file_replaced_under_the_running_server_is_refused_and_rotations_continue_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let demo = json!({"owner": "alice", "repo": "demo"});
    let h = Harness::start(Setup::gitea().process().audit(&log)).await;
    h.forge.seed_repo("alice", "demo");
    for _ in 0..2 {
        assert!(!h.call("repoGet", demo.clone()).await.is_error);
    }
    let whole = std::fs::read_to_string(&log).unwrap();
    let first_line = format!("{}\n", whole.lines().next().unwrap());
    let copy = dir.path().join("copy");
    std::fs::write(&copy, &first_line).unwrap();
    std::fs::rename(&copy, &log).unwrap();
    h.forge.clear_requests();
    let c = h.call("repoGet", demo.clone()).await;
    assert_eq!(c.kind(), "audit_failed", "{}", c.text);
    assert!(c.text.contains("changed under the running server"), "{}", c.text);
    assert!(h.tool_requests().is_empty(), "refused before it ran");
    assert!(
        h.stderr().contains(&format!("mac={}", mac_of(&audit_lines_of(&whole)[1]))),
        "the head is logged"
    );

    // Put back, it goes on; rotated by rename-and-create, a new file continues the chain.
    std::fs::write(&copy, &whole).unwrap();
    std::fs::rename(&copy, &log).unwrap();
    assert!(!h.call("repoGet", demo.clone()).await.is_error);
    let rotated = dir.path().join("audit.jsonl.1");
    std::fs::rename(&log, &rotated).unwrap();
    std::fs::write(&log, "").unwrap();
    assert!(!h.call("repoGet", demo.clone()).await.is_error);
    // copytruncate: copied away, then emptied in place.
    let copied = dir.path().join("audit.jsonl.2");
    std::fs::copy(&log, &copied).unwrap();
    std::fs::OpenOptions::new().write(true).open(&log).unwrap().set_len(0).unwrap();
    assert!(!h.call("repoGet", demo.clone()).await.is_error);
    let stderr = h.stop_with_stderr().await;
    assert_eq!(stderr.matches("audit chain head at rotation").count(), 2, "{stderr}");
    let (ok, report) = audit_verify(&[&rotated, &copied, &log]);
    assert!(ok, "{report}");
    let last = audit_lines(&log);
    assert_eq!((last.len(), &last[0]["seq"]), (1, &json!(5)), "{report}");
    assert_eq!(last[0]["continues"], last[0]["prev"]);
}

fn audit_lines_of(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A full disk cuts a line short. Here the write really fails: the server runs with a file-size
/// limit just above its audit log (`RLIMIT_FSIZE`, SIGXFSZ ignored so the write returns an
/// error). While it lasts calls fail closed, and the torn line is cut back at once, so the
/// file verifies meanwhile; once the limit is lifted the next line says how many bytes went
/// — a transient failure, not an outage.
#[tokio::test]
async fn a_write_cut_short_by_a_full_disk_is_repaired_once_space_returns() {
    #[cfg(target_os = "linux")]
    full_disk_then_space().await;
    #[cfg(not(target_os = "linux"))]
    eprintln!(
        "SKIPPED: this system has no prlimit(2) to cut a write short; the torn tail is covered by the unit tests of src/audit.rs"
    );
}

#[cfg(target_os = "linux")]
async fn full_disk_then_space() {
    use rlimit::Resource;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let demo = json!({"owner": "alice", "repo": "demo"});
    let mut setup = Setup::gitea().audit(&log);
    setup.shell = Some("trap '' XFSZ".into());
    let h = Harness::start(setup).await;
    h.forge.seed_repo("alice", "demo");
    assert!(!h.call("repoGet", demo.clone()).await.is_error);
    let pid = h.pid() as i32;
    let (mut soft, mut hard) = (0, 0);
    rlimit::prlimit(pid, Resource::FSIZE, None, Some((&mut soft, &mut hard))).unwrap();
    let room = 40;
    let full = std::fs::metadata(&log).unwrap().len() + room;
    if let Err(e) = rlimit::prlimit(pid, Resource::FSIZE, Some((full, hard)), None) {
        eprintln!(
            "SKIPPED: cannot limit the server's file size with prlimit ({e}); the torn tail is covered by the unit tests of src/audit.rs"
        );
        h.stop().await;
        return;
    }
    // Full: the line is cut short after `room` bytes; the call fails, and so does the next.
    for _ in 0..2 {
        let c = h.call("repoGet", demo.clone()).await;
        assert_eq!(c.kind(), "audit_failed", "{}", c.text);
    }
    assert_eq!(std::fs::metadata(&log).unwrap().len(), full - room, "the torn line was cut back");
    let (ok, report) = audit_verify(&[&log]);
    assert!(ok && report.contains("ok, 1 lines"), "{report}");
    // Space returns.
    rlimit::prlimit(pid, Resource::FSIZE, Some((soft, hard)), None).unwrap();
    assert!(!h.call("repoGet", demo).await.is_error);
    let stderr = h.stop_with_stderr().await;
    assert!(stderr.contains("its torn line was cut back"), "{stderr}");
    let lines = audit_lines(&log);
    assert_eq!(lines.len(), 2);
    // Two torn lines were cut: the first and the second call's.
    assert_eq!(lines[1]["cut_bytes"], 2 * room, "{:?}", lines[1]);
    let (ok, report) = audit_verify(&[&log]);
    assert!(ok && report.contains(&format!("line 2 records {} bytes of a torn write", 2 * room)), "{report}");
}

/// `args_hmac` is keyed: the SHA-256 of the arguments, which a dictionary of four words
/// recovered a password from, is not in the file, and `audit args-hmac` with the key matches
/// a call one knows of.
#[tokio::test]
async fn arguments_appear_only_as_a_keyed_hmac() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let h = Harness::start(Setup::gitea().process().audit(&log)).await;
    let args =
        json!({"username": "bob", "body": {"login_name": "bob", "password": "hunter2", "source_id": 0}});
    let _ = h.call("adminEditUser", args.clone()).await;
    h.stop().await;
    let text = std::fs::read_to_string(&log).unwrap();
    let line = &audit_lines(&log)[0];
    assert!(line.get("args_sha256").is_none(), "{line}");
    let canonical = r#"{"body":{"login_name":"bob","password":"hunter2","source_id":0},"username":"bob"}"#;
    let plain: String = sha2::Sha256::digest(canonical).iter().map(|b| format!("{b:02x}")).collect();
    assert!(!text.contains(&plain) && !text.contains("hunter2"), "{text}");
    let out = std::process::Command::new(support::bin())
        .args(["audit", "args-hmac", "--key-file"])
        .arg(log.with_file_name("audit.key"))
        .arg(args.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), line["args_hmac"], "{out:?}");
}

/// Results come compact by default: a nested user is its login, API links are left out, and
/// the envelope says so; `shape: "full"` gives the forge's own JSON, on the operation's tool,
/// through the call tool and the raw tool alike.
#[tokio::test]
async fn results_are_compact_by_default_and_full_on_request() {
    let h = Harness::start(Setup::gitea().env("RESULT_SHAPE", "compact")).await;
    h.forge.seed_issues("alice", "demo", 3);
    let args = json!({"owner": "alice", "repo": "demo"});
    let c = h.call("issueListIssues", args.clone()).await;
    let items = assert_envelope(&c).as_array().unwrap().clone();
    assert_eq!(c.json["shape"], "compact", "{}", c.text);
    assert_eq!(items.len(), 3, "{}", c.text);
    for item in &items {
        assert_eq!(item["user"], "alice", "{}", c.text);
        assert!(item.get("url").is_none() && item["html_url"].is_string(), "{}", c.text);
        assert!(item.as_object().unwrap().values().all(|v| v != "" && v != &Value::Null), "{}", c.text);
    }
    let full_calls = [
        ("issueListIssues", json!({"owner": "alice", "repo": "demo", "shape": "full"})),
        (
            "gitea_call_operation",
            json!({"operation_id": "issueListIssues", "arguments": {"owner": "alice", "repo": "demo"}, "shape": "full"}),
        ),
        (
            "gitea_call_operation",
            json!({"operation_id": "issueListIssues", "arguments": {"owner": "alice", "repo": "demo", "shape": "full"}}),
        ),
        ("gitea_api_request", json!({"method": "GET", "path": "/repos/alice/demo/issues", "shape": "full"})),
    ];
    for (tool, args) in full_calls {
        let c = h.call(tool, args.clone()).await;
        let data = assert_envelope(&c);
        assert!(c.json.get("shape").is_none(), "{tool} {args}: {}", c.text);
        assert_eq!(data[0]["user"]["login"], "alice", "{tool} {args}: {}", c.text);
        assert!(data[0]["url"].is_string(), "{tool} {args}: {}", c.text);
    }
    // The raw tool's result is typed by the operation its route reaches.
    let c = h.call("gitea_api_request", json!({"method": "GET", "path": "/repos/alice/demo/issues"})).await;
    assert_eq!(assert_envelope(&c)[0]["user"], "alice", "{}", c.text);
    h.stop().await;
}

/// `fields` keeps only the members asked for, of each item; a member the result type does
/// not have is refused, naming those it has, before anything is sent.
#[tokio::test]
async fn fields_keep_only_the_members_asked_and_unknown_ones_are_refused_unsent() {
    let h = Harness::start(Setup::gitea().env("RESULT_SHAPE", "compact")).await;
    h.forge.seed_issues("alice", "demo", 2);
    let calls = [
        ("issueListIssues", json!({"owner": "alice", "repo": "demo", "fields": ["number", "title", "user"]})),
        (
            "gitea_call_operation",
            json!({"operation_id": "issueListIssues", "arguments": {"owner": "alice", "repo": "demo", "fields": ["number", "title", "user"]}}),
        ),
        (
            "gitea_api_request",
            json!({"method": "GET", "path": "/repos/alice/demo/issues", "fields": ["number", "title", "user"]}),
        ),
    ];
    for (tool, args) in calls {
        let c = h.call(tool, args.clone()).await;
        let data = assert_envelope(&c);
        assert_eq!(
            data,
            &json!([{"number": 2, "user": "alice", "title": "issue 2"}, {"number": 1, "user": "alice", "title": "issue 1"}]),
            "{tool}: {}",
            c.text
        );
    }
    let c = h.call("issueGetIssue", json!({"owner": "alice", "repo": "demo", "index": 1, "shape": "full", "fields": ["user.login", "title"]})).await;
    assert_eq!(assert_envelope(&c), &json!({"title": "issue 1", "user": {"login": "alice"}}), "{}", c.text);

    h.forge.clear_requests();
    for (tool, args) in [
        ("issueListIssues", json!({"owner": "alice", "repo": "demo", "fields": ["number", "titel"]})),
        (
            "gitea_api_request",
            json!({"method": "GET", "path": "/repos/alice/demo/issues", "fields": ["titel"]}),
        ),
        ("issueListIssues", json!({"owner": "alice", "repo": "demo", "fields": ["milestone.name"]})),
        ("issueListIssues", json!({"owner": "alice", "repo": "demo", "fields": "title"})),
        ("issueListIssues", json!({"owner": "alice", "repo": "demo", "shape": "lean"})),
    ] {
        let c = h.call(tool, args.clone()).await;
        assert!(c.is_error, "{tool} {args}: {}", c.text);
        assert_eq!(c.kind(), "invalid_arguments", "{tool} {args}: {}", c.text);
    }
    let c = h.call("issueListIssues", json!({"owner": "alice", "repo": "demo", "fields": ["titel"]})).await;
    let message = c.json["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("titel") && message.contains("title, ") && message.contains("assignees"),
        "{message}"
    );
    assert_eq!(c.json["error"]["path"], "/fields/0", "{}", c.text);
    assert!(h.tool_requests().is_empty(), "nothing was sent: {:?}", h.tool_requests());
    h.stop().await;
}

/// Which clients get typed results: those of `STRUCTURED_CONTENT_FROM` (2025-06-18 unless
/// set) or a later protocol version see an output schema on every tool and get
/// `structuredContent` on a success, the same JSON as its text; older ones, or every client
/// with `never`, neither; no client gets it on an error result.
#[tokio::test]
async fn typed_results_go_to_clients_of_the_protocol_versions_the_setting_names() {
    use rmcp::ServiceExt;
    use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
    let forge = support::Forge::gitea().repo("alice", "demo").start().await;
    for (from, version, typed) in [
        (None, ProtocolVersion::V_2025_03_26, false),
        (None, ProtocolVersion::V_2025_06_18, true),
        (Some("2025-11-25"), ProtocolVersion::V_2025_06_18, false),
        (Some("2025-11-25"), ProtocolVersion::V_2025_11_25, true),
        (Some("never"), ProtocolVersion::V_2025_11_25, false),
    ] {
        let mut cmd = tokio::process::Command::new(support::bin());
        cmd.args(["serve", "--url", &forge.base_url(), "--flavor", "gitea"])
            .env_clear()
            .env("GITEA_TOKEN", ALICE_TOKEN)
            .stderr(std::process::Stdio::null());
        if let Some(from) = from {
            cmd.env("STRUCTURED_CONTENT_FROM", from);
        }
        let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd).spawn().unwrap();
        let mut info = ClientConfig::default();
        info.protocol_version = version.clone();
        let client = info.serve(transport).await.unwrap();
        let case = format!("STRUCTURED_CONTENT_FROM={from:?}, client {version}");
        let tools = client.list_all_tools().await.unwrap();
        assert!(tools.iter().all(|t| t.output_schema.is_some() == typed), "{case}");
        let call = |args: Value| {
            let mut p = CallToolRequestParams::new("repoGet");
            p = p.with_arguments(args.as_object().unwrap().clone());
            client.call_tool(p)
        };
        let ok = call(json!({"owner": "alice", "repo": "demo"})).await.unwrap();
        let text: Value = serde_json::from_str(&ok.content[0].as_text().unwrap().text).unwrap();
        assert_eq!(ok.structured_content.is_some(), typed, "{case}");
        if typed {
            assert_eq!(ok.structured_content.as_ref(), Some(&text), "{case}");
            assert_eq!(text["data"]["full_name"], "alice/demo");
        }
        let failed = call(json!({"owner": "alice", "repo": "missing"})).await.unwrap();
        assert_eq!((failed.is_error, failed.structured_content.is_some()), (Some(true), false), "{case}");
        // The schema tool gives the typed output schema only when asked for it.
        for (args, has) in [
            (json!({"operation_id": "repoGet"}), false),
            (json!({"operation_id": "repoGet", "output": "full"}), true),
        ] {
            let p = CallToolRequestParams::new("gitea_get_operation_schema")
                .with_arguments(args.as_object().unwrap().clone());
            let text = client.call_tool(p).await.unwrap().content[0].as_text().unwrap().text.clone();
            let answer: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(answer.get("output_schema").is_some(), has, "{case}: {text}");
        }
        client.cancel().await.unwrap();
    }
}

/// JSON Schema counts `1.0`, `1E2` and `-0` as integers, so they pass validation; they are
/// sent as the integers they are (`/issues/1`, never `/issues/1.0` or `-0.0`), in the path,
/// the query and the body, and a number no 64-bit integer holds is refused before sending.
#[tokio::test]
async fn integers_written_as_decimals_are_sent_as_integers() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.seed_repo("alice", "demo");
    h.forge.seed_issues("alice", "demo", 3);
    for (index, path) in [
        (json!(1.0), "/api/v1/repos/alice/demo/issues/1"),
        (json!(-0.0), "/api/v1/repos/alice/demo/issues/0"),
    ] {
        let _ = h.call("issueGetIssue", json!({"owner": "alice", "repo": "demo", "index": index})).await;
        assert_eq!(h.last().raw_path, path);
    }
    let c =
        h.call("issueListIssues", json!({"owner": "alice", "repo": "demo", "limit": 1E1, "page": 1.0})).await;
    assert_envelope(&c);
    let query = h.last().raw_query.unwrap_or_default();
    assert!(query.contains("limit=10") && query.contains("page=1"), "{query}");
    let body = json!({"title": "t", "milestone": 2.0});
    let _ =
        h.call("issueEditIssue", json!({"owner": "alice", "repo": "demo", "index": 2.0, "body": body})).await;
    let sent = h.last();
    assert_eq!(sent.raw_path, "/api/v1/repos/alice/demo/issues/2");
    assert_eq!(sent.json_body().unwrap()["milestone"].to_string(), "2");
    let before = h.tool_requests().len();
    let c = h.call("issueGetIssue", json!({"owner": "alice", "repo": "demo", "index": 1e300})).await;
    assert_eq!(c.kind(), "invalid_arguments", "{}", c.text);
    assert!(c.text.contains("64-bit integer"), "{}", c.text);
    assert_eq!(h.tool_requests().len(), before, "nothing sent");
    h.stop().await;
}

/// `fields` keeps members of a JSON result. Through the raw and the call tool it could reach
/// an operation that answers text or a file's bytes, where it was silently ignored: it is
/// refused before anything is sent, naming the operation and what it answers.
#[tokio::test]
async fn fields_on_an_operation_that_answers_text_or_bytes_is_refused_before_sending() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.seed_repo("alice", "demo");
    let before = h.tool_requests().len();
    for (tool, args) in [
        (
            "gitea_api_request",
            json!({"method": "GET", "path": "/repos/alice/demo/raw/README.md", "fields": ["name"]}),
        ),
        (
            "gitea_call_operation",
            json!({"operation_id": "repoDownloadPullDiffOrPatch", "arguments": {"owner": "alice", "repo": "demo", "index": 1, "diffType": "diff"}, "fields": ["x"]}),
        ),
    ] {
        let c = h.call(tool, args).await;
        assert_eq!(c.kind(), "invalid_arguments", "{}", c.text);
        assert!(c.text.contains("leave `fields` out"), "{}", c.text);
    }
    assert_eq!(h.tool_requests().len(), before, "nothing was sent");
    h.stop().await;
}

/// A full disk never lets a write reach the forge unrecorded: the line that says a write is
/// about to be sent is written first, and a write whose line cannot be written is refused,
/// not sent ("was NOT sent"); one whose outcome line cannot be written says that it WAS sent.
/// Every write the forge received has its intent line in the file, which verifies up to the
/// cut.
#[tokio::test]
async fn on_a_full_disk_no_write_reaches_the_forge_without_its_line() {
    #[cfg(target_os = "linux")]
    writes_on_a_full_disk().await;
    #[cfg(not(target_os = "linux"))]
    eprintln!("SKIPPED: this system has no prlimit(2) to fill a disk");
}

#[cfg(target_os = "linux")]
async fn writes_on_a_full_disk() {
    use rlimit::Resource;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let mut setup = Setup::gitea().audit(&log);
    setup.shell = Some("trap '' XFSZ".into());
    let h = Harness::start(setup).await;
    h.forge.seed_repo("alice", "demo");
    h.forge.seed_issues("alice", "demo", 1);
    assert!(!h.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await.is_error);
    let pid = h.pid() as i32;
    let (mut soft, mut hard) = (0, 0);
    rlimit::prlimit(pid, Resource::FSIZE, None, Some((&mut soft, &mut hard))).unwrap();
    // Room for a few lines, not for all.
    let full = std::fs::metadata(&log).unwrap().len() + 3000;
    if let Err(e) = rlimit::prlimit(pid, Resource::FSIZE, Some((full, hard)), None) {
        eprintln!("SKIPPED: cannot limit the server's file size with prlimit ({e})");
        h.stop().await;
        return;
    }
    let (mut succeeded, mut refused, mut sent_unrecorded) = (0, 0, 0);
    for i in 0..20 {
        let args =
            json!({"owner": "alice", "repo": "demo", "index": 1, "body": {"body": format!("comment {i}")}});
        let c = h.call("issueCreateComment", args).await;
        if !c.is_error {
            succeeded += 1;
            continue;
        }
        assert_eq!(c.kind(), "audit_failed", "{}", c.text);
        let message = c.json["error"]["message"].as_str().unwrap();
        if message.contains("was NOT sent") {
            refused += 1;
        } else {
            assert!(message.contains("WAS sent to the forge, which answered 201"), "{message}");
            sent_unrecorded += 1;
        }
    }
    let writes = h.tool_requests().iter().filter(|r| r.method == "POST").count();
    assert!(
        refused > 0 && succeeded > 0,
        "{succeeded} ok, {refused} refused, {sent_unrecorded} sent without their outcome"
    );
    assert_eq!(writes, succeeded + sent_unrecorded, "a write reached the forge that its call denies");
    let lines = audit_lines(&log);
    let sending = lines.iter().filter(|l| l["outcome"] == "sending").count();
    assert_eq!(sending, writes, "every write the forge received has its intent line: {lines:#?}");
    // Each outcome line names its intent line, and both carry the call's id.
    for l in lines.iter().filter(|l| l["tool"] == "issueCreateComment" && l["outcome"] != "sending") {
        let intent = lines.iter().find(|i| i["seq"] == l["intent_seq"]).expect("its intent line");
        assert_eq!((&intent["id"], &intent["outcome"]), (&l["id"], &json!("sending")));
    }
    let (ok, report) = audit_verify(&[&log]);
    assert!(ok, "the file verifies up to the cut: {report}");
    rlimit::prlimit(pid, Resource::FSIZE, Some((soft, hard)), None).unwrap();
    h.stop().await;
}
