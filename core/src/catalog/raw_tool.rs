//! The raw tool `gitea_api_request`: any route of the API, for what the spec lacks.
//!
//! Same validation, executor, guard and envelope as generated tools. Its path is taken
//! literally (each segment is percent-encoded by us); `%` is refused so that nobody can
//! smuggle `%2F` or double encoding past the path rules, and `..`, `?`, `#` are refused so
//! the path cannot leave `/api/v1` or carry its own query.

use serde_json::json;

use super::Flavor;
use super::tool::{Annotations, Target, ToolDef};

/// The raw tool's name, as clients and the README know it.
pub const NAME: &str = "gitea_api_request";

/// Its definition.
pub(crate) fn definition(flavor: Flavor) -> ToolDef {
    let schema = json!({
        "type": "object",
        "properties": {
            "method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]},
            "path": {
                "type": "string",
                "minLength": 2,
                "description": "Path relative to /api/v1, starting with '/', e.g. /repos/alice/demo/issues. Written literally, not percent-encoded: '%', '?', '#' and '..' segments are refused."
            },
            "query": {
                "type": "object",
                "description": "Query parameters; an array value repeats the parameter.",
                "additionalProperties": {
                    "type": ["string", "number", "integer", "boolean", "array"],
                    "items": {"type": ["string", "number", "integer", "boolean"]}
                }
            },
            "body": {"description": "Request body, sent as JSON; a string sent to a route that takes only text (/markdown/raw) goes as it is."}
        },
        "required": ["method", "path"],
        "additionalProperties": false
    });
    let name = flavor.display_name();
    ToolDef::builtin(
        NAME,
        &format!("{name} API request"),
        format!(
            "Call any {name} REST API route (relative to /api/v1) when no operation fits. \
             Prefer an operation (a tool, or gitea_call_operation): it validates arguments and \
             encodes path values such as a tag 'rel/1.0' that this raw path cannot express."
        ),
        schema,
        Annotations { read_only: false, destructive: true, idempotent: false },
        Target::Raw,
    )
}
