//! The guard: every result — success and error, generated tools and built-in ones alike —
//! passes here after decoding and before it is sent, in this order:
//!
//! 1. exact redaction (always on): every secret the server knows, plus the caller's token and
//!    the secrets this call's body carried, become `[REDACTED]` in strings and keys;
//! 2. pattern masking (`SECRET_DETECTION_MODE`): `off` skips it, `mask` shortens
//!    credential-looking strings, `block` withholds the result as `secret_blocked`;
//!    successful results of credential-issuing operations skip this step;
//! 3. bounds (`MAX_TOOL_RESPONSE_ITEMS`, `MAX_TOOL_RESPONSE_CHARS`).
//!
//! Log lines go through steps 1 and 2 as well (`log.rs`).

pub mod bound;
pub mod credential_ops;
pub mod log;
pub mod mask;
pub mod redact;
pub mod rules;
pub mod secrets;

use std::sync::Arc;

use secrecy::ExposeSecret;

pub use bound::Bounds;
pub use mask::Masker;
pub use redact::Redactor;

use crate::config::{DetectionMode, Settings};
use crate::envelope::Success;
use crate::error::{CallError, ErrorKind, ToolFailure};

/// Longest forge message kept in an error result, in characters.
pub const MAX_MESSAGE_CHARS: usize = 500;

/// The configured secrets: global token, MCP bearer token, OAuth client secret, extra secrets.
pub fn configured_secrets(settings: &Settings) -> Vec<String> {
    let mut out: Vec<String> = [&settings.token, &settings.mcp_bearer_token, &settings.oauth_client_secret]
        .into_iter()
        .flatten()
        .map(|s| s.expose_secret().to_owned())
        .collect();
    out.extend(settings.extra_secrets.iter().map(|s| s.expose_secret().to_owned()));
    out
}

/// The server-wide guard: configured secrets, mode, rules, bounds.
#[derive(Debug, Clone)]
pub struct Guard {
    redactor: Redactor,
    mode: DetectionMode,
    masker: Arc<Masker>,
    bounds: Bounds,
}

impl Guard {
    pub fn new(secrets: Vec<String>, mode: DetectionMode, bounds: Bounds) -> Guard {
        Guard { redactor: Redactor::new(secrets), mode, masker: Arc::new(Masker::new()), bounds }
    }

    pub fn from_settings(settings: &Settings) -> Guard {
        Guard::new(
            configured_secrets(settings),
            settings.secret_detection,
            Bounds { max_items: settings.max_tool_response_items, max_chars: settings.max_tool_response_chars },
        )
    }

    /// Exact redaction of the configured secrets only.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    pub fn masker(&self) -> &Arc<Masker> {
        &self.masker
    }

    /// The guard of one call: the configured secrets plus this call's own.
    pub fn for_call(&self, call_secrets: Vec<String>) -> CallGuard {
        CallGuard { redactor: self.redactor.with(call_secrets), guard: self.clone() }
    }
}

/// The guard of one call.
#[derive(Debug, Clone)]
pub struct CallGuard {
    redactor: Redactor,
    guard: Guard,
}

impl CallGuard {
    /// Redact, mask (or block), bound a success. `issues_credentials`: the operation exists to
    /// hand out a credential, so masking and blocking are skipped.
    pub fn success(&self, s: &mut Success, issues_credentials: bool) -> Result<(), CallError> {
        self.redactor.redact_value(&mut s.data);
        if !issues_credentials {
            match self.guard.mode {
                DetectionMode::Off => {}
                DetectionMode::Mask => {
                    self.guard.masker.mask_value(&mut s.data);
                }
                DetectionMode::Block => {
                    let kinds = self.guard.masker.kinds_in_value(&s.data);
                    if !kinds.is_empty() {
                        let kinds: Vec<&str> = kinds.into_iter().collect();
                        return Err(CallError::from_forge(
                            s.status,
                            ErrorKind::SecretBlocked,
                            format!(
                                "the result was withheld because it contains what looks like a secret ({}); SECRET_DETECTION_MODE=block",
                                kinds.join(", ")
                            ),
                        ));
                    }
                }
            }
        }
        bound::fit(s, self.guard.bounds)
    }

    /// Redact and mask an error's message (errors are masked, never blocked: the status and
    /// kind stay useful), then cut it to `MAX_MESSAGE_CHARS`.
    pub fn failure(&self, mut f: ToolFailure) -> ToolFailure {
        let mut msg = self.redactor.redact_str(&f.message);
        if self.guard.mode != DetectionMode::Off {
            if let Some(m) = self.guard.masker.mask_str(&msg) {
                msg = m;
            }
        }
        f.message = redact::truncate_chars(&msg, MAX_MESSAGE_CHARS + 200);
        f
    }

    /// The same for a `CallError` (an unknown tool's name is redacted too).
    pub fn error(&self, e: CallError) -> CallError {
        match e {
            CallError::Result(f) => CallError::Result(self.failure(f)),
            CallError::UnknownTool(name) => CallError::UnknownTool(self.redactor.redact_str(&name)),
        }
    }

    /// Exact redaction with this call's secrets.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }
}
