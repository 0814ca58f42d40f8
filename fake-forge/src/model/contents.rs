//! Files: the contents API (get, create, update, delete) and `raw`.
//!
//! Each branch holds a full snapshot of its files; a write makes a new head commit on the target
//! branch (creating `new_branch` first when asked). The SHA rules are Gitea's: updating or
//! deleting needs the current blob SHA; a stale one is refused. Gitea 1.27 creates the file when
//! `PUT` has no `sha`, Forgejo requires it.

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::repos::message_or;
use super::{Branch, Commit, Ctx, File, Model, Repo, json, tri};
use crate::Flavor;
use crate::reply::Reply;
use crate::util::fake_sha;

fn clean(path: &str) -> String {
    path.trim_matches('/').to_string()
}

/// `GET /repos/{owner}/{repo}/contents[/{filepath}]`: a file, or a directory listing.
pub(super) fn get(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo(cx));
    let path = clean(cx.param("filepath"));
    let git_ref = cx.query("ref").unwrap_or(&repo.default_branch).to_string();
    let Some(branch) = repo.branches.get(&git_ref) else {
        if repo.branches.is_empty() && path.is_empty() {
            return Reply::json(200, &json!([]));
        }
        return cx.not_found();
    };
    if let Some(file) = branch.files.get(&path) {
        let v = json::contents(cx.root_url, repo, &git_ref, &path, Some(file), true);
        return Reply::json(200, &v);
    }
    match list_dir(cx.root_url, repo, &git_ref, branch, &path) {
        Some(entries) => Reply::json(200, &Value::Array(entries)),
        None => cx.not_found(),
    }
}

/// The entries directly under `dir` ("" = root), `None` if there is no such directory.
fn list_dir(root: &str, repo: &Repo, git_ref: &str, b: &Branch, dir: &str) -> Option<Vec<Value>> {
    let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
    let mut dirs = BTreeSet::new();
    let mut entries = Vec::new();
    let mut found = dir.is_empty();
    for (path, file) in b.files.range(prefix.clone()..) {
        let Some(rest) = path.strip_prefix(&prefix) else {
            break;
        };
        found = true;
        match rest.split_once('/') {
            Some((sub, _)) => {
                dirs.insert(format!("{prefix}{sub}"));
            }
            None => {
                entries.push((path.clone(), json::contents(root, repo, git_ref, path, Some(file), false)))
            }
        }
    }
    for d in dirs {
        let v = json::contents(root, repo, git_ref, &d, None, false);
        entries.push((d, v));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    found.then(|| entries.into_iter().map(|(_, v)| v).collect())
}

/// The decoded `content` field, or a 422.
fn content(cx: &Ctx, body: &Value) -> Result<Vec<u8>, Reply> {
    let text = body["content"].as_str().unwrap_or("");
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    STANDARD.decode(compact).map_err(|e| cx.error(422, &format!("illegal base64 data: {e}")))
}

/// Resolves `branch`/`new_branch` of a write to the branch to commit on, creating it when
/// needed (a first commit into an empty repository creates the default branch).
fn target_branch(repo: &mut Repo, cx: &Ctx, body: &Value) -> Result<String, Reply> {
    let base = body["branch"].as_str().filter(|s| !s.is_empty()).unwrap_or(&repo.default_branch).to_string();
    if repo.branches.is_empty() && base == repo.default_branch {
        let head = Commit::new("Initial commit", cx.caller.unwrap_or(&repo.owner));
        let files = Default::default();
        repo.branches.insert(base.clone(), Branch { head, files });
    }
    let Some(source) = repo.branches.get(&base).cloned() else {
        return Err(cx.error(404, &format!("branch does not exist [name: {base}]")));
    };
    match body["new_branch"].as_str().filter(|s| !s.is_empty()) {
        None => Ok(base),
        Some(new) if repo.branches.contains_key(new) => {
            Err(cx.error(422, &format!("branch already exists [name: {new}]")))
        }
        Some(new) => {
            repo.branches.insert(new.to_string(), source);
            Ok(new.to_string())
        }
    }
}

/// Checks the `sha` of an update or delete against the current file.
fn check_sha(cx: &Ctx, given: &str, file: &File, status: u16) -> Result<(), Reply> {
    if given == file.sha {
        return Ok(());
    }
    let msg = format!("sha does not match [given: {given}, expected: {}]", file.sha);
    Err(cx.error(status, &msg))
}

/// Commits `change` on `branch` and answers a `FileResponse` for `path`.
fn commit(
    repo: &mut Repo,
    cx: &Ctx,
    branch: &str,
    message: String,
    change: impl FnOnce(&mut Branch, &str),
) -> (Commit, Option<String>) {
    let author = cx.caller.unwrap_or(&repo.owner).to_string();
    let head = Commit::new(&message, &author);
    let Some(b) = repo.branches.get_mut(branch) else {
        return (head, None);
    };
    let parent = Some(b.head.sha.clone());
    change(b, &head.sha);
    b.head = head.clone();
    (head, parent)
}

fn file_response(cx: &Ctx, repo: &Repo, branch: &str, path: &str, c: &Commit, parent: Option<&str>) -> Value {
    let file = repo.branches.get(branch).and_then(|b| b.files.get(path));
    let content = match file {
        Some(f) => json::contents(cx.root_url, repo, branch, path, Some(f), true),
        None => Value::Null,
    };
    json!({
        "content": content,
        "commit": json::file_commit(cx.root_url, repo, c, parent),
        "verification": json::unsigned(),
    })
}

fn new_file(data: Vec<u8>, commit_sha: &str) -> File {
    File { sha: fake_sha(&data), content: data, last_commit: commit_sha.to_string() }
}

/// `POST /repos/{owner}/{repo}/contents/{filepath}`.
pub(super) fn create(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo_mut(cx));
    let body = cx.json();
    let path = clean(cx.param("filepath"));
    let data = tri!(content(cx, &body));
    let branch = tri!(target_branch(repo, cx, &body));
    if repo.branches[&branch].files.contains_key(&path) {
        return cx.error(422, &format!("repository file already exists [path: {path}]"));
    }
    let message = message_or(&body, format!("Add {path}"));
    let (c, parent) = commit(repo, cx, &branch, message, |b, sha| {
        b.files.insert(path.clone(), new_file(data, sha));
    });
    Reply::json(201, &file_response(cx, repo, &branch, &path, &c, parent.as_deref()))
}

