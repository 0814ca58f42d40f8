//! Repository allowlists: `ALLOWED_REPOS`, `WRITE_ALLOWED_REPOS`, and the request headers
//! that narrow them (`X-MCP-Allowed-Repos`, `X-MCP-Write-Allowed-Repos`).
//!
//! A call is judged before anything is sent, by its operation's row of the reach table
//! (`reach.rs`): the repositories its route names (`{owner}/{repo}` and its kin) and those
//! its body names (another repository's issue, a fork's head, a URL of this forge such as a
//! migration's source); a whole account (an organisation, a user, the caller's own account),
//! which needs `owner/*` on the list; or the whole instance, which needs `*`. Names compare
//! as the forges compare them, by their lower-case form. A renamed or transferred repository
//! cannot escape the list: the forge answers the old name with a redirect, which this server
//! never follows, so a call reaches what its route names or nothing. Operations that create or
//! move a repository name the new place in their body: that place must be writable too.
//! Listings across repositories cannot be judged by their route; their answers are filtered
//! (`filter`), and so are the few answers that name their repository only by id.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{Map, Value};
use url::Url;

use super::reach::{self, Also, Item, Moves, Reach, RouteUse, Source};

use crate::catalog::Operation;
use crate::catalog::operation::Piece;
use crate::decode::json::Elided;
use crate::decode::pagination::Pagination;
use crate::envelope::Filtered;
use crate::error::Shown;

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
    pub fn parse(text: &str) -> Result<RepoList, Shown> {
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

    /// The list as written (lower-case, sorted): `*`, `owner/*` and `owner/repo` entries.
    pub fn entries(&self) -> Vec<String> {
        let mut out: Vec<String> = self.owners.iter().map(|o| format!("{o}/*")).collect();
        out.extend(self.repos.iter().cloned());
        out.sort();
        if self.any {
            out.insert(0, "*".into());
        }
        out
    }

    /// A list a request sends in a header: at most `MAX_REQUEST_ENTRIES` entries, counted
    /// before any is parsed, so a large header costs no more than reading it.
    pub fn parse_request(text: &str) -> Result<RepoList, Shown> {
        if too_many_entries(text) {
            return Err(format!(
                "names more than {MAX_REQUEST_ENTRIES} entries; use owner/* for many repositories of one owner"
            ));
        }
        RepoList::parse(text)
    }

    /// `owner` and `repo` lower-case.
    pub(super) fn allows_repo(&self, owner: &str, repo: &str) -> bool {
        self.any
            || self.owners.contains(owner)
            || (!self.repos.is_empty() && self.repos.contains(&format!("{owner}/{repo}")))
    }

    /// The whole owner (lower-case).
    pub(super) fn allows_owner(&self, owner: &str) -> bool {
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
    /// This forge, for URLs that may name its repositories.
    forge: &'a ForgeHost,
    /// Other names of hosts that URLs of the call name, with the addresses they resolve to
    /// (looked up by the server before sending): a name that reaches this forge's address is
    /// this forge.
    aliases: &'a [(String, Vec<IpAddr>)],
}

/// Where a list comes from, as a message names it.
const SERVER_READ: &str = "the repositories this server allows (ALLOWED_REPOS)";
const SERVER_WRITE: &str = "the repositories this server allows writing to (WRITE_ALLOWED_REPOS)";
const REQUEST_READ: &str = "the repositories this request allows (X-MCP-Allowed-Repos)";
const REQUEST_WRITE: &str = "the repositories this request allows writing to (X-MCP-Write-Allowed-Repos)";

impl<'a> Fence<'a> {
    pub(crate) fn new(
        server: Option<&'a Arc<RepoList>>,
        server_write: Option<&'a Arc<RepoList>>,
        request: Option<&'a Arc<RepoList>>,
        request_write: Option<&'a Arc<RepoList>>,
        forge: &'a ForgeHost,
    ) -> Fence<'a> {
        Fence {
            lists: [
                (server.map(|l| &**l), SERVER_READ, false),
                (server_write.map(|l| &**l), SERVER_WRITE, true),
                (request.map(|l| &**l), REQUEST_READ, false),
                (request_write.map(|l| &**l), REQUEST_WRITE, true),
            ],
            forge,
            aliases: &[],
        }
    }

    /// This fence, where `aliases` (host names and what they resolve to) may name this forge.
    pub(crate) fn with_aliases(self, aliases: &'a [(String, Vec<IpAddr>)]) -> Fence<'a> {
        Fence { aliases, ..self }
    }

    /// No list at all: every repository.
    pub(crate) fn is_open(&self) -> bool {
        self.lists.iter().all(|(l, _, _)| l.is_none())
    }

    fn applying(&self, write: bool) -> impl Iterator<Item = (&'a RepoList, &'static str)> + '_ {
        self.lists.iter().filter(move |(_, _, w)| write || !w).filter_map(|(l, why, _)| l.map(|l| (l, *why)))
    }

    /// Why the repository may not be touched (read, or `write`), if it may not.
    pub(crate) fn repo_refusal(&self, owner: &str, repo: &str, write: bool) -> Option<String> {
        let (o, r) = (owner.to_lowercase(), repo.to_lowercase());
        let (_, why) = self.applying(write).find(|(l, _)| !l.allows_repo(&o, &r))?;
        Some(format!("the repository {}/{} is not among {why}", clip(owner), clip(repo)))
    }

    /// Why an operation on the owner itself may not run, if it may not: it needs `owner/*`.
    pub(crate) fn owner_refusal(&self, owner: &str, write: bool) -> Option<String> {
        let o = owner.to_lowercase();
        let (_, why) = self.applying(write).find(|(l, _)| !l.allows_owner(&o))?;
        Some(format!(
            "the owner {} is not wholly among {why}: an operation on an owner itself (not on one of its repositories) needs `{}/*` on the list",
            clip(owner),
            clip(owner)
        ))
    }

    /// Why `op_id`, which reaches repositories no name of its call can say (`why`), may not
    /// run, if it may not: it needs `*` on every list that applies.
    fn everything_refusal(&self, op_id: &str, why: &str, write: bool) -> Option<String> {
        let (_, list) = self.applying(write).find(|(l, _)| !l.any)?;
        Some(format!(
            "{op_id} cannot be judged by the repositories it names ({why}), and not every repository is among {list}: it needs `*` on the list"
        ))
    }

    /// Whether a listing's item in `owner/repo` may be shown.
    fn shows(&self, full_name: &str) -> bool {
        let lower = full_name.to_lowercase();
        let Some((o, r)) = lower.split_once('/') else { return false };
        self.applying(false).all(|(l, _)| l.allows_repo(o, r))
    }
}

