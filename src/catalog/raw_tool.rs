//! The raw tool `gitea_api_request`: any route of the API, for what the spec lacks.
//!
//! Same validation, executor, guard and envelope as generated tools. Its path is taken
//! literally (each segment is percent-encoded by us); `%` is refused so that nobody can
//! smuggle `%2F` or double encoding past the path rules, and `..`, `?`, `#` are refused so
//! the path cannot leave `/api/v1` or carry its own query.

use std::sync::Arc;

use serde_json::json;

use super::Flavor;
use super::operation::{Annotations, Target, ToolDef};

/// The raw tool's name (INTERFACE.md).
pub const NAME: &str = "gitea_api_request";

/// Its definition.
pub fn definition(flavor: Flavor) -> ToolDef {
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
            "body": {"description": "JSON request body."}
        },
        "required": ["method", "path"],
        "additionalProperties": false
    });
    let serde_json::Value::Object(schema) = schema else { unreachable!("literal object") };
    let validator = super::schema::compile(&schema).expect("the raw tool schema compiles");
    let name = flavor.display_name();
    ToolDef {
        name: NAME.to_owned(),
        title: format!("{name} API request"),
        description: format!(
            "Call any {name} REST API route (relative to /api/v1) when no dedicated tool fits. \
             Prefer the tool named after the operation: it validates arguments and encodes path \
             values such as a tag 'rel/1.0' that this raw path cannot express."
        ),
        input_schema: Arc::new(schema),
        annotations: Annotations { read_only: false, destructive: true, idempotent: false },
        validator,
        target: Target::Raw,
    }
}
