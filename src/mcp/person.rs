//! The person behind an MCP client, asked through it for a call that cannot be undone: one
//! question (an elicitation form) with one confirmation to give.
//!
//! Two ways, by the request's protocol version:
//! - before 2026-07-28, a server-to-client `elicitation/create` while the call waits: over
//!   stdio, in a Streamable HTTP session and over legacy SSE. A stateless HTTP request has
//!   no way back to its client then, so it is not asked (its call needs `confirm`).
//! - from 2026-07-28 on (any transport), server-to-client requests are forbidden: the call's
//!   first answer asks for input (`InputRequiredResult`) with a request state sealed with the
//!   server's key, bound to this caller, this tool, its exact arguments and the target, and
//!   expiring after `CONFIRM_TIMEOUT`; the client asks its person and calls again with the
//!   answer and the state. A state of another call, or an expired one, confirms nothing; a
//!   yes runs its call once: the state's id is then recorded as used (`Server::confirmed`,
//!   on every replica with a shared store), and the same yes sent again confirms nothing.
//!
//! A client is asked only when it declared form elicitation (for the request, or at its
//! handshake).

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, ErrorCode, InputRequest, InputRequests, InputRequiredResult, ProtocolVersion,
};
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::asked::Asked;
use crate::confirm::{Answer, Asker};
use crate::oauth::seal::{ConfirmationState, Kind, Sealer};
use crate::oauth::used::{NotFirst, UsedOnce};

/// The one member of the form: the person's yes.
const CONFIRM_FIELD: &str = "confirm";
/// The key of the question among a round's input requests.
const INPUT_KEY: &str = "confirm";

/// The client of one request, as far as it can reach its person.
pub(crate) struct Person<'s> {
    way: Way<'s>,
    declared: bool,
    timeout: Duration,
}

enum Way<'s> {
    /// `elicitation/create` to the client while the call waits.
    Request(Peer<RoleServer>),
    /// The multi-round-trip answer of protocol 2026-07-28.
    Rounds(Box<Rounds<'s>>),
    /// Nothing reaches the client before the answer (stateless HTTP before 2026-07-28).
    Unreachable,
}

struct Rounds<'s> {
    sealer: &'s Sealer,
    /// The states whose yes was used.
    used: &'s UsedOnce,
    /// This call of this caller, hashed: the tool, its arguments and the credentials it came with.
    call: [u8; 32],
    /// The answer and state the client sent back, when this is a retry.
    answer: Option<Value>,
    state: Option<String>,
    /// The question to send back instead of a result, once asked.
    pending: Mutex<Option<InputRequiredResult>>,
    /// How long the question stays answerable.
    lifetime: Duration,
}

impl<'s> Person<'s> {
    /// The person behind `asked`'s client for `request`; `stateless`: the request stands
    /// alone (HTTP without sessions); `may_ask`: the tool may need a confirmation — for any
    /// other call nothing is looked at or hashed.
    pub(crate) fn of(
        asked: &Asked<'_>,
        request: &CallToolRequestParams,
        stateless: bool,
        may_ask: bool,
        (sealer, used): (&'s Sealer, &'s UsedOnce),
        timeout: Duration,
    ) -> Person<'s> {
        if !may_ask {
            return Person { way: Way::Unreachable, declared: false, timeout };
        }
        let declared = asked
            .client
            .capabilities
            .as_ref()
            .and_then(|c| c.elicitation.as_ref())
            // Neither mode named: form, as the protocol had it before modes.
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        let rounds = asked.client.protocol.as_ref().is_some_and(|v| *v >= ProtocolVersion::V_2026_07_28);
        let way = if rounds {
            Way::Rounds(Box::new(Rounds {
                sealer,
                used,
                call: call_hash(asked.parts, request),
                answer: request.input_responses.as_ref().and_then(|r| r.get(INPUT_KEY)).cloned(),
                state: request.request_state.clone(),
                pending: Mutex::new(None),
                lifetime: timeout,
            }))
        } else {
            match (&asked.peer, stateless) {
                (Some(peer), false) => Way::Request(peer.clone()),
                _ => Way::Unreachable,
            }
        };
        Person { way, declared, timeout }
    }

    /// The input-required answer to send instead of the call's result, when the person is
    /// being asked over rounds.
    pub(crate) fn pending(&self) -> Option<InputRequiredResult> {
        match &self.way {
            Way::Rounds(r) => r.pending.lock().unwrap_or_else(|e| e.into_inner()).take(),
            _ => None,
        }
    }
}

