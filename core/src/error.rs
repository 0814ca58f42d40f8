//! `CallError`: every way a tool call can fail, as a value with a kind.
//!
//! Each stage has its own small failure cases; they all end up here so that one place
//! decides how a failure reaches the client: an MCP tool result with `isError: true`
//! (almost everything) or a JSON-RPC error (only an unknown tool name). The kinds map
//! one-to-one to the README's list ("Results"). Messages say what to do next and never contain
//! a secret: they are built from our own words plus forge text that went through the guard.
//!
//! A smaller failure that no caller tells apart is only text to show (`Shown`); one that a
//! caller acts on by what it was has a type: `CallError`, or an enum of its own.

use std::fmt;

/// The error of a function whose failure is only ever shown — logged, or put into a message,
/// a page or a setting's error — and never inspected: every caller does the same whatever
/// went wrong, so the text is all there is to it. A failure a caller acts on by what it was
/// (matches on it, turns it into a kind, a status or an exit code by what happened, retries
/// it) is a type instead: `CallError` in a call, else an enum deriving `thiserror::Error`.
/// The tidy rule `no_public_function_fails_with_a_bare_string` refuses `String` as the error
/// of a public function, so each one says which of the two it is.
pub type Shown = String;

/// The `kind` of an error result, exactly as the README names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Conflict,
    PayloadTooLarge,
    ValidationFailed,
    Locked,
    RateLimited,
    UpstreamError,
    UnexpectedStatus,
    InvalidArguments,
    SecretBlocked,
    Timeout,
    ConnectionFailed,
    IdentityFailed,
    Denied,
    /// The audit log (`AUDIT_LOG`) could not be written.
    AuditFailed,
    /// An irreversible call that a person did not confirm (declined, cancelled, did not
    /// answer in time, or no `confirm` with the exact target): nothing was sent.
    NotConfirmed,
    /// A write that would carry what the session read of a private repository where more
    /// people see it, refused without asking (`FLOW_GUARD=refuse`): nothing was sent.
    PrivateFlow,
}

impl ErrorKind {
    /// Every kind (the README lists them all: a test says so).
    #[cfg(test)]
    pub(crate) const ALL: [ErrorKind; 21] = [
        ErrorKind::BadRequest,
        ErrorKind::Unauthorized,
        ErrorKind::Forbidden,
        ErrorKind::NotFound,
        ErrorKind::MethodNotAllowed,
        ErrorKind::Conflict,
        ErrorKind::PayloadTooLarge,
        ErrorKind::ValidationFailed,
        ErrorKind::Locked,
        ErrorKind::RateLimited,
        ErrorKind::UpstreamError,
        ErrorKind::UnexpectedStatus,
        ErrorKind::InvalidArguments,
        ErrorKind::SecretBlocked,
        ErrorKind::Timeout,
        ErrorKind::ConnectionFailed,
        ErrorKind::IdentityFailed,
        ErrorKind::Denied,
        ErrorKind::AuditFailed,
        ErrorKind::NotConfirmed,
        ErrorKind::PrivateFlow,
    ];

    /// The wire name of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::NotFound => "not_found",
            ErrorKind::MethodNotAllowed => "method_not_allowed",
            ErrorKind::Conflict => "conflict",
            ErrorKind::PayloadTooLarge => "payload_too_large",
            ErrorKind::ValidationFailed => "validation_failed",
            ErrorKind::Locked => "locked",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::UpstreamError => "upstream_error",
            ErrorKind::UnexpectedStatus => "unexpected_status",
            ErrorKind::InvalidArguments => "invalid_arguments",
            ErrorKind::SecretBlocked => "secret_blocked",
            ErrorKind::Timeout => "timeout",
            ErrorKind::ConnectionFailed => "connection_failed",
            ErrorKind::IdentityFailed => "identity_failed",
            ErrorKind::Denied => "denied",
            ErrorKind::AuditFailed => "audit_failed",
            ErrorKind::NotConfirmed => "not_confirmed",
            ErrorKind::PrivateFlow => "private_flow",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed call. `UnknownTool` is the only variant that becomes a JSON-RPC error
/// (`-32602`); every other one becomes a tool result with `isError: true`.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The client named a tool that this server does not offer.
    UnknownTool(String),
    /// A failure the model should see as an error result.
    Result(ToolFailure),
}

