//! The shape stage on answers written by hand: each entity reduced, links and empty members
//! left out, `fields` on lists, objects and nested paths, unknown paths refused.

use serde_json::{Value, json};

use super::*;
use crate::catalog::{Catalog, Flavor};
use crate::error::ErrorKind;

fn gitea() -> &'static Catalog {
    crate::catalog::embedded(Flavor::Gitea)
}

fn result_of(c: &Catalog, op: &str) -> Option<Typed> {
    c.get(op).and_then(|t| t.operation()).and_then(|o| o.result.clone())
}

fn compact(op: &str, mut data: Value) -> Value {
    let c = gitea();
    render(c.definitions(), result_of(c, op).as_ref(), Shape::Compact, None, &mut data).unwrap();
    data
}

fn user(login: &str) -> Value {
    json!({"id": 7, "login": login, "full_name": "", "email": format!("{login}@example.com"),
           "avatar_url": "https://forge/avatars/x", "html_url": format!("https://forge/{login}"),
           "is_admin": false, "created": "2026-01-01T00:00:00Z", "last_login": "0001-01-01T00:00:00Z"})
}

fn issue() -> Value {
    json!({
        "id": 101, "number": 4, "title": "Crash on start", "body": "It crashes.",
        "url": "https://forge/api/v1/repos/o/r/issues/4", "html_url": "https://forge/o/r/issues/4",
        "user": user("alice"), "assignee": user("bob"), "assignees": [user("bob"), user("carol")],
        "labels": [{"id": 1, "name": "bug", "color": "ee0701", "description": "", "url": "https://forge/api/v1/repos/o/r/labels/1", "exclusive": false, "is_archived": false}],
        "milestone": {"id": 3, "title": "v1", "description": "first", "open_issues": 2, "closed_issues": 0, "state": "open"},
        "repository": {"id": 9, "name": "r", "owner": "o", "full_name": "o/r"},
        "pull_request": null, "closed_at": null, "comments": 0, "is_locked": false, "state": "open",
        "assets": [], "due_date": null, "created_at": "2026-02-01T10:00:00Z"
    })
}

#[test]
fn an_issue_listing_keeps_each_issue_and_reduces_what_is_nested_in_it() {
    let out = compact("issueListIssues", json!([issue()]));
    assert_eq!(
        out,
        json!([{
            "id": 101, "number": 4, "title": "Crash on start", "body": "It crashes.",
            "html_url": "https://forge/o/r/issues/4",
            "user": "alice", "assignees": ["bob", "carol"], "labels": ["bug"],
            "milestone": {"id": 3, "title": "v1"}, "repository": "o/r",
            "state": "open", "created_at": "2026-02-01T10:00:00Z"
        }])
    );
}

#[test]
fn the_full_shape_is_the_forges_json() {
    let c = gitea();
    let mut data = json!([issue()]);
    render(c.definitions(), result_of(c, "issueListIssues").as_ref(), Shape::Full, None, &mut data).unwrap();
    assert_eq!(data, json!([issue()]));
}

#[test]
fn a_single_object_keeps_its_members_and_its_own_html_url_only() {
    let mut repo = json!({"id": 9, "full_name": "o/r", "description": "d", "html_url": "https://forge/o/r",
        "clone_url": "https://forge/o/r.git", "ssh_url": "git@forge:o/r.git", "owner": user("o"),
        "parent": {"id": 8, "full_name": "up/r", "html_url": "https://forge/up/r", "owner": user("up")},
        "permissions": {"admin": false, "push": true, "pull": true}, "stars_count": 0, "private": false,
        "internal_tracker": {"enable_time_tracker": true, "allow_only_contributors_to_track_time": false}});
    repo = compact("repoGet", repo);
    assert_eq!(
        repo,
        json!({"id": 9, "full_name": "o/r", "description": "d", "html_url": "https://forge/o/r", "owner": "o",
            "parent": "up/r", "permissions": {"push": true, "pull": true},
            "internal_tracker": {"enable_time_tracker": true}})
    );
}

