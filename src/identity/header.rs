//! The `Authorization` header of an MCP HTTP request (README, "Many users over HTTP").
//!
//! `token <X>` (the forge's own scheme) and `Bearer <X>`, the scheme matched
//! case-insensitively. A bare value, an empty value or any other scheme counts as no
//! header at all: a token is never guessed from a header that does not say it is one.
//! A recognised scheme with a malformed value (`token a b`) is still a credential: it is
//! sent as given and the forge refuses it — it never counts as "no header", which would
//! run the call as the server's own identity.

use secrecy::SecretString;

pub(crate) use aegis_core::identity::MAX_TOKEN_BYTES;

/// What the header says.
#[derive(Debug, Clone)]
pub(crate) enum AuthHeader {
    /// A token under a recognised scheme.
    Token(SecretString),
    /// Absent, empty, bare or an unknown scheme.
    None,
    /// A recognised scheme whose value is not text (not UTF-8): a credential that cannot be
    /// used, which must not count as "no header".
    NotText,
    /// A recognised scheme whose value is longer than `MAX_TOKEN_BYTES`.
    TooLong,
}

/// Parse one `Authorization` header value. Works on bytes: a header value need not be
/// UTF-8, and a recognised scheme followed by something that is not text is still a
/// (broken) credential.
pub(crate) fn parse(value: Option<&[u8]>) -> AuthHeader {
    let Some(value) = value else { return AuthHeader::None };
    let text = value.trim_ascii();
    let Some(at) = text.iter().position(|&b| b == b' ' || b == b'\t') else {
        return AuthHeader::None;
    };
    let (scheme, rest) = (&text[..at], text[at..].trim_ascii());
    if !(scheme.eq_ignore_ascii_case(b"token") || scheme.eq_ignore_ascii_case(b"bearer")) {
        return AuthHeader::None;
    }
    if rest.is_empty() {
        return AuthHeader::None;
    }
    if rest.len() > MAX_TOKEN_BYTES {
        return AuthHeader::TooLong;
    }
    match std::str::from_utf8(rest) {
        Ok(token) => AuthHeader::Token(SecretString::from(token.to_owned())),
        Err(_) => AuthHeader::NotText,
    }
}

/// What a presented token is known by once it is not needed as itself: its SHA-256 (the
/// login cache and the sessions key on it; the token is never kept).
pub(crate) fn token_hash(token: &SecretString) -> [u8; 32] {
    use secrecy::ExposeSecret;
    use sha2::{Digest, Sha256};
    Sha256::digest(token.expose_secret().as_bytes()).into()
}

/// Whether two secrets are equal, in time that depends only on their lengths (the TLS
/// library's `CRYPTO_memcmp`, which no optimiser turns into an early exit).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    aws_lc_rs::constant_time::verify_slices_are_equal(a, b).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn token(h: &str) -> Option<String> {
        match parse(Some(h.as_bytes())) {
            AuthHeader::Token(t) => Some(t.expose_secret().to_owned()),
            _ => None,
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
        // A value that is not text but names no scheme is a bare value.
        assert!(matches!(parse(Some(&[0xff, 0x20, 0x41])), AuthHeader::None));
        assert!(matches!(parse(Some(b"Basic \xff\xfe")), AuthHeader::None));
    }

    #[test]
    fn a_recognised_scheme_with_a_value_that_is_not_text_is_not_text() {
        assert!(matches!(parse(Some(b"token \xff\xfeabc")), AuthHeader::NotText));
        assert!(matches!(parse(Some(b"BEARER abc\x80")), AuthHeader::NotText));
    }

    #[test]
    fn tokens_longer_than_the_bound_are_too_long_whatever_their_bytes() {
        let ok = format!("token {}", "A".repeat(MAX_TOKEN_BYTES));
        assert_eq!(token(&ok).map(|t| t.len()), Some(MAX_TOKEN_BYTES));
        let long = format!("token {}", "A".repeat(MAX_TOKEN_BYTES + 1));
        assert!(matches!(parse(Some(long.as_bytes())), AuthHeader::TooLong));
        let mut bytes = b"Bearer ".to_vec();
        bytes.extend(std::iter::repeat_n(0xffu8, MAX_TOKEN_BYTES + 1));
        assert!(matches!(parse(Some(&bytes)), AuthHeader::TooLong));
    }

    #[test]
    fn a_recognised_scheme_with_a_malformed_value_stays_a_credential() {
        assert_eq!(token("token a b").as_deref(), Some("a b"));
        assert_eq!(token("Bearer x\ty").as_deref(), Some("x\ty"));
    }

    proptest::proptest! {
        /// Any bytes: no panic; a token comes only from a recognised scheme, within the bound,
        /// as the text after the scheme; a recognised scheme never reads as "no header" unless
        /// nothing follows it.
        #[test]
        fn any_header_value_parses_to_a_bounded_answer(
            scheme in proptest::prop_oneof![
                proptest::strategy::Just(b"token".to_vec()), proptest::strategy::Just(b"BeArEr".to_vec()),
                proptest::strategy::Just(b"Basic".to_vec()), proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8)
            ],
            gap in "[ \t]{0,3}",
            value in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            long in proptest::prelude::any::<bool>(),
        ) {
            let mut bytes = scheme.clone();
            bytes.extend_from_slice(gap.as_bytes());
            bytes.extend_from_slice(&value);
            if long {
                bytes.extend(std::iter::repeat_n(b'a', MAX_TOKEN_BYTES));
            }
            let recognised = scheme.eq_ignore_ascii_case(b"token") || scheme.eq_ignore_ascii_case(b"bearer");
            match parse(Some(&bytes)) {
                AuthHeader::Token(t) => {
                    proptest::prop_assert!(recognised || scheme.iter().any(|b| b.is_ascii_whitespace()));
                    proptest::prop_assert!(t.expose_secret().len() <= MAX_TOKEN_BYTES);
                    proptest::prop_assert!(!t.expose_secret().is_empty());
                }
                AuthHeader::TooLong => proptest::prop_assert!(bytes.len() > MAX_TOKEN_BYTES),
                AuthHeader::NotText => proptest::prop_assert!(std::str::from_utf8(&bytes).is_err()),
                AuthHeader::None => {
                    if recognised && !gap.is_empty() {
                        proptest::prop_assert!(value.trim_ascii().is_empty() && !long, "{bytes:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
