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

/// A server for the transports' unit tests, as `serve` builds it from `flags`, in front of the
/// forge at `url` (a fake one) and without a token of its own.
#[cfg(test)]
pub(crate) async fn test_server(url: &str, flags: &[&str]) -> std::sync::Arc<crate::server::Server> {
    let mut args = vec!["aegis-gitea-mcp", "--url", url, "--flavor", "gitea"];
    args.extend_from_slice(flags);
    let cli = <crate::config::Cli as clap::Parser>::try_parse_from(args).expect("flags the server takes");
    let settings = crate::config::Settings::resolve(cli.common, &|_| None).expect("settings");
    std::sync::Arc::new(crate::server::Server::start(settings).await.expect("the server starts"))
}
