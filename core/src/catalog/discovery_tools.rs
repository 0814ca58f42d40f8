//! The discovery tools: find an operation by words, read its full input schema, call it.
//!
//! With them a client that lists only the `core` toolset still reaches every operation of
//! the forge — validated, encoded, guarded and enveloped exactly like a listed tool —
//! while paying for three definitions instead of five hundred. The policy (`READ_ONLY`,
//! `ENABLED_TOOLS`, `DISABLED_TOOLS`, and a request's narrowing headers) applies to what
//! they find and call, just as to the listed tools.

use serde_json::json;

use super::Flavor;
use super::tool::{Annotations, Target, ToolDef};

/// Search the operations.
pub(crate) const SEARCH: &str = "gitea_search_operations";
/// One operation's full input schema.
pub(crate) const SCHEMA: &str = "gitea_get_operation_schema";
/// Call an operation by its operationId.
pub(crate) const CALL: &str = "gitea_call_operation";

/// Most results one search returns.
pub(crate) const MAX_RESULTS: u64 = 25;

/// The three definitions.
pub(crate) fn definitions(flavor: Flavor) -> [ToolDef; 3] {
    let name = flavor.display_name();
    [
        ToolDef::builtin(
            SEARCH,
            "Search API operations",
            format!(
                "Find {name} API operations by words (e.g. \"merge a pull request\", \"list workflow runs\"), \
                 among all of them, not only the tools listed; then read one with {SCHEMA} and run it with {CALL}."
            ),
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "description": "What you want to do, in words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "default": 8}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            Annotations { read_only: true, destructive: false, idempotent: true },
            Target::SearchOperations,
        ),
        ToolDef::builtin(
            SCHEMA,
            "Get an operation's schemas",
            format!(
                "The full description and input JSON Schema of a {name} API operation, by operation_id; \
                 with `output`, also the schema of its result in that shape. Its arguments go to {CALL} as `arguments`."
            ),
            json!({
                "type": "object",
                "properties": {
                    "operation_id": {"type": "string", "minLength": 1, "description": "e.g. repoMergePullRequest"},
                    "output": {"enum": ["compact", "full"]}
                },
                "required": ["operation_id"],
                "additionalProperties": false
            }),
            Annotations { read_only: true, destructive: false, idempotent: true },
            Target::OperationSchema,
        ),
        ToolDef::builtin(
            CALL,
            "Call an API operation",
            format!(
                "Call any {name} API operation by operation_id with `arguments` as its input schema \
                 describes (see {SCHEMA}). Same checks and result as the operation's own tool."
            ),
            json!({
                "type": "object",
                "properties": {
                    "operation_id": {"type": "string", "minLength": 1},
                    "arguments": {"type": "object", "description": "The operation's arguments."}
                },
                "required": ["operation_id"],
                "additionalProperties": false
            }),
            // What it does depends on the operation called: assume the worst.
            Annotations { read_only: false, destructive: true, idempotent: false },
            Target::CallOperation,
        ),
    ]
}