/// `PUT /repos/{owner}/{repo}/contents/{filepath}`: update (200), or create (201, Gitea only,
/// when no `sha` is given).
pub(super) fn update(m: &mut Model, cx: &Ctx) -> Reply {
    let flavor = cx.flavor;
    let repo = tri!(m.repo_mut(cx));
    let body = cx.json();
    let path = clean(cx.param("filepath"));
    let from =
        body["from_path"].as_str().map(clean).filter(|p| !p.is_empty()).unwrap_or_else(|| path.clone());
    let sha = body["sha"].as_str().filter(|s| !s.is_empty());
    if sha.is_none() && flavor == Flavor::Forgejo {
        return cx.error(422, "[SHA]: Required");
    }
    let data = tri!(content(cx, &body));
    let branch = tri!(target_branch(repo, cx, &body));
    let existing = repo.branches[&branch].files.get(&from);
    let created = match (sha, existing) {
        (Some(sha), Some(file)) => {
            let status = if flavor == Flavor::Forgejo { 409 } else { 422 };
            tri!(check_sha(cx, sha, file, status));
            false
        }
        (Some(_), None) => return cx.not_found(),
        (None, Some(_)) => {
            return cx.error(422, &format!("repository file already exists [path: {from}]"));
        }
        (None, None) => true,
    };
    let verb = if created { "Add" } else { "Update" };
    let message = message_or(&body, format!("{verb} {path}"));
    let (c, parent) = commit(repo, cx, &branch, message, |b, sha| {
        b.files.remove(&from);
        b.files.insert(path.clone(), new_file(data, sha));
    });
    let status = if created { 201 } else { 200 };
    Reply::json(status, &file_response(cx, repo, &branch, &path, &c, parent.as_deref()))
}

/// `DELETE /repos/{owner}/{repo}/contents/{filepath}`.
pub(super) fn delete(m: &mut Model, cx: &Ctx) -> Reply {
    let flavor = cx.flavor;
    let repo = tri!(m.repo_mut(cx));
    let body = cx.json();
    let path = clean(cx.param("filepath"));
    let Some(sha) = body["sha"].as_str().filter(|s| !s.is_empty()) else {
        return cx.error(422, "[SHA]: Required");
    };
    let branch = tri!(target_branch(repo, cx, &body));
    let Some(file) = repo.branches[&branch].files.get(&path) else {
        return cx.not_found();
    };
    let status = if flavor == Flavor::Forgejo { 400 } else { 422 };
    tri!(check_sha(cx, sha, file, status));
    let message = message_or(&body, format!("Delete {path}"));
    let (c, parent) = commit(repo, cx, &branch, message, |b, _| {
        b.files.remove(&path);
    });
    Reply::json(200, &file_response(cx, repo, &branch, &path, &c, parent.as_deref()))
}

/// `GET /repos/{owner}/{repo}/raw/{filepath}`: `?ref=`, or a branch prefix in the path.
pub(super) fn raw(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo(cx));
    let path = clean(cx.param("filepath"));
    let file = match cx.query("ref") {
        Some(r) => repo.branches.get(r).and_then(|b| b.files.get(&path)),
        None => repo.branches.get(&repo.default_branch).and_then(|b| b.files.get(&path)).or_else(|| {
            // `{ref}/{path}`: the longest branch name that prefixes the path.
            let mut names: Vec<&String> = repo.branches.keys().collect();
            names.sort_by_key(|n| std::cmp::Reverse(n.len()));
            names.into_iter().find_map(|n| {
                let rest = path.strip_prefix(n.as_str())?.strip_prefix('/')?;
                repo.branches[n].files.get(rest)
            })
        }),
    };
    match file {
        Some(f) => Reply::bytes(200, content_type(&path), f.content.clone()),
        None => cx.not_found(),
    }
}

/// A content type from the file extension.
fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("md" | "txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}
