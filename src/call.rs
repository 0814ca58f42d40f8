//! One tool call, end to end. `run_asking` is the conductor: it calls the stages that
//! ARCHITECTURE.md lists, in that order, each a function (here, or in its module: `identify`,
//! `limits`, `confirm`, the core's stages), and data moves one way. Read it first to follow
//! a call; `run_reads` runs the same stages for a resource's reads, and `recorded` wraps
//! either in its audit line and metrics.

use serde_json::{Map, Value, json};

use crate::audit::{Origin, Trace};
use crate::confirm::{self, Asker, Nobody};
use crate::executor::Received;
use crate::executor::client::{Binary, LARGE_BODY};
use crate::executor::forge_error_of;
use crate::flow;
use crate::identify::{self, identify, sudo};
use crate::identity::{Caller, Credential, Identity, Principal};
use crate::limits::Key;
use crate::reads::Session;
use crate::server::{At, Server};
use aegis_core::admission::{self, Admitted};
use aegis_core::args::sudo::Requested;
use aegis_core::args::{CallPlan, Prepared};
use aegis_core::catalog::ToolDef;
use aegis_core::decode::json::{Elided, Keep};
use aegis_core::decode::{body, pagination, status};
use aegis_core::envelope::{self, Link, RequestInfo, Success};
use aegis_core::error::{CallError, ErrorKind};
use aegis_core::guard::{CallGuard, Guarded, GuardedError, credential_ops, secrets};
use aegis_core::policy::Narrowing;
use aegis_core::policy::confirm::{Confirmed, Mode};
use aegis_core::policy::flow::{FlowGuard, Widening};
use aegis_core::policy::repos::{self, Filter};
use aegis_core::shape::{self, Ask, Shape};

/// Run tool `name` with `args` as `caller`, under the server's policy as `narrowing`
/// narrows it for this request: the text of a success result, or why not. Both can only
/// be built by the guard, so every outcome has passed it. `trace` keeps what the audit
/// line needs (who, which operation, what was sent, the forge's status) as far as the call got.
pub async fn run(
    server: &Server,
    caller: Caller,
    narrowing: &Narrowing,
    name: &str,
    args: Option<Map<String, Value>>,
    trace: &mut Trace,
) -> Result<Guarded, GuardedError> {
    let around = Around { asker: &Nobody, session: Session::Process };
    run_asking(server, caller, narrowing, name, args, &around, trace).await
}

/// Who a call reaches besides the forge: the person who confirms (`asker`), and the session
/// whose reads bound where it may write without them.
pub(crate) struct Around<'a> {
    pub(crate) asker: &'a dyn Asker,
    pub(crate) session: Session,
}

