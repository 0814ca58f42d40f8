//! The generic answer for operations the in-memory model does not implement.
//!
//! A sweep test calls every operation of the spec; each one must get a plausible success without
//! hand-written code. The answer is derived from the spec: the first 2xx status it declares
//! (200 if none), and a body matching that response's schema and the operation's `produces`:
//! `[]` for arrays, `{}` for objects, 4 binary bytes for files and non-JSON binary types, `ok`
//! for text-only operations, nothing for 204 or a missing schema.

use serde_json::Value;

use crate::reply::Reply;
use crate::util::resolve;

/// The body kind of a fallback answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FallbackBody {
    /// No body, no content type.
    Empty,
    /// A JSON value (`[]`, `{}`, `false`, `""`) with this content type.
    Json(Value, String),
    /// `\x00\x01\x02\x03` as `application/octet-stream`.
    Binary,
    /// `ok` as `text/plain; charset=utf-8`.
    Text,
}

/// What the fallback answers for one operation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fallback {
    pub status: u16,
    pub body: FallbackBody,
}

impl Fallback {
    /// Derives the answer from the operation `op` of `spec`; `produces` is the effective list.
    pub(crate) fn from_spec(spec: &Value, op: &Value, produces: &[String]) -> Fallback {
        let responses = op["responses"].as_object();
        let success = responses.into_iter().flatten().find_map(|(code, r)| {
            let code: u16 = code.parse().ok()?;
            (200..300).contains(&code).then_some((code, r))
        });
        let Some((status, response)) = success else {
            return Fallback { status: 200, body: FallbackBody::Empty };
        };
        let schema = resolve(spec, response).get("schema").map(|s| resolve(spec, s));
        let body = match schema {
            _ if status == 204 => FallbackBody::Empty,
            None if is_binary_only(produces) => FallbackBody::Binary,
            None => FallbackBody::Empty,
            Some(schema) => body_for(schema, produces),
        };
        Fallback { status, body }
    }

    /// The reply, with `X-Total-Count: 0` for paginated operations.
    pub(crate) fn reply(&self, paginated: bool) -> Reply {
        let reply = match &self.body {
            FallbackBody::Empty => Reply::empty(self.status),
            FallbackBody::Json(v, ct) => Reply::bytes(self.status, ct, v.to_string()),
            FallbackBody::Binary => {
                Reply::bytes(self.status, "application/octet-stream", &b"\x00\x01\x02\x03"[..])
            }
            FallbackBody::Text => Reply::bytes(self.status, "text/plain; charset=utf-8", "ok"),
        };
        if paginated {
            reply.header("x-total-count", "0").header("access-control-expose-headers", "X-Total-Count")
        } else {
            reply
        }
    }
}

fn body_for(schema: &Value, produces: &[String]) -> FallbackBody {
    let json_type = produces.iter().find(|p| is_json(p));
    let ty = schema.get("type").and_then(Value::as_str);
    if ty == Some("file") || (json_type.is_none() && is_binary_only(produces)) {
        return FallbackBody::Binary;
    }
    let Some(json_type) = json_type else {
        return FallbackBody::Text;
    };
    let content_type =
        if json_type == "application/json" { crate::reply::JSON.to_string() } else { json_type.clone() };
    let value = match ty {
        Some("array") => Value::Array(Vec::new()),
        Some("boolean") => Value::Bool(false),
        Some("string") => Value::String(String::new()),
        Some("integer") | Some("number") => Value::from(0),
        _ => Value::Object(Default::default()),
    };
    FallbackBody::Json(value, content_type)
}

fn is_json(content_type: &str) -> bool {
    content_type == "application/json" || content_type.ends_with("+json")
}

/// True when every produced type is neither JSON nor text.
fn is_binary_only(produces: &[String]) -> bool {
    !produces.is_empty() && produces.iter().all(|p| !is_json(p) && !p.starts_with("text/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fb(op: Value, produces: &[&str]) -> Fallback {
        let spec = json!({
            "responses": {"List": {"schema": {"type": "array", "items": {}}}, "Empty": {"description": "x"}},
            "definitions": {"Thing": {"type": "object"}}
        });
        let produces: Vec<String> = produces.iter().map(|s| s.to_string()).collect();
        Fallback::from_spec(&spec, &op, &produces)
    }

    #[test]
    fn shapes() {
        let j = &["application/json"];
        let list = fb(json!({"responses": {"200": {"$ref": "#/responses/List"}}}), j);
        assert_eq!(list.body, FallbackBody::Json(json!([]), crate::reply::JSON.into()));
        let obj = fb(json!({"responses": {"201": {"schema": {"$ref": "#/definitions/Thing"}}}}), j);
        assert_eq!((obj.status, obj.body), (201, FallbackBody::Json(json!({}), crate::reply::JSON.into())));
        let none = fb(json!({"responses": {"204": {"$ref": "#/responses/Empty"}, "404": {}}}), j);
        assert_eq!((none.status, none.body), (204, FallbackBody::Empty));
        let redirect = fb(json!({"responses": {"302": {}}}), j);
        assert_eq!((redirect.status, redirect.body), (200, FallbackBody::Empty));
        let file =
            fb(json!({"responses": {"200": {"schema": {"type": "file"}}}}), &["application/octet-stream"]);
        assert_eq!(file.body, FallbackBody::Binary);
        let zip = fb(json!({"responses": {"200": {"description": "x"}}}), &["application/zip"]);
        assert_eq!(zip.body, FallbackBody::Binary);
        let text = fb(json!({"responses": {"200": {"schema": {"type": "string"}}}}), &["text/html"]);
        assert_eq!(text.body, FallbackBody::Text);
    }
}
