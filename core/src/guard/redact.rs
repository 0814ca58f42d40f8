//! Exact redaction of known secrets: multi-pattern automata, one pass each per string. Their
//! patterns are every spelling of every secret (`spellings.rs`: as written, percent-encoded,
//! base64 at each alignment), each also as JSON text writes it (a quote, a backslash or a
//! control character escaped), so a spelled secret costs no extra pass, and one search of a
//! result's JSON text (`occurs_in`) tells the guard whether any string of it holds a secret.
//! A text with a percent-escape is searched once more in its decoded reading
//! (`percent.rs`), which finds every mixture of escaped and plain bytes and of hex cases.
//! The configured secrets' automaton is built once and shared by every call; a call's own
//! secrets (its token, a request body's) get a small one beside it, so a call pays for its
//! own secrets only. Where matches of the two overlap, the stretch either covers goes as one.
//! Matching is case-sensitive and leftmost-longest, which lets the library run a vectorised
//! literal prefilter before the automaton: a text without a secret is passed over at GB/s
//! (while there are at most 128 patterns, the prefilter's limit: a dozen secrets).
//!
//! Which automaton: a DFA searches faster where matches are dense, but its construction grows
//! with the square of a pattern's length for some inputs (a long run of one character), and
//! some secrets come from the network (a caller's token). So the automata built once from the
//! configured secrets are DFAs while every pattern is short (`automaton_kind`: every spelling
//! of a secret of up to 128 bytes), built at their first search rather than at start (a DFA of
//! some thirty spellings takes a few milliseconds); everything else — a long secret, the
//! automata of one call, of log lines — is a contiguous NFA, whose construction is linear in the
//! patterns.

use std::sync::{Arc, LazyLock, OnceLock};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex::Regex;
use serde_json::{Map, Value};

use super::MAX_MESSAGE_CHARS;
use super::spellings::spellings;
use super::{percent, unescape};

/// The replacement for every known secret.
pub(crate) const REDACTED: &str = "[REDACTED]";

/// Replaces every occurrence of known secret values, in strings and object keys.
#[derive(Clone)]
pub struct Redactor {
    /// Every secret, as given: the configured ones and those `with` added.
    secrets: Arc<Vec<String>>,
    /// The automata, searched side by side: the configured secrets' first, shared by every
    /// call's redactor (built once), then what `with` added for one call (built for it).
    layers: Vec<Arc<Layer>>,
}

/// One automaton of secrets: every spelling of each, also as JSON text writes it.
struct Layer {
    patterns: Vec<String>,
    kind: AhoCorasickKind,
    /// Built at the first search.
    automaton: OnceLock<AhoCorasick>,
}

/// A redactor printed for debugging (a panic message, a `{:?}` in a log line) shows how many
/// secrets it knows, never them: the automaton's states would spell them too.
impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor").field("secrets", &self.secrets.len()).finish_non_exhaustive()
    }
}

impl Layer {
    /// The layer of `secrets`, its automaton of `kind` (`None`: by `automaton_kind`); `None`
    /// when there is nothing to find.
    fn new(secrets: &[String], kind: Option<AhoCorasickKind>) -> Option<Arc<Layer>> {
        let mut patterns = Vec::new();
        for spelled in secrets.iter().flat_map(|s| spellings(s)) {
            // Inside JSON text a spelling with `"`, `\` or control characters appears escaped.
            let escaped = serde_json::to_string(&spelled).unwrap_or_default();
            let escaped = escaped.trim_matches('"');
            if escaped != spelled {
                patterns.push(escaped.to_owned());
            }
            patterns.push(spelled);
        }
        patterns.sort();
        patterns.dedup();
        let kind = kind.unwrap_or_else(|| automaton_kind(&patterns));
        (!patterns.is_empty()).then(|| Arc::new(Layer { patterns, kind, automaton: OnceLock::new() }))
    }

    fn automaton(&self) -> &AhoCorasick {
        self.automaton.get_or_init(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .kind(Some(self.kind))
                .build(self.patterns.iter())
                .expect("literal patterns always build")
        })
    }
}

