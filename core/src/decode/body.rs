//! Bodies → `data`: JSON, text, or `{content_base64, content_type, size}`.
//!
//! The media type the forge sends decides first; the kind the spec (with its fixes)
//! expects decides when the media type is missing or generic. JSON that does not parse, or
//! is nested deeper than `MAX_JSON_DEPTH`, comes back as text. A body whose media type is
//! text stays text even with bytes that are not UTF-8 (a CI log with a stray byte): those
//! bytes become U+FFFD, so that the text passes the guard's redaction — as base64 it could
//! not be redacted. No step recurses on the input, so no input can overflow the stack.

use base64::Engine;
use serde_json::{Value, json};

use super::json::{self, Elided, Keep};
use crate::catalog::ResponseKind;

/// JSON nested deeper than this is returned as text: no answer can make a stage recurse deeply.
pub const MAX_JSON_DEPTH: usize = 100;

/// Size limits for bodies.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `MAX_BINARY_BYTES`: largest binary body returned as base64.
    pub max_binary: u64,
    /// Largest JSON or text body read at all.
    pub max_response: u64,
}

/// The media type class of a `Content-Type` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Media {
    Json,
    Text,
    Other,
    Missing,
}

/// Classify a `Content-Type` header value.
pub fn media(content_type: Option<&str>) -> Media {
    let Some(ct) = content_type else {
        return Media::Missing;
    };
    let essence = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if essence.is_empty() {
        Media::Missing
    } else if essence == "application/json" || essence.ends_with("+json") {
        Media::Json
    } else if essence.starts_with("text/") {
        Media::Text
    } else {
        Media::Other
    }
}

/// One of the two body limits, with the setting that sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimit {
    pub bytes: u64,
    /// `MAX_BINARY_BYTES` or `MAX_RESPONSE_BYTES`: what to raise when the limit is hit.
    pub setting: &'static str,
}

/// How many bytes of a body may be read before the answer is refused as too large, and
/// which setting says so: binary bodies are bounded by `MAX_BINARY_BYTES`, JSON and text by
/// `MAX_RESPONSE_BYTES`.
pub fn read_limit(expect: ResponseKind, content_type: Option<&str>, limits: Limits) -> ReadLimit {
    let binary = ReadLimit { bytes: limits.max_binary, setting: "MAX_BINARY_BYTES" };
    let response = ReadLimit { bytes: limits.max_response, setting: "MAX_RESPONSE_BYTES" };
    match (media(content_type), expect) {
        (Media::Json | Media::Text, _) => response,
        (Media::Other, ResponseKind::Text) => response,
        (Media::Other, _) => binary,
        (Media::Missing, ResponseKind::Binary) => binary,
        (Media::Missing, _) => response,
    }
}

/// The decoded body.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// No body.
    Empty,
    Json(Value),
    Text(String),
    Binary {
        bytes: Vec<u8>,
        content_type: String,
    },
}

impl Decoded {
    /// The `data` member of the envelope.
    pub fn into_data(self) -> Value {
        match self {
            Decoded::Empty => Value::Null,
            Decoded::Json(v) => v,
            Decoded::Text(s) => Value::String(s),
            Decoded::Binary { bytes, content_type } => json!({
                "content_base64": base64::engine::general_purpose::STANDARD.encode(&bytes),
                "content_type": content_type,
                "size": bytes.len(),
            }),
        }
    }
}

/// Decode a body, keeping of JSON what `keep` allows (see `json.rs`); what was not kept.
pub fn decode(
    expect: ResponseKind,
    content_type: Option<&str>,
    bytes: Vec<u8>,
    keep: Keep,
) -> (Decoded, Elided) {
    if bytes.is_empty() {
        return (Decoded::Empty, Elided::default());
    }
    let m = media(content_type);
    let binary_type = || match m {
        Media::Other => content_type.unwrap_or("application/octet-stream").to_owned(),
        _ => "application/octet-stream".to_owned(),
    };
    let try_json = m == Media::Json || (m == Media::Missing && expect != ResponseKind::Binary);
    let text_wanted = matches!(m, Media::Json | Media::Text)
        || (m == Media::Missing && expect != ResponseKind::Binary)
        || (m == Media::Other && expect == ResponseKind::Text);
    if !text_wanted {
        return (Decoded::Binary { bytes, content_type: binary_type() }, Elided::default());
    }
    let text = match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) if m == Media::Missing && expect != ResponseKind::Text => {
            // Nothing said this is text, and it is not: keep the bytes.
            return (
                Decoded::Binary { bytes: e.into_bytes(), content_type: binary_type() },
                Elided::default(),
            );
        }
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    if try_json && !too_deep(text.as_bytes(), MAX_JSON_DEPTH) {
        if let Ok(parsed) = json::parse(&text, keep) {
            return (Decoded::Json(parsed.value), parsed.elided);
        }
    }
    (Decoded::Text(text), Elided::default())
}

