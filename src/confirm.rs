//! A person confirms what cannot be undone, before anything of the call is sent.
//!
//! The core says which calls need it and what to ask (`policy::confirm`); this module asks.
//! With `CONFIRM_IRREVERSIBLE=ask` a client that declared elicitation support is asked to
//! show the person one question with one confirmation to give; the call runs only when they
//! accept. The `confirm` argument an agent sends is ignored then: an instruction hidden in
//! forge content could make an agent send it, never make a person accept. A client that
//! cannot ask (and every client under `argument`) must send `confirm` equal to the exact
//! target, which the error of a call without it tells the agent to ask the person for.
//!
//! Before asking, the server reads what goes with the target (a repository's issues, pull
//! requests and releases; a branch's last commit) under the caller's identity and policy,
//! as any read of theirs: best effort, the question is asked without it when it fails.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Map, Value};

use crate::identity::Credential;
use crate::server::Server;
use aegis_core::admission::{self, Admitted};
use aegis_core::error::CallError;
use aegis_core::guard::Redactor;
use aegis_core::policy::Narrowing;
use aegis_core::policy::confirm::{Confirmation, Confirmed, Mode, goes_with};

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
    /// The question goes back to the client as the call's answer (protocol 2026-07-28); the
    /// client calls again with the person's answer.
    Pending,
    /// The answer came with the state of another call (another target, arguments or caller).
    Stale,
    /// The answer came after its question expired (or the shared store that would say
    /// whether it was used was reset since).
    Expired,
    /// The answer was a yes already used: a yes runs its call once.
    Used,
    /// Whether the yes was used before could not be known (the shared store did not answer).
    Unchecked,
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

/// Confirm `c` for a call under `narrowing` as `credential`: how it was confirmed, or the
/// `not_confirmed` error (nothing is sent then). What the person is shown passes the call's
/// `redactor` first: the target is the caller's text, which may hold a pasted secret.
pub(crate) async fn confirm(
    server: &Server,
    narrowing: &Narrowing,
    credential: &Credential,
    asker: &dyn Asker,
    redactor: &Redactor,
    c: &Confirmation,
    given: Option<&str>,
) -> Result<Confirmed, CallError> {
    match server.settings.confirm_irreversible {
        Mode::Off => return Ok(Confirmed::Off),
        Mode::Argument => {
            return c.argument_refusal(given, false).map_or(Ok(Confirmed::Argument), Err);
        }
        Mode::Ask if !asker.can_ask() => {
            return c.argument_refusal(given, true).map_or(Ok(Confirmed::Argument), Err);
        }
        Mode::Ask => {}
    }
    let question = if asker.needs_question() {
        let with = look(server, narrowing, credential, c).await;
        redactor.redact_str(&c.question(with.as_deref()))
    } else {
        String::new()
    };
    // The target names the form's box; the state's binding covers the exact arguments anyway.
    let target = redactor.redact_str(&c.target);
    let answer = tokio::time::timeout(server.settings.confirm_timeout, asker.ask(&question, &target))
        .await
        .unwrap_or(Answer::NoAnswer);
    tracing::debug!(operation = %c.operation, ?answer, "asked the person to confirm");
    match answer {
        Answer::Accepted => Ok(Confirmed::Asked),
        Answer::Declined => Err(c.refused("the person declined")),
        Answer::Cancelled => Err(c.refused("the person cancelled the question")),
        Answer::NoAnswer => Err(c.refused(&format!(
            "the person did not answer within {}s (CONFIRM_TIMEOUT)",
            server.settings.confirm_timeout.as_secs_f64()
        ))),
        Answer::Failed => Err(c.refused("the client could not ask the person")),
        Answer::Pending => Err(c.refused("the person is being asked; the client calls again with their answer")),
        Answer::Stale => Err(c.refused(
            "the confirmation sent was given for another call (another target, other arguments or another caller)",
        )),
        Answer::Expired => Err(c.refused("the confirmation sent has expired; the person must be asked again")),
        Answer::Used => Err(c.refused(
            "the confirmation sent was used already (a person's yes runs its call once); to run the call again the person must be asked again",
        )),
        Answer::Unchecked => Err(c.not_yet(
            "whether the confirmation sent was used before could not be checked (the shared store, MCP_STATE_URL, did not answer); the person's yes was not used up: send the same answer again in a moment",
        )),
    }
}

/// What goes with the target, read as the caller through the raw tool's route (under the
/// request's policy, as any read of theirs); `None` when there is nothing to read or the read
/// fails.
async fn look(
    server: &Server,
    narrowing: &Narrowing,
    credential: &Credential,
    c: &Confirmation,
) -> Option<String> {
    let look = c.look.as_deref()?;
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
    let Ok(Admitted::Send(call, _)) =
        admission::admit(server.discovery(narrowing), aegis_core::catalog::raw_tool::NAME, args).outcome
    else {
        return None;
    };
    let plan = call.plan(server.settings.max_binary_bytes).ok()?;
    let got = server.forge.send(&plan, credential).await.ok()?;
    if got.status != 200 {
        return None;
    }
    let total = got.header("x-total-count").and_then(|t| t.trim().parse().ok());
    // Numbers and a commit id are read; nothing else of the answer reaches the question
    // (the body was bounded by the forge client).
    let value: Value = serde_json::from_slice(&got.body).ok()?;
    goes_with(c.with, &value, total)
}