/// Where a route's values come from: a tool's arguments, or the segments of a raw path.
pub(crate) enum Values<'a> {
    Args(&'a Map<String, Value>),
    Segments(&'a [&'a str]),
}

impl Values<'_> {
    /// The value of path parameter `name`, at segment `index`, as the path would carry it.
    pub(super) fn get(&self, index: usize, name: &str) -> Option<String> {
        match self {
            Values::Args(args) => match args.get(name)? {
                Value::String(s) => Some(s.clone()),
                v @ (Value::Number(_) | Value::Bool(_)) => Some(v.to_string()),
                _ => None,
            },
            Values::Segments(s) => s.get(index).map(|s| (*s).to_owned()),
        }
    }

    /// The value of a parameter that may span the rest of the path (a wildcard's), from
    /// segment `index` on.
    pub(super) fn rest(&self, index: usize, name: &str) -> Option<String> {
        match self {
            Values::Args(_) => self.get(index, name),
            Values::Segments(s) => (index < s.len()).then(|| s[index..].join("/")),
        }
    }
}

/// Parameters that name a repository, and those that name its owner.
const REPO_PARAMS: [&str; 3] = ["repo", "repo_name", "template_repo"];
const OWNER_PARAMS: [&str; 3] = ["owner", "org", "template_owner"];

/// What a route names.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Named {
    Repo(String, String),
    Owner(String),
}

