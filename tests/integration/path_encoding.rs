//! How path values are encoded: one test per row of `specs/wildcard-params.md` (catch-all
//! routes keep a literal `/`, each segment still encoded) and per single-segment example
//! (a `/` inside the value is sent as `%2F`). Each call goes through the binary; the fake
//! forge records the raw path and which route its chi-like router matched.

use crate::support;

use serde_json::{Value, json};
use support::{Harness, Setup};

/// Call `tool` and assert the exact raw path the forge received and the route it reached.
async fn sends(h: &Harness, tool: &str, args: Value, raw_path: &str) {
    let mut args = args;
    let obj = args.as_object_mut().unwrap();
    obj.entry("owner").or_insert(json!("o"));
    obj.entry("repo").or_insert(json!("r"));
    let c = h.call(tool, args.clone()).await;
    assert_ne!(c.kind(), "invalid_arguments", "{tool}: {}", c.text);
    let r = h.last();
    assert_eq!(r.raw_path, raw_path, "{tool} {args}");
    assert_eq!(r.operation_id.as_deref(), Some(tool), "{tool}: the forge routed {} elsewhere", r.raw_path);
    if !c.is_error {
        assert_eq!(c.json["request"]["path"], raw_path.trim_start_matches("/api/v1"), "{}", c.text);
    }
}

const BODY_FILE: &str =
    r#"{"content": "aGk=", "message": "m", "sha": "0000000000000000000000000000000000000000"}"#;

fn body_file() -> Value {
    serde_json::from_str(BODY_FILE).unwrap()
}

// ---- wildcard routes (rows of the table) ----

#[tokio::test]
async fn compare_basehead_keeps_slashes() {
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        sends(
            &h,
            "repoCompareDiff",
            json!({"basehead": "main...feature/x y"}),
            "/api/v1/repos/o/r/compare/main...feature/x%20y",
        )
        .await;
        h.stop().await;
    }
}

#[tokio::test]
async fn raw_and_media_filepath_keep_slashes() {
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        sends(
            &h,
            "repoGetRawFile",
            json!({"filepath": "docs/a b.md"}),
            "/api/v1/repos/o/r/raw/docs/a%20b.md",
        )
        .await;
        sends(
            &h,
            "repoGetRawFileOrLFS",
            json!({"filepath": "img/ä.png"}),
            "/api/v1/repos/o/r/media/img/%C3%A4.png",
        )
        .await;
        h.stop().await;
    }
}

#[tokio::test]
async fn archive_keeps_slashes() {
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        sends(
            &h,
            "repoGetArchive",
            json!({"archive": "release/v1.zip"}),
            "/api/v1/repos/o/r/archive/release/v1.zip",
        )
        .await;
        h.stop().await;
    }
}

#[tokio::test]
async fn branches_keep_slashes_for_every_method() {
    let h = Harness::start(Setup::gitea()).await;
    let p = "/api/v1/repos/o/r/branches/feature/x";
    sends(&h, "repoGetBranch", json!({"branch": "feature/x"}), p).await;
    sends(&h, "repoDeleteBranch", json!({"branch": "feature/x"}), p).await;
    sends(&h, "repoRenameBranch", json!({"branch": "feature/x", "body": {"name": "feature/y"}}), p).await;
    sends(&h, "repoUpdateBranch", json!({"branch": "feature/x", "body": {"new_commit_id": "abc"}}), p).await;
    h.stop().await;
    let h = Harness::start(Setup::forgejo()).await;
    sends(&h, "repoGetBranch", json!({"branch": "feature/x"}), p).await;
    sends(&h, "repoDeleteBranch", json!({"branch": "feature/x"}), p).await;
    sends(&h, "repoUpdateBranch", json!({"branch": "feature/x", "body": {"name": "feature/y"}}), p).await;
    h.stop().await;
}

