//! MCP transports: stdio for one person; Streamable HTTP and legacy SSE for many, each
//! request under its caller's identity (`layers.rs`).

pub(crate) mod answers;
pub(crate) mod direct;
pub mod http;
pub(crate) mod jsonrpc;
pub(crate) mod layers;
pub mod listener;
pub mod metrics;
pub(crate) mod oauth;
pub(crate) mod plain_json;
pub mod ready;
pub(crate) mod sessions;
pub(crate) mod sse;
pub mod stdio;

/// A server for the transports' unit tests, as `serve` builds it, in front of the forge at
/// `url` (a fake one), without a token of its own and whatever the shell's environment says.
#[cfg(test)]
pub(crate) async fn test_server(url: &str) -> std::sync::Arc<crate::server::Server> {
    let settings = crate::config::test_settings(&["--url", url, "--flavor", "gitea"]);
    std::sync::Arc::new(crate::server::Server::start(settings).await.expect("the server starts"))
}
