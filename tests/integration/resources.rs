//! MCP resources: a file at a ref, an issue with its comments, a pull request —
//! read with `resources/read` through the same identity, policy, guard and envelope as the
//! tools, over stdio (rmcp client) and both HTTP transports (per-request tokens).

use crate::support;

use base64::Engine;
use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};
use support::http::McpClient;
use support::{ALICE_TOKEN, Forge, Harness, Setup};

/// A file on `feature/x` that carries the server's own token, an issue with two comments,
/// and a pull request from `feature/x` into `main`.
async fn seed(h: &Harness) {
    h.forge.seed_repo("o", "r");
    let content = base64::engine::general_purpose::STANDARD.encode(format!("deploy with {ALICE_TOKEN}\n"));
    for (tool, args) in [
        (
            "repoCreateFile",
            json!({"owner": "o", "repo": "r", "filepath": "docs/a b.md",
            "body": {"content": content, "new_branch": "feature/x", "message": "docs"}}),
        ),
        ("issueCreateIssue", json!({"owner": "o", "repo": "r", "body": {"title": "Crash on start"}})),
        ("issueCreateComment", json!({"owner": "o", "repo": "r", "index": 1, "body": {"body": "first"}})),
        ("issueCreateComment", json!({"owner": "o", "repo": "r", "index": 1, "body": {"body": "second"}})),
        (
            "gitea_call_operation",
            json!({"operation_id": "repoCreatePullRequest", "arguments": {"owner": "o", "repo": "r",
            "body": {"title": "Add docs", "head": "feature/x", "base": "main"}}}),
        ),
    ] {
        let c = h.call(tool, args).await;
        assert!(!c.is_error, "{tool}: {}", c.text);
    }
}

async fn read(h: &Harness, uri: &str) -> Result<Value, rmcp::ServiceError> {
    let r = h.client.read_resource(ReadResourceRequestParams::new(uri)).await?;
    assert_eq!(r.contents.len(), 1);
    let ResourceContents::TextResourceContents { uri: got, mime_type, text, .. } = &r.contents[0] else {
        panic!("a text resource")
    };
    assert_eq!(got, uri);
    assert_eq!(mime_type.as_deref(), Some("application/json"));
    Ok(serde_json::from_str(text).unwrap())
}

fn json_rpc_error(e: rmcp::ServiceError) -> (i32, String, Value) {
    match e {
        rmcp::ServiceError::McpError(d) => (d.code.0, d.message.to_string(), d.data.unwrap_or(Value::Null)),
        other => panic!("not a JSON-RPC error: {other}"),
    }
}

#[tokio::test]
async fn templates_are_listed_and_each_reads_through_the_pipeline() {
    let h = Harness::start(Setup::gitea()).await;
    seed(&h).await;
    let templates = h.client.list_all_resource_templates().await.unwrap();
    let uris: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(
        uris,
        [
            "gitea://repos/{owner}/{repo}/contents/{+path}{?ref}",
            "gitea://repos/{owner}/{repo}/issues/{index}",
            "gitea://repos/{owner}/{repo}/pulls/{index}",
            "gitea://attachments/{uuid}"
        ]
    );

    // A file at a ref: the ref and the path are percent-decoded, the path keeps its '/',
    // and the guard redacts the token the file carries.
    h.forge.clear_requests();
    let file = read(&h, "gitea://repos/o/r/contents/docs/a%20b.md?ref=feature%2Fx").await.unwrap();
    assert_eq!(file["identity"]["login"], "alice");
    assert_eq!(file["request"]["path"], "/repos/o/r/raw/docs/a%20b.md");
    assert_eq!(file["data"], "deploy with [REDACTED]\n");
    assert!(!file.to_string().contains(ALICE_TOKEN));
    assert!(file["untrusted_content"].as_str().unwrap().contains("untrusted"));
    let sent = h.last();
    assert_eq!(sent.raw_path, "/api/v1/repos/o/r/raw/docs/a%20b.md");
    assert_eq!(sent.raw_query.as_deref(), Some("ref=feature%2Fx"));

    // An issue with its comments: two requests, one envelope.
    let issue = read(&h, "gitea://repos/o/r/issues/1").await.unwrap();
    assert_eq!(issue["data"]["issue"]["title"], "Crash on start");
    let comments: Vec<&str> =
        issue["data"]["comments"].as_array().unwrap().iter().map(|c| c["body"].as_str().unwrap()).collect();
    assert_eq!(comments, ["first", "second"]);
    assert_eq!(issue["request"]["path"], "/repos/o/r/issues/1");

    // A pull request.
    let pull = read(&h, "gitea://repos/o/r/pulls/2").await.unwrap();
    assert_eq!(pull["data"]["title"], "Add docs");
    assert_eq!(pull["data"]["head"]["ref"], "feature/x");
    h.stop().await;
}

