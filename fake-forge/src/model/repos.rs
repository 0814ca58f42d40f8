//! The current user and repositories: create (`POST /user/repos`), get (by name or id),
//! delete, and the listings (`/repos/search`, the caller's own).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Branch, Commit, Ctx, File, Model, Repo, json, repo_key, tri};
use crate::paging::{Page, paginate};
use crate::reply::Reply;
use crate::util::fake_sha;

/// `GET /user`.
pub(super) fn current_user(m: &mut Model, cx: &Ctx) -> Reply {
    let Some(login) = cx.caller else {
        return cx.error(401, "token is required");
    };
    let id = m.known_user_id(login);
    Reply::json(200, &json::user_seen(cx.root_url, login, id, cx.is_admin(login), m.visibility_of(login)))
}

/// `POST /user/repos`.
pub(super) fn create(m: &mut Model, cx: &Ctx) -> Reply {
    let Some(owner) = cx.caller else {
        return cx.error(401, "token is required");
    };
    let body = cx.json();
    let name = body["name"].as_str().unwrap_or("").trim();
    if name.is_empty() {
        return cx.error(422, "[Name]: Required");
    }
    if m.repos.contains_key(&repo_key(owner, name)) {
        return cx.error(409, "The repository with the same name already exists.");
    }
    let default_branch = body["default_branch"].as_str().filter(|b| !b.is_empty()).unwrap_or("main");
    let description = body["description"].as_str().unwrap_or("");
    let init = body["auto_init"].as_bool().unwrap_or(false).then(|| {
        let head = Commit::new("Initial commit", owner);
        let readme = format!("# {name}\n\n{description}").into_bytes();
        let file = File { sha: fake_sha(&readme), content: readme, last_commit: head.sha.clone() };
        Branch { head, files: BTreeMap::from([("README.md".to_string(), file)]) }
    });
    m.create_repo(owner, name, default_branch, init);
    let Some(repo) = m.repos.get_mut(&repo_key(owner, name)) else {
        return cx.error(500, "repository vanished");
    };
    repo.private = body["private"].as_bool().unwrap_or(false);
    repo.description = description.to_string();
    Reply::json(201, &json::repo(cx.root_url, repo, true))
}

/// `GET /repos/{owner}/{repo}`.
pub(super) fn get(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo(cx));
    let admin = cx.caller.is_some_and(|c| c.eq_ignore_ascii_case(&repo.owner) || cx.is_admin(c));
    Reply::json(200, &json::repo(cx.root_url, repo, admin))
}

/// `DELETE /repos/{owner}/{repo}`: owner or admin only.
pub(super) fn delete(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo(cx));
    let allowed = cx.caller.is_some_and(|c| c.eq_ignore_ascii_case(&repo.owner) || cx.is_admin(c));
    if !allowed {
        return cx.error(403, "Given user is not owner of organization.");
    }
    let key = repo_key(&repo.owner, &repo.name);
    m.repos.remove(&key);
    m.collaborators.remove(&key);
    m.attachments.retain(|a| a.repo_key != key);
    Reply::empty(204)
}

/// The message of a commit request body, or a Gitea-like default.
pub(super) fn message_or(body: &Value, default: String) -> String {
    body["message"].as_str().filter(|s| !s.is_empty()).map_or(default, str::to_string)
}

/// The repositories a listing shows, oldest first, as Gitea orders them by id.
fn listed(m: &Model, keep: impl Fn(&Repo) -> bool) -> Vec<&Repo> {
    let mut repos: Vec<&Repo> = m.repos.values().filter(|r| keep(r)).collect();
    repos.sort_by_key(|r| r.id);
    repos
}

/// A paged answer of repositories, wrapped as `repoSearch` wraps them or bare.
fn page_of(cx: &Ctx, repos: &[&Repo], wrap: bool) -> Reply {
    let page = Page::from_query(&cx.query);
    let items: Vec<Value> = page.slice(repos).iter().map(|r| json::repo(cx.root_url, r, false)).collect();
    let body = if wrap { serde_json::json!({"ok": true, "data": items}) } else { Value::Array(items) };
    paginate(Reply::json(200, &body), cx.root_url, cx.uri, repos.len(), page, true)
}

/// `GET /repos/search`: every repository the caller may see whose name holds `q` (any
/// letter case).
pub(super) fn search(m: &mut Model, cx: &Ctx) -> Reply {
    let q = cx.query("q").unwrap_or("").to_lowercase();
    let repos = listed(m, |r| r.name.to_lowercase().contains(&q) && m.sees(cx, r));
    page_of(cx, &repos, true)
}

/// `GET /user/repos`: the caller's own repositories and those it collaborates on.
pub(super) fn list_mine(m: &mut Model, cx: &Ctx) -> Reply {
    let Some(login) = cx.caller else {
        return cx.error(401, "token is required");
    };
    let repos = listed(m, |r| r.owner.eq_ignore_ascii_case(login) || m.collaborates(r, login));
    page_of(cx, &repos, false)
}

/// `GET /repositories/{id}`.
pub(super) fn get_by_id(m: &mut Model, cx: &Ctx) -> Reply {
    let id: i64 = cx.param("id").parse().unwrap_or(0);
    match m.repos.values().find(|r| r.id == id && m.sees(cx, r)) {
        Some(r) => Reply::json(200, &json::repo(cx.root_url, r, false)),
        None => cx.error(404, "repository does not exist [id: 0, uid: 0, owner_name: , name: ]"),
    }
}
