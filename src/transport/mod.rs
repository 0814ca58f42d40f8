//! MCP transports: stdio for one person; Streamable HTTP and legacy SSE for many, each
//! request under its caller's identity (`layers.rs`).

pub mod http;
pub mod jsonrpc;
pub mod layers;
pub mod listener;
pub mod metrics;
pub mod oauth;
pub(crate) mod plain_json;
pub mod ready;
pub mod sessions;
pub mod sse;
pub mod stdio;
