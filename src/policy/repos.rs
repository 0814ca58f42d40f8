//! Repository allowlists: `ALLOWED_REPOS`, `WRITE_ALLOWED_REPOS`, and the request headers
//! that narrow them (`X-MCP-Allowed-Repos`, `X-MCP-Write-Allowed-Repos`).
//!
//! A call is judged by what its route names, before anything is sent: the repository
//! (`{owner}/{repo}` and its kin), or an owner on its own (`{org}`, a package owner), which
//! needs the whole owner (`owner/*`) on the list. Names compare as the forges compare them,
//! by their lower-case form. A renamed or transferred repository cannot escape the list: the
//! forge answers the old name with a redirect, which this server never follows, so a call
//! reaches what its route names or nothing. Operations that create or move a repository name
//! the new place in their body (a new repository, a fork, a migration, a rename, a transfer):
//! that place must be writable too. Listings across repositories (searches, a user's or an
//! organisation's repositories, notifications, the issue search, activity feeds) cannot be
//! judged by their route; their answers are filtered (`filter`), and so are the few answers
//! that name their repository only by id.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::catalog::Operation;
use crate::catalog::operation::Piece;
use crate::decode::json::Elided;
use crate::decode::pagination::Pagination;
use crate::envelope::Filtered;

/// Most entries of a list sent in a request header.
pub const MAX_REQUEST_ENTRIES: usize = 256;

/// Whether a comma-separated list a request sends names more than `MAX_REQUEST_ENTRIES`
/// entries (empty ones not counted), found without building any.
pub fn too_many_entries(text: &str) -> bool {
    text.split(',').filter(|e| !e.trim().is_empty()).nth(MAX_REQUEST_ENTRIES).is_some()
}

/// Longest list entry or name echoed in a message.
const ECHO_CHARS: usize = 100;

/// One allowlist: repositories, whole owners, or everything. Names are kept lower-case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepoList {
    any: bool,
    owners: HashSet<String>,
    /// `owner/repo`.
    repos: HashSet<String>,
}

impl RepoList {
    /// Comma-separated `owner/repo`, `owner/*` or `*`. A list that names nothing is refused:
    /// an empty fence is more likely a mistake than a wish to allow no repository.
    pub fn parse(text: &str) -> Result<RepoList, String> {
        let mut list = RepoList::default();
        let mut entries = 0usize;
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            entries += 1;
            if entry == "*" {
                list.any = true;
                continue;
            }
            let bad = || format!("{:?} is not owner/repo, owner/* or *", clip(entry));
            let (owner, repo) = entry.split_once('/').ok_or_else(bad)?;
            if !is_name(owner) || !(repo == "*" || is_name(repo)) {
                return Err(bad());
            }
            let owner = owner.to_lowercase();
            if repo == "*" {
                list.owners.insert(owner);
            } else {
                list.repos.insert(format!("{owner}/{}", repo.to_lowercase()));
            }
        }
        if entries == 0 {
            return Err("names no repository (leave it unset for no restriction)".into());
        }
        Ok(list)
    }

    /// A list a request sends in a header: at most `MAX_REQUEST_ENTRIES` entries, counted
    /// before any is parsed, so a large header costs no more than reading it.
    pub fn parse_request(text: &str) -> Result<RepoList, String> {
        if too_many_entries(text) {
            return Err(format!(
                "names more than {MAX_REQUEST_ENTRIES} entries; use owner/* for many repositories of one owner"
            ));
        }
        RepoList::parse(text)
    }

    /// `owner` and `repo` lower-case.
    fn allows_repo(&self, owner: &str, repo: &str) -> bool {
        self.any
            || self.owners.contains(owner)
            || (!self.repos.is_empty() && self.repos.contains(&format!("{owner}/{repo}")))
    }

    /// The whole owner (lower-case).
    fn allows_owner(&self, owner: &str) -> bool {
        self.any || self.owners.contains(owner)
    }
}

/// A name as the forges allow it: letters, digits, `-`, `_`, `.`.
fn is_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 255 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

fn clip(s: &str) -> String {
    crate::guard::redact::truncate_chars(s, ECHO_CHARS)
}

/// The lists one call answers to: the server's and the request's, for reads, and for writes
/// also the write lists. Every list present must allow.
#[derive(Debug, Clone, Copy)]
pub struct Fence<'a> {
    /// A list, where it comes from, and whether it governs only writes.
    lists: [(Option<&'a RepoList>, &'static str, bool); 4],
}

/// Where a list comes from, as a message names it.
const SERVER_READ: &str = "the repositories this server allows (ALLOWED_REPOS)";
const SERVER_WRITE: &str = "the repositories this server allows writing to (WRITE_ALLOWED_REPOS)";
const REQUEST_READ: &str = "the repositories this request allows (X-MCP-Allowed-Repos)";
const REQUEST_WRITE: &str = "the repositories this request allows writing to (X-MCP-Write-Allowed-Repos)";