impl Redactor {
    /// A redactor for these literals, at any length but empty. Callers decide which short
    /// values are worth it (body fields need 4 characters; an Actions secret any).
    pub fn new<I, S>(secrets: I) -> Redactor
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Redactor::build(secrets.into_iter().map(|s| s.as_ref().to_owned()).collect(), None)
    }

    /// A redactor used once (an error of one call) or only on short texts (log lines, the
    /// client's names in an audit line): the automaton cheapest to build.
    pub fn once<I, S>(secrets: I) -> Redactor
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Redactor::build(
            secrets.into_iter().map(|s| s.as_ref().to_owned()).collect(),
            Some(AhoCorasickKind::ContiguousNFA),
        )
    }

    /// The redactor of `list`, its automaton of `kind` (`None`: by `automaton_kind`).
    fn build(list: Vec<String>, kind: Option<AhoCorasickKind>) -> Redactor {
        let list = known(list);
        let layers = Layer::new(&list, kind).into_iter().collect();
        Redactor { secrets: Arc::new(list), layers }
    }

    /// This redactor plus more literals (e.g. a caller's own token or body secrets). Values
    /// already known are skipped, so the common case (nothing new) builds nothing; the new
    /// ones get an automaton of their own, searched beside the ones already built, so a
    /// call pays for its own secrets, not again for the configured ones.
    pub(crate) fn with<I, S>(&self, more: I) -> Redactor
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let new: Vec<String> = more
            .into_iter()
            .map(|s| s.as_ref().to_owned())
            .filter(|s| !s.is_empty() && !self.secrets.contains(s))
            .collect();
        if new.is_empty() {
            return self.clone();
        }
        let new = known(new);
        // One call's automaton: built for one search, so the cheapest to build.
        let mut layers = self.layers.clone();
        layers.extend(Layer::new(&new, Some(AhoCorasickKind::ContiguousNFA)));
        let mut secrets = Vec::with_capacity(self.secrets.len() + new.len());
        secrets.extend(self.secrets.iter().cloned());
        secrets.extend(new);
        Redactor { secrets: Arc::new(secrets), layers }
    }

    /// The secrets this redactor replaces, as they were given (each also in its other
    /// spellings).
    pub(crate) fn secrets(&self) -> &[String] {
        &self.secrets
    }

    /// Whether any secret, in any spelling, occurs in `hay`.
    fn is_match(&self, hay: &[u8]) -> bool {
        self.layers.iter().any(|l| l.automaton().is_match(hay))
    }

    /// Where the secrets occur in `hay`, in order and apart: each automaton's leftmost-longest
    /// matches, and where two automata's overlap, the stretch both cover as one.
    fn find(&self, hay: &[u8]) -> Vec<(usize, usize)> {
        let mut found: Vec<(usize, usize)> = Vec::new();
        for layer in &self.layers {
            found.extend(layer.automaton().find_iter(hay).map(|m| (m.start(), m.end())));
        }
        if self.layers.len() > 1 && !found.is_empty() {
            found.sort_unstable();
            let mut merged: Vec<(usize, usize)> = Vec::with_capacity(found.len());
            for (start, end) in found {
                match merged.last_mut() {
                    Some(last) if start < last.1 => last.1 = last.1.max(end),
                    _ => merged.push((start, end)),
                }
            }
            found = merged;
        }
        found
    }

    /// Redact one string: every known secret, also where it is spelled with JSON escapes
    /// (see `unescape.rs`) or with any mixture of percent-escapes (`percent.rs`).
    pub fn redact_str(&self, s: &str) -> String {
        if self.layers.is_empty() {
            return s.to_owned();
        }
        let out = self.redact_escaped(s);
        if !percent::has_escape(out.as_bytes()) {
            return out;
        }
        let view = percent::read(out.as_bytes());
        let found = self.find(&view);
        if found.is_empty() {
            return out;
        }
        let places = percent::places(out.as_bytes(), &found);
        // A secret is whole characters, and so is every escape's stretch of the original.
        if places.iter().all(|&(a, b)| out.is_char_boundary(a) && out.is_char_boundary(b)) {
            splice(&out, &places)
        } else {
            out
        }
    }

    /// `redact_str` but for percent-escapes: the secrets as the automata spell them, also
    /// where JSON escapes spell them.
    fn redact_escaped(&self, s: &str) -> String {
        let plain = |s: &str| {
            let found = self.find(s.as_bytes());
            if found.is_empty() { s.to_owned() } else { splice(s, &found) }
        };
        if !s.contains('\\') {
            return plain(s);
        }
        let view = unescape::read(s);
        let found = self.find(view.as_bytes());
        if found.is_empty() {
            return plain(s);
        }
        // Once more as written: a secret may itself hold a backslash sequence.
        plain(&splice(s, &unescape::places(s, &found)))
    }

    /// `s` with a tail that is the first part (4 characters or more) of a known secret (in
    /// any spelling) replaced: for text cut short, where a secret lost its end and no longer
    /// matches.
    pub fn redact_cut_tail(&self, s: &str) -> String {
        const MIN: usize = 4;
        let mut from = s.len();
        for secret in self.layers.iter().flat_map(|l| l.patterns.iter()) {
            let Some(&first) = secret.as_bytes().first() else { continue };
            // The earliest start, so the longest tail, of each secret.
            for (i, _) in s.bytes().enumerate().filter(|&(_, b)| b == first) {
                let tail = &s[i..];
                if i < from && tail.len() >= MIN && tail.len() < secret.len() && secret.starts_with(tail) {
                    from = i;
                    break;
                }
            }
        }
        if from == s.len() { s.to_owned() } else { format!("{}{REDACTED}", &s[..from]) }
    }

    /// Whether any known secret, in any spelling, occurs in `bytes`: binary content, which
    /// cannot be redacted, or a result's JSON text, which is walked only when one does.
    pub fn occurs_in(&self, bytes: &[u8]) -> bool {
        self.is_match(bytes) || (percent::has_escape(bytes) && self.is_match(&percent::read(bytes)))
    }

    /// Redact every string and object key of a JSON value, in place; whether any changed.
    pub fn redact_value(&self, v: &mut Value) -> bool {
        if self.layers.is_empty() {
            return false;
        }
        // A string needs a closer look when a secret occurs in it or escapes might spell one.
        let may_hold = |s: &str| s.contains('\\') || self.occurs_in(s.as_bytes());
        let mut changed = false;
        let mut stack = vec![v];
        while let Some(v) = stack.pop() {
            match v {
                Value::String(s) => {
                    if may_hold(s) {
                        let redacted = self.redact_str(s);
                        changed |= redacted != *s;
                        *s = redacted;
                    }
                }
                Value::Array(a) => stack.extend(a.iter_mut()),
                Value::Object(m) => {
                    if m.keys().any(|k| may_hold(k)) {
                        let old = std::mem::take(m);
                        *m = old
                            .into_iter()
                            .map(|(k, v)| {
                                let redacted = self.redact_str(&k);
                                changed |= redacted != k;
                                (redacted, v)
                            })
                            .collect::<Map<_, _>>();
                    }
                    stack.extend(m.values_mut());
                }
                _ => {}
            }
        }
        changed
    }

    /// A forge error message made safe: known secrets, Authorization text and token-looking
    /// values removed, then cut to `MAX_MESSAGE_CHARS`.
    pub fn sanitize_message(&self, msg: &str) -> String {
        static AUTH_LINE: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r#"(?i)\b(proxy-)?authorization\b\s*["']?\s*[:=]\s*["']?[^\r\n"',;]*"#)
                .expect("valid regex")
        });
        static SCHEME_VALUE: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"(?i)\b(token|bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,}").expect("valid regex")
        });
        static QUERY_TOKEN: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"(?i)([?&](?:access_token|token|sudo_token|private_token)=)[^&\s]+")
                .expect("valid regex")
        });
        let s = self.redact_str(msg);
        let s = AUTH_LINE.replace_all(&s, "Authorization: [REDACTED]");
        let s = SCHEME_VALUE.replace_all(&s, "${1}${2}[REDACTED]");
        let s = QUERY_TOKEN.replace_all(&s, "${1}[REDACTED]");
        truncate_chars(&s, MAX_MESSAGE_CHARS)
    }
}

