//! The flow guard at work: which repositories a call read, and how far a write's audience
//! reaches. The core says what a call read and where a write goes
//! (`aegis_core::policy::flow`); this module asks the forge what is private, and `reads.rs`
//! keeps what each session read.
//!
//! A *session* is the process over stdio, the MCP session over Streamable HTTP with sessions
//! and legacy SSE, and the caller's identity over `FLOW_WINDOW` over stateless HTTP (kept in
//! the shared store when there is one, so that a read on one replica and a write on another
//! are judged together).
//!
//! A read is judged at the session's next write, not when it is made: an agent reads far
//! more than it writes, and a session that only reads costs the forge nothing more. Then each
//! repository it read is looked up once (`GET /repos/{owner}/{repo}`: `private`, `internal`,
//! `owner.visibility`; a profile by `GET /users/{login}`), cached per identity. Over stateless
//! HTTP with a shared store the read is judged at once instead, because the replica that
//! judges the write may be another, and the store keeps keyed hashes, not names. A look-up
//! that fails makes a read count as private and a write's target as public: either way the
//! person is asked rather than not.

use serde_json::Value;

use crate::audit::Trace;
use crate::identity::{Credential, Principal};
use crate::reads::{Key, MAX_SOURCES, Session, key_of};
use crate::server::At;
use aegis_core::args::Prepared;
use aegis_core::identity::Identity;
use aegis_core::policy::flow::{self, Audience, FlowGuard, Read, Seen, Sources, Widening};

/// Visibility look-ups one call makes at once (a write after many reads judges them all).
const LOOKUPS_AT_ONCE: usize = 4;

/// Who a call runs as, for the flow guard: its session, and the identity its look-ups run as.
#[derive(Clone, Copy)]
pub(crate) struct Caller<'a> {
    pub(crate) session: &'a Session,
    pub(crate) global: bool,
    pub(crate) identity: &'a Identity,
    pub(crate) credential: &'a Credential,
}

impl Caller<'_> {
    fn key(&self) -> Key {
        key_of(self.session, self.global, self.identity)
    }

    /// The login whose look-ups these are: the sudo target's, else the caller's.
    fn login(&self) -> Option<&str> {
        self.identity.sudo.as_deref().or(self.identity.login.as_deref())
    }
}

/// Whether `call` (a write) widens what its session read: the widening, if it does. Nothing
/// is looked up for a session that has read nothing private, or a call that writes nowhere.
pub(crate) async fn judge(
    at: At<'_>,
    caller: &Caller<'_>,
    call: &Prepared<'_>,
    trace: &mut Trace,
) -> Option<Widening> {
    if at.profile.policy.flow == FlowGuard::Off {
        if call.operation().is_some_and(|op| op.method != aegis_core::catalog::Method::Get) {
            trace.flow = Some("off");
        }
        return None;
    }
    let audiences = flow::audiences(call);
    if audiences.is_empty() {
        return None;
    }
    let key = caller.key();
    let (sources, unjudged) = at.server.flows.sources(&key);
    let sources = if unjudged.is_empty() {
        sources
    } else {
        judge_reads(at, caller, &key, unjudged).await;
        at.server.flows.sources(&key).0
    };
    let (mut sources, elsewhere) = shared::merged(at, caller, sources).await;
    if sources.is_empty() && elsewhere.is_empty() {
        return None;
    }
    let mut seen = Vec::with_capacity(audiences.len());
    for a in audiences {
        let s = reach_of(at, caller, &a).await;
        // With several forges, owners are named with their forge, as the sources are.
        seen.push(match at.profile.name() {
            Some(forge) => (a.on_forge(forge), s.on_forge(forge)),
            None => (a, s),
        });
    }
    sources.elsewhere = shared::owners(at, &elsewhere, &seen);
    let op = call.operation().map_or_else(|| call.tool().name().to_owned(), |op| op.id.clone());
    let widening = flow::widening(&op, &sources, &seen);
    trace.flow = Some(if widening.is_some() { "widening" } else { "kept" });
    if widening.is_none() {
        at.server.metrics.flow_write("kept");
    }
    widening
}

/// How far audience `a` reaches, as the caller sees it.
async fn reach_of(at: At<'_>, caller: &Caller<'_>, a: &Audience) -> Seen {
    let mine = || caller.login().unwrap_or("the caller").to_owned();
    match a {
        Audience::Repo { owner, repo } => {
            repo_visibility(at, caller, owner, repo).await.unwrap_or(Seen::Public)
        }
        Audience::Account(login) => {
            let login = login.clone().unwrap_or_else(mine);
            account_visibility(at, caller, &login).await.unwrap_or(Seen::Public)
        }
        Audience::NewRepo { private: false, .. } => Seen::Public,
        Audience::NewRepo { owner, private: true, .. } => {
            Seen::Private { owner: owner.clone().unwrap_or_else(mine) }
        }
        Audience::Like { from, owner, .. } => match repo_visibility(at, caller, &from.0, &from.1).await {
            Some(Seen::Private { .. }) => Seen::Private { owner: owner.clone().unwrap_or_else(mine) },
            Some(other) => other,
            None => Seen::Public,
        },
        Audience::Outside(_) => Seen::Outside,
        Audience::Anyone(_) => Seen::Public,
    }
}

