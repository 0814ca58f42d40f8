//! Gitea-shaped JSON for the model's objects.
//!
//! Field names follow Gitea's `modules/structs` types (User, Repository, Branch, Tag, Release,
//! Issue, Attachment, ContentsResponse) closely enough for a client to decode them; every URL is
//! built from `ROOT_URL`, as a real forge behind a proxy does.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::{Attachment, Branch, Comment, Commit, File, Issue, Pull, Release, Repo, Tag};
use crate::Visibility;

/// A `User` whose visibility is public (where the model does not say otherwise).
pub(crate) fn user(root: &str, login: &str, id: i64, is_admin: bool) -> Value {
    user_seen(root, login, id, is_admin, Visibility::Public)
}

/// A `User` with its `visibility`.
pub(crate) fn user_seen(root: &str, login: &str, id: i64, is_admin: bool, visibility: Visibility) -> Value {
    json!({
        "id": id,
        "login": login,
        "login_name": "",
        "source_id": 0,
        "full_name": "",
        "email": format!("{}@noreply.forge.example.invalid", login.to_lowercase()),
        "avatar_url": format!("{root}avatars/{id}"),
        "html_url": format!("{root}{login}"),
        "language": "",
        "is_admin": is_admin,
        "last_login": "1970-01-01T00:00:00Z",
        "created": "1970-01-01T00:00:00Z",
        "restricted": false,
        "active": true,
        "prohibit_login": false,
        "location": "",
        "website": "",
        "description": "",
        "visibility": visibility.as_str(),
        "followers_count": 0,
        "following_count": 0,
        "starred_repos_count": 0,
        "username": login,
    })
}

/// A `Repository`; `admin` decides the `permissions` block.
pub(crate) fn repo(root: &str, r: &Repo, admin: bool) -> Value {
    let full = r.full_name();
    let open_issues = r.issues.iter().filter(|i| i.state == "open").count();
    json!({
        "id": r.id,
        "owner": user_seen(root, &r.owner, r.owner_id, false, r.owner_visibility),
        "name": r.name,
        "full_name": full,
        "description": r.description,
        "empty": r.branches.is_empty(),
        "private": r.private,
        "fork": false,
        "template": false,
        "parent": null,
        "mirror": false,
        "size": 0,
        "language": "",
        "languages_url": format!("{root}api/v1/repos/{full}/languages"),
        "html_url": format!("{root}{full}"),
        "url": format!("{root}api/v1/repos/{full}"),
        "link": "",
        "ssh_url": format!("git@forge.example.invalid:{full}.git"),
        "clone_url": format!("{root}{full}.git"),
        "original_url": "",
        "website": "",
        "stars_count": 0,
        "forks_count": 0,
        "watchers_count": 0,
        "open_issues_count": open_issues,
        "open_pr_counter": 0,
        "release_counter": r.releases.len(),
        "default_branch": r.default_branch,
        "archived": false,
        "created_at": r.created,
        "updated_at": r.created,
        "permissions": {"admin": admin, "push": admin, "pull": true},
        "has_issues": true,
        "has_wiki": true,
        "has_pull_requests": true,
        "has_projects": true,
        "has_releases": true,
        "has_packages": true,
        "has_actions": true,
        "default_merge_style": "merge",
        "avatar_url": "",
        "internal": false,
        "object_format_name": "sha1",
    })
}

fn identity(c: &Commit) -> Value {
    json!({
        "name": c.author,
        "email": format!("{}@noreply.forge.example.invalid", c.author.to_lowercase()),
        "username": c.author,
    })
}

/// A `Branch`.
pub(crate) fn branch(root: &str, r: &Repo, name: &str, b: &Branch) -> Value {
    let full = r.full_name();
    json!({
        "name": name,
        "commit": {
            "id": b.head.sha,
            "message": b.head.message,
            "url": format!("{root}{full}/commit/{}", b.head.sha),
            "author": identity(&b.head),
            "committer": identity(&b.head),
            "verification": null,
            "timestamp": b.head.when,
            "added": null,
            "removed": null,
            "modified": null,
        },
        "protected": false,
        "required_approvals": 0,
        "enable_status_check": false,
        "status_check_contexts": [],
        "user_can_push": true,
        "user_can_merge": true,
        "effective_branch_protection_name": "",
    })
}