/// In the compact shape (the default), a resource's JSON is compact like a tool's result and
/// says so; a file's text is the same in both shapes.
#[tokio::test]
async fn resources_come_in_the_servers_shape() {
    let h = Harness::start(Setup::gitea().env("RESULT_SHAPE", "compact")).await;
    seed(&h).await;
    let issue = read(&h, "gitea://repos/o/r/issues/1").await.unwrap();
    assert_eq!(issue["shape"], "compact", "{issue}");
    assert_eq!(issue["data"]["issue"]["user"], "alice", "{issue}");
    assert!(issue["data"]["issue"].get("url").is_none(), "{issue}");
    assert_eq!(issue["data"]["comments"][0]["user"], "alice", "{issue}");
    assert_eq!(issue["data"]["comments"][1]["body"], "second", "{issue}");
    let pull = read(&h, "gitea://repos/o/r/pulls/2").await.unwrap();
    assert_eq!(
        (&pull["shape"], &pull["data"]["head"]["ref"]),
        (&json!("compact"), &json!("feature/x")),
        "{pull}"
    );
    let file = read(&h, "gitea://repos/o/r/contents/docs/a%20b.md?ref=feature%2Fx").await.unwrap();
    assert!(file.get("shape").is_none(), "{file}");
    assert_eq!(file["data"], "deploy with [REDACTED]\n");
    h.stop().await;
}

#[tokio::test]
async fn missing_resources_bad_uris_and_refused_operations_are_clear_errors() {
    let h = Harness::start(Setup::gitea().env("DISABLED_TOOLS", "issueGetComments")).await;
    seed(&h).await;
    let (code, message, data) = json_rpc_error(read(&h, "gitea://repos/o/r/pulls/99").await.unwrap_err());
    assert_eq!(code, -32002, "{message}");
    assert_eq!(data["kind"], "not_found");
    assert_eq!(data["status"], 404);
    let (code, message, _) = json_rpc_error(read(&h, "gitea://repos/o/r/wiki/Home").await.unwrap_err());
    assert_eq!(code, -32602);
    assert!(message.contains("gitea://repos/{owner}/{repo}/pulls/{index}"), "{message}");
    let (_, message, data) = json_rpc_error(read(&h, "gitea://repos/o/r/issues/1").await.unwrap_err());
    assert_eq!(data["kind"], "denied");
    assert!(message.contains("issueGetComments") && message.contains("DISABLED_TOOLS"), "{message}");
    // The server keeps serving.
    assert!(read(&h, "gitea://repos/o/r/pulls/2").await.is_ok());
    h.stop().await;
}

#[tokio::test]
async fn resources_stay_readable_when_the_server_is_read_only() {
    let h = Harness::start(Setup::forgejo().env("READ_ONLY", "true")).await;
    h.forge.seed_issues("o", "r", 1);
    let issue = read(&h, "gitea://repos/o/r/issues/1").await.unwrap();
    assert_eq!(issue["data"]["issue"]["number"], 1);
    assert_eq!(issue["data"]["comments"], json!([]));
    h.stop().await;
}

const BOB_TOKEN: &str = "tok-bob-5c0ffee5b0b";