/// The repositories and owners `op`'s route names with these values. Only whole-segment
/// parameters before any wildcard count (every owner and repository parameter is one); a
/// value that is missing names nothing here — validation refuses the call before it is sent.
pub(super) fn named(op: &Operation, values: &Values) -> Vec<Named> {
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

/// The value of one source (`None`: this source gives none).
pub(super) fn from_source(
    source: Source,
    op: &Operation,
    values: &Values,
    body: Option<&Value>,
) -> Option<String> {
    match source {
        Source::Body(key) => {
            body.and_then(|b| b.get(key)).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
        }
        Source::Route(name) => {
            let index = op
                .template
                .segments
                .iter()
                .position(|p| matches!(p.as_slice(), [Piece::Param(n)] if n == name))?;
            if op.params.iter().any(|p| p.name == name && p.wildcard) {
                values.rest(index, name)
            } else {
                values.get(index, name)
            }
        }
        Source::Caller | Source::ById(_) => None,
    }
}

/// Why `op` (reached with these route values and body) may not run inside the fence, if it may
/// not, judged by its row of the reach table. An operation that acts on the caller's account,
/// or puts a repository under the caller, is judged again once the caller is known
/// (`caller_refusal`). The arguments are a prepared call's (`args::Prepared`): the body's
/// members are read by the spec's exact names, which normalisation gave every spelling the
/// forges would take for them (two spellings of one member were refused there).
pub(crate) fn refusal(
    fence: &Fence,
    op: &Operation,
    values: &Values,
    body: Option<&Value>,
) -> Option<String> {
    if fence.is_open() {
        return None;
    }
    let Some(reach) = reach::of(&op.id) else {
        return Some(format!(
            "{} is not an operation of the forges this server knows (its spec came with --spec?), so what it reaches cannot be judged; under a repository allowlist it is refused",
            op.id
        ));
    };
    let write = super::is_write(op);
    match reach {
        Reach::Harmless | Reach::Caller => None,
        Reach::Instance => {
            fence.everything_refusal(&op.id, "it acts on every repository of the instance", write)
        }
        Reach::Refused(why) => fence.everything_refusal(&op.id, why, write),
        Reach::Account(sources) => sources.iter().find_map(|s| {
            let owner = from_source(*s, op, values, body)?;
            fence.owner_refusal(&owner, write).map(|why| {
                format!("{} acts on a whole account, which reaches all of its repositories: {why}", op.id)
            })
        }),
        Reach::Repo(also) => route_refusal(fence, op, values, write, false)
            .or_else(|| also.iter().find_map(|a| also_refusal(fence, op, *a, values, body))),
        Reach::Filtered(_) => route_refusal(fence, op, values, write, true),
        Reach::Places(m) => {
            let route = match m.route {
                RouteUse::Skip => None,
                RouteUse::Read => route_refusal(fence, op, values, false, false),
                RouteUse::AsMethod => route_refusal(fence, op, values, write, false),
            };
            route
                .or_else(|| m.also.iter().find_map(|a| also_refusal(fence, op, *a, values, body)))
                .or_else(|| place_refusal(fence, &m, op, values, body, None))
        }
    }
}

/// Why the repositories and owners `op`'s route names may not be touched, if they may not.
/// A listing's owner (an organisation's repositories) is not judged: its answer is filtered.
fn route_refusal(
    fence: &Fence,
    op: &Operation,
    values: &Values,
    write: bool,
    listing: bool,
) -> Option<String> {
    named(op, values).into_iter().find_map(|n| match n {
        Named::Repo(o, r) => fence.repo_refusal(&o, &r, write),
        Named::Owner(_) if listing => None,
        Named::Owner(o) => fence.owner_refusal(&o, write),
    })
}

/// Why a repository `op` names besides its route's may not be touched, if it may not.
fn also_refusal(
    fence: &Fence,
    op: &Operation,
    also: Also,
    values: &Values,
    body: Option<&Value>,
) -> Option<String> {
    match also {
        Also::Issue { write } => {
            let get = |key: &'static str| from_source(Source::Body(key), op, values, body);
            let (o, r) = (get("owner")?, get("repo")?);
            fence
                .repo_refusal(&o, &r, write)
                .map(|why| format!("{} names another repository's issue: {why}", op.id))
        }
        Also::Url { field, write } => {
            let url = from_source(Source::Body(field), op, values, body)?;
            let what = if write { "writes to" } else { "reads" };
            match fence.forge.repository_at(&url, fence.aliases) {
                Ok(None) => None,
                Ok(Some((o, r))) => fence.repo_refusal(&o, &r, write).map(|why| {
                    format!("{} {what} a repository of this forge named by `{field}`: {why}", op.id)
                }),
                Err(why) => Some(format!(
                    "under a repository allowlist {}'s `{field}` must be a URL whose repository can be judged: {why}",
                    op.id
                )),
            }
        }
        Also::Head(source) => {
            let head = from_source(source, op, values, body)?;
            // A comparison `base...head` (or `base..head`) names the head last.
            let head =
                head.split_once("...").or_else(|| head.split_once("..")).map_or(head.as_str(), |(_, h)| h);
            let (who, _branch) = head.split_once(':')?;
            let route_owner = from_source(Source::Route("owner"), op, values, body).unwrap_or_default();
            let why = match who.split_once('/') {
                Some((o, r)) => fence.repo_refusal(o, r, false),
                // The route's own owner: the route's own repository.
                None if who.eq_ignore_ascii_case(&route_owner) => None,
                // Another owner's fork of this repository, whatever its name.
                None => fence
                    .owner_refusal(who, false)
                    .map(|why| format!("{why}; or name the fork itself as owner/repo:branch")),
            }?;
            Some(format!("{} compares with a branch of another repository: {why}", op.id))
        }
    }
}

/// The host names the URLs of `op`'s body give other than this forge's own (and
/// `localhost`): another name of this forge's address would pass for another host, so the
/// server looks them up before sending and judges the call again with what they resolve to
/// (`Fence::with_aliases`). None without a repository allowlist.
pub(crate) fn named_hosts(
    fence: &Fence,
    op: &Operation,
    values: &Values,
    body: Option<&Value>,
) -> Vec<String> {
    if fence.is_open() {
        return Vec::new();
    }
    let also: &[Also] = match reach::of(&op.id) {
        Some(Reach::Repo(also)) => also,
        Some(Reach::Places(m)) => m.also,
        _ => &[],
    };
    also.iter()
        .filter_map(|a| match a {
            Also::Url { field, .. } => from_source(Source::Body(field), op, values, body),
            _ => None,
        })
        .filter_map(|url| fence.forge.other_name(&url))
        .collect()
}

/// The second look, once the caller is known (`caller`: the login the call runs as): an
/// operation on the caller's own account needs `login/*`; the new place of an operation that
/// puts a repository under the caller (a new repository, a fork or a migration without an
/// owner) must be writable.
pub(crate) fn caller_refusal(
    fence: &Fence,
    op: &Operation,
    values: &Values,
    body: Option<&Value>,
    caller: Option<&str>,
) -> Option<String> {
    if fence.is_open() {
        return None;
    }
    match reach::of(&op.id)? {
        Reach::Caller => match caller.filter(|c| !c.is_empty()) {
            Some(login) => fence.owner_refusal(login, super::is_write(op)).map(|why| {
                format!(
                    "{} acts on the caller's whole account, which reaches all of its repositories: {why}",
                    op.id
                )
            }),
            None => {
                Some(format!("{} acts on the caller's account, and this call runs without a login", op.id))
            }
        },
        Reach::Places(m) if m.owner.contains(&Source::Caller) => {
            place_refusal(fence, &m, op, values, body, Some(caller.unwrap_or("")))
        }
        _ => None,
    }
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
            Source::Caller => {
                owner = Some(match caller {
                    // The place depends on the caller, not known yet: `caller_refusal` judges it.
                    None => return None,
                    Some("") => Err("this call runs without a login"),
                    Some(c) => Ok(c.to_owned()),
                });
            }
            Source::ById(key) => {
                let by_id = body.and_then(|b| b.get(key)).is_some_and(|v| !(v.is_null() || v == 0));
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
pub(crate) fn unknown_route_refusal(fence: &Fence, method: &str, path: &str) -> Option<String> {
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

/// This forge as a URL in an argument may name it: the host of its base URL (any scheme, any
/// port), the addresses that host had at start, and any loopback address when the forge is
/// on loopback.
#[derive(Debug, Clone, Default)]
pub struct ForgeHost {
    base: Option<Url>,
    addresses: Vec<IpAddr>,
}

impl ForgeHost {
    pub fn new(base: Option<Url>, addresses: Vec<IpAddr>) -> ForgeHost {
        ForgeHost { base, addresses: addresses.into_iter().map(canonical_ip).collect() }
    }

    /// The repository of this forge that `text` names: `Ok(None)` for a URL of another host;
    /// an error for text that cannot be judged (not a network URL, or one of this forge that
    /// names no repository). Names come as the forge would read them: userinfo, query and
    /// fragment ignored, the base path, empty segments, `.git` and `.wiki` left out,
    /// percent-encoding decoded.
    pub fn repository(&self, text: &str) -> Result<Option<(String, String)>, &'static str> {
        self.repository_at(text, &[])
    }

    /// `repository`, where a host named as one of `aliases` is this forge when it resolves to
    /// one of this forge's addresses (a loopback one when the forge is on loopback).
    pub(crate) fn repository_at(
        &self,
        text: &str,
        aliases: &[(String, Vec<IpAddr>)],
    ) -> Result<Option<(String, String)>, &'static str> {
        let url = parse_url(text)?;
        let owned = url_host(&url)?;
        let host = borrowed(&owned);
        let Some(base) = &self.base else {
            return Err("this server does not know its forge's address, so no URL can be judged");
        };
        let forge_ip = base.host().and_then(|h| host_ip(&h));
        let forge_loopback = base.host().is_some_and(|h| is_loopback(&h));
        // A name as it was looked up: letter case and a trailing dot aside (`other_name`).
        let alias = |name: &str| {
            let name = name.trim_end_matches('.');
            aliases.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).flat_map(|(_, a)| a).any(|a| {
                let a = canonical_ip(*a);
                self.addresses.contains(&a) || forge_ip == Some(a) || (forge_loopback && a.is_loopback())
            })
        };
        let is_alias = matches!(&host, url::Host::Domain(d) if alias(d));
        if !self.is_forge(&host, base) && !is_alias {
            return Ok(None);
        }
        let path = url.path();
        let prefix = base.path().trim_end_matches('/');
        let path = match path.strip_prefix(prefix) {
            Some(rest) if !prefix.is_empty() && (rest.is_empty() || rest.starts_with('/')) => rest,
            _ => path,
        };
        let mut segments = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned());
        let (Some(owner), Some(repo)) = (segments.next(), segments.next()) else {
            return Err("it names this forge but no repository of it");
        };
        let repo = strip_suffix_ci(&repo, ".git");
        let repo = strip_suffix_ci(repo, ".wiki");
        Ok(Some((owner, repo.to_owned())))
    }

    /// The host `text` names when it is a name other than this forge's own (and not
    /// `localhost`): what could be another name of this forge's address.
    pub(crate) fn other_name(&self, text: &str) -> Option<String> {
        let url = parse_url(text).ok()?;
        let owned = url_host(&url).ok()?;
        let host = borrowed(&owned);
        let base = self.base.as_ref()?;
        match host {
            url::Host::Domain(d) if !self.is_forge(&host, base) && !is_loopback(&host) => {
                Some(d.trim_end_matches('.').to_ascii_lowercase())
            }
            _ => None,
        }
    }

    /// The addresses of this forge's host looked up at start.
    pub fn addresses(&self) -> &[IpAddr] {
        &self.addresses
    }

    fn is_forge(&self, host: &url::Host<&str>, base: &Url) -> bool {
        let Some(forge) = base.host() else { return false };
        if is_loopback(host) && is_loopback(&forge) {
            return true;
        }
        match (host, &forge) {
            (url::Host::Domain(a), url::Host::Domain(b)) => {
                a.trim_end_matches('.').eq_ignore_ascii_case(b.trim_end_matches('.'))
            }
            (url::Host::Domain(_), _) => false,
            (ip, _) => {
                let ip = match ip {
                    url::Host::Ipv4(v4) => IpAddr::V4(*v4),
                    url::Host::Ipv6(v6) => IpAddr::V6(*v6),
                    url::Host::Domain(_) => unreachable!("matched above"),
                };
                let ip = canonical_ip(ip);
                self.addresses.contains(&ip) || host_ip(&forge).is_some_and(|f| f == ip)
            }
        }
    }
}