/// A `Tag`.
pub(crate) fn tag(root: &str, r: &Repo, name: &str, t: &Tag) -> Value {
    let full = r.full_name();
    json!({
        "name": name,
        "message": t.message,
        "id": t.commit.sha,
        "commit": {
            "url": format!("{root}api/v1/repos/{full}/git/commits/{}", t.commit.sha),
            "sha": t.commit.sha,
            "created": t.commit.when,
        },
        "zipball_url": format!("{root}{full}/archive/{name}.zip"),
        "tarball_url": format!("{root}{full}/archive/{name}.tar.gz"),
    })
}

/// A `Release`.
pub(crate) fn release(root: &str, r: &Repo, rel: &Release) -> Value {
    let full = r.full_name();
    let tag = &rel.tag_name;
    json!({
        "id": rel.id,
        "tag_name": tag,
        "target_commitish": rel.target,
        "name": rel.name,
        "body": rel.body,
        "url": format!("{root}api/v1/repos/{full}/releases/{}", rel.id),
        "html_url": format!("{root}{full}/releases/tag/{tag}"),
        "tarball_url": format!("{root}{full}/archive/{tag}.tar.gz"),
        "zipball_url": format!("{root}{full}/archive/{tag}.zip"),
        "upload_url": format!("{root}api/v1/repos/{full}/releases/{}/assets", rel.id),
        "draft": rel.draft,
        "prerelease": rel.prerelease,
        "created_at": rel.created,
        "published_at": rel.created,
        "author": user(root, &rel.author, rel.author_id, false),
        "assets": [],
    })
}

/// An `Issue`.
pub(crate) fn issue(root: &str, r: &Repo, i: &Issue, assets: Vec<Value>) -> Value {
    let full = r.full_name();
    json!({
        "id": i.id,
        "url": format!("{root}api/v1/repos/{full}/issues/{}", i.number),
        "html_url": format!("{root}{full}/issues/{}", i.number),
        "number": i.number,
        "user": user(root, &i.poster, i.poster_id, false),
        "original_author": "",
        "original_author_id": 0,
        "title": i.title,
        "body": i.body,
        "ref": "",
        "assets": assets,
        "labels": [],
        "milestone": null,
        "assignee": null,
        "assignees": null,
        "state": i.state,
        "is_locked": false,
        "comments": r.comments.iter().filter(|c| c.issue == i.number).count(),
        "created_at": i.created,
        "updated_at": i.created,
        "closed_at": null,
        "due_date": null,
        "pull_request": null,
        "repository": {"id": r.id, "name": r.name, "owner": r.owner, "full_name": full},
        "pin_order": 0,
    })
}

/// An `Attachment`.
pub(crate) fn attachment(root: &str, a: &Attachment) -> Value {
    json!({
        "id": a.id,
        "name": a.name,
        "size": a.data.len(),
        "download_count": 0,
        "created_at": a.created,
        "uuid": a.uuid,
        "browser_download_url": format!("{root}attachments/{}", a.uuid),
        "type": "attachment",
    })
}

/// A `ContentsResponse` for a file (with base64 content when `with_content`) or a directory.
pub(crate) fn contents(
    root: &str,
    r: &Repo,
    git_ref: &str,
    path: &str,
    file: Option<&File>,
    with_content: bool,
) -> Value {
    let full = r.full_name();
    let name = path.rsplit('/').next().unwrap_or(path);
    let self_url = format!("{root}api/v1/repos/{full}/contents/{path}?ref={git_ref}");
    let (kind, sha, size) = match file {
        Some(f) => ("file", f.sha.clone(), f.content.len()),
        None => ("dir", String::new(), 0),
    };
    let html_url = format!("{root}{full}/src/branch/{git_ref}/{path}");
    let git_url = format!("{root}api/v1/repos/{full}/git/blobs/{sha}");
    let content = match file {
        Some(f) if with_content => json!(STANDARD.encode(&f.content)),
        _ => Value::Null,
    };
    json!({
        "name": name,
        "path": path,
        "sha": sha,
        "last_commit_sha": file.map(|f| f.last_commit.clone()),
        "type": kind,
        "size": size,
        "encoding": if content.is_null() { Value::Null } else { json!("base64") },
        "content": content,
        "target": null,
        "url": self_url,
        "html_url": html_url,
        "git_url": git_url,
        "download_url": file.map(|_| format!("{root}{full}/raw/branch/{git_ref}/{path}")),
        "submodule_git_url": null,
        "_links": {"self": self_url, "git": git_url, "html": html_url},
    })
}