/// `run`, where a call that cannot be undone, or that widens what its session read, is
/// confirmed by the person `around` reaches (an MCP client with elicitation), or by its
/// `confirm` argument.
///
/// The conductor: the stages ARCHITECTURE.md lists, in its order, each a function below. A
/// stage takes what earlier ones made and returns what later ones need, or an error that
/// leaves through the guard of the moment; a new stage is one more line here and one more
/// function.
pub(crate) async fn run_asking(
    server: &Server,
    caller: Caller,
    narrowing: &Narrowing,
    name: &str,
    args: Option<Map<String, Value>>,
    around: &Around<'_>,
    trace: &mut Trace,
) -> Result<Guarded, GuardedError> {
    // Every outcome leaves through a guard. Until the call is admitted, one that knows the
    // caller's token (a client may paste it anywhere); then the call's own.
    let secrets = caller.secrets();
    let early = || server.guard.for_call(secrets.clone());
    // 1. route
    let (at, args) = route(server, &caller, name, args, trace).await.map_err(|e| early().error(e))?;
    // 2. admit
    let (call, ask, asked_sudo) = match admit(at, narrowing, name, args, trace) {
        Ok((Admitted::Send(call, ask), sudo)) => (call, ask, sudo),
        Ok((Admitted::Answer(value), _)) => return early().answer(value),
        Err(e) => return Err(early().error(e)),
    };
    // 3. identify
    let (key, global) = (limit_key(at, &caller), matches!(caller, Caller::Global));
    let (credential, identity) = identify(at, caller).await.map_err(|e| early().error(e))?;
    trace.identity = Some(identity.clone());
    // 4. limit: a refusal is this server's own words (which limit, when to retry), guarded
    //    with the configured secrets: refusing costs a client's neighbours as little as possible.
    let _running = server.limits.admit(key(&identity)).await.map_err(|e| server.guard.error(e))?;
    let guard = server.guard.for_call(secrets);
    // 5. authorize
    let (credential, identity) = authorize(at, narrowing, &call, asked_sudo, credential, identity, trace)
        .await
        .map_err(|e| guard.error(e))?;
    // 6. prepare
    let mut guard = prepare(at, &call, &ask, guard)?;
    // 7. flow
    let session =
        flow::Caller { session: &around.session, global, identity: &identity, credential: &credential };
    let widening = flow(at, &session, &call, trace).await.map_err(|e| guard.error(e))?;
    // 8. confirm
    confirm(at, narrowing, &call, &ask, &credential, around.asker, widening, &guard, trace).await?;
    // 9. send
    let mut fetched = send(at, &call, &credential, &guard, trace).await.map_err(|e| guard.error(e))?;
    // 10. note
    note(at, &session, &call, &fetched).await;
    // 11. filter
    let filtered = filter(at, narrowing, &call, &mut fetched).map_err(|e| guard.error(e))?;
    // 12. trust
    let withheld = trust(at, narrowing, &call, &ask, &credential, &identity, &mut fetched).await;
    // 13. shape
    let (shape, link) = shape(at, &call, &ask, &mut guard, &mut fetched).map_err(|e| guard.error(e))?;
    // 14. guard: hygiene → exact redaction → pattern masking (or block) → bounds → the
    //     envelope's text. A large body's permit lasts until its result has passed the guard.
    let elided = std::mem::take(&mut fetched.elided);
    let _large = fetched.large.take();
    let mut success = fetched.into_success(at, identity);
    (success.filtered, success.shape, success.link, success.withheld) = (filtered, shape, link, withheld);
    guard.success(&mut success, credential_ops::issues_credentials(operation_id(&call)), &elided)
}

/// Stage 1, route: which forge the call goes to (`forges.rs`): the `forge` it names, else the
/// one whose `repositories` match the repository it names, else the default. Every later
/// stage reads that forge's client, credential, catalog and policy only; arguments that hold
/// another forge's credential are refused. The audit line learns who the caller is.
async fn route<'s>(
    server: &'s Server,
    caller: &Caller,
    name: &str,
    args: Option<Map<String, Value>>,
    trace: &mut Trace,
) -> Result<(At<'s>, Map<String, Value>), CallError> {
    let mut args = args.unwrap_or_default();
    let at = server.at(server.forges.route(name, &mut args)?);
    server.forges.foreign_credential(at.profile, caller, &args)?;
    trace.forge = at.profile.name.clone();
    at.note_caller(trace, caller).await;
    Ok((at, args))
}

/// Stage 2, admit: which call, and may it run. Unknown names are a protocol error, refused
/// ones a policy refusal; the arguments are normalised and validated once, and the policy
/// judges what validation left; a discovery tool is answered here. Sudo (only with
/// SUDO_ALLOWED_USERS) is a header, never a parameter: its argument leaves the arguments
/// first (returned beside the admission) and is judged once the caller is known.
fn admit<'s>(
    at: At<'s>,
    narrowing: &Narrowing,
    name: &str,
    mut args: Map<String, Value>,
    trace: &mut Trace,
) -> Result<(Admitted<'s>, Requested), CallError> {
    let sudo = aegis_core::args::sudo::take(&at.profile.catalog, name, &mut args);
    // The discovery tools see every forge: search finds what any has, and says where.
    let forges = at.server.forges.views();
    let view = aegis_core::discovery::Discovery { forges: &forges, ..at.profile.discovery(narrowing) };
    let admission = admission::admit(view, name, args);
    // The audit line names the operation reached, also when the call is refused.
    trace.operation = admission.operation.map(|op| op.id.clone());
    Ok((admission.outcome?, sudo))
}

