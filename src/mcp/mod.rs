//! The MCP layer: the only place (with `transport/`) that knows rmcp's types. It turns
//! catalog entries into rmcp `Tool`s and `tools/call` requests into `call::run`.

pub(crate) mod asked;
pub(crate) mod handler;
pub(crate) mod marks;
pub(crate) mod person;
pub mod reply;
pub mod tool_list;

pub use handler::McpHandler;
pub(crate) use marks::{Deadline, Oversized};
