//! The guard: what the forge returned is made safe to show before it reaches the client.
//!
//! Exact redaction of every secret the server knows runs on every result, success and
//! error. Error messages are also stripped of credential-looking text (`Authorization:`
//! lines, `token …`/`Bearer …` values, `token=` query parameters) and truncated.

pub mod redact;

pub use redact::Redactor;

/// Longest forge message kept in an error result, in characters.
pub const MAX_MESSAGE_CHARS: usize = 500;