/// The body of an error result:
/// `{"error": {"status", "kind", "message"[, "path"][, "retry_after_seconds"]}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFailure {
    /// The forge's HTTP status, or `None` when the forge was not reached.
    pub status: Option<u16>,
    pub kind: ErrorKind,
    pub message: String,
    /// For `invalid_arguments`: a JSON Pointer into the arguments.
    pub path: Option<String>,
    /// Seconds to wait before trying again: a limit of this server, or the forge's own
    /// `Retry-After`.
    pub retry_after: Option<u64>,
}

impl CallError {
    /// A failure that happened before anything reached the forge.
    pub fn local(kind: ErrorKind, message: impl Into<String>) -> Self {
        CallError::Result(ToolFailure {
            status: None,
            kind,
            message: message.into(),
            path: None,
            retry_after: None,
        })
    }

    /// A call refused by a limit of this server before anything was sent: `rate_limited`,
    /// to be tried again after `retry_after` seconds.
    pub fn rate_limited(message: impl Into<String>, retry_after: u64) -> Self {
        CallError::Result(ToolFailure {
            status: None,
            kind: ErrorKind::RateLimited,
            message: message.into(),
            path: None,
            retry_after: Some(retry_after),
        })
    }

    /// The same failure with the wait the forge asked for (`Retry-After`), if it asked.
    pub fn with_retry_after(self, retry_after: Option<u64>) -> Self {
        match self {
            CallError::Result(f) => {
                CallError::Result(ToolFailure { retry_after: retry_after.or(f.retry_after), ..f })
            }
            other => other,
        }
    }

    /// An argument that failed validation, pointing at it with a JSON Pointer.
    pub fn invalid_argument(path: impl Into<String>, message: impl Into<String>) -> Self {
        CallError::Result(ToolFailure {
            status: None,
            kind: ErrorKind::InvalidArguments,
            message: message.into(),
            path: Some(path.into()),
            retry_after: None,
        })
    }

    /// A failure the forge answered with.
    pub fn from_forge(status: u16, kind: ErrorKind, message: impl Into<String>) -> Self {
        CallError::Result(ToolFailure {
            status: Some(status),
            kind,
            message: message.into(),
            path: None,
            retry_after: None,
        })
    }

    /// The kind, when this is a tool result.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            CallError::UnknownTool(_) => None,
            CallError::Result(f) => Some(f.kind),
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::UnknownTool(name) => write!(f, "unknown tool {name:?}"),
            CallError::Result(r) => write!(f, "{}: {}", r.kind, r.message),
        }
    }
}

impl std::error::Error for CallError {}

/// One JSON Pointer segment for an object key (RFC 6901: `~` → `~0`, `/` → `~1`): the
/// pointers of errors and of `truncated` notes are built with it.
pub(crate) fn pointer_segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::ErrorKind;

    /// The README's paragraph on errors names every kind, written as the wire writes it.
    #[test]
    fn the_readme_lists_every_kind_where_it_says_what_an_error_is() {
        let readme = include_str!("../../README.md");
        let at = readme.find("An error is `isError: true`").expect("the README says what an error is");
        let end = readme[at..].find("\n\n").map_or(readme.len(), |e| at + e);
        let words: Vec<&str> = readme[at..end]
            .split(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        for kind in ErrorKind::ALL {
            assert!(words.contains(&kind.as_str()), "the README's list of kinds lacks {}", kind.as_str());
        }
    }
}