/// A `FileCommitResponse`.
pub(crate) fn file_commit(root: &str, r: &Repo, c: &Commit, parent: Option<&str>) -> Value {
    let full = r.full_name();
    let who = json!({"name": c.author, "email": identity(c)["email"], "date": c.when});
    let parents: Vec<Value> = parent
        .map(|p| json!({"url": format!("{root}api/v1/repos/{full}/git/commits/{p}"), "sha": p}))
        .into_iter()
        .collect();
    json!({
        "url": format!("{root}api/v1/repos/{full}/git/commits/{}", c.sha),
        "sha": c.sha,
        "created": c.when,
        "html_url": format!("{root}{full}/commit/{}", c.sha),
        "author": who,
        "committer": who,
        "parents": parents,
        "message": c.message,
        "tree": {"url": format!("{root}api/v1/repos/{full}/git/trees/{}", c.sha), "sha": c.sha},
    })
}

/// The `verification` block of file responses.
pub(crate) fn unsigned() -> Value {
    json!({"verified": false, "reason": "gpg.error.not_signed_commit", "signature": "", "signer": null, "payload": ""})
}

/// A `Comment`.
pub(crate) fn comment(root: &str, r: &Repo, c: &Comment) -> Value {
    let full = r.full_name();
    json!({
        "id": c.id,
        "html_url": format!("{root}{full}/issues/{}#issuecomment-{}", c.issue, c.id),
        "pull_request_url": "",
        "issue_url": format!("{root}api/v1/repos/{full}/issues/{}", c.issue),
        "user": user(root, &c.poster, c.poster_id, false),
        "original_author": "",
        "original_author_id": 0,
        "body": c.body,
        "assets": [],
        "created_at": c.created,
        "updated_at": c.created,
    })
}

/// A `PullRequest`: the issue's fields plus head, base and merge state.
pub(crate) fn pull(root: &str, r: &Repo, i: &Issue, p: &Pull) -> Value {
    let full = r.full_name();
    let branch = |name: &str| {
        let sha = r.branches.get(name).map(|b| b.head.sha.clone()).unwrap_or_default();
        json!({"label": name, "ref": name, "sha": sha, "repo_id": r.id, "repo": {"id": r.id, "full_name": full}})
    };
    json!({
        "id": i.id,
        "url": format!("{root}{full}/pulls/{}", i.number),
        "number": i.number,
        "user": user(root, &i.poster, i.poster_id, false),
        "title": i.title,
        "body": i.body,
        "labels": [],
        "milestone": null,
        "assignee": null,
        "assignees": null,
        "requested_reviewers": null,
        "state": i.state,
        "draft": false,
        "is_locked": false,
        "comments": r.comments.iter().filter(|c| c.issue == i.number).count(),
        "html_url": format!("{root}{full}/pulls/{}", i.number),
        "diff_url": format!("{root}{full}/pulls/{}.diff", i.number),
        "patch_url": format!("{root}{full}/pulls/{}.patch", i.number),
        "mergeable": !p.merged,
        "merged": p.merged,
        "merged_at": null,
        "merge_commit_sha": null,
        "merged_by": null,
        "base": branch(&p.base),
        "head": branch(&p.head),
        "merge_base": "",
        "due_date": null,
        "created_at": i.created,
        "updated_at": i.created,
        "closed_at": null,
    })
}