#[tokio::test]
async fn tags_keep_slashes() {
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        sends(&h, "repoGetTag", json!({"tag": "v1/rc 1"}), "/api/v1/repos/o/r/tags/v1/rc%201").await;
        sends(&h, "repoDeleteTag", json!({"tag": "v1/rc"}), "/api/v1/repos/o/r/tags/v1/rc").await;
        h.stop().await;
    }
}

#[tokio::test]
async fn pulls_head_keeps_slashes_but_base_is_one_segment() {
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        sends(
            &h,
            "repoGetPullRequestByBaseHead",
            json!({"base": "release/1", "head": "owner/repo:feature/x"}),
            "/api/v1/repos/o/r/pulls/release%2F1/owner/repo%3Afeature/x",
        )
        .await;
        h.stop().await;
    }
}

#[tokio::test]
async fn git_refs_keep_slashes() {
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        sends(
            &h,
            "repoListGitRefs",
            json!({"ref": "heads/feature/x"}),
            "/api/v1/repos/o/r/git/refs/heads/feature/x",
        )
        .await;
        h.stop().await;
    }
}

#[tokio::test]
async fn contents_keep_slashes_for_every_method() {
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        let p = "/api/v1/repos/o/r/contents/docs/a%20b.md";
        sends(&h, "repoGetContents", json!({"filepath": "docs/a b.md"}), p).await;
        sends(&h, "repoCreateFile", json!({"filepath": "docs/a b.md", "body": body_file()}), p).await;
        sends(&h, "repoUpdateFile", json!({"filepath": "docs/a b.md", "body": body_file()}), p).await;
        sends(&h, "repoDeleteFile", json!({"filepath": "docs/a b.md", "body": {"sha": "0000000000000000000000000000000000000000", "message": "m"}}), p).await;
        h.stop().await;
    }
}

#[tokio::test]
async fn contents_ext_keeps_slashes_on_gitea() {
    let h = Harness::start(Setup::gitea()).await;
    sends(
        &h,
        "repoGetContentsExt",
        json!({"filepath": "src/lib.rs"}),
        "/api/v1/repos/o/r/contents-ext/src/lib.rs",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn branch_protections_keep_slashes_on_gitea_and_encode_them_on_forgejo() {
    let h = Harness::start(Setup::gitea()).await;
    sends(
        &h,
        "repoGetBranchProtection",
        json!({"name": "release/x"}),
        "/api/v1/repos/o/r/branch_protections/release/x",
    )
    .await;
    sends(
        &h,
        "repoDeleteBranchProtection",
        json!({"name": "release/x"}),
        "/api/v1/repos/o/r/branch_protections/release/x",
    )
    .await;
    sends(
        &h,
        "repoEditBranchProtection",
        json!({"name": "release/x", "body": {}}),
        "/api/v1/repos/o/r/branch_protections/release/x",
    )
    .await;
    h.stop().await;
    let h = Harness::start(Setup::forgejo()).await;
    sends(
        &h,
        "repoGetBranchProtection",
        json!({"name": "release/x"}),
        "/api/v1/repos/o/r/branch_protections/release%2Fx",
    )
    .await;
    sends(
        &h,
        "repoEditBranchProtection",
        json!({"name": "release/x", "body": {}}),
        "/api/v1/repos/o/r/branch_protections/release%2Fx",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn commit_status_refs_keep_slashes_on_gitea_and_encode_them_on_forgejo() {
    let h = Harness::start(Setup::gitea()).await;
    sends(
        &h,
        "repoGetCombinedStatusByRef",
        json!({"ref": "release/v1"}),
        "/api/v1/repos/o/r/commits/release/v1/status",
    )
    .await;
    sends(
        &h,
        "repoListStatusesByRef",
        json!({"ref": "release/v1"}),
        "/api/v1/repos/o/r/commits/release/v1/statuses",
    )
    .await;
    h.stop().await;
    let h = Harness::start(Setup::forgejo()).await;
    sends(
        &h,
        "repoGetCombinedStatusByRef",
        json!({"ref": "release/v1"}),
        "/api/v1/repos/o/r/commits/release%2Fv1/status",
    )
    .await;
    sends(
        &h,
        "repoListStatusesByRef",
        json!({"ref": "release/v1"}),
        "/api/v1/repos/o/r/commits/release%2Fv1/statuses",
    )
    .await;
    h.stop().await;
}

// ---- single-segment parameters: '/' is sent as %2F ----

#[tokio::test]
async fn release_tag_is_one_segment() {
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        sends(
            &h,
            "repoGetReleaseByTag",
            json!({"tag": "rel/1.0"}),
            "/api/v1/repos/o/r/releases/tags/rel%2F1.0",
        )
        .await;
        sends(
            &h,
            "repoDeleteReleaseByTag",
            json!({"tag": "rel/1.0"}),
            "/api/v1/repos/o/r/releases/tags/rel%2F1.0",
        )
        .await;
        h.stop().await;
    }
}

#[tokio::test]
async fn editorconfig_filepath_is_one_segment() {
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        sends(
            &h,
            "repoGetEditorConfig",
            json!({"filepath": "src/main.rs"}),
            "/api/v1/repos/o/r/editorconfig/src%2Fmain.rs",
        )
        .await;
        h.stop().await;
    }
}

#[tokio::test]
async fn sha_parameters_are_one_segment() {
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        sends(&h, "repoGetCommitPullRequest", json!({"sha": "a/b"}), "/api/v1/repos/o/r/commits/a%2Fb/pull")
            .await;
        sends(&h, "repoListStatuses", json!({"sha": "a/b"}), "/api/v1/repos/o/r/statuses/a%2Fb").await;
        sends(&h, "GetTree", json!({"sha": "main/x"}), "/api/v1/repos/o/r/git/trees/main%2Fx").await;
        h.stop().await;
    }
}

#[tokio::test]
async fn wiki_page_names_are_one_segment() {
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        sends(
            &h,
            "repoGetWikiPage",
            json!({"pageName": "Guide/Install"}),
            "/api/v1/repos/o/r/wiki/page/Guide%2FInstall",
        )
        .await;
        h.stop().await;
    }
}

