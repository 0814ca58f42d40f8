//! The in-memory forge behind the operations an end-to-end test exercises.
//!
//! Only what such a test needs is modelled: repositories, files per branch, branches, tags,
//! releases, issues, comments, pull requests, issue attachments, collaborators and a user's
//! access tokens, plus
//! `/version`, `/user`, `/users/{username}` and `/markdown/raw` (which, like the forges, renders its body as it
//! arrived). Each handler answers with Gitea's status codes and JSON field names, so a client
//! sees realistic successes *and*
//! failures (404 for a missing repository, 409 for a duplicate, 422 for a bad SHA). Every other
//! operation returns `None` here and goes to the spec-driven fallback — but not for a
//! repository the caller may not see (`access`): a private one, or a public one of a user
//! hidden from them, is answered 404 on every route under `/repos/{owner}/{repo}`.

mod access;
mod collaborators;
mod contents;
mod issues;
mod json;
mod refs;
mod repos;
mod tokens;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::paging::RequestUri;
use crate::reply::Reply;
use crate::util::{fake_sha, now_rfc3339};
use crate::{Flavor, Visibility};

pub(crate) use issues::serve_attachment;
pub(crate) use json::user as user_json;

/// Everything a handler may look at about the request.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub root_url: &'a str,
    pub flavor: Flavor,
    pub version: &'a str,
    /// The login of the authenticated caller, if any (the user a site admin acts as with sudo).
    pub caller: Option<&'a str>,
    /// Whether the caller signed in with HTTP Basic (login and password).
    pub basic: bool,
    pub admins: &'a [String],
    pub op_id: &'a str,
    pub params: &'a [(String, String)],
    pub query: Vec<(String, String)>,
    pub uri: RequestUri<'a>,
    pub content_type: Option<&'a str>,
    pub body: &'a [u8],
}

impl Ctx<'_> {
    /// A decoded path parameter ("" if absent).
    pub(crate) fn param(&self, name: &str) -> &str {
        self.params.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str())
    }

    /// A decoded query parameter, if present and non-empty.
    pub(crate) fn query(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, v)| k == name && !v.is_empty()).map(|(_, v)| v.as_str())
    }

    /// The body as JSON (`Null` when it is not JSON).
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(self.body).unwrap_or(Value::Null)
    }

    pub(crate) fn is_admin(&self, login: &str) -> bool {
        self.admins.iter().any(|a| a == login)
    }

    fn not_found(&self) -> Reply {
        Reply::not_found(self.root_url)
    }

    fn error(&self, status: u16, message: &str) -> Reply {
        Reply::error(status, self.root_url, message)
    }
}

/// A commit, reduced to what branch and tag JSON show.
#[derive(Debug, Clone)]
pub(crate) struct Commit {
    pub sha: String,
    pub message: String,
    pub author: String,
    pub when: String,
}

impl Commit {
    fn new(message: &str, author: &str) -> Commit {
        Commit {
            sha: fake_sha(&(message, author)),
            message: message.to_string(),
            author: author.to_string(),
            when: now_rfc3339(),
        }
    }
}

/// One file in one branch.
#[derive(Debug, Clone)]
pub(crate) struct File {
    pub content: Vec<u8>,
    pub sha: String,
    pub last_commit: String,
}

/// A branch: its head commit and a full snapshot of its files.
#[derive(Debug, Clone)]
pub(crate) struct Branch {
    pub head: Commit,
    pub files: BTreeMap<String, File>,
}

/// A lightweight or annotated tag.
#[derive(Debug, Clone)]
pub(crate) struct Tag {
    pub commit: Commit,
    pub message: String,
}

/// A release.
#[derive(Debug, Clone)]
pub(crate) struct Release {
    pub id: i64,
    pub tag_name: String,
    pub target: String,
    pub name: String,
    pub body: String,
    pub draft: bool,
    pub prerelease: bool,
    pub author: String,
    pub author_id: i64,
    pub created: String,
}

/// An issue.
#[derive(Debug, Clone)]
pub(crate) struct Issue {
    pub id: i64,
    pub number: i64,
    pub title: String,
    pub body: String,
    pub state: String,
    pub poster: String,
    pub poster_id: i64,
    pub created: String,
}

/// A comment on an issue or pull request.
#[derive(Debug, Clone)]
pub(crate) struct Comment {
    pub id: i64,
    pub issue: i64,
    pub body: String,
    pub poster: String,
    pub poster_id: i64,
    pub created: String,
}

/// A pull request; its number is an issue number (as in Gitea, a pull request is an issue).
#[derive(Debug, Clone)]
pub(crate) struct Pull {
    pub number: i64,
    pub head: String,
    pub base: String,
    pub merged: bool,
}

/// An uploaded issue attachment; the bytes are kept for `GET /attachments/{uuid}`.
#[derive(Debug, Clone)]
pub(crate) struct Attachment {
    pub id: i64,
    pub uuid: String,
    pub repo_key: String,
    pub issue: i64,
    pub name: String,
    pub content_type: String,
    pub data: Vec<u8>,
    pub created: String,
}