/// Stage 5, authorize: what depends on who the caller is. Sudo allowed (the credential then
/// carries the `Sudo` header) or refused; a new repository that goes to the caller (a fork,
/// a migration, the caller's own new repository) judged by the repository allowlists; and a
/// URL of the body (a migration's source, a push mirror's remote) that may name this forge
/// by another of its names: under a repository allowlist the names are looked up, and the
/// call judged again with what they resolve to.
async fn authorize(
    at: At<'_>,
    narrowing: &Narrowing,
    call: &Prepared<'_>,
    asked_sudo: Requested,
    credential: Credential,
    identity: Identity,
    trace: &mut Trace,
) -> Result<(Credential, Identity), CallError> {
    let allowed = at.profile.sudo_allowed_users.as_ref();
    let is_admin = async |c: &Credential| identify::is_admin(at, c).await;
    let (credential, identity) = sudo::authorize(allowed, asked_sudo, credential, identity, is_admin).await?;
    trace.identity = Some(identity.clone());
    let login = identity.sudo.as_deref().or(identity.login.as_deref());
    let policy = &at.profile.policy;
    if let Some(refusal) = policy.caller_refusal(narrowing, call, login) {
        return Err(refusal.into());
    }
    let hosts = policy.named_hosts(narrowing, call);
    if !hosts.is_empty() {
        let aliases = crate::server::look_up(&hosts).await.map_err(|host| {
            CallError::local(
                ErrorKind::Denied,
                format!(
                    "under a repository allowlist the host {host} that this call's URL names could not be looked up, so whether it is this forge (whose repositories the list governs) cannot be judged; nothing was sent — retry, or name the repository by this forge's own address"
                ),
            )
        })?;
        if let Some(refusal) = policy.alias_refusal(narrowing, call, &aliases) {
            return Err(refusal.into());
        }
    }
    Ok((credential, identity))
}

/// Stage 6, prepare: the call's guard learns the body's secrets (for the raw tool, those of the
/// operation its route reaches: a raw call to a credential operation is treated like the
/// operation's tool) and whether the result is file bytes (exact content: no hygiene, even
/// when sent as text); fields the result type does not have are refused before anything is sent.
fn prepare(at: At<'_>, call: &Prepared<'_>, ask: &Ask, guard: CallGuard) -> Result<CallGuard, GuardedError> {
    let operation = call.operation();
    let file_bytes = operation.is_some_and(|op| op.response == aegis_core::catalog::ResponseKind::Binary);
    let guard = guard
        .with(secrets::from_body(operation_id(call), call.args().get("body")))
        .for_file_bytes(file_bytes);
    if let Some(fields) = &ask.fields {
        shape::check_asked(at.profile.catalog.definitions(), operation, fields)
            .map_err(|e| guard.error(e))?;
    }
    Ok(guard)
}

/// Stage 7, flow: a write of a session that has read private content, judged by where it
/// goes (`flow.rs`): a widening write is one more clause of the confirmation, or refused
/// (`FLOW_GUARD=refuse`). Nothing is looked up for a session that read nothing private.
async fn flow(
    at: At<'_>,
    session: &flow::Caller<'_>,
    call: &Prepared<'_>,
    trace: &mut Trace,
) -> Result<Option<Widening>, CallError> {
    let Some(w) = flow::judge(at, session, call, trace).await else { return Ok(None) };
    if at.profile.policy.flow == FlowGuard::Refuse {
        at.server.metrics.flow_write("refused");
        return Err(w.refusal());
    }
    at.server.metrics.flow_write("asked");
    Ok(Some(w))
}

/// Stage 8, confirm: what cannot be undone, and a write that widens what the session read, is
/// confirmed by a person (or their `confirm`) before it is sent: one question for both.
#[allow(clippy::too_many_arguments)]
async fn confirm(
    at: At<'_>,
    narrowing: &Narrowing,
    call: &Prepared<'_>,
    ask: &Ask,
    credential: &Credential,
    asker: &dyn Asker,
    widening: Option<Widening>,
    guard: &CallGuard,
    trace: &mut Trace,
) -> Result<(), GuardedError> {
    let destroys = at.profile.policy.confirmation(call);
    let destroys = match at.profile.name() {
        Some(forge) => destroys.map(|c| c.on_forge(forge)),
        None => destroys,
    };
    let c = match (widening, at.server.settings.confirm_irreversible) {
        // What it destroys is not asked (`CONFIRM_IRREVERSIBLE=off`), where it writes is.
        (Some(w), Mode::Off) => {
            trace.confirmed = destroys.map(|_| Confirmed::Off);
            Some(w.joined(None))
        }
        (Some(w), _) => Some(w.joined(destroys)),
        (None, _) => destroys,
    };
    let Some(c) = c else {
        return Ok(());
    };
    let redactor = guard.redactor();
    let how = confirm::confirm(at, narrowing, credential, asker, redactor, &c, ask.confirm.as_deref())
        .await
        .map_err(|e| {
            trace.input_required = asker.is_asking();
            guard.error(e)
        })?;
    trace.confirmed = how;
    Ok(())
}