/// Over HTTP a resource is read under the request's own token, on both transports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_resource_is_read_as_the_caller() {
    for transport in ["http", "sse"] {
        let (forge, server) =
            Forge::gitea().user(BOB_TOKEN, "bob").issues("o", "r", 1).serve_http(transport, &[]).await;
        let bob = format!("token {BOB_TOKEN}");
        let c = McpClient::connect(&server, Some(&bob)).await.unwrap();
        let resp = c
            .request("resources/read", json!({"uri": "gitea://repos/o/r/issues/1"}), Some(&bob))
            .await
            .unwrap();
        let text = resp["result"]["contents"][0]["text"].as_str().unwrap_or_else(|| panic!("{resp}"));
        let env: Value = serde_json::from_str(text).unwrap();
        assert_eq!(env["identity"]["login"], "bob", "{transport}");
        let reads: Vec<_> = forge
            .requests()
            .into_iter()
            .filter(|r| r.raw_path.starts_with("/api/v1/repos/o/r/issues/1"))
            .collect();
        assert_eq!(reads.len(), 2, "{transport}: issue and comments");
        for r in reads {
            assert_eq!(r.header("authorization"), Some(bob.as_str()), "{transport}: {}", r.raw_path);
        }
    }
}

/// Binary content over `MAX_INLINE_BINARY_BYTES` (8,192 by default) comes as a link: `data`
/// says its type and size, `link` and a `resource_link` item name the resource, and reading
/// it gives the bytes as a blob of their type, whole even beyond the characters a tool result
/// may have (`MAX_TOOL_RESPONSE_CHARS`); smaller content stays inline. For a raw file
/// (its own tool or the call tool) and an attachment.
#[tokio::test]
async fn large_binary_content_comes_as_a_link_whose_read_gives_the_bytes() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.seed_repo("o", "r");
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let large: Vec<u8> = (0..60_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let small: Vec<u8> = (0..100u8).collect();
    for (path, bytes, branch) in [("img/a logo.png", &large, "new_branch"), ("tiny.bin", &small, "branch")] {
        let body = json!({"content": b64(bytes), "message": "add", branch: "art"});
        let c = h
            .call("repoCreateFile", json!({"owner": "o", "repo": "r", "filepath": path, "body": body}))
            .await;
        assert!(!c.is_error, "{}", c.text);
    }
    let raw = json!({"owner": "o", "repo": "r", "filepath": "img/a logo.png", "ref": "art"});
    for (tool, args) in [
        ("repoGetRawFile", raw.clone()),
        ("gitea_call_operation", json!({"operation_id": "repoGetRawFile", "arguments": raw})),
    ] {
        let c = h.call(tool, args).await;
        assert_eq!(
            c.json["data"],
            json!({"content_type": "application/octet-stream", "size": 60_000}),
            "{}",
            c.text
        );
        let uri = "gitea://repos/o/r/contents/img/a%20logo.png?ref=art";
        assert_eq!(
            c.json["link"],
            json!({"uri": uri, "mime_type": "application/octet-stream", "size": 60_000})
        );
        // A few hundred bytes where the base64 alone was 80,000.
        eprintln!("{tool}: {} bytes as a link", c.text.len());
        assert!(c.text.len() < 800, "{}", c.text);
        let r = h.client.read_resource(ReadResourceRequestParams::new(uri)).await.unwrap();
        let ResourceContents::BlobResourceContents { uri: got, mime_type, blob, .. } = &r.contents[0] else {
            panic!("a blob: {:?}", r.contents)
        };
        assert_eq!((got.as_str(), mime_type.as_deref()), (uri, Some("application/octet-stream")));
        assert_eq!(base64::engine::general_purpose::STANDARD.decode(blob).unwrap(), large);
    }
    let c = h
        .call("repoGetRawFile", json!({"owner": "o", "repo": "r", "filepath": "tiny.bin", "ref": "art"}))
        .await;
    assert_eq!(c.json["data"]["content_base64"], b64(&small), "{}", c.text);
    assert!(c.json.get("link").is_none());

    h.call("issueCreateIssue", json!({"owner": "o", "repo": "r", "body": {"title": "t"}})).await;
    let up = json!({"owner": "o", "repo": "r", "index": 1,
        "attachment": {"content_base64": b64(&large), "filename": "dump.bin", "content_type": "application/octet-stream"}});
    let c = h.call("issueCreateIssueAttachment", up).await;
    let uuid = c.json["data"]["uuid"].as_str().unwrap().to_owned();
    let d = h.call("gitea_download_attachment", json!({"uuid": uuid})).await;
    let uri = format!("gitea://attachments/{uuid}");
    assert_eq!(d.json["link"]["uri"], uri.as_str(), "{}", d.text);
    assert!(d.json["data"].get("content_base64").is_none());
    let r = h.client.read_resource(ReadResourceRequestParams::new(uri.as_str())).await.unwrap();
    let ResourceContents::BlobResourceContents { blob, .. } = &r.contents[0] else { panic!("a blob") };
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(blob).unwrap(), large);
    h.stop().await;
}

