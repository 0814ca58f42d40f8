//! A user's access tokens: list, create, delete (`/users/{username}/tokens`).
//!
//! As on Gitea, the route group checks, in order: the user exists (404), the caller is that
//! user or a site admin (403), the caller signed in with HTTP Basic (401 "auth required") —
//! a token, however privileged, cannot mint or list tokens.

use serde_json::{Value, json};

use super::{Ctx, Model, tri};
use crate::reply::Reply;
use crate::util::fake_sha;

/// One access token; the secret is shown once, when it is created.
#[derive(Debug, Clone)]
pub(crate) struct AccessToken {
    pub id: i64,
    /// The owner's login, as registered.
    pub owner: String,
    pub name: String,
    pub sha1: String,
    pub scopes: Vec<String>,
}

/// The `AccessToken` JSON; `sha1` only right after creation.
fn to_json(t: &AccessToken, with_secret: bool) -> Value {
    let mut v = json!({
        "id": t.id,
        "name": t.name,
        "sha1": "",
        "token_last_eight": &t.sha1[t.sha1.len() - 8..],
        "scopes": t.scopes,
    });
    if with_secret {
        v["sha1"] = Value::String(t.sha1.clone());
    }
    v
}

/// The route group's checks; the registered login of `{username}` when they pass.
fn owner(m: &Model, cx: &Ctx) -> Result<String, Reply> {
    let user = m.login_of(cx.param("username")).ok_or_else(|| cx.not_found())?;
    let allowed = cx.caller.is_some_and(|c| c.eq_ignore_ascii_case(&user) || cx.is_admin(c));
    if !allowed {
        return Err(cx.error(403, "doer should be the site admin or be same as the contextUser"));
    }
    if !cx.basic {
        return Err(cx.error(401, "auth required"));
    }
    Ok(user)
}

/// `GET /users/{username}/tokens`.
pub(super) fn list(m: &mut Model, cx: &Ctx) -> Reply {
    let user = tri!(owner(m, cx));
    let items: Vec<Value> = m.tokens.iter().filter(|t| t.owner == user).map(|t| to_json(t, false)).collect();
    let total = items.len();
    Reply::json(200, &Value::Array(items)).header("x-total-count", total.to_string())
}

/// `POST /users/{username}/tokens`.
pub(super) fn create(m: &mut Model, cx: &Ctx) -> Reply {
    let user = tri!(owner(m, cx));
    let body = cx.json();
    let Some(name) = body["name"].as_str().filter(|s| !s.is_empty()) else {
        return cx.error(422, "[Name]: Required");
    };
    if m.tokens.iter().any(|t| t.owner == user && t.name == name) {
        return cx.error(400, "access token name has been used already");
    }
    let scopes: Vec<String> = body["scopes"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string).collect())
        .unwrap_or_default();
    if scopes.is_empty() {
        return cx.error(400, "access token must have a scope");
    }
    let id = m.next_id();
    let token = AccessToken {
        id,
        owner: user.clone(),
        name: name.to_string(),
        sha1: fake_sha(&(&user, name, id)),
        scopes,
    };
    let reply = Reply::json(201, &to_json(&token, true));
    m.tokens.push(token);
    reply
}

/// `DELETE /users/{username}/tokens/{token}`: by id, else by name.
pub(super) fn delete(m: &mut Model, cx: &Ctx) -> Reply {
    let user = tri!(owner(m, cx));
    let which = cx.param("token");
    let id = which.parse::<i64>().ok().filter(|&i| i != 0);
    let before = m.tokens.len();
    m.tokens.retain(|t| !(t.owner == user && id.map_or(t.name == which, |i| t.id == i)));
    if m.tokens.len() == before { cx.not_found() } else { Reply::empty(204) }
}