impl<'a> Fence<'a> {
    pub fn new(
        server: Option<&'a Arc<RepoList>>,
        server_write: Option<&'a Arc<RepoList>>,
        request: Option<&'a Arc<RepoList>>,
        request_write: Option<&'a Arc<RepoList>>,
    ) -> Fence<'a> {
        Fence {
            lists: [
                (server.map(|l| &**l), SERVER_READ, false),
                (server_write.map(|l| &**l), SERVER_WRITE, true),
                (request.map(|l| &**l), REQUEST_READ, false),
                (request_write.map(|l| &**l), REQUEST_WRITE, true),
            ],
        }
    }

    /// No list at all: every repository.
    pub fn is_open(&self) -> bool {
        self.lists.iter().all(|(l, _, _)| l.is_none())
    }

    fn applying(&self, write: bool) -> impl Iterator<Item = (&'a RepoList, &'static str)> + '_ {
        self.lists.iter().filter(move |(_, _, w)| write || !w).filter_map(|(l, why, _)| l.map(|l| (l, *why)))
    }

    /// Why the repository may not be touched (read, or `write`), if it may not.
    pub fn repo_refusal(&self, owner: &str, repo: &str, write: bool) -> Option<String> {
        let (o, r) = (owner.to_lowercase(), repo.to_lowercase());
        let (_, why) = self.applying(write).find(|(l, _)| !l.allows_repo(&o, &r))?;
        Some(format!("the repository {}/{} is not among {why}", clip(owner), clip(repo)))
    }

    /// Why an operation on the owner itself may not run, if it may not: it needs `owner/*`.
    pub fn owner_refusal(&self, owner: &str, write: bool) -> Option<String> {
        let o = owner.to_lowercase();
        let (_, why) = self.applying(write).find(|(l, _)| !l.allows_owner(&o))?;
        Some(format!(
            "the owner {} is not wholly among {why}: an operation on an owner itself (not on one of its repositories) needs `{}/*` on the list",
            clip(owner),
            clip(owner)
        ))
    }

    /// Why an operation on every repository of the instance may not run, if it may not: it
    /// needs `*` on every list that applies.
    fn everything_refusal(&self, op_id: &str, write: bool) -> Option<String> {
        let (_, why) = self.applying(write).find(|(l, _)| !l.any)?;
        Some(format!(
            "{op_id} acts on every repository of the instance, and not all of them are among {why}: it needs `*` on the list"
        ))
    }

    /// Whether a listing's item in `owner/repo` may be shown.
    fn shows(&self, full_name: &str) -> bool {
        self.hides(full_name).is_none()
    }

    /// Which list hides an answer's `owner/repo`, if one does.
    fn hides(&self, full_name: &str) -> Option<&'static str> {
        let lower = full_name.to_lowercase();
        let Some((o, r)) = lower.split_once('/') else { return Some(SERVER_READ) };
        self.applying(false).find(|(l, _)| !l.allows_repo(o, r)).map(|(_, why)| why)
    }
}

/// Where a route's values come from: a tool's arguments, or the segments of a raw path.
pub enum Values<'a> {
    Args(&'a Map<String, Value>),
    Segments(&'a [&'a str]),
}

impl Values<'_> {
    /// The value of path parameter `name`, at segment `index`, as the path would carry it.
    fn get(&self, index: usize, name: &str) -> Option<String> {
        match self {
            Values::Args(args) => match args.get(name)? {
                Value::String(s) => Some(s.clone()),
                v @ (Value::Number(_) | Value::Bool(_)) => Some(v.to_string()),
                _ => None,
            },
            Values::Segments(s) => s.get(index).map(|s| (*s).to_owned()),
        }
    }
}

/// Parameters that name a repository, and those that name its owner.
const REPO_PARAMS: [&str; 3] = ["repo", "repo_name", "template_repo"];
const OWNER_PARAMS: [&str; 3] = ["owner", "org", "template_owner"];

/// What a route names.
#[derive(Debug, PartialEq, Eq)]
enum Named {
    Repo(String, String),
    Owner(String),
}

/// The repositories and owners `op`'s route names with these values. Only whole-segment
/// parameters before any wildcard count (every owner and repository parameter is one); a
/// value that is missing names nothing here — validation refuses the call before it is sent.
fn named(op: &Operation, values: &Values) -> Vec<Named> {
    let mut out = Vec::new();
    let mut owner: Option<Option<String>> = None;
    for (index, pieces) in op.template.segments.iter().enumerate() {
        let [Piece::Param(name)] = pieces.as_slice() else { continue };
        if op.params.iter().any(|p| &p.name == name && p.wildcard) {
            break;
        }
        if OWNER_PARAMS.contains(&name.as_str()) {
            if let Some(Some(o)) = owner.take() {
                out.push(Named::Owner(o));
            }
            owner = Some(values.get(index, name));
        } else if REPO_PARAMS.contains(&name.as_str()) {
            if let (Some(Some(o)), Some(r)) = (owner.take(), values.get(index, name)) {
                out.push(Named::Repo(o, r));
            }
        }
    }
    if let Some(Some(o)) = owner {
        out.push(Named::Owner(o));
    }
    out
}

/// How an operation's route is judged when the operation creates or moves a repository.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RouteUse {
    /// As any operation of its method.
    AsMethod,
    /// Only read (the source of a fork or a template).
    Read,
    /// Not at all: the new place is what matters (an owner's "create a repository").
    Skip,
}

