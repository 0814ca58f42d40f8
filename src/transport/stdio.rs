//! JSON-RPC over stdin/stdout. Every call runs as the global identity; logs go to stderr.

use rmcp::ServiceExt;

use crate::mcp::McpHandler;

/// Serve until the client closes stdin.
pub async fn serve(handler: McpHandler) -> anyhow::Result<()> {
    let running = handler.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
