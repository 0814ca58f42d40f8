//! A string as a URL decoder would read its percent-escapes, and the way back to the original.
//!
//! `spellings.rs` lists a secret percent-encoded byte for byte and where a URL must encode it,
//! in upper- and in lower-case hex; a forge, a proxy or a hand may write any mixture (`%2f%3A`,
//! one unreserved byte encoded among plain ones), and there are too many mixtures to list.
//! So a string with a `%` followed by two hex digits is also searched in its decoded reading,
//! where every mixture reads as the secret itself; a match is mapped back to the bytes it
//! takes in the original by a second pass. Both passes are linear, and only strings that
//! hold an escape pay for them.

/// Whether `s` holds a percent-escape (`%` and two hex digits).
pub(crate) fn has_escape(s: &[u8]) -> bool {
    memchr::memchr_iter(b'%', s).any(|at| escape_at(s, at).is_some())
}

/// The decoded reading of `s`: every `%XX` (either case) as the byte it stands for.
pub(crate) fn read(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut at = 0;
    while at < s.len() {
        match escape_at(s, at) {
            Some(b) => {
                out.push(b);
                at += 3;
            }
            None => {
                out.push(s[at]);
                at += 1;
            }
        }
    }
    out
}

/// The places in `s` of `ranges` of its reading (byte ranges, in order, not overlapping).
pub(crate) fn places(s: &[u8], ranges: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut at = 0;
    let pieces = std::iter::from_fn(|| {
        (at < s.len()).then(|| {
            let len = if escape_at(s, at).is_some() { 3 } else { 1 };
            at += len;
            (len, 1)
        })
    });
    super::unescape::places_of(pieces, ranges)
}

/// The byte a percent-escape at `s[at]` stands for, if one starts there.
fn escape_at(s: &[u8], at: usize) -> Option<u8> {
    if s.get(at) != Some(&b'%') {
        return None;
    }
    let digit = |b: u8| (b as char).to_digit(16);
    let (hi, lo) = (digit(*s.get(at + 1)?)?, digit(*s.get(at + 2)?)?);
    Some((hi * 16 + lo) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_mixture_of_escapes_reads_as_the_bytes_and_maps_back() {
        let s = b"url?t=tok%2fen%2B4%32&x=%zz%";
        assert!(has_escape(s));
        let view = read(s);
        assert_eq!(view, b"url?t=tok/en+42&x=%zz%");
        let at = memchr::memmem::find(&view, b"tok/en+42").unwrap();
        let back = places(s, &[(at, at + 9)]);
        assert_eq!(&s[back[0].0..back[0].1], b"tok%2fen%2B4%32");
        assert!(!has_escape(b"100% sure, %g1"));
    }
}
