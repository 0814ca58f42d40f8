//! A person confirms what cannot be undone, before anything of the call is sent.
//!
//! The core says which calls need it and what to ask (`policy::confirm`); this module asks.
//! With `CONFIRM_IRREVERSIBLE=ask` a client that declared elicitation support is asked to
//! show the person one question with one confirmation to give; the call runs only when they
//! accept. The `confirm` argument an agent sends is ignored then: an instruction hidden in
//! forge content could make an agent send it, never make a person accept. A client that
//! cannot ask (and every client under `argument`) must send `confirm` equal to the exact
//! target, which the error of a call without it tells the agent to ask the person for. A
//! client that declared it can ask but answers the question with "Method not found" is one
//! that cannot: otherwise no call that needs a yes could ever run there.
//!
//! Before asking, the server reads what goes with the target (a repository's issues, pull
//! requests and releases; a branch's last commit) under the caller's identity and policy,
//! as any read of theirs: best effort, the question is asked without it when it fails.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Map, Value};

use crate::identity::Credential;
use crate::server::At;
use aegis_core::error::CallError;
use aegis_core::guard::Redactor;
use aegis_core::policy::Narrowing;
use aegis_core::policy::confirm::{ByArgument, Clause, Confirmation, Confirmed, Lost, Mode, lost};

/// What the person did with a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Accepted,
    Declined,
    Cancelled,
    /// No answer within `CONFIRM_TIMEOUT`.
    NoAnswer,
    /// The client could not be asked after all (the request failed, the session ended).
    Failed,
    /// The client declared it can ask but answered the question with "Method not found"
    /// (clients with no way to show a form do): it is a client that cannot ask.
    Unsupported,
    /// The question goes back to the client as the call's answer (protocol 2026-07-28); the
    /// client calls again with the person's answer.
    Pending,
    /// The answer came with the state of another call (another target, arguments or caller).
    Stale,
    /// The answer came after its question expired.
    Expired,
    /// The answer was a yes already used: a yes runs its call once.
    Used,
    /// Whether the yes was used before could not be known (the shared store did not answer).
    Unchecked,
    /// The shared store lost its memory after the question was asked.
    StoreReset,
}

/// How the transport of a call reaches its person.
pub trait Asker: Send + Sync {
    /// Whether the client declared it can ask its person (form elicitation) on this request.
    fn can_ask(&self) -> bool;
    /// Whether asking needs the question's words: not when the request already carries the
    /// person's answer (a 2026-07-28 retry), which is judged against its state alone.
    fn needs_question(&self) -> bool {
        true
    }
    /// Whether the person is being asked right now, the question going back as the call's
    /// answer (protocol 2026-07-28): the call is not refused, it waits for its next round.
    fn is_asking(&self) -> bool {
        false
    }
    /// Ask `question`, to be confirmed for `target`; what the person did.
    fn ask<'a>(
        &'a self,
        question: &'a str,
        target: &'a str,
    ) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;
}

/// A caller nobody can be asked through: the `call` command, the benchmarks.
pub struct Nobody;

impl Asker for Nobody {
    fn can_ask(&self) -> bool {
        false
    }
    fn ask<'a>(&'a self, _: &'a str, _: &'a str) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        Box::pin(async { Answer::Failed })
    }
}