const NOT_A_URL: &str = "it is not an http, https, git or ssh URL (a local path cannot be judged)";

/// A URL of a repository as the forges and git read it (scp-like `user@host:path` too).
fn parse_url(text: &str) -> Result<Url, &'static str> {
    let text = text.trim();
    let url = match Url::parse(text) {
        Ok(u) => u,
        Err(_) => scp_like(text).ok_or(NOT_A_URL)?,
    };
    if !matches!(url.scheme(), "http" | "https" | "git" | "ssh") {
        return Err(NOT_A_URL);
    }
    Ok(url)
}

/// The host of `url`: ssh and git URLs keep their host as written, so it is read as an http
/// URL's host is read (IPv4 in any of its number forms, letter case), as the programs that
/// connect do.
fn url_host(url: &Url) -> Result<url::Host<String>, &'static str> {
    let special = match url.scheme() {
        "ssh" | "git" => Url::parse(&format!("http://{}/", url.host_str().unwrap_or_default())).ok(),
        _ => None,
    };
    special.as_ref().unwrap_or(url).host().map(|h| h.to_owned()).ok_or(NOT_A_URL)
}

fn borrowed(host: &url::Host<String>) -> url::Host<&str> {
    match host {
        url::Host::Domain(d) => url::Host::Domain(d.as_str()),
        url::Host::Ipv4(a) => url::Host::Ipv4(*a),
        url::Host::Ipv6(a) => url::Host::Ipv6(*a),
    }
}

/// An address as the host it reaches: an IPv4-mapped IPv6 address is its IPv4 address.
fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn host_ip(host: &url::Host<&str>) -> Option<IpAddr> {
    match host {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(*v4)),
        url::Host::Ipv6(v6) => Some(canonical_ip(IpAddr::V6(*v6))),
        url::Host::Domain(_) => None,
    }
}

fn is_loopback(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(d) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        ip => host_ip(ip).is_some_and(|ip| ip.is_loopback()),
    }
}

fn strip_suffix_ci<'a>(s: &'a str, suffix: &str) -> &'a str {
    let cut = s.len().saturating_sub(suffix.len());
    match s.get(cut..) {
        Some(end) if cut > 0 && end.eq_ignore_ascii_case(suffix) => &s[..cut],
        _ => s,
    }
}

/// `[user@]host:path`, the short form of an ssh URL that git takes, as an ssh URL.
fn scp_like(text: &str) -> Option<Url> {
    let (head, path) = text.split_once(':')?;
    if head.is_empty() || head.contains('/') || path.starts_with("//") {
        return None;
    }
    Url::parse(&format!("ssh://{head}/{}", path.trim_start_matches('/'))).ok()
}

/// `owner/name` of a repository object (a full one, or the short form with `owner` a login).
pub(super) fn repo_name(repo: &Value) -> Option<String> {
    if let Some(full) = repo.get("full_name").and_then(Value::as_str) {
        return Some(full.to_owned());
    }
    let owner = repo.get("owner")?;
    let owner = owner.as_str().or_else(|| owner.get("login").and_then(Value::as_str))?;
    Some(format!("{owner}/{}", repo.get("name")?.as_str()?))
}

pub(super) fn item_repo(item: &Value, kind: Item) -> Option<String> {
    match kind {
        Item::Repository => repo_name(item),
        Item::Member(key) => repo_name(item.get(key)?),
        Item::Stopwatch => {
            Some(format!("{}/{}", item.get("repo_owner_name")?.as_str()?, item.get("repo_name")?.as_str()?))
        }
        Item::IssueRepository => repo_name(item.get("issue")?.get("repository")?),
        Item::References | Item::Organization => None,
    }
}

