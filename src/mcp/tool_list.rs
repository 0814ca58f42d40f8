//! Catalog → rmcp `Tool` definitions, built once per server and filtered per request.

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};

use crate::catalog::ToolDef;
use crate::policy::Narrowing;
use crate::server::Server;

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
    let mut tool = Tool::new(t.name.clone(), t.description.clone(), t.listed_schema.clone())
        .with_annotations(annotations);
    tool.title = Some(t.title.clone());
    tool
}

/// Every tool of the catalog with its definition, in catalog order (discovery first).
pub fn definitions(server: &Server) -> Vec<(Arc<ToolDef>, Tool)> {
    let mut all: Vec<(Arc<ToolDef>, Tool)> =
        server.catalog.all_tools().map(|t| (t.clone(), to_rmcp(t))).collect();
    // Built-in tools first: a client that truncates a long list keeps the way to the rest.
    all.sort_by_key(|(t, _)| t.operation().is_some());
    all
}

/// The tools `tools/list` shows to a request narrowed so.
pub fn listed(server: &Server, all: &[(Arc<ToolDef>, Tool)], narrowing: &Narrowing) -> Vec<Tool> {
    all.iter().filter(|(t, _)| server.lists(narrowing, t)).map(|(_, tool)| tool.clone()).collect()
}
