//! Which tools a client sees and which calls the server allows.
//!
//! Two questions with two answers. *Allowed* is a hard rule: `READ_ONLY` (only GET),
//! `ENABLED_TOOLS` (only these names) and `DISABLED_TOOLS` (never these names) refuse a call
//! however it arrives — as a listed tool, through the raw tool (by the route it reaches) or
//! through the discovery tools. *Listed* is about context size: `TOOLSETS` picks which
//! allowed operations appear in `tools/list`; the others stay callable by name or through
//! `gitea_call_operation`. Built-in tools are always listed when allowed.
//!
//! Over HTTP a request may narrow both for itself (`X-MCP-Readonly`, `X-MCP-Disabled-Tools`,
//! `X-MCP-Toolsets`, see `Narrowing`); nothing a request sends can widen the server's
//! settings, because a narrowing only ever adds refusals or removes listed tools.
//!
//! A third question is about data, not tools: which repositories a call may touch
//! (`ALLOWED_REPOS`, `WRITE_ALLOWED_REPOS`, and the request's `X-MCP-Allowed-Repos`,
//! `X-MCP-Write-Allowed-Repos`), in `repos`. It refuses calls on the same paths and never
//! changes what is listed.

pub mod confirm;
pub mod flow;
pub(crate) mod reach;
pub mod repos;
pub mod route;

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::args::Prepared;
use crate::catalog::toolsets::Selection;
use crate::catalog::{Method, Operation, Target, ToolDef};
use crate::error::{CallError, ErrorKind};
use crate::guard::credential_ops;
use repos::{Fence, ForgeHost, RepoList, Values};

/// The server's own policy, from its settings.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub read_only: bool,
    /// Whether the raw tool may send a route that no operation of the spec has.
    pub unknown_routes: bool,
    /// Empty: every tool; otherwise only these (operations and the raw/attachment tools).
    pub enabled: BTreeSet<String>,
    pub disabled: BTreeSet<String>,
    pub toolsets: Selection,
    /// `ALLOWED_REPOS` (`None`: every repository).
    pub repos: Option<Arc<RepoList>>,
    /// `WRITE_ALLOWED_REPOS`: writes answer to both lists.
    pub write_repos: Option<Arc<RepoList>>,
    /// This forge, for arguments that name it by URL (a migration's source).
    pub forge: ForgeHost,
    /// `CONFIRM_IRREVERSIBLE`: how a call that cannot be undone is confirmed.
    pub confirm: confirm::Mode,
    /// `FLOW_GUARD`: what happens to a write that widens what the session read.
    pub flow: flow::FlowGuard,
}

/// What one HTTP request asked for itself, on top of the server's policy. The default
/// (stdio, or no headers) changes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Narrowing {
    pub read_only: bool,
    pub disabled: BTreeSet<String>,
    /// `None`: the server's selection as is.
    pub toolsets: Option<Selection>,
    /// `X-MCP-Allowed-Repos`: a list every call of this request answers to as well.
    pub repos: Option<Arc<RepoList>>,
    /// `X-MCP-Write-Allowed-Repos`: the same for writes.
    pub write_repos: Option<Arc<RepoList>>,
    /// `X-MCP-Content-Trust: withhold`: authors' text is withheld as under
    /// `CONTENT_TRUST=withhold`, whatever the setting (a request turns it on, never off).
    pub withhold: bool,
}

impl Narrowing {
    /// Whether it changes what `tools/list` shows (the repository lists do not).
    pub fn narrows_tools(&self) -> bool {
        self.read_only || !self.disabled.is_empty() || self.toolsets.is_some()
    }
}

impl Policy {
    /// The repository lists a call under `narrowing` answers to.
    pub fn fence<'a>(&'a self, narrowing: &'a Narrowing) -> Fence<'a> {
        Fence::new(
            self.repos.as_ref(),
            self.write_repos.as_ref(),
            narrowing.repos.as_ref(),
            narrowing.write_repos.as_ref(),
            &self.forge,
        )
    }