/// Whether JSON text nests arrays/objects deeper than `max`. One pass, no recursion;
/// brackets inside strings do not count.
pub fn too_deep(bytes: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    !json::structure(bytes, |b| {
        match b {
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        depth <= max
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decode keeping everything (the keeping itself is `json.rs`'s to test).
    fn decode(expect: ResponseKind, content_type: Option<&str>, bytes: Vec<u8>) -> Decoded {
        super::decode(expect, content_type, bytes, Keep { items: usize::MAX, values: usize::MAX }).0
    }

    fn nested(depth: usize) -> Vec<u8> {
        let mut s = "[".repeat(depth);
        s.push_str(&"]".repeat(depth));
        s.into_bytes()
    }

    #[test]
    fn depth_100_is_json_and_101_is_text() {
        assert!(matches!(
            decode(ResponseKind::Json, Some("application/json"), nested(100)),
            Decoded::Json(_)
        ));
        match decode(ResponseKind::Json, Some("application/json"), nested(101)) {
            Decoded::Text(t) => assert_eq!(t.len(), 202),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_million_levels_do_not_overflow_the_stack() {
        let d = decode(ResponseKind::Json, Some("application/json"), nested(1_000_000));
        assert!(matches!(d, Decoded::Text(_)));
        let objects = "{\"a\":".repeat(200_000).into_bytes();
        assert!(matches!(decode(ResponseKind::Json, None, objects), Decoded::Text(_)));
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let s = format!("{{\"a\":\"{}\\\"{}\"}}", "[".repeat(500), "{".repeat(500));
        assert!(!too_deep(s.as_bytes(), 2));
        assert!(matches!(
            decode(ResponseKind::Json, Some("application/json"), s.into_bytes()),
            Decoded::Json(_)
        ));
    }

    #[test]
    fn media_type_decides_then_the_expected_kind() {
        assert_eq!(
            decode(ResponseKind::Binary, Some("text/plain; charset=utf-8"), b"# hi".to_vec()),
            Decoded::Text("# hi".into())
        );
        assert!(matches!(
            decode(ResponseKind::Json, Some("application/zip"), b"PK\x03\x04".to_vec()),
            Decoded::Binary { .. }
        ));
        assert_eq!(
            decode(ResponseKind::Text, Some("application/octet-stream"), b"log line".to_vec()),
            Decoded::Text("log line".into())
        );
        assert!(matches!(decode(ResponseKind::Binary, None, b"{}".to_vec()), Decoded::Binary { .. }));
        assert_eq!(
            decode(ResponseKind::Json, None, b"{\"a\":1}".to_vec()),
            Decoded::Json(serde_json::json!({"a": 1}))
        );
        assert_eq!(decode(ResponseKind::Json, Some("application/json"), Vec::new()), Decoded::Empty);
    }

    #[test]
    fn malformed_json_is_kept_as_text_and_text_media_types_stay_text() {
        assert_eq!(
            decode(ResponseKind::Json, Some("application/json"), b"{oops".to_vec()),
            Decoded::Text("{oops".into())
        );
        // One stray byte keeps JSON JSON and text text; it becomes U+FFFD.
        assert_eq!(
            decode(ResponseKind::Json, Some("application/json"), b"{\"log\":\"a\xffb\"}".to_vec()),
            Decoded::Json(serde_json::json!({"log": "a\u{fffd}b"}))
        );
        assert_eq!(
            decode(ResponseKind::Text, Some("text/plain"), b"line \xff\xfe".to_vec()),
            Decoded::Text("line \u{fffd}\u{fffd}".into())
        );
        assert_eq!(
            decode(ResponseKind::Text, None, b"log \xff".to_vec()),
            Decoded::Text("log \u{fffd}".into())
        );
        // Without a media type, bytes that are not UTF-8 stay bytes unless text was expected.
        let data = decode(ResponseKind::Json, None, vec![0xff, 0xfe, 0x00]).into_data();
        assert_eq!((data["size"].as_u64(), data["content_base64"].as_str()), (Some(3), Some("//4A")));
    }

    #[test]
    fn read_limits_follow_the_kind_and_name_their_setting() {
        let l = Limits { max_binary: 10, max_response: 1000 };
        let lim = |e, ct| {
            let r = read_limit(e, ct, l);
            (r.bytes, r.setting)
        };
        let (bin, resp) = ((10, "MAX_BINARY_BYTES"), (1000, "MAX_RESPONSE_BYTES"));
        assert_eq!(lim(ResponseKind::Binary, Some("application/octet-stream")), bin);
        assert_eq!(lim(ResponseKind::Binary, Some("text/plain")), resp);
        assert_eq!(lim(ResponseKind::Text, Some("application/octet-stream")), resp);
        assert_eq!(lim(ResponseKind::Binary, None), bin);
        assert_eq!(lim(ResponseKind::Json, None), resp);
        assert_eq!(lim(ResponseKind::Text, None), resp);
    }
}
