//! A small `multipart/form-data` parser for attachment uploads.
//!
//! Only what the upload operations need: split the body at the boundary, read each part's
//! `Content-Disposition` (`name`, `filename`, `filename*`) and `Content-Type`, keep its bytes.
//! The raw body is recorded separately, so tests can still check the exact encoding.

use percent_encoding::percent_decode_str;

/// One part of a multipart body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Part {
    pub name: String,
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub data: Vec<u8>,
}

/// The `boundary` parameter of a `multipart/form-data` content type.
pub(crate) fn boundary(content_type: &str) -> Option<String> {
    let (mime, params) = content_type.split_once(';')?;
    if !mime.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params_of(params)
        .into_iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v)
        .filter(|b| !b.is_empty())
}

/// Splits `body` into parts; `None` if it is not a well-formed multipart body.
pub(crate) fn parse(body: &[u8], boundary: &str) -> Option<Vec<Part>> {
    let delimiter = format!("--{boundary}").into_bytes();
    let mut rest = &body[find(body, &delimiter)? + delimiter.len()..];
    let mut parts = Vec::new();
    loop {
        if rest.starts_with(b"--") {
            return Some(parts);
        }
        rest = rest.strip_prefix(b"\r\n")?;
        let header_end = find(rest, b"\r\n\r\n")?;
        let headers = String::from_utf8_lossy(&rest[..header_end]).into_owned();
        rest = &rest[header_end + 4..];
        let mut end_marker = b"\r\n".to_vec();
        end_marker.extend_from_slice(&delimiter);
        let data_end = find(rest, &end_marker)?;
        parts.push(part(&headers, rest[..data_end].to_vec()));
        rest = &rest[data_end + end_marker.len()..];
    }
}

fn part(headers: &str, data: Vec<u8>) -> Part {
    let mut part = Part { name: String::new(), filename: None, content_type: None, data };
    for line in headers.split("\r\n") {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.trim().eq_ignore_ascii_case("content-type") {
            part.content_type = Some(value.trim().to_string());
        } else if name.trim().eq_ignore_ascii_case("content-disposition") {
            let params = value.split_once(';').map(|(_, p)| p).unwrap_or("");
            for (k, v) in params_of(params) {
                match k.to_ascii_lowercase().as_str() {
                    "name" => part.name = v,
                    "filename" if part.filename.is_none() => part.filename = Some(v),
                    "filename*" => part.filename = Some(ext_value(&v)),
                    _ => {}
                }
            }
        }
    }
    part
}

/// `a=1; b="x; y"` -> pairs, quotes removed (backslash escapes honoured).
fn params_of(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ';' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            return out;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
            chars.by_ref().take_while(|c| *c != ';').for_each(drop);
        } else {
            value = chars.by_ref().take_while(|c| *c != ';').collect();
        }
        out.push((key.trim().to_string(), value.trim().to_string()));
    }
}

/// RFC 5987 `utf-8''a%20b` -> `a b`.
fn ext_value(v: &str) -> String {
    let encoded = v.splitn(3, '\'').nth(2).unwrap_or(v);
    percent_decode_str(encoded).decode_utf8_lossy().into_owned()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_file_part() {
        let ct = "multipart/form-data; boundary=\"XyZ\"";
        let b = boundary(ct).unwrap();
        assert_eq!(b, "XyZ");
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n\
--XyZ\r\nContent-Disposition: form-data; name=\"attachment\"; filename=\"a;b.txt\"\r\n\
Content-Type: text/plain\r\n\r\nline1\r\nline2\r\n--XyZ--\r\n";
        let parts = parse(body, &b).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "note");
        assert_eq!(parts[0].data, b"hi");
        assert_eq!(parts[1].filename.as_deref(), Some("a;b.txt"));
        assert_eq!(parts[1].content_type.as_deref(), Some("text/plain"));
        assert_eq!(parts[1].data, b"line1\r\nline2");
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse(b"nothing here", "XyZ").is_none());
        assert!(boundary("application/json").is_none());
    }
}