/// After a successful call: what it read of private repositories joins its session's
/// sources. `data` is the forge's answer (a listing's items say their repositories).
pub(crate) async fn note(at: At<'_>, caller: &Caller<'_>, call: &Prepared<'_>, data: &Value) {
    if at.profile.policy.flow == FlowGuard::Off {
        return;
    }
    // A repository's own answer says how far it reaches: no look-up needed for it.
    if let Some((owner, repo, seen)) = visibility_of(data) {
        at.server.flows.remember(&who(caller), &on(at, repo_key(&owner, &repo)), Some(seen));
    }
    let (repos, unknown) = match flow::read_of(call) {
        Read::Nothing => return,
        Read::Repos(repos) => (repos, false),
        Read::Items(mut repos, items) => {
            let (listed, more) = flow::items_read(items, data);
            repos.extend(listed);
            (repos, more)
        }
        Read::Unknown => (Vec::new(), true),
    };
    // With several forges, a repository is named with its forge: the same name on another
    // forge is another repository, judged there.
    let repos: Vec<(String, String)> = match at.profile.name() {
        Some(forge) => repos.into_iter().map(|(o, r)| (flow::on_forge(forge, &o), r)).collect(),
        None => repos,
    };
    let key = caller.key();
    at.server.flows.read(&key, &repos, unknown);
    if unknown {
        at.server.metrics.flow_sources(0, true);
    }
    // Over stateless HTTP with a shared store, another replica may judge the next write: what
    // was read is judged now, and what is private told to every replica.
    if let (Some(_), Session::Identity) = (&at.server.state, caller.session) {
        let private = judge_reads(at, caller, &key, repos).await;
        shared::noted(at, caller, &private, unknown).await;
    }
}

/// Look up how far each repository of `repos`, which the session of `key` read, reaches, and
/// keep the private ones as its sources (a look-up that fails counts as private): the
/// private ones.
async fn judge_reads(
    at: At<'_>,
    caller: &Caller<'_>,
    key: &Key,
    repos: Vec<(String, String)>,
) -> Vec<(String, String)> {
    use futures::StreamExt;
    let judged: Vec<((String, String), bool)> = futures::stream::iter(repos)
        .map(|(owner, repo)| async move {
            let private =
                !matches!(visibility_on_its_forge(at, caller, &owner, &repo).await, Some(Seen::Public));
            ((owner, repo), private)
        })
        .buffered(LOOKUPS_AT_ONCE)
        .collect()
        .await;
    at.server.flows.judged(key, &judged);
    let private: Vec<(String, String)> = judged.into_iter().filter(|(_, p)| *p).map(|(r, _)| r).collect();
    at.server.metrics.flow_sources(private.len(), false);
    private
}

/// The visibility of a repository a session read, on the forge it was read from (`owner` is
/// `forge:owner` with several forges), to the caller there. A read on another forge than the
/// call's is looked up with that forge's own credential when the caller is the server's own
/// identity; a caller with a credential for one forge only has none for it, so nothing is sent
/// and the read counts as private.
async fn visibility_on_its_forge(at: At<'_>, caller: &Caller<'_>, owner: &str, repo: &str) -> Option<Seen> {
    let Some((forge, bare)) = owner.split_once(':') else {
        return repo_visibility(at, caller, owner, repo).await;
    };
    if at.profile.name() == Some(forge) {
        return repo_visibility(at, caller, bare, repo).await;
    }
    let there = at.server.forges.all().find(|p| p.name() == Some(forge))?;
    if !caller.global {
        return None;
    }
    let own = Caller { credential: &there.global.credential, ..*caller };
    repo_visibility(at.server.at(there), &own, bare, repo).await
}

/// The visibility of repository `owner/repo` to the caller (`None`: it could not be read).
async fn repo_visibility(at: At<'_>, caller: &Caller<'_>, owner: &str, repo: &str) -> Option<Seen> {
    let args = serde_json::json!({"owner": owner, "repo": repo});
    looked_up(at, caller, repo_key(owner, repo), ("repoGet", args), |v| visibility_of(v).map(|(_, _, s)| s))
        .await
}

/// How a repository's visibility is remembered.
fn repo_key(owner: &str, repo: &str) -> String {
    format!("repo {owner}/{repo}").to_lowercase()
}

/// The owner, name and reach of a repository object (`private`, `internal`, `owner.visibility`),
/// if `v` is one.
fn visibility_of(v: &Value) -> Option<(String, String, Seen)> {
    let private = v.get("private").and_then(Value::as_bool)?;
    let login = v.pointer("/owner/login").and_then(Value::as_str)?.to_owned();
    let name = v.get("name").and_then(Value::as_str)?.to_owned();
    let seen = match v.pointer("/owner/visibility").and_then(Value::as_str) {
        _ if private => Seen::Private { owner: login.clone() },
        Some("public") if v.get("internal").and_then(Value::as_bool) != Some(true) => Seen::Public,
        Some("public" | "limited") => Seen::Limited,
        _ => Seen::Private { owner: login.clone() },
    };
    Some((login, name, seen))
}