/// Confirm `c` for a call under `narrowing` as `credential`: how it was confirmed, `None`
/// when the look-ups showed that nothing is lost after all, or the `not_confirmed` error
/// (nothing is sent then). What the person is shown passes the call's `redactor` first: the
/// target is the caller's text, which may hold a pasted secret.
pub(crate) async fn confirm(
    at: At<'_>,
    narrowing: &Narrowing,
    credential: &Credential,
    asker: &dyn Asker,
    redactor: &Redactor,
    c: &Confirmation,
    given: Option<&str>,
) -> Result<Option<Confirmed>, CallError> {
    // A write that widens what the session read is asked even when what cannot be undone is
    // not (`call::confirm` left only its clause then).
    let mode = match at.server.settings.confirm_irreversible {
        Mode::Off if c.clauses.iter().any(|c| c.flow) => Mode::Ask,
        mode => mode,
    };
    if mode == Mode::Off {
        return Ok(Some(Confirmed::Off));
    }
    let asking = mode == Mode::Ask && asker.can_ask();
    // A retry that carries the person's answer is judged against its state alone.
    let retry = asking && !asker.needs_question();
    // What goes with the target: read for the question (the person's, or the one the error
    // tells the agent to ask), and, for a part asked only when something is lost, to know
    // whether it is. A call that carries the exact target reads only for the latter.
    let mut c = c.clone();
    let questioned = if asking { !retry } else { given != Some(c.target.as_str()) };
    if questioned || (!retry && c.may_lose_nothing()) {
        let mut kept = Vec::with_capacity(c.clauses.len());
        for mut clause in std::mem::take(&mut c.clauses) {
            match look(at, narrowing, credential, &clause).await {
                Lost::Nothing if clause.only_if_lost => continue,
                Lost::Some(words) => clause.found = words,
                Lost::Nothing | Lost::Unknown => {}
            }
            kept.push(clause);
        }
        if kept.is_empty() {
            tracing::debug!(operation = %c.operation, "nothing the call would destroy exists: not asked");
            return Ok(None);
        }
        c.clauses = kept;
    }
    if !asking {
        let why = if mode == Mode::Ask { ByArgument::Undeclared } else { ByArgument::Setting };
        return c.argument_refusal(given, why).map_or(Ok(Some(Confirmed::Argument)), Err);
    }
    let question = if retry { String::new() } else { redactor.redact_str(&c.question()) };
    // The target names the form's box; the state's binding covers the exact arguments anyway.
    let target = redactor.redact_str(&c.target);
    let answer = tokio::time::timeout(at.server.settings.confirm_timeout, asker.ask(&question, &target))
        .await
        .unwrap_or(Answer::NoAnswer);
    tracing::debug!(operation = %c.operation, ?answer, "asked the person to confirm");
    match answer {
        Answer::Accepted => Ok(Some(Confirmed::Asked)),
        Answer::Declined => Err(c.refused("the person declined")),
        Answer::Cancelled => Err(c.refused("the person cancelled the question")),
        Answer::NoAnswer => Err(c.refused(&format!(
            "the person did not answer within {}s (CONFIRM_TIMEOUT)",
            at.server.settings.confirm_timeout.as_secs_f64()
        ))),
        Answer::Failed => Err(c.refused("the client could not ask the person")),
        // A client that cannot ask after all is one that never could: its `confirm` counts.
        Answer::Unsupported => c
            .argument_refusal(given, ByArgument::Unanswerable)
            .map_or(Ok(Some(Confirmed::Argument)), Err),
        Answer::Pending => Err(c.refused("the person is being asked; the client calls again with their answer")),
        Answer::Stale => Err(c.refused(
            "the confirmation sent was given for another call (another target, other arguments or another caller)",
        )),
        Answer::Expired => Err(c.refused("the confirmation sent has expired; the person must be asked again")),
        Answer::Used => Err(c.refused(
            "the confirmation sent was used already (a person's yes runs its call once); to run the call again the person must be asked again",
        )),
        Answer::StoreReset => Err(c.refused(
            "the shared store (MCP_STATE_URL) was reset after the question was asked, so whether this yes was used cannot be known; the person must be asked again",
        )),
        Answer::Unchecked => Err(c.not_yet(
            "whether the confirmation sent was used before could not be checked (the shared store, MCP_STATE_URL, did not answer); the person's yes was not used up: send the same answer again in a moment",
        )),
    }
}

/// What a clause loses, read as the caller through the raw tool's route (under the
/// request's policy, as any read of theirs); `Unknown` when there is nothing to read or the
/// read fails.
async fn look(at: At<'_>, narrowing: &Narrowing, credential: &Credential, c: &Clause) -> Lost {
    let Some(look) = c.look.as_deref() else { return Lost::Unknown };
    let (path, query) = look.split_once('?').unwrap_or((look, ""));
    let query: Map<String, Value> = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), Value::from(v)))
        .collect();
    let mut args = Map::new();
    args.insert("method".into(), "GET".into());
    args.insert("path".into(), path.into());
    if !query.is_empty() {
        args.insert("query".into(), Value::Object(query));
    }
    // The server's own read, not the agent's: the tool-name rules (`ENABLED_TOOLS`, a
    // disabled raw tool) do not stop it, the policy's judgement of the read does (the
    // repository fence, a disabled read operation).
    let Some(raw) = at.profile.catalog.get(aegis_core::catalog::raw_tool::NAME) else { return Lost::Unknown };
    let Ok(call) = aegis_core::args::Prepared::new(&at.profile.catalog, raw, args) else {
        return Lost::Unknown;
    };
    if let Some(refusal) = at.profile.policy.judge(narrowing, &call) {
        tracing::debug!(why = %refusal.why(), "the look-up of what a call destroys is not made");
        return Lost::Unknown;
    }
    let Ok(plan) = call.plan(at.server.settings.max_binary_bytes) else { return Lost::Unknown };
    let Ok(got) = at.profile.forge.send(&plan, credential).await else { return Lost::Unknown };
    if got.status != 200 {
        return Lost::Unknown;
    }
    let total = got.header("x-total-count").and_then(|t| t.trim().parse().ok());
    // Numbers, flags, names and commit ids are read; nothing else of the answer reaches the
    // question (the body was bounded by the forge client).
    let Ok(value) = serde_json::from_slice::<Value>(&got.body) else { return Lost::Unknown };
    lost(c.with, &value, total, c.subject.as_deref())
}
