//! The answers the HTTP transports give on their own, before or beside the MCP library: a
//! JSON-RPC error with an HTTP status, and the 401 with the challenge a client signs in from.
//! Every layer and the session registry answer with these, so the words and headers of a
//! refusal are the same wherever it is made.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::oauth::OAuth;

/// A JSON-RPC error response with an HTTP status.
pub(crate) fn refuse(status: StatusCode, code: i64, message: &str) -> Response {
    answer(status, &json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}}))
}

/// The answer to a request the authentication layer did not pass (it stands before every
/// layer that reads the identity, `layers::mcp_layers`): fail closed.
pub(crate) fn no_identity() -> Response {
    refuse(StatusCode::INTERNAL_SERVER_ERROR, -32603, "the request carries no identity")
}

/// A JSON body with an HTTP status.
pub(crate) fn answer(status: StatusCode, body: &serde_json::Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// A 401 with the challenge, for a server with or without sign-in.
pub(crate) fn unauthorized_for(oauth: Option<&OAuth>, message: &str) -> Response {
    let mut r = refuse(StatusCode::UNAUTHORIZED, -32001, message);
    let challenge = match oauth {
        Some(oauth) => format!(
            r#"Bearer realm="aegis-gitea-mcp", error="invalid_token", error_description="{}", resource_metadata="{}""#,
            quoted(message),
            oauth.resource_metadata_url()
        ),
        None => r#"Bearer realm="aegis-gitea-mcp", error="invalid_token""#.to_owned(),
    };
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r
}

/// Text fit for a quoted-string of a header: printable ASCII without `"` and `\`.
fn quoted(text: &str) -> String {
    text.chars().filter(|c| c.is_ascii_graphic() || *c == ' ').filter(|c| *c != '"' && *c != '\\').collect()
}