/// Stage 10, note: what a successful call read of a private repository's content makes that
/// repository a source of its session (`flow.rs`), before anything is filtered out of it.
async fn note(at: At<'_>, session: &flow::Caller<'_>, call: &Prepared<'_>, fetched: &Fetched) {
    if (200..300).contains(&fetched.status) {
        flow::note(at, session, call, &fetched.data).await;
    }
}

/// Stage 9, send: plan, send and decode (`fetch`). Binary content a resource reads again is not
/// held past what a result can take: over MAX_BINARY_BYTES it is only counted, and linked.
async fn send(
    at: At<'_>,
    call: &Prepared<'_>,
    credential: &Credential,
    guard: &CallGuard,
    trace: &mut Trace,
) -> Result<Fetched, CallError> {
    let linkable = envelope::link::uri_of(None, call.tool().name(), call.args()).is_some();
    let binary =
        if linkable { Binary::Measure(at.server.settings.max_resource_bytes) } else { Binary::Refuse };
    fetch(at, call, credential, guard, trace, binary).await
}

/// Stage 11, filter: listings across repositories keep only what the repository allowlists allow
/// (before shaping, reading the forge's own members); what was removed, for the envelope.
fn filter(
    at: At<'_>,
    narrowing: &Narrowing,
    call: &Prepared<'_>,
    fetched: &mut Fetched,
) -> Result<Option<envelope::Filtered>, CallError> {
    let fence = at.profile.policy.fence(narrowing);
    let paging = fetched.pagination.as_mut();
    match repos::filter(&fence, operation_id(call), &mut fetched.data, paging, &mut fetched.elided) {
        Filter::Untouched => Ok(None),
        Filter::Removed(f) => Ok(Some(f)),
        Filter::Withheld(why) => Err(CallError::local(ErrorKind::Denied, why)),
    }
}

/// Stage 12, trust: who wrote each issue, pull request, comment and review of a JSON result
/// (`CONTENT_TRUST`, or the request's `X-MCP-Content-Trust: withhold`). What the forge says
/// of their repositories' authors is asked as the caller (`trust.rs`, cached), and the core
/// adds each item's `author_relation` where the result will show it (the compact shape, or
/// `fields` naming it) and under `withhold` replaces the text of authors who may not write to a
/// public repository; how many were, for the envelope. Before the shape: it reads `user` and
/// `original_author` as the forge wrote them.
async fn trust(
    at: At<'_>,
    narrowing: &Narrowing,
    call: &Prepared<'_>,
    ask: &Ask,
    credential: &Credential,
    identity: &Identity,
    fetched: &mut Fetched,
) -> Option<envelope::Withheld> {
    use aegis_core::shape::trust::{self, ContentTrust, How};
    let operation = call.operation();
    let mode = if narrowing.withhold { ContentTrust::Withhold } else { at.server.settings.content_trust };
    let shown = ask.shape.unwrap_or(at.server.settings.result_shape) == Shape::Compact
        || ask.fields.iter().flatten().any(|f| f == trust::RELATION);
    let how = How { relation: mode != ContentTrust::Off && shown, withhold: mode == ContentTrust::Withhold };
    if !fetched.json || !(how.relation || how.withhold) || !trust::authored(operation) {
        return None;
    }
    let path = fetched.plan.path().to_owned();
    let repos = trust::repositories(operation, &path, &mut fetched.data);
    let who = identity.sudo.as_deref().or(identity.login.as_deref()).unwrap_or_default();
    let p = at.profile;
    let known = p.authors.look_up(&p.forge, &p.catalog, credential, who, repos).await;
    let withheld =
        trust::judge(operation, &path, &mut fetched.data, |r| known.get(r).map(AsRef::as_ref), how);
    envelope::Withheld::of(withheld)
}