    /// The second look of a call whose tool passed `tool_refusal`, on its validated
    /// arguments: for the raw tool its method and the operation its route reaches (so a
    /// disabled operation cannot be reached by its path), and the repository allowlists, which
    /// read the body's members by the exact names validation left.
    pub fn judge(&self, narrowing: &Narrowing, call: &Prepared) -> Option<Refusal> {
        self.arguments_refusal(narrowing, call.tool(), call.reached(), call.args())
    }

    /// Whether a call the policy admitted would be refused were the request held to reads
    /// (it writes, or hands out a credential): what a read-only sign-in cannot make.
    pub fn needs_writes(&self, call: &Prepared) -> bool {
        let reads = Narrowing { read_only: true, ..Narrowing::default() };
        self.read_only_refusal(&reads, call.tool(), call.reached(), call.args()).is_some()
    }

    /// Why no call of `tool` could be allowed, if none could (before arguments): what the
    /// listing and the discovery tools go by.
    pub(crate) fn refusal(&self, narrowing: &Narrowing, tool: &ToolDef) -> Option<Refusal> {
        self.tool_refusal(narrowing, tool)
            .or_else(|| self.arguments_refusal(narrowing, tool, None, &Map::new()))
    }

    /// The first look at a call, before its arguments (nothing is validated for a call that
    /// no arguments could make allowed): the rules of the tool's name and kind —
    /// `DISABLED_TOOLS`, `ENABLED_TOOLS`, the request's disabled tools — and for an
    /// operation read-only. A call that passes meets `judge` once its arguments are prepared.
    pub(crate) fn tool_refusal(&self, narrowing: &Narrowing, tool: &ToolDef) -> Option<Refusal> {
        self.name_refusal(narrowing, tool).or_else(|| match tool.target {
            Target::Operation(_) => self.read_only_refusal(narrowing, tool, None, &Map::new()),
            _ => None,
        })
    }

    /// The rules that read a call's arguments (validated, but for the listing question, which
    /// has none): the raw tool's method and route, the repository allowlists.
    fn arguments_refusal(
        &self,
        narrowing: &Narrowing,
        tool: &ToolDef,
        reached: Option<&ToolDef>,
        args: &Map<String, Value>,
    ) -> Option<Refusal> {
        let name = tool.name.as_str();
        let fence = self.fence(narrowing);
        let repos = |why: String| Refusal { cause: Cause::Repos, why };
        match &tool.target {
            Target::Operation(op) => {
                repos::refusal(&fence, op, &Values::Args(args), args.get("body")).map(repos)
            }
            Target::Raw => {
                if let Some(refusal) = self.read_only_refusal(narrowing, tool, reached, args) {
                    return Some(refusal);
                }
                let path = args.get("path").and_then(Value::as_str);
                let Some(reached) = reached else {
                    return self.unknown_route_refusal(path).or_else(|| {
                        let method = args.get("method").and_then(Value::as_str).unwrap_or("GET");
                        path.and_then(|p| repos::unknown_route_refusal(&fence, method, p)).map(repos)
                    });
                };
                if let Some(refusal) = self.name_refusal(narrowing, reached) {
                    return Some(refusal.through(name));
                }
                let (op, path) = (reached.operation()?, path?);
                let segments = crate::catalog::segments(path);
                repos::refusal(&fence, op, &Values::Segments(&segments), args.get("body"))
                    .map(|why| repos(why).through(name))
            }
            // An attachment is named by its uuid alone: which repository it belongs to is
            // known only once it is fetched (without arguments: the listing question).
            Target::AttachmentDownload if !fence.is_open() && !args.is_empty() => Some(repos(format!(
                "{name} names an attachment by its uuid alone, so under a repository allowlist it is refused; read attachments through the operations of their repository (e.g. repoGetReleaseAttachment, issueGetIssueAttachment)"
            ))),
            _ => None,
        }
    }

