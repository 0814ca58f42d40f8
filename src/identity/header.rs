//! The `Authorization` header of an MCP HTTP request (stateless-http-auth spec).
//!
//! `token <X>` (the forge's own scheme) and `Bearer <X>`, the scheme matched
//! case-insensitively. A bare value, an empty value or any other scheme counts as no
//! header at all: a token is never guessed from a header that does not say it is one.
//! A recognised scheme with a malformed value (`token a b`) is still a credential: it is
//! sent as given and the forge refuses it — it never counts as "no header", which would
//! run the call as the server's own identity.

use secrecy::SecretString;

/// What the header says.
#[derive(Debug, Clone)]
pub enum AuthHeader {
    /// A token under a recognised scheme.
    Token(SecretString),
    /// Absent, empty, bare or an unknown scheme.
    None,
}

/// Parse one `Authorization` header value.
pub fn parse(value: Option<&[u8]>) -> AuthHeader {
    let Some(text) = value.and_then(|v| std::str::from_utf8(v).ok()) else { return AuthHeader::None };
    let text = text.trim();
    let Some((scheme, rest)) = text.split_once([' ', '\t']) else {
        return AuthHeader::None;
    };
    let token = rest.trim();
    if token.is_empty() {
        return AuthHeader::None;
    }
    if scheme.eq_ignore_ascii_case("token") || scheme.eq_ignore_ascii_case("bearer") {
        AuthHeader::Token(SecretString::from(token.to_owned()))
    } else {
        AuthHeader::None
    }
}

/// Whether two secrets are equal, in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn token(h: &str) -> Option<String> {
        match parse(Some(h.as_bytes())) {
            AuthHeader::Token(t) => Some(t.expose_secret().to_owned()),
            AuthHeader::None => None,
        }
    }

    #[test]
    fn token_and_bearer_schemes_inject_the_token() {
        assert_eq!(token("token abc123").as_deref(), Some("abc123"));
        assert_eq!(token("Bearer abc123").as_deref(), Some("abc123"));
    }

    #[test]
    fn scheme_matching_is_case_insensitive() {
        assert_eq!(token("bearer abc123").as_deref(), Some("abc123"));
        assert_eq!(token("TOKEN abc123").as_deref(), Some("abc123"));
        assert_eq!(token("BeArEr   abc123  ").as_deref(), Some("abc123"));
    }

    #[test]
    fn bare_empty_and_unknown_schemes_count_as_no_header() {
        for h in ["abc123", "", "   ", "Bearer", "Bearer ", "Basic dXNlcjpwdw=="] {
            assert_eq!(token(h), None, "{h:?}");
        }
        assert!(matches!(parse(None), AuthHeader::None));
        assert!(matches!(parse(Some(&[0xff, 0x20, 0x41])), AuthHeader::None));
    }

    #[test]
    fn a_recognised_scheme_with_a_malformed_value_stays_a_credential() {
        assert_eq!(token("token a b").as_deref(), Some("a b"));
        assert_eq!(token("Bearer x\ty").as_deref(), Some("x\ty"));
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