/// The visibility of account `login`'s profile (a user's or an organisation's).
async fn account_visibility(at: At<'_>, caller: &Caller<'_>, login: &str) -> Option<Seen> {
    let key = format!("account {login}").to_lowercase();
    looked_up(at, caller, key, ("userGet", serde_json::json!({"username": login})), |v| {
        Some(match v.get("visibility").and_then(Value::as_str)? {
            "public" => Seen::Public,
            "limited" => Seen::Limited,
            _ => Seen::Private { owner: login.to_owned() },
        })
    })
    .await
}

/// `read` of the forge's answer to operation `op` (a GET) with `args`, as the caller, cached
/// per identity. The server's own read, not the agent's: no tool rule stops it.
async fn looked_up(
    at: At<'_>,
    caller: &Caller<'_>,
    what: String,
    (op, args): (&str, Value),
    read: impl FnOnce(&Value) -> Option<Seen>,
) -> Option<Seen> {
    let (who, what) = (who(caller), on(at, what));
    if let Some(seen) = at.server.flows.seen(&who, &what) {
        at.server.metrics.flow_lookup(true);
        return seen;
    }
    at.server.metrics.flow_lookup(false);
    // A failure is remembered too: a forge that cannot answer is not asked at every call.
    let seen = get(at, caller.credential, op, args).await.and_then(|v| read(&v));
    at.server.flows.remember(&who, &what, seen.clone());
    seen
}

/// A look-up's key on the forge of `at`: the same name on two forges is two repositories.
fn on(at: At<'_>, what: String) -> String {
    match at.profile.name() {
        Some(forge) => format!("{forge}:{what}"),
        None => what,
    }
}

/// Whose look-ups these are: what the forge shows a caller depends on who it is.
fn who(caller: &Caller<'_>) -> (Principal, Option<String>) {
    (Principal::of(caller.global, caller.identity), caller.identity.sudo.clone())
}

/// The forge's JSON answer to operation `op` with `args`, if it answered 200 with JSON.
async fn get(at: At<'_>, credential: &Credential, op: &str, args: Value) -> Option<Value> {
    let Value::Object(args) = args else { return None };
    let body =
        crate::executor::own_read(&at.profile.forge, &at.profile.catalog, credential, op, args).await.ok()?;
    serde_json::from_slice(&body).ok()
}

/// The record of an identity over stateless HTTP, in the store the replicas share.
mod shared {
    use super::*;

    /// `sources`, and what other replicas noted for the caller that this one did not (stateless
    /// HTTP with a shared store: each a keyed hash of owner and repository); a store that cannot
    /// say makes the session count as having read from anyone.
    pub(super) async fn merged(
        at: At<'_>,
        caller: &Caller<'_>,
        mut sources: Sources,
    ) -> (Sources, Vec<String>) {
        let (Some(store), Session::Identity) = (at.server.state.as_ref(), caller.session) else {
            return (sources, Vec::new());
        };
        let mut elsewhere = Vec::new();
        match store.flow_sources(&who(caller), MAX_SOURCES).await {
            Ok(members) => {
                for m in members {
                    if m == crate::state::FLOW_UNKNOWN {
                        sources.unknown = true;
                    } else if !sources.repos.iter().any(|(o, r)| store.flow_member(o, r) == m) {
                        elsewhere.push(m);
                    }
                }
            }
            Err(why) => {
                store.warn("the flow guard counts the caller as having read private content", why);
                sources.unknown = true;
            }
        }
        (sources, elsewhere)
    }

    /// The owners of what other replicas noted, as far as they are the owner of a private
    /// place the write goes to (`None`: another owner).
    pub(super) fn owners(at: At<'_>, elsewhere: &[String], seen: &[(Audience, Seen)]) -> Vec<Option<String>> {
        let Some(store) = at.server.state.as_ref() else { return Vec::new() };
        elsewhere
            .iter()
            .map(|m| {
                seen.iter().find_map(|(_, s)| match s {
                    Seen::Private { owner } if store.flow_member_of(m, owner) => Some(owner.clone()),
                    _ => None,
                })
            })
            .collect()
    }

    /// Tell every replica what the caller read (stateless HTTP with a shared store).
    pub(super) async fn noted(at: At<'_>, caller: &Caller<'_>, private: &[(String, String)], unknown: bool) {
        let (Some(store), Session::Identity) = (at.server.state.as_ref(), caller.session) else { return };
        let mut members: Vec<String> = private.iter().map(|(o, r)| store.flow_member(o, r)).collect();
        if unknown {
            members.push(crate::state::FLOW_UNKNOWN.to_owned());
        }
        if let Err(why) = store.flow_note(&who(caller), &members, at.server.flows.window(), MAX_SOURCES).await
        {
            store.warn("a private read was kept on this replica only", why);
        }
    }

    fn who(caller: &Caller<'_>) -> Vec<u8> {
        let p = Principal::of(caller.global, caller.identity);
        format!("{p:?}|{}", caller.identity.sudo.as_deref().unwrap_or("")).into_bytes()
    }
}