/// Binary content over `MAX_BINARY_BYTES` is linked too, not refused: the tool call only
/// counts its bytes (it never holds them) and links the resource, whose read serves it up to
/// `MAX_RESOURCE_BYTES` — with a length or chunked without one; past that both say which
/// setting to raise. A known secret in it withholds the read.
#[tokio::test]
async fn binary_over_max_binary_bytes_is_linked_and_read_up_to_max_resource_bytes() {
    use fake_forge::{Script, ScriptBody, ScriptedResponse};
    let h = Harness::start(Setup::gitea().env("MAX_RESOURCE_BYTES", "4194304")).await;
    h.forge.seed_repo("o", "r");
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 13 % 251) as u8).collect();
    let raw = |name: &str, body: ScriptBody| {
        Script::always(
            Some("GET"),
            &format!("/api/v1/repos/o/r/raw/{name}"),
            ScriptedResponse::status(200)
                .with_header("content-type", "application/octet-stream")
                .with_body(body),
        )
    };
    h.forge.script(raw("big.bin", ScriptBody::Bytes(big.clone())));
    let chunks: Vec<Vec<u8>> = big.chunks(256 * 1024).map(<[u8]>::to_vec).collect();
    h.forge
        .script(raw("chunked.bin", ScriptBody::Chunked { chunks, delay_between: std::time::Duration::ZERO }));
    for name in ["big.bin", "chunked.bin"] {
        let c = h.call("repoGetRawFile", json!({"owner": "o", "repo": "r", "filepath": name})).await;
        assert!(!c.is_error, "{name}: {}", c.text);
        assert_eq!(
            c.json["data"],
            json!({"content_type": "application/octet-stream", "size": 3_000_000}),
            "{}",
            c.text
        );
        let uri = format!("gitea://repos/o/r/contents/{name}");
        assert_eq!(c.json["link"]["uri"], uri.as_str(), "{}", c.text);
        let r = h.client.read_resource(ReadResourceRequestParams::new(uri.as_str())).await.unwrap();
        let ResourceContents::BlobResourceContents { blob, .. } = &r.contents[0] else { panic!("a blob") };
        assert!(base64::engine::general_purpose::STANDARD.decode(blob).unwrap() == big, "{name}: the bytes");
    }
    // Past MAX_RESOURCE_BYTES: refused, naming it, by the call and by the read.
    let huge = vec![7u8; 5_000_000];
    h.forge.script(raw("huge.bin", ScriptBody::Bytes(huge)));
    let c = h.call("repoGetRawFile", json!({"owner": "o", "repo": "r", "filepath": "huge.bin"})).await;
    assert_eq!(c.kind(), "payload_too_large", "{}", c.text);
    assert!(c.text.contains("MAX_RESOURCE_BYTES"), "{}", c.text);
    let e = h
        .client
        .read_resource(ReadResourceRequestParams::new("gitea://repos/o/r/contents/huge.bin"))
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("MAX_RESOURCE_BYTES"), "{e:?}");
    // A known secret inside: the read is withheld, not served.
    let mut secret = big.clone();
    secret.extend_from_slice(support::ALICE_TOKEN.as_bytes());
    h.forge.script(raw("leak.bin", ScriptBody::Bytes(secret)));
    let c = h.call("repoGetRawFile", json!({"owner": "o", "repo": "r", "filepath": "leak.bin"})).await;
    assert!(c.json["link"].is_object(), "{}", c.text);
    let e = h
        .client
        .read_resource(ReadResourceRequestParams::new("gitea://repos/o/r/contents/leak.bin"))
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("secret_blocked"), "{e:?}");
    h.stop().await;
}