/// The tool, its exact arguments and the request's credentials (the `Authorization` header
/// over HTTP, and each forge's own), hashed.
fn call_hash(parts: Option<&http::request::Parts>, request: &CallToolRequestParams) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(request.name.as_bytes());
    h.update([0]);
    // Straight into the hash: an upload's base64 is not copied.
    let _ = serde_json::to_writer(&mut h, &request.arguments);
    h.update([0]);
    if let Some(parts) = parts {
        for v in parts.headers.get_all(http::header::AUTHORIZATION) {
            h.update(v.as_bytes());
            h.update([0]);
        }
        // Each forge's credential too (several forges): a yes binds every identity of the call.
        let mut forges: Vec<(&str, &[u8])> = parts
            .headers
            .iter()
            .filter(|(n, _)| n.as_str().starts_with("x-mcp-forge-authorization-"))
            .map(|(n, v)| (n.as_str(), v.as_bytes()))
            .collect();
        forges.sort();
        for (name, value) in forges {
            h.update(name.as_bytes());
            h.update([0]);
            h.update(value);
            h.update([0]);
        }
    }
    h.finalize().into()
}

/// The binding of a state: the call and the target, hashed.
fn binding(call: &[u8; 32], target: &str) -> String {
    let mut h = Sha256::new();
    h.update(call);
    h.update(target.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The form: the question, and one box to check.
fn form(question: &str, target: &str) -> ElicitRequestParams {
    let schema = ElicitationSchema::builder()
        .title("This cannot be undone")
        .required_bool_with(CONFIRM_FIELD, |b| {
            b.title(format!("Yes, go ahead with {target}")).description(
                "Check to let the call run; leave unchecked, decline or cancel to stop it (nothing is sent).",
            )
        })
        .build_unchecked();
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question.to_owned(),
        requested_schema: schema,
    }
}

/// What the person did, from the client's answer: accepted only with the box checked (a form
/// sent back empty is no yes).
fn answer_of(r: &ElicitResult) -> Answer {
    match r.action {
        ElicitationAction::Accept => {
            let yes = r.content.as_ref().and_then(|c| c.get(CONFIRM_FIELD)).and_then(Value::as_bool);
            if yes == Some(true) { Answer::Accepted } else { Answer::Declined }
        }
        ElicitationAction::Decline => Answer::Declined,
        ElicitationAction::Cancel => Answer::Cancelled,
        // An action of a later protocol this server does not know is no yes.
        _ => Answer::Declined,
    }
}

impl Asker for Person<'_> {
    fn can_ask(&self) -> bool {
        self.declared && !matches!(self.way, Way::Unreachable)
    }

    fn needs_question(&self) -> bool {
        !matches!(&self.way, Way::Rounds(r) if r.state.is_some() && r.answer.is_some())
    }

    fn is_asking(&self) -> bool {
        matches!(&self.way, Way::Rounds(r) if r.pending.lock().unwrap_or_else(|e| e.into_inner()).is_some())
    }

    fn ask<'a>(
        &'a self,
        question: &'a str,
        target: &'a str,
    ) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        Box::pin(async move {
            match &self.way {
                Way::Unreachable => Answer::Failed,
                Way::Request(peer) => match peer
                    .create_elicitation_with_timeout(form(question, target), Some(self.timeout))
                    .await
                {
                    Ok(r) => answer_of(&r),
                    Err(ServiceError::Timeout { .. }) => Answer::NoAnswer,
                    Err(ServiceError::McpError(e)) if e.code == ErrorCode::METHOD_NOT_FOUND => {
                        Answer::Unsupported
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "the elicitation failed");
                        Answer::Failed
                    }
                },
                Way::Rounds(r) => r.round(question, target).await,
            }
        })
    }
}

impl Rounds<'_> {
    /// A retry's answer, judged against its state; or, on the first round, the question.
    async fn round(&self, question: &str, target: &str) -> Answer {
        let bound = binding(&self.call, target);
        let lifetime = self.lifetime.as_secs().max(1);
        if let (Some(state), Some(answer)) = (&self.state, &self.answer) {
            let Ok(opened) = self.sealer.open::<ConfirmationState>(Kind::Confirmation, state) else {
                return Answer::Stale;
            };
            if opened.binding != bound {
                return Answer::Stale;
            }
            let now = now();
            if opened.expires <= now {
                return Answer::Expired;
            }
            let answer = match serde_json::from_value::<ElicitResult>(answer.clone()) {
                Ok(r) => answer_of(&r),
                Err(_) => Answer::Declined,
            };
            if answer != Answer::Accepted {
                return answer;
            }
            // A yes runs its call once: used now, whatever becomes of the call.
            let (once, generation) = ((opened.expires, lifetime), opened.generation);
            return match self.used.take("confirmation", &opened.id, once, generation, now).await {
                Ok(first) => {
                    first.settle();
                    Answer::Accepted
                }
                Err(NotFirst::Used) => Answer::Used,
                Err(NotFirst::Reset) => Answer::StoreReset,
                Err(NotFirst::Unavailable) => Answer::Unchecked,
            };
        }
        let (id, generation) = (self.sealer.random_text(16), self.used.fresh_generation().await);
        let expires = now() + lifetime;
        let state = self
            .sealer
            .seal(Kind::Confirmation, &ConfirmationState { binding: bound, expires, id, generation });
        let mut requests = InputRequests::new();
        requests.insert(
            INPUT_KEY.to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(form(question, target))),
        );
        *self.pending.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(InputRequiredResult::new(Some(requests), Some(state)));
        Answer::Pending
    }
}
