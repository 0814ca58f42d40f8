//! Over HTTP a request may narrow the server's tool surface for itself — `X-MCP-Toolsets`,
//! `X-MCP-Readonly`, `X-MCP-Disabled-Tools` — and the repositories it may touch —
//! `X-MCP-Allowed-Repos`, `X-MCP-Write-Allowed-Repos` — and never widen either. Each scenario
//! runs on both transports (`::http` Streamable HTTP, `::sse` legacy SSE), and checks
//! `tools/list`, refused calls (never sent) and what the forge received.

use crate::support;

use fake_forge::FakeForge;
use serde_json::{Value, json};
use support::Forge;
use support::http::{ACCEPT_BOTH, HttpServer, McpClient, http_client, tool_result};

on_both_transports!(
    toolsets_header_narrows_the_list_and_cannot_add_toolsets,
    readonly_header_refuses_writes_on_every_path_for_that_request_only,
    disabled_tools_header_removes_tools_for_that_request_only,
    headers_cannot_undo_the_servers_read_only_or_disabled_tools,
    repo_allowlist_headers_narrow_every_path_and_never_widen,
);

/// A forge with `o/r`, alice's server on `transport` with `env` in this process, and a
/// session of its own.
async fn start(transport: &str, env: &[(&str, &str)]) -> (FakeForge, HttpServer, McpClient) {
    let (forge, server) = Forge::gitea().repo("o", "r").serve_http(transport, env).await;
    let client = McpClient::connect(&server, None).await.expect("connect");
    (forge, server, client)
}

