//! The spellings of a known secret that exact redaction replaces: the literal patterns that
//! stand for one secret in the automata of `redact.rs` and in the guard's scan (`mod.rs`).
//!
//! A secret leaves a forge in more than one spelling. A webhook's URL carries a token in its
//! query percent-encoded (`%74%6F%6B…`, or only the bytes a URL must encode: `tok%2Fen`); a
//! configuration blob, a header dump or an archive listing carries it base64-encoded, where
//! it sits at any of three alignments inside a longer stream. Each spelling is one more
//! literal of the one aho-corasick pass, so finding them costs more patterns, not more
//! passes over a result. [`spellings`] lists them all, in one place, for the redactor and
//! for anyone who checks that none survives:
//!
//! - the secret as written;
//! - every byte percent-encoded, with upper-case and with lower-case hex;
//! - only the bytes outside a URL's unreserved set (`A–Z a–z 0–9 - . _ ~`) percent-encoded,
//!   upper and lower case, when the secret has such bytes;
//! - base64 at each alignment (the secret starting at offset 0, 1 or 2 of a 3-byte group of
//!   the encoded stream), standard and URL-safe alphabets: the characters that depend on the
//!   secret's bytes alone, without the one or two at either end that also carry bits of the
//!   neighbouring bytes. Only for secrets of at least [`MIN_BASE64_SECRET`] bytes: the
//!   characters of a shorter one's spelling would occur by chance.
//!
//! A secret longer than [`MAX_SPELLED_SECRET`] is looked for as written only: its other
//! spellings would make an automaton several times its size (a request body may carry a
//! secret of megabytes), for a value no URL carries. JSON escapes of any spelling
//! (`\u0025…`) are found by reading the escapes (`unescape.rs`), not by more patterns; so
//! are the percent-encodings no list could hold — upper- and lower-case hex mixed within one
//! secret, only some of the bytes encoded that need not be — by reading a text's
//! percent-escapes (`percent.rs`). The two listed here find the common spellings without it.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

/// Secrets shorter than this have no base64 spellings: at 6 bytes every alignment keeps at
/// least 7 characters (42 bits) that depend on the secret alone, so a chance match in forge
/// text is improbable; shorter spellings would be.
pub(crate) const MIN_BASE64_SECRET: usize = 6;

/// Secrets longer than this (the longest token the server accepts) are looked for as written
/// only.
pub(crate) const MAX_SPELLED_SECRET: usize = crate::identity::MAX_TOKEN_BYTES;

/// Every spelling of `secret` that exact redaction replaces, the secret itself first, each
/// once. Empty for an empty secret.
pub fn spellings(secret: &str) -> Vec<String> {
    if secret.is_empty() {
        return Vec::new();
    }
    let bytes = secret.as_bytes();
    let mut out = vec![secret.to_owned()];
    if bytes.len() > MAX_SPELLED_SECRET {
        return out;
    }
    for upper in [true, false] {
        out.push(percent(bytes, upper, |_| true));
        out.push(percent(bytes, upper, |b| !is_unreserved(b)));
    }
    if bytes.len() >= MIN_BASE64_SECRET {
        for offset in 0..3 {
            out.push(base64_inner(bytes, offset, false));
            out.push(base64_inner(bytes, offset, true));
        }
    }
    let mut seen = std::collections::HashSet::with_capacity(out.len());
    out.retain(|s| seen.insert(s.clone()));
    out
}

/// `bytes` with each byte that `encode` picks written as `%XX` (`upper`: upper-case hex).
fn percent(bytes: &[u8], upper: bool, encode: impl Fn(u8) -> bool) -> String {
    const UPPER: &[u8; 16] = b"0123456789ABCDEF";
    const LOWER: &[u8; 16] = b"0123456789abcdef";
    let digits = if upper { UPPER } else { LOWER };
    let mut out = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if encode(b) {
            out.push('%');
            out.push(digits[usize::from(b >> 4)] as char);
            out.push(digits[usize::from(b & 0xf)] as char);
        } else {
            out.push(b as char);
        }
    }
    out
}

/// The bytes a URL never needs to encode (RFC 3986, section 2.3).
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// The base64 characters of `bytes` placed `offset` bytes (0–2) into a 3-byte group, that
/// depend on `bytes` alone: encoded after `offset` placeholder bytes, the characters that
/// also hold bits of the bytes before (the first `ceil(8·offset/6)`) or after (a last
/// partial one) are dropped.
fn base64_inner(bytes: &[u8], offset: usize, url_safe: bool) -> String {
    let mut placed = vec![0u8; offset];
    placed.extend_from_slice(bytes);
    let engine = if url_safe { URL_SAFE_NO_PAD } else { STANDARD_NO_PAD };
    let encoded = engine.encode(&placed);
    let first = (8 * offset).div_ceil(6);
    let end = 8 * placed.len() / 6;
    encoded[first..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;

    #[test]
    fn a_secret_is_spelled_as_is_percent_encoded_and_in_base64() {
        let got = spellings("tok/en+42");
        assert_eq!(got[0], "tok/en+42");
        for want in
            ["%74%6F%6B%2F%65%6E%2B%34%32", "%74%6f%6b%2f%65%6e%2b%34%32", "tok%2Fen%2B42", "tok%2fen%2b42"]
        {
            assert!(got.iter().any(|s| s == want), "{want} not in {got:?}");
        }
        // 3 alignments × 2 alphabets, fewer where both alphabets spell it alike.
        assert!(got.len() <= 5 + 6, "{got:?}");
        let unique: std::collections::HashSet<&String> = got.iter().collect();
        assert_eq!(unique.len(), got.len(), "each once");
    }

    #[test]
    fn every_base64_alignment_of_a_secret_in_a_stream_contains_one_of_its_spellings() {
        let secret = "Zq7GLOBALtok3n0x?>~";
        let spelled = spellings(secret);
        for before in 0..6 {
            for after in 0..4 {
                let mut stream = b"prefix-bytes".to_vec()[..before].to_vec();
                stream.extend_from_slice(secret.as_bytes());
                stream.extend(std::iter::repeat_n(0xA5u8, after));
                for encoded in [STANDARD.encode(&stream), URL_SAFE_NO_PAD.encode(&stream)] {
                    assert!(
                        spelled.iter().skip(1).any(|s| encoded.contains(s.as_str())),
                        "{before} before, {after} after: {encoded} holds none of {spelled:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn short_secrets_have_no_base64_spellings_and_no_empty_ones() {
        assert_eq!(spellings(""), Vec::<String>::new());
        assert_eq!(spellings("abcde"), ["abcde", "%61%62%63%64%65"]);
        assert!(spellings("abcdef").len() > 2);
        for s in spellings("abcdef") {
            assert!(s.len() >= 6, "{s}");
        }
        let long = "L".repeat(MAX_SPELLED_SECRET + 1);
        assert_eq!(spellings(&long), std::slice::from_ref(&long));
        assert_eq!(spellings(&long[1..]).len(), 6, "as is, %4C and %4c, 3 base64 alignments");
    }
}
