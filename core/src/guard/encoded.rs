//! Known secrets inside base64 content: the forges return a file's bytes as a base64 string
//! (`content` next to `"encoding": "base64"` in contents and blobs; `content_base64` in wiki
//! pages), and a token committed to a repository would leave through it, encoded, past every
//! text scan. Such a string is decoded and searched: text in which a secret occurs is redacted
//! and encoded again; other bytes cannot be redacted without corrupting them, so the result is
//! withheld, as for a binary body. Masking does not look inside (it stays a text pass).
//!
//! Only results whose text mentions `base64` are walked; the walk is iterative (the decoder
//! already bounded the depth) and each string is decoded once, so the cost is linear.
//!
//! Which members hold base64 is decided on the forge's whole answer, before the shape stage
//! keeps only the `fields` asked for (`redact_typed`): by the result type (a member `content`
//! of a definition that also has `encoding`, a member `content_base64`), and by the
//! `encoding` the forge sent beside it. After shaping, `content` may stand alone and could no
//! longer be told from text, and the text scan would splice `[REDACTED]` into the base64 of
//! a file it must withhold.

use base64::Engine;
use base64::alphabet::STANDARD as ALPHABET;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use serde_json::{Map, Value};

use super::Redactor;
use crate::catalog::results::{Definition, Definitions, Typed};

/// What the walk found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// No known secret in any base64 content: nothing changed.
    Clean,
    /// Known secrets in base64 text, redacted there: the value changed.
    Redacted,
    /// A known secret occurs in base64 content that is not text, or content said to be
    /// base64 does not decode (so it cannot be checked).
    InBinary,
}

/// Reads base64 with or without its padding: the forges pad, other encoders may not.
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &ALPHABET,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Whether `text` (a result as JSON) may hold base64 content worth decoding: it names
/// `base64` (as the forges spell it; `encoded_fields` matches the same spelling).
pub(super) fn may_hold(text: &str) -> bool {
    memchr::memmem::find(text.as_bytes(), b"base64").is_some()
}

/// Redact known secrets inside the base64 content strings of `v`, in place.
pub(super) fn redact(redactor: &Redactor, v: &mut Value) -> Found {
    let mut found = Found::Clean;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(map) => {
                for key in encoded_fields(map) {
                    if let Some(Value::String(s)) = map.get_mut(key) {
                        match redact_one(redactor, s) {
                            Found::Clean => {}
                            Found::Redacted => found = Found::Redacted,
                            Found::InBinary => return Found::InBinary,
                        }
                    }
                }
                stack.extend(map.values_mut());
            }
            _ => {}
        }
    }
    found
}

/// `redact` on a result of type `result`: the members its definitions say hold base64 are
/// decoded too, whatever the forge sent beside them.
pub(super) fn redact_typed(
    redactor: &Redactor,
    defs: &Definitions,
    result: Option<&Typed>,
    v: &mut Value,
) -> Found {
    let mut found = Found::Clean;
    let top = result.and_then(|t| defs.get(&t.definition));
    let mut stack: Vec<(&mut Value, Option<&Definition>)> = vec![(v, top)];
    while let Some((v, def)) = stack.pop() {
        match v {
            // A list of the definition (or one where the spec says one and the forge answers
            // a list): each item is one.
            Value::Array(items) => stack.extend(items.iter_mut().map(|i| (i, def))),
            Value::Object(map) => {
                let mut keys = encoded_fields(map);
                for key in def.map(typed_fields).unwrap_or_default() {
                    if !keys.contains(&key) {
                        keys.push(key);
                    }
                }
                for key in keys {
                    if let Some(Value::String(s)) = map.get_mut(key) {
                        match redact_one(redactor, s) {
                            Found::Clean => {}
                            Found::Redacted => found = Found::Redacted,
                            Found::InBinary => return Found::InBinary,
                        }
                    }
                }
                for (name, member) in map.iter_mut() {
                    let inner = def.and_then(|d| d.member(name)).and_then(|t| defs.get(&t.definition));
                    stack.push((member, inner));
                }
            }
            _ => {}
        }
    }
    found
}

/// The members of `map` that hold base64 content, by what the forge sent: `content` beside
/// `"encoding": "base64"`, and `content_base64`.
pub(super) fn encoded_fields(map: &Map<String, Value>) -> Vec<&'static str> {
    let mut keys = Vec::new();
    if map.get("encoding").and_then(Value::as_str) == Some("base64") {
        keys.push("content");
    }
    if map.contains_key("content_base64") {
        keys.push("content_base64");
    }
    keys
}

/// The members a definition says hold base64 content: a file's or blob's `content` (its
/// definition has `encoding`), a wiki page's `content_base64`.
fn typed_fields(def: &Definition) -> Vec<&'static str> {
    let mut keys = Vec::new();
    if def.has("content") && def.has("encoding") {
        keys.push("content");
    }
    if def.has("content_base64") {
        keys.push("content_base64");
    }
    keys
}

