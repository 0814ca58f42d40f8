//! What the discovery tools answer (their definitions are in `catalog/discovery_tools.rs`).
//!
//! Search and schema answers come from the catalog alone — no forge request, no identity —
//! as a plain JSON object holding nothing the client sent; the call's guard then redacts and
//! bounds it like any result (`call.rs`). A call names another operation; `call.rs` then runs
//! that operation's tool through the whole pipeline, so nothing here sends anything.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::server::Server;
use aegis_core::catalog::{Target, ToolDef, discovery_tools};
use aegis_core::envelope;
use aegis_core::error::{CallError, ErrorKind};
use aegis_core::policy::Narrowing;
use aegis_core::shape::Shape;
use aegis_core::shape::schema::data_schema;

/// The answer of the search or schema tool.
pub fn answer(
    server: &Server,
    narrowing: &Narrowing,
    tool: &ToolDef,
    args: &Map<String, Value>,
) -> Result<Value, CallError> {
    let value = match tool.target {
        Target::SearchOperations => search(server, narrowing, args),
        Target::OperationSchema => {
            let target = operation(server, narrowing, args)?;
            if let Some(why) = server.refusal(narrowing, target, &Map::new()) {
                return Err(CallError::local(ErrorKind::Denied, why));
            }
            let output = args.get("output").and_then(Value::as_str).and_then(Shape::parse);
            schema(server, narrowing, target, output)
        }
        _ => unreachable!("only the search and schema tools are answered here"),
    };
    Ok(value)
}

/// The operation `gitea_call_operation` names (`args` without its `arguments`, which the
/// caller has taken out to run the operation with).
pub fn target<'a>(
    server: &'a Server,
    narrowing: &Narrowing,
    args: &Map<String, Value>,
) -> Result<&'a Arc<ToolDef>, CallError> {
    operation(server, narrowing, args)
}

/// The operation named by `operation_id`; an unknown name suggests the nearest allowed ones.
/// The name is quoted as given, unescaped, so that the guard's redaction still sees any
/// secret in it.
fn operation<'a>(
    server: &'a Server,
    narrowing: &Narrowing,
    args: &Map<String, Value>,
) -> Result<&'a Arc<ToolDef>, CallError> {
    let id = args.get("operation_id").and_then(Value::as_str).unwrap_or("");
    match server.catalog.get(id) {
        Some(t) if t.operation().is_some() => Ok(t),
        _ => {
            let allowed = |t: &ToolDef| server.refusal(narrowing, t, &Map::new()).is_none();
            let near: Vec<&str> =
                server.catalog.search(id, 3, allowed).into_iter().map(|t| t.name.as_str()).collect();
            let hint =
                if near.is_empty() { String::new() } else { format!(" Did you mean: {}?", near.join(", ")) };
            Err(CallError::local(
                ErrorKind::InvalidArguments,
                format!(
                    "\"{id}\" is not an operation of this {} API.{hint} Find operations with {}.",
                    server.catalog.flavor.display_name(),
                    discovery_tools::SEARCH
                ),
            ))
        }
    }
}

fn search(server: &Server, narrowing: &Narrowing, args: &Map<String, Value>) -> Value {
    let query = args.get("query").and_then(Value::as_str).unwrap_or("");
    // `2.0` is an integer to JSON Schema: take it as 2.
    let limit = args
        .get("limit")
        .and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)))
        .unwrap_or(8)
        .clamp(1, discovery_tools::MAX_RESULTS);
    // Operations the policy refuses are not found: read-only hides every write.
    let hits =
        server.catalog.search(query, limit as usize, |t| server.refusal(narrowing, t, &Map::new()).is_none());
    let results: Vec<Value> = hits
        .into_iter()
        .map(|t| {
            let op = t.operation().expect("search finds operations");
            json!({
                "operation_id": t.name,
                "method": op.method.as_str(),
                "path": op.path,
                "summary": t.title,
                "toolset": t.toolset,
                "listed": server.lists(narrowing, t),
            })
        })
        .collect();
    let hint = if results.is_empty() {
        "No operation matches; try other words (an operationId, a path segment such as 'releases')."
    } else {
        "Run one with gitea_call_operation {operation_id, arguments}, or directly when listed is true; its arguments are in gitea_get_operation_schema."
    };
    json!({"results": results, "hint": hint})
}

/// An operation's schemas: its arguments, and when asked (`output`) the envelope of its
/// result with `data` typed as it comes in that shape (3 to 17 KB, which an agent that only
/// wants the arguments should not pay for).
fn schema(server: &Server, narrowing: &Narrowing, t: &ToolDef, output: Option<Shape>) -> Value {
    let op = t.operation().expect("an operation");
    let a = &t.annotations;
    let mut answer = json!({
        "operation_id": t.name,
        "method": op.method.as_str(),
        "path": op.path,
        "toolset": t.toolset,
        "listed": server.lists(narrowing, t),
        "description": t.description,
        "details": t.details,
        "annotations": {"readOnlyHint": a.read_only, "destructiveHint": a.destructive, "idempotentHint": a.idempotent},
        "input_schema": Value::Object((**t.input_schema()).clone()),
    });
    if let Some(shape) = output {
        let out = data_schema(&server.catalog, op, shape);
        answer["output_shape"] = shape.as_str().into();
        answer["output_schema"] = envelope::schema::exact(out.data, out.defs);
    }
    answer
}
