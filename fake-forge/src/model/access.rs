//! Who sees what, as on the forges: a private repository is seen by its owner, its
//! collaborators and site admins only; a user's profile by everyone (`public`), signed-in
//! users (`limited`) or the user and site admins (`private`); and a public repository of a
//! user the caller may not see is hidden from the caller too (Gitea's "strangers may not
//! check out a public repository of a private user").
//!
//! Everything under `/repos/{owner}/{repo}` of a repository the caller may not see is
//! answered 404, whether the model handles the operation or the fallback would: a forge
//! says nothing about what a stranger may not see, not even that it exists.

use super::{Ctx, Model, Repo, json, repo_key};
use crate::Visibility;
use crate::reply::Reply;

impl Model {
    /// See [`crate::FakeForge::seed_private_repo`].
    pub(crate) fn seed_private_repo(&mut self, owner: &str, name: &str) {
        self.seed_repo(owner, name);
        if let Some(repo) = self.repos.get_mut(&repo_key(owner, name)) {
            repo.private = true;
        }
    }

    /// See [`crate::FakeForge::set_visibility`].
    pub(crate) fn set_visibility(&mut self, login: &str, visibility: Visibility) {
        self.user_id(login);
        self.visibility.insert(login.to_lowercase(), visibility);
        for repo in self.repos.values_mut().filter(|r| r.owner.eq_ignore_ascii_case(login)) {
            repo.owner_visibility = visibility;
        }
    }

    /// `login`'s visibility (public unless set).
    pub(crate) fn visibility_of(&self, login: &str) -> Visibility {
        self.visibility.get(&login.to_lowercase()).copied().unwrap_or_default()
    }

    /// Whether the caller may see `login`'s profile.
    pub(crate) fn shows_user(&self, cx: &Ctx, login: &str) -> bool {
        match self.visibility_of(login) {
            Visibility::Public => true,
            Visibility::Limited => cx.caller.is_some(),
            Visibility::Private => cx.caller.is_some_and(|c| c.eq_ignore_ascii_case(login) || cx.is_admin(c)),
        }
    }

    /// Whether the caller is the repository's owner, a collaborator (of any permission) or a
    /// site admin.
    pub(crate) fn is_member(&self, cx: &Ctx, repo: &Repo) -> bool {
        cx.caller.is_some_and(|c| {
            c.eq_ignore_ascii_case(&repo.owner) || cx.is_admin(c) || self.collaborates(repo, c)
        })
    }

    /// Whether `login` collaborates on `repo` (with any permission).
    pub(crate) fn collaborates(&self, repo: &Repo, login: &str) -> bool {
        self.collaborators.get(&repo_key(&repo.owner, &repo.name)).and_then(|k| k.permission(login)).is_some()
    }

    /// Whether the caller may see `repo` at all.
    pub(crate) fn sees(&self, cx: &Ctx, repo: &Repo) -> bool {
        self.is_member(cx, repo) || (!repo.private && self.shows_user(cx, &repo.owner))
    }
}

/// 404 for any route under `/repos/{owner}/{repo}` of a known repository the caller may not
/// see; `None` otherwise (an unknown repository is left to the handler or the fallback).
pub(super) fn hidden_repo(m: &Model, cx: &Ctx) -> Option<Reply> {
    if !cx.uri.raw_path.starts_with("/api/v1/repos/") {
        return None;
    }
    let (owner, name) = (cx.param("owner"), cx.param("repo"));
    if owner.is_empty() || name.is_empty() {
        return None;
    }
    let repo = m.repos.get(&repo_key(owner, name))?;
    (!m.sees(cx, repo)).then(|| cx.not_found())
}

/// `GET /users/{username}`: the profile, with its `visibility`; 404 for an unknown user or
/// one the caller may not see.
pub(super) fn get_user(m: &mut Model, cx: &Ctx) -> Reply {
    let Some(login) = m.login_of(cx.param("username")) else {
        return cx.not_found();
    };
    if !m.shows_user(cx, &login) {
        return cx.not_found();
    }
    let id = m.known_user_id(&login);
    Reply::json(200, &json::user_seen(cx.root_url, &login, id, cx.is_admin(&login), m.visibility_of(&login)))
}