/// Where a part of the new place comes from; the first that gives a value wins.
#[derive(Clone, Copy, PartialEq, Eq)]
enum From {
    Body(&'static str),
    Route(&'static str),
    /// The user the call runs as: known only once the caller is identified.
    Caller,
    /// A body member that names the owner by id: the place cannot be judged by name.
    ById(&'static str),
}

/// An operation that creates or moves a repository named (partly) in its body.
struct Moves {
    op: &'static str,
    route: RouteUse,
    owner: &'static [From],
    name: &'static [From],
}

/// Every operation of both forges that gives a repository a place the route does not name.
const MOVES: &[Moves] = &[
    Moves {
        op: "createCurrentUserRepo",
        route: RouteUse::Skip,
        owner: &[From::Caller],
        name: &[From::Body("name")],
    },
    Moves {
        op: "createOrgRepo",
        route: RouteUse::Skip,
        owner: &[From::Route("org")],
        name: &[From::Body("name")],
    },
    Moves {
        op: "createOrgRepoDeprecated",
        route: RouteUse::Skip,
        owner: &[From::Route("org")],
        name: &[From::Body("name")],
    },
    Moves {
        op: "adminCreateRepo",
        route: RouteUse::Skip,
        owner: &[From::Route("username")],
        name: &[From::Body("name")],
    },
    Moves {
        op: "repoMigrate",
        route: RouteUse::Skip,
        owner: &[From::Body("repo_owner"), From::ById("uid"), From::Caller],
        name: &[From::Body("repo_name")],
    },
    Moves {
        op: "generateRepo",
        route: RouteUse::Read,
        owner: &[From::Body("owner")],
        name: &[From::Body("name")],
    },
    Moves {
        op: "createFork",
        route: RouteUse::Read,
        owner: &[From::Body("organization"), From::Caller],
        name: &[From::Body("name"), From::Route("repo")],
    },
    Moves {
        op: "repoTransfer",
        route: RouteUse::AsMethod,
        owner: &[From::Body("new_owner")],
        name: &[From::Route("repo")],
    },
    // A rename: only when the body names a new name.
    Moves {
        op: "repoEdit",
        route: RouteUse::AsMethod,
        owner: &[From::Route("owner")],
        name: &[From::Body("name")],
    },
];

/// Whether a body names one member twice in different letter case (the forges take either,
/// so the policy could judge one value and the forge use the other).
fn ambiguous(body: Option<&Value>) -> bool {
    let Some(map) = body.and_then(Value::as_object) else { return false };
    let mut seen = std::collections::HashSet::with_capacity(map.len());
    map.keys().any(|k| !seen.insert(k.to_ascii_lowercase()))
}

/// The value of one source for the new place (`None`: this source gives none).
fn from_source(source: From, op: &Operation, values: &Values, body: Option<&Value>) -> Option<String> {
    match source {
        From::Body(key) => body
            .and_then(Value::as_object)?
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .and_then(|(_, v)| v.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        From::Route(name) => {
            let index = op
                .template
                .segments
                .iter()
                .position(|p| matches!(p.as_slice(), [Piece::Param(n)] if n == name))?;
            values.get(index, name)
        }
        From::Caller | From::ById(_) => None,
    }
}

/// Why `op` (reached with these route values and body) may not run inside the fence, if it may
/// not. `caller`: the login the call runs as, once known; before that, a new place that
/// depends on it is left to the second look (`caller_refusal`).
pub fn refusal(fence: &Fence, op: &Operation, values: &Values, body: Option<&Value>) -> Option<String> {
    if fence.is_open() {
        return None;
    }
    if UNJUDGED_WRITES.contains(&op.id.as_str()) {
        return Some(format!(
            "{} changes things of repositories its route does not name, so under a repository allowlist it cannot be judged before it runs; use an operation that names the repository (for notifications: notifyReadRepoList)",
            op.id
        ));
    }
    let moves = MOVES.iter().find(|m| m.op == op.id);
    let body_repo = BODY_REPOS.iter().find(|(id, _)| *id == op.id);
    if (moves.is_some() || body_repo.is_some()) && ambiguous(body) {
        return Some(format!(
            "the body of {} names one member twice in different letter case; under a repository allowlist send each once",
            op.id
        ));
    }
    if let Some((_, changes)) = body_repo {
        let get = |key: &'static str| from_source(From::Body(key), op, values, body);
        if let (Some(o), Some(r)) = (get("owner"), get("repo")) {
            if let Some(why) = fence.repo_refusal(&o, &r, *changes) {
                return Some(format!("{} names another repository's issue: {why}", op.id));
            }
        }
    }
    let write = super::is_write(op);
    if INSTANCE_PREFIXES.iter().any(|p| op.path.starts_with(p)) {
        return fence.everything_refusal(&op.id, write);
    }
    let route = moves.map_or(RouteUse::AsMethod, |m| m.route);
    if route != RouteUse::Skip {
        let write = write && route == RouteUse::AsMethod;
        let listing = LISTINGS.iter().any(|l| l.op == op.id);
        for n in named(op, values) {
            let why = match n {
                Named::Repo(o, r) => fence.repo_refusal(&o, &r, write),
                // A listing of an owner's repositories is filtered instead.
                Named::Owner(_) if listing => None,
                Named::Owner(o) => fence.owner_refusal(&o, write),
            };
            if why.is_some() {
                return why;
            }
        }
    }
    let m = moves?;
    place_refusal(fence, m, op, values, body, None)
}

/// The second look, once the caller is known: the new place of an operation that puts a
/// repository under the caller (a new repository, a fork or a migration without an owner).
pub fn caller_refusal(
    fence: &Fence,
    op: &Operation,
    values: &Values,
    body: Option<&Value>,
    caller: Option<&str>,
) -> Option<String> {
    if fence.is_open() {
        return None;
    }
    if CALLER_OWNER_PREFIXES.iter().any(|p| op.path.starts_with(p)) {
        let write = super::is_write(op);
        return match caller.filter(|c| !c.is_empty()) {
            Some(login) => fence.owner_refusal(login, write),
            None => {
                Some(format!("{} acts on the caller's account, and this call runs without a login", op.id))
            }
        };
    }
    let m = MOVES.iter().find(|m| m.op == op.id)?;
    if !m.owner.contains(&From::Caller) {
        return None;
    }
    place_refusal(fence, m, op, values, body, Some(caller.unwrap_or("")))
}

/// The new place of `m`: writable, or why not. `caller`: `None` before the caller is known
/// (a place that depends on it waits), `Some("")` when it has no login.
fn place_refusal(
    fence: &Fence,
    m: &Moves,
    op: &Operation,
    values: &Values,
    body: Option<&Value>,
    caller: Option<&str>,
) -> Option<String> {
    let name = m.name.iter().find_map(|s| from_source(*s, op, values, body));
    let Some(name) = name else {
        // A rename without a new name renames nothing; elsewhere validation wants the name.
        return None;
    };
    let mut owner = None;
    for source in m.owner {
        match *source {
            From::Caller => {
                owner = Some(match caller {
                    // The place depends on the caller, not known yet: `caller_refusal` judges it.
                    None => return None,
                    Some("") => Err("this call runs without a login"),
                    Some(c) => Ok(c.to_owned()),
                });
            }
            From::ById(key) => {
                let by_id = body.and_then(Value::as_object).is_some_and(|b| {
                    b.iter().any(|(k, v)| k.eq_ignore_ascii_case(key) && !(v.is_null() || v == 0))
                });
                if by_id {
                    owner = Some(Err("the body names the owner by id; name it by login instead"));
                }
            }
            other => owner = from_source(other, op, values, body).map(Ok),
        }
        if owner.is_some() {
            break;
        }
    }
    match owner {
        Some(Ok(owner)) => fence
            .repo_refusal(&owner, &name, true)
            .map(|why| format!("{} would put a repository where it may not go: {why}", op.id)),
        Some(Err(why)) => {
            Some(format!("{} under a repository allowlist must know whose repository it makes: {why}", op.id))
        }
        None => Some(format!(
            "{} under a repository allowlist must know whose repository it makes: the owner is missing",
            op.id
        )),
    }
}

/// Why a raw request to a route no operation has may not run inside the fence: only routes
/// of one repository or one owner can be judged by their shape.
pub fn unknown_route_refusal(fence: &Fence, method: &str, path: &str) -> Option<String> {
    if fence.is_open() {
        return None;
    }
    let write = !method.eq_ignore_ascii_case("GET");
    match crate::catalog::segments(path).as_slice() {
        ["repos", owner, repo, ..] => fence.repo_refusal(owner, repo, write),
        ["orgs" | "org" | "packages", owner, ..] => fence.owner_refusal(owner, write),
        _ => Some(
            "under a repository allowlist the raw tool sends a route that no operation has only below /repos/{owner}/{repo}/ or /orgs/{org}/, where its repository or owner can be judged".into(),
        ),
    }
}

/// Writes whose route names no repository but which change things of repositories (every
/// notification marked read, a notification thread by id): refused under an allowlist, since
/// they can be judged only after they ran.
const UNJUDGED_WRITES: &[&str] = &[
    "notifyReadList",
    "notifyReadThread",
    // A team, named by id, can be given access to its organisation's repositories.
    "orgEditTeam",
    "orgDeleteTeam",
    "orgAddTeamMember",
    "orgRemoveTeamMember",
];

/// Routes that act on the caller's own account as an owner of repositories (its hooks, which
/// see every repository's events; its runners, secrets and variables, which every repository's
/// workflows use; its runs, jobs and quota lists, which show every repository's): they need the
/// caller's whole account (`login/*`), judged once the caller is known.
const CALLER_OWNER_PREFIXES: &[&str] = &["/user/hooks", "/user/actions/", "/user/quota/"];

/// Routes that act on every repository of the instance (system hooks, which see every
/// repository's events; the instance's runners, which run every repository's jobs, and its
/// runs and jobs lists): they need a list that allows everything (`*`).
const INSTANCE_PREFIXES: &[&str] = &["/admin/hooks", "/admin/actions/", "/admin/runners/"];

/// Operations whose body names another repository (an issue of it, `IssueMeta`): that
/// repository is judged too, for a write when the operation changes it.
const BODY_REPOS: &[(&str, bool)] = &[
    ("issueCreateIssueBlocking", true),
    ("issueRemoveIssueBlocking", true),
    ("issueCreateIssueDependencies", false),
    ("issueRemoveIssueDependencies", false),
];

/// Where a listing's items name their repository.
#[derive(Clone, Copy)]
enum Item {
    /// The item is a repository (`full_name`, else `owner.login` and `name`).
    Repository,
    /// The item's member holds the repository (a repository or its short form).
    Member(&'static str),
    /// A stopwatch: `repo_owner_name` and `repo_name`.
    Stopwatch,
    /// A tracked time: its issue's repository.
    IssueRepository,
    /// A timeline event: kept unless an issue it refers to (`ref_issue`, `dependent_issue`)
    /// belongs to a repository outside; one that refers to none stays.
    References,
}

/// An answer whose route cannot be judged: where its list is (`""`: the data itself), how its
/// items name their repository, and whether it is one item rather than a list.
struct Listing {
    op: &'static str,
    at: &'static str,
    item: Item,
    single: bool,
}

const fn list(op: &'static str, item: Item) -> Listing {
    Listing { op, at: "", item, single: false }
}

/// Every listing of both forges that can hold repositories outside the route's own.
const LISTINGS: &[Listing] = &[
    Listing { op: "repoSearch", at: "/data", item: Item::Repository, single: false },
    list("userCurrentListRepos", Item::Repository),
    list("userListRepos", Item::Repository),
    list("orgListRepos", Item::Repository),
    list("orgListTeamRepos", Item::Repository),
    list("userCurrentListStarred", Item::Repository),
    list("userListStarred", Item::Repository),
    list("userCurrentListSubscriptions", Item::Repository),
    list("userListSubscriptions", Item::Repository),
    list("listForks", Item::Repository),
    list("notifyGetList", Item::Member("repository")),
    list("issueSearchIssues", Item::Member("repository")),
    list("issueListBlocks", Item::Member("repository")),
    list("issueListIssueDependencies", Item::Member("repository")),
    list("orgListActivityFeeds", Item::Member("repo")),
    list("userListActivityFeeds", Item::Member("repo")),
    list("orgListTeamActivityFeeds", Item::Member("repo")),
    list("userGetStopWatches", Item::Stopwatch),
    list("userCurrentTrackedTimes", Item::IssueRepository),
    list("issueGetCommentsAndTimeline", Item::References),
    Listing {
        op: "getUserWorkflowRuns",
        at: "/workflow_runs",
        item: Item::Member("repository"),
        single: false,
    },
    Listing { op: "repoGetByID", at: "", item: Item::Repository, single: true },
    Listing { op: "notifyGetThread", at: "", item: Item::Member("repository"), single: true },
];

/// `owner/name` of a repository object (a full one, or the short form with `owner` a login).
fn repo_name(repo: &Value) -> Option<String> {
    if let Some(full) = repo.get("full_name").and_then(Value::as_str) {
        return Some(full.to_owned());
    }
    let owner = repo.get("owner")?;
    let owner = owner.as_str().or_else(|| owner.get("login").and_then(Value::as_str))?;
    Some(format!("{owner}/{}", repo.get("name")?.as_str()?))
}

fn item_repo(item: &Value, kind: Item) -> Option<String> {
    match kind {
        Item::Repository => repo_name(item),
        Item::Member(key) => repo_name(item.get(key)?),
        Item::Stopwatch => {
            Some(format!("{}/{}", item.get("repo_owner_name")?.as_str()?, item.get("repo_name")?.as_str()?))
        }
        Item::IssueRepository => repo_name(item.get("issue")?.get("repository")?),
        Item::References => None,
    }
}

/// Whether a listing's item may be shown.
fn keeps(fence: &Fence, item: &Value, kind: Item) -> bool {
    match kind {
        Item::References => ["ref_issue", "dependent_issue"].iter().all(|k| match item.get(*k) {
            None | Some(Value::Null) => true,
            Some(issue) => issue.get("repository").and_then(repo_name).is_some_and(|n| fence.shows(&n)),
        }),
        _ => item_repo(item, kind).is_some_and(|n| fence.shows(&n)),
    }
}

/// Outcome of filtering an answer.
pub enum Filter {
    /// Nothing to do (not a listing, or the fence is open).
    Untouched,
    /// Items outside the fence left the list.
    Removed(Filtered),
    /// The one item the answer is lies outside the fence.
    Withheld(String),
}

/// Filter the answer of `op_id` to the fence: items whose repository lies outside leave the
/// list (an item that does not say its repository leaves too); the forge's total counts them,
/// so `total_count` becomes unknown, and a list the parser already cut reports what remains.
pub fn filter(
    fence: &Fence,
    op_id: Option<&str>,
    data: &mut Value,
    pagination: Option<&mut Pagination>,
    elided: &mut Elided,
) -> Filter {
    if fence.is_open() {
        return Filter::Untouched;
    }
    let Some(l) = op_id.and_then(|id| LISTINGS.iter().find(|l| l.op == id)) else { return Filter::Untouched };
    if l.single {
        return match item_repo(data, l.item) {
            Some(name) => match fence.hides(&name) {
                None => Filter::Untouched,
                Some(why) => Filter::Withheld(format!(
                    "the answer is about the repository {}, which is not among {why}, so it is withheld",
                    clip(&name)
                )),
            },
            None => Filter::Withheld("the answer does not say which repository it is about, so under a repository allowlist it is withheld".into()),
        };
    }
    if let Some(p) = pagination {
        p.total_count = None;
    }
    // An empty list, as some forge handlers write it: nothing to show, nothing to judge.
    if data.pointer(l.at).is_some_and(Value::is_null) {
        return Filter::Removed(Filtered::new(0));
    }
    let Some(items) = data.pointer_mut(l.at).and_then(Value::as_array_mut) else {
        // Not the list the spec promises: nothing in it can be judged.
        return Filter::Withheld(
            "the forge's answer is not the list this operation returns, so under a repository allowlist it is withheld".into(),
        );
    };
    let before = items.len();
    items.retain(|item| keeps(fence, item, l.item));
    let removed = before - items.len();
    if let Some(cut) = elided.cuts.iter_mut().find(|c| c.pointer == l.at) {
        cut.kept = items.len();
    }
    Filter::Removed(Filtered::new(removed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Flavor};
    use serde_json::json;

    fn list(s: &str) -> Arc<RepoList> {
        Arc::new(RepoList::parse(s).unwrap())
    }

    #[test]
    fn lists_parse_and_refuse_what_they_cannot_mean() {
        let l = list(" Acme/Widgets , tools/*,");
        assert!(l.allows_repo("acme", "widgets"));
        assert!(l.allows_repo("tools", "anything"));
        assert!(!l.allows_repo("acme", "gadgets"));
        assert!(l.allows_owner("tools") && !l.allows_owner("acme"));
        assert!(list("*").allows_owner("x"));
        for bad in ["", " , ", "acme", "acme/", "/x", "*/x", "acme/a/b", "acme/wid gets", "acme/%2e"] {
            assert!(RepoList::parse(bad).is_err(), "{bad:?}");
        }
        let many = |n: usize| (0..n).map(|i| format!("o/r{i}")).collect::<Vec<_>>().join(",");
        assert!(RepoList::parse_request(&many(MAX_REQUEST_ENTRIES)).is_ok());
        assert!(RepoList::parse_request(&(many(MAX_REQUEST_ENTRIES) + ",")).is_ok(), "a trailing comma");
        assert!(RepoList::parse_request(&many(MAX_REQUEST_ENTRIES + 1)).unwrap_err().contains("more than"));
        assert!(RepoList::parse(&many(10_000)).is_ok(), "the server's own list is not capped");
    }

    #[test]
    fn every_list_present_must_allow_and_write_lists_govern_only_writes() {
        let (read, write, req) = (list("acme/*"), list("acme/widgets"), list("acme/widgets,acme/gadgets"));
        let f = Fence::new(Some(&read), Some(&write), Some(&req), None);
        assert_eq!(f.repo_refusal("ACME", "Widgets", true), None, "case-insensitive");
        assert_eq!(f.repo_refusal("acme", "gadgets", false), None);
        assert!(f.repo_refusal("acme", "gadgets", true).unwrap().contains("WRITE_ALLOWED_REPOS"));
        assert!(f.repo_refusal("acme", "other", false).unwrap().contains("X-MCP-Allowed-Repos"));
        assert!(f.repo_refusal("evil", "widgets", false).unwrap().contains("(ALLOWED_REPOS)"));
        // A request's list cannot widen the server's.
        let wide = list("*");
        let f = Fence::new(Some(&write), None, Some(&wide), None);
        assert!(f.repo_refusal("acme", "gadgets", false).is_some());
        assert!(Fence::new(None, None, None, None).is_open());
    }

    fn gitea() -> Catalog {
        Catalog::build(Flavor::Gitea.embedded_spec(), Flavor::Gitea, None).unwrap()
    }

    fn op<'c>(c: &'c Catalog, id: &str) -> &'c Operation {
        c.get(id).and_then(|t| t.operation()).unwrap()
    }

    #[test]
    fn routes_name_their_repositories_and_owners() {
        let c = gitea();
        let args = json!({"owner": "Acme", "repo": "w", "org": "o", "template_owner": "t", "template_repo": "tr", "id": 3, "username": "u", "type": "npm", "name": "pkg", "repo_name": "linked"});
        let v = Values::Args(args.as_object().unwrap());
        let n = |id: &str| named(op(&c, id), &v);
        assert_eq!(n("repoGet"), [Named::Repo("Acme".into(), "w".into())]);
        assert_eq!(n("orgGet"), [Named::Owner("o".into())]);
        assert_eq!(n("orgAddTeamRepository"), [Named::Repo("o".into(), "w".into())]);
        assert_eq!(n("generateRepo"), [Named::Repo("t".into(), "tr".into())]);
        assert_eq!(n("linkPackage"), [Named::Repo("Acme".into(), "linked".into())]);
        assert_eq!(n("listPackages"), [Named::Owner("Acme".into())]);
        assert_eq!(n("userGet"), []);
        assert_eq!(n("repoGetByID"), []);
        // A raw path's segments, up to the wildcard.
        let segs = ["repos", "acme", "w", "contents", "a", "b"];
        assert_eq!(
            named(op(&c, "repoGetContents"), &Values::Segments(&segs)),
            [Named::Repo("acme".into(), "w".into())]
        );
    }

    #[test]
    fn creations_and_moves_are_judged_by_their_new_place() {
        let c = gitea();
        let (read, write) = (list("acme/*,src/*"), list("acme/widgets"));
        let f = Fence::new(Some(&read), Some(&write), None, None);
        let judge = |id: &str, args: Value| {
            let a = args.as_object().unwrap().clone();
            refusal(&f, op(&c, id), &Values::Args(&a), a.get("body"))
        };
        assert_eq!(judge("createOrgRepo", json!({"org": "acme", "body": {"name": "Widgets"}})), None);
        assert!(judge("createOrgRepo", json!({"org": "acme", "body": {"Name": "other"}})).is_some());
        // A fork reads its source and writes its new place.
        assert_eq!(
            judge(
                "createFork",
                json!({"owner": "src", "repo": "x", "body": {"organization": "acme", "name": "widgets"}})
            ),
            None
        );
        assert!(
            judge("createFork", json!({"owner": "src", "repo": "x", "body": {"organization": "acme"}}))
                .is_some()
        );
        assert!(
            judge(
                "repoTransfer",
                json!({"owner": "acme", "repo": "widgets", "body": {"new_owner": "elsewhere"}})
            )
            .is_some()
        );
        assert!(
            judge("repoEdit", json!({"owner": "acme", "repo": "widgets", "body": {"name": "renamed"}}))
                .is_some()
        );
        assert_eq!(
            judge("repoEdit", json!({"owner": "acme", "repo": "widgets", "body": {"description": "d"}})),
            None
        );
        // The caller's own place waits for the caller.
        let a = json!({"body": {"name": "widgets"}});
        let a = a.as_object().unwrap();
        let o = op(&c, "createCurrentUserRepo");
        assert_eq!(refusal(&f, o, &Values::Args(a), a.get("body")), None);
        assert_eq!(caller_refusal(&f, o, &Values::Args(a), a.get("body"), Some("ACME")), None);
        assert!(caller_refusal(&f, o, &Values::Args(a), a.get("body"), Some("bob")).is_some());
        assert!(caller_refusal(&f, o, &Values::Args(a), a.get("body"), None).is_some());
        // An owner given by id, in any letter case; one member twice in different cases.
        let uid = json!({"body": {"clone_addr": "https://x/y.git", "repo_name": "widgets", "UID": 42}});
        let a2 = uid.as_object().unwrap();
        let m = op(&c, "repoMigrate");
        assert!(
            caller_refusal(&f, m, &Values::Args(a2), a2.get("body"), Some("acme"))
                .is_some_and(|w| w.contains("by id"))
        );
        for (id, args) in [
            ("createOrgRepo", json!({"org": "acme", "body": {"name": "widgets", "Name": "x"}})),
            (
                "createFork",
                json!({"owner": "src", "repo": "x", "body": {"organization": "acme", "Organization": "evil", "name": "widgets"}}),
            ),
        ] {
            assert!(judge(id, args).is_some_and(|w| w.contains("letter case")), "{id}");
        }
        // Another repository's issue named in the body.
        assert!(judge("issueCreateIssueBlocking", json!({"owner": "acme", "repo": "widgets", "index": 1, "body": {"owner": "evil", "repo": "secret", "index": 1}})).is_some());
        assert!(judge("issueCreateIssueDependencies", json!({"owner": "acme", "repo": "widgets", "index": 1, "body": {"owner": "src", "repo": "lib", "index": 1}})).is_none(), "read of an allowed one");
        // The caller's own account as an owner: its hooks, runners, secrets need `login/*`.
        let hook = op(&c, "userCreateHook");
        let none = Map::new();
        assert!(caller_refusal(&f, hook, &Values::Args(&none), None, Some("bob")).is_some());
        assert!(
            caller_refusal(&f, hook, &Values::Args(&none), None, Some("acme")).is_some(),
            "writes need acme/* on the write list"
        );
        assert_eq!(
            caller_refusal(&f, op(&c, "userListHooks"), &Values::Args(&none), None, Some("ACME")),
            None
        );
        // Team writes by id cannot be judged.
        assert!(judge("orgEditTeam", json!({"id": 7, "body": {}})).is_some());
        // Writes that name no repository but touch many are refused; their reads are not.
        assert!(judge("notifyReadList", json!({})).is_some_and(|w| w.contains("notifyReadRepoList")));
        assert!(judge("notifyReadThread", json!({"id": "3"})).is_some());
        assert_eq!(judge("notifyGetList", json!({})), None);
        assert_eq!(
            refusal(&Fence::new(None, None, None, None), op(&c, "notifyReadList"), &Values::Args(a), None),
            None
        );
    }

    #[test]
    fn credentials_count_as_writes_and_instance_wide_routes_need_everything() {
        let f = Catalog::build(Flavor::Forgejo.embedded_spec(), Flavor::Forgejo, None).unwrap();
        let (read, write) = (list("acme/*"), list("acme/widgets"));
        let fence = Fence::new(Some(&read), Some(&write), None, None);
        let args = json!({"owner": "acme", "repo": "gadgets"});
        let a = args.as_object().unwrap();
        // A runner token is a GET on Forgejo, and a runner gets the repository's jobs and
        // secrets: it needs the write list, like any write.
        let token = op(&f, "repoGetRunnerRegistrationToken");
        assert!(refusal(&fence, token, &Values::Args(a), None).is_some_and(|w| w.contains("writing")));
        assert_eq!(refusal(&fence, op(&f, "repoGet"), &Values::Args(a), None), None);
        let none = Map::new();
        let mine = op(&f, "userGetRunnerRegistrationToken");
        assert!(caller_refusal(&fence, mine, &Values::Args(&none), None, Some("acme")).is_some());
        let wide = list("acme/*");
        let own = Fence::new(Some(&read), Some(&wide), None, None);
        assert_eq!(caller_refusal(&own, mine, &Values::Args(&none), None, Some("acme")), None);
        // System hooks and the instance's runners, runs and jobs reach every repository.
        for id in ["adminListHooks", "adminCreateHook", "adminGetRunnerRegistrationToken"] {
            let why = refusal(&own, op(&f, id), &Values::Args(&none), None);
            assert!(why.as_deref().is_some_and(|w| w.contains("every repository")), "{id}: {why:?}");
        }
        let all = list("*");
        let open = Fence::new(Some(&all), Some(&all), None, None);
        for id in ["adminListHooks", "adminCreateHook", "adminGetRunnerRegistrationToken"] {
            assert_eq!(refusal(&open, op(&f, id), &Values::Args(&none), None), None, "{id}");
        }
        let g = gitea();
        let reads_all = Fence::new(Some(&all), Some(&wide), None, None);
        assert_eq!(refusal(&reads_all, op(&g, "adminListHooks"), &Values::Args(&none), None), None);
        assert!(refusal(&reads_all, op(&g, "adminCreateHook"), &Values::Args(&none), None).is_some());
    }

    #[test]
    fn listings_keep_only_allowed_items_and_stop_claiming_a_total() {
        let read = list("acme/*,bob/keep");
        let f = Fence::new(Some(&read), None, None, None);
        let mut data = json!([
            {"full_name": "acme/a"},
            {"full_name": "Bob/Keep"},
            {"full_name": "bob/drop"},
            {"name": "no-owner"},
        ]);
        let mut p = Pagination {
            page: 1,
            limit: Some(4),
            total_count: Some(40),
            next_page: Some(2),
            last_page: Some(10),
        };
        let mut elided = Elided::default();
        let Filter::Removed(f2) = filter(&f, Some("userListRepos"), &mut data, Some(&mut p), &mut elided)
        else {
            panic!()
        };
        assert_eq!(f2.removed, 2);
        assert_eq!(data, json!([{"full_name": "acme/a"}, {"full_name": "Bob/Keep"}]));
        assert_eq!((p.total_count, p.next_page, p.last_page), (None, Some(2), Some(10)));
        let mut issues =
            json!([{"repository": {"owner": "acme", "name": "x"}}, {"repository": {"full_name": "z/y"}}]);
        let Filter::Removed(_) = filter(&f, Some("issueSearchIssues"), &mut issues, None, &mut elided) else {
            panic!()
        };
        assert_eq!(issues.as_array().unwrap().len(), 1);
        // A timeline keeps its events, except those referring to an issue outside.
        let mut timeline = json!([
            {"type": "comment"},
            {"type": "issue_ref", "ref_issue": {"repository": {"full_name": "acme/a"}}},
            {"type": "issue_ref", "ref_issue": {"repository": {"full_name": "evil/x"}}},
            {"type": "add_dependency", "dependent_issue": {"title": "no repository said"}},
        ]);
        let Filter::Removed(r) =
            filter(&f, Some("issueGetCommentsAndTimeline"), &mut timeline, None, &mut elided)
        else {
            panic!()
        };
        assert_eq!((r.removed, timeline.as_array().unwrap().len()), (2, 2));
        // An answer that is not the promised list is withheld.
        let mut odd = json!({"unexpected": true});
        assert!(matches!(
            filter(&f, Some("userListRepos"), &mut odd, None, &mut elided),
            Filter::Withheld(_)
        ));
        // An empty list written as null shows nothing: nothing to withhold either.
        let mut empty = Value::Null;
        let Filter::Removed(r) = filter(&f, Some("userListRepos"), &mut empty, None, &mut elided) else {
            panic!("an empty list is not withheld")
        };
        assert_eq!((r.removed, empty), (0, Value::Null));
        let mut one = json!({"full_name": "evil/x"});
        assert!(matches!(filter(&f, Some("repoGetByID"), &mut one, None, &mut elided), Filter::Withheld(_)));
        assert!(matches!(filter(&f, Some("repoGet"), &mut one, None, &mut elided), Filter::Untouched));
    }

    #[test]
    fn every_table_entry_names_an_operation_of_a_forge() {
        let f = Catalog::build(Flavor::Forgejo.embedded_spec(), Flavor::Forgejo, None).unwrap();
        let g = gitea();
        for id in MOVES
            .iter()
            .map(|m| m.op)
            .chain(LISTINGS.iter().map(|l| l.op))
            .chain(UNJUDGED_WRITES.iter().copied())
        {
            assert!(g.get(id).is_some() || f.get(id).is_some(), "{id}");
        }
    }
}
