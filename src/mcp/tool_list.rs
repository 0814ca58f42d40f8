//! Catalog → rmcp `Tool` definitions, built once per server.

use rmcp::model::{Tool, ToolAnnotations};

use crate::catalog::ToolDef;
use crate::server::Server;

/// One tool definition as clients see it.
pub fn to_rmcp(t: &ToolDef) -> Tool {
    let a = &t.annotations;
    let annotations = ToolAnnotations::from_raw(
        Some(t.title.clone()),
        Some(a.read_only),
        Some(a.destructive),
        Some(a.idempotent),
        None,
    );
    let mut tool = Tool::new(t.name.clone(), t.description.clone(), t.input_schema.clone())
        .with_annotations(annotations);
    tool.title = Some(t.title.clone());
    tool
}

/// Every tool the server offers under its settings, in catalog order.
pub fn offered(server: &Server) -> Vec<Tool> {
    server.catalog.all_tools().filter(|t| server.enabled(t)).map(|t| to_rmcp(t)).collect()
}
