//! The server's own policy over which tools exist: READ_ONLY, ENABLED_TOOLS, DISABLED_TOOLS
//! (issue 5, read-only part). Hidden tools are refused as `denied`, never sent.

mod support;

use serde_json::json;
use support::{Harness, Setup};

#[tokio::test]
async fn read_only_hides_and_refuses_every_write_including_through_the_raw_tool() {
    let h = Harness::start(Setup::gitea().env("READ_ONLY", "true")).await;
    let tools = h.tools().await;
    // Gitea 1.27 has 243 GET operations; both built-in tools stay.
    assert_eq!(tools.len(), 243 + 2);
    assert!(tools.iter().all(|t| t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true)
        || t.name == "gitea_api_request"));
    let c = h.call("issueCreateIssue", json!({"owner": "o", "repo": "r", "body": {"title": "t"}})).await;
    assert_eq!(c.kind(), "denied", "{}", c.text);
    assert!(c.json["error"]["message"].as_str().unwrap().contains("READ_ONLY"));
    let c = h
        .call(
            "gitea_api_request",
            json!({"method": "POST", "path": "/repos/o/r/issues", "body": {"title": "t"}}),
        )
        .await;
    assert_eq!(c.kind(), "denied", "{}", c.text);
    let c = h.call("gitea_api_request", json!({"method": "delete", "path": "/repos/o/r"})).await;
    assert_eq!(c.kind(), "denied", "{}", c.text);
    assert!(h.tool_requests().is_empty(), "nothing was sent");
    h.forge.seed_repo("o", "r");
    assert!(!h.call("gitea_api_request", json!({"method": "GET", "path": "/repos/o/r"})).await.is_error);
    assert!(!h.call("repoGet", json!({"owner": "o", "repo": "r"})).await.is_error);
    h.stop().await;

    let h = Harness::start(Setup::gitea().env("READ_ONLY", "false")).await;
    assert_eq!(h.tools().await.len(), 484);
    h.stop().await;
}

#[tokio::test]
async fn enabled_tools_keeps_only_the_named_ones_and_disabled_tools_still_wins() {
    let h = Harness::start(
        Setup::gitea()
            .env("ENABLED_TOOLS", "repoGet, issueGetIssue,gitea_api_request")
            .env("DISABLED_TOOLS", "issueGetIssue"),
    )
    .await;
    let mut names: Vec<String> = h.tools().await.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["gitea_api_request", "repoGet"]);
    let c = h.call("issueGetIssue", json!({"owner": "o", "repo": "r", "index": 1})).await;
    assert_eq!(c.kind(), "denied");
    let c = h.call("repoDelete", json!({"owner": "o", "repo": "r"})).await;
    assert_eq!(c.kind(), "denied");
    assert!(c.json["error"]["message"].as_str().unwrap().contains("ENABLED_TOOLS"));
    assert!(h.tool_requests().is_empty());
    h.stop().await;
}
