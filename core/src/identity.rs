//! Who a result is for: the envelope's `identity` member, and the limits a login and a token
//! are held to wherever they are read.
//!
//! Proving an identity (credentials, the forge's answer, caches) is the server's business;
//! the pipeline only reports it, so it sees this value and nothing that could authenticate.

use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;

/// The longest login accepted anywhere (a `sudo` argument, a forge's answer; Gitea and
/// Forgejo allow 40 characters).
pub const MAX_LOGIN_CHARS: usize = 255;

/// The longest token accepted, in bytes (and so the longest secret spelled out for
/// redaction). Forge access tokens are 40 characters and OAuth access tokens a few hundred
/// bytes; a longer value is refused before any work is done on it (every structure built
/// from a token is linear in its length, but a bound keeps even that small).
pub const MAX_TOKEN_BYTES: usize = 8192;

/// The argument that asks for a call as another user (`Sudo: <login>`), which the catalog
/// offers with `SUDO_ALLOWED_USERS` set; a header, never a parameter.
pub(crate) const SUDO_ARGUMENT: &str = "sudo";

/// How the caller authenticates: the envelope's `identity.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Token,
    #[serde(rename = "oauth")]
    OAuth,
    Basic,
    Anonymous,
}

/// The envelope's `identity` member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Identity {
    pub login: Option<String>,
    pub mode: Mode,
    pub sudo: Option<String>,
}

/// The value of HTTP Basic for `username` and `password`: `base64(username:password)`. It
/// reveals the password to anyone who decodes it, so it is a secret of its own (the guard
/// redacts it like the password).
pub fn basic_blob(username: &str, password: &SecretString) -> SecretString {
    use base64::Engine;
    let pair = format!("{username}:{}", password.expose_secret());
    SecretString::from(base64::engine::general_purpose::STANDARD.encode(pair))
}

/// What the forges accept as a login: ASCII letters, digits, `-`, `_` and `.`. Such a value
/// is also always a valid header value.
pub(crate) fn is_login(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_LOGIN_CHARS
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_is_what_the_forges_accept() {
        for ok in ["bob", "a.b-c_d", "X9"] {
            assert!(is_login(ok), "{ok}");
        }
        for bad in ["", "a b", "a:b", "a\nb", "é", "a,b", &"x".repeat(MAX_LOGIN_CHARS + 1)] {
            assert!(!is_login(bad), "{bad:?}");
        }
    }
}
