//! What the discovery tools answer (their definitions are in `catalog/discovery_tools.rs`).
//!
//! Search and schema answers come from the catalog and the policy alone — no forge request,
//! no identity — as a plain JSON object holding nothing the client sent; the call's guard
//! then redacts and bounds it like any result. A call names another operation, which the
//! server then runs through the whole pipeline, so nothing here sends anything.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::catalog::{Catalog, Target, ToolDef, discovery_tools};
use crate::envelope;
use crate::error::{CallError, ErrorKind};
use crate::policy::{Narrowing, Policy, Refusal};
use crate::shape::Shape;
use crate::shape::schema::data_schema;

/// What the discovery tools see: the catalog, and what the policy, narrowed by the request,
/// lets the caller find.
#[derive(Debug, Clone, Copy)]
pub struct Discovery<'c, 'n> {
    pub catalog: &'c Catalog,
    pub policy: &'c Policy,
    pub narrowing: &'n Narrowing,
}

impl<'c> Discovery<'c, '_> {
    /// Why the policy refuses `tool` to this request, if it does (before arguments).
    fn refusal(&self, tool: &ToolDef) -> Option<Refusal> {
        self.policy.refusal(self.narrowing, tool)
    }

    /// Whether `tools/list` shows `tool` to this request.
    fn lists(&self, tool: &ToolDef) -> bool {
        self.policy.lists(self.narrowing, tool)
    }

    /// The answer of the search or schema tool.
    pub(crate) fn answer(&self, tool: &ToolDef, args: &Map<String, Value>) -> Result<Value, CallError> {
        let value = match tool.target {
            Target::SearchOperations => self.search(args),
            Target::OperationSchema => {
                let target = self.target(args)?;
                if let Some(refusal) = self.refusal(target) {
                    return Err(refusal.into());
                }
                let output = args.get("output").and_then(Value::as_str).and_then(Shape::parse);
                self.schema(target, output)
            }
            _ => unreachable!("only the search and schema tools are answered here"),
        };
        Ok(value)
    }

    /// The operation named by `operation_id` (for `gitea_call_operation`, `args` without its
    /// `arguments`, which the caller has taken out to run the operation with); an unknown name
    /// suggests the nearest allowed ones. The name is quoted as given, unescaped, so that the
    /// guard's redaction still sees any secret in it.
    pub(crate) fn target(&self, args: &Map<String, Value>) -> Result<&'c Arc<ToolDef>, CallError> {
        let id = args.get("operation_id").and_then(Value::as_str).unwrap_or("");
        match self.catalog.get(id) {
            Some(t) if t.operation().is_some() => Ok(t),
            _ => {
                let allowed = |t: &ToolDef| self.refusal(t).is_none();
                let near: Vec<&str> =
                    self.catalog.search(id, 3, allowed).into_iter().map(|t| t.name.as_str()).collect();
                let hint = if near.is_empty() {
                    String::new()
                } else {
                    format!(" Did you mean: {}?", near.join(", "))
                };
                Err(CallError::local(
                    ErrorKind::InvalidArguments,
                    format!(
                        "\"{id}\" is not an operation of this {} API.{hint} Find operations with {}.",
                        self.catalog.flavor.display_name(),
                        discovery_tools::SEARCH
                    ),
                ))
            }
        }
    }

    fn search(&self, args: &Map<String, Value>) -> Value {
        let query = args.get("query").and_then(Value::as_str).unwrap_or("");
        // `2.0` is an integer to JSON Schema: take it as 2.
        let limit = args
            .get("limit")
            .and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)))
            .unwrap_or(8)
            .clamp(1, discovery_tools::MAX_RESULTS);
        // Operations the policy refuses are not found: read-only hides every write.
        let hits = self.catalog.search(query, limit as usize, |t| self.refusal(t).is_none());
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
                    "listed": self.lists(t),
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
    fn schema(&self, t: &ToolDef, output: Option<Shape>) -> Value {
        let op = t.operation().expect("an operation");
        let a = &t.annotations;
        let mut answer = json!({
            "operation_id": t.name,
            "method": op.method.as_str(),
            "path": op.path,
            "toolset": t.toolset,
            "listed": self.lists(t),
            "description": t.description,
            "details": t.details,
            "annotations": {"readOnlyHint": a.read_only, "destructiveHint": a.destructive, "idempotentHint": a.idempotent},
            "input_schema": Value::Object((**t.input_schema()).clone()),
        });
        // Whether a call asks the person first (CONFIRM_IRREVERSIBLE), and for a delete that
        // does not, why it loses nothing.
        if self.policy.confirm != crate::policy::confirm::Mode::Off {
            if let Some(c) = crate::policy::confirm::described(op) {
                answer["confirmation"] = c;
            }
        }
        if let Some(shape) = output {
            let out = data_schema(self.catalog, op, shape);
            answer["output_shape"] = shape.as_str().into();
            answer["output_schema"] = envelope::schema::exact(out.data, out.defs);
        }
        answer
    }
}