/// Stage 13, shape: what the agent needs of the data, and only the fields asked for. Known secrets
/// in base64 file content are found on the forge's whole answer first: `fields` may keep a
/// file's `content` without the `encoding` that says what it is. Binary content too large to
/// inline, which a resource reads again, is left for the client to fetch: `data` says what
/// it is, the link where. The shape the envelope names, and the link.
fn shape(
    at: At<'_>,
    call: &Prepared<'_>,
    ask: &Ask,
    guard: &mut CallGuard,
    fetched: &mut Fetched,
) -> Result<(Option<&'static str>, Option<Link>), CallError> {
    let result_type = call.operation().and_then(|op| op.result.as_ref());
    if fetched.json {
        guard.contents(at.profile.catalog.definitions(), result_type, fetched.status, &mut fetched.data)?;
    }
    let shape = ask.shape.unwrap_or(at.server.settings.result_shape);
    let compact = fetched.json && shape == Shape::Compact;
    fetched.shape(at, result_type, shape, ask.fields.as_deref())?;
    let link = match (fetched.json, fetched.over) {
        (true, _) => None,
        (false, true) => over_link(at, call.tool(), call.args(), &fetched.data),
        (false, false) => link(at, call.tool(), call.args(), &mut fetched.data),
    };
    Ok((compact.then_some(Shape::Compact.as_str()), link))
}

fn operation_id<'c>(call: &Prepared<'c>) -> Option<&'c str> {
    call.operation().map(|op| op.id.as_str())
}

/// The link for binary `data` (`{content_base64, content_type, size}`) over
/// `MAX_INLINE_BINARY_BYTES` that a resource reads: `data` keeps its type and size only.
fn link(at: At<'_>, tool: &ToolDef, args: &Map<String, Value>, data: &mut Value) -> Option<Link> {
    let size = data.get("size")?.as_u64()?;
    data.get("content_base64")?.as_str()?;
    if size <= at.server.settings.max_inline_binary_bytes {
        return None;
    }
    let uri = envelope::link::uri_of(at.profile.name(), tool.name(), args)?;
    let mime_type =
        data.get("content_type").and_then(Value::as_str).unwrap_or("application/octet-stream").to_owned();
    *data = json!({"content_type": mime_type, "size": size});
    Some(Link { uri, mime_type, size })
}

/// The link for binary content over `MAX_BINARY_BYTES` that was counted, not kept (`data`
/// is already `{content_type, size}`).
fn over_link(at: At<'_>, tool: &ToolDef, args: &Map<String, Value>, data: &Value) -> Option<Link> {
    let uri = envelope::link::uri_of(at.profile.name(), tool.name(), args)?;
    let size = data.get("size")?.as_u64()?;
    let mime_type = data.get("content_type")?.as_str()?.to_owned();
    Some(Link { uri, mime_type, size })
}

/// A tool call as every entry point makes it (the MCP handler, the `call` command, the
/// benchmarks): recorded in the audit trail before its result returns (a line that cannot be
/// written fails the call), and counted in the metrics. `call` runs it as its caller,
/// filling in the trace it is given; it is not run when the audit log refuses to start.
pub async fn recorded<F, Fut>(
    server: &Server,
    origin: Origin,
    name: &str,
    arguments: Option<Map<String, Value>>,
    call: F,
) -> Result<Guarded, GuardedError>
where
    F: FnOnce(Option<Map<String, Value>>, Trace) -> Fut,
    Fut: std::future::Future<Output = (Result<Guarded, GuardedError>, Trace)>,
{
    let started = std::time::Instant::now();
    let (mut outcome, mut forge) = (None, None);
    let catalog = server.forges.catalog_of(name);
    let result = match crate::audit::begin(
        server.audit.as_ref(),
        &server.guard,
        catalog,
        origin,
        crate::audit::Subject::Tool(name),
        arguments.as_ref(),
    ) {
        Err(e) => Err(e),
        Ok(pending) => {
            let (result, trace) = call(arguments, pending.trace()).await;
            let result = pending.finish(&trace, result);
            outcome = Some(trace.outcome(&result));
            forge = trace.forge.clone();
            result
        }
    };
    // Labelled by the catalog's own tool, never by the client's text.
    let outcome = outcome.unwrap_or_else(|| crate::metrics::outcome(&result));
    server.metrics.call(catalog.get(name), forge.as_ref(), outcome, started.elapsed());
    result
}