#[test]
fn a_kept_definition_nested_loses_its_html_url_and_its_own_entities_are_reduced() {
    // A commit: its author is a user (reduced), `commit` is kept with its own author (a name
    // and an email, not an entity), its tree and parents reduced to SHAs.
    let commit = json!({
        "sha": "abc", "url": "https://forge/api/v1/repos/o/r/git/commits/abc", "html_url": "https://forge/o/r/commit/abc",
        "author": user("alice"), "committer": user("alice"),
        "commit": {"message": "Fix", "url": "https://forge/api/v1/...", "author": {"name": "Alice", "email": "a@x", "date": "2026-03-01T00:00:00Z"},
                   "tree": {"sha": "t1", "url": "https://forge/api/v1/tree", "created": "0001-01-01T00:00:00Z"},
                   "verification": {"verified": false, "reason": "gpg.error.not_signed_commit", "signature": "", "payload": "", "signer": null}},
        "parents": [{"sha": "p1", "url": "https://forge/api/v1/p1", "created": "2026-02-28T00:00:00Z"}],
        "files": [{"filename": "a.rs", "status": "modified"}], "stats": {"total": 2, "additions": 1, "deletions": 1}
    });
    let out = compact("repoGetAllCommits", json!([commit]));
    assert_eq!(
        out,
        json!([{
            "sha": "abc", "html_url": "https://forge/o/r/commit/abc", "author": "alice", "committer": "alice",
            "commit": {"message": "Fix", "author": {"name": "Alice", "email": "a@x", "date": "2026-03-01T00:00:00Z"},
                       "tree": "t1", "verification": {"reason": "gpg.error.not_signed_commit"}},
            "parents": ["p1"], "files": [{"filename": "a.rs", "status": "modified"}],
            "stats": {"total": 2, "additions": 1, "deletions": 1}
        }])
    );
}

#[test]
fn the_items_of_a_wrapped_listing_are_the_items() {
    // repoSearch answers {"ok": true, "data": [Repository]}: each repository keeps its
    // members, as it would in a plain list.
    let out = compact(
        "repoSearch",
        json!({"ok": true, "data": [{"id": 9, "full_name": "o/r", "description": "words", "owner": user("o"), "html_url": "https://forge/o/r", "clone_url": "x"}]}),
    );
    assert_eq!(
        out,
        json!({"ok": true, "data": [{"id": 9, "full_name": "o/r", "description": "words", "owner": "o", "html_url": "https://forge/o/r"}]})
    );
    let tree = compact(
        "GetTree",
        json!({"sha": "s", "url": "u", "truncated": false, "page": 1, "total_count": 2,
               "tree": [{"path": "src/a.rs", "mode": "100644", "type": "blob", "size": 10, "sha": "b1", "url": "https://forge/api/v1/blobs/b1"}]}),
    );
    assert_eq!(
        tree,
        json!({"sha": "s", "page": 1, "total_count": 2, "tree": [{"path": "src/a.rs", "mode": "100644", "type": "blob", "size": 10, "sha": "b1"}]})
    );
}

#[test]
fn an_entity_without_its_identity_is_kept_compacted() {
    let out = compact(
        "issueGetIssue",
        json!({"number": 1, "user": {"id": -1, "login": "", "full_name": "Ghost", "url": "x"}}),
    );
    assert_eq!(out, json!({"number": 1, "user": {"id": -1, "full_name": "Ghost"}}));
}

#[test]
fn an_untyped_result_loses_only_derivable_urls_and_empty_members() {
    let c = gitea();
    let mut data = json!([{"a": 1, "url": "x", "b": "", "c": {"html_url": "h", "d": [], "e": "kept"}}]);
    render(c.definitions(), None, Shape::Compact, None, &mut data).unwrap();
    assert_eq!(data, json!([{"a": 1, "c": {"e": "kept"}}]));
}

#[test]
fn fields_keep_only_those_members_of_each_item_before_compaction() {
    let c = gitea();
    let t = result_of(c, "issueListIssues");
    let fields: Vec<String> = ["number", "title", "user", "milestone.title"].map(String::from).to_vec();
    check_fields(c.definitions(), t.as_ref(), &fields).unwrap();
    let mut data = json!([issue(), issue()]);
    render(c.definitions(), t.as_ref(), Shape::Compact, Some(&fields), &mut data).unwrap();
    let one = json!({"number": 4, "title": "Crash on start", "user": "alice", "milestone": {"title": "v1"}});
    assert_eq!(data, json!([one, one]));
    // In the full shape, the same members as the forge wrote them.
    let mut data = json!(issue());
    render(
        c.definitions(),
        result_of(c, "issueGetIssue").as_ref(),
        Shape::Full,
        Some(&["user".into()]),
        &mut data,
    )
    .unwrap();
    assert_eq!(data, json!({"user": user("alice")}));
}

#[test]
fn nested_paths_merge_and_a_whole_member_wins_over_its_parts() {
    let c = gitea();
    let pr = json!({"number": 2, "title": "t", "head": {"ref": "feature", "sha": "h", "label": "feature", "repo": {"full_name": "o/r"}}, "base": {"ref": "main"}});
    let t = result_of(c, "repoGetPullRequest");
    let fields: Vec<String> = ["head.ref", "head.sha", "base", "base.ref"].map(String::from).to_vec();
    check_fields(c.definitions(), t.as_ref(), &fields).unwrap();
    let mut data = pr.clone();
    render(c.definitions(), t.as_ref(), Shape::Full, Some(&fields), &mut data).unwrap();
    assert_eq!(data, json!({"head": {"ref": "feature", "sha": "h"}, "base": {"ref": "main"}}));
}

