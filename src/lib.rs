//! aegis-gitea-mcp: the whole REST API of a Gitea or Forgejo instance as MCP tools.
//!
//! The pipeline's stages are the `aegis-core` crate; this library composes them with the
//! running server (identity, the forge client, sign-in, audit, limits, metrics, the MCP glue
//! and the transports), and `main.rs` is a thin command dispatcher. Read `call.rs` first: it
//! calls every stage in order, top to bottom.

pub mod audit;
pub mod call;
pub mod config;
pub mod confirm;
pub mod doctor;
pub mod executor;
pub(crate) mod flow;
pub mod forges;
/// The entry points of the fuzz targets' bodies (`fuzz-bodies/`) into this crate's parsers;
/// only with the `fuzzing` feature, which that crate turns on (so in this crate's test builds,
/// never in `cargo build` or the release build).
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod identify;
pub mod identity;
pub(crate) mod limits;
pub mod log;
pub mod mcp;
pub(crate) mod metrics;
pub mod oauth;
pub(crate) mod reads;
pub mod resources;
pub mod server;
pub(crate) mod state;
#[cfg(test)]
mod tidy;
pub mod transport;
pub(crate) mod trust;