/// A repository.
#[derive(Debug, Clone)]
pub(crate) struct Repo {
    pub id: i64,
    pub owner: String,
    pub owner_id: i64,
    pub name: String,
    pub description: String,
    pub private: bool,
    /// The owner's [`Visibility`], as the repository's `owner.visibility` shows it.
    pub owner_visibility: Visibility,
    pub default_branch: String,
    pub branches: BTreeMap<String, Branch>,
    pub tags: BTreeMap<String, Tag>,
    pub releases: Vec<Release>,
    pub issues: Vec<Issue>,
    pub comments: Vec<Comment>,
    pub pulls: Vec<Pull>,
    pub created: String,
}

impl Repo {
    pub(crate) fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }
}

/// The whole state.
#[derive(Debug, Default)]
pub(crate) struct Model {
    users: Vec<String>,
    repos: BTreeMap<String, Repo>,
    attachments: Vec<Attachment>,
    tokens: Vec<tokens::AccessToken>,
    /// Each repository's collaborators, by its key.
    collaborators: BTreeMap<String, collaborators::Collaborators>,
    /// Users who are not public, by lower-case login (see [`Visibility`]).
    visibility: BTreeMap<String, Visibility>,
    last_id: i64,
}

/// Repository names are case-insensitive in Gitea.
fn repo_key(owner: &str, name: &str) -> String {
    format!("{}/{}", owner.to_lowercase(), name.to_lowercase())
}

impl Model {
    /// A model knowing `logins` (their ids follow this order, from 1).
    pub(crate) fn new(logins: impl IntoIterator<Item = String>) -> Model {
        let mut model = Model::default();
        for login in logins {
            model.user_id(&login);
        }
        model
    }

    /// The id of `login`, registering it on first sight.
    pub(crate) fn user_id(&mut self, login: &str) -> i64 {
        let pos = match self.users.iter().position(|u| u.eq_ignore_ascii_case(login)) {
            Some(p) => p,
            None => {
                self.users.push(login.to_string());
                self.users.len() - 1
            }
        };
        pos as i64 + 1
    }

    /// The id of a registered `login` (any letter case), 0 when there is none.
    pub(crate) fn known_user_id(&self, login: &str) -> i64 {
        self.users.iter().position(|u| u.eq_ignore_ascii_case(login)).map_or(0, |p| p as i64 + 1)
    }

    /// A registered login as it was registered, found in any letter case.
    pub(crate) fn login_of(&self, login: &str) -> Option<String> {
        self.users.iter().find(|u| u.eq_ignore_ascii_case(login)).cloned()
    }

    /// A fresh id, shared by every kind of object (ids only need to be unique).
    fn next_id(&mut self) -> i64 {
        self.last_id += 1;
        self.last_id
    }

    /// Creates `owner/name`; `init` gives it a `main`-like default branch with one commit.
    fn create_repo(&mut self, owner: &str, name: &str, default_branch: &str, init: Option<Branch>) {
        let owner_id = self.user_id(owner);
        let id = self.next_id();
        let mut branches = BTreeMap::new();
        if let Some(b) = init {
            branches.insert(default_branch.to_string(), b);
        }
        let repo = Repo {
            id,
            owner: owner.to_string(),
            owner_id,
            name: name.to_string(),
            description: String::new(),
            private: false,
            owner_visibility: self.visibility_of(owner),
            default_branch: default_branch.to_string(),
            branches,
            tags: BTreeMap::new(),
            releases: Vec::new(),
            issues: Vec::new(),
            comments: Vec::new(),
            pulls: Vec::new(),
            created: now_rfc3339(),
        };
        self.repos.insert(repo_key(owner, name), repo);
    }

    /// See [`crate::FakeForge::seed_repo`].
    pub(crate) fn seed_repo(&mut self, owner: &str, name: &str) {
        if self.repos.contains_key(&repo_key(owner, name)) {
            return;
        }
        let branch = Branch { head: Commit::new("Initial commit", owner), files: BTreeMap::new() };
        self.create_repo(owner, name, "main", Some(branch));
    }

    /// See [`crate::FakeForge::seed_file`].
    pub(crate) fn seed_file(&mut self, owner: &str, name: &str, path: &str, content: &[u8]) {
        self.seed_repo(owner, name);
        let Some(repo) = self.repos.get_mut(&repo_key(owner, name)) else {
            return;
        };
        let Some(branch) = repo.branches.get_mut(&repo.default_branch) else {
            return;
        };
        let file =
            File { sha: fake_sha(&content), content: content.to_vec(), last_commit: branch.head.sha.clone() };
        branch.files.insert(path.trim_matches('/').to_string(), file);
    }

    /// See [`crate::FakeForge::seed_issues`].
    pub(crate) fn seed_issues(&mut self, owner: &str, name: &str, n: usize) {
        self.seed_repo(owner, name);
        for _ in 0..n {
            let poster_id = self.user_id(owner);
            let id = self.next_id();
            let Some(repo) = self.repos.get_mut(&repo_key(owner, name)) else {
                return;
            };
            let number = repo.issues.len() as i64 + 1;
            repo.issues.push(Issue {
                id,
                number,
                title: format!("issue {number}"),
                body: String::new(),
                state: "open".into(),
                poster: repo.owner.clone(),
                poster_id,
                created: now_rfc3339(),
            });
        }
    }

