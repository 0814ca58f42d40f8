//! File arguments `{content_base64, filename, content_type}` → multipart parts.
//!
//! The size is judged from the base64 length *before* decoding, so an oversized upload
//! costs nothing but a length check.

use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::{Map, Value};

use crate::error::{CallError, ErrorKind};

/// Standard alphabet; padding optional, since models often drop it.
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A decoded file ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePart {
    pub bytes: Vec<u8>,
    pub filename: String,
    pub content_type: String,
}

/// The decoded size a base64 text of `len` significant characters would have.
pub(crate) fn decoded_len(len: usize, padding: usize) -> u64 {
    ((len as u64) * 3 / 4).saturating_sub(padding as u64)
}

/// Decode the file argument `name` (already schema-checked), refusing it above `max_bytes`.
pub(crate) fn decode(name: &str, arg: &Map<String, Value>, max_bytes: u64) -> Result<FilePart, CallError> {
    let text = arg.get("content_base64").and_then(Value::as_str).unwrap_or("");
    let significant = text.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    let padding = text.bytes().rev().filter(|b| !b.is_ascii_whitespace()).take_while(|&b| b == b'=').count();
    let size = decoded_len(significant, padding);
    if size > max_bytes {
        return Err(CallError::local(
            ErrorKind::PayloadTooLarge,
            format!(
                "the upload `{name}` would be {size} bytes, over MAX_BINARY_BYTES ({max_bytes}); upload a smaller file or raise MAX_BINARY_BYTES"
            ),
        ));
    }
    let compact: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let bytes = LENIENT.decode(&compact).map_err(|e| {
        CallError::invalid_argument(
            format!("/{name}/content_base64"),
            format!("`{name}.content_base64` is not valid base64 ({e})"),
        )
    })?;
    let text_of = |k: &str| arg.get(k).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    Ok(FilePart {
        bytes,
        filename: text_of("filename").unwrap_or("upload.bin").to_owned(),
        content_type: text_of("content_type").unwrap_or("application/octet-stream").to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn arg(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn decodes_with_defaults_and_tolerates_wrapping_and_missing_padding() {
        let p = decode("attachment", &arg(json!({"content_base64": "aGVs\nbG8"})), 100).unwrap();
        assert_eq!(p.bytes, b"hello");
        assert_eq!(
            (p.filename.as_str(), p.content_type.as_str()),
            ("upload.bin", "application/octet-stream")
        );
    }

    #[test]
    fn size_limit_is_exact_at_the_boundary() {
        // 8 base64 chars with one '=' decode to 5 bytes.
        assert!(decode("a", &arg(json!({"content_base64": "aGVsbG8="})), 5).is_ok());
        let e = decode("a", &arg(json!({"content_base64": "aGVsbG8="})), 4).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::PayloadTooLarge));
    }

    #[test]
    fn oversized_invalid_base64_is_refused_for_size_not_decoded() {
        // Not base64 at all, but the length alone decides: the decoder never runs.
        let huge = "!".repeat(4_000);
        let e = decode("a", &arg(json!({"content_base64": huge})), 1000).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::PayloadTooLarge));
        if let CallError::Result(f) = e {
            assert_eq!(f.status, None);
        }
    }

    #[test]
    fn invalid_base64_points_at_the_field() {
        let e = decode("attachment", &arg(json!({"content_base64": "@@@@"})), 100).unwrap_err();
        let CallError::Result(f) = e else { panic!() };
        assert_eq!(f.path.as_deref(), Some("/attachment/content_base64"));
    }
}
