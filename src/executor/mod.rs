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
    forge_error_of(None, got, kind, redactor)
}

/// `forge_error` of the forge `forge` of several, which its words name.
pub(crate) fn forge_error_of(
    forge: Option<&str>,
    got: &Received,
    kind: ErrorKind,
    redactor: &Redactor,
) -> CallError {
    let status = got.status;
    let message = status::forge_message(&got.body);
    let retry_after = status::retry_after(got.header("retry-after"), std::time::SystemTime::now());
    let hint = match retry_after {
        Some(s) => format!(" (the forge asks to wait {s} s before retrying)"),
        None => status::hint(status, kind, &message).to_owned(),
    };
    let said = redactor.sanitize_message(&message);
    let said = if said.is_empty() { "(no message)".to_owned() } else { said };
    let who = forge.map_or_else(|| "the forge".to_owned(), |f| format!("the forge {f}"));
    CallError::from_forge(status, kind, format!("{who} answered {status}: {said}{hint}"))
        .with_retry_after(retry_after)
}

/// The body of a successful GET of operation `op` with `args`, made by the server for itself
/// (a look-up of what a call needs: who may write to a repository, how far it reaches): the
/// arguments validated as any call's, sent as `credential`; not audited, and not judged by the
/// tool-name rules, which are about what an agent may call. Why not, in words.
pub(crate) async fn own_read(
    forge: &Forge,
    catalog: &aegis_core::catalog::Catalog,
    credential: &crate::identity::Credential,
    op: &str,
    args: serde_json::Map<String, serde_json::Value>,
) -> Result<Vec<u8>, aegis_core::error::Shown> {
    let tool = catalog.get(op).ok_or_else(|| format!("the spec has no {op}"))?;
    let call = aegis_core::args::Prepared::new(catalog, tool, args).map_err(|e| format!("{op}: {e}"))?;
    let plan = call.plan(0).map_err(|e| format!("{op}: {e}"))?;
    let got = forge.send(&plan, credential).await.map_err(|e| format!("{op}: {e}"))?;
    if got.status != 200 {
        return Err(format!("{op}: the forge answered {}", got.status));
    }
    Ok(got.body)
}