#[tokio::test]
async fn sync_fork_branch_is_one_segment_on_forgejo() {
    let h = Harness::start(Setup::forgejo()).await;
    sends(
        &h,
        "repoSyncForkBranchInfo",
        json!({"branch": "feature/x"}),
        "/api/v1/repos/o/r/sync_fork/feature%2Fx",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn package_names_with_a_scope_are_one_segment() {
    for setup in [Setup::gitea(), Setup::forgejo()] {
        let h = Harness::start(setup).await;
        let c = h
            .call(
                "getPackage",
                json!({"owner": "o", "type": "npm", "name": "@scope/pkg", "version": "1.0.0"}),
            )
            .await;
        assert_ne!(c.kind(), "invalid_arguments");
        let r = h.last();
        assert_eq!(r.raw_path, "/api/v1/packages/o/npm/%40scope%2Fpkg/1.0.0");
        assert_eq!(r.operation_id.as_deref(), Some("getPackage"));
        h.stop().await;
    }
}

#[tokio::test]
async fn values_that_would_change_the_route_are_refused() {
    let h = Harness::start(Setup::gitea()).await;
    for (tool, args, pointer) in [
        ("repoGetContents", json!({"owner": "o", "repo": "r", "filepath": "docs//a.md"}), "/filepath"),
        ("repoGetContents", json!({"owner": "o", "repo": "r", "filepath": "/docs/a.md"}), "/filepath"),
        ("repoGetContents", json!({"owner": "o", "repo": "r", "filepath": "docs/../../admin"}), "/filepath"),
        ("repoGet", json!({"owner": "..", "repo": "r"}), "/owner"),
        ("repoGet", json!({"owner": "o", "repo": ""}), "/repo"),
    ] {
        let c = h.call(tool, args.clone()).await;
        assert_eq!(
            (c.kind(), c.json["error"]["path"].as_str()),
            ("invalid_arguments", Some(pointer)),
            "{args}: {}",
            c.text
        );
    }
    assert!(h.tool_requests().is_empty());
    h.stop().await;
}
