//! The error answer of the sign-in's endpoints, apart from the endpoints themselves so that
//! the form readers (`form.rs`), which the endpoints use, can answer with it too.

use serde_json::{Value, json};

/// An OAuth error answer: HTTP status, RFC 6749 `error` code, and words a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OAuthError {
    pub(crate) status: u16,
    pub(crate) code: &'static str,
    pub(crate) description: String,
}

impl OAuthError {
    pub(super) fn new(status: u16, code: &'static str, description: impl Into<String>) -> OAuthError {
        OAuthError { status, code, description: description.into() }
    }
    pub(super) fn request(description: impl Into<String>) -> OAuthError {
        OAuthError::new(400, "invalid_request", description)
    }
    pub(super) fn grant(description: impl Into<String>) -> OAuthError {
        OAuthError::new(400, "invalid_grant", description)
    }
    pub(crate) fn body(&self) -> Value {
        json!({"error": self.code, "error_description": self.description})
    }
}
