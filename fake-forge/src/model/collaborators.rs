//! A repository's collaborators and who may write to it, as Gitea answers them
//! (`routers/api/v1/repo/collaborators.go`): add or change one
//! (`PUT /repos/{owner}/{repo}/collaborators/{collaborator}`, body `{permission}`: `read`,
//! `write` (the default) or `admin`; the repository's owner, one of its admin collaborators or
//! a site admin), remove one (`DELETE`, the same), check one (`GET …/{collaborator}`: 204 or
//! 404), list them (`GET …/collaborators`, paged, oldest first) and the assignees
//! (`GET /repos/{owner}/{repo}/assignees`: the owner and every collaborator who may write, in
//! login order, not paged). Every route needs a signed-in caller (401 otherwise), as on the
//! forges.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Ctx, Model, json, repo_key, tri};
use crate::paging::{Page, paginate};
use crate::reply::Reply;

/// One repository's collaborators: lower-case login → (login as registered, permission),
/// with the order they were added in.
#[derive(Debug, Default, Clone)]
pub(crate) struct Collaborators {
    by_login: BTreeMap<String, (usize, String, String)>,
    added: usize,
}

impl Collaborators {
    /// Logins and permissions, oldest first.
    fn listed(&self) -> Vec<(&str, &str)> {
        let mut all: Vec<_> = self.by_login.values().collect();
        all.sort_by_key(|(at, _, _)| *at);
        all.into_iter().map(|(_, login, permission)| (login.as_str(), permission.as_str())).collect()
    }

    pub(super) fn permission(&self, login: &str) -> Option<&str> {
        self.by_login.get(&login.to_lowercase()).map(|(_, _, p)| p.as_str())
    }
}

/// The caller, when there is one; else Gitea's 401.
fn signed_in<'a>(cx: &Ctx<'a>) -> Result<&'a str, Reply> {
    cx.caller.ok_or_else(|| cx.error(401, "token is required"))
}

/// Whether `login` administers the repository `key` owned by `owner`.
fn administers(m: &Model, cx: &Ctx, key: &str, owner: &str, login: &str) -> bool {
    login.eq_ignore_ascii_case(owner)
        || cx.is_admin(login)
        || m.collaborators.get(key).and_then(|c| c.permission(login)) == Some("admin")
}

/// The repository's key and owner, for a signed-in caller who may see it.
fn repository(m: &Model, cx: &Ctx) -> Result<(String, String), Reply> {
    signed_in(cx)?;
    let repo = m.repo(cx)?;
    Ok((repo_key(&repo.owner, &repo.name), repo.owner.clone()))
}

/// `login` a collaborator of the repository `key` with `permission`, as a test's seed.
pub(super) fn seed(m: &mut Model, key: &str, login: &str, permission: &str) {
    put(m, key.to_owned(), login.to_owned(), permission.to_owned());
}

fn put(m: &mut Model, key: String, login: String, permission: String) {
    let c = m.collaborators.entry(key).or_default();
    let at = c.by_login.get(&login.to_lowercase()).map_or(c.added, |(at, _, _)| *at);
    c.added += 1;
    c.by_login.insert(login.to_lowercase(), (at, login, permission));
}

/// `PUT /repos/{owner}/{repo}/collaborators/{collaborator}`.
pub(super) fn add(m: &mut Model, cx: &Ctx) -> Reply {
    let (key, owner) = tri!(repository(m, cx));
    let caller = cx.caller.unwrap_or_default();
    if !administers(m, cx, &key, &owner, caller) {
        return cx.error(403, "user should be an owner or a collaborator with admin write of a repository");
    }
    let Some(login) = m.login_of(cx.param("collaborator")) else {
        return cx.error(422, "user does not exist");
    };
    if login.eq_ignore_ascii_case(&owner) {
        return cx.error(422, "user is the owner of the repository");
    }
    let body = cx.json();
    let permission = match body.get("permission").and_then(Value::as_str).unwrap_or("write") {
        p @ ("read" | "write" | "admin") => p.to_owned(),
        _ => return cx.error(422, "[Permission]: invalid permission"),
    };
    put(m, key, login, permission);
    Reply::empty(204)
}

/// `DELETE /repos/{owner}/{repo}/collaborators/{collaborator}`.
pub(super) fn delete(m: &mut Model, cx: &Ctx) -> Reply {
    let (key, owner) = tri!(repository(m, cx));
    if !administers(m, cx, &key, &owner, cx.caller.unwrap_or_default()) {
        return cx.error(403, "user should be an owner or a collaborator with admin write of a repository");
    }
    if m.login_of(cx.param("collaborator")).is_none() {
        return cx.error(422, "user does not exist");
    }
    if let Some(c) = m.collaborators.get_mut(&key) {
        c.by_login.remove(&cx.param("collaborator").to_lowercase());
    }
    Reply::empty(204)
}

/// `GET /repos/{owner}/{repo}/collaborators/{collaborator}`: 204 when one, else 404.
pub(super) fn check(m: &mut Model, cx: &Ctx) -> Reply {
    let (key, _) = tri!(repository(m, cx));
    if m.login_of(cx.param("collaborator")).is_none() {
        return cx.error(422, "user does not exist");
    }
    match m.collaborators.get(&key).and_then(|c| c.permission(cx.param("collaborator"))) {
        Some(_) => Reply::empty(204),
        None => cx.not_found(),
    }
}

/// `GET /repos/{owner}/{repo}/collaborators`.
pub(super) fn list(m: &mut Model, cx: &Ctx) -> Reply {
    let (key, _) = tri!(repository(m, cx));
    let listed = m.collaborators.get(&key).map(Collaborators::listed).unwrap_or_default();
    let users: Vec<Value> = listed.iter().map(|(login, _)| user(m, cx, login)).collect();
    let page = Page::from_query(&cx.query);
    let body = Value::Array(page.slice(&users).to_vec());
    paginate(Reply::json(200, &body), cx.root_url, cx.uri, users.len(), page, true)
}

/// `GET /repos/{owner}/{repo}/assignees`: the owner and the collaborators who may write.
pub(super) fn assignees(m: &mut Model, cx: &Ctx) -> Reply {
    let (key, owner) = tri!(repository(m, cx));
    let mut logins = vec![owner];
    if let Some(c) = m.collaborators.get(&key) {
        logins.extend(c.listed().into_iter().filter(|(_, p)| *p != "read").map(|(l, _)| l.to_owned()));
    }
    logins.sort_by_key(|l| l.to_lowercase());
    let users: Vec<Value> = logins.iter().map(|login| user(m, cx, login)).collect();
    Reply::json(200, &Value::Array(users))
}

fn user(m: &Model, cx: &Ctx, login: &str) -> Value {
    json::user(cx.root_url, login, m.known_user_id(login), cx.is_admin(login))
}
