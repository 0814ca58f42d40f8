//! What the fake received, kept byte for byte so tests can assert on the client's wire format.
//!
//! The path and query are stored exactly as they arrived (percent-encoding untouched): tests
//! look at `raw_path` to see whether a client sent `/` or `%2F`. Decoded views are offered as
//! helpers next to the raw data, never instead of it.

use percent_encoding::percent_decode;
use serde_json::Value;

/// One request as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The HTTP method, e.g. `GET`.
    pub method: String,
    /// The path exactly as received, e.g. `/api/v1/repos/o/r/releases/tags/rel%2F1.0`.
    pub raw_path: String,
    /// The query exactly as received; `None` when there was no `?`.
    pub raw_query: Option<String>,
    /// All headers in arrival order: lower-case names, values decoded as lossy UTF-8.
    pub headers: Vec<(String, String)>,
    /// The request body.
    pub body: Vec<u8>,
    /// The spec operation the router matched (`None` when no route matched).
    pub operation_id: Option<String>,
    /// The captured path parameters of the matched route, percent-decoded, in template order.
    pub path_params: Vec<(String, String)>,
}

impl Recorded {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON, if it is JSON.
    pub fn json_body(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The query decoded like a form (`+` is a space), order and repeated keys kept.
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        self.raw_query.as_deref().map(parse_query).unwrap_or_default()
    }

    /// A JSON view for out-of-process tests (`GET /_fake/requests`): the fields above, with
    /// `headers` and `path_params` as `[name, value]` pairs, the body as `body_base64` and, when
    /// it is UTF-8, also as `body_text`.
    pub fn to_json(&self) -> Value {
        use base64::Engine;
        let pairs = |v: &[(String, String)]| -> Vec<Value> {
            v.iter().map(|(k, v)| serde_json::json!([k, v])).collect()
        };
        serde_json::json!({
            "method": self.method,
            "raw_path": self.raw_path,
            "raw_query": self.raw_query,
            "headers": pairs(&self.headers),
            "body_base64": base64::engine::general_purpose::STANDARD.encode(&self.body),
            "body_text": std::str::from_utf8(&self.body).ok(),
            "operation_id": self.operation_id,
            "path_params": pairs(&self.path_params),
        })
    }

    /// The value of path parameter `name`, decoded.
    pub fn path_param(&self, name: &str) -> Option<&str> {
        self.path_params.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Decodes `a=1&b=x+y&a=2` into pairs, as Go's `url.ParseQuery` does (minus its errors).
pub(crate) fn parse_query(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (form_decode(k), form_decode(v))
        })
        .collect()
}

fn form_decode(s: &str) -> String {
    let plus_as_space = s.replace('+', " ");
    percent_decode(plus_as_space.as_bytes()).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_pairs_keep_order_and_repeats() {
        let r = Recorded {
            method: "GET".into(),
            raw_path: "/".into(),
            raw_query: Some("b=x+y&a=1&a=%2F&flag".into()),
            headers: vec![("x-a".into(), "1".into())],
            body: b"{\"k\":1}".to_vec(),
            operation_id: None,
            path_params: Vec::new(),
        };
        let pairs = r.query_pairs();
        assert_eq!(pairs[0], ("b".into(), "x y".into()));
        assert_eq!(pairs[2], ("a".into(), "/".into()));
        assert_eq!(pairs[3], ("flag".into(), "".into()));
        assert_eq!(r.header("X-A"), Some("1"));
        assert_eq!(r.json_body().unwrap()["k"], 1);
    }
}
