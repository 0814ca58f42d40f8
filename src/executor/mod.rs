//! Sending: the one HTTP client, and which forge this is.

pub(crate) mod client;
pub(crate) mod flavor;
pub(crate) mod oauth;

pub(crate) use client::{Forge, Received};

use aegis_core::decode::status;
use aegis_core::error::{CallError, ErrorKind};
use aegis_core::guard::Redactor;

/// An error the forge answered with: its message, sanitized and truncated, plus a hint —
/// the wait it asked for with `Retry-After` (also passed on as `retry_after_seconds`), else
/// the hint of its kind or words.
pub(crate) fn forge_error(got: &Received, kind: ErrorKind, redactor: &Redactor) -> CallError {
    let status = got.status;
    let message = status::forge_message(&got.body);
    let retry_after = status::retry_after(got.header("retry-after"), std::time::SystemTime::now());
    let hint = match retry_after {
        Some(s) => format!(" (the forge asks to wait {s} s before retrying)"),
        None => status::hint(status, kind, &message).to_owned(),
    };
    let said = redactor.sanitize_message(&message);
    let said = if said.is_empty() { "(no message)".to_owned() } else { said };
    CallError::from_forge(status, kind, format!("the forge answered {status}: {said}{hint}"))
        .with_retry_after(retry_after)
}