    /// Read-only, for an operation, or a raw call by its method and the operation it reaches.
    fn read_only_refusal(
        &self,
        narrowing: &Narrowing,
        tool: &ToolDef,
        reached: Option<&ToolDef>,
        args: &Map<String, Value>,
    ) -> Option<Refusal> {
        if !(self.read_only || narrowing.read_only) {
            return None;
        }
        let name = tool.name.as_str();
        let words = read_only_words(self);
        let why = match &tool.target {
            Target::Operation(op) => format!("{words}: {name} {}", writes(op)?),
            Target::Raw if args.get("method").and_then(Value::as_str).is_some_and(|m| m != "GET") => {
                // The method is not echoed: the schema allows only the five, but it is the client's.
                format!("{words}: {name} accepts only GET")
            }
            Target::Raw => {
                let reached = reached?;
                format!(
                    "{words}: {} {} (reached through {name})",
                    reached.name,
                    writes(reached.operation()?)?
                )
            }
            _ => return None,
        };
        Some(Refusal { cause: Cause::ReadOnly, why })
    }

    /// Why a second look of the repository allowlists refuses a call, once the caller is
    /// known (`login`: the user the call runs as): a new repository that goes to the caller,
    /// or a route that acts on the caller's own account (`repos::caller_refusal`).
    pub fn caller_refusal(
        &self,
        narrowing: &Narrowing,
        call: &Prepared,
        login: Option<&str>,
    ) -> Option<Refusal> {
        let fence = self.fence(narrowing);
        if fence.is_open() {
            return None;
        }
        let (op, route) = Route::of(call)?;
        repos::caller_refusal(&fence, op, &route.values(), call.args().get("body"), login)
            .map(|why| Refusal { cause: Cause::Repos, why })
    }

    /// The host names the URLs of `call`'s body give other than this forge's own, under a
    /// repository allowlist: the server looks them up and judges the call again with what they
    /// resolve to (`alias_refusal`), since another name of this forge's address would pass for
    /// another host.
    pub fn named_hosts(&self, narrowing: &Narrowing, call: &Prepared) -> Vec<String> {
        let fence = self.fence(narrowing);
        let Some((op, route)) = Route::of(call) else { return Vec::new() };
        repos::named_hosts(&fence, op, &route.values(), call.args().get("body"))
    }

    /// `call` judged again by the repository allowlists, each of `aliases` (a host name and
    /// the addresses it resolves to) being this forge when it resolves to one of its
    /// addresses.
    pub fn alias_refusal(
        &self,
        narrowing: &Narrowing,
        call: &Prepared,
        aliases: &[(String, Vec<std::net::IpAddr>)],
    ) -> Option<Refusal> {
        let fence = self.fence(narrowing).with_aliases(aliases);
        let (op, route) = Route::of(call)?;
        repos::refusal(&fence, op, &route.values(), call.args().get("body"))
            .map(|why| Refusal { cause: Cause::Repos, why })
    }

    /// Whether `tool` takes the `confirm` argument: it may need a person because it cannot
    /// be undone (unless `CONFIRM_IRREVERSIBLE=off`), or because it may widen what a session
    /// read (unless `FLOW_GUARD=off`).
    pub fn takes_confirm(&self, tool: &ToolDef) -> bool {
        self.offers_confirm(tool).is_some()
    }

    /// Whether `tool` takes `confirm` (`takes_confirm`), and if so whether `tools/list` shows
    /// it: only where the call itself may need it (what it destroys), not where only a private
    /// read before it would (the error of such a call says what to send).
    pub fn offers_confirm(&self, tool: &ToolDef) -> Option<bool> {
        if self.confirm != confirm::Mode::Off && confirm::offered_by(tool) {
            Some(true)
        } else if self.flow != flow::FlowGuard::Off && flow::may_widen(tool) {
            Some(false)
        } else {
            None
        }
    }

    /// What a person must confirm before `call` is sent, if anything (whatever
    /// `CONFIRM_IRREVERSIBLE` says: with `off` the audit line still says it was not asked).
    /// Judged by the operation reached: a tool's, a raw call's route's (a raw DELETE of a
    /// route no operation has is confirmed by its path), the call tool's target's.
    pub fn confirmation(&self, call: &Prepared) -> Option<confirm::Confirmation> {
        match Route::of(call) {
            Some((op, route)) => confirm::needed(op, &route.values(), call.args()),
            None => confirm::unknown_route(call.tool(), call.args()),
        }
    }

