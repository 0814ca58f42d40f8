//! Catalog → rmcp `Tool` definitions, filtered per request.

use rmcp::model::{Tool, ToolAnnotations};

use crate::catalog::{Catalog, Target, ToolDef};
use crate::policy::{Narrowing, Policy};

/// One tool definition as clients see it: the lean schema, the title once (not again in
/// the annotations), and only the hints that mean something — `readOnlyHint` always (a
/// missing one reads as "may write"), destructive/idempotent only for tools that write,
/// since the protocol ignores them on read-only tools.
pub fn to_rmcp(t: &ToolDef) -> Tool {
    let a = &t.annotations;
    let annotations = if a.read_only {
        ToolAnnotations::from_raw(None, Some(true), None, None, None)
    } else {
        ToolAnnotations::from_raw(None, Some(false), Some(a.destructive), Some(a.idempotent), None)
    };
    let mut tool = Tool::new(t.name.clone(), t.description.clone(), t.listed_schema().clone())
        .with_annotations(annotations);
    tool.title = Some(t.title.clone());
    tool
}

/// The tools `tools/list` shows to a request narrowed so, built-in tools first (a client that
/// truncates a long list keeps the way to the rest), then the operations in spec order. When
/// the call is read-only (the server's `READ_ONLY` or the request's `X-MCP-Readonly`), the raw
/// tool and `gitea_call_operation` can only read, and say so: clients may then run them unasked.
pub fn listed(catalog: &Catalog, policy: &Policy, narrowing: &Narrowing) -> Vec<Tool> {
    let read_only = policy.read_only || narrowing.read_only;
    let builtins = catalog.all_tools().filter(|t| t.operation().is_none());
    let operations = catalog.all_tools().filter(|t| t.operation().is_some());
    builtins
        .chain(operations)
        .filter(|t| policy.lists(narrowing, catalog, t))
        .map(|t| match t.target {
            Target::Raw | Target::CallOperation if read_only => {
                to_rmcp(t).with_annotations(ToolAnnotations::from_raw(None, Some(true), None, None, None))
            }
            _ => to_rmcp(t),
        })
        .collect()
}

/// What the `tools` command prints: the `tools` array of `tools/list` as pretty JSON, or one
/// line per tool with its name and the first line of its description. Needs only the catalog
/// and the policy, no server: with an explicit flavor it runs without a URL or a token.
pub fn printout(catalog: &Catalog, policy: &Policy, json: bool) -> String {
    let tools = listed(catalog, policy, &Narrowing::default());
    if json {
        return format!("{}\n", serde_json::to_string_pretty(&tools).expect("tools serialize"));
    }
    tools
        .iter()
        .map(|t| {
            let first = t.description.as_deref().unwrap_or("").lines().next().unwrap_or("");
            format!("{:<45} {first}\n", t.name)
        })
        .collect()
}
