//! A string as a JSON parser would read its escapes, and the way back to the original.
//!
//! Exact redaction must also find a known secret spelled with JSON escapes (`\u0037\u0066…`,
//! `\/`, `\n`): forge text that was not parsed (JSON nested too deep or malformed, an error
//! body that is not an object) is returned as a string, and a reader — a model — would decode
//! the escapes. The secret is searched in the unescaped reading; only when it is found are the
//! matches' places in the original worked out, by a second pass. Both passes are linear in the
//! string, and the memory they take is the reading itself plus the matches.

/// The unescaped reading of `s`.
pub fn read(s: &str) -> String {
    let mut text = String::with_capacity(s.len());
    for (_, c) in pieces(s) {
        text.push(c);
    }
    text
}

/// The places in `s` of `ranges` of its reading (byte ranges, in order, not overlapping, on
/// character boundaries of the reading).
pub(crate) fn places(s: &str, ranges: &[(usize, usize)]) -> Vec<(usize, usize)> {
    places_of(pieces(s).map(|(len, c)| (len, c.len_utf8())), ranges)
}

/// The places in an original of `ranges` of a reading of it, from the reading's pieces in
/// order: how many bytes each takes in the original and in the reading (an escape and what it
/// reads as). For every reading of a text that a redactor searches (`percent.rs` too).
pub(crate) fn places_of(
    pieces: impl Iterator<Item = (usize, usize)>,
    ranges: &[(usize, usize)],
) -> Vec<(usize, usize)> {
    let mut out = Vec::with_capacity(ranges.len());
    let mut wanted = ranges.iter().peekable();
    let (mut view, mut original) = (0, 0);
    let mut start = None;
    for (len, read) in pieces {
        let Some(&&(from, to)) = wanted.peek() else { break };
        if start.is_none() && view == from {
            start = Some(original);
        }
        view += read;
        original += len;
        if let Some(begin) = start {
            if view == to {
                out.push((begin, original));
                start = None;
                wanted.next();
            }
        }
    }
    out
}

/// Each piece of `s` in order: how many bytes of `s` it takes, and the character it reads as
/// (an escape, or a character as written).
fn pieces(s: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let b = s.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= b.len() {
            return None;
        }
        if b[at] == b'\\' {
            if let Some((c, len)) = escape_at(b, at) {
                at += len;
                return Some((len, c));
            }
        }
        let c = s[at..].chars().next().expect("at a character boundary");
        at += c.len_utf8();
        Some((c.len_utf8(), c))
    })
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
        let text = read(s);
        assert_eq!(text, "a7b/c\n😀d\\q");
        let emoji = text.find('😀').unwrap();
        let d = text.find('d').unwrap();
        let got = places(s, &[(1, 4), (emoji, emoji + 4), (d, d + 1)]);
        let spans: Vec<&str> = got.iter().map(|&(a, b)| &s[a..b]).collect();
        assert_eq!(spans, [r"\u0037b\/", r"\ud83d\ude00", "d"]);
    }

    #[test]
    fn invalid_escapes_are_literal() {
        for s in [r"\u00", r"\uZZZZ", r"\ud83d alone", r"\udc00", "end\\"] {
            assert_eq!(read(s), s, "{s}");
        }
    }
}