    /// Why a raw call whose route reaches no operation of the spec may not run: nothing could
    /// judge it (a disabled operation under another spelling, an undocumented route). A call
    /// without a path is the listing question.
    fn unknown_route_refusal(&self, path: Option<&str>) -> Option<Refusal> {
        if self.unknown_routes || path.is_none() {
            return None;
        }
        Some(Refusal {
            cause: Cause::UnknownRoute,
            why: format!(
                "no operation of this API has the route this {} request names (route words are case-sensitive: /repos, not /REPOS), so the server cannot judge it; find the operation with {}, or let the raw tool send unknown routes with ALLOW_UNKNOWN_ROUTES",
                crate::catalog::raw_tool::NAME,
                crate::catalog::discovery_tools::SEARCH,
            ),
        })
    }

    /// The rules that depend only on the tool's name and kind.
    fn name_refusal(&self, narrowing: &Narrowing, tool: &ToolDef) -> Option<Refusal> {
        let name = tool.name.as_str();
        let why = if self.disabled.contains(name) {
            format!("the tool {name} is disabled on this server (DISABLED_TOOLS)")
        } else if narrowing.disabled.contains(name) {
            format!("the tool {name} is disabled for this request (X-MCP-Disabled-Tools)")
        } else if !self.enabled.is_empty() && !tool.is_discovery() && !self.enabled.contains(name) {
            // The discovery tools are not subject to ENABLED_TOOLS: they only reach what it allows.
            format!("the tool {name} is not among the tools this server allows (ENABLED_TOOLS)")
        } else {
            return None;
        };
        Some(Refusal { cause: Cause::Tool, why })
    }

    /// Whether `tool` may be called at all (before arguments).
    pub(crate) fn allows(&self, narrowing: &Narrowing, tool: &ToolDef) -> bool {
        self.refusal(narrowing, tool).is_none()
    }

    /// Whether `tool/list` shows `tool`: allowed, and a built-in tool, a tool named in
    /// `ENABLED_TOOLS`, or an operation in the selected toolsets (the server's and the
    /// request's).
    pub fn lists(&self, narrowing: &Narrowing, tool: &ToolDef) -> bool {
        if !self.allows(narrowing, tool) {
            return false;
        }
        if tool.operation().is_none() {
            return true;
        }
        let by_request = narrowing.toolsets.as_ref().is_none_or(|s| s.includes(tool.toolset, tool.core));
        let by_server =
            if self.enabled.is_empty() { self.toolsets.includes(tool.toolset, tool.core) } else { true };
        by_request && by_server
    }
}

/// Why the policy refuses a call: which rule, and the words a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    cause: Cause,
    why: String,
}

/// The rule that refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// `DISABLED_TOOLS`, `ENABLED_TOOLS`, or the request's `X-MCP-Disabled-Tools`.
    Tool,
    /// `READ_ONLY`, or a request held to reads.
    ReadOnly,
    /// A repository allowlist, the server's or the request's.
    Repos,
    /// A raw route that no operation has (`ALLOW_UNKNOWN_ROUTES` off).
    UnknownRoute,
}

impl Refusal {
    pub fn cause(&self) -> Cause {
        self.cause
    }

    pub fn why(&self) -> &str {
        &self.why
    }

    /// The refusal of the operation a raw call reaches, said of the raw call.
    fn through(self, raw: &str) -> Refusal {
        Refusal { why: format!("{} (reached through {raw})", self.why), ..self }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// A refusal is answered as a `denied` error, in its own words.
impl From<Refusal> for CallError {
    fn from(r: Refusal) -> CallError {
        CallError::local(ErrorKind::Denied, r.why)
    }
}

/// Why a read-only call may not run `op`, if it may not: it writes, or — whatever its
/// method — it hands out a credential (a runner registration token is a GET on Forgejo).
fn writes(op: &Operation) -> Option<&'static str> {
    if op.method != Method::Get {
        Some("would change data")
    } else if credential_ops::issues_credentials(Some(&op.id)) {
        Some("hands out a credential")
    } else {
        None
    }
}

/// Whether `op` counts as a write wherever reads and writes are told apart (read-only mode,
/// the write allowlists): it changes data, or it hands out a credential that can.
pub(crate) fn is_write(op: &Operation) -> bool {
    writes(op).is_some()
}

/// Who made the call read-only: the server's setting wins the credit when both did.
fn read_only_words(p: &Policy) -> &'static str {
    if p.read_only {
        "the server is read-only (READ_ONLY)"
    } else {
        "this request is read-only (X-MCP-Readonly, or a sign-in with scope read)"
    }
}

