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