/// Whether the call `name` with `args` would be refused only because the request is held to
/// reads: the HTTP layer answers such a call from a read-only sign-in with 403
/// `insufficient_scope`, so that the client can ask the person for more. The call is admitted
/// as the handler would admit it under what the request's headers narrow (one pass over its
/// arguments), and then it is asked whether it writes. A call refused anyway, or whose
/// arguments are wrong, is left to the handler: more scope would not make it run. Nothing is
/// answered or sent here; the call itself meets the same policy again.
pub(crate) fn refused_only_for_reads(
    server: &Server,
    narrowing: &Narrowing,
    name: &str,
    mut args: Map<String, Value>,
) -> bool {
    let Ok(profile) = server.forges.route(name, &mut args) else { return false };
    aegis_core::args::sudo::take(&profile.catalog, name, &mut args);
    match admission::admit(profile.discovery(narrowing), name, args).outcome {
        Ok(Admitted::Send(call, _)) => profile.policy.needs_writes(&call),
        Ok(Admitted::Answer(_)) | Err(_) => false,
    }
}

/// What one request to the forge brought back, decoded but not yet guarded.
struct Fetched {
    plan: CallPlan,
    status: u16,
    data: Value,
    pagination: Option<pagination::Pagination>,
    elided: Elided,
    /// The body was JSON (only JSON is shaped).
    json: bool,
    /// Binary content too large for a result was counted, not kept: `data` says what it is.
    over: bool,
    /// The permit of a large body (`LARGE_CALLS`), held until the result is built from it.
    large: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Fetched {
    /// The shape stage on JSON data; the parser's cuts that no longer lead anywhere (in
    /// members left out) are forgotten, so the `truncated` note names only what is there.
    fn shape(
        &mut self,
        at: At<'_>,
        result_type: Option<&aegis_core::catalog::results::Typed>,
        shape: Shape,
        fields: Option<&[String]>,
    ) -> Result<(), CallError> {
        if !self.json {
            return Ok(());
        }
        shape::render(at.profile.catalog.definitions(), result_type, shape, fields, &mut self.data)?;
        let data = &self.data;
        self.elided.cuts.retain(|c| data.pointer(&c.pointer).is_some());
        Ok(())
    }

    fn into_success(self, at: At<'_>, identity: Identity) -> Success {
        Success {
            identity,
            forge: at.profile.name().map(str::to_owned),
            request: RequestInfo { method: self.plan.method().as_str(), path: self.plan.path().to_owned() },
            status: self.status,
            pagination: self.pagination,
            untrusted_content: envelope::untrusted_notice(at.profile.catalog.flavor),
            shape: None,
            data: self.data,
            link: None,
            truncated: None,
            hidden_content: None,
            filtered: None,
            withheld: None,
        }
    }
}

/// Plan, send and decode one admitted call, reading binary content over `MAX_BINARY_BYTES`
/// as `binary` says.
async fn fetch(
    at: At<'_>,
    call: &Prepared<'_>,
    credential: &Credential,
    guard: &CallGuard,
    trace: &mut Trace,
    binary: Binary,
) -> Result<Fetched, CallError> {
    // Plan: encoded path, query, body or multipart.
    let server = at.server;
    let plan = call.plan(server.settings.max_binary_bytes)?;
    trace.sent(&plan, guard.redactor());
    // A write is sent only once the audit line that says so is written.
    if plan.method() != aegis_core::catalog::Method::Get {
        if let Some(log) = &server.audit {
            log.before_write(&server.guard, trace)?;
        }
    }
    // Send, within timeouts and size limits.
    let received = at.profile.forge.send_reading(&plan, credential, binary).await?;
    trace.status = Some(received.status);
    // Binary content larger than a result holds, counted and not kept: what it is, for a link.
    if let (Some(size), true) = (received.over, (200..300).contains(&received.status)) {
        let content_type = received.header("content-type").unwrap_or("application/octet-stream").to_owned();
        let data = json!({"content_type": content_type, "size": size});
        let status = received.status;
        return Ok(Fetched {
            plan,
            status,
            data,
            pagination: None,
            elided: Elided::default(),
            json: false,
            over: true,
            large: None,
        });
    }
    // Decode: status → error kind, body → data, headers → pagination.
    let max_binary = match binary {
        Binary::UpTo(max) => (max, "MAX_RESOURCE_BYTES"),
        Binary::Refuse | Binary::Measure(_) => (server.settings.max_binary_bytes, "MAX_BINARY_BYTES"),
    };
    let mut received = received;
    let large = received._large.take();
    let (status, data, pagination, elided, json) =
        decode((server, at.profile.name()), &plan, received, guard, max_binary).await?;
    Ok(Fetched { plan, status, data, pagination, elided, json, over: false, large })
}

/// One read of a combined result (`run_reads`): an operation, its arguments, and the JSON
/// Pointer where its data lands in the combined data (`""`: it is the data).
#[derive(Debug)]
pub(crate) struct Read {
    pub(crate) operation: &'static str,
    pub(crate) args: Map<String, Value>,
    pub(crate) at: &'static str,
}

/// Several reads under one identity and one guard, as one envelope (the resources): its
/// `request` is the first read's, its `data` what `combine` makes of every read's data.
/// Each read meets the policy like a call of its operation would.
pub(crate) async fn run_reads(
    server: &Server,
    caller: Caller,
    (narrowing, session): (&Narrowing, &Session),
    (forge, reads): (Option<String>, Vec<Read>),
    combine: impl FnOnce(Vec<Value>) -> Value,
    trace: &mut Trace,
) -> Result<Guarded, GuardedError> {
    // As in `run`: the read's own guard is built once it is admitted.
    let secrets = caller.secrets();
    let early_guard = || server.guard.for_call(secrets.clone());
    // Every read of a resource goes to the forge its first read routes to.
    // ... or to the forge its URI names.
    let first_read = reads.first().map(|r| (r.operation, r.args.clone()));
    let (first_op, mut first_args) = first_read.expect("a resource reads at least once");
    if let Some(forge) = forge {
        first_args.insert(aegis_core::policy::route::ARGUMENT.into(), forge.into());
    }
    let at = route(server, &caller, first_op, Some(first_args), trace)
        .await
        .map_err(|e| early_guard().error(e))?
        .0;
    // Each read is admitted as a call of its operation would be, before anyone is asked.
    let mut calls = Vec::with_capacity(reads.len());
    for r in reads {
        trace.operation = Some(r.operation.to_owned());
        let admitted = match admission::admit(at.profile.discovery(narrowing), r.operation, r.args).outcome {
            Ok(Admitted::Send(call, _)) => Ok(call),
            Ok(Admitted::Answer(_)) => unreachable!("a resource reads operations, never a discovery tool"),
            Err(CallError::UnknownTool(_)) => Err(CallError::local(
                ErrorKind::NotFound,
                format!("this forge has no {} operation", r.operation),
            )),
            Err(e) => Err(e),
        };
        calls.push((admitted.map_err(|e| early_guard().error(e))?, r.at));
    }
    let (key, global) = (limit_key(at, &caller), matches!(caller, Caller::Global));
    let (credential, identity) = identify(at, caller).await.map_err(|e| early_guard().error(e))?;
    trace.identity = Some(identity.clone());
    let session = flow::Caller { session, global, identity: &identity, credential: &credential };
    // One resource read is one call for the limits, however many reads it makes; a refusal is
    // this server's own words.
    let _admitted = server.limits.admit(key(&identity)).await.map_err(|e| server.guard.error(e))?;
    let mut guard = server.guard.for_call(secrets).for_resource_read();
    let mut first: Option<Fetched> = None;
    let shape = server.settings.result_shape;
    let mut compact = false;
    let mut withheld = 0;
    let mut datas = Vec::with_capacity(calls.len());
    let mut elided = Elided::default();
    // Large bodies' permits last until the result has passed the guard.
    let mut permits = Vec::new();
    for (call, lands) in calls {
        // The audit line names the first read (as the envelope's `request` does), or the one that failed.
        let mut this = Trace::default();
        let binary = Binary::UpTo(server.settings.max_resource_bytes);
        let fetched = fetch(at, &call, &credential, &guard, &mut this, binary).await;
        if first.is_none() || fetched.is_err() {
            (trace.operation, trace.method, trace.path, trace.status) =
                (this.operation, this.method, this.path, this.status);
        }
        let mut got = fetched.map_err(|e| guard.error(e))?;
        note(at, &session, &call, &got).await;
        permits.extend(got.large.take());
        // Each read in the server's shape, typed by its own operation, its base64 content
        // checked before and its authors judged (as a call's).
        let result_type = call.operation().and_then(|op| op.result.as_ref());
        if got.json {
            let defs = at.profile.catalog.definitions();
            guard.contents(defs, result_type, got.status, &mut got.data).map_err(|e| guard.error(e))?;
        }
        let ask = Ask::default();
        let trusted = trust(at, narrowing, &call, &ask, &credential, &identity, &mut got).await;
        withheld += trusted.map_or(0, |w| w.items());
        got.shape(at, result_type, shape, None).map_err(|e| guard.error(e))?;
        compact |= got.json && shape == Shape::Compact;
        datas.push(std::mem::take(&mut got.data));
        elided.merge(std::mem::take(&mut got.elided).under(lands));
        first.get_or_insert(got);
    }
    let first = first.expect("a resource reads at least once");
    let mut success = first.into_success(at, identity);
    success.pagination = None;
    success.data = combine(datas);
    success.shape = compact.then_some(Shape::Compact.as_str());
    success.withheld = envelope::Withheld::of(withheld);
    guard.success(&mut success, false, &elided)
}

/// Whose limits a call of `caller` counts against, once its identity is known: a login is
/// counted per forge (with several, one login on two forges may be two people).
fn limit_key(at: At<'_>, caller: &Caller) -> impl FnOnce(&Identity) -> Key + use<> {
    let global = matches!(caller, Caller::Global);
    let forge = at.profile.name.clone();
    move |identity| Key::Caller(Principal::of_on(forge.as_deref(), global, identity))
}

/// Status, data, pagination, what the parser left out, and whether the body was JSON.
type Decoded = (u16, Value, Option<pagination::Pagination>, Elided, bool);

async fn decode(
    (server, forge): (&Server, Option<&str>),
    plan: &CallPlan,
    mut got: Received,
    guard: &CallGuard,
    (max_binary, setting): (u64, &str),
) -> Result<Decoded, CallError> {
    let st = got.status;
    if let Some(kind) = status::kind_for(st) {
        return Err(forge_error_of(forge, &got, kind, guard.redactor()));
    }
    if (300..400).contains(&st) {
        // Not followed: the target is the result (a signed download URL, "see the public members").
        let location = got.header("location").map(str::to_owned);
        return Ok((st, json!({"location": location}), None, Elided::default(), false));
    }
    let content_type = got.header("content-type").map(str::to_owned);
    let total = got.header("x-total-count").or_else(|| got.header("x-total")).map(str::to_owned);
    let link = got.header("link").map(str::to_owned);
    // A result never shows more items per list, nor more values, than its bounds allow: the
    // parser keeps no more than that (memory stays near the body's size).
    let keep = Keep {
        items: server.settings.max_tool_response_items,
        values: server.settings.max_tool_response_chars,
    };
    let (expect, bytes) = (plan.expect(), std::mem::take(&mut got.body));
    let (decoded, elided) = if bytes.len() > LARGE_BODY {
        // Parsing megabytes takes milliseconds of CPU: not on a thread that serves others.
        let ct = content_type.clone();
        tokio::task::spawn_blocking(move || body::decode(expect, ct.as_deref(), bytes, keep))
            .await
            .expect("decoding does not panic")
    } else {
        body::decode(expect, content_type.as_deref(), bytes, keep)
    };
    if let body::Decoded::Binary { bytes, .. } = &decoded {
        let max = max_binary;
        if bytes.len() as u64 > max {
            return Err(CallError::from_forge(
                st,
                ErrorKind::PayloadTooLarge,
                format!(
                    "the forge returned {} bytes of binary data, over {setting} ({max}); ask for a smaller file or raise {setting}",
                    bytes.len()
                ),
            ));
        }
        guard.binary(st, bytes)?;
    }
    let is_json = matches!(decoded, body::Decoded::Json(_));
    let data = decoded.into_data();
    let paging = plan.page().map(|req| pagination::paginate(req, total.as_deref(), link.as_deref(), &data));
    Ok((st, data, paging, elided, is_json))
}