/// The login of a team's organisation.
fn item_organization(item: &Value) -> Option<&str> {
    let org = item.get("organization")?;
    org.get("username").or_else(|| org.get("name")).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Whether a listing's item may be shown.
fn keeps(fence: &Fence, item: &Value, kind: Item) -> bool {
    match kind {
        Item::References => ["ref_issue", "dependent_issue"].iter().all(|k| match item.get(*k) {
            None | Some(Value::Null) => true,
            Some(issue) => issue.get("repository").and_then(repo_name).is_some_and(|n| fence.shows(&n)),
        }),
        Item::Organization => {
            item_organization(item).is_some_and(|o| fence.owner_refusal(o, false).is_none())
        }
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
/// A single answer outside is withheld without a word of what it was about.
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
    let Some(Reach::Filtered(l)) = op_id.and_then(reach::of) else { return Filter::Untouched };
    if l.single {
        return if keeps(fence, data, l.item) {
            Filter::Untouched
        } else {
            Filter::Withheld(
                "the answer is about something outside the allowed repositories, so under the repository allowlist it is withheld".into(),
            )
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

    /// The forge the tests' URLs are judged against.
    fn forge() -> &'static ForgeHost {
        static FORGE: std::sync::LazyLock<ForgeHost> = std::sync::LazyLock::new(|| {
            ForgeHost::new(Url::parse("https://git.example.com/").ok(), vec!["203.0.113.5".parse().unwrap()])
        });
        &FORGE
    }

    #[test]
    fn another_name_of_this_forges_address_is_this_forge_once_looked_up() {
        let f = forge();
        let url = "https://code.internal.example/bob/secret.git";
        assert_eq!(f.other_name(url).as_deref(), Some("code.internal.example"));
        assert_eq!(f.other_name("https://GIT.example.com./bob/secret"), None, "the forge's own name");
        assert_eq!(f.other_name("https://203.0.113.9/bob/secret"), None, "an address is judged as it is");
        assert_eq!(f.repository(url), Ok(None), "without a look-up, another host");
        let same = [("code.internal.example".to_owned(), vec!["203.0.113.5".parse().unwrap()])];
        assert_eq!(f.repository_at(url, &same), Ok(Some(("bob".into(), "secret".into()))));
        let mapped = [("code.internal.example".to_owned(), vec!["::ffff:203.0.113.5".parse().unwrap()])];
        assert_eq!(f.repository_at(url, &mapped), Ok(Some(("bob".into(), "secret".into()))));
        // The name with a trailing dot, or in capitals, is the name looked up.
        for spelled in
            ["https://code.internal.example./bob/secret.git", "https://CODE.Internal.Example/bob/secret"]
        {
            assert_eq!(f.other_name(spelled).as_deref(), Some("code.internal.example"), "{spelled}");
            assert_eq!(
                f.repository_at(spelled, &same),
                Ok(Some(("bob".into(), "secret".into()))),
                "{spelled}"
            );
        }
        let elsewhere = [("code.internal.example".to_owned(), vec!["198.51.100.7".parse().unwrap()])];
        assert_eq!(f.repository_at(url, &elsewhere), Ok(None));
    }

    fn fence_of<'a>(
        a: Option<&'a Arc<RepoList>>,
        b: Option<&'a Arc<RepoList>>,
        c: Option<&'a Arc<RepoList>>,
        d: Option<&'a Arc<RepoList>>,
    ) -> Fence<'a> {
        Fence::new(a, b, c, d, forge())
    }

    /// Arguments as a prepared call holds them: body members in the spec's spelling.
    fn spelled(c: &Catalog, id: &str, args: Value) -> Map<String, Value> {
        let mut a = args.as_object().unwrap().clone();
        crate::args::fields::normalize(c.get(id).unwrap(), &mut a).unwrap();
        a
    }

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
        let f = fence_of(Some(&read), Some(&write), Some(&req), None);
        assert_eq!(f.repo_refusal("ACME", "Widgets", true), None, "case-insensitive");
        assert_eq!(f.repo_refusal("acme", "gadgets", false), None);
        assert!(f.repo_refusal("acme", "gadgets", true).unwrap().contains("WRITE_ALLOWED_REPOS"));
        assert!(f.repo_refusal("acme", "other", false).unwrap().contains("X-MCP-Allowed-Repos"));
        assert!(f.repo_refusal("evil", "widgets", false).unwrap().contains("(ALLOWED_REPOS)"));
        // A request's list cannot widen the server's.
        let wide = list("*");
        let f = fence_of(Some(&write), None, Some(&wide), None);
        assert!(f.repo_refusal("acme", "gadgets", false).is_some());
        assert!(fence_of(None, None, None, None).is_open());
    }

    fn gitea() -> &'static Catalog {
        crate::catalog::embedded(Flavor::Gitea)
    }

    fn op<'c>(c: &'c Catalog, id: &str) -> &'c Operation {
        c.get(id).and_then(|t| t.operation()).unwrap()
    }

    #[test]
    fn routes_name_their_repositories_and_owners() {
        let c = gitea();
        let args = json!({"owner": "Acme", "repo": "w", "org": "o", "template_owner": "t", "template_repo": "tr", "id": 3, "username": "u", "type": "npm", "name": "pkg", "repo_name": "linked"});
        let v = Values::Args(args.as_object().unwrap());
        let n = |id: &str| named(op(c, id), &v);
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
            named(op(c, "repoGetContents"), &Values::Segments(&segs)),
            [Named::Repo("acme".into(), "w".into())]
        );
    }

    #[test]
    fn creations_and_moves_are_judged_by_their_new_place() {
        let c = gitea();
        let (read, write) = (list("acme/*,src/*"), list("acme/widgets"));
        let f = fence_of(Some(&read), Some(&write), None, None);
        let judge = |id: &str, args: Value| {
            let a = spelled(c, id, args);
            refusal(&f, op(c, id), &Values::Args(&a), a.get("body"))
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
        let o = op(c, "createCurrentUserRepo");
        assert_eq!(refusal(&f, o, &Values::Args(a), a.get("body")), None);
        assert_eq!(caller_refusal(&f, o, &Values::Args(a), a.get("body"), Some("ACME")), None);
        assert!(caller_refusal(&f, o, &Values::Args(a), a.get("body"), Some("bob")).is_some());
        assert!(caller_refusal(&f, o, &Values::Args(a), a.get("body"), None).is_some());
        // An owner given by id, in any letter case; one member twice in different cases.
        let uid = json!({"body": {"clone_addr": "https://x/y.git", "repo_name": "widgets", "UID": 42}});
        let a2 = &spelled(c, "repoMigrate", uid);
        let m = op(c, "repoMigrate");
        assert!(
            caller_refusal(&f, m, &Values::Args(a2), a2.get("body"), Some("acme"))
                .is_some_and(|w| w.contains("by id"))
        );
        // One member twice in different cases never reaches the policy: normalisation
        // refuses it, so the policy cannot judge one spelling while the forge reads the other.
        for (id, args) in [
            ("createOrgRepo", json!({"org": "acme", "body": {"name": "widgets", "Name": "x"}})),
            (
                "createFork",
                json!({"owner": "src", "repo": "x", "body": {"organization": "acme", "Organization": "evil", "name": "widgets"}}),
            ),
        ] {
            let mut a = args.as_object().unwrap().clone();
            let e = crate::args::fields::normalize(c.get(id).unwrap(), &mut a).unwrap_err();
            assert!(e.to_string().contains("name the same field"), "{id}: {e}");
        }
        // Another repository's issue named in the body.
        assert!(judge("issueCreateIssueBlocking", json!({"owner": "acme", "repo": "widgets", "index": 1, "body": {"owner": "evil", "repo": "secret", "index": 1}})).is_some());
        assert!(judge("issueCreateIssueDependencies", json!({"owner": "acme", "repo": "widgets", "index": 1, "body": {"owner": "src", "repo": "lib", "index": 1}})).is_none(), "read of an allowed one");
        // The caller's own account as an owner: its hooks, runners, secrets need `login/*`.
        let hook = op(c, "userCreateHook");
        let none = Map::new();
        assert!(caller_refusal(&f, hook, &Values::Args(&none), None, Some("bob")).is_some());
        assert!(
            caller_refusal(&f, hook, &Values::Args(&none), None, Some("acme")).is_some(),
            "writes need acme/* on the write list"
        );
        assert_eq!(
            caller_refusal(&f, op(c, "userListHooks"), &Values::Args(&none), None, Some("ACME")),
            None
        );
        // Team writes by id cannot be judged.
        assert!(judge("orgEditTeam", json!({"id": 7, "body": {}})).is_some());
        // Writes that name no repository but touch many are refused; their reads are not.
        assert!(judge("notifyReadList", json!({})).is_some_and(|w| w.contains("notifyReadRepoList")));
        assert!(judge("notifyReadThread", json!({"id": "3"})).is_some());
        assert_eq!(judge("notifyGetList", json!({})), None);
        assert_eq!(
            refusal(&fence_of(None, None, None, None), op(c, "notifyReadList"), &Values::Args(a), None),
            None
        );
    }

    #[test]
    fn credentials_count_as_writes_and_instance_wide_routes_need_everything() {
        let f = crate::catalog::embedded(Flavor::Forgejo);
        let (read, write) = (list("acme/*"), list("acme/widgets"));
        let fence = fence_of(Some(&read), Some(&write), None, None);
        let args = json!({"owner": "acme", "repo": "gadgets"});
        let a = args.as_object().unwrap();
        // A runner token is a GET on Forgejo, and a runner gets the repository's jobs and
        // secrets: it needs the write list, like any write.
        let token = op(f, "repoGetRunnerRegistrationToken");
        assert!(refusal(&fence, token, &Values::Args(a), None).is_some_and(|w| w.contains("writing")));
        assert_eq!(refusal(&fence, op(f, "repoGet"), &Values::Args(a), None), None);
        let none = Map::new();
        let mine = op(f, "userGetRunnerRegistrationToken");
        assert!(caller_refusal(&fence, mine, &Values::Args(&none), None, Some("acme")).is_some());
        let wide = list("acme/*");
        let own = fence_of(Some(&read), Some(&wide), None, None);
        assert_eq!(caller_refusal(&own, mine, &Values::Args(&none), None, Some("acme")), None);
        // System hooks and the instance's runners, runs and jobs reach every repository.
        for id in ["adminListHooks", "adminCreateHook", "adminGetRunnerRegistrationToken"] {
            let why = refusal(&own, op(f, id), &Values::Args(&none), None);
            assert!(why.as_deref().is_some_and(|w| w.contains("every repository")), "{id}: {why:?}");
        }
        let all = list("*");
        let open = fence_of(Some(&all), Some(&all), None, None);
        for id in ["adminListHooks", "adminCreateHook", "adminGetRunnerRegistrationToken"] {
            assert_eq!(refusal(&open, op(f, id), &Values::Args(&none), None), None, "{id}");
        }
        let g = gitea();
        let reads_all = fence_of(Some(&all), Some(&wide), None, None);
        assert_eq!(refusal(&reads_all, op(g, "adminListHooks"), &Values::Args(&none), None), None);
        assert!(refusal(&reads_all, op(g, "adminCreateHook"), &Values::Args(&none), None).is_some());
    }

    #[test]
    fn listings_keep_only_allowed_items_and_stop_claiming_a_total() {
        let read = list("acme/*,bob/keep");
        let f = fence_of(Some(&read), None, None, None);
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

    /// Both embedded catalogs, built once for all tests.
    fn both() -> &'static [(Flavor, Catalog); 2] {
        static BOTH: std::sync::LazyLock<[(Flavor, Catalog); 2]> = std::sync::LazyLock::new(|| {
            [Flavor::Gitea, Flavor::Forgejo].map(|f| (f, Catalog::build(f.embedded_spec(), f, None).unwrap()))
        });
        &BOTH
    }

    /// Every path parameter of `op` set to a placeholder.
    fn placeholders(op: &Operation) -> Map<String, Value> {
        op.params
            .iter()
            .filter(|p| p.location == crate::catalog::Location::Path)
            .map(|p| (p.name.clone(), Value::String(format!("x{}", p.name))))
            .collect()
    }

    /// The properties the body schema of `tool` has (empty without a body).
    fn body_properties(tool: &crate::catalog::ToolDef) -> Vec<String> {
        let schema = tool.input_schema();
        let body = &schema["properties"]["body"];
        body["properties"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
    }

    #[test]
    fn every_operation_of_both_forges_has_exactly_one_reach_and_every_row_names_one() {
        let mut seen = HashSet::new();
        for (id, _) in reach::TABLE {
            assert!(seen.insert(*id), "{id} has two rows");
        }
        let mut ops = HashSet::new();
        for (flavor, c) in both().iter() {
            for tool in c.operations() {
                let Some(op) = tool.operation() else { continue };
                ops.insert(op.id.clone());
                let Some(r) = reach::of(&op.id) else {
                    panic!("{flavor:?} {} has no row of the reach table", op.id)
                };
                let route_param = |name: &str| {
                    op.params.iter().any(|p| p.name == name && p.location == crate::catalog::Location::Path)
                };
                let body_has = |key: &str| body_properties(tool).iter().any(|k| k == key);
                let source_exists = |s: &Source| match s {
                    Source::Route(n) => route_param(n),
                    Source::Body(k) | Source::ById(k) => body_has(k),
                    Source::Caller => true,
                };
                let write = super::super::is_write(op);
                let args = placeholders(op);
                let names_repo = named(op, &Values::Args(&args)).iter().any(|n| matches!(n, Named::Repo(..)));
                match r {
                    Reach::Harmless => {
                        // Only reads, and the forge's own rendering of text it is sent.
                        assert!(
                            !write || op.path.starts_with("/markup") || op.path.starts_with("/markdown"),
                            "{}",
                            op.id
                        );
                        assert!(!names_repo && !op.path.starts_with("/admin"), "{}", op.id);
                    }
                    Reach::Repo(also) => {
                        assert!(names_repo, "{} is judged by its route, which names no repository", op.id);
                        for a in also {
                            match a {
                                Also::Issue { .. } => {
                                    assert!(body_has("owner") && body_has("repo"), "{}", op.id)
                                }
                                Also::Url { field, .. } => assert!(body_has(field), "{}", op.id),
                                Also::Head(s) => assert!(source_exists(s), "{}", op.id),
                            }
                        }
                    }
                    Reach::Places(m) => {
                        for s in m.owner.iter().chain(m.name) {
                            assert!(source_exists(s), "{}: {s:?}", op.id);
                        }
                        for a in m.also {
                            if let Also::Url { field, .. } = a {
                                assert!(body_has(field), "{}", op.id);
                            }
                        }
                    }
                    Reach::Account(sources) => {
                        assert!(!sources.is_empty(), "{}", op.id);
                        for s in sources {
                            assert!(source_exists(s), "{}: {s:?}", op.id);
                        }
                    }
                    Reach::Caller => assert!(
                        op.path.starts_with("/user/") || op.path == "/user" || op.path == "/token",
                        "{}",
                        op.id
                    ),
                    Reach::Instance => assert!(
                        op.path.starts_with("/admin/") || op.path.starts_with("/activitypub/actor"),
                        "{}",
                        op.id
                    ),
                    Reach::Filtered(l) => {
                        assert!(l.single || op.paging.is_some() || !l.at.is_empty(), "{}", op.id)
                    }
                    Reach::Refused(_) => {}
                }
                // Whatever hands out a credential is never harmless.
                if crate::guard::credential_ops::issues_credentials(Some(&op.id)) {
                    assert!(!matches!(r, Reach::Harmless | Reach::Filtered(_)), "{}", op.id);
                }
            }
        }
        for (id, _) in reach::TABLE {
            assert!(ops.contains(*id), "{id} is in the reach table but in neither spec");
        }
        assert_eq!(ops.len(), reach::TABLE.len());
    }

    #[test]
    fn an_operation_without_a_row_is_refused_under_any_allowlist() {
        let c = gitea();
        let mut op = op(c, "getVersion").clone();
        op.id = "someFutureOperation".into();
        let all = list("*");
        let f = fence_of(Some(&all), None, None, None);
        let why = refusal(&f, &op, &Values::Args(&Map::new()), None).unwrap();
        assert!(why.contains("cannot be judged"), "{why}");
        assert_eq!(refusal(&fence_of(None, None, None, None), &op, &Values::Args(&Map::new()), None), None);
    }

    /// `o/r` (or `o/*`) on both lists, as a site administrator's fenced server might have.
    fn judge_with(lists: &str, id: &str, args: Value, caller: Option<&str>) -> Option<String> {
        let [(_, g), (_, f)] = both();
        let c = if g.get(id).is_some() { g } else { f };
        let l = list(lists);
        let fence = fence_of(Some(&l), Some(&l), None, None);
        let a = spelled(c, id, args);
        let o = op(c, id);
        refusal(&fence, o, &Values::Args(&a), a.get("body"))
            .or_else(|| caller_refusal(&fence, o, &Values::Args(&a), a.get("body"), caller))
    }

    #[test]
    fn operations_keyed_by_an_account_need_the_whole_account() {
        let cases = [
            ("adminDeleteUser", json!({"username": "o", "purge": true})),
            ("adminRenameUser", json!({"username": "o", "body": {"new_username": "gone"}})),
            ("adminRenameUser", json!({"username": "mallory", "body": {"new_username": "o"}})),
            ("adminEditUser", json!({"username": "o", "body": {"admin": true}})),
            ("userCreateToken", json!({"username": "o", "body": {"name": "t", "scopes": ["all"]}})),
            (
                "adminCreatePublicKey",
                json!({"username": "o", "body": {"key": "ssh-ed25519 AAAA", "title": "k"}}),
            ),
            ("adminCreateUser", json!({"body": {"username": "o2", "email": "e@x", "password": "p"}})),
            ("orgDeleteRepos", json!({"org": "o"})),
            ("renameOrg", json!({"org": "o", "body": {"new_name": "p"}})),
            ("orgCreate", json!({"body": {"username": "neworg"}})),
        ];
        for (id, args) in &cases {
            let why = judge_with("o/r", id, args.clone(), Some("admin"));
            assert!(why.as_deref().is_some_and(|w| w.contains("/*")), "{id} {args}: {why:?}");
        }
        // With the account wholly on the lists, an operation on it runs (a rename needs both
        // names: the account it leaves and the one it takes).
        assert_eq!(judge_with("o/*", "adminDeleteUser", json!({"username": "O"}), None), None);
        assert_eq!(
            judge_with("o/*", "userCreateToken", json!({"username": "o", "body": {"name": "t"}}), None),
            None
        );
        assert!(
            judge_with(
                "o/*",
                "adminRenameUser",
                json!({"username": "mallory", "body": {"new_username": "o"}}),
                None
            )
            .is_some()
        );
        assert!(
            judge_with(
                "o/*",
                "adminRenameUser",
                json!({"username": "o", "body": {"new_username": "elsewhere"}}),
                None
            )
            .is_some()
        );
        assert_eq!(
            judge_with(
                "o/*,p/*",
                "adminRenameUser",
                json!({"username": "o", "body": {"New_Username": "p"}}),
                None
            ),
            None
        );
        // The caller's own account: its keys, tokens, emails and settings.
        for id in [
            "userCurrentPostKey",
            "userAddEmail",
            "updateUserSettings",
            "userCurrentListKeys",
            "deleteCurrentToken",
        ] {
            let args = json!({"body": {"key": "ssh-ed25519 AAAA", "title": "k"}});
            assert!(judge_with("o/r", id, args.clone(), Some("o")).is_some(), "{id}");
            assert_eq!(judge_with("o/*", id, args, Some("O")), None, "{id}");
        }
        // Public reads of accounts and the instance stay open.
        for id in ["userGet", "userSearch", "getVersion", "orgGetAll", "userListFollowers"] {
            assert_eq!(judge_with("o/r", id, json!({"username": "anyone"}), Some("o")), None, "{id}");
        }
    }

    #[test]
    fn operations_on_the_whole_instance_need_everything() {
        for (id, args) in [
            ("adminCronRun", json!({"task": "delete_repo_archives"})),
            ("adminCronList", json!({})),
            ("adminSearchEmails", json!({})),
            ("adminCreateHook", json!({"body": {}})),
            ("adminSearchUsers", json!({})),
            ("repoMergeUpstream", json!({"owner": "o", "repo": "r", "body": {"branch": "main"}})),
        ] {
            let why = judge_with("o/*", id, args.clone(), Some("o"));
            assert!(why.as_deref().is_some_and(|w| w.contains("`*`")), "{id}: {why:?}");
            assert_eq!(judge_with("*", id, args, Some("o")), None, "{id}");
        }
    }

    #[test]
    fn a_migration_from_this_forge_must_read_its_source() {
        let to = |clone: &str| {
            judge_with(
                "o/*",
                "repoMigrate",
                json!({"body": {"clone_addr": clone, "repo_owner": "o", "repo_name": "copy"}}),
                Some("o"),
            )
        };
        for spelling in [
            "https://git.example.com/evil/secret",
            "https://git.example.com/evil/secret.git",
            "https://GIT.Example.COM/evil/secret.GIT",
            "https://git.example.com/evil/secret/",
            "https://git.example.com//evil//secret.git/",
            "https://someone:pw@git.example.com/evil/secret.git",
            "http://git.example.com:3000/evil/secret",
            "https://git.example.com./evil/secret",
            "https://git.example.com/evil/secret.wiki.git",
            "https://git.example.com/%65vil/secret",
            "git://git.example.com/evil/secret.git",
            "ssh://git@git.example.com:2222/evil/secret.git",
            "git@git.example.com:evil/secret.git",
            "git@203.0.113.5:evil/secret.git",
            "ssh://git@GIT.EXAMPLE.COM/evil/secret.git",
            "git://3405803781/evil/secret.git",
            "http://203.0.113.5/evil/secret",
            "http://[::ffff:203.0.113.5]/evil/secret",
            "  https://git.example.com/evil/secret  ",
            "https://git.example.com/evil/secret/src/branch/main",
        ] {
            let why = to(spelling);
            assert!(why.as_deref().is_some_and(|w| w.contains("evil/secret")), "{spelling}: {why:?}");
        }
        // Nothing of this forge that can be read; what cannot be judged.
        for odd in
            ["/var/lib/gitea/repos/evil/secret.git", "file:///evil/secret", "https://git.example.com/evil"]
        {
            assert!(to(odd).is_some(), "{odd}");
        }
        // Its own repositories, and other hosts, migrate as before.
        assert_eq!(to("https://git.example.com/o/r.git"), None);
        assert_eq!(to("https://github.com/evil/secret.git"), None);
        assert_eq!(to("https://git.example.com.evil.net/evil/secret"), None);
        // A push mirror of this forge is a write to its target.
        let mirror = |addr: &str| {
            judge_with(
                "o/r",
                "repoAddPushMirror",
                json!({"owner": "o", "repo": "r", "body": {"remote_address": addr}}),
                None,
            )
        };
        assert!(mirror("https://git.example.com/evil/target.git").is_some());
        assert_eq!(mirror("https://backup.example.org/o/r.git"), None);
    }

    #[test]
    fn a_pull_request_or_comparison_with_a_fork_reads_the_fork() {
        let pr = |head: &str| {
            judge_with(
                "o/r",
                "repoCreatePullRequest",
                json!({"owner": "o", "repo": "r", "body": {"head": head, "base": "main", "title": "t"}}),
                None,
            )
        };
        assert_eq!(pr("feature"), None);
        assert_eq!(pr("O:feature"), None, "the route's own owner: the same repository");
        assert!(pr("evil:feature").is_some_and(|w| w.contains("owner/repo:branch")));
        assert!(pr("evil/fork:feature").is_some());
        let compare = |basehead: &str| {
            judge_with(
                "o/r",
                "repoCompareDiff",
                json!({"owner": "o", "repo": "r", "basehead": basehead}),
                None,
            )
        };
        assert_eq!(compare("main...feature"), None);
        assert!(compare("main...evil:feature").is_some());
        assert!(compare("main..evil/fork:feature").is_some());
        let c = gitea();
        let l = list("o/r");
        let f = fence_of(Some(&l), None, None, None);
        let segs = ["repos", "o", "r", "compare", "main...evil:feat", "x"];
        assert!(refusal(&f, op(c, "repoCompareDiff"), &Values::Segments(&segs), None).is_some());
    }

    #[test]
    fn a_withheld_answer_about_an_id_does_not_say_what_it_was() {
        let read = list("acme/*");
        let f = fence_of(Some(&read), None, None, None);
        let mut elided = Elided::default();
        let mut one = json!({"id": 9, "full_name": "evil/secret-plans"});
        let Filter::Withheld(why) = filter(&f, Some("repoGetByID"), &mut one, None, &mut elided) else {
            panic!()
        };
        assert!(
            !why.contains("evil")
                && !why.contains("secret")
                && why.contains("outside the allowed repositories"),
            "{why}"
        );
        let mut team = json!({"id": 3, "name": "owners", "organization": {"username": "evil"}});
        assert!(matches!(filter(&f, Some("orgGetTeam"), &mut team, None, &mut elided), Filter::Withheld(_)));
        let mut ours = json!({"id": 3, "name": "owners", "organization": {"username": "Acme"}});
        assert!(matches!(filter(&f, Some("orgGetTeam"), &mut ours, None, &mut elided), Filter::Untouched));
    }
}