#[test]
fn an_unknown_path_is_answered_with_the_members_that_exist() {
    let c = gitea();
    let t = result_of(c, "issueListIssues");
    let e = check_fields(c.definitions(), t.as_ref(), &["number".into(), "titel".into()]).unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::InvalidArguments));
    let text = e.to_string();
    assert!(text.contains("titel") && text.contains("title") && text.contains("assignees"), "{text}");
    let e = check_fields(c.definitions(), t.as_ref(), &["milestone.name".into()]).unwrap_err();
    assert!(e.to_string().contains("`milestone` has") && e.to_string().contains("title"), "{e}");
    // A result the spec does not type: checked against the items themselves.
    let mut data = json!([{"a": 1}, {"b": 2}]);
    render(c.definitions(), None, Shape::Full, Some(&["b".into()]), &mut data).unwrap();
    assert_eq!(data, json!([{}, {"b": 2}]));
    let e =
        render(c.definitions(), None, Shape::Full, Some(&["c".into()]), &mut json!([{"a": 1}])).unwrap_err();
    assert!(e.to_string().contains("the items have: a"), "{e}");
}

#[test]
fn shape_and_fields_are_taken_from_the_arguments_and_checked() {
    let mut args =
        json!({"owner": "o", "shape": "full", "fields": ["title", "head.ref"]}).as_object().unwrap().clone();
    let ask = Ask::take(&mut args).unwrap();
    assert_eq!(
        ask,
        Ask {
            shape: Some(Shape::Full),
            fields: Some(vec!["title".into(), "head.ref".into()]),
            confirm: None
        }
    );
    assert_eq!(args, *json!({"owner": "o"}).as_object().unwrap());
    for (bad, at) in [
        (json!({"shape": "lean"}), "/shape"),
        (json!({"fields": "title"}), "/fields"),
        (json!({"fields": ["ok", "a..b"]}), "/fields/1"),
        (json!({"fields": [""]}), "/fields/0"),
        (json!({"fields": [1]}), "/fields/0"),
        (json!({"fields": vec!["a"; MAX_FIELDS + 1]}), "/fields"),
    ] {
        let mut args = bad.as_object().unwrap().clone();
        let e = Ask::take(&mut args).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::InvalidArguments), "{bad}");
        assert!(format!("{e:?}").contains(at), "{bad}: {e:?}");
    }
}

#[test]
fn every_operation_result_of_both_specs_names_a_definition_the_spec_has() {
    for f in [Flavor::Gitea, Flavor::Forgejo] {
        let c = Catalog::build(f.embedded_spec(), f, None).unwrap();
        let mut typed = 0;
        for t in c.operations() {
            if let Some(r) = &t.operation().unwrap().result {
                assert!(c.definitions().get(&r.definition).is_some(), "{f:?} {}: {}", t.name(), r.definition);
                typed += 1;
            }
        }
        assert!(typed > 300, "{f:?}: {typed} typed results");
    }
}

#[test]
fn a_member_asked_for_by_name_is_kept_even_where_compact_leaves_links_out() {
    let c = gitea();
    let t = result_of(c, "repoGet");
    let repo = json!({"full_name": "o/r", "clone_url": "https://forge/o/r.git", "ssh_url": "git@forge:o/r.git",
        "owner": user("o"), "parent": {"full_name": "up/r", "html_url": "https://forge/up/r"}});
    let fields: Vec<String> = ["clone_url", "owner", "parent.html_url"].map(String::from).to_vec();
    check_fields(c.definitions(), t.as_ref(), &fields).unwrap();
    let mut data = repo;
    render(c.definitions(), t.as_ref(), Shape::Compact, Some(&fields), &mut data).unwrap();
    // The parent kept only its link, which was asked for, so it has no full name to be
    // reduced to: it stays an object with that link.
    assert_eq!(
        data,
        json!({"clone_url": "https://forge/o/r.git", "owner": "o", "parent": {"html_url": "https://forge/up/r"}})
    );
}

#[test]
fn an_error_names_at_most_so_many_members_of_an_untyped_answer() {
    let c = gitea();
    let item: serde_json::Map<String, Value> = (0..500).map(|i| (format!("key{i:03}"), json!(1))).collect();
    let e =
        render(c.definitions(), None, Shape::Full, Some(&["nope".into()]), &mut json!([item])).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("key000, key001") && text.contains(&format!("and {} more", 500 - MAX_NAMED)),
        "{text}"
    );
    assert!(!text.contains(&format!("key{MAX_NAMED:03}")), "{text}");
}