async fn listed(c: &McpClient) -> Vec<String> {
    let resp = c.request("tools/list", json!({}), None).await.expect("tools/list");
    resp["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{resp}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn writes_sent(forge: &FakeForge) -> usize {
    forge.requests().iter().filter(|r| r.method != "GET").count()
}

async fn toolsets_header_narrows_the_list_and_cannot_add_toolsets(transport: &str) {
    let (_forge, _server, mut c) = start(transport, &[("TOOLSETS", "pulls,issues")]).await;
    let all = listed(&c).await;
    assert!(all.contains(&"repoMergePullRequest".to_owned()) && all.contains(&"issueCreateIssue".to_owned()));
    c.set_headers(&[("X-MCP-Toolsets", "pulls")]);
    let narrowed = listed(&c).await;
    assert!(narrowed.contains(&"repoMergePullRequest".to_owned()));
    assert!(!narrowed.contains(&"issueCreateIssue".to_owned()), "issues were narrowed away");
    assert!(narrowed.contains(&"gitea_call_operation".to_owned()), "the discovery tools stay");
    // A toolset the server does not list is not added by asking.
    c.set_headers(&[("X-MCP-Toolsets", "admin,pulls")]);
    let asked = listed(&c).await;
    assert!(!asked.iter().any(|n| n.starts_with("admin")), "{asked:?}");
    assert_eq!(asked, narrowed);
    // `all` in a header means "everything the server lists", not more.
    c.set_headers(&[("X-MCP-Toolsets", "all")]);
    assert_eq!(listed(&c).await, all);
    // A header the server cannot understand is refused, not ignored.
    c.set_headers(&[("X-MCP-Toolsets", "pulls,nonsense")]);
    let err = c.request("tools/list", json!({}), None).await.unwrap_err();
    assert_eq!(err.0, 400, "{err:?}");
    assert!(err.1.contains("unknown toolset") && err.1.contains("nonsense"), "{err:?}");
}

async fn readonly_header_refuses_writes_on_every_path_for_that_request_only(transport: &str) {
    let (forge, _server, mut c) = start(transport, &[]).await;
    c.set_headers(&[("X-MCP-Readonly", "true")]);
    let names = listed(&c).await;
    assert!(!names.contains(&"issueCreateIssue".to_owned()) && names.contains(&"issueListIssues".to_owned()));
    let create = json!({"owner": "o", "repo": "r", "body": {"title": "t"}});
    for (tool, args) in [
        ("issueCreateIssue", create.clone()),
        ("gitea_api_request", json!({"method": "POST", "path": "/repos/o/r/issues", "body": {"title": "t"}})),
        ("gitea_call_operation", json!({"operation_id": "issueCreateIssue", "arguments": create})),
    ] {
        let r = tool_result(&c.call(tool, args, None).await.unwrap());
        assert_eq!(r.kind(), "denied", "{tool}: {}", r.text);
        assert!(r.text.contains("X-MCP-Readonly"), "{}", r.text);
    }
    let search = tool_result(
        &c.call("gitea_search_operations", json!({"query": "create an issue"}), None).await.unwrap(),
    );
    assert!(
        search.json["results"].as_array().unwrap().iter().all(|r| r["method"] == "GET"),
        "{}",
        search.text
    );
    assert!(
        !tool_result(&c.call("repoGet", json!({"owner": "o", "repo": "r"}), None).await.unwrap()).is_error
    );
    assert_eq!(writes_sent(&forge), 0, "nothing was written");
    // The next request without the header is not read-only: the narrowing was per request.
    c.set_headers(&[]);
    let r = tool_result(
        &c.call("issueCreateIssue", json!({"owner": "o", "repo": "r", "body": {"title": "t"}}), None)
            .await
            .unwrap(),
    );
    assert!(!r.is_error, "{}", r.text);
    assert_eq!(writes_sent(&forge), 1);
    // `false` narrows nothing; an unknown value is refused.
    c.set_headers(&[("X-MCP-Readonly", "false")]);
    assert!(listed(&c).await.contains(&"issueCreateIssue".to_owned()));
    c.set_headers(&[("X-MCP-Readonly", "perhaps")]);
    assert_eq!(c.request("tools/list", json!({}), None).await.unwrap_err().0, 400);
}

async fn disabled_tools_header_removes_tools_for_that_request_only(transport: &str) {
    let (forge, _server, mut c) = start(transport, &[]).await;
    c.set_headers(&[("X-MCP-Disabled-Tools", "repoGet, gitea_api_request")]);
    let names = listed(&c).await;
    assert!(!names.contains(&"repoGet".to_owned()) && !names.contains(&"gitea_api_request".to_owned()));
    for (tool, args) in [
        ("repoGet", json!({"owner": "o", "repo": "r"})),
        (
            "gitea_call_operation",
            json!({"operation_id": "repoGet", "arguments": {"owner": "o", "repo": "r"}}),
        ),
        ("gitea_api_request", json!({"method": "GET", "path": "/repos/o/r"})),
    ] {
        let r = tool_result(&c.call(tool, args, None).await.unwrap());
        assert_eq!(r.kind(), "denied", "{tool}: {}", r.text);
    }
    assert!(forge.requests().iter().all(|r| r.raw_path != "/api/v1/repos/o/r"), "nothing was sent");
    c.set_headers(&[]);
    assert!(
        !tool_result(&c.call("repoGet", json!({"owner": "o", "repo": "r"}), None).await.unwrap()).is_error
    );
}

async fn headers_cannot_undo_the_servers_read_only_or_disabled_tools(transport: &str) {
    let (forge, _server, mut c) =
        start(transport, &[("READ_ONLY", "true"), ("DISABLED_TOOLS", "repoGet"), ("TOOLSETS", "core")]).await;
    c.set_headers(&[("X-MCP-Readonly", "false"), ("X-MCP-Disabled-Tools", ""), ("X-MCP-Toolsets", "all")]);
    let names = listed(&c).await;
    assert!(!names.contains(&"repoGet".to_owned()) && !names.contains(&"issueCreateIssue".to_owned()));
    assert!(
        !names.contains(&"repoListTags".to_owned()),
        "X-MCP-Toolsets: all lists only what the server lists"
    );
    let r = tool_result(
        &c.call("issueCreateIssue", json!({"owner": "o", "repo": "r", "body": {"title": "t"}}), None)
            .await
            .unwrap(),
    );
    assert_eq!(r.kind(), "denied");
    let r = tool_result(&c.call("repoGet", json!({"owner": "o", "repo": "r"}), None).await.unwrap());
    assert_eq!(r.kind(), "denied");
    assert_eq!(writes_sent(&forge), 0);
}

/// Stateless requests (protocol 2026-07-28, no session) narrow the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_requests_narrow_with_the_same_headers() {
    let forge = Forge::gitea().start().await;
    let server = HttpServer::in_process(&forge.base_url(), "http", &[]).await;
    let list = |headers: Vec<(&'static str, &'static str)>| {
        let url = server.url("/mcp");
        async move {
            let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities": {}});
            let mut req = http_client()
                .post(url)
                .header("content-type", "application/json")
                .header("accept", ACCEPT_BOTH)
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/list")
                .body(
                    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
                        .to_string(),
                );
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let resp = req.send().await.unwrap();
            let text = resp.text().await.unwrap();
            let v = support::http::messages_of(&text)
                .into_iter()
                .next()
                .unwrap_or_else(|| panic!("no message: {text}"));
            v["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    let everything = list(vec![]).await;
    let pulls = list(vec![("X-MCP-Toolsets", "pulls")]).await;
    assert!(pulls.len() < everything.len());
    assert!(pulls.iter().all(|n| everything.contains(n)));
    let read_only = list(vec![("X-MCP-Readonly", "1")]).await;
    assert!(
        !read_only.contains(&"repoCreateFile".to_owned())
            && everything.contains(&"repoCreateFile".to_owned())
    );
}

async fn repo_allowlist_headers_narrow_every_path_and_never_widen(transport: &str) {
    let (forge, _server, mut c) =
        start(transport, &[("ALLOWED_REPOS", "o/*,bob/demo"), ("WRITE_ALLOWED_REPOS", "o/*")]).await;
    for (owner, name) in [("o", "other"), ("bob", "demo"), ("bob", "secret")] {
        forge.seed_issues(owner, name, 1);
    }
    let everything = listed(&c).await;
    let call = |tool: &'static str, args: Value| {
        let c = &c;
        async move { tool_result(&c.call(tool, args, None).await.unwrap()) }
    };
    // The server's own lists hold over HTTP on every path.
    for (tool, args) in [
        ("repoGet", json!({"owner": "bob", "repo": "secret"})),
        ("gitea_api_request", json!({"method": "GET", "path": "/repos/Bob/Secret/issues"})),
        (
            "gitea_call_operation",
            json!({"operation_id": "repoGet", "arguments": {"owner": "bob", "repo": "secret"}}),
        ),
        ("issueCreateIssue", json!({"owner": "bob", "repo": "demo", "body": {"title": "t"}})),
    ] {
        let r = call(tool, args).await;
        assert_eq!(r.kind(), "denied", "{tool}: {}", r.text);
        assert!(r.text.contains("ALLOWED_REPOS"), "{}", r.text);
    }
    // A request narrows to one repository; tools/list does not change.
    c.set_headers(&[("X-MCP-Allowed-Repos", "o/r")]);
    assert_eq!(listed(&c).await, everything, "the allowlists are about data, not tools");
    for (tool, args) in [
        ("repoGet", json!({"owner": "o", "repo": "other"})),
        ("gitea_api_request", json!({"method": "GET", "path": "/repos/bob/demo"})),
        (
            "gitea_call_operation",
            json!({"operation_id": "issueListIssues", "arguments": {"owner": "O", "repo": "Other"}}),
        ),
    ] {
        let r = tool_result(&c.call(tool, args, None).await.unwrap());
        assert_eq!(r.kind(), "denied", "{tool}: {}", r.text);
        assert!(r.text.contains("X-MCP-Allowed-Repos"), "{}", r.text);
    }
    let r = tool_result(&c.call("repoGet", json!({"owner": "o", "repo": "r"}), None).await.unwrap());
    assert!(!r.is_error, "{}", r.text);
    // A listing is filtered to the request's list as well.
    let r = tool_result(&c.call("repoSearch", json!({"q": ""}), None).await.unwrap());
    let names: Vec<&str> =
        r.json["data"]["data"].as_array().unwrap().iter().map(|x| x["full_name"].as_str().unwrap()).collect();
    assert_eq!(names, ["o/r"], "{}", r.text);
    assert_eq!(r.json["filtered"]["removed"], 3, "{}", r.text);
    // Asking for more than the server allows gets nothing more.
    c.set_headers(&[("X-MCP-Allowed-Repos", "*"), ("X-MCP-Write-Allowed-Repos", "*")]);
    for (tool, args) in [
        ("repoGet", json!({"owner": "bob", "repo": "secret"})),
        ("issueCreateIssue", json!({"owner": "bob", "repo": "demo", "body": {"title": "t"}})),
    ] {
        let r = tool_result(&c.call(tool, args, None).await.unwrap());
        assert_eq!(r.kind(), "denied", "{tool}: {}", r.text);
    }
    // The write header narrows writes only.
    c.set_headers(&[("X-MCP-Write-Allowed-Repos", "o/r")]);
    let r = tool_result(
        &c.call("issueCreateIssue", json!({"owner": "o", "repo": "other", "body": {"title": "t"}}), None)
            .await
            .unwrap(),
    );
    assert!(r.kind() == "denied" && r.text.contains("X-MCP-Write-Allowed-Repos"), "{}", r.text);
    assert!(
        !tool_result(&c.call("repoGet", json!({"owner": "o", "repo": "other"}), None).await.unwrap())
            .is_error
    );
    assert_eq!(writes_sent(&forge), 0, "nothing was written");
    assert!(
        forge.requests().iter().all(|r| !r.raw_path.contains("secret")),
        "nothing about bob/secret was sent"
    );
    // A list the server cannot understand is refused, not ignored.
    for bad in ["", "o", "o/r/x", "o/r, bad name/x"] {
        c.set_headers(&[("X-MCP-Allowed-Repos", bad)]);
        let err = c.request("tools/list", json!({}), None).await.unwrap_err();
        assert_eq!(err.0, 400, "{bad:?}: {err:?}");
        assert!(err.1.contains("X-MCP-Allowed-Repos"), "{err:?}");
    }
}
