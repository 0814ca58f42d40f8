//! aegis-gitea-mcp: the whole REST API of a Gitea or Forgejo instance as MCP tools.
//!
//! The library holds the pipeline of one call; `main.rs` is a thin command dispatcher.
//! Read `call.rs` first: it calls every stage below in order, top to bottom.

pub mod args;
pub mod audit;
pub mod call;
pub mod catalog;
pub mod config;
pub mod decode;
pub mod discovery;
pub mod doctor;
pub mod envelope;
pub mod error;
pub mod executor;
/// The fuzz targets' bodies (`fuzz/`), also replayed over the committed corpus by a unit test.
#[doc(hidden)]
pub mod fuzzing;
pub mod guard;
pub mod identity;
pub(crate) mod limits;
pub mod mcp;
pub(crate) mod metrics;
pub mod oauth;
pub mod policy;
pub mod resources;
pub mod server;
pub mod shape;
#[cfg(test)]
mod tidy;
pub mod transport;