    /// See [`crate::FakeForge::seed_collaborator`].
    pub(crate) fn seed_collaborator(&mut self, owner: &str, name: &str, login: &str, permission: &str) {
        self.seed_repo(owner, name);
        self.user_id(login);
        collaborators::seed(self, &repo_key(owner, name), login, permission);
    }

    /// The repository of the request's `{owner}/{repo}`, if the caller may see it.
    fn repo(&self, cx: &Ctx) -> Result<&Repo, Reply> {
        let repo =
            self.repos.get(&repo_key(cx.param("owner"), cx.param("repo"))).ok_or_else(|| cx.not_found())?;
        if self.sees(cx, repo) { Ok(repo) } else { Err(cx.not_found()) }
    }

    fn repo_mut(&mut self, cx: &Ctx) -> Result<&mut Repo, Reply> {
        self.repo(cx)?;
        self.repos.get_mut(&repo_key(cx.param("owner"), cx.param("repo"))).ok_or_else(|| cx.not_found())
    }

    /// Answers a modelled operation, or `None` to let the fallback answer.
    pub(crate) fn handle(&mut self, cx: &Ctx) -> Option<Reply> {
        if let Some(hidden) = access::hidden_repo(self, cx) {
            return Some(hidden);
        }
        let reply = match cx.op_id {
            "getVersion" => Reply::json(200, &serde_json::json!({"version": cx.version})),
            "renderMarkdownRaw" => render_raw(cx.body),
            "userGetCurrent" => repos::current_user(self, cx),
            "userGet" => access::get_user(self, cx),
            "createCurrentUserRepo" => repos::create(self, cx),
            "repoGet" => repos::get(self, cx),
            "repoDelete" => repos::delete(self, cx),
            "repoSearch" => repos::search(self, cx),
            "userCurrentListRepos" => repos::list_mine(self, cx),
            "repoGetByID" => repos::get_by_id(self, cx),
            "issueSearchIssues" => issues::search(self, cx),
            "repoGetContents" | "repoGetContentsList" => contents::get(self, cx),
            "repoCreateFile" => contents::create(self, cx),
            "repoUpdateFile" => contents::update(self, cx),
            "repoDeleteFile" => contents::delete(self, cx),
            "repoGetRawFile" => contents::raw(self, cx),
            "repoListBranches" => refs::list_branches(self, cx),
            "repoCreateBranch" => refs::create_branch(self, cx),
            "repoGetBranch" => refs::get_branch(self, cx),
            "repoDeleteBranch" => refs::delete_branch(self, cx),
            "repoListTags" => refs::list_tags(self, cx),
            "repoGetTag" => refs::get_tag(self, cx),
            "repoListReleases" => refs::list_releases(self, cx),
            "repoCreateRelease" => refs::create_release(self, cx),
            "repoGetRelease" => refs::get_release(self, cx),
            "repoGetReleaseByTag" => refs::get_release_by_tag(self, cx),
            "issueListIssues" => issues::list(self, cx),
            "issueCreateIssue" => issues::create(self, cx),
            "issueGetIssue" => issues::get(self, cx),
            "issueGetComments" => issues::list_comments(self, cx),
            "issueCreateComment" => issues::create_comment(self, cx),
            "repoCreatePullRequest" => issues::create_pull(self, cx),
            "repoGetPullRequest" => issues::get_pull(self, cx),
            "issueCreateIssueAttachment" => issues::create_attachment(self, cx),
            "issueListIssueAttachments" => issues::list_attachments(self, cx),
            "issueGetIssueAttachment" => issues::get_attachment(self, cx),
            "repoAddCollaborator" => collaborators::add(self, cx),
            "repoDeleteCollaborator" => collaborators::delete(self, cx),
            "repoCheckCollaborator" => collaborators::check(self, cx),
            "repoListCollaborators" => collaborators::list(self, cx),
            "repoGetAssignees" => collaborators::assignees(self, cx),
            "userGetTokens" => tokens::list(self, cx),
            "userCreateToken" => tokens::create(self, cx),
            "userDeleteAccessToken" => tokens::delete(self, cx),
            _ => return None,
        };
        Some(reply)
    }
}

/// `POST /markdown/raw`: the body as it arrived, in one HTML paragraph. A real forge renders
/// Markdown; what matters to a client is that the text is taken byte for byte (a JSON-quoted
/// string comes back with its quotes, as on the forges).
fn render_raw(body: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(body);
    let escaped = text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    Reply::bytes(200, "text/html; charset=utf-8", format!("<p>{escaped}</p>\n"))
}

/// Unwraps a `Result<T, Reply>` inside a handler returning `Reply`.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(reply) => return reply,
        }
    };
}
pub(crate) use tri;
