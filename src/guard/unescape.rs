//! A string as a JSON parser would read its escapes, with the way back to the original.
//!
//! Exact redaction must also find a known secret spelled with JSON escapes (`\u0037\u0066…`,
//! `\/`, `\n`): forge text that was not parsed (JSON nested too deep or malformed, an error
//! body that is not an object) is returned as a string, and a reader — a model — would decode
//! the escapes. The secret is searched in the unescaped reading and the matching range of the
//! original is replaced. One pass, linear in the string; only the escapes are recorded, since
//! between two of them both texts run in step.

/// The unescaped reading of a string.
pub(crate) struct Unescaped {
    pub text: String,
    /// One entry per escape: (view start, view end, original start, original end), in order.
    escapes: Vec<(usize, usize, usize, usize)>,
}

impl Unescaped {
    pub fn of(s: &str) -> Unescaped {
        let b = s.as_bytes();
        let mut text = String::with_capacity(s.len());
        let mut escapes = Vec::new();
        let (mut i, mut copied) = (0, 0);
        while let Some(off) = b[i..].iter().position(|&c| c == b'\\') {
            let at = i + off;
            let Some((c, len)) = escape_at(b, at) else {
                // Not an escape: taken literally (and `\\` before it was one, so no overlap).
                i = at + 1;
                continue;
            };
            text.push_str(&s[copied..at]);
            let view_start = text.len();
            text.push(c);
            escapes.push((view_start, text.len(), at, at + len));
            i = at + len;
            copied = i;
        }
        text.push_str(&s[copied..]);
        Unescaped { text, escapes }
    }

    /// The original byte offset where the view's character at `v` starts.
    pub fn original_start(&self, v: usize) -> usize {
        // The last escape starting at or before `v`.
        match self.escapes.partition_point(|e| e.0 <= v).checked_sub(1).map(|i| self.escapes[i]) {
            None => v,
            Some((_, ve, os, oe)) => {
                if v < ve {
                    os
                } else {
                    oe + (v - ve)
                }
            }
        }
    }

    /// The original byte offset where the view's text before `v` (exclusive) ends.
    pub fn original_end(&self, v: usize) -> usize {
        // The last escape starting before `v`.
        match self.escapes.partition_point(|e| e.0 < v).checked_sub(1).map(|i| self.escapes[i]) {
            None => v,
            Some((_, ve, _, oe)) => {
                if v <= ve {
                    oe
                } else {
                    oe + (v - ve)
                }
            }
        }
    }
}

/// The character a JSON escape at `b[at]` (a backslash) stands for, and the escape's length
/// in bytes; `None` when it is not a valid escape.
fn escape_at(b: &[u8], at: usize) -> Option<(char, usize)> {
    let hex4 = |from: usize| -> Option<u32> {
        let digits = b.get(from..from + 4)?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let c = match *b.get(at + 1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{08}',
        b'f' => '\u{0c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let unit = hex4(at + 2)?;
            if !(0xD800..0xDC00).contains(&unit) {
                // A lone low surrogate is no character: `from_u32` refuses it.
                return char::from_u32(unit).map(|c| (c, 6));
            }
            // A high surrogate counts only with the low one that follows it.
            if b.get(at + 6..at + 8) != Some(b"\\u") {
                return None;
            }
            let low = hex4(at + 8).filter(|l| (0xDC00..0xE000).contains(l))?;
            let c = char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))?;
            return Some((c, 12));
        }
        _ => return None,
    };
    Some((c, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_read_and_mapped_back() {
        let s = r#"a\u0037b\/c\n\ud83d\ude00d\q"#;
        let u = Unescaped::of(s);
        assert_eq!(u.text, "a7b/c\n😀d\\q");
        // "7b/" in the view is `\u0037b\/` in the original.
        let (vs, ve) = (1, 4);
        assert_eq!(&s[u.original_start(vs)..u.original_end(ve)], r"\u0037b\/");
        // The emoji (4 bytes in the view) is the 12-byte surrogate pair.
        let at = u.text.find('😀').unwrap();
        assert_eq!(&s[u.original_start(at)..u.original_end(at + 4)], r"\ud83d\ude00");
        // Plain text after the last escape runs in step.
        let d = u.text.find('d').unwrap();
        assert_eq!(&s[u.original_start(d)..u.original_end(d + 1)], "d");
    }

    #[test]
    fn invalid_escapes_are_literal() {
        for s in [r"\u00", r"\uZZZZ", r"\ud83d alone", r"\udc00", "end\\"] {
            let u = Unescaped::of(s);
            assert_eq!(u.text, s, "{s}");
        }
    }
}