/// Where a prepared call's route values are: its tool's arguments, or the segments of the
/// raw path that reaches an operation.
enum Route<'a> {
    Args(&'a Map<String, Value>),
    Segments(Vec<&'a str>),
}

impl<'a> Route<'a> {
    /// The operation `call` runs and its route values.
    fn of(call: &'a Prepared) -> Option<(&'a crate::catalog::Operation, Route<'a>)> {
        let args = call.args();
        match call.tool().operation() {
            Some(op) => Some((op, Route::Args(args))),
            None => {
                let op = call.reached()?.operation()?;
                Some((
                    op,
                    Route::Segments(crate::catalog::segments(args.get("path").and_then(Value::as_str)?)),
                ))
            }
        }
    }

    fn values(&self) -> Values<'_> {
        match self {
            Route::Args(args) => Values::Args(args),
            Route::Segments(s) => Values::Segments(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Flavor};
    use serde_json::json;

    fn gitea() -> &'static Catalog {
        crate::catalog::embedded(Flavor::Gitea)
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// Both looks of the policy at a call, as a call meets them, or `Ok` when it may run.
    fn admit(
        p: &Policy,
        n: &Narrowing,
        c: &Catalog,
        tool: &ToolDef,
        args: Map<String, Value>,
    ) -> Result<(), CallError> {
        if let Some(r) = p.tool_refusal(n, tool) {
            return Err(r.into());
        }
        let call = Prepared::new(c, tool, args)?;
        p.judge(n, &call).map_or(Ok(()), |r| Err(r.into()))
    }

    /// The policy's refusal of a whole call, or `None` when it admits the call.
    fn judge(
        p: &Policy,
        n: &Narrowing,
        c: &Catalog,
        tool: &ToolDef,
        args: &Map<String, Value>,
    ) -> Option<String> {
        match admit(p, n, c, tool, args.clone()) {
            Ok(()) => None,
            Err(e) if e.kind() == Some(ErrorKind::Denied) => Some(e.to_string()),
            Err(e) => panic!("not a refusal: {e}"),
        }
    }

    #[test]
    fn read_only_refuses_writes_on_every_path_and_keeps_reads() {
        let c = gitea();
        let p = Policy { read_only: true, ..Policy::default() };
        let none = Narrowing::default();
        assert!(
            p.refusal(&none, c.get("repoDelete").unwrap())
                .map(|r| r.why().to_owned())
                .unwrap()
                .contains("READ_ONLY")
        );
        assert!(p.refusal(&none, c.get("repoGet").unwrap()).map(|r| r.why().to_owned()).is_none());
        let raw = c.get("gitea_api_request").unwrap();
        assert!(judge(&p, &none, c, raw, &args(json!({"method": "DELETE", "path": "/repos/o/r"}))).is_some());
        assert!(judge(&p, &none, c, raw, &args(json!({"method": "GET", "path": "/repos/o/r"}))).is_none());
    }

    #[test]
    fn read_only_refuses_every_credential_issuing_operation_whatever_its_method() {
        let c = crate::catalog::embedded(Flavor::Forgejo);
        let p = Policy { read_only: true, ..Policy::default() };
        let none = Narrowing::default();
        let get = c.get("repoGetRunnerRegistrationToken").unwrap();
        assert_eq!(get.operation().unwrap().method, Method::Get);
        let why = p.refusal(&none, get).map(|r| r.why().to_owned()).unwrap();
        assert!(why.contains("hands out a credential"), "{why}");
        assert!(!p.lists(&none, get));
        let raw = c.get("gitea_api_request").unwrap();
        let path = json!({"method": "GET", "path": "/repos/o/r/actions/runners/registration-token"});
        let why = judge(&p, &none, c, raw, &args(path)).unwrap();
        assert!(why.contains("repoGetRunnerRegistrationToken") && why.contains("credential"), "{why}");
        // The same for a request that made itself read-only.
        let ro = Narrowing { read_only: true, ..Narrowing::default() };
        assert!(Policy::default().refusal(&ro, get).map(|r| r.why().to_owned()).is_some());
        // Every credential-issuing operation of either spec is refused.
        for flavor in [Flavor::Gitea, Flavor::Forgejo] {
            let c = Catalog::build(flavor.embedded_spec(), flavor, None).unwrap();
            for id in credential_ops::CREDENTIAL_ISSUING_OPERATIONS {
                if let Some(t) = c.get(id) {
                    assert!(p.refusal(&none, t).map(|r| r.why().to_owned()).is_some(), "{id}");
                }
            }
        }
    }

    #[test]
    fn a_request_can_add_refusals_but_not_remove_them() {
        let c = gitea();
        let p = Policy { disabled: BTreeSet::from(["repoDelete".to_owned()]), ..Policy::default() };
        let ro = Narrowing { read_only: true, ..Narrowing::default() };
        let why = p.refusal(&ro, c.get("issueCreateIssue").unwrap()).map(|r| r.why().to_owned()).unwrap();
        assert!(why.contains("X-MCP-Readonly"), "{why}");
        // A request that says nothing still meets the server's refusals.
        assert!(
            p.refusal(&Narrowing::default(), c.get("repoDelete").unwrap())
                .map(|r| r.why().to_owned())
                .is_some()
        );
        let off = Narrowing { disabled: BTreeSet::from(["repoGet".to_owned()]), ..Narrowing::default() };
        assert!(p.refusal(&off, c.get("repoGet").unwrap()).map(|r| r.why().to_owned()).is_some());
    }

    #[test]
    fn the_raw_tool_cannot_reach_a_disabled_operation_by_its_route() {
        let c = gitea();
        let p = Policy { disabled: BTreeSet::from(["repoDelete".to_owned()]), ..Policy::default() };
        let raw = c.get("gitea_api_request").unwrap();
        let why = judge(
            &p,
            &Narrowing::default(),
            c,
            raw,
            &args(json!({"method": "DELETE", "path": "/repos/o/r"})),
        )
        .unwrap();
        assert!(why.contains("repoDelete") && why.contains("gitea_api_request"), "{why}");
        assert!(
            judge(&p, &Narrowing::default(), c, raw, &args(json!({"method": "GET", "path": "/repos/o/r"})))
                .is_none()
        );
    }

    #[test]
    fn each_refusal_names_the_rule_that_made_it() {
        let c = gitea();
        let list = Some(Arc::new(RepoList::parse("acme/*").unwrap()));
        let p = Policy {
            disabled: BTreeSet::from(["repoDelete".to_owned()]),
            repos: list,
            forge: ForgeHost::new(None, Vec::new()),
            ..Policy::default()
        };
        let none = Narrowing::default();
        let ro = Narrowing { read_only: true, ..Narrowing::default() };
        let cause = |n: &Narrowing, name: &str, a: Value| {
            let tool = c.get(name).unwrap();
            if let Some(r) = p.tool_refusal(n, tool) {
                return Some(r.cause());
            }
            let call = Prepared::new(c, tool, args(a)).unwrap();
            p.judge(n, &call).map(|r| r.cause())
        };
        assert_eq!(cause(&none, "repoDelete", json!({})), Some(Cause::Tool));
        assert_eq!(cause(&ro, "issueCreateIssue", json!({})), Some(Cause::ReadOnly));
        let raw = |m: &str, path: &str| json!({"method": m, "path": path});
        assert_eq!(
            cause(&ro, "gitea_api_request", raw("POST", "/repos/acme/r/issues")),
            Some(Cause::ReadOnly)
        );
        assert_eq!(cause(&none, "gitea_api_request", raw("DELETE", "/repos/acme/r")), Some(Cause::Tool));
        assert_eq!(cause(&none, "gitea_api_request", raw("GET", "/nope")), Some(Cause::UnknownRoute));
        assert_eq!(cause(&none, "repoGet", json!({"owner": "evil", "repo": "r"})), Some(Cause::Repos));
        assert_eq!(cause(&none, "repoGet", json!({"owner": "acme", "repo": "r"})), None);
        // A refusal is answered as `denied`, in its own words.
        let r = p.tool_refusal(&none, c.get("repoDelete").unwrap()).unwrap();
        let e = CallError::from(r.clone());
        assert_eq!(e.kind(), Some(ErrorKind::Denied));
        assert!(e.to_string().ends_with(r.why()), "{e}");
    }

    #[test]
    fn the_raw_tool_refuses_routes_no_operation_has_unless_allowed() {
        let c = gitea();
        let raw = c.get("gitea_api_request").unwrap();
        let none = Narrowing::default();
        let p = Policy { disabled: BTreeSet::from(["repoDelete".to_owned()]), ..Policy::default() };
        for (method, path) in
            [("DELETE", "/REPOS/o/r"), ("GET", "/nope"), ("POST", "/repos/o/r/undocumented")]
        {
            let why = judge(&p, &none, c, raw, &args(json!({"method": method, "path": path}))).unwrap();
            assert!(why.contains("no operation") && why.contains("ALLOW_UNKNOWN_ROUTES"), "{why}");
            assert!(!why.contains(path), "the path is not echoed: {why}");
        }
        // A malformed path is the raw tool's own argument error, before any route is judged;
        // a listing has no path.
        let malformed = admit(&p, &none, c, raw, args(json!({"method": "GET", "path": "/a%2Fb"})));
        assert_eq!(malformed.unwrap_err().kind(), Some(ErrorKind::InvalidArguments));
        assert!(p.lists(&none, raw));
        let open = Policy { unknown_routes: true, ..p.clone() };
        assert!(judge(&open, &none, c, raw, &args(json!({"method": "GET", "path": "/nope"}))).is_none());
        // A known route is judged as its operation, whatever the setting.
        let del = args(json!({"method": "DELETE", "path": "/repos/o/r"}));
        assert!(judge(&open, &none, c, raw, &del).unwrap().contains("repoDelete"));
    }

    #[test]
    fn toolsets_choose_what_is_listed_and_requests_only_narrow() {
        let c = gitea();
        let p = Policy::default(); // core
        let none = Narrowing::default();
        let listed = |n: &Narrowing, name: &str| p.lists(n, c.get(name).unwrap());
        assert!(listed(&none, "repoMergePullRequest"));
        assert!(!listed(&none, "adminCreateUser"));
        assert!(listed(&none, "gitea_search_operations"));
        // Not listed is not refused.
        assert!(p.allows(&none, c.get("adminCreateUser").unwrap()));
        // A request naming a toolset the server does not list gains nothing.
        let admin = Narrowing { toolsets: Some(Selection::parse("admin").unwrap()), ..Narrowing::default() };
        assert!(!listed(&admin, "adminCreateUser"));
        assert!(!listed(&admin, "repoMergePullRequest"));
        let pulls = Narrowing { toolsets: Some(Selection::parse("pulls").unwrap()), ..Narrowing::default() };
        assert!(listed(&pulls, "repoMergePullRequest"));
        assert!(!listed(&pulls, "issueCreateIssue"));
        assert!(listed(&pulls, "gitea_call_operation"));
    }

    #[test]
    fn enabled_tools_replace_the_toolsets_and_bind_the_discovery_tools_targets() {
        let c = gitea();
        let p = Policy { enabled: BTreeSet::from(["adminCreateUser".to_owned()]), ..Policy::default() };
        let none = Narrowing::default();
        assert!(p.lists(&none, c.get("adminCreateUser").unwrap()));
        assert!(!p.lists(&none, c.get("repoGet").unwrap()));
        assert!(!p.allows(&none, c.get("repoGet").unwrap()));
        assert!(p.lists(&none, c.get("gitea_call_operation").unwrap()));
        assert!(!p.lists(&none, c.get("gitea_api_request").unwrap()));
    }
}
