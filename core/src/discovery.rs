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
/// lets the caller find; with several forges, every forge's (`forges`, the call's own among
/// them), so that search finds what any of them has and says where.
#[derive(Debug, Clone, Copy)]
pub struct Discovery<'c, 'n> {
    pub catalog: &'c Catalog,
    pub policy: &'c Policy,
    pub narrowing: &'n Narrowing,
    /// Every forge of a server that serves several; empty with one.
    pub forges: &'n [Forge<'n>],
}

/// A forge of a server that serves several, as the discovery tools see it.
#[derive(Debug, Clone, Copy)]
pub struct Forge<'a> {
    pub name: &'a str,
    pub catalog: &'a Catalog,
    pub policy: &'a Policy,
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
        let hits = self.hits(query, limit as usize);
        let results: Vec<Value> = hits
            .into_iter()
            .map(|t| {
                let op = t.operation().expect("search finds operations");
                let mut hit = json!({
                    "operation_id": t.name,
                    "method": op.method.as_str(),
                    "path": op.path,
                    "summary": t.title,
                    "toolset": t.toolset,
                    "listed": self.lists(t),
                });
                if !self.forges.is_empty() {
                    hit["forges"] = self.where_allowed(&t.name).into();
                }
                hit
            })
            .collect();
        let hint = if results.is_empty() {
            "No operation matches; try other words (an operationId, a path segment such as 'releases')."
        } else {
            "Run one with gitea_call_operation {operation_id, arguments}, or directly when listed is true; its arguments are in gitea_get_operation_schema."
        };
        json!({"results": results, "hint": hint})
    }

    /// The operations `query` finds, at most `limit`: in this catalog, and with several forges
    /// in every flavor's (each searched alone, its scores its own; the best of each taken in
    /// turn), each once.
    fn hits(&self, query: &str, limit: usize) -> Vec<&Arc<ToolDef>> {
        let own = self.catalog.search(query, limit, |t| self.refusal(t).is_none());
        if self.forges.is_empty() {
            return own;
        }
        let mut lists: Vec<Vec<&Arc<ToolDef>>> = vec![own];
        let mut searched = vec![self.catalog.flavor];
        for f in self.forges {
            if searched.contains(&f.catalog.flavor) {
                continue;
            }
            searched.push(f.catalog.flavor);
            let allowed = |t: &ToolDef| f.policy.refusal(self.narrowing, t).is_none();
            lists.push(f.catalog.search(query, limit, allowed));
        }
        let mut out: Vec<&Arc<ToolDef>> = Vec::with_capacity(limit);
        for rank in 0..limit {
            for list in &lists {
                if let Some(t) = list.get(rank) {
                    if out.len() < limit && !out.iter().any(|o| o.name == t.name) {
                        out.push(t);
                    }
                }
            }
        }
        out
    }

    /// The forges that have operation `id` and allow it to this request.
    fn where_allowed(&self, id: &str) -> Vec<&str> {
        self.forges
            .iter()
            .filter(|f| f.catalog.get(id).is_some_and(|t| f.policy.refusal(self.narrowing, t).is_none()))
            .map(|f| f.name)
            .collect()
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
        if !self.forges.is_empty() {
            answer["forges"] = self.where_allowed(&t.name).into();
        }
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