/// The secrets of `list` worth finding: none empty, each once, in order.
fn known(mut list: Vec<String>) -> Vec<String> {
    list.retain(|s| !s.is_empty());
    list.sort();
    list.dedup();
    list
}

/// `s` with each of the `places` (in order, apart) replaced by `REDACTED`.
fn splice(s: &str, places: &[(usize, usize)]) -> String {
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    for &(start, end) in places {
        out.push_str(&s[at..start]);
        out.push_str(REDACTED);
        at = end;
    }
    out.push_str(&s[at..]);
    out
}

/// Patterns up to this long make a DFA (its construction stays small); longer ones an NFA.
/// Every spelling of a secret of up to 128 bytes fits (percent-encoded, it is three times as
/// long).
pub(crate) const DFA_MAX_PATTERN: usize = 3 * 128;

/// The automaton for patterns built once and searched often: a DFA when every pattern is
/// short, else a contiguous NFA (see the module doc).
pub(crate) fn automaton_kind<S: AsRef<str>>(patterns: &[S]) -> AhoCorasickKind {
    if patterns.iter().all(|p| p.as_ref().len() <= DFA_MAX_PATTERN) {
        AhoCorasickKind::DFA
    } else {
        AhoCorasickKind::ContiguousNFA
    }
}

/// Cut to at most `max` characters, saying so.
pub(crate) fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((i, _)) => format!("{}… (truncated)", &s[..i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_in_values_keys_and_inside_longer_strings() {
        let r = Redactor::new(["s3cr3t-token", ""]);
        let mut v =
            json!({"a": "x s3cr3t-token y", "s3cr3t-token": [1, "s3cr3t-tokens3cr3t-token"], "abc": "abc"});
        r.redact_value(&mut v);
        assert_eq!(
            v,
            json!({"a": "x [REDACTED] y", "[REDACTED]": [1, "[REDACTED][REDACTED]"], "abc": "abc"})
        );
    }

    #[test]
    fn automata_from_secrets_are_nfas_so_a_long_run_of_one_character_builds_in_linear_time() {
        // A DFA of this pattern takes time quadratic in its length to build (minutes here).
        let long = "A".repeat(1 << 20);
        let r = Redactor::new([long.as_str()]);
        assert_eq!(r.kinds(), [AhoCorasickKind::ContiguousNFA]);
        assert_eq!(r.redact_str(&format!("x{long}y")), "x[REDACTED]y");
        // One call's additions are NFAs whatever their length, beside the configured
        // secrets' automaton, which is shared and a DFA when they are short.
        let short = Redactor::new(["s3cr3t-token"]);
        assert_eq!(short.kinds(), [AhoCorasickKind::DFA]);
        let call = short.with(["B".repeat(1 << 16)]);
        assert_eq!(call.kinds(), [AhoCorasickKind::DFA, AhoCorasickKind::ContiguousNFA]);
        assert!(Arc::ptr_eq(&short.layers[0], &call.layers[0]), "the configured automaton is built once");
    }

    #[test]
    fn secrets_spelled_with_json_escapes_are_found() {
        let r = Redactor::new(["Xf3a/secret\"q"]);
        // Every character escaped, some, in upper-case hex, with `\/` and `\"`.
        for spelled in [
            r#"\u0058\u0066\u0033\u0061\u002f\u0073\u0065\u0063\u0072\u0065\u0074\u0022\u0071"#,
            r#"Xf3a\/secret\"q"#,
            r#"\u0058f3a/secret\"q"#,
            r#"\u0058f3a\u002Fsecret\u0022q"#,
        ] {
            let got = r.redact_str(&format!("before {spelled} after"));
            assert_eq!(got, "before [REDACTED] after", "{spelled}");
        }
        // In a key and a value; `\\u0058` (a backslash written twice) is no escape of X.
        let single = r#"k\u0058f3a/secret"q"#;
        let double = r#"k\\u0058f3a/secret"q"#;
        let mut v = serde_json::json!({single: [r#"x\u0058f3a\/secret\"qy"#], double: 1});
        r.redact_value(&mut v);
        assert_eq!(v, serde_json::json!({"k[REDACTED]": ["x[REDACTED]y"], double: 1}));
        // Backslashes that spell nothing are left alone.
        assert_eq!(r.redact_str(r"C:\path\to \q \u12"), r"C:\path\to \q \u12");
    }

    #[test]
    fn secrets_percent_encoded_or_in_base64_are_found() {
        use base64::Engine;
        use base64::engine::general_purpose::{STANDARD, URL_SAFE};
        let secret = "tok/SECRET+value~42?";
        let r = Redactor::new([secret]);
        let percent = |upper: bool| -> String {
            secret.bytes().map(|b| if upper { format!("%{b:02X}") } else { format!("%{b:02x}") }).collect()
        };
        for spelled in [percent(true), percent(false), "tok%2FSECRET%2Bvalue~42%3F".to_owned()] {
            let got = r.redact_str(&format!("https://hook.example/p?token={spelled}&x=1"));
            assert_eq!(got, "https://hook.example/p?token=[REDACTED]&x=1", "{spelled}");
        }
        // In a base64 stream at each of the three alignments, in both alphabets: the characters
        // that carry only the secret's bytes are gone, the stream's other characters stay.
        for pad in ["", "a", "ab", "abc"] {
            let stream = format!("Authorization: token {pad}{secret} and more");
            for encoded in [STANDARD.encode(&stream), URL_SAFE.encode(&stream)] {
                let got = r.redact_str(&format!("header {encoded} end"));
                assert!(got.contains(REDACTED), "{pad:?}: {encoded} → {got}");
                // The groups of the bytes before the secret are kept as they were.
                let before = ("Authorization: token ".len() + pad.len()) / 3 * 4;
                assert!(got.starts_with(&format!("header {}", &encoded[..before])), "{got}");
                assert!(got.ends_with(" end"), "{got}");
            }
        }
        // Binary content holding the secret percent-encoded is found as well.
        assert!(r.occurs_in(percent(true).as_bytes()));
        // Escapes of a spelling are read too: `\u0025` is `%`.
        let escaped = percent(true).replace('%', "\\u0025");
        assert_eq!(r.redact_str(&escaped), REDACTED);
    }
    #[test]
    fn any_mixture_of_percent_escapes_and_hex_cases_is_found() {
        let r = Redactor::new(["tok/SECRET+value~42?"]);
        for spelled in [
            "%74%6f%6B%2f%53%45%43%52%45%54%2B%76%61%6C%75%65%7E%34%32%3F",
            "tok%2fSECRET%2Bvalue~42%3f",
            "%74ok/S%45CRET+value%7E42?",
        ] {
            let text = format!("https://x/?t={spelled}&n=1");
            assert_eq!(r.redact_str(&text), "https://x/?t=[REDACTED]&n=1", "{spelled}");
            assert!(r.occurs_in(text.as_bytes()), "{spelled}");
            let mut v = serde_json::json!({"url": text});
            assert!(r.redact_value(&mut v), "{spelled}");
        }
        // An escape that is not one, and a string with no secret, stay as they are.
        for text in ["100% of %zz", "a%2Fb", "tok%2fSECRET"] {
            assert_eq!(r.redact_str(text), text);
        }
    }

    impl Redactor {
        fn kinds(&self) -> Vec<AhoCorasickKind> {
            self.layers.iter().map(|l| l.automaton().kind()).collect()
        }
    }

    #[test]
    fn longest_secret_wins() {
        let r = Redactor::new(["secret", "secret-longer"]);
        assert_eq!(r.redact_str("a secret-longer b"), "a [REDACTED] b");
    }

    #[test]
    fn a_calls_secrets_and_the_configured_ones_are_redacted_as_one_where_they_overlap() {
        // Either may hold, or run into, the other: what either covers goes, in one piece.
        let configured = Redactor::new(["secret", "tail-XYZ"]);
        for (call, text, want) in [
            ("secret-longer", "a secret-longer b", "a [REDACTED] b"),
            ("cret-lon", "a secret-longer b", "a [REDACTED]ger b"),
            ("abc-tail", "x abc-tail-XYZ y", "x [REDACTED] y"),
            ("other", "secretother secret", "[REDACTED][REDACTED] [REDACTED]"),
        ] {
            let r = configured.with([call]);
            assert_eq!(r.kinds().len(), 2);
            assert_eq!(r.redact_str(text), want, "{call}");
            let mut v = serde_json::json!({ text: [text] });
            assert!(r.redact_value(&mut v));
            assert_eq!(v, serde_json::json!({ want: [want] }), "{call}");
        }
        // Spelled with escapes, found through the unescaped view by both automata.
        let r = configured.with(["cret-lon"]);
        assert_eq!(r.redact_str(r"a secret-longer b"), "a [REDACTED]ger b");
        assert!(r.occurs_in(b"..cret-lon..") && r.occurs_in(b"..secret..") && !r.occurs_in(b"..cret.."));
        assert_eq!(r.redact_cut_tail("cut: cret-l"), "cut: [REDACTED]");
        assert_eq!(r.redact_cut_tail("cut: secr"), "cut: [REDACTED]");
    }

    #[test]
    fn messages_lose_authorization_text_and_token_values() {
        let r = Redactor::new(["known-token-123"]);
        let m = r.sanitize_message(
            "bad header Authorization: token 0123456789abcdef0123456789abcdef01234567 and known-token-123, see ?access_token=zzz&x=1, Bearer eyJhbGciOi.abc.def",
        );
        assert!(!m.contains("0123456789abcdef"), "{m}");
        assert!(!m.contains("known-token-123"), "{m}");
        assert!(!m.contains("zzz"), "{m}");
        assert!(!m.contains("eyJhbGciOi"), "{m}");
        assert!(m.contains("[REDACTED]"));
    }

    #[test]
    fn long_messages_are_truncated_on_a_char_boundary() {
        let r = Redactor::new(Vec::<String>::new());
        let m = r.sanitize_message(&"é".repeat(600));
        assert!(m.ends_with("… (truncated)"));
        assert_eq!(m.chars().filter(|c| *c == 'é').count(), MAX_MESSAGE_CHARS);
    }
}
