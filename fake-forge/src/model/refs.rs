//! Branches, tags and releases.
//!
//! `branches/{branch}` and `tags/{tag}` are chi wildcards, so their names arrive with literal
//! `/`; `releases/tags/{tag}` is a single segment, so `rel/1.0` must arrive as `rel%2F1.0`. The
//! router has already decoded both; the handlers just look names up. Creating a non-draft
//! release also creates its tag, as in Gitea.

use serde_json::Value;

use super::{Ctx, Model, Release, Tag, json, tri};
use crate::paging::{Page, paginate};
use crate::reply::Reply;
use crate::util::now_rfc3339;

fn page_reply(cx: &Ctx, items: Vec<Value>, link: bool) -> Reply {
    let page = Page::from_query(&cx.query);
    let total = items.len();
    let body = Value::Array(page.slice(&items).to_vec());
    paginate(Reply::json(200, &body), cx.root_url, cx.uri, total, page, link)
}

/// `GET /repos/{owner}/{repo}/branches` (paged, with `Link`).
pub(super) fn list_branches(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo(cx));
    let items = repo.branches.iter().map(|(name, b)| json::branch(cx.root_url, repo, name, b)).collect();
    page_reply(cx, items, true)
}

/// `POST /repos/{owner}/{repo}/branches`.
pub(super) fn create_branch(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo_mut(cx));
    let body = cx.json();
    let Some(name) = body["new_branch_name"].as_str().filter(|s| !s.is_empty()) else {
        return cx.error(422, "[BranchName]: Required");
    };
    let old = ["old_ref_name", "old_branch_name"]
        .iter()
        .find_map(|k| body[*k].as_str().filter(|s| !s.is_empty()))
        .unwrap_or(&repo.default_branch)
        .to_string();
    if repo.branches.contains_key(name) {
        return cx.error(409, "The branch already exists.");
    }
    let source = match repo.branches.get(&old) {
        Some(b) => b.clone(),
        None => return cx.error(404, "The old branch does not exist"),
    };
    repo.branches.insert(name.to_string(), source);
    Reply::json(201, &json::branch(cx.root_url, repo, name, &repo.branches[name]))
}

/// `GET /repos/{owner}/{repo}/branches/{branch}`.
pub(super) fn get_branch(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo(cx));
    let name = cx.param("branch");
    match repo.branches.get(name) {
        Some(b) => Reply::json(200, &json::branch(cx.root_url, repo, name, b)),
        None => cx.not_found(),
    }
}

/// `DELETE /repos/{owner}/{repo}/branches/{branch}`.
pub(super) fn delete_branch(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo_mut(cx));
    let name = cx.param("branch");
    if name == repo.default_branch {
        return cx.error(403, "can not delete default branch");
    }
    match repo.branches.remove(name) {
        Some(_) => Reply::empty(204),
        None => cx.not_found(),
    }
}

/// `GET /repos/{owner}/{repo}/tags` (paged, `X-Total-Count` only, like Gitea).
pub(super) fn list_tags(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo(cx));
    let items = repo.tags.iter().map(|(name, t)| json::tag(cx.root_url, repo, name, t)).collect();
    page_reply(cx, items, false)
}

/// `GET /repos/{owner}/{repo}/tags/{tag}`.
pub(super) fn get_tag(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo(cx));
    let name = cx.param("tag");
    match repo.tags.get(name) {
        Some(t) => Reply::json(200, &json::tag(cx.root_url, repo, name, t)),
        None => cx.not_found(),
    }
}

/// `GET /repos/{owner}/{repo}/releases` (newest first, paged, with `Link`).
pub(super) fn list_releases(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo(cx));
    let items = repo.releases.iter().rev().map(|r| json::release(cx.root_url, repo, r)).collect();
    page_reply(cx, items, true)
}

/// `POST /repos/{owner}/{repo}/releases`.
pub(super) fn create_release(m: &mut Model, cx: &Ctx) -> Reply {
    let id = m.next_id();
    let author = cx.caller.unwrap_or_default().to_string();
    let author_id = m.known_user_id(&author);
    let repo = tri!(m.repo_mut(cx));
    let body = cx.json();
    let Some(tag_name) = body["tag_name"].as_str().filter(|s| !s.is_empty()) else {
        return cx.error(422, "[TagName]: Required");
    };
    if repo.releases.iter().any(|r| r.tag_name == tag_name) {
        return cx.error(409, &format!("release tag already exist [tag_name: {tag_name}]"));
    }
    let target = body["target_commitish"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or(&repo.default_branch)
        .to_string();
    let flag = |k: &str| body[k].as_bool().unwrap_or(false);
    let draft = flag("draft");
    if !draft && !repo.tags.contains_key(tag_name) {
        let Some(branch) = repo.branches.get(&target) else {
            return cx.error(404, &format!("target does not exist [target: {target}]"));
        };
        let tag = Tag {
            commit: branch.head.clone(),
            message: body["tag_message"].as_str().unwrap_or("").to_string(),
        };
        repo.tags.insert(tag_name.to_string(), tag);
    }
    let text = |k: &str| body[k].as_str().unwrap_or("").to_string();
    let release = Release {
        id,
        tag_name: tag_name.to_string(),
        target,
        name: text("name"),
        body: text("body"),
        draft,
        prerelease: flag("prerelease"),
        author,
        author_id,
        created: now_rfc3339(),
    };
    let v = json::release(cx.root_url, repo, &release);
    repo.releases.push(release);
    Reply::json(201, &v)
}

/// `GET /repos/{owner}/{repo}/releases/{id}`.
pub(super) fn get_release(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo(cx));
    let id = cx.param("id").parse::<i64>().unwrap_or(-1);
    match repo.releases.iter().find(|r| r.id == id) {
        Some(r) => Reply::json(200, &json::release(cx.root_url, repo, r)),
        None => cx.not_found(),
    }
}

/// `GET /repos/{owner}/{repo}/releases/tags/{tag}`.
pub(super) fn get_release_by_tag(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo(cx));
    let tag = cx.param("tag");
    match repo.releases.iter().find(|r| r.tag_name == tag) {
        Some(r) => Reply::json(200, &json::release(cx.root_url, repo, r)),
        None => cx.not_found(),
    }
}
