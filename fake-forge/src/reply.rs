//! Buffered responses (everything but streaming scripts) and Gitea's error shapes.
//!
//! Handlers build a [`Reply`]; the server turns it into a hyper response. Gitea answers JSON with
//! `application/json;charset=utf-8` and errors as `{"message", "url"}` where `url` points at the
//! swagger page under `ROOT_URL`, so clients that show error messages see the real shape.

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

/// The response body type of the server.
pub(crate) type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// Gitea's JSON content type, byte for byte.
pub(crate) const JSON: &str = "application/json;charset=utf-8";

/// A complete, buffered response.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl Reply {
    /// A JSON body.
    pub(crate) fn json(status: u16, value: &Value) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), JSON.into())],
            body: Bytes::from(value.to_string()),
        }
    }

    /// A body with an explicit content type.
    pub(crate) fn bytes(status: u16, content_type: &str, body: impl Into<Bytes>) -> Reply {
        Reply { status, headers: vec![("content-type".into(), content_type.into())], body: body.into() }
    }

    /// No body and no content type (204, 405).
    pub(crate) fn empty(status: u16) -> Reply {
        Reply { status, headers: Vec::new(), body: Bytes::new() }
    }

    /// Gitea's `APIError` shape: `{"message", "url"}`.
    pub(crate) fn error(status: u16, root_url: &str, message: &str) -> Reply {
        Reply::json(status, &json!({"message": message, "url": format!("{root_url}api/swagger")}))
    }

    /// Gitea's `APIErrorNotFound` shape.
    pub(crate) fn not_found(root_url: &str) -> Reply {
        Reply::json(
            404,
            &json!({
                "errors": null,
                "message": "The target couldn't be found.",
                "url": format!("{root_url}api/swagger"),
            }),
        )
    }

    /// Adds a header.
    pub(crate) fn header(mut self, name: &str, value: impl Into<String>) -> Reply {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// Converts to a hyper response.
    pub(crate) fn into_response(self) -> http::Response<Body> {
        let body = Full::new(self.body).map_err(|never| match never {}).boxed_unsync();
        build(self.status, &self.headers, body)
    }
}

/// A response with `status`, `headers` (invalid ones skipped) and `body`.
pub(crate) fn build(status: u16, headers: &[(String, String)], body: Body) -> http::Response<Body> {
    let mut builder =
        http::Response::builder().status(http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK));
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) =
            (http::HeaderName::from_bytes(name.as_bytes()), http::HeaderValue::from_str(value))
        {
            builder = builder.header(n, v);
        }
    }
    builder.body(body).unwrap_or_else(|_| {
        let empty = Full::new(Bytes::new()).map_err(|never| match never {});
        http::Response::new(empty.boxed_unsync())
    })
}