/// Redact one base64 string in place (bytes that are not text are left as they are: the
/// caller withholds the result). Content that says it is base64 but does not decode cannot
/// be checked, so it is withheld too.
fn redact_one(redactor: &Redactor, s: &mut String) -> Found {
    // The forges wrap nothing, but other encoders break lines: white space is not data.
    let decoded = if s.bytes().any(|b| b.is_ascii_whitespace()) {
        let compact: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        LENIENT.decode(compact)
    } else {
        LENIENT.decode(s.as_bytes())
    };
    let Ok(bytes) = decoded else { return Found::InBinary };
    if !redactor.occurs_in(&bytes) {
        return Found::Clean;
    }
    match String::from_utf8(bytes) {
        Ok(text) => {
            *s = STANDARD.encode(redactor.redact_str(&text));
            Found::Redacted
        }
        Err(_) => Found::InBinary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &str = "s3cr3t-known-value-42";

    fn redactor() -> Redactor {
        Redactor::new(vec![SECRET.to_owned()])
    }

    fn decoded(v: &Value) -> String {
        String::from_utf8(STANDARD.decode(v.as_str().unwrap()).unwrap()).unwrap()
    }

    #[test]
    fn text_content_with_a_secret_is_redacted_and_encoded_again() {
        let file = format!("token = {SECRET}\n");
        let mut v = json!({"type": "file", "encoding": "base64", "content": STANDARD.encode(&file)});
        assert_eq!(redact(&redactor(), &mut v), Found::Redacted);
        assert_eq!(decoded(&v["content"]), "token = [REDACTED]\n");
    }

    #[test]
    fn wiki_pages_blobs_in_lists_and_wrapped_lines_are_found() {
        let enc = STANDARD.encode(format!("a {SECRET} b"));
        let wrapped = format!("{}\n{}", &enc[..10], &enc[10..]);
        let mut v = json!([
            {"title": "Home", "content_base64": enc},
            {"sha": "abc", "encoding": "base64", "content": wrapped.trim_end_matches('=')},
        ]);
        assert_eq!(redact(&redactor(), &mut v), Found::Redacted);
        assert_eq!(decoded(&v[0]["content_base64"]), "a [REDACTED] b");
        assert_eq!(decoded(&v[1]["content"]), "a [REDACTED] b");
    }

    #[test]
    fn binary_content_with_a_secret_is_reported_and_clean_content_left_alone() {
        let mut bytes = vec![0xff, 0x00];
        bytes.extend(SECRET.as_bytes());
        let mut v = json!({"encoding": "base64", "content": STANDARD.encode(&bytes)});
        assert_eq!(redact(&redactor(), &mut v), Found::InBinary);

        let mut v = json!({"encoding": "base64", "content": "not base64 !"});
        assert_eq!(redact(&redactor(), &mut v), Found::InBinary, "undecodable content is withheld");
        let clean = STANDARD.encode("nothing to see");
        let mut v = json!({"encoding": "base64", "content": clean, "other": "not base64 !"});
        let before = v.clone();
        assert_eq!(redact(&redactor(), &mut v), Found::Clean);
        assert_eq!(v, before);
        // `content` without the encoding beside it is plain text, not decoded.
        let mut v = json!({"content": STANDARD.encode(SECRET)});
        let before = v.clone();
        assert_eq!(redact(&redactor(), &mut v), Found::Clean);
        assert_eq!(v, before);
    }

    #[test]
    fn the_result_type_says_which_members_are_base64_whatever_the_forge_sent_beside_them() {
        let c = crate::catalog::embedded(crate::catalog::Flavor::Gitea);
        let defs = c.definitions();
        let contents = Typed { definition: "ContentsResponse".into(), list: false };
        let enc = STANDARD.encode(format!("x {SECRET}"));
        // A file's `content` alone (the encoding left out, or shaped away).
        let mut v = json!({"content": enc});
        assert_eq!(redact_typed(&redactor(), defs, Some(&contents), &mut v), Found::Redacted);
        assert_eq!(decoded(&v["content"]), "x [REDACTED]");
        // Nested: the file of a change (`FileResponse.content`), the entries of a directory.
        let file = Typed { definition: "FileResponse".into(), list: false };
        let mut v = json!({"content": {"content": enc}, "commit": {"message": "m"}});
        assert_eq!(redact_typed(&redactor(), defs, Some(&file), &mut v), Found::Redacted);
        let mut v = json!([{"content": enc}, {"content": null}]);
        assert_eq!(redact_typed(&redactor(), defs, Some(&contents), &mut v), Found::Redacted);
        // Another definition's `content` is text.
        let comment = Typed { definition: "Comment".into(), list: false };
        let mut v = json!({"body": enc, "content": enc});
        assert_eq!(redact_typed(&redactor(), defs, Some(&comment), &mut v), Found::Clean);
    }

    #[test]
    fn only_results_that_mention_base64_are_walked() {
        assert!(may_hold(r#"{"encoding":"base64","content":"..."}"#));
        assert!(may_hold(r#"{"content_base64":"..."}"#));
        assert!(!may_hold(r#"{"content":"hello","encoding":"utf-8"}"#));
    }
}
